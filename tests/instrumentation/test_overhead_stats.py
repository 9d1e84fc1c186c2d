"""The overhead benchmarks' statistics: lower quartiles per mode, and the ratio's spread over rounds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _overhead_stats import CountingExporter, counting_provider, lower_quartile, paired_added, ratio_spread, rotated


def test_lower_quartile_ignores_slow_outliers():
    assert lower_quartile([5.0]) == 5.0
    assert lower_quartile([1.0, 2.0, 3.0, 4.0, 100.0]) == pytest.approx(1.5)


def test_ratio_spread_is_computed_round_by_round_against_the_same_rounds_baseline():
    rounds = {
        "base": [[10.0, 10.0, 10.0], [20.0, 20.0, 20.0], [10.0, 10.0, 10.0]],
        "ref": [[12.0, 12.0, 12.0], [22.0, 22.0, 22.0], [10.0, 10.0, 10.0]],  # adds 2, 2, then nothing
        "ours": [[13.0, 13.0, 13.0], [26.0, 26.0, 26.0], [30.0, 30.0, 30.0]],  # adds 3, 6, 20
    }
    q1, median, q3 = ratio_spread(rounds, mode="ours", reference="ref", baseline="base")
    # the third round is left out (the reference added nothing): ratios 1.5 and 3.0 remain
    assert (q1, median, q3) == pytest.approx((1.125, 2.25, 3.375))
    assert ratio_spread({"base": [[1.0]], "ref": [[1.0]], "ours": [[2.0]]}, mode="ours", reference="ref",
                        baseline="base") is None


def test_added_time_is_paired_with_the_baseline_of_the_same_round_so_drift_cancels():
    rounds = {
        "base": [[10.0, 10.0], [20.0, 20.0], [12.0, 12.0]],  # the machine slows down, then recovers
        "mode": [[11.0, 11.0], [22.0, 22.0], [13.0, 13.0]],  # adds 1, 2, 1
    }
    assert paired_added(rounds, mode="mode", baseline="base") == pytest.approx(1.0)
    assert rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert rotated(["a", "b", "c"], 4) == ["b", "c", "a"]


def test_counting_exporter_counts_every_span_a_provider_exports():
    exporter = CountingExporter()
    tracer = counting_provider(exporter).get_tracer("bench")
    with tracer.start_as_current_span("a"):
        tracer.start_span("b").end()
    assert exporter.spans == 2


def test_an_unsampled_counting_provider_exports_nothing():
    exporter = CountingExporter()
    tracer = counting_provider(exporter, sampled=False).get_tracer("bench")
    with tracer.start_as_current_span("a") as span:
        tracer.start_span("b").end()
        assert not span.is_recording()
    assert exporter.spans == 0
