"""Shapes of failing runs the fault suite lacked, found on issue 32's fresh failing teams (``fresh32-*`` cases of
:mod:`causaltrace.testing.faults.cases_fresh32`, development data): record codes, dates and clock times are values
of their own; a unit substituted where a number's own source stated it; a tool result relayed is no action; a loop
whose first try was answered by an error is decided by its first repeat."""

from __future__ import annotations

import asyncio

from causaltrace.attribution.context import DiagnosisContext
from causaltrace.attribution.stages.provenance import ProvenanceStage
from causaltrace.attribution.stages.provenance_changes import is_copy_slip
from causaltrace.attribution.stages.values import values_in
from causaltrace.schema import Dependency, Outcome, Run, Step, StepError


def step(i, kind, content, agent="clerk", tool=None, args=None, status="ok", deps=(), **extra):
    return Step(step_id=f"s{i}", run_id="r", index=i, kind=kind, agent=agent, content=content, tool_name=tool,
                arguments=args, status=status, error=StepError(type="ToolError", message=content)
                if status == "error" else None,
                depends_on=[Dependency(step_id=f"s{d}", kind="saw") for d in deps], **extra)


def _changes(steps, **run_fields):
    run = Run(run_id="r", framework="test", task=steps[0].content, steps=steps,
              outcome=Outcome(status="failure", final_answer=steps[-1].content), **run_fields)
    prov = asyncio.run(DiagnosisContext(run=run, method="graph", judge=None).run_stage(ProvenanceStage()))
    return run, prov, {(c.index, c.kind, c.before, c.after, c.how) for c in prov.changes}


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
    from causaltrace.attribution.findings.loops import detect_loops_without_progress
    from causaltrace.attribution.stages.loops import detect_loops, relays_result

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


def test_a_result_that_announces_a_change_supersedes_the_earlier_value() -> None:
    from causaltrace.attribution.findings.superseded import detect_superseded_values

    steps = [
        step(0, "task", "Order 12 units of part P-440 at the current price.", agent="user"),
        step(1, "tool_call", 'catalog_price({"part": "P-440"})', tool="catalog_price", args={"part": "P-440"},
             deps=(0,)),
        step(2, "tool_response", "P-440: 19.90 EUR per unit (catalog)", tool="catalog_price", deps=(1,)),
        step(3, "tool_call", 'price_changes({"part": "P-440"})', tool="price_changes", args={"part": "P-440"},
             deps=(2,)),
        step(4, "tool_response", "P-440: price changed on 2026-12-01 from 19.90 to 17.40 EUR per unit",
             tool="price_changes", deps=(3,)),
        step(5, "tool_call", 'place_order({"units": 12, "unit_price": 19.9})', tool="place_order",
             args={"units": 12, "unit_price": 19.9}, deps=(4,)),
        step(6, "final_answer", "ORDER: 12 x 19.90 = 238.80 EUR", deps=(5,)),
    ]
    run, prov, _ = _changes(steps)
    found = detect_superseded_values(run, prov, None)
    assert [(f.step_id, [(e.role, e.value) for e in f.evidence]) for f in found] == [
        ("s5", [("source", "19.9"), ("superseded_by", "17.4"), ("changed", "19.9")])]
    # the same price restated without an announcement ("P-440: 17.40 EUR in the outlet") supersedes nothing
    quiet = [*steps[:4], step(4, "tool_response", "P-440: 17.40 EUR per unit in the outlet", tool="price_changes",
                              deps=(3,)), *steps[5:]]
    run, prov, _ = _changes(quiet)
    assert detect_superseded_values(run, prov, None) == []


