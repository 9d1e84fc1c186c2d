"""The smolagents fault cases (teams in :mod:`causaltrace.testing.faults.teams_smolagents`).

smolagents has no handoff step: a manager's delegation decision lives in its code, so a wrong delegate is planted
as a wrong routing condition in the manager's code (the decisive step is that code; the fix an operator swap).
"""

from __future__ import annotations

from functools import partial

from causaltrace.testing.faults.cases import FaultCase, answer_is, first_step

__all__ = ["smolagents_cases"]


def smolagents_cases() -> list[FaultCase]:
    from causaltrace.testing.faults.teams_smolagents import BUILDERS

    def case(name: str, builder: str, fault: str, task: str, expected: str, rule, rule_text: str) -> FaultCase:
        build = BUILDERS[builder]
        return FaultCase(name=name, framework="smolagents", fault=fault, task=task,  # type: ignore[arg-type]
                         factory=partial(build, True), fixed_factory=partial(build, False),
                         verify=answer_is(expected), rule=rule, rule_text=rule_text)

    code = "python_interpreter"
    return [
        case("smol-shop-quantity", "shop", "wrong_tool_argument",
             "Buy 7 boxes of widgets. Look up the unit price and report the total as 'TOTAL: <dollars>'.",
             "TOTAL: 84", first_step("tool_call", tool="multiply"), "the first multiply tool_call"),
        case("smol-split-swapped", "split", "wrong_tool_argument",
             "A dinner bill is split equally among 4 people at table T3. Report each share as 'SHARE: <dollars>'.",
             "SHARE: 30", first_step("tool_call", tool="divide"), "the first divide tool_call"),
        case("smol-squares-range", "squares", "boundary_bug",
             "What is the sum of the squares of the integers from 1 to 6?", "91",
             first_step("tool_call", agent="manager", tool=code), "the manager's first code"),
        case("smol-readings-threshold", "readings", "boundary_bug",
             "How many readings of sensor A are at least 50?", "4",
             first_step("tool_call", tool=code, contains="for r in readings"), "the first code that counts"),
        case("smol-landmark-height", "landmark", "wrong_fact",
             "How many metres taller is the Eiffel Tower than the Statue of Liberty (93 m)? "
             "Answer as 'DIFF: <metres>'.", "DIFF: 237",
             first_step("tool_call", agent="researcher", tool="final_answer"), "the researcher's final_answer call"),
        case("smol-fx-rate", "fx", "wrong_fact",
             "Convert 250 EUR to USD at today's rate. Answer as 'USD: <amount>'.", "USD: 270.00",
             first_step("tool_call", agent="fx_agent", tool="final_answer"), "the fx_agent's final_answer call"),
        case("smol-newton-bound", "newton", "nonconverging_loop",
             "Compute the square root of the target to 6 decimals; answer as 'ROOT: <value>'.", "ROOT: 1.414214",
             first_step("tool_call", tool=code, contains="while"), "the first code with the Newton loop"),
        case("smol-job-timeout", "job", "nonconverging_loop",
             "Submit the sales report job and report its row count as 'ROWS: <n>'.", "ROWS: 4213",
             first_step("tool_call", tool="wait_for_job"), "the first wait_for_job tool_call"),
        case("smol-ticket-route", "ticket", "wrong_handoff",
             "A customer writes: 'I want a refund for order B7.' Resolve the ticket.", "REFUND: 40",
             first_step("tool_call", agent="manager", tool=code, contains="billing_agent("),
             "the manager's routing code"),
        case("smol-region-route", "region", "wrong_handoff",
             "What is the VAT rate in France?", "VAT: 20%",
             first_step("tool_call", agent="manager", tool=code), "the manager's first (routing) code"),
    ]
