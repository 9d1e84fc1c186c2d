"""Statistics shared by the overhead benchmarks (AutoGen and smolagents): robust per-run figures on a shared machine.

Both benchmarks time single runs, the modes taking turns in rounds. Other processes' load only ever ADDS time, so a
mode's figure is the lower quartile of its runs; how far to trust a ratio shows in its spread over the rounds (the
ratio computed from each round's own lower quartiles), which the benchmarks print next to the overall ratio.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

__all__ = ["lower_quartile", "ratio_spread"]


def lower_quartile(values: Sequence[float]) -> float:
    """The lower quartile of ``values`` (the value itself for a single one)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=4)[0]


def ratio_spread(
    rounds: Mapping[str, Sequence[Sequence[float]]], *, mode: str, reference: str, baseline: str
) -> tuple[float, float, float] | None:
    """(lower quartile, median, upper quartile) over the rounds of ``added(mode) / added(reference)``.

    ``rounds[m][i]`` are the run times of mode ``m`` in round ``i``; "added" is a mode's lower quartile minus the
    baseline's, in the same round. Rounds where the reference added nothing measurable are left out; None when no
    round is left.
    """
    ratios = []
    for base, ours, ref in zip(rounds[baseline], rounds[mode], rounds[reference], strict=True):
        b = lower_quartile(base)
        added_ref = lower_quartile(ref) - b
        if added_ref > 0:
            ratios.append((lower_quartile(ours) - b) / added_ref)
    if not ratios:
        return None
    if len(ratios) == 1:
        return ratios[0], ratios[0], ratios[0]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return q1, median, q3
