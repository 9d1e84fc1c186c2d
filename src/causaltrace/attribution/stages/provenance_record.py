"""The record value provenance builds (:mod:`.provenance`): a :class:`Change` (a value a step changed relative to
its source) and :class:`Provenance` (origins, derivations, reach, changes and carriers of one run), with the queries
attribution and repair ask of it.

Split from :mod:`.provenance` so the data model is read apart from the rules that fill it: the walk
(:mod:`.provenance_walk`), the comparisons (:mod:`.provenance_changes`), reach (:mod:`.provenance_reach`) and the
whole-run passes (:mod:`.provenance_passes`) all write into one :class:`Provenance`; the stages that read it
(``graph``'s ranking, the evidence, repair's ordering) need only this module's names.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from causaltrace.attribution.stages.values import Value

__all__ = ["TASK", "Change", "Provenance", "value_key"]

#: the source index of what the task gave (no step holds it)
TASK = -1


def value_key(v: Value) -> str:
    """The ``"kind:key"`` a value is traced by (``Provenance.origins``, ``Provenance.origin``)."""
    return f"{v.kind}:{v.key}"


@dataclass(frozen=True)
class Change:
    """Step ``index`` states ``after`` where its source (step ``source``; ``-1`` the task) had ``before``."""

    index: int
    source: int
    kind: str
    before: str
    after: str
    how: str  # "restatement" | "substitution" | "copy" | "unsupported" | "ignored" | "unverified" | "unfounded" | "omitted" | "unfit"
    #: what the comparison rests on beyond the two values ("unfit": the request's words the alternative covers)
    detail: str = ""

    def describe(self) -> str:
        where = "the task" if self.source == TASK else f"step {self.source}"
        if self.how == "unverified":
            return (f"approves a result that never used the {self.kind} {self.before!r} the task gave (an incorrect "
                    "verification)")
        if self.how == "unsupported":
            return f"passes the number {self.after!r}, which no source gave and no arithmetic derives (unsupported" + (
                f"; the task's {self.before!r} is used by no step)" if self.before else ")")
        if self.how == "unfounded":
            return (f"selects {self.after!r}, whose reply states the failing {self.before!r} from nothing it was given "
                    "(no source, no tool, no arithmetic): the choice of speaker decided the answer")
        if self.how == "unfit":
            return (f"routes to {self.after!r}, whose description and tools share no word with what {where} asks, "
                    f"while {self.before!r}'s cover it ({self.detail}): a routing choice that does not fit the request")
        if self.how == "omitted":
            return (f"states the answer {self.after!r} before any step used the task's {self.before!r} (the answer "
                    "leaves out an item the task named: a premature answer)")
        if self.how == "ignored":
            return (f"uses the value {self.after!r} labelled as what {where} excluded ({self.before!r}: an ignored "
                    "instruction)")
        verb = {"restatement": "restates", "substitution": "uses", "copy": "copies"}[self.how]
        return f"{verb} {self.kind} {self.after!r} where {where} had {self.before!r} ({self.how} changes a value)"

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "source": self.source, "kind": self.kind, "before": self.before,
               "after": self.after, "how": self.how}
        return {**out, "detail": self.detail} if self.detail else out


@dataclass
class Provenance:
    """Where each value came from, what reaches the failure, what was changed (:mod:`.provenance`'s docstring)."""

    anchor: int
    step_ids: dict[int, str]
    position: dict[int, int]
    introduced: dict[int, list[Value]] = field(default_factory=dict)
    origins: dict[int, dict[str, int]] = field(default_factory=dict)
    derived: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    reach: dict[int, float] = field(default_factory=dict)
    via: dict[int, int] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    carriers: dict[int, list[Change]] = field(default_factory=dict)
    addressed_by: dict[int, int] = field(default_factory=dict)
    #: the answer's content lineage: the steps reached by values, requests and instructions only (no observation)
    lineage: set[int] = field(default_factory=set)

    @property
    def _index_of(self) -> dict[str, int]:
        return {sid: i for i, sid in self.step_ids.items()}

    def index(self, step: str | int) -> int | None:
        """A step's index from its id (or the index itself)."""
        return step if isinstance(step, int) else self._index_of.get(step)

    def reaches(self, step: str | int) -> float:
        """How strongly what the step decided reaches the failing answer (0 = never)."""
        i = self.index(step)
        return self.reach.get(i, 0.0) if i is not None else 0.0

    def changes_of(self, step: str | int) -> list[Change]:
        """The values the step changed relative to its sources (indexed once per state of ``changes``: a
        10,000-step run asks for every step)."""
        i = self.index(step)
        cached = self.__dict__.get("_changes_by_step")
        if cached is None or cached[0] != len(self.changes):
            by_step: dict[int, list[Change]] = defaultdict(list)
            for c in self.changes:
                by_step[c.index].append(c)
            cached = (len(self.changes), by_step)
            self.__dict__["_changes_by_step"] = cached
        return list(cached[1].get(i, [])) if i is not None else []

    def origin(self, step: str | int, value: str) -> str | None:
        """The id of the step that first introduced ``value`` (``"kind:key"``) that ``step`` used (None: the step
        introduced it, or the task gave it, or the step does not hold it)."""
        i = self.index(step)
        j = self.origins.get(i, {}).get(value) if i is not None else None
        return self.step_ids.get(j) if j is not None else None

    def chain(self, step: str | int) -> list[int]:
        """The steps from ``step`` to the anchor along which it reaches (``via``), as indices."""
        i = self.index(step)
        if i is None:
            return []
        out, seen = [i], {i}
        while out[-1] != self.anchor and out[-1] in self.via and self.via[out[-1]] not in seen:
            out.append(self.via[out[-1]])
            seen.add(out[-1])
        return out

    def order_key(self, step: str | int) -> tuple[int, float, int]:
        """Sort key for steps to try (repair) or inspect: reaching steps first, then value-changing ones, then the
        earlier step (availability order)."""
        i = self.index(step)
        if i is None:
            return (2, 0.0, 0)
        changed = 1.0 if any(c.index == i for c in self.changes) else 0.0
        return (0 if self.reach.get(i, 0.0) > 0 else 1, -changed, self.position.get(i, i))

    def to_json(self) -> dict[str, Any]:
        return {
            "anchor": self.anchor,
            "changes": [c.to_json() for c in self.changes],
            "carriers": {str(i): [c.index for c in cs] for i, cs in sorted(self.carriers.items())},
            "reach": {str(i): round(v, 3) for i, v in sorted(self.reach.items()) if v > 0},
            "introduced": {str(i): [v.kind + ":" + v.key for v in vs[:12]]
                           for i, vs in sorted(self.introduced.items()) if vs},
        }
