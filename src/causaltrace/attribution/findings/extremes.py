"""Family ``value_changed`` (an entity mismatch): a step acts on an entry of a listing that is not the extreme the
request asks for.

The request asks for the extreme of something ("book the cheapest hotel", "the shortest route", "the highest
score"); a tool answers with a listing of labelled entries, one figure each (``Hotel Alfama 140 EUR; Hotel Baixa 95
EUR; Hotel Chiado 120 EUR``); the first step that acts on the listing takes an entry — its name or its figure —
whose figure is not that extreme, while exactly one other entry's is. The value is faithfully copied, so no
comparison of values sees it; its source is the wrong entry. The finding's evidence is the extreme entry's name or
figure (``source``), the value the step used (``changed``) and the request's word (``request``), so repair's
correction puts the right entry back.

Motivated by the tuning-half case smol-cheapest-hotel (written this session with the rule; no Who&When dev trace
fires it). The rule, from kinds and values only:

* the request holds words of ONE direction: ``cheapest``, ``lowest``, ``smallest``, ``shortest``, ``fewest``,
  ``minimum``, ``least expensive`` or ``highest``, ``largest``, ``biggest``, ``longest``, ``greatest``,
  ``maximum``, ``most expensive``, ``priciest`` — not a bound ("a maximum of 5 items");
* the observation (a tool result or code output) splits into at least two entries with labels and EXACTLY one
  figure each (:func:`~.entries.entries_of`): a listing whose figure is the criterion, no table of several columns;
* the step (not a result, not the model reply that produced a call, not the final answer) is the first to take a
  value of that observation (provenance's origin); exactly one entry holds the value, its figure is not the extreme,
  and exactly one entry's is; the step uses nothing of the extreme entry, and the request names neither entry.
"""

from __future__ import annotations

import re

from causaltrace.attribution.findings._common import TASK_INDEX, evidence, finding
from causaltrace.attribution.findings.entries import entries_of
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import content_of
from causaltrace.schema import Finding, Run

__all__ = ["detect_wrong_picks", "requested_extreme"]

_NOT_BOUND = r"(?!\s+of\s+\$?\d)"
_LOWEST = re.compile(r"\b(cheapest|lowest|smallest|shortest|fewest|minimum|least expensive)\b" + _NOT_BOUND,
                     re.IGNORECASE)
_HIGHEST = re.compile(r"\b(highest|largest|biggest|longest|greatest|maximum|most expensive|priciest)\b" + _NOT_BOUND,
                      re.IGNORECASE)
_RESULT_KINDS = ("tool_response", "code_execution")
#: steps that never pick: results, a model reply that produced its calls (the call is blamed), the task, the answer
_SKIPPED = (*_RESULT_KINDS, "llm_response", "task", "final_answer")


def requested_extreme(request: str) -> tuple[str, str] | None:
    """``("min" | "max", word)``: the one direction of extreme the request asks for; None for none or both."""
    low, high = _LOWEST.search(request), _HIGHEST.search(request)
    if bool(low) == bool(high):
        return None
    found = low or high
    assert found is not None
    return ("min" if low else "max"), found.group(1).lower()


def _figure(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _as_written(text: str, token: str) -> str:
    """``token`` (a lower-cased label) as ``text`` writes it ("baixa" → "Baixa")."""
    found = re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text, re.IGNORECASE)
    return found.group(0) if found else token


def detect_wrong_picks(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per listing whose first use takes an entry other than the requested extreme (module
    docstring)."""
    task = run.task or next((s.content for s in run.steps if s.kind == "task"), "")
    request = task or ""  # the whole task: "Book the cheapest hotel… Report 'BOOKED: …'" asks in its first sentence
    extreme = requested_extreme(request)
    if extreme is None:
        return []
    direction, word = extreme
    asked = frozenset(salient_tokens(request))
    by_index = {s.index: s for s in run.steps}
    seen: set[int] = set()  # listings whose first use was judged
    out: list[Finding] = []
    for i in sorted(prov.origins):
        step = by_index.get(i)
        if step is None or step.kind in _SKIPPED:
            continue
        origins = prov.origins[i]
        for key, j in origins.items():
            source = by_index.get(j)
            kind, _, value = key.partition(":")
            if j in seen or source is None or source.kind not in _RESULT_KINDS or kind not in ("number", "entity"):
                continue
            seen.add(j)
            text = content_of(source)
            entries = entries_of(text)
            if len(entries) < 2 or any(len(numbers) != 1 for _, numbers in entries):
                continue
            holding = [e for e in entries if (value in e[0] if kind == "entity" else value in e[1])]
            figures = [_figure(numbers[0]) for _, numbers in entries]
            if len(holding) != 1 or None in figures:
                continue
            best = (min if direction == "min" else max)(f for f in figures if f is not None)
            at_best = [e for e, f in zip(entries, figures, strict=True) if f == best]
            picked = holding[0]
            if len(at_best) != 1 or at_best[0] is picked or (picked[0] | at_best[0][0]) & asked:
                continue
            right_labels, right_numbers = at_best[0]
            used_keys = {k.partition(":")[2] for k in origins}
            if right_labels & used_keys or right_numbers[0] in used_keys:
                continue  # the step weighs the extreme entry too (a comparison, not a pick)
            if kind == "entity":
                right_label = min(right_labels, key=lambda t: text.lower().find(t) % (len(text) + 1))
                right, used = _as_written(text, right_label), _as_written(text, value)
            else:
                right, used = right_numbers[0], value
            items = [evidence(run, j, "source", right), evidence(run, i, "changed", used),
                     evidence(run, TASK_INDEX, "request", word)]
            out.append(finding(run, "value_changed", i,
                               f"step {i} acts on {used} ({picked[1][0]}) from the listing of step {j} while the "
                               f"request asks for the {word}: {right} has {right_numbers[0]} (a pick that is not "
                               "the extreme asked for)", items))
    return out
