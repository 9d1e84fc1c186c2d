"""Findings, the unit of blame (issue 32 slice 1; :mod:`causaltrace.attribution.findings`): each detector's finding
names the steps and values it compares, a framework's standard opening is no finding, a comparison with an unrelated
source blames nothing, and a diagnosis whose top candidate has no finding is uncertain ("no evidence, no verdict").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import causaltrace
from _builders import RunBuilder
from causaltrace.attribution.findings import _common
from causaltrace.attribution.stages.confidence import UNCERTAIN_BELOW
from causaltrace.attribution.stages.dependencies import DependencyGraph, Edge
from causaltrace.schema import FINDING_FAMILIES, Outcome, Verdict

FINDINGS_DIR = Path(causaltrace.__file__).parent / "attribution" / "findings"
FAILED = Outcome(status="failure", final_answer="152", verdict=Verdict(passed=False, reason="expected 197"))


def _clean_run(opening: str, *, kind: str = "planning", answer: str = "197"):
    """A run that does what it was asked: an opening, the tool called with the task's numbers, its result, the
    answer carrying the result (the failing outcome is substituted by the caller: a twin)."""
    return (RunBuilder("clean").task("What is 172 + 25? Use the add tool and answer with the number.")
            .llm("solver", opening, deps=[("task", "saw")])
            .step(kind, "solver", content=opening, outputs={"text": opening}, deps=[("llm-1", "produced_by")])
            .llm("solver", "Calling add.", tool_calls=[{"name": "add", "arguments": {"a": 172, "b": 25}}],
                 deps=[("llm-1", "continues")])
            .tool_call("solver", "add", {"a": 172, "b": 25}, deps=[("llm-2", "produced_by")])
            .tool_response("solver", "197", deps=[("call-1", "tool_result_of")])
            .llm("solver", answer, deps=[("resp-1", "observed"), ("llm-2", "continues")])
            .final_answer("solver", answer, deps=[("llm-3", "produced_by")])
            .build(outcome=FAILED))


def _slipped_run():
    """The same run with a copy slip: the solver passes 127 where the task gave 172 (two digits swapped)."""
    return (RunBuilder("slipped").task("What is 172 + 25? Use the add tool and answer with the number.")
            .llm("solver", "Calling add.", tool_calls=[{"name": "add", "arguments": {"a": 127, "b": 25}}],
                 deps=[("task", "saw")])
            .tool_call("solver", "add", {"a": 127, "b": 25}, deps=[("llm-1", "produced_by")])
            .tool_response("solver", "152", deps=[("call-1", "tool_result_of")])
            .llm("solver", "152", deps=[("resp-1", "observed"), ("llm-1", "continues")])
            .final_answer("solver", "152", deps=[("llm-2", "produced_by")])
            .build(outcome=FAILED))


SMOLAGENTS_FACTS_SURVEY = """## 1. Facts survey
### 1.1. Facts given in the task
- We must add 172 and 25 with the add tool and answer with the number.
### 1.2. Facts to look up
- None: both numbers are given.
### 1.3. Facts to derive
- The sum of 172 and 25.
## 2. Plan
1. Call the add tool with 172 and 25.
2. Answer with the number it returns.
<end_plan>"""

MAGENTIC_FACTS_SHEET = """Here is an initial fact sheet to consider:
1. GIVEN OR VERIFIED FACTS
   - The request asks for 172 + 25, computed with the add tool, answered with the number.
2. FACTS TO LOOK UP
   - None.
3. FACTS TO DERIVE
   - The sum.
4. EDUCATED GUESSES
   - The add tool returns the sum as a number.
