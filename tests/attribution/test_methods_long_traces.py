"""Long Who&When traces under a fake model that enforces a declared 16k-token window (FACTS.md "Who&When"):
Hand-Crafted/30.json (121 steps, 305k characters, two ~88k-character steps) and 46.json (130 steps) diagnose with
every issue-6 method without a context-length error."""

from __future__ import annotations

import pytest

import causaltrace
from _method_fakes import fake
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.collector.whowhen import load_whowhen

WINDOW = 16_000


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def _loops(info, gen):
    # a real loop so the loop branch (one call per loop + the aggregate) runs on the long traces too
    steps = info.schema["properties"]["loops"]["items"]["properties"]["steps"]["items"]["enum"]
    return {"loops": [{"objective": "the same search again", "steps": steps[5:8]}]}


@pytest.mark.parametrize("number", [30, 46])
@pytest.mark.parametrize("method", ["defa", "emfa", "dcfa", "graph"])
def test_long_trace_fits_a_16k_window(whowhen_dir, number, method):
    run = load_whowhen(whowhen_dir / "Hand-Crafted" / f"{number}.json")
    f = fake({"loops": _loops}, context_window=WINDOW)
    d = causaltrace.diagnose_sync(run, method, f)
    assert not d.failed, d.failure_reason
    assert f.calls and max(c.input_tokens for c in f.calls) <= WINDOW
    assert d.cost.llm_calls == len(f.calls)
    if number == 30:
        big = sorted((len(s.content), s.index) for s in run.steps)[-2:]
        assert all(n > 80_000 for n, _ in big)
        for _, i in big:  # the two ~88k-character steps were compressed in every prompt that showed them
            shown = [c for c in f.calls if f"Step {i} - " in c.last]
            if method == "defa":  # normalise compresses it once (cut first to fit its own call); later stages see τ̃
                shown = [c for c in shown if c.stage_id == "normalise"]
            assert shown and all(c.last.count("characters elided]") >= 1 for c in shown)
        if method == "defa":
            assert {str(i) for _, i in big} <= set(d.artifacts["normalise"]["compressed_steps"])
    if method == "emfa":
        assert d.cost.calls_by_stage["screen_loops"] == 2