def test_an_agent_that_ends_its_work_before_the_tasks_last_item_omits_it() -> None:
    steps = [
        step(0, "task", "Refund each of the lamp, the bulb and the shade of order A-730.", agent="user"),
        step(1, "tool_response", "order A-730: lamp 34.90, bulb 4.50, shade 12.00", agent="coordinator",
             tool="lookup", deps=(0,)),
        *(step(2 + k, "tool_call", f'refund_item({{"item": "{item}"}})', agent="refunds", tool="refund_item",
               args={"item": item}, deps=(1,)) for k, item in enumerate(("lamp", "bulb"))),
        step(4, "message", "Refunds issued: lamp 34.90 EUR, bulb 4.50 EUR.", agent="refunds", deps=(2, 3)),
        step(5, "final_answer", "REFUNDED: 39.40 EUR", agent="coordinator", deps=(4,)),
    ]
    _, _, changes = _changes(steps)
    assert (4, "word", "shade", "39.4", "omitted") in changes  # the report that ended the work, not the answer
    # a delegation naming every item handles none of them: the per-item calls decide
    whole = [*steps[:2], step(2, "tool_call", 'refunds({"task": "refund the lamp, the bulb and the shade"})',
                              agent="coordinator", tool="refunds",
                              args={"task": "refund the lamp, the bulb and the shade"}, deps=(1,)),
             step(3, "message", "Refunds issued.", agent="refunds", deps=(2,)),
             step(4, "final_answer", "REFUNDED: 39.40 EUR", agent="coordinator", deps=(3,))]
    _, _, changes = _changes(whole)
    assert not any(how == "omitted" and index == 3 for index, _, _, _, how in changes)


def test_a_delegation_the_request_names_another_roster_agent_for_is_a_substitution() -> None:
    roster = {"manager": {"description": "", "tools": [{"name": "travel_policy", "description": "policy"}]},
              "flight_agent": {"description": "Searches flights.", "tools": [{"name": "search_flights",
                                                                             "description": "flights on a date"}]},
              "hotel_agent": {"description": "Looks up hotel rates.", "tools": [{"name": "hotel_rates",
                                                                                 "description": "nightly rates"}]}}
    steps = [
        step(0, "task", "Find the cheapest flight from Lisbon to Oslo.", agent="user"),
        step(1, "llm_response", 'hotel_agent({"task": "Find the cheapest flight from Lisbon to Oslo."})',
             agent="manager", deps=(0,)),
        Step(step_id="s2", run_id="r", index=2, kind="tool_call", agent="manager", tool_name="hotel_agent",
             content='hotel_agent({"task": "Find the cheapest flight"})', arguments={"task": "Find the cheapest flight"},
             depends_on=[Dependency(step_id="s1", kind="produced_by")]),
        step(3, "llm_response", "cheapest flight: SK4621 at 189 EUR", agent="hotel_agent", deps=(2,)),
        step(4, "final_answer", "FLIGHT: SK4621 at 189 EUR", agent="manager", deps=(3,)),
    ]
    _, _, changes = _changes(steps, metadata={"roster": roster})
    assert (2, "target", "flight_agent", "hotel_agent", "substitution") in changes


def test_code_names_and_possessives_are_no_units_or_qualifiers() -> None:
    code = "week = [412, 398.5]\nmean = round(sum(week) / len(week), 1)\nnet = 3.5 - 1\nprint(f'net: {net}')"
    assert not [v for v in values_in(code) if v.kind in ("unit", "word")]
    assert not [v for v in values_in("Thought: average the week's readings.") if v.kind == "unit"]
    assert [v.key for v in values_in("report it in weeks, net of fees") if v.kind in ("unit", "word")] == ["week",
                                                                                                            "net"]


def test_a_quote_of_two_priced_quantities_is_computed() -> None:
    from causaltrace.attribution.stages.provenance_derive import priced_total

    exact = {0.38: 11, 5.2: 11, 6.5: 11}  # 38.00 per 100 cards (its rate), 5.20 a poster from 25
    assert priced_total(303.0, [250.0, 40.0], exact) == [11, 11]  # 250 x 0.38 + 40 x 5.20
    assert priced_total(304.0, [250.0, 40.0], exact) is None


def test_a_discount_added_in_code_is_an_operator_changed() -> None:
    from causaltrace.attribution.stages.provenance_changes import percent_sign_slip

    task = "The cart gets the 15% loyalty discount. Report 'CHARGE: <euros>'."
    wrong = step(1, "tool_call", "", tool="python", args={"code": "charge = subtotal + subtotal * 15 / 100"})
    right = step(1, "tool_call", "", tool="python", args={"code": "charge = subtotal - subtotal * 15 / 100"})
    factor = step(1, "tool_call", "", tool="python", args={"code": "charge = round(subtotal * 1.15, 2)"})
    assert percent_sign_slip(wrong, task).after == "+" and percent_sign_slip(factor, task) is not None
    assert percent_sign_slip(right, task) is None
    assert percent_sign_slip(wrong, "Add the 15% surcharge.") is None  # a surcharge is added


