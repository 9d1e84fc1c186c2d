"""Task drift at the opening (issue 20 item 4; :mod:`causaltrace.attribution.stages.drift`): a manager whose plan is
about another task is the decisive step, not the experts who faithfully debug what it gave them. Built through the
real importer (``whowhen_run_from_data``, Algorithm-Generated's shape) and ranked by the real ``graph`` method."""

from __future__ import annotations

from pathlib import Path

import pytest

import causaltrace
from causaltrace.attribution.stages.drift import find_task_drift
from causaltrace.collector.whowhen import whowhen_run_from_data

TASK = ("All of the individuals who formally held the position of United States secretary of homeland security "
        "prior to April 2019 have a bachelor's degree. Of the universities these degrees were from, which is the "
        "westernmost university and which is the easternmost? Give them as a comma-separated list.")

OFF_TASK_PLAN = """You are given a task and advice from your manager with a specific plan.
# Task description
Analyze and resolve the issue causing the code execution to fail with exit code 1 and output 'unknown language
unknown'.
## Plan for solving the task
1. Review the provided code to identify any syntax or logical errors.
2. Debug the code to pinpoint the exact cause of the failure.
3. Optimize the code if necessary to ensure smooth execution.
4. Verify the correctness of the solution by running the code successfully.
## Output format
- Detailed explanation of the identified issue, the steps taken to resolve it, the corrected code."""

ON_TASK_PLAN = """You are given a task and advice from your manager with a specific plan.
# Task description
List the secretaries of homeland security before April 2019 (not acting ones), find the universities of their
bachelor's degrees, and give the westernmost and the easternmost university as a comma-separated list.
## Plan for solving the task
1. Collect the secretaries and their bachelor's degree universities.
2. Locate each university and compare their longitudes.
3. Report the westernmost and easternmost, comma-separated."""

DEBUGGER = ("The code failed because the language was not given. I wrote a corrected version that sets the language "
            "explicitly and prints a status line.\n```python\nprint('language: python')\n```")
TERMINAL = "exitcode: 0 (execution succeeded)\nCode output: language: python"
ANSWER = ("The code now runs successfully: the issue was the missing language flag, fixed and verified. The "
          "corrected code prints its status line as expected.")


def _run(tmp_path: Path, opening: str, task: str = TASK):
    history = [
        {"name": "PythonDebugging_Expert", "role": "assistant", "content": opening},
        {"name": "PythonDebugging_Expert", "role": "user", "content": DEBUGGER},
        {"name": "Computer_terminal", "role": "user", "content": TERMINAL},
        {"name": "Verification_Expert", "role": "user", "content": ANSWER},
    ]
    data = {"question": task, "history": history, "mistake_agent": "PythonDebugging_Expert", "mistake_step": "0",
            "ground_truth": "Santa Clara University, Boston University", "is_correct": False}
    return whowhen_run_from_data(data, tmp_path / "Algorithm-Generated" / "2.json")


def test_an_opening_plan_about_another_task_is_the_decisive_step(tmp_path):
    run = _run(tmp_path, OFF_TASK_PLAN)
    drift = find_task_drift(run)
    assert drift is not None and drift.index == 0 and drift.shared <= 2
    d = causaltrace.diagnose_sync(run, "graph", store=False)
    assert d.decisive_step_index == 0 and d.agent == "PythonDebugging_Expert"
    assert d.category == "FM-2.3"
    assert any("opens the run on another task" in r for r in d.candidates[0].reasons)
    assert d.artifacts["task_drift"]["drift"]["index"] == 0


def test_the_drift_adds_its_weight_to_the_opening_only(tmp_path):
    # the A/B behind the signal: ablated, no candidate carries it and only the opening's score changes, by the weight
    from causaltrace.attribution.methods.graph import DEFAULT_WEIGHTS

    run = _run(tmp_path, OFF_TASK_PLAN)
    with_drift = causaltrace.diagnose_sync(run, "graph", store=False)
    without = causaltrace.diagnose_sync(run, "graph", store=False, ablate=["task_drift"])
    assert without.artifacts["task_drift"] == {"ablated": True}
    assert not any("another task" in r for c in without.candidates for r in c.reasons)
    assert without.category != "FM-2.3"
    scores = {c.index: c.score for c in without.candidates}
    delta = {c.index: round(c.score - scores[c.index], 4) for c in with_drift.candidates}
    assert delta == {i: (DEFAULT_WEIGHTS["drift"] if i == 0 else 0.0) for i in scores}


def test_an_opening_that_restates_the_task_does_not_drift(tmp_path):
    assert find_task_drift(_run(tmp_path, ON_TASK_PLAN)) is None
    # quoting the task verbatim above an unrelated plan is on the task as well
    assert find_task_drift(_run(tmp_path, f"# General Task\n{TASK}\n\n{OFF_TASK_PLAN}")) is None


@pytest.mark.parametrize("opening", ["Let me look into the code first.", "```python\nprint('hello')\n```"])
def test_a_short_first_action_is_not_judged_as_a_plan(tmp_path, opening):
    run = _run(tmp_path, opening)
    drift = find_task_drift(run)
    # the short action is skipped; the judged opening is the first substantial text step after it
    assert drift is None or drift.index != 0


def test_a_task_too_short_to_compare_is_never_drifted_from(tmp_path):
    assert find_task_drift(_run(tmp_path, OFF_TASK_PLAN, task="What is 17 + 25?")) is None


