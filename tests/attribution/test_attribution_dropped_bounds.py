"""A requested period across years, narrowed to one year (issue 32, family ``ignored_instruction``).

The request asks for a fiscal year from April 2023 to March 2024; the plan fetches the calendar quarters of 2023
and no call ever uses 2024. The finding is at the plan, with the request's span and the dropped year as evidence;
the twin that fetches 2023-Q2 … 2024-Q1 (the same failing outcome substituted) has none, and neither has a run
whose span shares one year or whose calls carry no dates at all.
"""

from __future__ import annotations

from _builders import RunBuilder
from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.findings.dropped_bounds import year_spans
from causaltrace.schema import Outcome, Verdict

TASK = ("Our fiscal year runs from April to March. How many members joined in fiscal year 2023 (April 2023 to March "
        "2024)? Use the signups tool, one quarter at a time, and answer 'MEMBERS: <n>'.")
FAILED = Outcome(status="failure", final_answer="MEMBERS: 1315",
                 verdict=Verdict(passed=False, reason="expected MEMBERS: 1358"))


def _run(quarters: list[str], task: str = TASK, *, dated: bool = True):
    plan = f"Plan: fetch the signups of {', '.join(quarters)} with the signups tool and add them up."
    b = (RunBuilder("fiscal").task(task)
         .llm("analyst", plan, deps=[("task", "saw")])
         .step("planning", "analyst", content=plan, outputs={"text": plan}, deps=[("llm-1", "produced_by")]))
    for n, q in enumerate(quarters, 1):
        arguments = {"quarter": q} if dated else {"n": n}
        b = (b.llm("analyst", f"signups({q})", tool_calls=[{"name": "signups", "arguments": arguments}],
                   deps=[("llm-1", "continues")])
             .tool_call("analyst", "signups", arguments, deps=[(f"llm-{n + 1}", "produced_by")])
             .tool_response("analyst", f"{q}: {300 + n}", deps=[(f"call-{n}", "tool_result_of")]))
    return (b.llm("analyst", "MEMBERS: 1315", deps=[(f"resp-{len(quarters)}", "observed")])
            .final_answer("analyst", "MEMBERS: 1315", deps=[(f"llm-{len(quarters) + 2}", "produced_by")])
            .build(outcome=FAILED))


def _narrowed(run):
    d = diagnose_sync(run)
    return d, [f for f in d.findings if "narrowed" in f.claim]


def test_a_span_across_years_narrowed_to_one_year_is_an_ignored_instruction_at_the_plan():
    run = _run(["2023-Q1", "2023-Q2", "2023-Q3", "2023-Q4"])
    d, [found] = _narrowed(run)
    plan = next(s.index for s in run.steps if s.kind == "planning")
    assert (found.family, found.index, d.decisive_step_index) == ("ignored_instruction", plan, plan)
    assert [(e.role, e.index, e.value) for e in found.evidence] == [
        ("request", -1, "April 2023 to March 2024"), ("omitted_item", plan, "2024")]
    twin = _run(["2023-Q2", "2023-Q3", "2023-Q4", "2024-Q1"])
    assert _narrowed(twin)[1] == []


def test_a_span_within_one_year_or_calls_without_dates_are_no_evidence():
    assert _narrowed(_run(["2023-Q1", "2023-Q2"], TASK.replace("March 2024", "September 2023")))[1] == []
    assert _narrowed(_run(["2023-Q1", "2023-Q2", "2023-Q3", "2023-Q4"], dated=False))[1] == []


def test_year_spans_reads_spans_whose_years_differ():
    assert year_spans("from April 2023 to March 2024, and 2019 through 2021") == [
        ("April 2023 to March 2024", "2023", "2024"), ("2019 through 2021", "2019", "2021")]
    assert year_spans("from May 2023 to June 2023; pages 2023-2023") == []