def test_a_price_the_source_says_includes_what_the_task_excluded_is_an_ignored_instruction() -> None:
    steps = [
        step(0, "task", "Quote 3 licences for a customer outside the EU, excluding VAT.", agent="user"),
        step(1, "tool_call", 'get_price({"product": "Pro"})', tool="get_price", args={"product": "Pro"}, deps=(0,)),
        step(2, "tool_response", "Pro: 123.00 EUR per licence incl. 23% VAT (net 100.00 EUR)", tool="get_price",
             deps=(1,)),
        step(3, "tool_call", 'multiply({"a": 123.0, "b": 3})', tool="multiply", args={"a": 123.0, "b": 3},
             deps=(2,)),
        step(4, "final_answer", "NET: 369.00", deps=(3,)),
    ]
    _, _, changes = _changes(steps)
    assert (3, "word", "excluding vat", "123", "ignored") in changes
    net = [*steps[:3], step(3, "tool_call", 'multiply({"a": 100.0, "b": 3})', tool="multiply",
                            args={"a": 100.0, "b": 3}, deps=(2,)), step(4, "final_answer", "NET: 300.00", deps=(3,))]
    _, _, changes = _changes(net)
    assert not any(how == "ignored" for *_, how in changes)


def test_a_loop_whose_first_call_read_a_new_page_is_decided_by_its_repeat() -> None:
    from causaltrace.attribution.findings.loops import detect_loops_without_progress
    from causaltrace.attribution.stages.loops import detect_loops, offered_next

    page = "tickets tagged billing, page 2: T-110 open, T-114 open; next_cursor: c3"
    steps = [step(0, "task", "Count the open billing tickets (all pages).", agent="user")]
    for k in range(3):  # the cursor c2 asked for three times: page 2 each time, c3 never taken
        steps += [step(1 + 2 * k, "tool_call", 'list_tickets({"cursor": "c2"})', tool="list_tickets",
                       args={"cursor": "c2"}, deps=(2 * k,)),
                  step(2 + 2 * k, "tool_response", page, tool="list_tickets", deps=(1 + 2 * k,))]
    run = Run(run_id="r", framework="test", task=steps[0].content, steps=steps)
    assert offered_next(run, steps[1])
    assert [f.step_id for f in detect_loops_without_progress(run, detect_loops(run))] == ["s3"]
    # a wait with a timeout whose result offers no next value: the loop's first call is blamed (its timeout)
    waits = [steps[0], *(s.model_copy(update={"arguments": {"job": "j1", "timeout": 5}, "content":
                                             "job j1 still running after 5 s" if s.kind == "tool_response" else
                                             'wait({"job": "j1", "timeout": 5})'}) for s in steps[1:])]
    run = Run(run_id="r", framework="test", task=steps[0].content, steps=waits)
    assert not offered_next(run, waits[1])


def test_an_approximate_rate_in_code_is_made_up_data() -> None:
    from causaltrace.attribution.stages.fabrication import MARKERS

    assert MARKERS.search("rate = 0.92  # approximate USD/EUR rate")
    assert MARKERS.search("using an assumed exchange rate of 1.1")
    assert not MARKERS.search("the distance is approximately 561 km")  # a result's own hedge is no stand-in


def test_a_step_that_uses_the_asked_entry_too_computes_with_both() -> None:
    from causaltrace.attribution.findings.entries import detect_wrong_entries

    result = "order H-77: 250 jars of honey, packed 12 per box; boxes cost 1.85 EUR each"
    steps = [step(0, "task", "How many boxes does order H-77 need and what do they cost?", agent="user"),
             step(1, "tool_call", 'get_order({"order": "H-77"})', tool="get_order", args={"order": "H-77"},
                  deps=(0,)),
             step(2, "tool_response", result, tool="get_order", deps=(1,)),
             step(3, "tool_call", "", tool="python", args={"code": "boxes = -(-250 // 12)\ncost = boxes * 1.85"},
                  deps=(2,)),
             step(4, "final_answer", "BOXES: 21, COST: 38.85", deps=(3,))]
    run, prov, _ = _changes(steps)
    assert detect_wrong_entries(run, prov) == []


