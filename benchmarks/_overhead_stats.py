"""What the overhead benchmarks (AutoGen and smolagents) share: robust per-run statistics, and a span counter.

Both benchmarks time single runs, the modes taking turns in rounds (in a rotating order). Other processes' load only
ever ADDS time, so within a round a mode's figure is the lower quartile of its runs. A shared machine also drifts
between rounds (its speed changed by a third within a minute here), so the time a mode ADDS is measured round by
round against the baseline of the same round, and the median over the rounds is kept; how far to trust a ratio
shows in its spread over the rounds, which the benchmarks print next to it. The spans each mode exports are
counted, so the time it adds can also be read per span it emits.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

T = TypeVar("T")

__all__ = ["CountingExporter", "counting_provider", "lower_quartile", "paired_added", "ratio_spread", "rotated"]


def lower_quartile(values: Sequence[float]) -> float:
    """The lower quartile of ``values`` (the value itself for a single one)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=4)[0]


def paired_added(rounds: Mapping[str, Sequence[Sequence[float]]], *, mode: str, baseline: str) -> float:
    """The time ``mode`` adds to a run: over the rounds, the median of (its lower quartile - the baseline's lower
    quartile in the same round)."""
    return statistics.median(
        lower_quartile(ours) - lower_quartile(base)
        for base, ours in zip(rounds[baseline], rounds[mode], strict=True)
    )


def rotated(items: Sequence[T], round_no: int) -> list[T]:
    """``items`` starting at position ``round_no`` (mod their number): no mode always runs right after another."""
    k = round_no % len(items)
    return [*items[k:], *items[:k]]


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


class CountingExporter(SpanExporter):
    """Discards the spans it is given and counts them, so a benchmark can report how many spans each mode emits
    per run: the time a mode adds per event is read beside what it produces for it."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def counting_provider(exporter: CountingExporter, *, sampled: bool = True) -> TracerProvider:
    """A fresh SDK provider that hands every span straight to ``exporter`` (a SimpleSpanProcessor); with
    ``sampled=False`` its sampler drops every trace, so nothing is exported (what emitting spans costs)."""
    provider = TracerProvider(sampler=ALWAYS_ON if sampled else ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider
