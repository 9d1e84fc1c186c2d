"""Repair end to end on a real smolagents team (reactive scripted models, the real sandbox, the real store):
the search finds the earliest step whose minimal correction flips the run, updates the diagnosis, stores a repair
pair whose prompt is the exact recorded request, and the pairs export in TRL / OpenAI preference formats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import causaltrace
from causaltrace.cli import main
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.pairs import pair_rows
from causaltrace.replay.repair import repair_sync
from causaltrace.replay.sandbox import SubprocessSandbox
from causaltrace.replay.turns import producing_llm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import smolagents_agents as example  # noqa: E402


@pytest.fixture(autouse=True)
def instrumented():
    instrument_smolagents(TracerProvider(), TraceConfig())
    yield
    uninstrument_smolagents()
    reset_tracing()


@pytest.fixture(scope="module")
def sandbox():
    return SubprocessSandbox()


def _failed_run():
    with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        example.build_failing().run(example.TASK)
    assert handle.outcome.status == "failure"
    return handle.run


def test_repair_finds_the_decisive_code_step_and_stores_a_pair(sandbox):
    run = _failed_run()
    result = repair_sync(run, example.build_failing, example.verify, sandbox=sandbox)
    assert result.repaired
    step = run.step(result.decisive.step_id)
    assert step.kind in ("tool_call", "code_execution") and "range(1, 6)" in (step.inputs.get("code")
                                                                              or step.arguments.get("code", ""))
    assert step.agent == "manager"
    # the earliest flip: no earlier candidate flipped
    assert all(a.crs == 0.0 for a in result.attempts[:-1]) and result.attempts[-1].crs == 1.0
    assert result.live_calls_before_intervention == 0
    best = result.decisive.best
    assert best.outcome.final_answer == "91" and best.run is not None
    diag = result.diagnosis
    assert diag.verified_by == "replay" and diag.decisive_step_id == step.step_id and diag.agent == "manager"
    assert any(r["flipped"] for r in diag.artifacts["replays"])
    pair = result.pair
    assert pair is not None and pair.step_id == step.step_id and pair.verified_by == "replay"
    llm = producing_llm(run, run.step(pair.step_id))
    rec = llm.inputs["recording"]
    call = run.recording.find(rec["agent_key"], "llm", rec["ordinal"])
    assert pair.prompt == call.request["messages"]  # the exact recorded request at the corrected step
    assert "range(1, 6)" in pair.rejected["content"] and "range(1, 6)" not in pair.chosen["content"]
    with Store() as store:
        assert store.repair_pairs(run_id=run.run_id)[0].pair_id == pair.pair_id
        assert store.diagnoses(run.run_id)[-1].verified_by == "replay"
    trl = list(pair_rows([pair], format="trl-dpo"))[0]
    assert trl["prompt"][0]["role"] in ("system", "user") and isinstance(trl["prompt"][0]["content"], str)
    assert trl["chosen"][0]["role"] == "assistant" and trl["metadata"]["crs"] == 1.0
    assert trl["metadata"]["replay_run_id"] == best.run.run_id
    openai = list(pair_rows([pair], format="openai-dpo"))[0]
    assert set(openai) == {"input", "preferred_output", "non_preferred_output", "metadata"}


def test_predicted_pairs_are_excluded_by_default():
    from causaltrace.schema import RepairPair

    predicted = RepairPair(pair_id="p", run_id="r", step_id="r/1", step_index=1, step_kind="message", agent="a",
                           prompt=[{"role": "user", "content": "hi"}], chosen={"role": "assistant", "content": "x"},
                           rejected={"role": "assistant", "content": "y"}, verified_by="prediction")
    assert list(pair_rows([predicted])) == []
    assert len(list(pair_rows([predicted], include_predicted=True))) == 1


def test_cli_repair_and_pairs_export(capsys, tmp_path, monkeypatch):
    run = _failed_run()
    monkeypatch.chdir(tmp_path)
    code = main(["repair", run.run_id, "--factory", f"{EXAMPLES}/smolagents_agents.py:build_failing",
                 "--verify", f"{EXAMPLES}/smolagents_agents.py:verify"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "decisive step #" in out and "manager" in out and "flipped" in err
    target = tmp_path / "pairs.jsonl"
    assert main(["pairs", "export", "--format", "trl-dpo", "-o", str(target)]) == 0
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["metadata"]["run_id"] == run.run_id
    code = main(["repair", run.run_id, "--factory", "nope:build", "--verify", "text:91"])
    assert code == 2 and "cannot import 'nope'" in capsys.readouterr().err


def test_causalflow_method_and_graph_replay_verification(sandbox, monkeypatch):
    from causaltrace.attribution.engine import diagnose_sync
    from causaltrace.replay import executor
    from causaltrace.replay.causalflow import verification_scope

    monkeypatch.setattr(executor, "_DEFAULT_SANDBOX", sandbox)
    run = _failed_run()
    cf = diagnose_sync(run, "causalflow", factory=example.build_failing, verify=example.verify)
    assert not cf.failed, cf.failure_reason
    step = run.step_at(cf.decisive_step_index)
    assert cf.verified_by == "replay" and cf.method == "causalflow" and step.agent == "manager"
    assert cf.artifacts["replay"]["crs"][step.step_id] == 1.0
    # every earlier candidate was tried and did not flip (exhaustive CRS)
    assert all(v == 0.0 for sid, v in cf.artifacts["replay"]["crs"].items() if run.step(sid).index < step.index)
    plain = diagnose_sync(run, "graph")
    assert plain.verified_by == "heuristic"
    with verification_scope(example.build_failing, example.verify):
        verified = diagnose_sync(run, "graph")
    assert verified.verified_by == "replay" and verified.decisive_step_index == cf.decisive_step_index
    assert verified.artifacts["replay_verify"]["flipped"] == step.step_id
    failed = diagnose_sync(run, "causalflow")
    assert failed.failed and "--factory" in failed.failure_reason


async def test_predictive_replay_and_repair_of_an_imported_run():
    """A run without a recording (an imported log): an LLM predicts the corrected outcome; never called a replay."""
    from causaltrace.attribution.judge import Judge
    from causaltrace.collector.otlp import load_otlp_json
    from causaltrace.replay.executor import replay
    from causaltrace.replay.repair import repair
    from causaltrace.schema import Intervention
    from causaltrace.testing import FunctionJudge

    (run,) = load_otlp_json(EXAMPLES / "sample_run.otlp.jsonl")
    assert not run.recording or not run.recording.calls  # nothing to play back
    prompts = []

    def model(messages, info):
        text = messages[-1]["content"]
        prompts.append((info.stage_id, text))
        if info.stage_id == "predict":
            fixed = "corrected: add_range({\"start\": 1, \"stop\": 11})" in text or '"stop": 11' in text
            return json.dumps({"would_succeed": fixed, "confidence": 0.8, "reasoning": "the bound now includes 10"})
        if info.stage_id == "consensus":  # the critics confirm the predicted flip (issue 20 item 8)
            return json.dumps({"agreement": "AGREE", "confidence": 0.9, "reasoning": "the bound excluded 10"})
        return json.dumps({"corrected": "{\"start\": 1, \"stop\": 11}", "changes_made": "stop 10 -> 11"})

    judge = Judge(FunctionJudge(model), cache=False)
    call = next(s for s in run.steps if s.tool_name == "add_range" and s.kind == "tool_call")
    good = await replay(run, None, Intervention(step_id=call.step_id, replacement={"start": 1, "stop": 11}), "55",
                        model=judge)
    assert good.flipped and good.verified_by == "prediction" and good.run is None and good.replays_run == 0
    stage, text = prompts[-1]
    assert stage == "predict" and "Original outcome: FAILED" in text and "#15 final_answer" in text
    bad = await replay(run, None, Intervention(step_id=call.step_id, replacement={"start": 2, "stop": 10}), "55",
                       model=judge)
    assert not bad.flipped and bad.verified_by == "prediction"
    with pytest.raises(causaltrace.UserError, match="predictive replay"):
        await replay(run, None, Intervention(step_id=call.step_id, replacement={}), "55")
    result = await repair(run, None, "55", [call.step_id], model=judge, store=False)
    assert result.repaired and result.diagnosis.verified_by == "prediction"
    # the model's edit is derived from no finding (the run shows nothing wrong with stop=10): an alternative
    assert result.pair is None and result.diagnosis.basis == "alternative"
    pair = result.alternative_pair
    assert pair is not None and pair.verified_by == "prediction" and pair.basis == "alternative"
    assert pair.consensus == pytest.approx((1 + 0.9 + 0.9) / 3, abs=1e-4)
    assert list(pair_rows([pair])) == []  # predicted pairs and alternatives are exported only on request
    assert list(pair_rows([pair], include_predicted=True)) == []
    assert len(list(pair_rows([pair], include_predicted=True, include_alternatives=True))) == 1


async def test_llm_proposals_follow_causalflow_and_bad_answers_are_skipped():
    from causaltrace.attribution.judge import Judge
    from causaltrace.replay.proposals import proposals_for
    from causaltrace.testing import FunctionJudge

    run = _failed_run()
    code_step = next(s for s in run.steps if s.kind == "code_execution" and "range(1, 6)" in str(s.inputs))
    sent = []
    answers = iter([
        json.dumps({"corrected": str(code_step.inputs["code"]).replace("range(1, 6)", "range(1, 7)"),
                    "changes_made": "include 6"}),
        "not json at all",  # garbage: repaired once, then skipped
        "still garbage",
        "garbage again",
        json.dumps({"corrected": str(code_step.inputs["code"]), "changes_made": "nothing"}),  # no-op: dropped
    ])

    def model(messages, info):
        sent.append(messages[-1]["content"])
        return next(answers)

    judge = Judge(FunctionJudge(model), cache=False, max_repairs=2)
    proposals = await proposals_for(code_step, run, judge=judge, k=3, mutation_budget=5)
    llm = [p for p in proposals if p.source == "llm"]
    assert len(llm) == 1 and "range(1, 7)" in llm[0].replacement and llm[0].description == "include 6"
    assert "Task: What is the sum of the squares" in sent[0] and "range(1, 6)" in sent[0]
    assert "smallest possible change" in sent[0] and "final answer is 55" in sent[0]
    # 5 mutations asked for; the one equal to the LLM proposal (6 → 7) is deduplicated
    assert len([p for p in proposals if p.source == "mutation"]) == 4
