"""The failure zoo's cases (issue 20 item 2) on the teams of :mod:`.zoo_smolagents` and :mod:`.zoo_autogen` (and
their continuations :mod:`.zoo_smolagents_more` and :mod:`.zoo_autogen_more`: made-up data, a derailed plan).

Each case is a team builder bound to one VARIANT (its data), the task that variant answers, a strict verifier and
the RULE naming the decisive step. The types and what the decisive step is:

=========================  ===================================================================================
type                       decisive step (the rule)
=========================  ===================================================================================
``wrong_plan_word``        the instruction naming the wrong unit (the executor follows it faithfully)
``misread_observation``    the tool call built from the wrong entry of a correct observation
``premature_termination``  the answer given before every item was fetched
``reviewer_approval``      the reviewer's approval of the draft that misses the task's discount
``repetition_progress``    the miscopied divisor AFTER a poll repeated with progress (the repetition is benign)
``ignored_instruction``    the executor's call that ignores "excluding cancelled orders"
``wrong_unit``             the tool call with the wrong unit argument
``wrong_speaker``          the selector's choice of the agent that guesses (AutoGen only: smolagents has no
                           speaker selection)
``boundary_bug``           (the suite's type, here: a divisor) the code averaging three values by 2
``fabricated_data``        the first step that makes the data up after its lookup tool failed (code simulating
                           sample figures, an answer "from what I know", an assumed or hypothetical figure, a
                           placeholder API key, a synthetic series); every later step computes on it faithfully.
                           In a CodeAgent it is the code, not the Thought announcing it: the Thought and the code
                           are one model reply, and replaying an edited Thought leaves the code as it was
``task_derailment``        the opening plan (a planning step, the planner's first message or the manager's first
                           delegation) written for another task than the one given — a KeyError the task mentions
                           in passing, a settled support ticket, a figure the task says checks out; the executors
                           follow it faithfully
=========================  ===================================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.faults.cases import FaultCase, answer_is, first_step

__all__ = ["autogen_case", "smolagents_case", "zoo_autogen_cases", "zoo_pick_cases", "zoo_smolagents_cases"]


def _case(framework: str, builders: dict[str, Callable[..., Any]], name: str, builder: str, fault: str, task: str,
          verify: Callable[[Outcome], Verdict], rule: Any, rule_text: str, **variant: Any) -> FaultCase:
    build = builders[builder]
    return FaultCase(name=name, framework=framework, fault=fault, task=task,  # type: ignore[arg-type]
                     factory=partial(build, True, **variant), fixed_factory=partial(build, False, **variant),
                     verify=verify, rule=rule, rule_text=rule_text)


def smolagents_case(builders: dict[str, Callable[..., Any]]) -> Callable[..., FaultCase]:
    """The row maker of smolagents zoo cases on ``builders``:
    ``case(name, builder, fault, task, expected, rule, rule_text, **variant)``, the final answer verified to be
    ``expected``."""

    def case(name: str, builder: str, fault: str, task: str, expected: str, rule: Any, rule_text: str,
             **variant: Any) -> FaultCase:
        return _case("smolagents", builders, name, builder, fault, task, answer_is(expected), rule, rule_text,
                     **variant)

    return case


def autogen_case(builders: dict[str, Callable[..., Any]]) -> Callable[..., FaultCase]:
    """The row maker of AutoGen zoo cases on ``builders``:
    ``case(name, builder, fault, task, field, expected, rule, rule_text, **variant)``, the team verified to report
    ``field`` as ``expected``."""
    from causaltrace.testing.faults.cases_autogen import reports

    def case(name: str, builder: str, fault: str, task: str, field: str, expected: str, rule: Any,
             rule_text: str, **variant: Any) -> FaultCase:
        return _case("autogen", builders, name, builder, fault, task, reports(field, expected), rule, rule_text,
                     **variant)

    return case


def zoo_smolagents_cases() -> list[FaultCase]:
    """The zoo's smolagents cases."""
    from causaltrace.testing.faults import zoo_smolagents, zoo_smolagents_more

    case = smolagents_case({**zoo_smolagents.BUILDERS, **zoo_smolagents_more.BUILDERS})
    return _smolagents_rows(case) + _smolagents_more_rows(case) + _smolagents_task_rows(case)


