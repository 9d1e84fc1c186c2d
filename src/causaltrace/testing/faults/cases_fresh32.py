"""Issue 32's fresh failing teams with their fixed twins (:mod:`.fresh32_smolagents`, :mod:`.fresh32_autogen`):
DEVELOPMENT data for the diagnosis's detectors — the lead tunes general detector rules on them, so every case is in
the tuning half (``held_out=False``, set explicitly by each case, outside :func:`~.cases.mark_held_out`'s rule). In
:func:`~.runner.all_cases` they come after the rule's cases (so no case's held-out mark moves) and before the blind
cases of :mod:`.cases_blind32`, which stay last.

Written the way a user's team fails, from the frameworks' documented shapes and the scripted-team style of the
suite's non-blind modules, blind to the attribution's code. Each case names its planted step — the FIRST wrong step
of the run — by a rule (as the suite's cases do), and its verifier checks the final answer. The fault types are the
suite's (:data:`~.cases.FAULT_TYPES`); the finer family of each case (what was changed, dropped or ignored) is in
its rule text and in the builders' docstrings.
"""

from __future__ import annotations

from dataclasses import replace

from causaltrace.testing.faults.cases import FaultCase, first_step

__all__ = ["fresh32_autogen_cases", "fresh32_cases", "fresh32_smolagents_cases"]


def fresh32_cases(framework: str | None = None) -> list[FaultCase]:
    """Every fresh case (optionally of one framework), smolagents first; all in the tuning half."""
    out: list[FaultCase] = []
    if framework in (None, "smolagents"):
        out += fresh32_smolagents_cases() + fresh32_smolagents_more_cases()
    if framework in (None, "autogen"):
        out += fresh32_autogen_cases() + fresh32_autogen_more_cases() + fresh32_autogen_extra_cases()
    return [replace(c, held_out=False) for c in out]