def test_code_that_retypes_a_column_of_records_without_one_omits_it() -> None:
    from causaltrace.attribution.findings.retyped_lists import detect_retyped_omissions, record_columns

    table = ("[{'return': 'RT-301', 'amount_eur': 24.9}, {'return': 'RT-302', 'amount_eur': 12.5}, "
             "{'return': 'RT-303', 'amount_eur': 89.0}, {'return': 'RT-304', 'amount_eur': 7.25}]")
    assert record_columns(table) == [["24.9", "12.5", "89.0", "7.25"]]
    steps = [step(0, "task", "Add up the refunds of batch B-17.", agent="user"),
             step(1, "tool_call", 'list_returns({"batch": "B-17"})', tool="list_returns", args={"batch": "B-17"},
                  deps=(0,)),
             step(2, "tool_response", table, tool="list_returns", deps=(1,)),
             step(3, "tool_call", "", tool="python", args={"code": "amounts = [24.90, 12.50, 89.00]\nprint(sum(amounts))"},
                  deps=(2,)),
             step(4, "final_answer", "REFUNDS: 126.40", deps=(3,))]
    steps[3] = steps[3].model_copy(update={"content": steps[3].arguments["code"]})
    run, prov, _ = _changes(steps)
    found = detect_retyped_omissions(run, prov, None)
    assert [(f.step_id, [e.value for e in f.evidence if e.role == "omitted_item"]) for f in found] == [("s3", ["7.25"])]


def test_an_error_nobody_redid_before_an_answer_that_lacks_a_task_item_is_unrecovered() -> None:
    from causaltrace.attribution.findings.errors import left_out

    steps = [step(0, "task", "Add up 1,200 EUR, 950 DKK and 400 CHF in EUR (2 decimals) for 2026.", agent="user"),
             step(1, "tool_call", 'calculator({"expression": "1200 + 950 * 0.134"})', tool="calculator",
                  args={"expression": "1200 + 950 * 0.134"}, deps=(0,)),
             step(2, "final_answer", "TOTAL: 1327.30", deps=(1,))]
    run, prov, _ = _changes(steps)
    assert left_out(run, prov) == ["400"]  # 2 decimals and the year are no items


def test_a_count_rounded_down_where_the_plan_rounds_up_is_an_operator_changed() -> None:
    from causaltrace.attribution.stages.provenance_changes import floor_slip

    plan = [(3, "PLAN: boxes for every jar (a partly filled box is still a box)")]
    floor = step(5, "tool_call", "", tool="python", args={"code": "boxes = 250 // 12"})
    ceil = step(5, "tool_call", "", tool="python", args={"code": "boxes = -(-250 // 12)"})
    assert floor_slip(floor, plan).after == "250 // 12" and floor_slip(ceil, plan) is None
    assert floor_slip(floor, [(3, "PLAN: split the jars evenly")]) is None


def test_code_that_sorts_and_takes_the_wrong_end_for_the_tasks_extreme() -> None:
    from causaltrace.attribution.stages.provenance_changes import sort_slip

    task = "Add up the three most recent invoices of client Halden."

    def code(text: str) -> Step:
        return step(1, "tool_call", "", tool="python", args={"code": text})

    assert sort_slip(code("recent = sorted(inv, key=lambda r: r['date'])[:3]"), task).after == "the smallest"
    assert sort_slip(code("recent = sorted(inv, key=lambda r: r['date'], reverse=True)[:3]"), task) is None
    assert sort_slip(code("recent = sorted(inv, key=lambda r: r['date'])[-3:]"), task) is None
    assert sort_slip(code("cheap = sorted(fares, reverse=True)[0]"), "Book the cheapest fare.") is not None
    assert sort_slip(code("x = sorted(fares)[0]"), "List the fares.") is None  # no extreme asked