def zoo_pick_cases() -> list[FaultCase]:
    """Issue 32's fifth session: a misread observation of another shape — the request asks for the extreme of a
    listing (the cheapest hotel) and the call acts on another entry (:mod:`.zoo_picks`). Appended after every other
    zoo case, so no earlier case's held-out mark moves (it is the type's 7th case: tuning half)."""
    from causaltrace.testing.faults import zoo_picks

    case = smolagents_case(zoo_picks.BUILDERS)
    return [
        case("smol-cheapest-hotel", "cheapest_hotel", "misread_observation",
             "Book the cheapest hotel in Lisbon for 3 nights. Report 'BOOKED: <hotel>, <total> EUR'.",
             "BOOKED: Hotel Baixa, 285 EUR", first_step("tool_call", tool="book_hotel"),
             "the book_hotel call naming a hotel other than the cheapest listed"),
    ]


def _smolagents_rows(case: Callable[..., FaultCase]) -> list[FaultCase]:
    delegation = "the manager's delegation that names the wrong unit"
    return [
        case("smol-plan-pounds", "plan_word", "wrong_plan_word",
             "Parcel A weighs 12 pounds and parcel B weighs 5 pounds. Report their total weight in kilograms as "
             "'KG: <value>'.", "KG: 7.71", first_step("tool_call", agent="manager", tool="converter", nth=0),
             delegation),
        case("smol-plan-miles", "plan_word", "wrong_plan_word",
             "A marathon is 26.2 miles and a half marathon 13.1 miles. Report their total length in kilometres as "
             "'KM: <value>'.", "KM: 63.24", first_step("tool_call", agent="manager", tool="converter", nth=1),
             delegation, items=(26.2, 13.1), unit="miles", wrong="feet", target="kilometres", label="KM", at=1),
        case("smol-plan-gallons", "plan_word", "wrong_plan_word",
             "Tank A holds 3 gallons, tank B 4 gallons and tank C 2 gallons. Report their total volume in litres "
             "as 'L: <value>'.", "L: 34.07", first_step("tool_call", agent="manager", tool="converter", nth=1),
             delegation, items=(3, 4, 2), unit="gallons", wrong="quarts", target="litres", label="L", at=1),
        case("smol-misread-oslo", "misread", "misread_observation",
             "What will the temperature be in Oslo on Tuesday, in Fahrenheit? Answer 'F: <value>'.", "F: 69.8",
             first_step("tool_call", tool="c_to_f"), "the c_to_f call built from the forecast"),
        case("smol-misread-lima", "misread", "misread_observation",
             "What will the temperature be in Lima on Wednesday, in Fahrenheit? Answer 'F: <value>'.", "F: 77",
             first_step("tool_call", tool="c_to_f"), "the c_to_f call built from the forecast", city="Lima",
             day="Wednesday", forecast=(("Monday", 22), ("Tuesday", 24), ("Wednesday", 25))),
        case("smol-misread-kyiv", "misread", "misread_observation",
             "What will the temperature be in Kyiv on Thursday, in Fahrenheit? Answer 'F: <value>'.", "F: 41",
             first_step("tool_call", tool="c_to_f"), "the c_to_f call built from the forecast", city="Kyiv",
             day="Thursday", forecast=(("Wednesday", 3), ("Thursday", 5), ("Friday", 8))),
        case("smol-premature-three", "premature", "premature_termination",
             "Add up the prices of a widget, a gadget and a gizmo; report 'TOTAL: <dollars>'.", "TOTAL: 49",
             first_step("tool_call", tool="final_answer"), "the final_answer given before the last price"),
        case("smol-premature-four", "premature", "premature_termination",
             "Add up the prices of a lamp, a desk, a chair and a shelf; report 'TOTAL: <dollars>'.", "TOTAL: 260",
             first_step("tool_call", tool="final_answer"), "the final_answer given before the last price",
             prices=(("lamp", 25), ("desk", 120), ("chair", 45), ("shelf", 70))),
        case("smol-premature-two", "premature", "premature_termination",
             "Add up the prices of a kettle and a toaster; report 'TOTAL: <dollars>'.", "TOTAL: 54",
             first_step("tool_call", tool="final_answer"), "the final_answer given before the last price",
             prices=(("kettle", 19), ("toaster", 35))),
    ]