def fresh32_smolagents_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import fresh32_smolagents
    from causaltrace.testing.faults.cases_zoo import smolagents_case

    case = smolagents_case(fresh32_smolagents.BUILDERS)
    code = "python_interpreter"
    return [
        case("fresh32-smol-fx-rounding", "fx_invoice", "wrong_tool_argument",
             "Convert the total of invoice INV-2207 from USD to EUR at today's rate, record the payment in the "
             "ledger and report 'EUR: <amount>'.", "EUR: 1696.10", first_step("tool_call", tool="calculator"),
             "the calculator call with the rate rounded to 2 decimals (value changed from its source: rounding)"),
        case("fresh32-smol-retyped-returns", "retyped_returns", "wrong_fact",
             "Add up the refunds of the returns of batch B-17, minus the 2.00 EUR handling fee per return, and "
             "report 'REFUNDS: <euros>'.", "REFUNDS: 155.05",
             first_step("tool_call", tool=code, contains="amounts = ["),
             "the code that retypes the listed refunds and leaves one out (omission: a list element dropped)"),
        case("fresh32-smol-each-warehouse", "each_warehouse", "premature_termination",
             "Report the stock of M8 bolts in each of the warehouses Leeds, York and Hull as "
             "'STOCK: <warehouse> <n>, ...'.", "STOCK: Leeds 120, York 85, Hull 64",
             first_step("tool_call", agent="stock_agent", tool="final_answer"),
             "the stock agent's answer after two of the three warehouses (omission: an early hand-back)"),
        case("fresh32-smol-repriced", "repriced", "stale_value",
             "Order 12 units of part P-440 from the supplier at the current price and report "
             "'ORDER: <units> x <unit price> = <total> EUR'.", "ORDER: 12 x 17.40 = 208.80 EUR",
             first_step("tool_call", tool="place_order"),
             "the order at the catalog price the price change superseded (a superseded value)"),
        case("fresh32-smol-meeting-date", "meeting_date", "wrong_entity",
             "Book meeting room R3 for the Acme kickoff meeting on the date and slot agreed with the client (ask "
             "the CRM), invite the team, and report 'BOOKED: <room> on <date> at <slot>'.",
             "BOOKED: R3 on 2026-04-09 at 14:00",
             first_step("tool_call", agent="manager", tool=code, contains="book_room("),
             "the manager's booking code with another date than the CRM's (a date changed)"),
        case("fresh32-smol-wrong-delegate", "wrong_delegate", "wrong_handoff",
             "Find the cheapest flight from Lisbon to Oslo on 2026-05-04 and report 'FLIGHT: <code> at <fare> EUR'.",
             "FLIGHT: DY1305 at 176 EUR", first_step("tool_call", agent="manager", tool="hotel_agent"),
             "the manager's delegation of the flight search to the hotel agent (no flight tool)"),
        case("fresh32-smol-meter-gap", "meter_gap", "fabricated_data",
             "Report the mean daily energy use of building B over the 7 days 2026-11-23..2026-11-29 as "
             "'MEAN: <kWh>' (1 decimal).", "MEAN: 351.9",
             first_step("tool_call", tool=code, contains="(before + after) / 2"),
             "the code that fills the missing day with its neighbours' mean (made-up data)"),
        case("fresh32-smol-currency-code", "currency_code", "wrong_tool_argument",
             "Client Nordhavn paid 1,200 EUR, 950 DKK and 400 CHF. Add up the three payments in EUR at today's "
             "rates and report 'TOTAL: <EUR>' (2 decimals).", "TOTAL: 1753.38",
             first_step("tool_call", tool="get_rate", contains="SFR"),
             "the get_rate call with the invalid code SFR (its error never recovered: the payment left out)"),
        case("fresh32-smol-cursor-loop", "cursor_loop", "nonconverging_loop",
             "Count the open tickets tagged 'billing' in the helpdesk (all pages) and report 'OPEN: <n>'.",
             "OPEN: 5", first_step("tool_call", tool="list_tickets", nth=3),
             "the list_tickets call that asks for page 2's cursor again (a loop without progress)"),
        case("fresh32-smol-unchecked-quote", "unchecked_quote", "reviewer_approval",
             "Quote 250 business cards and 40 posters for client Lumen at list prices and report 'QUOTE: <EUR>'.",
             "QUOTE: 303.00", first_step("tool_call", agent="checker", tool="final_answer"),
             "the checker's approval given without reading the price list (an approval nobody checked)"),
        case("fresh32-smol-workdays", "workdays", "ignored_instruction",
             "Count the working days of the Lisbon office between 2026-12-01 and 2026-12-31 (both included), "
             "excluding weekends and Portuguese public holidays, and report 'DAYS: <n>'.", "DAYS: 20",
             first_step("tool_call", tool=code, contains="weekday() < 5"),
             "the counting code that ignores the public holidays the task excludes (an ignored instruction)"),
        case("fresh32-smol-distinct-customers", "distinct_customers", "task_derailment",
             "How many distinct customers ordered from the Braga store in November 2026? A customer who ordered "
             "twice counts once. Report 'CUSTOMERS: <n>'.", "CUSTOMERS: 4", first_step("planning", agent="analyst"),
             "the opening plan that counts the orders, not the distinct customers (a plan about another task)"),
        case("fresh32-smol-passenger-name", "passenger_name", "wrong_entity",
             "Book the first train for employee E-204 from Lisbon to Porto on 2026-06-12 and report "
             "'TICKET: <ticket> on <train> for <passenger>'.", "TICKET: TK-5531 on IC 1402 for Katarzyna Nowak",
             first_step("tool_call", tool="book_ticket"),
             "the booking for 'Katarzyna Novak', the profile's 'Katarzyna Nowak' with a letter changed (a name "
             "changed)"),
    ]