def test_code_that_compares_in_another_case_than_the_data_holds() -> None:
    from causaltrace.attribution.stages.provenance_changes import case_slip

    data = [(5, "lines: [{'amount': 180.0, 'currency': 'usd'}, {'amount': 240.0, 'currency': 'EUR'}]")]
    wrong = step(6, "tool_call", "", tool="python", args={"code": "if line['currency'] == 'USD': x = 1"})
    right = step(6, "tool_call", "", tool="python", args={"code": "if line['currency'] == 'usd': x = 1"})
    assert (case_slip(wrong, data).before, case_slip(wrong, data).after) == ("usd", "USD")
    assert case_slip(right, data) is None


def test_a_structured_message_passes_its_fields_like_a_call() -> None:
    steps = [step(0, "task", "Order 12 units of PX-210 and report the units ordered.", agent="user"),
             step(1, "message", '{"sku": "PX-210", "quantity": 21, "unit_price": 18.75}', agent="writer", deps=(0,)),
             step(2, "final_answer", "UNITS: 21 ordered", deps=(1,))]
    _, _, changes = _changes(steps)
    assert (1, "number", "12", "21", "copy") in changes
    prose = [steps[0], step(1, "message", "I ordered 21 units of PX-210.", agent="writer", deps=(0,)), steps[2]]
    _, _, changes = _changes(prose)
    assert not any(c[0] == 1 and c[4] == "copy" for c in changes)  # in prose two digits a swap apart link nothing


def test_an_executors_output_message_is_no_opening() -> None:
    from causaltrace.attribution.stages.drift import find_task_drift

    steps = [step(0, "task", "Add up the Q3 2026 sales of the North, South and West regions with Python and report "
                              "the total in EUR.", agent="user"),
             step(1, "code_execution", "print(sales)", agent="executor", deps=(0,)),
             step(2, "message", "The script ran, then exited with an error (POSIX exit code: 1). Its output was: "
                                "Traceback (most recent call last): File main.py, line 4, in module: KeyError "
                                "raised by the dictionary lookup", agent="executor", deps=(1,))]
    run = Run(run_id="r", framework="test", task=steps[0].content, steps=steps)
    assert find_task_drift(run) is None


def test_a_rate_rounded_before_a_computation_uses_it_changes_the_value() -> None:
    steps = [step(0, "task", "Convert invoice INV-2207's total from USD to EUR at today's rate.", agent="user"),
             step(1, "tool_response", "rate USD/EUR on 2026-12-07: 0.9187", tool="get_rate", deps=(0,)),
             step(2, "tool_call", 'calculator({"expression": "1846.20 * 0.92"})', tool="calculator",
                  args={"expression": "1846.20 * 0.92"}, deps=(1,)),
             step(3, "final_answer", "EUR: 1698.50", deps=(2,))]
    _, _, changes = _changes(steps)
    assert (2, "number", "0.9187", "0.92", "copy") in changes
    report = [*steps[:2], step(2, "message", "Today's rate is about 0.92 EUR per USD.", deps=(1,)), steps[3]]
    _, _, changes = _changes(report)
    assert not any(c[3] == "0.92" for c in changes)  # a report may round: it computes nothing


def test_a_total_of_items_each_counted_up_to_a_cap_is_computed() -> None:
    from causaltrace.attribution.stages.provenance_derive import capped_total

    meals = [(38.5, 19), (52.0, 19), (31.2, 19)]
    assert capped_total(109.7, meals, [40.0]) == [19, 19, 19]  # 38.50 + 40.00 (52.00 capped) + 31.20
    assert capped_total(121.7, meals, [40.0]) is None  # the plain sum is another rule's
    assert capped_total(109.7, meals, []) is None


def test_a_route_to_an_agent_the_request_also_names_is_one_of_its_parts() -> None:
    from causaltrace.attribution.stages.targets import names_decide

    request = "Book the flight TP1208 and 3 nights at Hotel Baixa."
    assert names_decide(["flights_agent"], [(0, request)])  # "flight" names flights_agent (singular, plural alike)
    assert not names_decide(["car_agent"], [(0, request)])


