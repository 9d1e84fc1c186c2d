"""Issue 32's fresh failing smolagents teams (development data, tuning half): reactive scripted teams written the way a
user's team fails, each with its FIXED twin (``planted=False``: the same team with the error corrected; it succeeds).

Written from the frameworks' documented shapes and the scripted-team style of :mod:`.zoo_smolagents` and
:mod:`.clean_teams_smolagents`, not from the attribution's code. Every team opens the way smolagents teams do (an
opening facts survey and plan where the team plans), holds a recovered transient tool failure, and has correct steps
before and after its ONE planted error — the first wrong step, named by its case in :mod:`.cases_fresh32`.

==================  ============================================================================================
builder             the team (flaky tool), the planted error — the family
==================  ============================================================================================
fx_invoice          ToolCallingAgent + plan (``get_invoice``): the rate rounded in the calculator call — rounding
retyped_returns     CodeAgent + plan (``list_returns``): the retyped amounts leave one out — a list element dropped
each_warehouse      manager + plan, managed ``stock_agent`` (``stock_level``): it answers after 2 of 3 warehouses —
                    an early hand-back
repriced            ToolCallingAgent (``catalog_price``): the order at the price ``price_changes`` superseded
meeting_date        manager CodeAgent, managed ``crm_agent`` (``lookup_meeting``): the booking's date is not the
                    CRM's — a date changed
wrong_delegate      manager + plan (``travel_policy``), managed ``hotel_agent`` / ``flight_agent``: the flight
                    search goes to the hotel agent (no flight tool) — a delegation without the tools
meter_gap           CodeAgent + plan (``energy_readings``): a missing day filled with its neighbours' mean instead
                    of ``meter_backfill`` — made-up data
currency_code       ToolCallingAgent + plan (``get_rate``): "SFR" refused, never retried — an error not recovered
cursor_loop         ToolCallingAgent (``list_tickets``): page 2's cursor asked again to max steps — a loop
unchecked_quote     manager, ``drafter`` (``price_list``), ``checker``: the checker approves the draft (missing the
                    volume price) without reading the list — an approval nobody checked
workdays            CodeAgent + plan (``public_holidays``): the count ignores "excluding public holidays"
distinct_customers  CodeAgent + plan (``list_orders``): the plan counts orders, the task distinct customers — a plan
                    about another task
passenger_name      ToolCallingAgent (``traveller_profile``): the ticket booked for the name with a letter changed
==================  ============================================================================================

smolagents is imported lazily (via :mod:`.teams_smolagents`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.faults.teams_smolagents import (
    code_agent,
    code_reply,
    errors,
    find,
    is_error,
    make_tool,
    managed_answers,
    number,
    planning_task,
    string,
    tool_agent,
)
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]


def _task(request: ScriptedRequest) -> str:
    """The task: of a planning prompt (initial or update), else the latest one."""
    return planning_task(request) or request.task


def _plan(given: Sequence[str], look_up: Sequence[str], derive: Sequence[str], steps: Sequence[str]) -> str:
    """An opening facts survey and plan in smolagents' headings, ending the planning reply."""

    def bullets(items: Sequence[str]) -> str:
        return "\n".join(f"- {i}" for i in items) or "- Nothing."

    numbered = "\n".join(f"{n}. {s}" for n, s in enumerate(steps, 1))
    return (f"## 1. Facts survey\n### 1.1. Facts given in the task\n{bullets(given)}\n"
            f"### 1.2. Facts to look up\n{bullets(look_up)}\n### 1.3. Facts to derive\n{bullets(derive)}\n\n"
            f"## 2. Plan\n{numbered}\n<end_plan>")


def _calculate(expression: str) -> str:
    if not re.fullmatch(r"[\d.\s*/+()-]+", expression):
        return "calculator: only numbers and + - * / ( ) are allowed"
    return f"{expression} = {round(eval(expression), 6):g}"  # checked above: arithmetic only


def _calculator() -> Any:
    return make_tool("calculator", "Evaluate an arithmetic expression.",
                     {"expression": string("numbers with + - * / and parentheses")}, "string", _calculate)


def _outputs(request: ScriptedRequest) -> list[str]:
    """The successful observations, oldest first."""
    return [o for o in request.observations if not is_error(o)]


def _fetch(request: ScriptedRequest, thought: str, code: str, down: str) -> str:
    """A CodeAgent's fetching step: the same code again after a failure ("try again"), given up after three."""
    if errors(request) >= 3:
        return code_reply(f"{down}.", f"final_answer({down!r})")
    return code_reply("try again." if request.observations and is_error(request.observations[-1]) else thought,
                      code)