def fresh32_smolagents_more_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import fresh32_smolagents_more
    from causaltrace.testing.faults.cases_zoo import smolagents_case

    case = smolagents_case(fresh32_smolagents_more.BUILDERS)
    return [
        case("fresh32-smol-recalibrated", "recalibrated", "stale_value",
             "Average the last five readings of sensor S-7 in degrees C, after any calibration correction, and "
             "report 'AVG: <C>' (1 decimal).", "AVG: 21.1",
             first_step("tool_call", tool="python_interpreter", contains="avg = round("),
             "the code that averages the raw readings the calibration's corrected series superseded"),
        case("fresh32-smol-city-loop", "city_loop", "premature_termination",
             "Report today's air quality index of Lisbon, Porto and Faro as 'AQI: <city> <n>, ...'.",
             "AQI: Lisbon 42, Porto 38, Faro 55",
             first_step("tool_call", agent="manager", tool="python_interpreter", contains="for city in"),
             "the manager's loop written without Faro (omission: an item of 'A, B and C' never handled)"),
        case("fresh32-smol-plan-update", "plan_update", "premature_termination",
             "Check the NDA status of the suppliers Alvor, Brisa, Cantal and Dorna and report 'SIGNED: <names>' "
             "(those that signed, in this order).", "SIGNED: Alvor, Cantal, Dorna",
             first_step("planning", agent="clerk", nth=1),
             "the updated plan whose 'still to look up' leaves out Dorna (omission in a plan update)"),
        case("fresh32-smol-parallel-rates", "parallel_rates", "wrong_tool_argument",
             "Convert the refunds of batch R-19 to EUR at today's rates and report 'TOTAL: <EUR>' (2 decimals).",
             "TOTAL: 221.07", first_step("tool_call", tool="get_rate", contains="USD"),
             "the parallel get_rate call that asks USD/EUR for the CAD refund (a currency changed)"),
        case("fresh32-smol-nested-managers", "nested_managers", "wrong_unit",
             "What is the combined cash balance of ledger accounts 4410 and 4420 in EUR at today's rate? Report "
             "'CASH: <EUR> EUR'.", "CASH: 24203.26 EUR",
             first_step("tool_call", agent="finance_lead", tool="calculator"),
             "the finance lead's sum that adds the USD balance as EUR (the currency ignored, two levels down)"),
        case("fresh32-smol-checked-answer", "checked_answer", "wrong_tool_argument",
             "Report the average delivery time of the Porto warehouse last week as 'AVG: <days> days'.",
             "AVG: 3.4 days", first_step("tool_call", tool="final_answer", contains="days", nth=0),
             "the answer rewritten after the unit check with the value rounded to 4 (a value changed when "
             "reformatting)"),
        case("fresh32-smol-case-compare", "case_compare", "boundary_bug",
             "Add up supplier invoice SI-4471 in EUR at today's rate and report 'TOTAL: <EUR> EUR'.",
             "TOTAL: 555.99 EUR", first_step("tool_call", tool="python_interpreter", contains="def to_eur"),
             "the helper whose condition compares 'USD' with the lines' 'usd' (the USD lines never converted)"),
        case("fresh32-smol-sort-order", "sort_order", "boundary_bug",
             "Add up the three most recent invoices of client Halden and report 'RECENT: <EUR> EUR (<invoices>)'.",
             "RECENT: 1225.00 EUR (INV-140, INV-137, INV-131)",
             first_step("tool_call", tool="python_interpreter", contains="sorted("),
             "the code that sorts the invoices oldest first and takes the three oldest (a sort order changed)"),
        case("fresh32-smol-swallowed-error", "swallowed_error", "misread_observation",
             "Report the November 2026 sales of the stores Lisbon, Porto and Faro together as 'TOTAL: <EUR>'.",
             "TOTAL: 109625", first_step("tool_call", tool="python_interpreter", contains="except Exception:\n"),
             "the loop whose try/except swallows the refused store (an error never recovered: swallowed)"),
        case("fresh32-smol-wrong-variable", "wrong_variable", "wrong_fact",
             "What does quote Q-7731 come to including 23% VAT? Report 'TOTAL: <EUR> EUR incl. VAT'.",
             "TOTAL: 1396.91 EUR incl. VAT", first_step("tool_call", tool="python_interpreter", contains="subtotal ="),
             "the code whose answer formats the subtotal, not the total with VAT it computed (a superseded value "
             "in code)"),
        case("fresh32-smol-misread-report", "misread_report", "misread_observation",
             "What was the net revenue of Q3 2026? Report 'NET: <EUR> EUR'.", "NET: 151,920 EUR",
             first_step("tool_call", agent="manager", tool="final_answer"),
             "the manager's answer that takes the report's gross revenue for the net one (a misread report)"),
        case("fresh32-smol-same-bug", "same_bug", "nonconverging_loop",
             "What share of class 7B passed the exam (a score of at least 75)? Report 'PASS: <percent>%'.",
             "PASS: 60.0%", first_step("tool_call", tool="python_interpreter", contains="threshold = '75'", nth=1),
             "the second send of the same failing code after its TypeError (a loop without progress)"),
    ]


