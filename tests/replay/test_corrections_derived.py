"""Corrections for the families whose fix is not a value the run already holds (issue 32 item 5): an approval nobody
checked, made-up data, a plan or delegation about another task (:mod:`causaltrace.replay.correct_approval`, …).

Each correction is derived from the finding and the run only. On real framework teams driven by the reactive scripted
models (the fault suite's tuning-half teams, and teams of this module), the correction replays into a success at the
finding's step, in both adapters; the same team without the fault (its twin) gets no such correction.
"""

from __future__ import annotations

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.replay.correct_approval import claim_phrase, rejection
from causaltrace.replay.corrections import corrections_for, findings_of
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair
from causaltrace.testing.faults import runner as faults_runner

#: the families of this module's corrections
DERIVED = frozenset({"unchecked_approval", "made_up_data", "task_drift"})


def _zoo_case(name: str):
    from causaltrace.testing.faults.cases_zoo import zoo_autogen_cases, zoo_smolagents_cases

    return next(c for c in zoo_smolagents_cases() + zoo_autogen_cases() if c.name == name)


def _derived_corrections(run) -> list:
    findings = findings_of(run)
    return [c for s in run.steps for c in corrections_for(s, run, findings) if c.finding.family in DERIVED]


def test_a_claim_is_named_in_the_words_its_source_wrote_around_the_value():
    task = "A member buys 3 lamps at 40 dollars each with the 10% member discount. Report 'TOTAL: <dollars>'."
    assert claim_phrase(task, "10") == "10% member discount"
    assert claim_phrase(task, "40") == "40 dollars each with"
    assert claim_phrase("ship 2 kg and 3 kg", "2") == "2 kg"  # a clause ends at "and"
    assert claim_phrase(task, "7") == "7"  # not in the text: the value alone
    assert claim_phrase("pay 1.5 units", "5") == "5"  # a value inside another number is not the value
    text = rejection(["10% member discount"])
    assert text.startswith("REJECT:") and "10% member discount" in text and "APPROVE" not in text.upper()


@pytest.mark.parametrize("name", ["smol-review-lamps", "ag-review-lamps"])
async def test_an_unchecked_approval_is_corrected_by_a_rejection_naming_the_claim(name, tmp_path):
    """The reviewer approved ``TOTAL: 120`` though the task's 10 % discount was never used (the finding's unchecked
    value). The correction replaces the approval — a ToolCallingAgent's ``final_answer`` argument, an AutoGen
    message — by a rejection that names "the task's 10% member discount"; the drafter applies it in the replay and the
    run succeeds: a replay-verified error with a pair. The fixed team's reviewer approves a checked result: no
    finding, no correction."""
    case = _zoo_case(name)
    with zoo_home(tmp_path):
        run = await faults_runner.record(case)
        twin = await faults_runner.record(case, twin=True)
        findings = findings_of(run)
        approval = next(f for f in findings if f.family == "unchecked_approval")
        [fix] = corrections_for(run.step(approval.step_id), run, findings)
        assert fix.basis == "correction" and fix.finding == approval and fix.step_id == approval.step_id
        assert "the task's 10% member discount" in str(fix.replacement)
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and _derived_corrections(twin) == []
    assert result.repaired and result.decisive.step_id == approval.step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == "unchecked_approval"
    assert all(a.basis == "correction" for a in result.attempts)  # found in the corrections' pass
    assert result.pair is not None and result.pair.basis == "correction"
    assert "rejecting the result it approved unchecked" in result.diagnosis.explanation
