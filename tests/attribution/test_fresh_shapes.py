"""Shapes of failing runs the fault suite lacked, found on issue 32's fresh failing teams (``fresh32-*`` cases of
:mod:`causaltrace.testing.faults.cases_fresh32`, development data): record codes, dates and clock times are values
of their own; a unit substituted where a number's own source stated it; a tool result relayed is no action; a loop
whose first try was answered by an error is decided by its first repeat."""

from __future__ import annotations

from causaltrace.attribution.stages.provenance_changes import is_copy_slip
from causaltrace.attribution.stages.values import values_in


def _kinds(text: str) -> list[tuple[str, str, str]]:
    return [(v.kind, v.key, v.group) for v in values_in(text)]


def test_record_codes_dates_and_times_are_values_not_numbers() -> None:
    got = _kinds("order A-512 on 2026-04-09 at 14:00, invoice INV2041; R-88.")
    assert ("identifier", "A-512", "id:A") in got and ("identifier", "INV-2041", "id:INV") in got
    assert ("identifier", "R-88", "id:R") in got
    assert ("identifier", "2026-04-09", "date") in got and ("identifier", "14:00", "time") in got
    numbers = [key for kind, key, _ in got if kind == "number"]
    assert numbers == []  # 04, 09, 14, 512, 2041: parts of codes, not amounts to compare
    assert ("identifier", "07/12/2026", "written-date") in _kinds("got '07/12/2026'")
    assert [k for k, _, _ in _kinds("12 apples at 3.50, ratio 3:2")].count("number") == 4  # amounts stay numbers


def test_a_code_copied_with_two_digits_swapped_is_a_slip() -> None:
    assert is_copy_slip("A512".replace("A", ""), "521", shortest=3)
    assert is_copy_slip("20260409", "20260406", shortest=3)
    assert not is_copy_slip("512", "734", shortest=3)  # another order's code is another order


def test_identifier_slips_unit_at_origin_relays_and_error_loops_on_a_run() -> None:
    import asyncio

    from causaltrace.attribution.context import DiagnosisContext
    from causaltrace.attribution.findings.loops import detect_loops_without_progress
    from causaltrace.attribution.stages.loops import detect_loops, relays_result
    from causaltrace.attribution.stages.provenance import ProvenanceStage
    from causaltrace.schema import Dependency, Run, Step, StepError

    def step(i, kind, content, agent="clerk", tool=None, args=None, status="ok", deps=()):
        return Step(step_id=f"s{i}", run_id="r", index=i, kind=kind, agent=agent, content=content, tool_name=tool,
                    arguments=args, status=status, error=StepError(type="ToolError", message=content) if status == "error"
                    else None,
                    depends_on=[Dependency(step_id=f"s{d}", kind="saw") for d in deps])

    steps = [
        step(0, "task", "Refund order A-512 and report the distance of 561 km.", agent="user"),
        step(1, "tool_call", 'lookup({"order": "A-512"})', tool="lookup", args={"order": "A-512"}, deps=(0,)),
        step(2, "tool_response", "order A-512: lamp 34.90 EUR; route 561 km by road", tool="lookup", deps=(1,)),
        step(3, "message", "order A-512: lamp 34.90 EUR; route 561 km by road", deps=(2,)),
        step(4, "llm_response", "Porto to Madrid is 561 miles.", deps=(3,)),
        step(5, "tool_call", 'refund({"order": "A-521"})', tool="refund", args={"order": "A-521"}, deps=(4,)),
        step(6, "tool_response", "bad order format", tool="refund", status="error", deps=(5,)),
        step(7, "tool_call", 'refund({"order": "A-521"})', tool="refund", args={"order": "A-521"}, deps=(6,)),
        step(8, "tool_response", "bad order format", tool="refund", status="error", deps=(7,)),
        step(9, "tool_call", 'refund({"order": "A-521"})', tool="refund", args={"order": "A-521"}, deps=(8,)),
        step(10, "tool_response", "bad order format", tool="refund", status="error", deps=(9,)),
    ]
    run = Run(run_id="r", framework="test", task=steps[0].content, steps=steps)
    prov = asyncio.run(DiagnosisContext(run=run, method="graph", judge=None).run_stage(ProvenanceStage()))
    changes = {(c.index, c.kind, c.before, c.after, c.how) for c in prov.changes}
    assert (5, "identifier", "A-512", "A-521", "copy") in changes
    assert (4, "unit", "km", "mi", "substitution") in changes  # the number's own source said km
    assert relays_result(run, steps[3]) and not relays_result(run, steps[4])
    findings = detect_loops_without_progress(run, detect_loops(run))
    assert [f.step_id for f in findings] == ["s7"]  # the first repeat after the error, not the first try