def build_fx_invoice(planted: bool, *, invoice: str = "INV-2207", amount: str = "1846.20",
                     rate: str = "0.9187") -> Any:
    """Convert an invoice's USD total to EUR at today's rate and record the payment; planted: the rate is rounded
    to 2 decimals in the calculator's expression."""
    get_invoice = make_tool("get_invoice", "An invoice's lines, total and due date.",
                            {"invoice": string("the invoice id")}, "string",
                            lambda invoice: f"invoice {invoice} for Halden AS: 4 lines, total {amount} USD, due "
                                            "2026-12-31", flaky=True)
    get_rate = make_tool("get_rate", "Today's exchange rate of a currency pair.", {"pair": string("like USD/EUR")},
                         "string", lambda pair: f"rate {pair} on 2026-12-07: {rate}")
    record = make_tool("record_payment", "Record an invoice's amount due in EUR in the ledger.",
                       {"invoice": string("the invoice id"), "eur": number("the amount in EUR")}, "string",
                       lambda invoice, eur: f"ledger: {invoice} recorded at {float(eur):.2f} EUR")

    def policy(request: ScriptedRequest) -> Reply:
        task = _task(request)
        name = (re.search(r"invoice (INV-\d+)", task) or re.search(r"(INV-\d+)", task) or [None, invoice])[1]
        if request.is_planning:
            return _plan([f"The invoice is {name}; its total is in USD.", "The answer is in EUR, to the cent."],
                         [f"The total of {name} (get_invoice).", "Today's USD/EUR rate (get_rate)."],
                         ["The total in EUR: the USD total times the rate, rounded to cents."],
                         [f"Look up {name}.", "Look up today's USD/EUR rate.", "Multiply with the calculator.",
                          "Record the EUR amount in the ledger.", "Report 'EUR: <amount>'."])
        if request.is_final_summary:
            return "no amount"
        recorded = find(request, r"ledger: \S+ recorded at ([\d.]+) EUR")
        if recorded:
            return [Call("final_answer", {"answer": f"EUR: {recorded.group(1)}"})]
        product = find(request, r"= (-?[\d.]+)$")
        if product:
            return [Call("record_payment", {"invoice": name, "eur": round(float(product.group(1)), 2)})]
        seen_rate = find(request, r"rate USD/EUR on [\d-]+: ([\d.]+)")
        total = find(request, r"total ([\d.]+) USD")
        if seen_rate and total:
            used = f"{float(seen_rate.group(1)):.2f}" if planted else seen_rate.group(1)
            return [Call("calculator", {"expression": f"{total.group(1)} * {used}"})]
        if total:
            return [Call("get_rate", {"pair": "USD/EUR"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the invoice service is down"})]
        return [Call("get_invoice", {"invoice": name})]

    agent = tool_agent(policy, [get_invoice, get_rate, _calculator(), record], "accountant", max_steps=8)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_retyped_returns(planted: bool, *, refunds: Sequence[str] = ("24.90", "12.50", "89.00", "7.25", "31.40"),
                          fee: str = "2.00", at: int = 3) -> Any:
    """Fetch a batch's refunds, retype the amounts in code, subtract a handling fee per return; planted: the retyped
    list leaves refund ``at`` out (so its amount and its fee are both missing)."""
    rows = [{"return": f"RT-{301 + i}", "amount_eur": float(a)} for i, a in enumerate(refunds)]
    list_returns = make_tool("list_returns", "The returns of a batch with their refund amounts.",
                             {"batch": string("the batch id")}, "array", lambda batch: rows, flaky=True)

    def policy(request: ScriptedRequest) -> str:
        task = _task(request)
        batch = (re.search(r"batch (B-\d+)", task) or [None, "B-17"])[1]
        if request.is_planning:
            return _plan([f"The batch is {batch}.", f"A handling fee of {fee} EUR is kept per return."],
                         [f"The returns of {batch} and their refund amounts (list_returns)."],
                         ["The refunds added up, minus the fee for each return."],
                         [f"List the returns of {batch}.", "Add up the refund amounts.",
                          "Subtract the handling fee once per return.", "Report 'REFUNDS: <euros>'."])
        if request.is_final_summary:
            return "no total"
        net = find(request, r"net refunds: ([\d.]+)")
        if net:
            return code_reply("the net total answers the task.", f"final_answer('REFUNDS: {net.group(1)}')")
        gross = find(request, r"gross refunds: ([\d.]+) over (\d+) returns")
        if gross:
            return code_reply(f"subtract the {fee} EUR handling fee per return.",
                              f"net = round({gross.group(1)} - {fee} * {gross.group(2)}, 2)\n"
                              "print(f'net refunds: {net:.2f}')")
        listed = find(request, r"returns of B-\d+: (\[.+\])")
        if listed:
            amounts = re.findall(r"'amount_eur': ([\d.]+)", listed.group(1))
            kept = [a for i, a in enumerate(amounts) if not (planted and i == at)]
            return code_reply("add up the refund amounts of the returns listed above.",
                              f"amounts = [{', '.join(f'{float(a):.2f}' for a in kept)}]\n"
                              "gross = round(sum(amounts), 2)\n"
                              "print(f'gross refunds: {gross:.2f} over {len(amounts)} returns')")
        return _fetch(request, f"list the returns of {batch}.",
                      f"returns = list_returns(batch='{batch}')\nprint('returns of {batch}:', returns)", "no returns")

    agent = code_agent(policy, [list_returns], "clerk", max_steps=7)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_each_warehouse(planted: bool, *, stock: Sequence[tuple[str, int]] = (("Leeds", 120), ("York", 85),
                                                                              ("Hull", 64)),
                         part: str = "M8 bolts") -> Any:
    """The manager plans, then asks ``stock_agent`` once for every warehouse of the task; the stock agent calls
    ``stock_level`` per warehouse and answers; planted: it answers after two of the three."""
    table = dict(stock)
    stock_level = make_tool("stock_level", "The units of a part in stock at one warehouse.",
                            {"part": string("the part"), "warehouse": string("the warehouse")}, "string",
                            lambda part, warehouse: f"{part} at {warehouse}: {table.get(warehouse, 0)} units",
                            flaky=True)

    def warehouses(text: str) -> list[str]:
        found = re.search(r"warehouses ([A-Z]\w+(?:, [A-Z]\w+)* and [A-Z]\w+)", text)
        return re.split(r", | and ", found.group(1)) if found else []

    def stock_agent(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no stock levels"
        wanted = warehouses(request.task)
        seen = {m.group(1): m.group(2) for o in _outputs(request)
                for m in [re.search(r"at (\w+): (\d+) units", o)] if m}
        missing = [w for w in wanted if w not in seen]
        if not missing or (planted and len(missing) == 1 and len(seen) >= 2):
            return [Call("final_answer", {"answer": "; ".join(f"{w}: {n} units" for w, n in seen.items())})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the stock service is down"})]
        return [Call("stock_level", {"part": part, "warehouse": missing[0]})]

    worker = tool_agent(stock_agent, [stock_level], "stock_agent", max_steps=len(stock) + 3,
                        description="Looks up the stock of parts at our warehouses.")

    def manager(request: ScriptedRequest) -> Reply:
        task = _task(request)
        wanted = warehouses(task)
        if request.is_planning:
            return _plan([f"The part is {part}.", f"The warehouses are {', '.join(wanted)}."],
                         [f"The stock of {part} at each warehouse (stock_agent)."], ["Nothing."],
                         ["Ask stock_agent for the stock at every warehouse of the task.",
                          "Report 'STOCK: <warehouse> <n>, ...' in the task's order."])
        if request.is_final_summary:
            return "no answer"
        answers = managed_answers(request, "stock_agent")
        if answers:
            levels = dict(re.findall(r"(\w+): (\d+) units", answers[-1]))
            return [Call("final_answer", {"answer": "STOCK: " + ", ".join(f"{w} {levels[w]}" for w in wanted
                                                                          if w in levels)})]
        return [Call("stock_agent", {"task": f"Find the stock of {part} at the warehouses "
                                             f"{', '.join(wanted[:-1])} and {wanted[-1]}."})]

    agent = tool_agent(manager, [], "manager", max_steps=4, managed=[worker])
    agent.planning_interval = 10  # one opening plan
    return agent


def build_repriced(planted: bool, *, old: str = "19.90", new: str = "17.40", units: int = 12) -> Any:
    """Look up the catalog price, then the price changes since the catalog, then order; planted: the order uses the
    catalog price the change superseded."""
    catalog = make_tool("catalog_price", "A part's price in the printed catalog of 2026-11-01.",
                        {"part": string("the part number")}, "string",
                        lambda part: f"{part}: {old} EUR per unit (catalog of 2026-11-01)", flaky=True)
    changes = make_tool("price_changes", "The price changes of a part since the last catalog.",
                        {"part": string("the part number")}, "string",
                        lambda part: f"{part}: price changed on 2026-12-01 from {old} to {new} EUR per unit")

    def order(part: str, units: int, unit_price: float) -> str:
        total = round(int(units) * float(unit_price), 2)
        return f"order O-5531 placed: {part}, {int(units)} x {float(unit_price):.2f} = {total:.2f} EUR"

    place = make_tool("place_order", "Order units of a part from the supplier at a unit price.",
                      {"part": string("the part number"), "units": number("how many units"),
                       "unit_price": number("the price per unit in EUR")}, "string", order)

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no order"
        asked = re.search(r"Order (\d+) units of part (P-\d+)", request.task)
        if asked is None:
            return [Call("final_answer", {"answer": "I cannot read the order."})]
        count, part = int(asked.group(1)), asked.group(2)
        placed = find(request, r"placed: \S+, (\d+) x ([\d.]+) = ([\d.]+) EUR")
        if placed:
            return [Call("final_answer", {"answer": f"ORDER: {placed.group(1)} x {placed.group(2)} = "
                                                    f"{placed.group(3)} EUR"})]
        changed = find(request, r"from ([\d.]+) to ([\d.]+) EUR per unit")
        listed = find(request, r": ([\d.]+) EUR per unit \(catalog")
        if changed and listed:
            price = listed.group(1) if planted else changed.group(2)
            return [Call("place_order", {"part": part, "units": count, "unit_price": float(price)})]
        if listed:
            return [Call("price_changes", {"part": part})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the catalog is down"})]
        return [Call("catalog_price", {"part": part})]

    return tool_agent(policy, [catalog, changes, place], "buyer", max_steps=7)


def build_meeting_date(planted: bool, *, date: str = "2026-04-09", typo: str = "2026-04-06",
                       slot: str = "14:00") -> Any:
    """The manager asks ``crm_agent`` for the agreed date and slot, books the room, sends the invite and answers;
    planted: the booking's date is not the CRM's."""
    lookup = make_tool("lookup_meeting", "A client meeting's agreed date and slot in the CRM.",
                       {"meeting": string("the meeting's name")}, "string",
                       lambda meeting: f"{meeting}: agreed with the client for {date} at {slot}, 90 minutes",
                       flaky=True)

    def crm(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no meeting"
        found = find(request, r"agreed with the client for ([\d-]+) at (\d\d:\d\d)")
        if found:
            return [Call("final_answer", {"answer": f"agreed date {found.group(1)}, slot {found.group(2)}"})]
        asked = re.search(r"the (.+?) meeting", request.task)
        if asked is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("lookup_meeting", {"meeting": asked.group(1)})]

    worker = tool_agent(crm, [lookup], "crm_agent", max_steps=4, description="Reads client meetings in the CRM.")
    book = make_tool("book_room", "Book a meeting room on a date and slot.",
                     {"room": string("the room"), "date": string("YYYY-MM-DD"), "slot": string("HH:MM")}, "string",
                     lambda room, date, slot: f"booking B-71: room {room} on {date} at {slot}")
    invite = make_tool("send_invite", "Send a calendar invite for a booking.",
                       {"booking": string("the booking id"), "attendees": string("who to invite")}, "string",
                       lambda booking, attendees: f"invite for {booking} sent to {attendees}")

    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no booking"
        room = (re.search(r"room (R\d+)", request.task) or [None, "R3"])[1]
        sent = find(request, r"invite for (B-\d+) sent")
        booked = find(request, r"booking (B-\d+): room (\w+) on ([\d-]+) at (\d\d:\d\d)")
        if sent and booked:
            return code_reply("the room is booked and the invite sent.",
                              f"final_answer('BOOKED: {booked.group(2)} on {booked.group(3)} at {booked.group(4)}')")
        if booked:
            return code_reply("invite the Acme team to the booking.",
                              f"print(send_invite(booking='{booked.group(1)}', attendees='Acme kickoff team'))")
        agreed = find(request, r"agreed date ([\d-]+), slot (\d\d:\d\d)")
        if agreed:
            day = typo if planted else agreed.group(1)
            return code_reply(f"book {room} for the agreed date and slot.",
                              f"booking = book_room(room='{room}', date='{day}', slot='{agreed.group(2)}')\n"
                              "print(booking)")
        return code_reply("ask the CRM agent for the agreed date and slot.",
                          "agreed = crm_agent(task='When is the Acme kickoff meeting agreed with the client?')\n"
                          "print(agreed)")

    return code_agent(manager, [book, invite], "manager", max_steps=6, managed=[worker])


def build_wrong_delegate(planted: bool, *, fares: Sequence[tuple[str, int]] = (("TP1270", 214), ("SK4621", 189),
                                                                              ("DY1305", 176))) -> Any:
    """The manager plans, then delegates the flight search; planted: to ``hotel_agent`` (hotel rates only), which
    answers from memory; the manager reports what it was told."""
    listing = ", ".join(f"{code} {price} EUR" for code, price in fares)
    search_flights = make_tool("search_flights", "The flights between two cities on a date, with their fares.",
                               {"origin": string("the departure city"), "destination": string("the arrival city"),
                                "date": string("YYYY-MM-DD")}, "string",
                               lambda origin, destination, date: f"flights {origin} to {destination} on {date}: "
                                                                 f"{listing}", flaky=True)
    hotel_rates = make_tool("hotel_rates", "The hotels of a city with their nightly rates.",
                            {"city": string("the city"), "check_in": string("YYYY-MM-DD")}, "string",
                            lambda city, check_in: f"hotels in {city} from {check_in}: Saga Hotel 149 EUR, "
                                                   "Fjord Inn 172 EUR")

    def trip(text: str) -> re.Match[str] | None:
        return re.search(r"from (\w+) to (\w+) on (\d{4}-\d\d-\d\d)", text)

    def flight_agent(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no flight"
        found = find(request, r"flights \w+ to \w+ on [\d-]+: (.+)")
        if found:
            code, price = min(re.findall(r"(\w+\d+) (\d+) EUR", found.group(1)), key=lambda row: int(row[1]))
            return [Call("final_answer", {"answer": f"cheapest flight: {code} at {price} EUR"})]
        asked = trip(request.task)
        if asked is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("search_flights", {"origin": asked.group(1), "destination": asked.group(2),
                                        "date": asked.group(3)})]

    def hotel_agent(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no hotel"
        if "flight" in request.task:  # no flight tool: it answers from what it remembers of the route
            return [Call("final_answer", {"answer": "cheapest flight: SK4621 at 189 EUR (the usual fare on this "
                                                    "route)"})]
        found = find(request, r"hotels in \w+ from [\d-]+: (.+)")
        if found:
            return [Call("final_answer", {"answer": found.group(1)})]
        city = re.search(r"in (\w+) from (\d{4}-\d\d-\d\d)", request.task)
        return [Call("hotel_rates", {"city": city.group(1) if city else "unknown",
                                     "check_in": city.group(2) if city else "unknown"})]

    flyer = tool_agent(flight_agent, [search_flights], "flight_agent", max_steps=4,
                       description="Searches flights and finds the cheapest fare.")
    sleeper = tool_agent(hotel_agent, [hotel_rates], "hotel_agent", max_steps=3,
                         description="Looks up hotel rates in a city.")

    def manager(request: ScriptedRequest) -> Reply:
        task = _task(request)
        asked = trip(task)
        origin, city, day = asked.groups() if asked else ("?", "?", "?")
        if request.is_planning:
            return _plan([f"The trip is from {origin} to {city} on {day}.", "Only the fare is asked, in EUR."],
                         ["The fares of the flights on that day."], ["The cheapest of them."],
                         ["Check the travel policy for the trip.", "Ask for the cheapest flight of the day.",
                          "Report 'FLIGHT: <code> at <fare> EUR'."])
        if request.is_final_summary:
            return "no flight"
        if find(request, r"travel policy: ") is None:
            if errors(request) >= 3:
                return [Call("final_answer", {"answer": "the travel policy service is down"})]
            return [Call("travel_policy", {"trip": f"{origin}-{city}"})]
        for name in ("flight_agent", "hotel_agent"):
            answers = managed_answers(request, name)
            found = re.search(r"cheapest flight: (\w+) at (\d+) EUR", answers[-1]) if answers else None
            if found:
                return [Call("final_answer", {"answer": f"FLIGHT: {found.group(1)} at {found.group(2)} EUR"})]
        delegate = "hotel_agent" if planted else "flight_agent"
        return [Call(delegate, {"task": f"Find the cheapest flight from {origin} to {city} on {day}."})]

    policy_tool = make_tool("travel_policy", "The company's travel policy for a trip.", {"trip": string("the trip")},
                            "string", lambda trip: f"travel policy: {trip} in economy class, the cheapest fare of the "
                                                   "day", flaky=True)
    agent = tool_agent(manager, [policy_tool], "manager", max_steps=6, managed=[flyer, sleeper])
    agent.planning_interval = 10  # one opening plan
    return agent


def build_meter_gap(planted: bool, *, days: Sequence[tuple[str, float]] = (
        ("2026-11-23", 412.0), ("2026-11-24", 398.5), ("2026-11-25", 405.0), ("2026-11-26", 451.5),
        ("2026-11-27", 388.0), ("2026-11-28", 210.5), ("2026-11-29", 198.0)), gap: int = 3) -> Any:
    """Fetch a week of daily readings; one day is missing and the tool names the backfill; planted: the code fills
    the gap with the mean of its neighbours instead of asking ``meter_backfill``."""
    missing_day, missing_value = days[gap]

    def readings(building: str, start: str, end: str) -> str:
        rows = ", ".join(f"{d}: {v:g} kWh" if i != gap else f"{d}: missing (meter offline; the backfilled value is "
                                                           "available from meter_backfill)"
                         for i, (d, v) in enumerate(days))
        return f"readings of building {building} from {start} to {end}: {rows}"

    energy = make_tool("energy_readings", "The daily energy use of a building between two dates.",
                       {"building": string("the building"), "start": string("YYYY-MM-DD"),
                        "end": string("YYYY-MM-DD")}, "string", readings, flaky=True)
    backfill = make_tool("meter_backfill", "The backfilled reading of a day the meter was offline.",
                         {"building": string("the building"), "date": string("YYYY-MM-DD")}, "string",
                         lambda building, date: f"backfill of building {building} on {date}: "
                                                f"{dict(days).get(date, 0):g} kWh (from the utility's meter)")

    def policy(request: ScriptedRequest) -> str:
        task = _task(request)
        span = re.search(r"building (\w+) over the 7 days (\d{4}-\d\d-\d\d)\.\.(\d{4}-\d\d-\d\d)", task)
        building, start, end = span.groups() if span else ("B", days[0][0], days[-1][0])
        if request.is_planning:
            return _plan([f"The building is {building}.", f"The days are {start} to {end}, 7 days."],
                         ["The daily energy use of each day (energy_readings)."],
                         ["The mean daily use, in kWh, to 1 decimal."],
                         ["Fetch the daily readings.", "Make sure every day has a value.",
                          "Average the 7 values.", "Report 'MEAN: <kWh>'."])
        if request.is_final_summary:
            return "no mean"
        mean = find(request, r"mean daily use: ([\d.]+)")
        if mean:
            return code_reply("the mean answers the task.", f"final_answer('MEAN: {mean.group(1)}')")
        listed = find(request, r"readings of building \w+ from [\d-]+ to [\d-]+: (.+)")
        if listed:
            values = dict(re.findall(r"(\d{4}-\d\d-\d\d): ([\d.]+) kWh", listed.group(1)))
            gaps = re.findall(r"(\d{4}-\d\d-\d\d): missing", listed.group(1))
            filled = find(request, r"backfill of building \w+ on ([\d-]+): ([\d.]+) kWh")
            if gaps and planted:
                order = [d for d, _ in days]
                i = order.index(gaps[0])
                return code_reply(f"{gaps[0]} is missing; fill it from the days around it and average the week.",
                                  f"before, after = {values[order[i - 1]]}, {values[order[i + 1]]}\n"
                                  f"week = [{', '.join(values.get(d, 'None') if d != gaps[0] else '(before + after) / 2' for d in order)}]\n"
                                  "mean = round(sum(week) / len(week), 1)\nprint(f'mean daily use: {mean}')")
            if gaps and not filled:
                return code_reply(f"{gaps[0]} is missing; ask for its backfilled reading.",
                                  f"print(meter_backfill(building='{building}', date='{gaps[0]}'))")
            if filled:
                values[filled.group(1)] = filled.group(2)
            week = ", ".join(values[d] for d, _ in days)
            return code_reply("average the week's readings.",
                              f"week = [{week}]\nmean = round(sum(week) / len(week), 1)\n"
                              "print(f'mean daily use: {mean}')")
        return _fetch(request, "fetch the week's readings.",
                      f"print(energy_readings(building='{building}', start='{start}', end='{end}'))", "no readings")

    agent = code_agent(policy, [energy, backfill], "analyst", max_steps=7)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_currency_code(planted: bool, *, rates: Sequence[tuple[str, str]] = (("DKK", "0.1340"),
                                                                             ("CHF", "1.0652"))) -> Any:
    """Convert each foreign payment with ``get_rate`` and add them up; planted: the Swiss franc is asked as "SFR",
    the tool refuses it, and the agent adds up the others without it."""
    table = dict(rates)

    def rate(pair: str) -> str:
        code = pair.split("/")[0]
        if code not in table:
            raise ValueError(f"unknown currency code {code!r}: use an ISO 4217 code")
        return f"rate {pair} on 2026-12-07: {table[code]}"

    get_rate = make_tool("get_rate", "Today's exchange rate of a currency pair.", {"pair": string("like DKK/EUR")},
                         "string", rate, flaky=True)

    def payments(task: str) -> list[tuple[str, str]]:
        return [(amount.replace(",", ""), code) for amount, code in re.findall(r"([\d,]+(?:\.\d+)?) (EUR|DKK|CHF)",
                                                                                task)]

    def policy(request: ScriptedRequest) -> Reply:
        task = _task(request)
        paid = payments(task)
        if request.is_planning:
            return _plan([f"Payment of {a} {c}." for a, c in paid],
                         [f"Today's {c}/EUR rate (get_rate)." for _, c in paid if c != "EUR"],
                         ["Each payment in EUR, added up, to the cent."],
                         ["Look up the rate of each foreign currency.", "Add up the payments in EUR with the "
                          "calculator.", "Report 'TOTAL: <EUR>'."])
        if request.is_final_summary:
            return "no total"
        total = find(request, r"= (-?[\d.]+)$")
        if total:
            return [Call("final_answer", {"answer": f"TOTAL: {float(total.group(1)):.2f}"})]
        known = {m.group(1): m.group(2) for o in _outputs(request)
                 for m in [re.search(r"rate (\w+)/EUR on [\d-]+: ([\d.]+)", o)] if m}
        asked = {"CHF": "SFR"} if planted else {}
        refused = [o for o in request.observations if "unknown currency code" in o]
        todo = [c for _, c in paid if c != "EUR" and c not in known
                and not (refused and asked.get(c, c) in " ".join(refused))]
        if todo:
            if errors(request) >= 4:
                return [Call("final_answer", {"answer": "the rate service is down"})]
            return [Call("get_rate", {"pair": f"{asked.get(todo[0], todo[0])}/EUR"})]
        terms = [a if c == "EUR" else f"{a} * {known[c]}" for a, c in paid if c == "EUR" or c in known]
        return [Call("calculator", {"expression": " + ".join(terms)})]

    agent = tool_agent(policy, [get_rate, _calculator()], "treasurer", max_steps=8)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_cursor_loop(planted: bool, *, pages: Sequence[Sequence[str]] = (
        ("T-101 open", "T-102 closed", "T-107 open"), ("T-110 open", "T-114 open", "T-115 closed"),
        ("T-120 closed", "T-123 open"))) -> Any:
    """Page through ``list_tickets`` by its cursors and count the open ones; planted: after page 2 it asks for
    page 2's cursor again (it keeps reading the first cursor it saw), until max steps."""
    cursors = [""] + [f"c{i + 2}" for i in range(len(pages) - 1)]

    def listing(tag: str, cursor: str = "") -> str:
        page = cursors.index(cursor) if cursor in cursors else 0
        nxt = cursors[page + 1] if page + 1 < len(pages) else "none"
        return f"tickets tagged {tag}, page {page + 1}: {', '.join(pages[page])}; next_cursor: {nxt}"

    list_tickets = make_tool("list_tickets", "One page of the helpdesk's tickets with a tag (the first page without "
                             "a cursor, the next ones with the next_cursor of the page before).",
                             {"tag": string("the tag"), "cursor": {"type": "string", "description": "the cursor",
                                                                   "nullable": True}}, "string", listing, flaky=True)

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "I could not count the tickets."
        tag = (re.search(r"tagged '(\w+)'", request.task) or [None, "billing"])[1]
        seen = [o for o in _outputs(request) if "next_cursor" in o]
        if seen and seen[-1].endswith("next_cursor: none"):
            tickets = {m.group(1): m.group(2) for o in seen for m in re.finditer(r"(T-\d+) (open|closed)", o)}
            return [Call("final_answer", {"answer": f"OPEN: {sum(s == 'open' for s in tickets.values())}"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the helpdesk is down"})]
        if not seen:
            return [Call("list_tickets", {"tag": tag})]
        source = seen[0] if planted else seen[-1]
        return [Call("list_tickets", {"tag": tag, "cursor": source.rsplit(": ", 1)[1]})]

    return tool_agent(policy, [list_tickets], "support_bot", max_steps=7)


def build_unchecked_quote(planted: bool, *, cards: int = 250, posters: int = 40, per_100: str = "38.00",
                          poster: str = "6.50", tier: str = "5.20", from_qty: int = 25) -> Any:
    """The manager asks ``drafter`` for a quote and ``checker`` to check it; the drafter's first draft prices the
    posters at the single-poster price, missing the list's volume price; planted: the checker approves it without
    looking at the price list (the twin's checker reads it and rejects, and the drafter's second draft is right)."""
    price_text = (f"price list: business cards {per_100} EUR per 100 cards; posters {poster} EUR per poster, "
                  f"{tier} EUR per poster from {from_qty} posters")
    drafter_list = make_tool("price_list", "The print shop's current price list.", {"product": string("a product")},
                             "string", lambda product: price_text, flaky=True)
    checker_list = make_tool("price_list", "The print shop's current price list.", {"product": string("a product")},
                             "string", lambda product: price_text)
    prices_of = r"business cards ([\d.]+) EUR per 100 cards; posters ([\d.]+) EUR per poster, ([\d.]+) EUR per " \
                r"poster from (\d+) posters"

    def drafter(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no draft"
        done = find(request, r"= (-?[\d.]+)$")
        if done:
            return [Call("final_answer", {"answer": f"QUOTE: {float(done.group(1)):.2f}"})]
        prices = find(request, prices_of)
        if prices:
            each = prices.group(3) if "volume price" in request.task else prices.group(2)
            return [Call("calculator", {"expression": f"{cards} / 100 * {prices.group(1)} + {posters} * {each}"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the price list is down"})]
        return [Call("price_list", {"product": "business cards and posters"})]

    def checker(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no verdict"
        draft = re.search(r"Draft: QUOTE: ([\d.]+)", request.task)
        if draft is None:
            return [Call("final_answer", {"answer": "REJECT: there is no draft to check."})]
        if planted:
            return [Call("final_answer", {"answer": f"APPROVE: QUOTE {draft.group(1)} looks right."})]
        prices = find(request, prices_of)
        if prices is None:
            return [Call("price_list", {"product": "business cards and posters"})]
        each = prices.group(3) if posters >= int(prices.group(4)) else prices.group(2)
        expected = cards / 100 * float(prices.group(1)) + posters * float(each)
        if abs(expected - float(draft.group(1))) < 0.005:
            return [Call("final_answer", {"answer": f"APPROVE: QUOTE {expected:.2f} matches the price list."})]
        return [Call("final_answer", {"answer": f"REJECT: {posters} posters take the volume price of {each} EUR; "
                                                f"expected {expected:.2f}."})]

    draft_agent = tool_agent(drafter, [drafter_list, _calculator()], "drafter", max_steps=5,
                             description="Drafts quotes from the price list.")
    check_agent = tool_agent(checker, [checker_list], "checker", max_steps=3,
                             description="Checks a draft quote against the price list.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no quote"
        drafts = managed_answers(request, "drafter")
        verdicts = managed_answers(request, "checker")
        if verdicts and verdicts[-1].startswith("APPROVE") and drafts:
            return [Call("final_answer", {"answer": drafts[-1]})]
        if drafts and len(verdicts) < len(drafts):
            return [Call("checker", {"task": f"Check this quote for {cards} business cards and {posters} posters "
                                             f"against the price list.\nDraft: {drafts[-1]}"})]
        if len(drafts) >= 2:
            return [Call("final_answer", {"answer": "no approved quote"})]
        note = " Use the posters' volume price." if verdicts and "volume price" in verdicts[-1] else ""
        return [Call("drafter", {"task": f"Quote {cards} business cards and {posters} posters at list prices as "
                                         f"'QUOTE: <EUR>'.{note}"})]

    return tool_agent(manager, [], "manager", max_steps=7, managed=[draft_agent, check_agent])


def build_workdays(planted: bool, *, holidays: Sequence[str] = ("2026-12-01", "2026-12-08", "2026-12-25")) -> Any:
    """Fetch the public holidays, then count the working days of the month in code; planted: the count leaves out
    weekends but not the holidays the task says to exclude."""
    public_holidays = make_tool("public_holidays", "The public holidays of a country in a year.",
                                {"country": string("the country"), "year": number("the year")}, "array",
                                lambda country, year: list(holidays), flaky=True)

    def policy(request: ScriptedRequest) -> str:
        task = _task(request)
        span = re.search(r"between (\d{4}-\d\d-\d\d) and (\d{4}-\d\d-\d\d)", task)
        start, end = span.groups() if span else ("2026-12-01", "2026-12-31")
        if request.is_planning:
            return _plan([f"The span is {start} to {end}, both included.", "The office is in Lisbon (Portugal).",
                          "Weekends and Portuguese public holidays are not working days."],
                         ["Portugal's public holidays of the year (public_holidays)."],
                         ["The number of working days in the span."],
                         ["Fetch the public holidays.", "Count the weekdays of the span that are not holidays.",
                          "Report 'DAYS: <n>'."])
        if request.is_final_summary:
            return "no count"
        counted = find(request, r"working days: (\d+)")
        if counted:
            return code_reply("the count answers the task.", f"final_answer('DAYS: {counted.group(1)}')")
        if find(request, r"holidays: \["):
            skip = "" if planted else " and day.isoformat() not in holidays"
            return code_reply("count the working days of the span.",
                              "import datetime\n"
                              f"day, last = datetime.date.fromisoformat('{start}'), datetime.date.fromisoformat('{end}')\n"
                              "count = 0\nwhile day <= last:\n"
                              f"    if day.weekday() < 5{skip}:\n        count += 1\n"
                              "    day += datetime.timedelta(days=1)\nprint('working days:', count)")
        return _fetch(request, "fetch Portugal's public holidays.",
                      f"holidays = public_holidays(country='Portugal', year={start[:4]})\nprint('holidays:', holidays)",
                      "no holidays")

    agent = code_agent(policy, [public_holidays], "scheduler", max_steps=6)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_distinct_customers(planted: bool, *, orders: Sequence[tuple[str, str]] = (
        ("O-501", "C-17"), ("O-502", "C-22"), ("O-503", "C-17"), ("O-504", "C-31"), ("O-505", "C-22"),
        ("O-506", "C-40"))) -> Any:
    """CodeAgent with a plan, ``list_orders`` (flaky), then the count the plan says; planted: the plan counts the
    orders — another question about the same data than the task's distinct customers; the code follows the plan."""
    listing = [{"order": o, "customer": c} for o, c in orders]
    list_orders = make_tool("list_orders", "The orders of a store in a month, with their customer ids.",
                            {"store": string("the store"), "month": string("YYYY-MM")}, "array",
                            lambda store, month: listing, flaky=True)

    def policy(request: ScriptedRequest) -> str:
        task = _task(request)
        asked = re.search(r"the (\w+) store in (\w+) (\d{4})", task)
        store, month, year = asked.groups() if asked else ("?", "?", "?")
        if request.is_planning:
            what = "orders" if planted else "distinct customers (a customer who ordered twice counts once)"
            return _plan([f"The store is {store}, the month {month} {year}."],
                         [f"The orders of {store} in {month} {year} with their customers (list_orders)."],
                         [f"The number of {what}."],
                         [f"List the orders of {store} for {month} {year}.", f"Count the {what.split(' (')[0]}.",
                          "Report 'CUSTOMERS: <n>'."])
        if request.is_final_summary:
            return "no count"
        counted = find(request, r"count: (\d+)")
        if counted:
            return code_reply("the count answers the task.", f"final_answer('CUSTOMERS: {counted.group(1)}')")
        if find(request, r"orders: \["):
            plan = " ".join(text for role, text in request.messages if role == "assistant" and "## 2. Plan" in text)
            if "Count the distinct customers" in plan:
                return code_reply("step 2 of the plan: count the distinct customers.",
                                  "count = len({row['customer'] for row in orders})\nprint('count:', count)")
            return code_reply("step 2 of the plan: count the orders.", "count = len(orders)\nprint('count:', count)")
        months = {"November": "11", "October": "10", "December": "12"}
        return _fetch(request, "step 1 of the plan: list the orders.",
                      f"orders = list_orders(store='{store}', month='{year}-{months.get(month, '01')}')\n"
                      "print('orders:', orders)", "no orders")

    agent = code_agent(policy, [list_orders], "analyst", max_steps=6)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_passenger_name(planted: bool, *, name: str = "Katarzyna Nowak", typo: str = "Katarzyna Novak") -> Any:
    """ToolCallingAgent: the traveller's profile (flaky), the train, the booking; planted: the ticket is booked for
    the name with one letter changed from the profile's."""
    profile = make_tool("traveller_profile", "An employee's travel profile (name as on the ID, card on file).",
                        {"employee": string("the employee id")}, "string",
                        lambda employee: f"profile {employee}: {name}, ID card name {name.upper()}, rail card none",
                        flaky=True)
    find_train = make_tool("find_train", "The trains between two stations on a date, with fares.",
                           {"origin": string("from"), "destination": string("to"), "date": string("YYYY-MM-DD")},
                           "string", lambda origin, destination, date: f"trains {origin}-{destination} on {date}: "
                                                                       "IC 1402 at 08:15 for 39.90 EUR, "
                                                                       "IC 1406 at 10:15 for 44.90 EUR")
    book = make_tool("book_ticket", "Book a seat on a train for a passenger (name as on the ID).",
                     {"train": string("the train"), "date": string("YYYY-MM-DD"),
                      "passenger": string("the passenger's full name")}, "string",
                     lambda train, date, passenger: f"ticket TK-5531 issued: {train} on {date} for {passenger}")

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no ticket"
        asked = re.search(r"employee (E-\d+) from (\w+) to (\w+) on (\d{4}-\d\d-\d\d)", request.task)
        if asked is None:
            return [Call("final_answer", {"answer": "I cannot read the trip."})]
        employee, origin, destination, date = asked.groups()
        issued = find(request, r"ticket (TK-\d+) issued: (.+) on [\d-]+ for (.+)")
        if issued:
            return [Call("final_answer", {"answer": f"TICKET: {issued.group(1)} on {issued.group(2)} for "
                                                    f"{issued.group(3)}"})]
        trains = find(request, r"trains \w+-\w+ on [\d-]+: (.+)")
        person = find(request, r"profile E-\d+: ([\w ]+),")
        if trains and person:
            first = re.match(r"(IC \d+)", trains.group(1))
            return [Call("book_ticket", {"train": first.group(1) if first else "?", "date": date,
                                         "passenger": typo if planted else person.group(1)})]
        if person:
            return [Call("find_train", {"origin": origin, "destination": destination, "date": date})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the profile service is down"})]
        return [Call("traveller_profile", {"employee": employee})]

    return tool_agent(policy, [profile, find_train, book], "travel_agent", max_steps=7)


BUILDERS: dict[str, Callable[..., Any]] = {
    "fx_invoice": build_fx_invoice,
    "retyped_returns": build_retyped_returns,
    "each_warehouse": build_each_warehouse,
    "repriced": build_repriced,
    "meeting_date": build_meeting_date,
    "wrong_delegate": build_wrong_delegate,
    "meter_gap": build_meter_gap,
    "currency_code": build_currency_code,
    "cursor_loop": build_cursor_loop,
    "unchecked_quote": build_unchecked_quote,
    "workdays": build_workdays,
    "distinct_customers": build_distinct_customers,
    "passenger_name": build_passenger_name,
}


# The helpers the further fresh teams (:mod:`.fresh32_smolagents_more`) build on, by public names.
task_of = _task
survey = _plan
fetch_step = _fetch
