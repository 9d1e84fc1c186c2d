"""What each agent can do, as words: the roster a live run stored (``Run.metadata["roster"]``, written by
:mod:`causaltrace.instrumentation.roster`) — each agent's description, its tools' names and their descriptions.

Issue 32 item 1 asks whether a routing choice fits the request: "the chosen agent has no tool or description for what
is asked". :mod:`.targets` compares these words with the request when the agents' names decide nothing (opaque
names such as ``agent_a`` or ``support``). Words every agent of the roster has ("an agent that provides assistance
with ability to use tools", AutoGen's default description) tell agents apart in nothing and are dropped. A run
without a roster (an imported trace, an older store) has no capabilities: the rule is silent there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.schema import Run

__all__ = ["Capability", "capability_words", "stems"]

#: the run-metadata key of the roster (``causaltrace.instrumentation.roster.ROSTER_KEY``; attribution does not
#: import instrumentation)
_ROSTER_KEY = "roster"
#: words are compared by their first letters, so "refund" meets "refundable" and "orders" "order"
_STEM = 6


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):  # a plural: orders, refunds, devices
        word = word[:-1]
    return word[:_STEM]


def stems(text: str) -> frozenset[str]:
    """The salient words of ``text`` (:func:`.tokens.salient_tokens`, numbers left out), cut to their stem (a
    plural's ``s`` dropped, then the first letters)."""
    return frozenset(_stem(w) for w in salient_tokens(text[:20_000]) if not w[0].isdigit())


@dataclass(frozen=True)
class Capability:
    """What one agent can do, as stems: its tools' names (``lookup_refund`` → lookup, refund) and the words of its
    own and its tools' descriptions (less the names' stems)."""

    names: frozenset[str]
    words: frozenset[str]

    @property
    def known(self) -> bool:
        """Whether it says what the agent can do at all (an agent with no tool and the roster's common description
        — a planner, a coordinator — is unknown, never unfit)."""
        return bool(self.names or self.words)

    def fit(self, request: frozenset[str]) -> int:
        """How well it fits a request's stems: 2 per tool-name stem the request has, 1 per description stem."""
        return 2 * len(self.names & request) + len(self.words & request)

    def covered(self, request: frozenset[str]) -> tuple[str, ...]:
        return tuple(sorted((self.names | self.words) & request))


def _capability(entry: object) -> Capability:
    if not isinstance(entry, Mapping):
        return Capability(frozenset(), frozenset())
    tools = [t for t in entry.get("tools") or () if isinstance(t, Mapping)]
    names = stems(" ".join(str(t.get("name") or "").replace("_", " ") for t in tools))
    words = stems(" ".join([str(entry.get("description") or ""), *(str(t.get("description") or "") for t in tools)]))
    return Capability(names, words - names)


def capability_words(run: Run) -> dict[str, Capability]:
    """Per agent of the run's roster, what it can do less what every agent of the roster shares; {} without a
    roster, or with fewer than two agents (nothing to choose between)."""
    roster = (run.metadata or {}).get(_ROSTER_KEY)
    if not isinstance(roster, Mapping) or len(roster) < 2:
        return {}
    caps = {str(name): _capability(entry) for name, entry in roster.items()}
    common_names = frozenset.intersection(*(c.names for c in caps.values()))
    common_words = frozenset.intersection(*(c.words for c in caps.values()))
    return {name: Capability(c.names - common_names, c.words - common_words) for name, c in caps.items()}