def test_the_drifting_opening_is_evidence_for_the_llm_stages(tmp_path):
    from causaltrace.attribution.stages.drift import find_task_drift as drift_of
    from causaltrace.attribution.stages.evidence import build_evidence

    run = _run(tmp_path, OFF_TASK_PLAN)
    evidence = build_evidence(run, None, [], drift_of(run))
    assert evidence.of(0)[0].startswith("task: opens the run on another task")
    assert not any(line.startswith("task:") for i in (1, 3) for line in evidence.of(i))


def test_a_pick_the_drift_supports_is_more_confident_than_the_same_pick_without_it(tmp_path):
    # the confidence model of imported logs has a term for a whole-run finding (fitted on Who&When dev: 10 of 15
    # such picks right), so the CLI states this verdict instead of calling it uncertain
    from causaltrace.attribution.stages.confidence import UNCERTAIN_BELOW

    run = _run(tmp_path, OFF_TASK_PLAN)
    with_drift = causaltrace.diagnose_sync(run, "graph", store=False)
    without = causaltrace.diagnose_sync(run, "graph", store=False, ablate=["task_drift"])
    assert with_drift.artifacts["rank"]["candidates"][0]["signals"]["finding"] is True
    assert with_drift.confidence >= UNCERTAIN_BELOW
    assert without.confidence < with_drift.confidence


def _restating_team(tmp_path: Path, opening: str):
    history = [
        {"name": "Homeland_Expert", "role": "assistant", "content": opening},
        {"name": "Geography_Expert", "role": "user", "content": (
            "The secretaries before April 2019 studied at Santa Clara University, Boston University, the "
            "University of Colorado and Harvard. Westernmost: Harvard; easternmost: Santa Clara University.")},
        {"name": "Verification_Expert", "role": "user", "content": (
            "Checked the list: Harvard, Santa Clara University. The westernmost and the easternmost are as stated.")},
    ]
    data = {"question": TASK, "history": history, "mistake_agent": "Geography_Expert", "mistake_step": "1",
            "ground_truth": "Santa Clara University, Boston University", "is_correct": False}
    return whowhen_run_from_data(data, tmp_path / "Algorithm-Generated" / "6.json")


def test_an_opening_that_only_restates_the_task_is_the_prompt_not_the_decisive_step(tmp_path):
    from causaltrace.attribution.methods.graph import DEFAULT_WEIGHTS
    from causaltrace.attribution.stages.drift import bare_opening

    run = _restating_team(tmp_path, f"# General Task\n{TASK}\n\n{ON_TASK_PLAN}")
    assert bare_opening(run) == 0 and find_task_drift(run) is None
    d = causaltrace.diagnose_sync(run, "graph", store=False)
    assert d.decisive_step_index == 1 and d.agent == "Geography_Expert"
    opening = next(c for c in d.candidates if c.index == 0)
    assert any("restates the task and adds nothing" in r for r in opening.reasons)
    plain = causaltrace.diagnose_sync(run, "graph", store=False, weights={"restatement": 1.0})
    before = next(c for c in plain.candidates if c.index == 0)
    assert round(opening.score, 4) == round(before.score * DEFAULT_WEIGHTS["restatement"], 4)


@pytest.mark.parametrize("extra", [
    "\n```python\nprint(len(secretaries))\n```",           # code of its own
    "\nEarlier results: 7 secretaries, 4213 miles apart.",  # a figure the task does not give
])
def test_an_opening_with_code_or_figures_of_its_own_is_a_decision(tmp_path, extra):
    from causaltrace.attribution.stages.drift import bare_opening

    assert bare_opening(_restating_team(tmp_path, f"# General Task\n{TASK}\n\n{ON_TASK_PLAN}{extra}")) is None


def test_the_request_is_what_the_task_asks_for_not_its_context():
    from causaltrace.attribution.stages.drift import task_request

    task = ("Heads-up: the nightly job failed again with KeyError: 'store_id'. Separately, for the review I need "
            "the number of orders the Lisbon store shipped in March. Answer 'SHIPPED: <n>'.")
    request = task_request(task)
    assert "Lisbon" in request and "SHIPPED" in request and "KeyError" not in request
    # a task with no asking sentence is its own request
    assert task_request("Seven bridges of Königsberg, walked once each.") == "Seven bridges of Königsberg, walked once each."


def test_a_managers_first_delegation_is_the_opening_it_is_judged_by():
    from _builders import RunBuilder
    from causaltrace.schema import Outcome

    task = ("Our intern's average delivery time for Madrid last week (4.1 days) checks out. Now I need the number "
            "of late deliveries of the Valencia warehouse last week, more than 5 days. Answer 'LATE: <n>'.")
    delegation = ("Recompute the intern's average delivery time for Madrid from the raw shipment records: check each "
                  "shipment's duration, report whether the 4.1 figure holds and name every record that disagrees "
                  "with it, with its shipment id and its recorded duration.")
    run = (RunBuilder("r").task(task)
           .tool_call("manager", "logistics_agent", {"task": delegation})
           .step("final_answer", "manager", content="LATE: 0", outputs={"text": "LATE: 0"})
           .build(outcome=Outcome(status="failure")))
    drift = find_task_drift(run)
    assert drift is not None and drift.index == 1 and drift.shared <= 1
    # the same delegation asking for what the task asks is on the task
    on_task = ("Count the late deliveries of the Valencia warehouse last week (more than 5 days each) from the raw "
               "shipment records and report the number, with each late shipment's id and its recorded duration.")
    run2 = (RunBuilder("r").task(task).tool_call("manager", "logistics_agent", {"task": on_task})
            .step("final_answer", "manager", content="LATE: 0", outputs={"text": "LATE: 0"})
            .build(outcome=Outcome(status="failure")))
    assert find_task_drift(run2) is None
