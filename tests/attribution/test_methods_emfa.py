"""``emfa`` offline: call structure (SEEDS §8), prompts, artifacts, ≤ 2 candidates per branch, malformed answers,
ablation."""

from __future__ import annotations

from pathlib import Path

import pytest

import causaltrace
from _method_fakes import constrained, fake
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.exceptions import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def hand1():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


def _screen_loop(info, gen):
    step = 6 if 6 in info.schema["properties"].get("step", {}).get("enum", []) else None
    if step is not None:  # a per-loop analysis
        return {"step": step, "kind": "failure_to_follow_valid_instruction", "reason": "blog instead of site"}
    allowed = info.schema["properties"]["candidates"]["items"]["properties"]["step"]["enum"]
    return {"candidates": [{"step": s, "reason": "loop start"} for s in allowed]}


OVERRIDES = {
    "success_spec": {"expected_outcome": "the Sunday opening time", "constraints": [
        {"kind": "source", "text": "the official aquarium website"}, {"kind": "format", "text": "a clock time"}]},
    "final_step": {"has_final_answer": True, "step": 11, "symptom": "11:00 comes from a blog, not the official site"},
    "structure": {"subtasks": [{"id": 0, "start": 0, "end": 3, "goal": "search"},
                               {"id": 1, "start": 4, "end": 9, "goal": "open the official site"},
                               {"id": 2, "start": 10, "end": 12, "goal": "answer"}],
                  "step_edges": [{"source": 5, "target": 6, "info": "instruction"},
                                 {"source": 6, "target": 9, "info": "the blog's time"},
                                 {"source": 10, "target": 11, "info": "ask for the answer"},
                                 {"source": 3, "target": 9, "info": "crosses subtasks"},
                                 {"source": 9, "target": 4, "info": "backwards"}],
                  "subtask_edges": [{"source": 1, "target": 2, "info": "the time found"}]},
    "annotate": constrained({"steps": [{"step": 6, "status": "introduced", "note": "blog time"},
                           {"step": 9, "status": "propagated", "note": "same blog"},
                           {"step": 11, "status": "propagated", "note": "answers 11:00"}]}),
    "loops": {"loops": [{"objective": "open the official site", "steps": [6, 9]},
                        {"objective": "a one-step group is no loop", "steps": [3]}]},
    "screen_propagation": {"candidates": [{"step": 6, "reason": "earliest unrecovered"},
                                          {"step": 9, "reason": "carrier"}, {"step": 11, "reason": "symptom"}]},
    "screen_loops": _screen_loop,
    "verify": constrained({"verdicts": [{"step": 6, "recovers": True, "introduces_error": True, "reason": "r"},
                                        {"step": 9, "recovers": True, "introduces_error": False, "reason": "r"}],
                           "decisive_step": 9, "explanation": "step 6 read a blog instead of the site"}),
}


def test_emfa_call_structure_prompts_and_artifacts():
    f = fake(OVERRIDES)
    d = causaltrace.diagnose_sync(hand1(), "emfa", f)
    assert not d.failed, d.failure_reason
    assert (d.decisive_step_index, d.agent, d.verified_by) == (6, "WebSurfer", "prediction")
    assert d.cost.calls_by_stage == {"success_spec": 1, "final_step": 1, "structure": 1, "annotate": 1, "loops": 1,
                                     "screen_propagation": 1, "screen_loops": 2, "verify": 1}
    by = {c.stage_id: c for c in f.calls}
    assert "Step " not in by["success_spec"].last and "Aquarium open on Sundays" in by["success_spec"].last
    assert "9:30" not in "".join(c.last for c in f.calls)  # no ground truth by default
    assert by["final_step"].schema["properties"]["step"]["enum"] == [8, 9, 10, 11, 12]  # the last w = 5
    assert "Step 7 -" not in by["final_step"].last and "Step 12 -" in by["final_step"].last
    assert "plan author vs executor" in by["screen_propagation"].last and "AT MOST TWO" in by["screen_propagation"].last
    assert "plan author vs executor" in by["verify"].last
    art = d.artifacts
    assert art["final_step"]["index"] == 11
    st = art["structure"]
    assert [(x["start"], x["end"]) for x in st["subtasks"]] == [(0, 3), (4, 9), (10, 12)]
    assert [0, 1, "step 3 → step 9: crosses subtasks"] in st["subtask_edges"]
    assert [2, 3] in st["instruction_response_added"]  # the deterministic instruction → response rule
    assert st["dropped"][0]["edge"] == [9, 4]
    info = art["trace_back"]
    assert 11 in info["nodes"] and 6 in info["nodes"] and set(info["subtasks"]) == {0, 1, 2}
    roles = {s["step"]: s["role"] for s in art["annotate"]["steps"]}
    assert roles[6] == "propagation source" and roles[9] == "propagation carrier" and roles[11] == "failure symptom"
    assert [c["step"] for c in art["screen_propagation"]["candidates"]] == [6, 9]  # ≤ 2 per branch
    assert art["loops"]["loops"] == [{"objective": "open the official site", "steps": [6, 9]}]
    assert art["screen_loops"]["per_loop"][0]["step"] == 6
    assert art["verify"]["step"] == 6 and art["verify"]["rule"].startswith("the earliest candidate")
    assert {c.index for c in d.candidates} == {6, 9}


@pytest.mark.parametrize("stage", ["success_spec", "final_step", "structure", "annotate", "loops",
                                   "screen_propagation", "screen_loops", "verify"])
def test_emfa_malformed_answer_at_any_stage_is_a_failed_diagnosis(stage):
    f = fake({**OVERRIDES, stage: lambda info, gen: "{ broken"})
    d = causaltrace.diagnose_sync(hand1(), "emfa", f)
    assert d.failed and stage in (d.failure_reason or "")


@pytest.mark.parametrize("stage", ["success_spec", "final_step", "structure", "annotate", "loops",
                                   "screen_propagation", "screen_loops", "verify"])
def test_emfa_ablate_removes_the_stage(stage):
    d = causaltrace.diagnose_sync(hand1(), "emfa", fake(OVERRIDES), ablate=[stage])
    assert not d.failed, d.failure_reason
    assert stage not in d.cost.calls_by_stage and d.artifacts[stage] == {"ablated": True}


def test_emfa_needs_a_model_and_falls_back_when_both_branches_are_empty():
    with pytest.raises(UserError, match="--model"):
        causaltrace.diagnose_sync(hand1(), "emfa")
    d = causaltrace.diagnose_sync(hand1(), "emfa", fake(OVERRIDES), ablate=["screen_propagation", "loops"])
    assert d.artifacts["candidates"]["fallback"] == 6 and d.decisive_step_index == 6
