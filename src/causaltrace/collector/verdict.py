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

__all__ = ["UNCERTAIN_BELOW", "VERDICT_LEVELS", "is_uncertain", "verdict_level", "verdict_of"]

#: what each level is called on the surfaces
VERDICT_LEVELS = {1: "replay-verified correction", 2: "replay-verified tool / data fault", 3: "finding",
                  4: "replay-verified alternative", 5: "uncertain", 6: "failed"}
#: below this confidence a heuristic answer is reported as uncertain (Who&When dev's lowest confidence quartile at
#: issue 20's fit; ``attribution.stages.confidence`` re-exports it — the rule lives here so that every surface, the
#: collector's included, applies the same one)
UNCERTAIN_BELOW = 0.41


def is_uncertain(diagnosis: Diagnosis) -> bool:
    """Whether a diagnosis is *uncertain* — what every surface shows as "uncertain" with the top 3 instead of
    "decisive error": no decisive step, no finding at it (``basis == "none"``), a flip by an alternative only, or a
    heuristic confidence below :data:`UNCERTAIN_BELOW`. A replay-verified correction (or tool / data fault) is never
    uncertain."""
    if diagnosis.failed or diagnosis.decisive_step_index is None:
        return True
    if diagnosis.basis in ("none", "alternative"):  # nothing shows the step was wrong
        return True
    if diagnosis.verified_by == "replay":
        return False
    conf = diagnosis.confidence
    return conf is not None and conf < UNCERTAIN_BELOW and diagnosis.verified_by == "heuristic"


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
        confident = d.confidence is None or d.confidence >= UNCERTAIN_BELOW
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