def fresh32_autogen_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import fresh32_autogen
    from causaltrace.testing.faults.cases_zoo import autogen_case

    case = autogen_case(fresh32_autogen.BUILDERS)
    return [
        case("fresh32-ag-distance-unit", "distance_unit", "wrong_unit",
             "A van drives from Porto to Madrid using 9.5 litres per 100 km. What does the diesel for the trip cost "
             "at today's Spanish price? Answer 'COST: <euros>' (whole euros).", "COST", "81",
             first_step("message", agent="researcher", contains="FOUND"),
             "the researcher's restatement of the 561 km road distance as 561 miles (a unit changed)"),
        case("fresh32-ag-discount-sign", "discount_sign", "boundary_bug",
             "The cart of customer K-19 gets the 15% loyalty discount. Compute the amount to charge with Python "
             "and report 'CHARGE: <euros>' (2 decimals).", "CHARGE", "148.41",
             first_step("message", agent="coder", contains="```python"),
             "the coder's code that adds the discount instead of taking it off (an operator changed)"),
        case("fresh32-ag-order-id", "order_id", "wrong_entity",
             "Customer Marta Ruiz writes: my order A-512 arrived with the desk lamp broken. Refund the lamp and "
             "report 'REFUNDED: <order> <euros> EUR'.", "REFUNDED", "A-512",
             first_step("tool_call", tool="issue_refund"),
             "the billing agent's refund to order A-521, the looked-up A-512 with two digits swapped"),
        case("fresh32-ag-revised-rate", "revised_rate", "stale_value",
             "Pay the supplier invoice of 12,400 GBP in EUR at the latest GBP/EUR rate and report "
             "'EUR: <amount>'.", "EUR", "14351.76", first_step("tool_call", tool="multiply"),
             "the conversion at the 09:00 fixing the 11:30 revision superseded (a superseded value)"),
        case("fresh32-ag-handback", "handback", "premature_termination",
             "Order A-730 arrived with the lamp, the bulb and the shade damaged. Refund each of the three items "
             "and report 'REFUNDED: <euros> EUR'.", "REFUNDED", "51.40",
             first_step("message", agent="refund_agent", contains="Refunds issued"),
             "the refund agent's report and hand-back after two of the three items (omission: an early "
             "hand-back)"),
        case("fresh32-ag-no-tools-writer", "no_tools_writer", "wrong_speaker",
             "Report the Q3 2026 revenue of the Nordic region from the sales database as 'REVENUE: <EUR>'.",
             "REVENUE", "2481300", first_step("speaker_selection", contains="writer"),
             "the selection of the writer (no data tool) for the database lookup"),
        case("fresh32-ag-date-loop", "date_loop", "nonconverging_loop",
             "Book the 30-minute review with Dana Kim on 7 December 2026 at 15:00 and report "
             "'BOOKED: <booking id>'.", "BOOKED", "BK-4410", first_step("tool_call", tool="book_slot", nth=1),
             "the scheduler's book_slot call repeating the refused DD/MM/YYYY date unchanged (a loop without "
             "progress)"),
        case("fresh32-ag-net-price", "net_price", "ignored_instruction",
             "Quote 3 licences of DataVault Pro for a customer outside the EU, excluding VAT, and report "
             "'NET: <euros>'.", "NET", "300.00", first_step("tool_call", tool="multiply"),
             "the multiply call on the price including VAT (the task says excluding: an ignored instruction)"),
        case("fresh32-ag-assumed-rate", "assumed_rate", "fabricated_data",
             "Report the October sales of the US shop in EUR at today's rate with Python, as 'TOTAL: <EUR>' "
             "(2 decimals).", "TOTAL", "4167.45", first_step("message", agent="coder", contains="```python"),
             "the coder's code converting at an assumed rate no tool gave (made-up data)"),
        case("fresh32-ag-open-invoices", "open_invoices", "task_derailment",
             "Kestrel Ltd's March invoice INV-3301 (1,900 EUR) was paid last week, so leave it aside. What is the "
             "total of Kestrel Ltd's open invoices? Answer 'RESULT: <euros>'.", "RESULT", "4310",
             first_step("planning", agent="MagenticOneOrchestrator"),
             "the orchestrator's plan about the paid invoice the task sets aside (a plan about another task)"),
        case("fresh32-ag-expense-review", "expense_review", "reviewer_approval",
             "Reimburse the meals of business trip T-88 according to the expense policy and report "
             "'REIMBURSE: <euros> EUR'.", "REIMBURSE", "109.70",
             first_step("message", agent="reviewer", contains="APPROVE"),
             "the reviewer's approval of the draft without reading the expense policy (an approval nobody "
             "checked)"),
        case("fresh32-ag-boxes", "boxes", "boundary_bug",
             "Order H-77 ships jars of honey. How many boxes does it need and what do they cost? Report "
             "'BOXES: <n> boxes, COST: <euros> EUR'.", "BOXES", "21", first_step("message", agent="coder", contains="```python"),
             "the coder's code that rounds the number of boxes down (a rounding changed)"),
    ]


