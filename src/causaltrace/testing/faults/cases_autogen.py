"""The AutoGen AgentChat fault cases (teams in :mod:`causaltrace.testing.faults.teams_autogen`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.faults.cases import FaultCase, first_step

__all__ = ["autogen_cases", "reports"]


def reports(label: str, expected: str) -> Callable[[Outcome], Verdict]:
    """A strict verifier: the final answer reports ``<label>: <expected>`` (the first such field)."""

    def verify(outcome: Outcome) -> Verdict:
        found = re.search(rf"{label}:\s*([^\s.]+(?:\.\d+)?)", outcome.final_answer or "")
        if found is None:
            return Verdict(passed=False, reason=f"the final answer reports no {label}")
        if found.group(1) != expected:
            return Verdict(passed=False, reason=f"{label} {found.group(1)} is wrong, expected {expected}")
        return Verdict(passed=True)

    verify.__name__ = f"reports_{label}_{expected}"
    return verify


def autogen_cases() -> list[FaultCase]:
    from causaltrace.testing.faults.teams_autogen import BUILDERS

    def case(name: str, builder: str, fault: str, task: str, verify, rule, rule_text: str) -> FaultCase:
        build = BUILDERS[builder]
        return FaultCase(name=name, framework="autogen", fault=fault, task=task,  # type: ignore[arg-type]
                         factory=partial(build, True), fixed_factory=partial(build, False), verify=verify,
                         rule=rule, rule_text=rule_text)

    return [
        case("ag-shop-quantity", "shop", "wrong_tool_argument",
             "Buy 7 boxes of widgets. Look up the unit price and report the total as 'TOTAL: <dollars>'.",
             reports("TOTAL", "84"), first_step("tool_call", tool="multiply"), "the first multiply tool_call"),
        case("ag-split-swapped", "split", "wrong_tool_argument",
             "A dinner bill is split equally among 4 people at table T3. Report each share as 'SHARE: <dollars>'.",
             reports("SHARE", "30"), first_step("tool_call", tool="divide"), "the first divide tool_call"),
        case("ag-slice-end", "slice", "boundary_bug",
             "Add up all the scores of team A with Python; report 'TOTAL: <sum>'.",
             reports("TOTAL", "108"), first_step("message", agent="coder", contains="```python"),
             "the coder's first code message"),
        case("ag-orders-threshold", "orders", "boundary_bug",
             "Count the orders of at least 100 dollars with Python; report 'COUNT: <n>'.",
             reports("COUNT", "4"), first_step("message", agent="coder", contains="```python"),
             "the coder's first code message"),
        case("ag-landmark-height", "landmark", "wrong_fact",
             "How many metres taller is the Eiffel Tower than the Statue of Liberty (93 m)? "
             "Answer as 'DIFF: <metres>'.", reports("DIFF", "237"),
             first_step("message", agent="researcher"), "the researcher's first message"),
        case("ag-fx-rate", "fx", "wrong_fact",
             "Convert 250 EUR to USD at today's rate. Answer as 'USD: <amount>'.", reports("USD", "270.00"),
             first_step("message", agent="fx_agent"), "the fx_agent's first message"),
        case("ag-job-timeout", "job", "nonconverging_loop",
             "Submit the sales report job and report its row count as 'ROWS: <n>'.", reports("ROWS", "4213"),
             first_step("tool_call", tool="wait_for_job"), "the first wait_for_job tool_call"),
        case("ag-newton-bound", "newton", "nonconverging_loop",
             "Compute the square root of the target to 6 decimals with Python; answer as 'ROOT: <value>'.",
             reports("ROOT", "1.414214"), first_step("message", agent="coder", contains="```python"),
             "the coder's first code message"),
        case("ag-swarm-handoff", "swarm", "wrong_handoff",
             "A customer writes: I want a refund for order B7. Resolve the ticket; report 'REFUND: <dollars>'.",
             reports("REFUND", "40"), first_step("handoff", agent="triage"), "triage's first handoff"),
        case("ag-selector-choice", "selector", "wrong_speaker",
             "A customer writes: I want a refund for order B7. Resolve the ticket; report 'REFUND: <dollars>'.",
             reports("REFUND", "40"), first_step("speaker_selection", contains="_agent"),
             "the first selection of billing_agent or tech_agent"),
    ]
