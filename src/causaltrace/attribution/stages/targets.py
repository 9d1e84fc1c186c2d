"""Target names in provenance (issue 20 item 4): is the agent a routing step chose grounded in what it was told?

A handoff, a speaker selection or a delegation to a managed agent names ONE of several agents. The choice is
compared with the step's sources (the task and what the step observed): when another candidate's name matches the
sources' words better than the chosen one's (``billing_agent`` after a classifier said "billing", where the step
handed off to ``tech_agent``), the choice is a *target substitution* — the routing step changed the target its
sources pointed to. Candidates come from the step's own record (``metadata["candidates"]``: AutoGen's selector and
handoffs), else the run's agents and the agents its code calls (``billing_agent(task=...)``).

Names are compared by their words (``billing_agent`` → ``billing``; generic parts such as agent, assistant,
expert are dropped), so a match is a shared meaningful word, never the suffix every agent has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from causaltrace.attribution.stages.capabilities import Capability, stems
from causaltrace.attribution.stages.tokens import salient_tokens

__all__ = ["called_names", "capable_alternative", "grounded_alternative", "name_words", "names_decide"]

_GENERIC = frozenset({"agent", "agents", "assistant", "team", "bot", "expert", "specialist", "manager", "helper",
                      "proxy", "user", "transfer", "desk", "worker"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


_ACRONYM = re.compile(r"\b[A-Z]{2,3}\b")
#: two-letter function words of names (``transfer_to_…``), never an acronym
_SHORT_FUNCTION = frozenset({"to", "of", "in", "on", "at", "by", "an", "as", "or", "be", "do", "if", "no", "so", "up",
                             "is"})


def name_words(name: str) -> frozenset[str]:
    """The meaningful words of an agent or tool name (``transfer_to_billing_agent`` → ``{billing}``); a two-letter
    part (``eu_agent``, ``hr_agent``) is kept as an acronym, matched only where a source writes it in capitals."""
    parts = re.split(r"[\W_]+", _CAMEL.sub(" ", name))
    return frozenset(p.lower() for p in parts if p.lower() not in _GENERIC and (
        (len(p) >= 3 and salient_tokens(p.lower())) or (len(p) == 2 and p.isalpha() and p.lower() not in _SHORT_FUNCTION)))


def _source_words(text: str) -> set[str]:
    """A source's salient words plus its capitalised acronyms (``EU``, ``US``: never the pronoun "us")."""
    return set(salient_tokens(text)) | {a.lower() for a in _ACRONYM.findall(text)}


def _written(text: str, names: Sequence[str]) -> set[str]:
    """The candidates' identifier names a source writes out (a plan's ``revenue_agent: look up …`` names the
    revenue agent, whose name is one token — issue 32, tuning twin ag-derail-cambridge, where only the plan's other
    agent, ``coordinator``, counted as a word); none when it writes every candidate (a roster decides nothing)."""
    written = {n for n in names if "_" in n and re.search(rf"\b{re.escape(n)}\b", text)}
    if len(written) == len(names) or text.strip() in written:  # a bare name is the choice itself, not its reason
        return set()
    return written


def called_names(code: str, like: str) -> list[str]:
    """The names ``code`` calls that look like ``like`` (the same last ``_``-part: ``billing_agent`` for
    ``tech_agent``)."""
    suffix = like.rsplit("_", 1)[-1] if "_" in like else None
    if suffix is None:
        return []
    return sorted({n for n in _CALL.findall(code) if n != like and n.endswith("_" + suffix)})


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def _score(name: str, words: set[str], written: set[str]) -> int:
    """A candidate's words in a source (singular and plural alike: ``flights_agent`` for "the flight"), plus one
    when the source writes its name out."""
    return len({_singular(w) for w in name_words(name)} & {_singular(w) for w in words}) + (name in written)


def grounded_alternative(chosen: str, candidates: Iterable[str], sources: Sequence[tuple[int, str]]
                         ) -> tuple[str, int] | None:
    """``(alternative, source index)`` when a candidate other than ``chosen`` shares more words with one of the
    ``sources`` (``(index, text)``, most recent first) than ``chosen`` does; None when the choice is grounded, or
    nothing decides."""
    names = list(dict.fromkeys([chosen, *candidates]))
    for index, text in sources:
        words = _source_words(text[:20_000])
        written = _written(text[:20_000], names)

        mine = _score(chosen, words, written)
        best, best_n = None, mine
        for other in candidates:
            n = _score(other, words, written) if other != chosen else -1
            if n > best_n:
                best, best_n = other, n
        if best is not None:
            return best, index
        if mine:
            return None
    return None


def names_decide(candidates: Iterable[str], sources: Sequence[tuple[int, str]]) -> bool:
    """True when some source names some candidate (by its words or its written name): the agents' names then decide
    the route (:func:`grounded_alternative`), not what the agents can do."""
    names = list(dict.fromkeys(candidates))
    for _, text in sources:
        words, written = _source_words(text[:20_000]), _written(text[:20_000], names)
        if any(_score(n, words, written) for n in names):
            return True
    return False


def capable_alternative(chosen: str, candidates: Iterable[str], request: str,
                        capabilities: Mapping[str, Capability]) -> tuple[str, tuple[str, ...]] | None:
    """``(alternative, the request's words it covers)`` when one other candidate fits what ``request`` asks (its
    tools' names and descriptions, :class:`.capabilities.Capability.fit`) clearly better than ``chosen`` does — at
    least a tool name's worth, more than twice the chosen agent's fit, and more than any other candidate; None when
    what the chosen agent can do is unknown (not in the roster; no tool and no description of its own: a planner
    or coordinator), when it fits, or when nothing decides."""
    if not (capabilities.get(chosen) or Capability(frozenset(), frozenset())).known:
        return None
    words = stems(request)
    mine = capabilities[chosen].fit(words)
    scored = sorted(((capabilities[o].fit(words), o) for o in set(candidates) if o != chosen and o in capabilities),
                    reverse=True)
    if not scored:
        return None
    best_fit, best = scored[0]
    if best_fit < 2 or best_fit <= 2 * mine or (len(scored) > 1 and scored[1][0] == best_fit):
        return None
    return best, capabilities[best].covered(words)