def _smolagents_more_rows(case: Callable[..., FaultCase]) -> list[FaultCase]:
    return [
        case("smol-review-lamps", "reviewer", "reviewer_approval",
             "A member buys 3 lamps at 40 dollars each with the 10% member discount. Report 'TOTAL: <dollars>'.",
             "TOTAL: 108", first_step("tool_call", agent="reviewer", tool="final_answer", nth=1),
             "the reviewer's second verdict (it approves the draft without the discount)"),
        case("smol-review-chairs", "reviewer", "reviewer_approval",
             "A member buys 4 chairs at 55 dollars each with the 20% member discount. Report 'TOTAL: <dollars>'.",
             "TOTAL: 176", first_step("tool_call", agent="reviewer", tool="final_answer", nth=1),
             "the reviewer's second verdict (it approves the draft without the discount)", qty=4, price=55,
             discount=20),
        case("smol-progress-sales", "progress", "repetition_progress",
             "Run the sales report job and report the average rows per day over 7 days as 'AVG: <value>'.",
             "AVG: 602", first_step("tool_call", tool="divide"), "the divide call (after the polls that progress)"),
        case("smol-progress-audit", "progress", "repetition_progress",
             "Run the audit report job and report the average rows per day over 5 days as 'AVG: <value>'.",
             "AVG: 250", first_step("tool_call", tool="divide"), "the divide call (after the polls that progress)",
             days=5, rows=1250, polls=4, typo=-1),
        case("smol-ignored-k4", "ignored", "ignored_instruction",
             "Report the total of accounts K4 and K5, excluding cancelled orders, as 'TOTAL: <dollars>'.",
             "TOTAL: 255", first_step("tool_call", agent="bookkeeper", tool="add", nth=0),
             "the bookkeeper's add for the account where it ignores the exclusion"),
        case("smol-ignored-m2", "ignored", "ignored_instruction",
             "Report the total of accounts M1, M2 and M3, excluding cancelled orders, as 'TOTAL: <dollars>'.",
             "TOTAL: 390", first_step("tool_call", agent="bookkeeper", tool="add", nth=1),
             "the bookkeeper's add for the account where it ignores the exclusion",
             accounts=(("M1", ((100, "paid"), (50, "paid"))), ("M2", ((70, "paid"), (90, "cancelled"),
                                                                      (20, "paid"))),
                       ("M3", ((150, "paid"), (40, "cancelled")))), at=1),
        case("smol-unit-two", "unit", "wrong_unit",
             "Ship two parcels of 2 kg and 3 kg; report the total shipping cost as 'COST: <dollars>'.", "COST: 25",
             first_step("tool_call", tool="shipping_cost", contains="lb"), "the shipping_cost call in pounds"),
        case("smol-unit-three", "unit", "wrong_unit",
             "Ship three parcels of 1.5 kg, 4 kg and 2.5 kg; report the total shipping cost as 'COST: <dollars>'.",
             "COST: 48", first_step("tool_call", tool="shipping_cost", contains="lb"),
             "the shipping_cost call in pounds", parcels=(1.5, 4, 2.5), at=2, rate=6.0),
        case("smol-unit-heavy", "unit", "wrong_unit",
             "Ship two parcels of 1 kg and 10 kg; report the total shipping cost as 'COST: <dollars>'.",
             "COST: 44", first_step("tool_call", tool="shipping_cost", contains="lb"),
             "the shipping_cost call in pounds", parcels=(1, 10), at=1, rate=4.0),
        case("smol-weather-average", "average", "boundary_bug",
             "What is today's average temperature of Paris, Rome and Oslo? Answer 'AVG: <celsius>'.", "AVG: 20.0",
             first_step("tool_call", agent="manager", tool="python_interpreter", contains="avg ="),
             "the manager's averaging code"),
    ]


#: the tasks of the made-up-data and derailed-plan teams (the same in both frameworks)
SALES_TASK = "Report the total Q3 revenue of the North, South and West regions as 'TOTAL: <dollars>'."
CENSUS_TASK = ("How many people live in Lyon, Marseille and Nice together, by the latest census? Answer "
               "'TOTAL: <n>'.")
