"""``dcfa`` offline: call structure (SEEDS §8), prompts, artifacts, LCE search, malformed answers, ablation."""

from __future__ import annotations

from pathlib import Path

import pytest

import causaltrace
from _method_fakes import fake
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.attribution.methods.dcfa import lexical_similarity
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.exceptions import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")
    monkeypatch.delenv("CAUSALTRACE_EMBEDDING_MODEL", raising=False)


def hand1():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


def _simulate(info, generated):
    # the "after" run of step 3 (the hint names it) reaches the right opening time; every other run does not
    if "Root cause event and its effects: step 3 " in info.last:
        return {"reason": "the official site says 9:30", "answer": "9:30"}
    return {"reason": "the blog's time is kept", "answer": "11:00"}


OVERRIDES = {
    "mdi": {"mistakes": [{"step": 6, "reason": "used a travel blog"}, {"step": 3, "reason": "clicked no site"}]},
    "cgc": {"steps": [
        {"step": 3, "label": "mistake", "causes": [2], "effects": [6]},
        {"step": 6, "label": "mistake", "causes": [3, 9], "effects": [9, 11]},  # 9 as a cause breaks temporality
        {"step": 2, "label": "normal", "causes": [], "effects": [3]},
    ]},
    "hypothesis": {"responsible_agent": "WebSurfer", "log_answer": "11:00", "step": 6, "reason": "the blog"},
    "correct": {"corrected": [{"step": 3, "text": "I opened the official site: open at 9:30 on Sundays."},
                              {"step": 6, "text": "The official site says 9:30."}]},
    "simulate": _simulate,
    "decide": lambda info, gen: {**gen, "step": 3 if 3 in info.schema["properties"]["step"]["enum"] else gen["step"],
                                 "reason": "step 3 never opened the official website"},
}


def test_dcfa_call_structure_prompts_and_artifacts():
    f = fake(OVERRIDES)
    d = causaltrace.diagnose_sync(hand1(), "dcfa", f, with_answer=True)
    assert not d.failed, d.failure_reason
    assert (d.decisive_step_index, d.agent, d.verified_by) == (3, "WebSurfer", "prediction")
    # upstream walk: 3 accepted (ΔS > 0), then 2 (ΔS = 0) stops it; downstream: 9 and 11 evaluated, none accepted
    assert d.cost.calls_by_stage == {"mdi": 1, "cgc": 1, "hypothesis": 1, "correct": 1, "simulate": 8, "decide": 1}
    by_stage = {c.stage_id: c for c in f.calls}
    assert "The question:" not in by_stage["mdi"].last and "9:30" not in by_stage["mdi"].last  # the log only
    assert "MORE THAN ONE" in by_stage["mdi"].last and "Step 6 - WebSurfer:" in by_stage["mdi"].last
    assert "necessity" in by_stage["cgc"].last and "- step 6: used a travel blog" in by_stage["cgc"].last
    assert "The correct answer to the problem is: 9:30" in by_stage["hypothesis"].last
    assert "strip redundant content" in by_stage["correct"].last  # the Hand-Crafted variant
    sims = [c for c in f.calls if c.stage_id == "simulate"]
    assert all("9:30" not in c.last.split("The log:")[0] for c in sims)  # the target is never shown to simulate
    after3 = next(c for c in sims if "step 3 →" in c.last)
    assert "I opened the official site" in after3.last  # corrected[:4]
    schema = by_stage["hypothesis"].schema
    assert schema["properties"]["step"]["enum"] == list(range(1, 13))  # candidate steps only (not the task)
    art = d.artifacts
    assert art["cgc"]["nodes"]["6"]["causes"] == [3] and art["cgc"]["dropped"][0]["violating"] == [9]
    assert art["search"] == {"upstream_pivots": [3], "downstream_pivots": [], "evaluated": [2, 3, 9, 11],
                             "T_c": [3, 6]}
    deltas = {e["step"]: e["delta_s"] for e in art["simulate"]["evaluations"]}
    assert deltas[3] > 0 and deltas[2] == deltas[9] == deltas[11] == 0
    assert art["simulate"]["similarity"].startswith("lexical")
    assert art["lce"]["target_kind"].startswith("the ground-truth")
    assert {"mdi", "cgc", "hypothesis", "correct", "simulate", "search", "decide"} <= set(art)
    assert [c.index for c in d.candidates] == [3, 6]


def test_dcfa_without_answer_scores_against_emfas_success_spec():
    f = fake({**OVERRIDES, "success_spec": {"expected_outcome": "the Sunday opening time, 9:30", "constraints": []}})
    d = causaltrace.diagnose_sync(hand1(), "dcfa", f)
    assert d.cost.calls_by_stage["success_spec"] == 1 and d.artifacts["lce"]["target_kind"].startswith("EMFA")
    assert all("9:30" not in c.last for c in f.calls if c.stage_id in ("mdi", "cgc", "hypothesis"))
    d2 = causaltrace.diagnose_sync(hand1(), "dcfa", fake(OVERRIDES), ablate=["success_spec"])
    assert "simulate" not in d2.cost.calls_by_stage and "correct" not in d2.cost.calls_by_stage
    assert "no target" in d2.artifacts["lce"]["skipped"]


@pytest.mark.parametrize("stage", ["mdi", "cgc", "hypothesis", "correct", "simulate", "decide"])
def test_dcfa_malformed_answer_at_any_stage_is_a_failed_diagnosis(stage):
    f = fake({**OVERRIDES, stage: lambda info, gen: "this is not JSON at all"})
    d = causaltrace.diagnose_sync(hand1(), "dcfa", f, with_answer=True)
    assert d.failed and stage in (d.failure_reason or "") and d.decisive_step_index is None


@pytest.mark.parametrize("stage", ["simulate", "cgc", "decide", "mdi", "hypothesis", "correct"])
def test_dcfa_ablate_removes_the_stage(stage):
    d = causaltrace.diagnose_sync(hand1(), "dcfa", fake(OVERRIDES), with_answer=True, ablate=[stage])
    assert not d.failed, d.failure_reason
    assert stage not in d.cost.calls_by_stage and d.artifacts[stage] == {"ablated": True}


def test_dcfa_needs_a_model_and_the_lexical_fallback():
    with pytest.raises(UserError, match="--model"):
        causaltrace.diagnose_sync(hand1(), "dcfa")
    assert lexical_similarity("9:30", "9:30 on Sundays") > lexical_similarity("11:00", "9:30 on Sundays") == 0.0