def test_data_fetched_for_an_exclusion_but_never_applied_ignores_the_instruction() -> None:
    task = "Count the working days of December 2026, excluding weekends and public holidays."
    fetched = [step(0, "task", task, agent="user"),
               step(1, "tool_call", 'public_holidays({"year": 2026})', tool="public_holidays", args={"year": 2026},
                    deps=(0,)),
               step(2, "tool_response", "['2026-12-01', '2026-12-08', '2026-12-25']", tool="public_holidays",
                    deps=(1,))]
    ignores = "count = sum(1 for d in days if d.weekday() < 5)\nprint('working days:', count)"
    applies = "count = sum(1 for d in days if d.weekday() < 5 and d.isoformat() not in holidays)\nprint(count)"
    for code, fires in ((ignores, True), (applies, False)):
        run_code = step(4, "code_execution", "working days: 23").model_copy(
            update={"depends_on": (Dependency(step_id="s3", kind="executes"),)})
        answer = step(5, "final_answer", "DAYS: 23").model_copy(
            update={"depends_on": (Dependency(step_id="s4", kind="produced_by"),)})
        steps = [*fetched, step(3, "tool_call", code, tool="python_interpreter", args={"code": code}, deps=(2,)),
                 run_code, answer]
        _, _, changes = _changes(steps)
        assert any(c[0] == 3 and c[4] == "ignored" for c in changes) is fires


def test_a_draft_value_a_critic_rejected_used_afterwards_is_superseded() -> None:
    from causaltrace.attribution.findings.superseded import detect_superseded_values

    steps = [step(0, "task", "Write the changelog line for version 4.2 with the number of bugs it fixed.",
                  agent="user"),
             step(1, "message", "DRAFT: FIXED: 41 - release 4.2 closes 41 bugs.", agent="drafter", deps=(0,)),
             step(2, "message", "REJECT: 41 counts the 4 open bugs too; fixed is 37.", agent="critic", deps=(1,)),
             step(3, "message", "FIXED: 41 - release 4.2 closes 41 bugs.", agent="release_team", deps=(1, 2)),
             step(4, "message", "FIXED: 41 - published.", agent="publisher", deps=(1, 3)),
             step(5, "final_answer", "FIXED: 41", agent="publisher", deps=(4,))]
    run, prov, _ = _changes(steps)
    found = detect_superseded_values(run, prov, None)
    assert [(f.step_id, [e.value for e in f.evidence if e.role == "superseded_by"]) for f in found] == [
        ("s3", ["37"])]  # the first to take the rejected 41; the publisher only carries it


def test_a_series_a_later_result_corrects_supersedes_the_earlier_one() -> None:
    from causaltrace.attribution.findings.superseded import _corrected_series

    source = step(1, "tool_response", "[21.4, 21.9, 22.3, 22.1, 22.0]", tool="get_readings")
    corrected = "calibration: the last five readings corrected to [20.6, 21.1, 21.5, 21.3, 21.2]"
    assert _corrected_series(source, corrected, "21.9") == "21.1"
    assert _corrected_series(source, "other sensors: [1.0, 2.0]", "21.9") is None


def test_a_thousands_separator_splits_no_entry_and_a_corrected_call_recovers_its_number() -> None:
    from causaltrace.attribution.findings.entries import entries_of
    from causaltrace.attribution.findings.value_changes import _redone

    assert entries_of("campaign C-77: 412 sign-ups from 5,150 visits") == [
        (frozenset({"sign", "ups", "visits"}), ["412", "5150"])]
    assert [n for _, n in entries_of("Monday 18 C, Tuesday 21 C")] == [["18"], ["21"]]
    steps = [step(0, "task", "Draft the 2026 electricity cost.", agent="user"),
             step(1, "tool_call", 'tariff({"year": 2025})', agent="writer", tool="tariff", args={"year": 2025}),
             step(2, "tool_call", 'tariff({"year": 2026})', agent="writer", tool="tariff", args={"year": 2026})]
    run = Run(run_id="r", framework="test", task=steps[0].content, steps=steps)
    assert _redone(run, 1, "2025") and not _redone(run, 2, "2026")