KEYERROR_TASK = ("Heads-up: the nightly_report job failed again last night with KeyError: 'store_id' (the traceback "
                 "is in its log). Separately, for the quarterly review I need the number of orders the Lisbon store "
                 "shipped in March. Answer 'SHIPPED: <n>'.")
REFUND_TASK = ("Customer C-204 complained last week that the app crashes at checkout on Android; support has "
               "answered that ticket. For the finance report I need the total amount refunded to customer C-204 in "
               "May. Answer 'REFUNDED: <dollars>'.")
WAREHOUSE_TASK = ("Last week our intern computed the average delivery time of the Madrid warehouse (4.1 days), and "
                  "it checks out. Now I need the number of late deliveries — more than 5 days — of the Valencia "
                  "warehouse last week. Answer 'LATE: <n>'.")


def _smolagents_task_rows(case: Callable[..., FaultCase]) -> list[FaultCase]:
    code = "python_interpreter"
    return [
        case("smol-fabricated-sales", "fabricated_sales", "fabricated_data", SALES_TASK, "TOTAL: 139850",
             first_step("tool_call", agent="analyst", tool=code, contains="_monthly = ["),
             "the analyst's code that simulates West's monthly figures"),
        case("smol-fabricated-census", "fabricated_census", "fabricated_data", CENSUS_TASK, "TOTAL: 1743411",
             first_step("tool_call", agent="researcher", tool="final_answer", contains="from what I know"),
             "the researcher's answer that states Nice's population from memory"),
        case("smol-fabricated-apikey", "fabricated_apikey", "fabricated_data",
             "Using the market data API, report ACME's average closing price over the last 5 trading days as "
             "'AVG: <price>' (2 decimals). The API key is in the secret store under MARKET_API_KEY.", "AVG: 102.50",
             first_step("tool_call", agent="quant", tool=code, contains="'demo'"),
             "the quant's code that calls the API with the placeholder demo key"),
        case("smol-derail-keyerror", "derail_keyerror", "task_derailment", KEYERROR_TASK, "SHIPPED: 57",
             first_step("planning", agent="engineer"), "the engineer's opening plan (it debugs the KeyError)"),
        case("smol-derail-refund", "derail_refund", "task_derailment", REFUND_TASK, "REFUNDED: 99.50",
             first_step("tool_call", agent="manager", tool="support_agent"),
             "the manager's first delegation (a plan to investigate the old crash)"),
        case("smol-derail-warehouse", "derail_warehouse", "task_derailment", WAREHOUSE_TASK, "LATE: 3",
             first_step("planning", agent="manager"), "the manager's opening plan (it re-checks Madrid's average)"),
    ]


def zoo_autogen_cases() -> list[FaultCase]:
    """The zoo's AutoGen cases."""
    from causaltrace.testing.faults import zoo_autogen, zoo_autogen_more

    case = autogen_case({**zoo_autogen.BUILDERS, **zoo_autogen_more.BUILDERS})
    return _autogen_rows(case) + _autogen_more_rows(case) + _autogen_task_rows(case)


