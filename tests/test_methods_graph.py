"""``graph`` with a model (issue 6): recall + adjudicate on top of the deterministic ranking; call budget, prompts,
artifacts, malformed answers, ablation, and the one-command side-by-side bench."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import causaltrace
from _method_fakes import fake
from causaltrace.attribution.bench import bench_whowhen
from causaltrace.attribution.llm import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.cli import main
from causaltrace.collector.whowhen import load_whowhen

FIXTURES = Path(__file__).parent / "fixtures" / "attribution" / "whowhen"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def hand1():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


OVERRIDES = {
    "recall": {"candidates": [{"step": 6, "reason": "read a travel blog instead of the official site"}]},
    "adjudicate": {"step": 6, "category": "FM-2.3", "explanation": "the blog's time became the answer"},
}


def test_graph_with_a_model_recalls_and_adjudicates():
    f = fake(OVERRIDES)
    d = causaltrace.diagnose_sync(hand1(), "graph", f)
    assert not d.failed, d.failure_reason
    assert d.cost.calls_by_stage == {"recall": 1, "adjudicate": 1} and d.verified_by == "prediction"
    assert (d.decisive_step_index, d.agent, d.category) == (6, "WebSurfer", "FM-2.3")
    recall, adjudicate = f.calls
    assert "Deterministic analysis ranked these steps first" in recall.last and "- step " in recall.last
    assert "read a travel blog" in adjudicate.last
    enum = adjudicate.schema["properties"]["step"]["enum"]
    assert 6 in enum and 0 not in enum  # the task is never a candidate
    assert d.artifacts["recall"]["candidates"] == [{"step": 6, "reason": "read a travel blog instead of the "
                                                                          "official site"}]
    assert d.artifacts["adjudicate"]["step"] == 6 and "rank" in d.artifacts
    assert d.candidates[0].index == 6 and d.candidates[0].reasons[0].startswith("read a travel blog")


@pytest.mark.parametrize("stage", ["recall", "adjudicate"])
def test_graph_malformed_answer_is_a_failed_diagnosis(stage):
    d = causaltrace.diagnose_sync(hand1(), "graph", fake({**OVERRIDES, stage: lambda i, g: "nope"}))
    assert d.failed and stage in (d.failure_reason or "")


@pytest.mark.parametrize("stage", ["recall", "adjudicate"])
def test_graph_ablate_an_llm_stage(stage):
    d = causaltrace.diagnose_sync(hand1(), "graph", fake(OVERRIDES), ablate=[stage])
    assert not d.failed and stage not in d.cost.calls_by_stage and d.cost.llm_calls == 1
    assert d.artifacts[stage] == {"ablated": True} and d.decisive_step_index == 6


def test_graph_call_budget_on_the_fixtures():
    report = asyncio.run(bench_whowhen(FIXTURES, ["graph"], fake()))
    assert report["by_subset"]["algo"]["calls_per_trace"] <= 6 and report["by_subset"]["hand"]["calls_per_trace"] <= 10
    assert set(report["calls_by_stage"]) == {"recall", "adjudicate"} and report["failed_diagnoses"] == 0


def test_one_command_for_every_method_parses_and_fails_cleanly_without_a_key(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["bench", "whowhen", "--method", "defa,emfa,dcfa,graph,all-at-once", "--model", "gpt-4o-mini",
                 "--data", str(FIXTURES), "--limit", "1", "--json", "-"])
    err = capsys.readouterr().err
    assert code != 0 and "CAUSALTRACE_ALLOW_MODEL_REQUESTS" in err and "Traceback" not in err