def fresh32_autogen_more_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import fresh32_autogen_more
    from causaltrace.testing.faults.cases_zoo import autogen_case

    case = autogen_case(fresh32_autogen_more.BUILDERS)
    return [
        case("fresh32-ag-free-shipping", "free_shipping", "boundary_bug",
             "Customer K-31 checks out to Portugal. Compute the amount to charge, shipping included, with Python "
             "and report 'TOTAL: <euros> EUR'.", "TOTAL", "50.00",
             first_step("message", agent="coder", contains="```python"),
             "the coder's code granting free shipping above the threshold, the policy says 'or more' (a bound "
             "changed)"),
        case("fresh32-ag-rows-rate", "rows_rate", "wrong_fact",
             "How many rows per hour did export job J-12 write in its last run? Report 'RATE: <rows/hour>' "
             "(whole rows).", "RATE", "214", first_step("message", agent="researcher", contains="FOUND"),
             "the researcher's restatement of 1,284 rows as 1,248 (a number changed)"),
        case("fresh32-ag-partial-sum", "partial_sum", "misread_observation",
             "Add up the Q3 2026 sales of the North, South and West regions with Python and report "
             "'TOTAL: <EUR> EUR'.", "TOTAL", "138425", first_step("message", agent="coder", contains="TOTAL"),
             "the coder's total taken from the output of code that failed (an error never recovered)"),
        case("fresh32-ag-parallel-stock", "parallel_stock", "wrong_fact",
             "Check the stock of SKU-1107, SKU-2213 and SKU-3341 and order every SKU below 50 units up to 50; "
             "report 'UNITS: <ordered>'.", "UNITS", "77", first_step("message", agent="stock_agent", contains="LEVELS"),
             "the stock agent's restatement of three parallel results that leaves SKU-3341 out (omission when "
             "restating a tool's results)"),
        case("fresh32-ag-graph-route", "graph_route", "wrong_handoff",
             "Resolve support ticket T-5120 and report 'REFUNDED: <euros> EUR'.", "REFUNDED", "59.90",
             first_step("message", agent="intake", contains="ROUTE"),
             "intake's route of the refund request to the technical desk (no refund tool) in a GraphFlow"),
        case("fresh32-ag-society-summary", "society_summary", "stale_value",
             "Write the changelog line for version 4.2 with the number of bugs it fixed, as 'FIXED: <n> — <line>'.",
             "FIXED", "37", first_step("message", agent="release_team"),
             "the society-of-mind summary that reports the rejected first draft the approved one superseded"),
        case("fresh32-ag-structured-po", "structured_po", "wrong_tool_argument",
             "Order 12 units of PX-210 at the supplier's current price and report 'UNITS: <n> ordered (...)'.",
             "UNITS", "12", first_step("message", agent="order_writer"),
             "the order writer's structured purchase order with quantity 21 for the task's 12 (a number changed)"),
        case("fresh32-ag-replan-guess", "replan_guess", "fabricated_data",
             "What is the combined population of Braga and Coimbra by the 2021 census? Answer 'RESULT: <n>'.",
             "RESULT", "334129", first_step("planning", agent="MagenticOneOrchestrator", nth=1),
             "the orchestrator's updated facts sheet and plan that put an educated guess for Braga (made-up data "
             "after a re-plan)"),
        case("fresh32-ag-swarm-chain", "swarm_chain", "wrong_handoff",
             "Book the Lisbon trip for Ana Costa: the flight TP1208 on 2026-05-04 and 3 nights at Hotel Baixa from "
             "2026-05-04; report 'BOOKED: flight <ref>; HOTEL: <ref>'.", "HOTEL", "HB-551",
             first_step("handoff", agent="flights_agent"),
             "the flights agent's hand-off to the car agent (no hotel tool) in the middle of a four-agent Swarm"),
        case("fresh32-ag-ignored-feedback", "ignored_feedback", "ignored_instruction",
             "Draft the 2026 electricity cost of meter M-4410 for the customer letter: 'COST: <EUR> EUR'.",
             "COST", "1054.00", first_step("message", agent="writer", nth=1),
             "the writer's second draft that ignores the editor's 'use the 2026 tariff' (an ignored instruction "
             "from another agent)"),
        case("fresh32-ag-selector-loop", "selector_loop", "nonconverging_loop",
             "What share of the visits of campaign C-77 signed up? Report 'CONVERSION: <percent>%'.", "CONVERSION",
             "8.0", first_step("speaker_selection", contains="researcher", nth=1),
             "the selector's second pick of the researcher after its report (a selection loop without progress)"),
        case("fresh32-ag-misread-output", "misread_output", "misread_observation",
             "What was the median first-response time of the support team last week? Report 'MEDIAN: <minutes>'.",
             "MEDIAN", "16.0", first_step("message", agent="coder", contains="MEDIAN"),
             "the coder's report of the mean the code printed beside the median (a misread code output)"),
    ]