def _autogen_rows(case: Callable[..., FaultCase]) -> list[FaultCase]:
    plan = "the planner's plan (it names the wrong unit; the converter follows it)"
    return [
        case("ag-plan-pounds", "plan_word", "wrong_plan_word",
             "Parcel A weighs 12 pounds and parcel B weighs 5 pounds. Report their total weight in kilograms as "
             "'KG: <value>'.", "KG", "7.71", first_step("message", agent="planner"), plan),
        case("ag-plan-miles", "plan_word", "wrong_plan_word",
             "A marathon is 26.2 miles and a half marathon 13.1 miles. Report their total length in kilometres as "
             "'KM: <value>'.", "KM", "63.24", first_step("message", agent="planner"), plan,
             items=(26.2, 13.1), unit="miles", wrong="feet", target="kilometres", label="KM", at=1),
        case("ag-plan-gallons", "plan_word", "wrong_plan_word",
             "Tank A holds 3 gallons, tank B 4 gallons and tank C 2 gallons. Report their total volume in litres "
             "as 'L: <value>'.", "L", "34.07", first_step("message", agent="planner"), plan,
             items=(3, 4, 2), unit="gallons", wrong="quarts", target="litres", label="L", at=1),
        case("ag-misread-oslo", "misread", "misread_observation",
             "What will the temperature be in Oslo on Tuesday, in Fahrenheit? Answer 'F: <value>'.", "F", "69.8",
             first_step("tool_call", tool="c_to_f"), "the c_to_f call built from the forecast"),
        case("ag-misread-lima", "misread", "misread_observation",
             "What will the temperature be in Lima on Wednesday, in Fahrenheit? Answer 'F: <value>'.", "F", "77",
             first_step("tool_call", tool="c_to_f"), "the c_to_f call built from the forecast", city="Lima",
             day="Wednesday", forecast=(("Monday", 22), ("Tuesday", 24), ("Wednesday", 25))),
        case("ag-misread-kyiv", "misread", "misread_observation",
             "What will the temperature be in Kyiv on Thursday, in Fahrenheit? Answer 'F: <value>'.", "F", "41",
             first_step("tool_call", tool="c_to_f"), "the c_to_f call built from the forecast", city="Kyiv",
             day="Thursday", forecast=(("Wednesday", 3), ("Thursday", 5), ("Friday", 8))),
        case("ag-premature-three", "premature", "premature_termination",
             "Add up the prices of a widget, a gadget and a gizmo; report 'TOTAL: <dollars>'.", "TOTAL", "49",
             first_step("message", agent="shopper", contains="TOTAL"), "the shopper's total before the last price"),
        case("ag-premature-four", "premature", "premature_termination",
             "Add up the prices of a lamp, a desk, a chair and a shelf; report 'TOTAL: <dollars>'.", "TOTAL", "260",
             first_step("message", agent="shopper", contains="TOTAL"), "the shopper's total before the last price",
             prices=(("lamp", 25), ("desk", 120), ("chair", 45), ("shelf", 70))),
        case("ag-premature-two", "premature", "premature_termination",
             "Add up the prices of a kettle and a toaster; report 'TOTAL: <dollars>'.", "TOTAL", "54",
             first_step("message", agent="shopper", contains="TOTAL"), "the shopper's total before the last price",
             prices=(("kettle", 19), ("toaster", 35))),
    ]