Here is the plan to follow as best as possible:
- solver: call add with 172 and 25 and report the number."""

RESTATED = "The task: what is 172 + 25? I will use the add tool and answer with the number."


@pytest.mark.parametrize("opening, kind", [(SMOLAGENTS_FACTS_SURVEY, "planning"), (MAGENTIC_FACTS_SHEET, "message"),
                                           (RESTATED, "message")],
                         ids=["smolagents-facts-survey", "magentic-facts-sheet", "task-restated"])
def test_a_standard_opening_is_no_finding_and_the_diagnosis_says_uncertain(opening, kind):
    run = _clean_run(opening, kind=kind)
    d = causaltrace.diagnose_sync(run)
    assert d.findings == ()
    assert d.basis == "none" and d.no_evidence
    assert d.confidence is not None and d.confidence < UNCERTAIN_BELOW
    assert "uncertain" in d.explanation and "ranks first" not in d.explanation
    assert all(c.findings == () for c in d.candidates)


def test_a_changed_value_is_a_finding_naming_its_source_and_value():
    run = _slipped_run()
    d = causaltrace.diagnose_sync(run)
    assert d.basis == "finding"
    top = d.top_findings
    assert top and top[0].family == "value_changed" and top[0].index == d.decisive_step_index
    roles = {e.role: e for e in top[0].evidence}
    assert roles["source"].step_id == "task" and roles["source"].value == "172"  # the task gave 172
    assert roles["changed"].value == "127" and roles["changed"].step_id == top[0].step_id
    assert "172" in top[0].claim and "127" in top[0].claim
    assert d.confidence is not None and d.confidence >= UNCERTAIN_BELOW
    assert d.candidates[0].findings == ("value_changed",)


def test_findings_do_not_depend_on_the_outcome():
    """The twin property's precondition: detectors never read the Outcome, so the run with a passing outcome gives
    the same findings (ids and all) as with the failing one."""
    failing = _slipped_run()
    passing = failing.model_copy(update={"outcome": Outcome(status="success", final_answer="152",
                                                            verdict=Verdict(passed=True))})
    a = causaltrace.diagnose_sync(failing, force=True)
    b = causaltrace.diagnose_sync(passing, force=True)
    assert a.findings == b.findings and a.findings


def _graph(edges: list[tuple[int, int]], n: int) -> DependencyGraph:
    return DependencyGraph(edges=[Edge(p, c, "saw", "test") for p, c in edges], source="explicit", nodes=list(range(n)))


def test_a_comparison_is_related_only_to_an_ancestor_or_the_task():
    run = (RunBuilder("r").task("Send the refund request to billing.")
           .step("speaker_selection", "router", content="support", outputs={"selected": "support"})
           .tool_response("lookup", "billing is closed today")
           .message("planner", "Billing handles refunds.")
           .step("speaker_selection", "router", content="support", outputs={"selected": "support"})
           .build())
    graph = _graph([(0, 4), (3, 4), (2, 4)], len(run.steps))
    related = _common.related_source
    assert related(run, graph, 4, -1)  # the task
    assert related(run, graph, 4, 3, routing=True)  # a plan the choice read
    assert not related(run, graph, 4, 1, routing=True)  # an earlier routing choice is no source of a route
    # a tool's result the choice was decided on (a classifier's "billing" the routing reply read) is its request
    assert related(run, graph, 4, 2, routing=True)
    assert not related(run, _graph([(0, 4)], len(run.steps)), 4, 3)  # not an ancestor: never read
    # a result that merely came earlier — reached only through steps that decided something else — is no request
    run = (RunBuilder("r2").task("Send the refund request to the right desk.")
           .tool_response("lookup", "billing is closed today")
           .message("planner", "Noted the opening hours.")
           .message("planner", "Now route the request.")
           .step("speaker_selection", "router", content="support", outputs={"selected": "support"})
           .build())
    chain = _graph([(1, 2), (2, 3), (3, 4)], len(run.steps))
    assert not related(run, chain, 4, 1, routing=True)
    assert related(run, chain, 4, 1)  # ... though a number there could be a value's source


def test_every_family_maps_to_a_mast_mode_or_none_and_every_detector_module_says_what_it_finds():
    assert set(FINDING_FAMILIES) >= {"value_changed", "superseded_value", "omission", "unfit_routing", "task_drift",
                                     "made_up_data", "unchecked_approval", "unrecovered_error", "loop_no_progress",
                                     "ignored_instruction"}
    from causaltrace.schema import ERROR_CATEGORIES

    assert all(v is None or v in ERROR_CATEGORIES for v in FINDING_FAMILIES.values())
    for path in sorted(FINDINGS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{path.name} has no docstring"
        source = path.read_text(encoding="utf-8")
        # detectors read kinds, edges and values: never the outcome, never a speaker's name
        assert ".outcome" not in source, f"{path.name} reads the run's outcome"
        assert not re.search(r"\.agent\s*(==|!=|in|not in)\s*[\"'(\[{]", source), (
            f"{path.name} branches on a speaker's name")


def test_confidence_is_one_function_of_the_findings_for_live_runs_and_logs():
    """Issue 32 item 4: one calibrated model; a finding at the top raises it, a stronger finding more, a loop (never
    right on Who&When's dev half) less; the same features give the same confidence whatever produced the run."""
    from causaltrace.attribution.stages.confidence import evidence_confidence, evidence_features

    none = evidence_confidence(evidence_features([], 0.0, live=True, n=12))
    weak = evidence_confidence(evidence_features(["value_changed"], 0.3, live=True, n=12))
    strong = evidence_confidence(evidence_features(["value_changed"], 1.0, live=True, n=12))
    loop = evidence_confidence(evidence_features(["loop_no_progress"], 1.0, live=True, n=12))
    assert none < weak < strong and loop < strong
    assert evidence_confidence(evidence_features(["value_changed"], 1.0, live=False, n=12)) <= strong
    d = causaltrace.diagnose_sync(_slipped_run(), store=False)
    assert d.confidence == evidence_confidence(evidence_features(
        ["value_changed"], 1.0, live=True, n=len(d.artifacts["rank"]["candidates"])))


def _forecast_run(used: int, task: str = "What will the temperature be in Oslo on Tuesday, in Fahrenheit?",
                  forecast: str = "Oslo forecast: Monday 18 C, Tuesday 21 C, Wednesday 16 C"):
    """A forecaster reads a three-day forecast and converts one day's Celsius figure."""
    return (RunBuilder("forecast").task(task)
            .llm("forecaster", "Looking it up.", tool_calls=[{"name": "get_forecast", "arguments": {"city": "Oslo"}}],
                 deps=[("task", "saw")])
            .tool_call("forecaster", "get_forecast", {"city": "Oslo"}, deps=[("llm-1", "produced_by")])
            .tool_response("forecaster", forecast, deps=[("call-1", "tool_result_of")])
            .llm("forecaster", "Converting.", tool_calls=[{"name": "c_to_f", "arguments": {"celsius": used}}],
                 deps=[("resp-1", "observed"), ("llm-1", "continues")])
            .tool_call("forecaster", "c_to_f", {"celsius": used}, deps=[("llm-2", "produced_by")])
            .tool_response("forecaster", f"fahrenheit: {used * 9 / 5 + 32}", deps=[("call-2", "tool_result_of")])
            .llm("forecaster", f"F: {used * 9 / 5 + 32}", deps=[("resp-2", "observed"), ("llm-2", "continues")])
            .final_answer("forecaster", f"F: {used * 9 / 5 + 32}", deps=[("llm-3", "produced_by")])
            .build(outcome=FAILED))


def test_a_number_read_from_the_entry_the_request_does_not_ask_for_is_a_finding():
    """The misread observation (zoo tuning half: smol-misread-oslo): Monday's 18 converted where the task asks for
    Tuesday; the finding's source is Tuesday's 21, so repair's correction puts it back."""
    from causaltrace.replay.corrections import corrections_for

    run = _forecast_run(18)
    d = causaltrace.diagnose_sync(run, store=False)
    [f] = [f for f in d.top_findings if "wrong entry" in f.claim]
    assert d.basis == "finding" and run.step_at(d.decisive_step_index).tool_name == "c_to_f"
    assert {e.role: e.value for e in f.evidence} == {"source": "21", "changed": "18"}
    [fix] = corrections_for(run.step_at(f.index), run, d.findings)
    assert fix.replacement == {"celsius": 21}


def test_a_single_digit_a_call_passes_from_the_wrong_entry_is_a_finding():
    """A single digit tells no entry in prose (a traceback's line 6), but a call that passes it picked it (zoo tuning
    half: smol-misread-kyiv, Wednesday's 3 converted for Thursday)."""
    cold = "Oslo forecast: Monday 3 C, Tuesday 5 C, Wednesday 8 C"
    d = causaltrace.diagnose_sync(_forecast_run(3, forecast=cold), store=False)
    [f] = [f for f in d.top_findings if "wrong entry" in f.claim]
    assert {e.role: e.value for e in f.evidence} == {"source": "5", "changed": "3"}
    assert not [f for f in causaltrace.diagnose_sync(_forecast_run(5, forecast=cold), store=False).findings
                if "wrong entry" in f.claim]


def test_the_right_entry_or_an_entry_the_request_excludes_is_no_finding():
    assert not [f for f in causaltrace.diagnose_sync(_forecast_run(21), store=False).findings
                if "wrong entry" in f.claim]
    # the request names no single entry: no evidence either way
    vague = _forecast_run(18, task="What will the temperature be in Oslo this week, in Fahrenheit?")
    assert not [f for f in causaltrace.diagnose_sync(vague, store=False).findings if "wrong entry" in f.claim]
    excluded = _forecast_run(18, task="Give the Oslo temperature in Fahrenheit for any day not Tuesday.")
    assert not [f for f in causaltrace.diagnose_sync(excluded, store=False).findings if "wrong entry" in f.claim]


def _stock_run(answer: str):
    """An agent reads the stock, reserves 4 units, reads the stock again (13), then answers."""
    b = (RunBuilder("stock").task("Reserve 4 units of SKU A-7, then report how many remain available.")
         .tool_call("clerk", "get_stock", {"sku": "A-7"}, deps=[("task", "saw")])
         .tool_response("clerk", "A-7 available: 17", deps=[("call-1", "tool_result_of")])
         .tool_call("clerk", "reserve", {"sku": "A-7", "units": 4}, deps=[("resp-1", "saw")])
         .tool_response("clerk", "reserved 4", deps=[("call-2", "tool_result_of")])
         .tool_call("clerk", "get_stock", {"sku": "A-7"}, deps=[("resp-2", "saw")])
         .tool_response("clerk", "A-7 available: 13", deps=[("call-3", "tool_result_of")])
         .message("clerk", answer, deps=[("resp-1", "saw"), ("resp-3", "saw")]))
    return b.final_answer("clerk", answer, deps=[("message-1", "answer_of")]).build(outcome=FAILED)


def test_a_number_a_later_reading_of_the_same_query_superseded_is_a_finding():
    from causaltrace.replay.corrections import corrections_for

    run = _stock_run("A-7 has 17 units available.")
    d = causaltrace.diagnose_sync(run, store=False)
    [f] = [f for f in d.findings if f.family == "superseded_value"]
    assert {e.role: e.value for e in f.evidence} == {"source": "17", "superseded_by": "13", "changed": "17"}
    assert f.category == "FM-2.5" and d.decisive_step_index == f.index
    [fix] = corrections_for(run.step_at(f.index), run, d.findings)
    assert fix.replacement == "A-7 has 13 units available."


def test_the_latest_reading_or_both_readings_compared_is_no_stale_value():
    for answer in ("A-7 has 13 units available.", "A-7 went from 17 to 13 units available."):
        d = causaltrace.diagnose_sync(_stock_run(answer), store=False)
        assert not [f for f in d.findings if f.family == "superseded_value"], answer
