"""Repair on bad input, its budget on the predictive path, and provenance pruning (issue 19 item 3 and "Bad input").

Real AutoGen teams (``examples/autogen_team.py``: the solver's ``add(17, 26)`` is the planted fault) and a real
smolagents fault case, replayed in the real sandbox: a factory that raises, a verifier that raises or returns a
non-boolean, and a proposal after which the framework raises are each a MARKED replay in the repair report, the
search goes on within its budget, the store keeps the run and the diagnosis, and the CLI prints one line per
replay. On a run without a recording each prediction counts against ``max_replays``, and the explanation says what
was tried (not "0 replays"). Provenance prunes the steps whose values never reach the failing answer, without
moving the decisive step.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import causaltrace
from _autogen import add_call, record_failing
from causaltrace.collector.store import Store
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair
from causaltrace.schema import Outcome
from causaltrace.testing.autogen import ScriptedChatCompletionClient

pytestmark = pytest.mark.timeout(300)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
example = importlib.import_module("autogen_team")


@pytest.fixture(autouse=True)
def _uninstrument():
    yield
    causaltrace.uninstrument()
    reset_tracing()


_record = record_failing
_add_call = add_call


def _tried(result: Any) -> list[Any]:
    return [r for a in result.attempts for r in a.replays]


def broken_factory() -> Any:
    raise RuntimeError("the factory broke")


def breaking_reviewer() -> Any:
    """The failing team whose reviewer's model raises when it is shown the right answer (a proposal after which the
    framework raises: the exception ends team.run)."""
    team = example.build_failing()

    def reviewer(request: Any) -> str:
        if "126" in json.dumps([getattr(m, "content", "") for m in request.messages], default=str):
            raise ValueError("the reviewer's model broke")
        return "RESULT verified. APPROVE"

    team._participants[2]._model_client = ScriptedChatCompletionClient(reviewer, model="scripted-reviewer")
    return team


# ------------------------------------------------------------------------------------------------- bad input


async def test_a_factory_that_raises_is_a_marked_replay_within_the_budget_and_nothing_stored_is_lost():
    run = await _record()
    with Store() as store:
        result = await repair(run, broken_factory, example.verify, [_add_call(run).step_id], k=0, store=store,
                              max_replays=3, sandbox=default_sandbox())
        assert store.get_run(run.run_id).outcome.status == "failure"  # the run is still there
        stored = store.diagnoses(run.run_id)[-1]
    tried = _tried(result)
    assert not result.repaired and len(tried) == 3 and result.budget_exhausted == "replays"
    assert all(r.error is not None and r.error.type == "RuntimeError" for r in tried)
    assert "the factory broke" in tried[0].error.message
    marks = [r["error"]["type"] for r in stored.artifacts["replays"]]  # the repair report shows each mark
    assert marks == ["RuntimeError"] * 3
    assert result.probe.startswith("inconclusive")  # the probe could not build the team either


class _Checker:
    """A callable verifier object (not a function) that returns a non-boolean."""

    def __call__(self, outcome: Outcome) -> Any:
        return {"passed": True}


async def _async_none(outcome: Outcome) -> Any:
    return None


def _raising(answer: str) -> bool:  # annotated str: given the answer text, as the run marking does
    raise KeyError("the verifier broke")


@pytest.mark.parametrize("verifier", [lambda outcome: "yes", _Checker(), _async_none, _raising],
                         ids=["str", "object", "async-None", "raises"])
async def test_a_verifier_that_raises_or_returns_a_non_boolean_is_a_marked_replay(verifier):
    run = await _record()
    result = await repair(run, example.build_failing, verifier, [_add_call(run).step_id], k=0, store=False,
                          max_replays=2, sandbox=default_sandbox(), probe=False)
    tried = _tried(result)
    assert not result.repaired and len(tried) == 2  # the search went on to the next proposal, within the budget
    assert all(r.error is not None and r.error.type == "VerifierError" and not r.flipped for r in tried)
    said = tried[0].error.message
    assert ("raised KeyError" in said) if verifier is _raising else ("not a Verdict or a bool" in said)
    assert all(r.run is not None for r in tried)  # the replayed runs themselves were kept


async def test_a_verifier_taking_the_answer_text_still_gets_the_text():
    run = await _record()

    def check(answer: str) -> bool:
        assert isinstance(answer, str)
        return "RESULT: 126" in answer

    result = await repair(run, example.build_failing, check, [_add_call(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), probe=False)
    assert result.repaired and all(r.error is None for r in _tried(result))


async def test_a_proposal_after_which_the_framework_raises_is_a_marked_replay_and_the_search_goes_on():
    run = await _record(breaking_reviewer)
    result = await repair(run, breaking_reviewer, example.verify, [_add_call(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), probe=False)
    tried = _tried(result)
    raised = [r for r in tried if r.error is not None]
    fixed = [r for r in tried if r.intervention.replacement == {"a": 17, "b": 25}]
    assert fixed and fixed[0] in raised and fixed[0].error.type == "ValueError"
    assert "the reviewer's model broke" in fixed[0].error.message
    assert tried.index(fixed[0]) < len(tried) - 1  # more proposals were tried after it
    assert not result.repaired
    assert len(raised) < len(tried)  # only the replays that reached the broken reviewer are marked


def test_cli_prints_one_line_per_marked_replay_and_no_traceback(capsys):
    from causaltrace.cli import main

    run = asyncio.run(_record())
    capsys.readouterr()
    step = _add_call(run)
    code = main(["repair", run.run_id, "--factory", f"{__file__}:broken_factory", "--verify",
                 f"{EXAMPLES / 'autogen_team.py'}:verify", "--steps", str(step.index), "--max-replays", "3", "-k", "0"])
    assert code == 1  # no repair found (issue 33: repair's exit code says so)
    out, err = capsys.readouterr()
    progress = [line for line in err.splitlines() if "· step #" in line]
    assert len(progress) == 3 and all("(RuntimeError)" in line for line in progress), err
    assert "Traceback" not in err and "the factory broke" not in err
    assert "no repair found in 3 replays" in out and "budget ran out" in out


# ------------------------------------------------------------------------------- the predictive path's budget


def _imported_run() -> Any:
    from causaltrace.collector.otlp import load_otlp_json

    (run,) = load_otlp_json(EXAMPLES / "sample_run.otlp.jsonl")
    assert not run.recording or not run.recording.calls
    return run


def _judge(*, predict: bool, agree: bool) -> tuple[Any, list[str]]:
    from causaltrace.attribution.judge import Judge
    from causaltrace.testing import FunctionJudge

    stages: list[str] = []

    def model(messages: Any, info: Any) -> str:
        stages.append(info.stage_id)
        if info.stage_id == "predict":
            return json.dumps({"would_succeed": predict, "confidence": 0.8, "reasoning": "scripted"})
        if info.stage_id == "consensus":
            return json.dumps({"agreement": "AGREE" if agree else "DISAGREE", "confidence": 0.9,
                               "reasoning": "scripted"})
        return json.dumps({"corrected": "{\"start\": 1, \"stop\": 11}", "changes_made": "stop 10 -> 11"})

    return Judge(FunctionJudge(model), cache=False), stages


async def test_predictions_count_against_max_replays_and_the_explanation_says_predictions():
    run = _imported_run()
    judge, stages = _judge(predict=False, agree=True)
    result = await repair(run, None, "55", k=1, model=judge, store=False, max_replays=2, prune=False)
    assert not result.repaired and result.budget_exhausted == "replays"
    assert result.predictions == 2 and result.replays == 0 and stages.count("predict") == 2
    explanation = result.diagnosis.explanation
    assert "2 predictions" in explanation and "0 replays" not in explanation
    assert "budget of replays ran out" in explanation


async def test_a_predicted_flip_the_critics_reject_is_said_so_not_0_replays():
    run = _imported_run()
    call = next(s for s in run.steps if s.tool_name == "add_range" and s.kind == "tool_call")
    judge, stages = _judge(predict=True, agree=False)
    result = await repair(run, None, "55", [call.step_id], k=1, model=judge, store=False)
    assert not result.repaired and result.predictions == 1 and stages.count("consensus") == 2
    explanation = result.diagnosis.explanation
    assert "1 predictions" in explanation and "0 replays" not in explanation
    assert f"the critics' consensus rejected the predicted flip at step #{call.index}" in explanation


# ------------------------------------------------------------------------------------------ provenance pruning


async def test_provenance_prunes_steps_that_never_reach_the_answer_without_moving_the_decisive_step():
    from causaltrace.attribution.stages.provenance import reaches_answer
    from causaltrace.testing.faults import all_cases, runner

    case = next(c for c in all_cases() if c.name == "smol-squares-range")
    run = await runner.record(case)
    reach = reaches_answer(run)
    unreached = {s.index for s in run.candidate_steps() if reach.get(s.step_id) == 0.0}
    true_step = case.true_step(run)
    assert unreached and min(unreached) < true_step  # a pruned step comes before the decisive one

    # the alternatives' search (corrections off): with them, the code's span correction flips at once either way
    pruned = await repair(run, case.factory, case.verify, k=0, store=False, probe=False, corrections=False)
    full = await repair(run, case.factory, case.verify, k=0, store=False, probe=False, prune=False, corrections=False)
    assert run.step(pruned.decisive.step_id).index == run.step(full.decisive.step_id).index == true_step
    assert set(pruned.pruned) == unreached and full.pruned == []
    assert not {a.index for a in pruned.attempts} & unreached  # never replayed
    assert {a.index for a in full.attempts} & unreached  # the unpruned search spent replays on them
    assert pruned.replays < full.replays
    assert "Provenance ruled out" in pruned.diagnosis.explanation
    assert pruned.diagnosis.artifacts["pruned"]["steps"] == sorted(unreached)
