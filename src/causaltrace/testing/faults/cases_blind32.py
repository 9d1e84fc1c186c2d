"""The fault cases of the teams written blind to the attribution (:mod:`.blind32_smolagents`,
:mod:`.blind32_autogen`): twelve teams across both frameworks and every team shape, each with ONE planted decisive
error and a recovered tool error, its successful twin (``fixed_factory``) and a strict verifier. Every case is held
out of all tuning (``held_out=True``); :func:`~.runner.all_cases` appends them after every other case."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from causaltrace.schema import Outcome, Run, Step, Verdict
from causaltrace.testing.faults.cases import FaultCase, FaultType, answer_is, first_step

__all__ = ["answer_marked", "blind32_cases"]


def answer_marked(expected: str) -> Callable[[Outcome], Verdict]:
    """A strict verifier for the AutoGen teams: the value after the final answer's last ``ANSWER:`` (to the end of
    its line, without a trailing TERMINATE / APPROVE keyword or full stop) must be exactly ``expected``."""

    def verify(outcome: Outcome) -> Verdict:
        lines = re.findall(r"ANSWER:\s*([^\n]*)", str(outcome.final_answer or ""))
        if not lines:
            return Verdict(passed=False, reason="the final answer has no 'ANSWER:' line")
        value = re.sub(r"\s*(TERMINATE|APPROVE)\s*$", "", lines[-1]).strip().rstrip(".").strip()
        if value == expected:
            return Verdict(passed=True)
        return Verdict(passed=False, reason=f"the answer is {value!r}, expected {expected!r}")

    verify.__name__ = f"answer_marked_{expected}"
    return verify


def _case(name: str, framework: Literal["smolagents", "autogen"], fault: FaultType, task: str,
          build: Callable[..., Any], verify: Callable[[Outcome], Verdict], rule: Callable[[Run], Step],
          rule_text: str) -> FaultCase:
    """A held-out case whose factory is ``build(fail=True)`` and whose twin is ``build(fail=False)``."""
    return FaultCase(name=name, framework=framework, fault=fault, task=task, factory=partial(build, fail=True),
                     fixed_factory=partial(build, fail=False), verify=verify, rule=rule, rule_text=rule_text,
                     held_out=True)


def _smolagents_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import blind32_smolagents as s

    sm = "smolagents"
    return [
        _case("blind32-sm-crm-namesake", sm, "wrong_entity", s.CRM_TASK, s.build_crm_lookup, answer_is("1875.25"),
              first_step("tool_call", tool="get_balance"),
              "the first get_balance tool_call (it takes the first search hit, the Portland namesake)"),
        _case("blind32-sm-orders-cancelled", sm, "ignored_instruction", s.ORDERS_TASK, s.build_order_stats,
              answer_is("120.00"), first_step("code_execution", contains="average = round("),
              "the code that computes the average (it keeps the cancelled orders)"),
        _case("blind32-sm-reorder-sku", sm, "wrong_tool_argument", s.REORDER_TASK, s.build_reorder,
              answer_is("3435.80"),
              first_step("code_execution", agent="purchasing_manager", contains="supplier_agent("),
              "the manager's code delegating the quote to supplier_agent (SKU KB-4417 for KB-4471)"),
        _case("blind32-sm-trip-partial", sm, "premature_termination", s.TRIP_TASK, s.build_trip_budget,
              answer_is("665"), first_step("tool_call", agent="travel_planner", tool="final_answer"),
              "the manager's final_answer tool_call right after the flight report (the hotel never priced)"),
        _case("blind32-sm-invoice-cents", sm, "wrong_unit", s.INVOICE_TASK, s.build_invoice_total,
              answer_is("4886.75"), first_step("code_execution", contains="total = sum("),
              "the code that sums the amounts due (cents reported as dollars)"),
        _case("blind32-sm-stock-stale", sm, "stale_value", s.STOCK_TASK, s.build_stock_reservation,
              answer_is("13"), first_step("tool_call", tool="final_answer"),
              "the final_answer tool_call (it reports the availability read before the reservation)"),
    ]


def _autogen_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import blind32_autogen as a

    ag = "autogen"
    return [
        _case("blind32-ag-sales-transposed", ag, "wrong_fact", a.SALES_TASK, a.build_sales_summary,
              answer_marked("1482300; +8.0%"), first_step("message", agent="writer"),
              "the writer's summary (revenue 1428300 for the analyst's 1482300)"),
        _case("blind32-ag-latency-column", ag, "misread_observation", a.LATENCY_TASK, a.build_latency_report,
              answer_marked("431 ms"), first_step("message", agent="sre_agent", contains="p95 latency on"),
              "the sre_agent's report of the p95 latency (read from the p99 column)"),
        _case("blind32-ag-refund-speaker", ag, "wrong_speaker", a.REFUND_TASK, a.build_refund_desk,
              answer_marked("298.00 USD"), first_step("speaker_selection", contains="billing_agent"),
              "the selector's first choice of speaker (billing_agent instead of refunds_agent)"),
        _case("blind32-ag-fx-madeup-rate", ag, "fabricated_data", a.FX_TASK, a.build_fx_conversion,
              answer_marked("14183.75 USD"), first_step("message", agent="fx_researcher", contains="1.1300"),
              "the fx_researcher's message stating a rate no tool returned (1.1300)"),
        _case("blind32-ag-warranty-handoff", ag, "wrong_handoff", a.WARRANTY_TASK, a.build_warranty_swarm,
              answer_marked("2026-03-02"), first_step("tool_call", agent="triage", tool="transfer_to_sales"),
              "triage's handoff to sales (a warranty question on an owned device belongs to support)"),
        _case("blind32-ag-margin-plan-year", ag, "wrong_plan_word", a.MARGIN_TASK, a.build_margin_magentic,
              answer_marked("38.4%"), first_step("planning", contains="Q3 2024"),
              "the orchestrator's task ledger whose plan names Q3 2024 for the task's Q3 2025"),
    ]


def blind32_cases(framework: str | None = None) -> list[FaultCase]:
    """The blind cases (optionally of one framework), smolagents first; every one ``held_out=True``."""
    cases: list[FaultCase] = []
    if framework in (None, "smolagents"):
        cases += _smolagents_cases()
    if framework in (None, "autogen"):
        cases += _autogen_cases()
    return cases