def _autogen_more_rows(case: Callable[..., FaultCase]) -> list[FaultCase]:
    return [
        case("ag-review-lamps", "reviewer", "reviewer_approval",
             "A member buys 3 lamps at 40 dollars each with the 10% member discount. Report 'TOTAL: <dollars>'.",
             "TOTAL", "108", first_step("message", agent="reviewer", nth=1),
             "the reviewer's second verdict (it approves the draft without the discount)"),
        case("ag-review-chairs", "reviewer", "reviewer_approval",
             "A member buys 4 chairs at 55 dollars each with the 20% member discount. Report 'TOTAL: <dollars>'.",
             "TOTAL", "176", first_step("message", agent="reviewer", nth=1),
             "the reviewer's second verdict (it approves the draft without the discount)", qty=4, price=55,
             discount=20),
        case("ag-progress-sales", "progress", "repetition_progress",
             "Run the sales report job and report the average rows per day over 7 days as 'AVG: <value>'.",
             "AVG", "602", first_step("tool_call", tool="divide"), "the divide call (after the polls that progress)"),
        case("ag-progress-audit", "progress", "repetition_progress",
             "Run the audit report job and report the average rows per day over 5 days as 'AVG: <value>'.",
             "AVG", "250", first_step("tool_call", tool="divide"), "the divide call (after the polls that progress)",
             days=5, rows=1250, polls=4, typo=-1),
        case("ag-ignored-k4", "ignored", "ignored_instruction",
             "Report the total of accounts K4 and K5, excluding cancelled orders, as 'TOTAL: <dollars>'.",
             "TOTAL", "255", first_step("tool_call", agent="bookkeeper", tool="add", nth=0),
             "the bookkeeper's add for the account where it ignores the exclusion"),
        case("ag-ignored-m2", "ignored", "ignored_instruction",
             "Report the total of accounts M1, M2 and M3, excluding cancelled orders, as 'TOTAL: <dollars>'.",
             "TOTAL", "390", first_step("tool_call", agent="bookkeeper", tool="add", nth=1),
             "the bookkeeper's add for the account where it ignores the exclusion",
             accounts=(("M1", ((100, "paid"), (50, "paid"))), ("M2", ((70, "paid"), (90, "cancelled"),
                                                                      (20, "paid"))),
                       ("M3", ((150, "paid"), (40, "cancelled")))), at=1),
        case("ag-unit-two", "unit", "wrong_unit",
             "Ship two parcels of 2 kg and 3 kg; report the total shipping cost as 'COST: <dollars>'.", "COST", "25",
             first_step("tool_call", tool="shipping_cost", contains="lb"), "the shipping_cost call in pounds"),
        case("ag-unit-three", "unit", "wrong_unit",
             "Ship three parcels of 1.5 kg, 4 kg and 2.5 kg; report the total shipping cost as 'COST: <dollars>'.",
             "COST", "48", first_step("tool_call", tool="shipping_cost", contains="lb"),
             "the shipping_cost call in pounds", parcels=(1.5, 4, 2.5), at=2, rate=6.0),
        case("ag-unit-heavy", "unit", "wrong_unit",
             "Ship two parcels of 1 kg and 10 kg; report the total shipping cost as 'COST: <dollars>'.",
             "COST", "44", first_step("tool_call", tool="shipping_cost", contains="lb"),
             "the shipping_cost call in pounds", parcels=(1, 10), at=1, rate=4.0),
        case("ag-speaker-oslo", "speaker", "wrong_speaker",
             "How many more inhabitants does Oslo have than Bergen? Answer 'ANSWER: <n>'.", "ANSWER", "424000",
             first_step("speaker_selection", contains="guesser"), "the selection of the guesser"),
        case("ag-speaker-lyon", "speaker", "wrong_speaker",
             "How many more inhabitants does Lyon have than Nice? Answer 'ANSWER: <n>'.", "ANSWER", "174000",
             first_step("speaker_selection", contains="guesser"), "the selection of the guesser",
             cities=(("Lyon", 516000), ("Nice", 342000))),
        case("ag-speaker-porto", "speaker", "wrong_speaker",
             "How many more inhabitants does Lisbon have than Porto? Answer 'ANSWER: <n>'.", "ANSWER", "313000",
             first_step("speaker_selection", contains="guesser"), "the selection of the guesser",
             cities=(("Lisbon", 545000), ("Porto", 232000))),
        case("ag-weather-average", "average", "boundary_bug",
             "What is today's average temperature of Paris, Rome and Oslo? Answer 'AVG: <celsius>'.", "AVG", "20.0",
             first_step("message", agent="coder", contains="```python"), "the coder's averaging code"),
    ]


def _autogen_task_rows(case: Callable[..., FaultCase]) -> list[FaultCase]:
    return [
        case("ag-fabricated-sales", "fabricated_sales", "fabricated_data", SALES_TASK, "TOTAL", "139850",
             first_step("message", agent="fetcher"), "the fetcher's message that assumes West's revenue"),
        case("ag-fabricated-census", "fabricated_census", "fabricated_data", CENSUS_TASK, "TOTAL", "1743411",
             first_step("message", agent="researcher"),
             "the researcher's message with a hypothetical population for Nice"),
        case("ag-fabricated-csv", "fabricated_csv", "fabricated_data",
             "Download https://data.example.org/visits/april.csv and https://data.example.org/visits/may.csv (daily "
             "visitors in the first week of each month) and report by how much the mean daily visitors grew from "
             "April to May, as 'GROWTH: <visitors>' (1 decimal).", "GROWTH", "77.4",
             first_step("message", agent="coder", contains="```python"),
             "the coder's code that generates a synthetic May series"),
        case("ag-derail-keyerror", "derail_keyerror", "task_derailment", KEYERROR_TASK, "SHIPPED", "57",
             first_step("message", agent="planner"), "the planner's opening plan (it debugs the KeyError)"),
        case("ag-derail-refund", "derail_refund", "task_derailment", REFUND_TASK, "REFUNDED", "99.50",
             first_step("message", agent="planning_agent"),
             "the planning agent's opening plan (it investigates the old crash)"),
        case("ag-derail-warehouse", "derail_warehouse", "task_derailment", WAREHOUSE_TASK, "LATE", "3",
             first_step("message", agent="lead"), "the lead's opening plan (it re-checks Madrid's average)"),
    ]
