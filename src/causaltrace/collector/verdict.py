"""One verdict per run (issue 32 item 7; ARCHITECTURE "Verdict rules"): which of a run's stored diagnoses every
surface shows.

A run collects diagnoses — `diagnose` with and without a model, `repair`'s replay-verified answer, `watch`'s
background ones. Without one rule, `diagnose` printed #9 while `show` and the report said #6. The order, best first:

1. a replay-verified **correction** (an edit derived from a finding flipped the run);
2. a replay-verified **tool / data fault** (only editing a tool's result flipped it);
3. a **finding-backed** ranking (the decisive step carries a finding) — ``prediction`` (a model's) before
   ``heuristic``;
4. a replay-verified **alternative** (the run succeeds if a step does something else; nothing shows it was wrong);
5. **uncertain** (no finding at the top, or no decisive step);
6. a failed diagnosis.

Newest first within a level. A diagnosis stored before findings existed (``basis`` None) counts as a finding-backed
ranking when its confidence reached the "uncertain" line, an alternative when replay verified it (it may have been
one: the old search did not tell), and uncertain otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from causaltrace.schema import Diagnosis

__all__ = ["VERDICT_LEVELS", "verdict_level", "verdict_of"]

#: what each level is called on the surfaces
VERDICT_LEVELS = {1: "replay-verified correction", 2: "replay-verified tool / data fault", 3: "finding",
                  4: "replay-verified alternative", 5: "uncertain", 6: "failed"}
#: the confidence below which a diagnosis without findings is uncertain (the attribution stage's ``UNCERTAIN_BELOW``;
#: repeated here because the collector may not import attribution)
_UNCERTAIN_BELOW = 0.41


def verdict_level(d: Diagnosis) -> tuple[int, int]:
    """``(level, sublevel)`` of one diagnosis (module docstring); lower is stronger."""
    if d.failed:
        return 6, 0
    if d.decisive_step_index is None:
        return 5, 0
    replayed = d.verified_by == "replay"
    if replayed and d.fault_source == "environment":
        return 2, 0
    basis = d.basis
    if basis is None:  # stored before findings existed
        if replayed:
            return 4, 0
        confident = d.confidence is None or d.confidence >= _UNCERTAIN_BELOW
        basis = "finding" if confident else "none"
    if replayed and basis == "correction":
        return 1, 0
    if basis == "finding":
        return 3, 0 if d.verified_by == "prediction" else 1
    if basis == "alternative":
        return 4, 0
    return 5, 0


def verdict_of(diagnoses: Sequence[Diagnosis]) -> Diagnosis | None:
    """The run's verdict among its ``diagnoses`` (oldest first, as the store returns them); None when empty."""
    if not diagnoses:
        return None
    ranked = sorted(enumerate(diagnoses), key=lambda item: (*verdict_level(item[1]), -item[0]))
    return ranked[0][1]