def fresh32_autogen_extra_cases() -> list[FaultCase]:
    from causaltrace.testing.faults import fresh32_autogen_extra
    from causaltrace.testing.faults.cases_zoo import autogen_case

    case = autogen_case(fresh32_autogen_extra.BUILDERS)
    return [
        case("fresh32-ag-renewal-date", "renewal_date", "wrong_entity",
             "Contract C-5120 renews automatically. Schedule a reminder 30 days before its renewal date and report "
             "'REMINDER: <date>'.", "REMINDER", "2027-01-30",
             first_step("tool_call", tool="schedule_reminder"),
             "the reminder computed from the renewal date with day and month swapped (a date changed)"),
        case("fresh32-ag-retyped-hours", "retyped_hours", "wrong_fact",
             "Invoice Rui Matos's hours of week 2026-W48 at 85 EUR per hour with Python and report "
             "'INVOICE: <EUR> EUR'.", "INVOICE", "3017.50",
             first_step("message", agent="coder", contains="```python"),
             "the coder's code that retypes the timesheet's hours and leaves Wednesday out (omission: a list "
             "element dropped)"),
        case("fresh32-ag-user-correction", "user_correction", "ignored_instruction",
             "Report the total Q4 2026 sales for the board as 'TOTAL: <amount>'.", "TOTAL", "1153657.52",
             first_step("message", agent="analyst", contains="FINAL"),
             "the analyst's final answer that ignores the user's mid-run 'in EUR at today's rate' (an ignored "
             "correction from a human in the loop)"),
        case("fresh32-ag-magentic-coder", "magentic_coder", "boundary_bug",
             "How many visits did the site have in December 2026? Answer 'RESULT: <visits>'.", "RESULT",
             str(sum(1000 + 17 * d for d in range(1, 32))),
             first_step("message", agent="coder", contains="```python"),
             "the coder's code whose day range stops before December 31st (a bound changed, MagenticOne)"),
    ]
