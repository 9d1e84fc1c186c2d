"""Provenance orders the proposals within a step (issue 19 item 3): the suspicious edits first.

Repair tries a step's proposals most minimal first; on a step that says several numbers and words, the edit that
fixes the value that actually went wrong is often far down that list (a ±1 of every other number comes first).
Value provenance (:mod:`causaltrace.attribution.stages.provenance`) already says which of a step's values are
suspicious: the values it CHANGED relative to its sources (a restatement that changed its source's value, a copy a
digit away from the task's, a unit or qualifier substituted, a handoff target another agent fits better — the
``Change`` list) and the values it INTRODUCED that reach the failing answer. A proposal is ranked by what it edits
(the values of the original that the replacement no longer holds, and what it puts in their place):

0. it edits a changed value back to what the source had (``22`` -> ``21`` after ``price: 21``);
1. it edits a changed value (to anything else);
2. it edits a value the step introduced that a step reaching the answer uses (or the answer itself holds);
3. everything else.

The sort is stable: within a rank the minimality order (and the generation order within equal minimality) stays,
so a step provenance says nothing about keeps its old order exactly. Deterministic, no model; the values of a
proposal are read with the same :func:`~causaltrace.attribution.stages.values.values_in` provenance uses. This
does not change WHICH steps flip (every proposal of a step is still tried until one flips), so the decisive step
(the earliest flipping step, CRS) is unchanged; it changes how soon a step's flip is found, and which flipping
proposal is reported: the most minimal one among the most suspicious rank that flips.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from causaltrace.attribution.stages.provenance import Provenance
from causaltrace.attribution.stages.values import values_in
from causaltrace.schema import Intervention, Step

__all__ = ["StepSuspicion", "SuspicionIndex", "rank_of", "suspicious_first"]

#: the ranks (module docstring)
RESTORES, CHANGED, REACHING, OTHER = 0, 1, 2, 3


@dataclass(frozen=True)
class StepSuspicion:
    """What provenance finds suspicious in one step: value keys (lower case, ``values_in``'s normalised keys)."""

    #: values the step changed relative to its sources (``Change.after``)
    changed: frozenset[str] = frozenset()
    #: what those sources had (``Change.before``): the value a restoring edit puts back
    before: frozenset[str] = frozenset()
    #: values the step introduced that a step reaching the failing answer uses
    reaching: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.changed or self.reaching)


class SuspicionIndex:
    """Each step's :class:`StepSuspicion` from one :class:`Provenance` (built once per repair: one pass over the
    values every step took from another)."""

    def __init__(self, prov: Provenance) -> None:
        self.prov = prov
        used: dict[int, set[str]] = {}
        for j, origins in prov.origins.items():
            if prov.reach.get(j, 0.0) > 0:
                for key, i in origins.items():
                    if i != j:
                        used.setdefault(i, set()).add(key)
        for j, derived in prov.derived.items():  # a number computed from the step's numbers reaches through them
            if prov.reach.get(j, 0.0) > 0:
                for operands in derived.values():
                    for i in operands:
                        if i != j:
                            used.setdefault(i, set()).add("*")
        self._used = used

    def of(self, step: Step) -> StepSuspicion:
        """The step's suspicion (empty when provenance does not know the step)."""
        i = self.prov.index(step.step_id)
        if i is None:
            return StepSuspicion()
        changes = self.prov.changes_of(i)
        introduced = self.prov.introduced.get(i, [])
        used = self._used.get(i, set())
        if i == self.prov.anchor or "*" in used:  # the answer itself, or operands of a reaching computation
            reaching = {v.key.lower() for v in introduced}
        else:
            reaching = {v.key.lower() for v in introduced if f"{v.kind}:{v.key}" in used}
        return StepSuspicion(changed=frozenset(c.after.lower() for c in changes if c.after),
                             before=frozenset(c.before.lower() for c in changes if c.before),
                             reaching=frozenset(reaching))


def _keys(value: Any, kind: str) -> Counter[str]:
    """The value keys of a replacement of ``kind`` (``edits.replacement_kind``), counted."""
    if kind == "target":
        return Counter([str(value).lower()]) if value else Counter()
    if kind == "arguments" and isinstance(value, dict):
        text = " ".join(v for v in value.values() if isinstance(v, str))
        found = values_in(text, arguments=value)
    elif kind == "code" and isinstance(value, str):
        found = values_in(value, code=value)
    else:
        found = values_in(value if isinstance(value, str) else str(value))
    return Counter(v.key.lower() for v in found)


def _hits(keys: Counter[str] | set[str], wanted: frozenset[str]) -> bool:
    """A key of ``keys`` is one of ``wanted`` or ends with one (an operator change names ``/ 2``; the value is
    ``mean of 3 / 2``)."""
    return any(k in wanted or any(k.endswith(" " + w) for w in wanted) for k in keys)


def rank_of(original_keys: Counter[str], replacement: Any, kind: str, suspicion: StepSuspicion) -> int:
    """The rank of one proposal (module docstring); ``original_keys`` = :func:`_keys` of the step's original."""
    new = _keys(replacement, kind)
    removed = original_keys - new
    if not removed:
        return OTHER
    if _hits(removed, suspicion.changed):
        return RESTORES if _hits(new - original_keys, suspicion.before) else CHANGED
    return REACHING if _hits(removed, suspicion.reaching) else OTHER


def suspicious_first(proposals: Sequence[Intervention], original: Any, kind: str, suspicion: StepSuspicion
                     ) -> list[Intervention]:
    """``proposals`` (already in minimality order) stably sorted by rank: the suspicious edits first, ties in the
    given order."""
    if not suspicion or len(proposals) < 2:
        return list(proposals)
    base = _keys(original, kind)
    ranks = [rank_of(base, p.replacement, kind, suspicion) for p in proposals]
    return [p for _, _, p in sorted(zip(ranks, range(len(ranks)), proposals, strict=True), key=lambda t: t[:2])]
