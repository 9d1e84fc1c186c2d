"""``graph`` with a model (issue 6): recall + adjudicate + refine on top of the deterministic ranking; call budget,
prompts, artifacts, malformed answers, ablation, and the one-command side-by-side bench."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import causaltrace
from _method_fakes import fake, shown_steps
from causaltrace.attribution.bench import bench_whowhen
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.cli import main
from causaltrace.collector.whowhen import load_whowhen

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def hand1():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


def refine_answer(succeeds_for, answers=None):
    """A ``refine`` override: the simulated run succeeds only when the corrected step is in ``succeeds_for``."""
    def answer(info, generated):
        step = int(re.search(r"THE CORRECTED STEP: step (\d+)", info.last).group(1))
        return {"reason": f"with step {step} fixed", "answer": (answers or {}).get(step, "9:30"),
                "succeeds": step in succeeds_for}
    return answer


OVERRIDES = {
    "recall": {"candidates": [{"step": 6, "reason": "read a travel blog instead of the official site"}]},
    "adjudicate": {"step": 6, "category": "FM-2.3", "explanation": "the blog's time became the answer"},
    "refine": refine_answer({6}),
}


def test_graph_with_a_model_recalls_and_adjudicates():
    f = fake(OVERRIDES)
    d = causaltrace.diagnose_sync(hand1(), "graph", f)
    assert not d.failed, d.failure_reason
    assert d.cost.calls_by_stage == {"recall": 1, "adjudicate": 1, "refine": 2} and d.verified_by == "prediction"
    assert (d.decisive_step_index, d.agent, d.category) == (6, "WebSurfer", "FM-2.3")
    recall, adjudicate = f.calls[:2]
    assert "Deterministic analysis ranked these steps first" in recall.last and "- step " in recall.last
    assert "read a travel blog" in adjudicate.last
    enum = adjudicate.schema["properties"]["step"]["enum"]
    assert 6 in enum and 0 not in enum  # the task is never a candidate
    assert d.artifacts["recall"]["candidates"] == [{"step": 6, "reason": "read a travel blog instead of the "
                                                                          "official site"}]
    assert d.artifacts["adjudicate"]["step"] == 6 and "rank" in d.artifacts
    assert d.candidates[0].index == 6 and d.candidates[0].reasons[0].startswith("read a travel blog")


@pytest.mark.parametrize("stage", ["recall", "adjudicate", "refine"])
def test_graph_malformed_answer_is_a_failed_diagnosis(stage):
    # refine included: a malformed refine answer fails the Diagnosis like every other LLM stage (no silent fallback)
    d = causaltrace.diagnose_sync(hand1(), "graph", fake({**OVERRIDES, stage: lambda i, g: "nope"}))
    assert d.failed and stage in (d.failure_reason or "")


@pytest.mark.parametrize("stage", ["recall", "adjudicate"])
def test_graph_ablate_an_llm_stage(stage):
    d = causaltrace.diagnose_sync(hand1(), "graph", fake(OVERRIDES), ablate=[stage])
    assert not d.failed and stage not in d.cost.calls_by_stage and d.cost.llm_calls == 1 + 2  # + refine's two
    assert d.artifacts[stage] == {"ablated": True} and d.decisive_step_index == 6


def test_graph_call_budget_on_the_fixtures():
    report = asyncio.run(bench_whowhen(FIXTURES, ["graph"], fake()))
    assert report["by_subset"]["algo"]["calls_per_trace"] <= 6 and report["by_subset"]["hand"]["calls_per_trace"] <= 10
    assert set(report["calls_by_stage"]) == {"recall", "adjudicate", "refine"} and report["failed_diagnoses"] == 0
    assert report["calls_by_stage"]["refine"] <= 2


def test_graph_refine_simulates_the_top_two_candidates_once_each():
    f = fake(OVERRIDES)
    d = causaltrace.diagnose_sync(hand1(), "graph", f)
    refine = [c for c in f.calls if c.stage_id == "refine"]
    assert len(refine) == 2 and d.cost.calls_by_stage["refine"] == 2 and d.cost.llm_calls == 4
    first, second = refine
    assert "THE CORRECTED STEP: step 6" in first.last and "the blog's time became the answer" in first.last
    assert max(shown_steps(first.last)) == 6  # the log up to the corrected step only
    other = d.candidates[1].index
    assert f"THE CORRECTED STEP: step {other}" in second.last and "fix this step" in second.last
    assert "9:30" not in first.last  # the expected outcome is never shown to the simulation
    art = d.artifacts["refine"]
    assert (art["step"], art["adjudicated"], art["changed"]) == (6, 6, False)
    assert [c["step"] for c in art["candidates"]] == [6, other]
    assert [c["succeeds"] for c in art["candidates"]] == [True, False]
    assert all("delta_s" in c and "s_after" in c for c in art["candidates"])
    assert art["similarity"].startswith("none")  # no answer, no verifier: success is the model's judgment


def test_graph_refine_can_overturn_adjudication():
    other = causaltrace.diagnose_sync(hand1(), "graph", fake(OVERRIDES)).candidates[1].index
    d = causaltrace.diagnose_sync(hand1(), "graph", fake({**OVERRIDES, "refine": refine_answer({other})},
                                                         name="overturn"))  # own name: no cache hit
    assert not d.failed and d.decisive_step_index == other != 6
    assert d.candidates[0].index == other and d.candidates[0].score == 1.0 and 6 in [c.index for c in d.candidates]
    assert d.artifacts["refine"]["changed"] is True and "overturned step 6" in d.explanation


def test_graph_refine_picks_the_earliest_success_and_scores_delta_s_with_the_answer():
    other = causaltrace.diagnose_sync(hand1(), "graph", fake(OVERRIDES)).candidates[1].index
    assert other < 6
    both = refine_answer({6, other})
    d = causaltrace.diagnose_sync(hand1(), "graph", fake({**OVERRIDES, "refine": both}, name="both"))
    assert d.decisive_step_index == other  # both simulated to succeed: the earliest wins
    # with the ground truth as the target, a "success" whose outcome is no closer to it (ΔS <= 0) does not count
    wrong = refine_answer({6, other}, answers={other: "10:45 at the blog", 6: "the store opens at 9:30"})
    d = causaltrace.diagnose_sync(hand1(), "graph", fake({**OVERRIDES, "refine": wrong}, name="wrong"),
                                  with_answer=True)
    art = d.artifacts["refine"]
    by_step = {c["step"]: c for c in art["candidates"]}
    assert art["target_kind"].startswith("the ground-truth") and art["similarity"].startswith("lexical")
    assert by_step[6]["delta_s"] > 0 and by_step[other]["delta_s"] <= 0 and not by_step[other]["succeeds"]
    assert d.decisive_step_index == 6


def test_graph_ablate_refine_keeps_the_adjudicated_pick():
    d = causaltrace.diagnose_sync(hand1(), "graph", fake({**OVERRIDES, "refine": refine_answer({1, 2, 3, 5})}),
                                  ablate=["refine"])
    assert not d.failed and d.cost.calls_by_stage == {"recall": 1, "adjudicate": 1}
    assert d.artifacts["refine"] == {"ablated": True} and d.decisive_step_index == 6
    # recall and adjudicate both ablated: no model-made pick, so refine is skipped and graph stays deterministic
    d = causaltrace.diagnose_sync(hand1(), "graph", fake(OVERRIDES), ablate=["recall", "adjudicate"])
    assert d.cost.llm_calls == 0 and "skipped" in d.artifacts["refine"] and d.verified_by == "heuristic"


def test_one_command_for_every_method_parses_and_fails_cleanly_without_a_key(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["bench", "whowhen", "--method", "defa,emfa,dcfa,graph,all-at-once", "--model", "gpt-4o-mini",
                 "--data", str(FIXTURES), "--limit", "1", "--json", "-"])
    err = capsys.readouterr().err
    assert code != 0 and "CAUSALTRACE_ALLOW_MODEL_REQUESTS" in err and "Traceback" not in err


def test_a_model_pick_without_a_deterministic_finding_stays_uncertain():
    """Issue 32 item 9: the LLM stages see the findings (a step with none says "no finding" in its evidence); a
    model's pick of a step the detectors found nothing at is "model judgment, no deterministic evidence" —
    uncertain — within the same call budget."""
    from causaltrace.attribution.stages.confidence import is_uncertain

    run = hand1()
    plain = causaltrace.diagnose_sync(run, "graph", store=False)
    bare = next(c.index for c in plain.candidates if not c.findings and c.index != 0)
    picks = {"recall": {"candidates": [{"step": bare, "reason": "looks wrong to the model"}]},
             "adjudicate": {"step": bare, "category": None, "explanation": "the model thinks so"},
             "refine": refine_answer({bare})}
    f = fake(picks)
    d = causaltrace.diagnose_sync(run, "graph", f, store=False)
    assert not d.failed, d.failure_reason
    assert d.decisive_step_index == bare and d.basis == "none" and is_uncertain(d)
    assert d.explanation.startswith("Model judgment, no deterministic evidence")
    assert d.cost.calls_by_stage == {"recall": 1, "adjudicate": 1, "refine": 2}
    assert any("no finding: nothing the run shows is wrong" in c.last for c in f.calls)
