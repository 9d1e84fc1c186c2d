"""Correct smolagents runs for the negative set of :mod:`.clean_runs` (issue 32): reactive scripted teams in the
style of :mod:`.zoo_smolagents` with NO planted error, in shapes a careless detector reads as faults (facts surveys,
retries, pagination, superseded readings, several delegations to one agent, a rejected final answer).

The teams are the rows of :data:`.clean_runs.SMOLAGENTS_TEAMS` (task, verifier, what each exercises, data variants);
each builder's docstring says what its team does. smolagents is imported lazily (via :mod:`.teams_smolagents`).
"""

from __future__ import annotations

import functools
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
    string,
    tool_agent,
)
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["build_accounts", "build_booking", "build_capacity", "build_checked", "build_courier", "build_estimate",
           "build_growth", "build_invoices", "build_laptops", "build_meeting", "build_overdue", "build_pantry",
           "build_parcels", "build_restock", "build_risotto", "build_trip", "build_unit_price", "build_warmest",
           "build_welcome"]

Reply = str | list[Call]


def _at_max_steps(text: str) -> Callable[[Callable[[ScriptedRequest], Reply]], Callable[[ScriptedRequest], Reply]]:
    """A policy that answers ``text`` to the call smolagents makes after max steps (``is_final_summary``)."""

    def wrap(policy: Callable[[ScriptedRequest], Reply]) -> Callable[[ScriptedRequest], Reply]:
        return functools.wraps(policy)(lambda request: text if request.is_final_summary else policy(request))

    return wrap


def _task_of_plan(request: ScriptedRequest) -> str:
    """The task inside a planning prompt, the initial one or an update."""
    for _, text in request.messages:
        found = re.search(r"(?:Here is your task:|You have been given the following task:)\s*```\s*(.*?)\s*```",
                          text, re.S)
        if found:
            return found.group(1)
    return request.task


def _survey(given: Sequence[str], look_up: Sequence[str], derive: Sequence[str], plan: Sequence[str],
            learned: Sequence[str] | None = None) -> str:
    """A facts survey and plan in smolagents' headings (``learned`` given: the update's headings)."""

    def bullets(items: Sequence[str]) -> str:
        return "\n".join(f"- {i}" for i in items) or "- Nothing."

    steps = "\n".join(f"{n}. {s}" for n, s in enumerate(plan, 1))
    if learned is not None:
        return (f"## 1. Updated facts survey\n### 1.1. Facts given in the task\n{bullets(given)}\n"
                f"### 1.2. Facts that we have learned\n{bullets(learned)}\n"
                f"### 1.3. Facts still to look up\n{bullets(look_up)}\n"
                f"### 1.4. Facts still to derive\n{bullets(derive)}\n\n## 2. Plan\n{steps}\n<end_plan>")
    return (f"## 1. Facts survey\n### 1.1. Facts given in the task\n{bullets(given)}\n"
            f"### 1.2. Facts to look up\n{bullets(look_up)}\n### 1.3. Facts to derive\n{bullets(derive)}\n\n"
            f"## 2. Plan\n{steps}\n<end_plan>")


def build_pantry(*, prices: Sequence[tuple[str, str, float]] = (("flour", "bag", 2.49), ("sugar", "bag", 1.89),
                                                                ("butter", "pack", 3.15))) -> Any:
    """An opening plan, ``get_price`` (flaky) per item of the task, one ``calculator`` sum, rounded to cents."""
    table = {item: (unit, price) for item, unit, price in prices}
    get_price = make_tool("get_price", "The unit price of a grocery item in dollars.", {"item": string("the item")},
                          "string", lambda item: f"price of {item}: {table[item][1]} dollars per {table[item][0]}"
                          if item in table else f"no price for {item}", flaky=True)

    def calculate(expression: str) -> str:
        if not re.fullmatch(r"[\d.\s*+()-]+", expression):
            return "calculator: only numbers and + - * ( ) are allowed"
        return f"{expression} = {round(eval(expression), 6):g}"  # checked above: arithmetic only

    calculator = make_tool("calculator", "Evaluate an arithmetic expression.",
                           {"expression": string("numbers with + - * and parentheses")}, "string", calculate)

    def wanted(task: str) -> list[tuple[int, str]]:
        return [(int(n), item) for n, item in re.findall(r"(\d+) (?:bags|packs|bottles) of (\w+)", task)]

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_planning:
            task = _task_of_plan(request)
            items = wanted(task)
            return _survey([f"{n} of {item}" for n, item in items],
                           [f"The unit price of {item} (get_price)." for _, item in items],
                           ["The total: each quantity times its unit price, added up, rounded to cents."],
                           ["Look up the unit price of every item.", "Add up quantity x price with the calculator.",
                            "Report 'TOTAL: <dollars>' rounded to cents."])
        if request.is_final_summary:
            return "no total"
        items = wanted(request.task)
        total = find(request, r"= (-?[\d.]+)$")
        if total:
            return [Call("final_answer", {"answer": f"TOTAL: {float(total.group(1)):.2f}"})]
        seen = {m.group(1): m.group(2) for o in request.observations
                for m in re.finditer(r"price of (\w+): ([\d.]+) dollars", o)}
        missing = [item for _, item in items if item not in seen]
        if missing:
            if errors(request) >= 3:
                return [Call("final_answer", {"answer": "the price service is down"})]
            return [Call("get_price", {"item": missing[0]})]
        expression = " + ".join(f"{n} * {seen[item]}" for n, item in items)
        return [Call("calculator", {"expression": expression})]

    agent = tool_agent(policy, [get_price, calculator], "shopper", max_steps=len(prices) + 4)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_invoices(*, pages: Sequence[Sequence[tuple[str, str]]] = (
        (("INV-204", "2026-03-02"), ("INV-211", "2026-05-19")),
        (("INV-230", "2026-08-11"), ("INV-187", "2025-12-30")),
        (("INV-241", "2026-07-04"),))) -> Any:
    """``list_invoices(customer, page)`` until "next page: none" (page 1 fails once), then the latest date."""

    def listing(customer: str, page: int) -> str:
        page = int(page)
        if not 1 <= page <= len(pages):
            return f"invoices of {customer}, page {page}: none"
        rows = ", ".join(f"{i} dated {d}" for i, d in pages[page - 1])
        after = page + 1 if page < len(pages) else "none"
        return f"invoices of {customer}, page {page} of {len(pages)}: {rows}; next page: {after}"

    list_invoices = make_tool("list_invoices", "One page of a customer's invoices.",
                              {"customer": string("the customer's full name"), "page": number("the page, from 1")},
                              "string", listing, flaky=True)

    @_at_max_steps("no invoice")
    def policy(request: ScriptedRequest) -> Reply:
        who = re.search(r"customer ([A-Z]\w+ [A-Z]\w+)", request.task)
        customer = who.group(1) if who else "unknown"
        seen = [(m.group(1), m.group(2)) for o in request.observations if not is_error(o)
                for m in re.finditer(r"(INV-\d+) dated (\d{4}-\d\d-\d\d)", o)]
        nxt = find(request, r"next page: (\w+)")
        if nxt and nxt.group(1) == "none":
            latest = max(seen, key=lambda row: row[1])
            return [Call("final_answer", {"answer": f"LATEST: {latest[0]} on {latest[1]}"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the invoice service is down"})]
        page = int(nxt.group(1)) if nxt else 1
        return [Call("list_invoices", {"customer": customer, "page": page})]

    return tool_agent(policy, [list_invoices], "archivist", max_steps=len(pages) + 3)


def build_parcels(*, weights: Sequence[float] = (12.5, 3.2, 7.8), rate: float = 4.0) -> Any:
    """CodeAgent: an opening plan, ``get_parcels`` (flaky), lb -> kg in code, then ``shipping_quote(kg)``."""
    get_parcels = make_tool("get_parcels", "The weights of an order's parcels, in pounds.",
                            {"order": string("the order id")}, "array", lambda order: list(weights), flaky=True)
    quote = make_tool("shipping_quote", "The shipping price of a total weight in kilograms, in EUR.",
                      {"kg": number("the total weight in kilograms")}, "string",
                      lambda kg: f"quote for {float(kg):g} kg: {float(kg) * rate:.2f} EUR")

    def policy(request: ScriptedRequest) -> str:
        if request.is_planning:
            order = re.search(r"order (\w+-?\d+)", _task_of_plan(request))
            name = order.group(1) if order else "the order"
            return _survey([f"The order is {name}.", "Its parcels are weighed in pounds (1 lb = 0.45359237 kg)."],
                           [f"The weight of every parcel of {name} (get_parcels)."],
                           ["Their total in kilograms, rounded to 2 decimals.", "The shipping quote for it."],
                           ["Fetch the parcel weights.", "Add them up and convert to kilograms.",
                            "Ask shipping_quote for that weight.", "Report 'KG: <kg>, QUOTE: <eur> EUR'."])
        if request.is_final_summary:
            return "no quote"
        order = re.search(r"order (\w+-?\d+)", request.task)
        name = order.group(1) if order else "unknown"
        quoted = find(request, r"quote for ([\d.]+) kg: ([\d.]+) EUR")
        if quoted:
            return code_reply("the quote answers the task.",
                              f"final_answer('KG: {quoted.group(1)}, QUOTE: {quoted.group(2)} EUR')")
        kg = find(request, r"total kg: ([\d.]+)")
        if kg:
            return code_reply(f"ask for the quote of {kg.group(1)} kg.",
                              f"print(shipping_quote(kg={kg.group(1)}))")
        listed = find(request, r"weights in pounds: \[([^\]]*)\]")
        if listed:
            return code_reply("add the pounds and convert the sum to kilograms, rounded to 2 decimals.",
                              f"weights = [{listed.group(1)}]\ntotal_lb = sum(weights)\n"
                              "total_kg = round(total_lb * 0.45359237, 2)\n"
                              "print('total lb:', total_lb)\nprint('total kg:', total_kg)")
        if errors(request) >= 3:
            return code_reply("the parcel service is down.", "final_answer('no weights')")
        return code_reply(f"fetch the parcel weights of {name}.",
                          f"weights = get_parcels(order='{name}')\nprint('weights in pounds:', weights)")

    agent = code_agent(policy, [get_parcels, quote], "shipper", max_steps=7)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_trip(*, flights: Sequence[tuple[str, int]] = (("TP1208", 214), ("SK1812", 189), ("DY1305", 236)),
               hotels: Sequence[tuple[str, int]] = (("Hotel Norda", 161), ("Saga Hotel", 149),
                                                    ("Fjord Inn", 172))) -> Any:
    """The manager asks ``flight_agent`` for the cheapest flight and ``hotel_agent`` for the cheapest hotel (the
    city, date and nights of the task passed as given), then adds the flight and the nights."""
    fares = ", ".join(f"{code} {price} EUR" for code, price in flights)
    search_flights = make_tool(
        "search_flights", "The flights between two cities on a date, with their fares.",
        {"origin": string("the departure city"), "destination": string("the arrival city"),
         "date": string("the date, YYYY-MM-DD")}, "string",
        lambda origin, destination, date: f"flights {origin} to {destination} on {date}: {fares}", flaky=True)
    rates = ", ".join(f"{name} {price} EUR per night" for name, price in hotels)
    hotel_rates = make_tool("hotel_rates", "The hotels of a city with their nightly rates for a stay.",
                            {"city": string("the city"), "check_in": string("the arrival date, YYYY-MM-DD"),
                             "nights": number("how many nights")}, "string",
                            lambda city, check_in, nights: f"hotels in {city} from {check_in} for {int(nights)} "
                                                           f"nights: {rates}")

    def cheapest(text: str) -> tuple[str, int]:
        rows = [(m.group(1), int(m.group(2))) for m in re.finditer(r"([A-Z][\w ]*?\w) (\d+) EUR", text)]
        return min(rows, key=lambda row: row[1])

    def flight_agent(request: ScriptedRequest) -> Reply:  # (its few steps never reach max_steps)
        found = find(request, r"flights \w+ to \w+ on [\d-]+: (.+)")
        if found:
            code, price = cheapest(found.group(1))
            return [Call("final_answer", {"answer": f"cheapest flight: {code} at {price} EUR"})]
        asked = re.search(r"from (?P<origin>\w+) to (?P<destination>\w+) on (?P<date>\d{4}-\d\d-\d\d)", request.task)
        if asked is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("search_flights", asked.groupdict())]

    def hotel_agent(request: ScriptedRequest) -> Reply:  # (its few steps never reach max_steps)
        found = find(request, r"hotels in \w+ from [\d-]+ for \d+ nights: (.+)")
        if found:
            name, price = cheapest(found.group(1))
            return [Call("final_answer", {"answer": f"cheapest hotel: {name} at {price} EUR per night"})]
        asked = re.search(r"in (\w+) for (\d+) nights from (\d{4}-\d\d-\d\d)", request.task)
        if asked is None:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("hotel_rates", {"city": asked.group(1), "check_in": asked.group(3),
                                     "nights": int(asked.group(2))})]

    flyer = tool_agent(flight_agent, [search_flights], "flight_agent", max_steps=4,
                       description="Searches flights and finds the cheapest fare.")
    sleeper = tool_agent(hotel_agent, [hotel_rates], "hotel_agent", max_steps=3,
                         description="Looks up hotel rates and finds the cheapest hotel.")

    @_at_max_steps("no trip")
    def manager(request: ScriptedRequest) -> Reply:
        trip = re.search(r"from (\w+) to (\w+) on (\d{4}-\d\d-\d\d) and stay (\d+) nights", request.task)
        if trip is None:
            return [Call("final_answer", {"answer": "I cannot read the trip."})]
        origin, city, date, nights = trip.group(1), trip.group(2), trip.group(3), int(trip.group(4))
        flight = [re.search(r"cheapest flight: (\S+) at (\d+) EUR", a) for a in managed_answers(request, "flight_agent")]
        hotel = [re.search(r"cheapest hotel: (.+?) at (\d+) EUR", a) for a in managed_answers(request, "hotel_agent")]
        if flight and flight[-1] and hotel and hotel[-1]:
            total = int(flight[-1].group(2)) + nights * int(hotel[-1].group(2))
            return [Call("final_answer", {"answer": f"TRIP: {flight[-1].group(1)} + {hotel[-1].group(1)}, "
                                                    f"{total} EUR"})]
        if not flight:
            return [Call("flight_agent", {"task": f"Find the cheapest flight from {origin} to {city} on {date}."})]
        return [Call("hotel_agent", {"task": f"Find the cheapest hotel in {city} for {nights} nights from {date}."})]

    return tool_agent(manager, [], "manager", max_steps=5, managed=[flyer, sleeper])


def build_restock(*, cached: int = 40, live: int = 34) -> Any:
    """``get_stock`` (cached, flaky), ``refresh_stock`` (live), then ``place_order`` of the live difference."""
    get_stock = make_tool("get_stock", "The stock count of an item from the nightly cache.",
                          {"item": string("the item")}, "string",
                          lambda item: f"stock of {item}: {cached} units (cached at 09:00, may be stale)", flaky=True)
    refresh = make_tool("refresh_stock", "Count an item's stock live in the warehouse.", {"item": string("the item")},
                        "string", lambda item: f"stock of {item}: {live} units (live count at 11:30)")
    place = make_tool("place_order", "Order units of an item from the supplier.",
                      {"item": string("the item"), "quantity": number("how many units")}, "string",
                      lambda item, quantity: f"order placed: {int(quantity)} {item}")

    @_at_max_steps("no order")
    def policy(request: ScriptedRequest) -> Reply:
        asked = re.search(r"(\d+) (\w+) on the shelf", request.task)
        if asked is None:
            return [Call("final_answer", {"answer": "I cannot read the target."})]
        target, item = int(asked.group(1)), asked.group(2)
        placed = find(request, r"order placed: (\d+) (\w+)")
        if placed:
            return [Call("final_answer", {"answer": f"ORDERED: {placed.group(1)} {placed.group(2)}"})]
        fresh = find(request, r"stock of \w+: (\d+) units \(live")
        if fresh:
            return [Call("place_order", {"item": item, "quantity": max(0, target - int(fresh.group(1)))})]
        if find(request, r"stock of \w+: \d+ units \(cached"):
            return [Call("refresh_stock", {"item": item})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the stock service is down"})]
        return [Call("get_stock", {"item": item})]

    return tool_agent(policy, [get_stock, refresh, place], "stock_clerk", max_steps=6)


def build_meeting(*, free: Sequence[tuple[str, Sequence[str]]] = (
        ("Ana Souza", ("09:00", "11:00", "14:00", "16:00")), ("Bruno Lima", ("11:00", "14:00", "15:00")),
        ("Chen Wei", ("10:00", "14:00", "16:00", "11:00")))) -> Any:
    """The manager plans (every 3 steps), asks ``calendar_agent`` for each person's free slots on the task's date
    (one code step per person), then intersects the three lists in code and picks the earliest common slot."""
    table = dict(free)
    free_slots = make_tool("free_slots", "A person's free one-hour slots on a date.",
                           {"person": string("the person's full name"), "date": string("the date, YYYY-MM-DD")},
                           "string", lambda person, date: f"free slots of {person} on {date}: "
                                                          + ", ".join(table.get(person, ())), flaky=True)

    @_at_max_steps("no slots")
    def calendar(request: ScriptedRequest) -> Reply:
        found = find(request, r"free slots of [\w ]+ on [\d-]+: (.+)")
        if found:
            return [Call("final_answer", {"answer": f"slots: {found.group(1)}"})]
        asked = re.search(r"of ([A-Z]\w+ [A-Z]\w+) on (\d{4}-\d\d-\d\d)", request.task)
        if asked is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("free_slots", {"person": asked.group(1), "date": asked.group(2)})]

    worker = tool_agent(calendar, [free_slots], "calendar_agent", max_steps=4,
                        description="Reads people's calendars: their free slots on a date.")

    def people_of(task: str) -> list[str]:
        found = re.search(r"for ([A-Z][\w ,]+?) on \d{4}", task)
        return [p.strip() for p in re.split(r",| and ", found.group(1)) if p.strip()] if found else []

    def manager(request: ScriptedRequest) -> str:
        if request.is_planning:
            task = _task_of_plan(request)
            people = people_of(task)
            asked = len(managed_answers(request, "calendar_agent"))
            plan = ["Ask calendar_agent for the free slots of each person, one at a time.",
                    "Intersect the three lists in code.", "Report the earliest common slot as 'MEET: <HH:MM>'."]
            if any("Updated facts survey" in text for _, text in request.messages[-2:]):
                return _survey(people, [f"The free slots of {p}." for p in people[asked:]],
                               ["The earliest slot free for everyone."], plan,
                               learned=[f"The free slots of {p} are known." for p in people[:asked]])
            return _survey(people, [f"The free slots of {p}." for p in people], ["The earliest common slot."], plan)
        if request.is_final_summary:
            return "no slot"
        date = re.search(r"on (\d{4}-\d\d-\d\d)", request.task)
        day = date.group(1) if date else "unknown"
        people = people_of(request.task)
        common = find(request, r"common slots: \[([^\]]*)\]")
        if common:
            slots = re.findall(r"\d\d:\d\d", common.group(1))
            return code_reply("the earliest common slot answers the task.",
                              f"final_answer('MEET: {slots[0]} on {day}')" if slots
                              else "final_answer('no common slot')")
        answers = managed_answers(request, "calendar_agent")
        if len(answers) < len(people):
            person = people[len(answers)]
            return code_reply(f"ask for the free slots of {person}.",
                              f"slots = calendar_agent(task='List the free slots of {person} on {day}.')\n"
                              "print(slots)")
        lists = [re.findall(r"\d\d:\d\d", a) for a in answers]
        rows = ",\n    ".join(repr(sorted(slots)) for slots in lists)
        return code_reply("intersect the free slots of all three people and sort them.",
                          f"free = [\n    {rows},\n]\ncommon = sorted(set(free[0]).intersection(*free[1:]))\n"
                          "print('common slots:', common)")

    agent = code_agent(manager, [], "manager", max_steps=len(free) + 3, managed=[worker])
    agent.planning_interval = 3
    return agent


def build_booking(*, free: Sequence[str] = ("09:00-12:00", "14:00-17:00")) -> Any:
    """``check_availability`` rejects DD/MM/YYYY; the agent rewrites the date as YYYY-MM-DD and books."""

    def check(room: str, date: str) -> str:
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", str(date)):
            raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")
        return f"room {room} on {date}: free " + ", ".join(free)

    check_availability = make_tool("check_availability", "The free hours of a meeting room on a date.",
                                   {"room": string("the room's name"), "date": string("the date, YYYY-MM-DD")},
                                   "string", check)
    book_room = make_tool("book_room", "Book a meeting room.",
                          {"room": string("the room"), "date": string("YYYY-MM-DD"), "start": string("HH:MM"),
                           "end": string("HH:MM")}, "string",
                          lambda room, date, start, end: f"booked {room} on {date} {start}-{end}, reference BK-5521")

    @_at_max_steps("no booking")
    def policy(request: ScriptedRequest) -> Reply:
        asked = re.search(r"room (\w+) on (\d\d)/(\d\d)/(\d{4}) for (\w+) hours in the afternoon", request.task)
        if asked is None:
            return [Call("final_answer", {"answer": "I cannot read the request."})]
        room, written = asked.group(1), f"{asked.group(2)}/{asked.group(3)}/{asked.group(4)}"
        iso = f"{asked.group(4)}-{asked.group(3)}-{asked.group(2)}"
        hours = {"one": 1, "two": 2, "three": 3}.get(asked.group(5), 1)
        booked = find(request, r"booked (\w+) on ([\d-]+) (\d\d:\d\d)-(\d\d:\d\d)")
        if booked:
            return [Call("final_answer", {"answer": f"BOOKED: {booked.group(1)} {booked.group(2)} "
                                                    f"{booked.group(3)}-{booked.group(4)}"})]
        hours_free = find(request, r"free (.+)")
        if hours_free:
            slots = re.findall(r"(\d\d):00-(\d\d):00", hours_free.group(1))
            start = next((int(a) for a, b in slots if int(a) >= 12 and int(b) - int(a) >= hours), None)
            if start is None:
                return [Call("final_answer", {"answer": "no free afternoon slot"})]
            return [Call("book_room", {"room": room, "date": iso, "start": f"{start:02d}:00",
                                       "end": f"{start + hours:02d}:00"})]
        rejected = any("YYYY-MM-DD" in o for o in request.observations)
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the room service is down"})]
        return [Call("check_availability", {"room": room, "date": iso if rejected else written})]

    return tool_agent(policy, [check_availability, book_room], "booker", max_steps=6)


def build_warmest(*, temps: Sequence[tuple[str, int]] = (("Seville", 24), ("Porto", 19), ("Lyon", 21))) -> Any:
    """One response with a ``get_temperature`` call per city of the task (run in parallel), then the warmest."""
    table = dict(temps)
    get_temperature = make_tool("get_temperature", "This afternoon's forecast temperature of a city in Celsius.",
                                {"city": string("the city")}, "string",
                                lambda city: f"{city} this afternoon: {table.get(city, 0)} C")

    @_at_max_steps("no forecast")
    def policy(request: ScriptedRequest) -> Reply:
        found = re.search(r"Which of ([A-Z][\w ,]+?) is warmest", request.task)
        cities = [c.strip() for c in re.split(r",| and ", found.group(1)) if c.strip()] if found else []
        seen = {m.group(1): int(m.group(2)) for o in request.observations
                for m in re.finditer(r"(\w+) this afternoon: (-?\d+) C", o)}
        if cities and all(c in seen for c in cities):
            warmest = max(cities, key=seen.__getitem__)
            return [Call("final_answer", {"answer": f"WARMEST: {warmest}, {seen[warmest]} C"})]
        if not cities or request.turn >= 3:
            return [Call("final_answer", {"answer": "no forecast"})]
        return [Call("get_temperature", {"city": c}) for c in cities if c not in seen]

    return tool_agent(policy, [get_temperature], "forecaster", max_steps=4)


def build_risotto(*, portions: int = 4, lines: Sequence[tuple[str, str]] = (
        ("arborio rice", "320 g"), ("parmesan", "80 g"), ("butter", "50 g"), ("vegetable stock", "1.2 l"))) -> Any:
    """An opening plan; ``recipe`` (flaky) for 4 portions, ``scale`` to the guests, grams given as kg."""
    listing = ", ".join(f"{name} {qty}" for name, qty in lines)
    recipe = make_tool("recipe", "A dish's ingredients and quantities.", {"dish": string("the dish")}, "string",
                       lambda dish: f"{dish} for {portions} portions: {listing}", flaky=True)
    scale = make_tool("scale", "Rescale a quantity from one number of portions to another.",
                      {"amount": number("the quantity"), "unit": string("its unit"),
                       "from_portions": number("the recipe's portions"), "to_portions": number("the wanted portions")},
                      "string", lambda amount, unit, from_portions, to_portions:
                      f"scaled: {float(amount) * float(to_portions) / float(from_portions):g} {unit} for "
                      f"{int(to_portions)} portions")

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_planning:
            task = _task_of_plan(request)
            guests = re.search(r"for (\d+) people", task)
            return _survey([f"{guests.group(1) if guests else '?'} people eat.", "The answer is wanted in kilograms."],
                           ["The recipe's quantity of rice and its number of portions (recipe)."],
                           ["The rice for everyone: scaled to the guests, converted from grams to kilograms."],
                           ["Look the recipe up.", "Scale the rice to the number of guests.",
                            "Convert to kilograms and report 'RICE: <kg> kg'."])
        if request.is_final_summary:
            return "no quantity"
        guests = re.search(r"for (\d+) people", request.task)
        scaled = find(request, r"scaled: ([\d.]+) (\w+) for")
        if scaled:
            grams = float(scaled.group(1)) * (1000 if scaled.group(2) == "kg" else 1)
            return [Call("final_answer", {"answer": f"RICE: {grams / 1000:g} kg"})]
        rice = find(request, r"for (\d+) portions: .*?rice ([\d.]+) (\w+)")
        if rice and guests:
            return [Call("scale", {"amount": float(rice.group(2)), "unit": rice.group(3),
                                   "from_portions": int(rice.group(1)), "to_portions": int(guests.group(1))})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "no recipe"})]
        return [Call("recipe", {"dish": "risotto"})]

    agent = tool_agent(policy, [recipe, scale], "cook", max_steps=6)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_accounts(*, accounts: Sequence[tuple[str, Sequence[tuple[int, str]]]] = (
        ("K4", ((120, "paid"), (80, "cancelled"), (45, "paid"))), ("K5", ((60, "paid"), (30, "refunded"))),
        ("K6", ((75, "paid"), (25, "paid"), (40, "cancelled"))))) -> Any:
    """A manager CodeAgent delegates each account to ``bookkeeper`` in ONE code loop (paid orders only)."""
    table = {name: orders for name, orders in accounts}
    get_orders = make_tool("get_orders", "The orders of an account with their states.",
                           {"account": string("the account")}, "string", lambda account: f"orders of {account}: "
                           + ", ".join(f"{a} EUR {s}" for a, s in table.get(account, ())), flaky=True)
    add = make_tool("add", "Add up numbers.", {"numbers": {"type": "array", "description": "the numbers"}},
                    "string", lambda numbers: f"sum: {sum(int(n) for n in numbers)}")

    @_at_max_steps("no sum")
    def bookkeeper(request: ScriptedRequest) -> Reply:
        total = find(request, r"sum: (\d+)")
        account = re.search(r"account (\w+)", request.task)
        if total:
            return [Call("final_answer", {"answer": f"paid total of {account.group(1) if account else '?'}: "
                                                    f"{total.group(1)} EUR"})]
        orders = find(request, r"orders of \w+: (.+)")
        if orders:
            return [Call("add", {"numbers": [int(a) for a, s in re.findall(r"(\d+) EUR (\w+)", orders.group(1))
                                             if s == "paid"]})]
        if account is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("get_orders", {"account": account.group(1)})]

    worker = tool_agent(bookkeeper, [get_orders, add], "bookkeeper", max_steps=5,
                        description="Sums an account's paid orders.")

    @_at_max_steps("no total")
    def manager(request: ScriptedRequest) -> str:
        names = re.findall(r"\bK\d+\b", request.task)
        reports = find(request, r"paid totals: (\{.*\})")
        if reports:
            return code_reply("add the paid totals of every account.",
                              f"totals = {reports.group(1)}\nfinal_answer(f'TOTAL: {{sum(totals.values())}} EUR')")
        return code_reply("ask the bookkeeper for each account's paid total, one account at a time.",
                          f"totals = {{}}\nfor account in {names!r}:\n"
                          "    report = bookkeeper(task=f'Sum the paid orders of account {account} (leave out "
                          "cancelled and refunded orders).')\n"
                          "    totals[account] = int(report.split(': ')[-1].split()[0])\n"
                          "print('paid totals:', totals)")

    return code_agent(manager, [], "manager", max_steps=4, managed=[worker])


def build_laptops(*, products: Sequence[tuple[str, int, float]] = (
        ("Aero 14", 949, 4.6), ("Bolt 15", 1199, 4.8), ("Civic 13", 799, 4.2), ("Dune 16", 999, 4.7),
        ("Echo 14", 899, 4.4), ("Flux 13", 649, 3.9))) -> Any:
    """``list_products`` (flaky) lists six laptops; the three best-rated under the budget are answered."""
    listing = "; ".join(f"{name}: {price} EUR, rated {rating}" for name, price, rating in products)
    list_products = make_tool("list_products", "The products of a shop category with price and rating.",
                              {"category": string("the category")}, "string",
                              lambda category: f"{category}: {listing}", flaky=True)

    @_at_max_steps("no products")
    def policy(request: ScriptedRequest) -> Reply:
        budget = re.search(r"under (\d+) EUR", request.task)
        count = re.search(r"the (\w+) best-rated", request.task)
        seen = find(request, r"laptops: (.+)")
        if seen and budget:
            rows = [(m.group(1).strip(), int(m.group(2)), float(m.group(3)))
                    for m in re.finditer(r"([\w ]+?): (\d+) EUR, rated ([\d.]+)", seen.group(1))]
            n = {"two": 2, "three": 3, "four": 4}.get(count.group(1) if count else "", 3)
            best = sorted((r for r in rows if r[1] < int(budget.group(1))), key=lambda r: -r[2])[:n]
            return [Call("final_answer", {"answer": "TOP: " + ", ".join(f"{name} ({rating})"
                                                                        for name, _, rating in best)})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the shop is down"})]
        return [Call("list_products", {"category": "laptops"})]

    return tool_agent(policy, [list_products], "shop_assistant", max_steps=4)


def build_overdue(*, issued: str = "2026-01-15", terms: int = 30) -> Any:
    """CodeAgent: ``get_invoice`` (flaky); the due date and the days overdue are derived in code."""
    get_invoice = make_tool("get_invoice", "An invoice's issue date, amount and payment terms.",
                            {"invoice": string("the invoice id")}, "string",
                            lambda invoice: f"invoice {invoice}: 2400 EUR, issued {issued}, terms net {terms} days",
                            flaky=True)

    @_at_max_steps("no date")
    def policy(request: ScriptedRequest) -> str:
        today = re.search(r"Today is (\d{4}-\d\d-\d\d)", request.task)
        invoice = re.search(r"invoice (\S+?)[ ,.?]", request.task)
        derived = find(request, r"due: (\S+) overdue: (-?\d+)")
        if derived:
            return code_reply("the derived dates answer the task.",
                              f"final_answer('DUE: {derived.group(1)}, OVERDUE: {derived.group(2)} days')")
        seen = find(request, r"issued (\d{4}-\d\d-\d\d), terms net (\d+) days")
        if seen and today:
            return code_reply("the due date is the issue date plus the terms; count the days since.",
                              "from datetime import date, timedelta\n"
                              f"issued = date.fromisoformat('{seen.group(1)}')\n"
                              f"due = issued + timedelta(days={seen.group(2)})\n"
                              f"overdue = (date.fromisoformat('{today.group(1)}') - due).days\n"
                              "print('due:', due.isoformat(), 'overdue:', overdue)")
        if errors(request) >= 3 or invoice is None:
            return code_reply("no invoice.", "final_answer('no invoice')")
        return code_reply(f"look invoice {invoice.group(1)} up.",
                          f"print(get_invoice(invoice='{invoice.group(1)}'))")

    return code_agent(policy, [get_invoice], "accountant", max_steps=5)


def build_welcome() -> Any:
    """``find_employee`` (flaky) writes "SURNAME, Given"; ``send_welcome`` gets "Given Surname" and the id."""
    find_employee = make_tool("find_employee", "Search the staff directory.", {"query": string("a name or team")},
                              "string", lambda query: "2 matches: WEBER, Jonas (E-2231, Payments, started "
                                                      "2026-03-02); WEBER, Anja (E-1187, Legal, started 2019-06-10)",
                              flaky=True)
    send_welcome = make_tool("send_welcome", "Send a new employee the welcome pack.",
                             {"name": string("the employee's full name"), "employee_id": string("the id")},
                             "string", lambda name, employee_id: f"welcome pack sent to {name} ({employee_id})")

    @_at_max_steps("nothing sent")
    def policy(request: ScriptedRequest) -> Reply:
        sent = find(request, r"welcome pack sent to (.+) \((E-\d+)\)")
        if sent:
            return [Call("final_answer", {"answer": f"SENT: {sent.group(1)} ({sent.group(2)})"})]
        who = re.search(r"new colleague (\w+) (\w+) from (\w+)", request.task)
        matches = find(request, r"\d+ matches: (.+)")
        if matches and who:
            for m in re.finditer(r"([A-Z]+), (\w+) \((E-\d+), (\w+),", matches.group(1)):
                if m.group(2) == who.group(1) and m.group(4) == who.group(3):
                    return [Call("send_welcome", {"name": f"{m.group(2)} {m.group(1).title()}",
                                                  "employee_id": m.group(3)})]
            return [Call("final_answer", {"answer": "no such colleague"})]
        if who is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "the directory is down"})]
        return [Call("find_employee", {"query": who.group(2)})]

    return tool_agent(policy, [find_employee, send_welcome], "hr_assistant", max_steps=5)


def build_growth(*, revenue: Sequence[tuple[str, str]] = (("Q1 2026", "1,250,000"), ("Q2 2026", "1,400,000"))) -> Any:
    """CodeAgent: ``get_revenue`` per quarter (flaky), the growth in percent derived in code, one decimal."""
    table = dict(revenue)
    get_revenue = make_tool("get_revenue", "A quarter's revenue in EUR.", {"quarter": string("like 'Q1 2026'")},
                            "string", lambda quarter: f"revenue {quarter}: {table.get(quarter, '0')} EUR", flaky=True)

    @_at_max_steps("no growth")
    def policy(request: ScriptedRequest) -> str:
        quarters = re.findall(r"Q\d \d{4}", request.task)
        done = find(request, r"growth: (-?[\d.]+) %")
        if done:
            return code_reply("the growth answers the task.", f"final_answer('GROWTH: {done.group(1)}%')")
        seen = {m.group(1): m.group(2) for o in request.observations
                for m in re.finditer(r"revenue (Q\d \d{4}): ([\d,]+) EUR", o)}
        if quarters and all(q in seen for q in quarters):
            first, last = (int(seen[q].replace(",", "")) for q in quarters[:2])
            return code_reply("growth in percent from the first quarter to the second, one decimal.",
                              f"first, second = {first}, {last}\ngrowth = round((second - first) / first * 100, 1)\n"
                              "print('growth:', growth, '%')")
        if errors(request) >= 3 or not quarters:
            return code_reply("no revenue.", "final_answer('no revenue')")
        return code_reply("look both quarters up.", "\n".join(f"print(get_revenue(quarter='{q}'))" for q in quarters))

    return code_agent(policy, [get_revenue], "analyst", max_steps=5)


def build_capacity(*, loads: Sequence[tuple[str, int]] = (("Leeds", 94), ("Hull", 71), ("York", 88), ("Bath", 97),
                                                          ("Derby", 62))) -> Any:
    """``warehouse_load`` (flaky) per warehouse named; only those above the threshold are answered."""
    table = dict(loads)
    load = make_tool("warehouse_load", "A warehouse's current load in percent of its capacity.",
                     {"warehouse": string("the warehouse's city")}, "string",
                     lambda warehouse: f"{warehouse} warehouse: {table.get(warehouse, 0)}% full", flaky=True)

    @_at_max_steps("no loads")
    def policy(request: ScriptedRequest) -> Reply:
        named = re.search(r"Check the ([A-Z][\w, ]+?) warehouses", request.task)
        wanted = [w.strip() for w in re.split(r",| and ", named.group(1)) if w.strip()] if named else []
        limit = re.search(r"above (\d+)%", request.task)
        seen = {m.group(1): int(m.group(2)) for o in request.observations
                for m in re.finditer(r"(\w+) warehouse: (\d+)% full", o)}
        missing = [w for w in wanted if w not in seen]
        if wanted and limit and not missing:
            over = [w for w in wanted if seen[w] > int(limit.group(1))]
            return [Call("final_answer", {"answer": f"OVER: {', '.join(over) or 'none'} ({len(wanted)} checked)"})]
        if not wanted or errors(request) >= 3:
            return [Call("final_answer", {"answer": "no warehouses"})]
        return [Call("warehouse_load", {"warehouse": missing[0]})]

    return tool_agent(policy, [load], "logistics_agent", max_steps=len(loads) + 3)


def build_courier(*, km: int = 560) -> Any:
    """A dispatcher asks ``geo_agent`` for the distance, computes ``travel_time`` and asks ``clock_agent``
    for the local arrival: delegations whose tools fit though their descriptions share few words with the task."""
    distance = make_tool("road_distance", "The road distance between two cities in km.",
                         {"origin": string("from"), "destination": string("to")}, "string",
                         lambda origin, destination: f"{origin} to {destination}: {km} km by road", flaky=True)
    convert = make_tool("convert_time", "Convert a clock time from one city's time zone to another's.",
                        {"time": string("HH:MM"), "from_city": string("the city of the time"),
                         "to_city": string("the city wanted")}, "string",
                        lambda time, from_city, to_city: f"{time} in {from_city} is "
                        f"{(int(time[:2]) + 1) % 24:02d}:{time[3:]} in {to_city}")
    hours = make_tool("travel_time", "Hours and minutes to drive a distance at a speed.",
                      {"km": number("the distance"), "kmh": number("the speed")}, "string",
                      lambda km, kmh: f"travel time: {int(float(km) // float(kmh))} h "
                                      f"{round(float(km) % float(kmh) / float(kmh) * 60)} min")

    def worker(done: str, tool_name: str, asked: str) -> Any:
        """Call ``tool_name`` with the named groups of ``asked`` in the task; answer the result matching ``done``."""

        def policy(request: ScriptedRequest) -> Reply:
            found, arguments = find(request, done), re.search(asked, request.task)
            if found or arguments is None or errors(request) >= 3:
                return [Call("final_answer", {"answer": found.group(0) if found else "unknown"})]
            return [Call(tool_name, arguments.groupdict())]

        return policy

    geo = tool_agent(worker(r"\w+ to \w+: \d+ km by road", "road_distance",
                            r"between (?P<origin>\w+) and (?P<destination>\w+)"),
                     [distance], "geo_agent", max_steps=4, description="Knows road distances between places.")
    clock = tool_agent(worker(r"\d\d:\d\d in \w+ is \d\d:\d\d in \w+", "convert_time",
                              r"(?P<time>\d\d:\d\d) (?P<from_city>\w+) time to (?P<to_city>\w+) time"),
                       [convert], "clock_agent", max_steps=3, description="Converts clock times between time zones.")

    @_at_max_steps("no arrival")
    def manager(request: ScriptedRequest) -> Reply:
        trip = re.search(r"leaves (\w+) at (\d\d):(\d\d) \w+ time for (\w+), driving at (\d+) km/h", request.task)
        if trip is None:
            return [Call("final_answer", {"answer": "I cannot read the trip."})]
        origin, hh, mm, destination, speed = trip.groups()
        local = find(request, r"is (\d\d:\d\d) in (\w+)")
        if local:
            return [Call("final_answer", {"answer": f"ARRIVES: {local.group(1)} {local.group(2)} time"})]
        took = find(request, r"travel time: (\d+) h (\d+) min")
        if took:
            total = int(hh) * 60 + int(mm) + int(took.group(1)) * 60 + int(took.group(2))
            at = f"{total // 60 % 24:02d}:{total % 60:02d}"
            return [Call("clock_agent", {"task": f"Convert {at} {origin} time to {destination} time."})]
        road = find(request, r": (\d+) km by road")
        if road:
            return [Call("travel_time", {"km": int(road.group(1)), "kmh": int(speed)})]
        return [Call("geo_agent", {"task": f"What is the road distance between {origin} and {destination}?"})]

    return tool_agent(manager, [hours], "dispatcher", max_steps=6, managed=[geo, clock])


def build_estimate(*, tariff: str = "0.31", down: int = 2) -> Any:
    """CodeAgent: ``get_tariff`` fails twice, the Thoughts refuse to guess, the third try's tariff is used."""
    state = {"calls": 0}

    def lookup(region: str) -> str:
        state["calls"] += 1
        if state["calls"] <= down:
            raise ConnectionError("tariff service unreachable")
        return f"tariff in {region}: {tariff} EUR per kWh"

    get_tariff = make_tool("get_tariff", "The current electricity tariff of a region.", {"region": string("region")},
                           "string", lookup)

    @_at_max_steps("no estimate")
    def policy(request: ScriptedRequest) -> str:
        asked = re.search(r"a ([\d.]+) kW (.+?) running (\d+) hours a day.*tariff in (\w+)", request.task)
        done = find(request, r"yearly cost: (\d+)")
        if done:
            return code_reply("the estimate answers the task.", f"final_answer('ESTIMATE: {done.group(1)} EUR per year')")
        rate = find(request, r"tariff in \w+: ([\d.]+) EUR per kWh")
        if rate and asked:
            return code_reply("estimate the yearly use and its cost, rounded to whole euros as the task asks.",
                              f"kwh = {asked.group(1)} * {asked.group(3)} * 365\ncost = round(kwh * {rate.group(1)})\n"
                              "print('yearly kWh:', kwh)\nprint('yearly cost:', cost)")
        if asked is None or errors(request) >= 4:
            return code_reply("no tariff.", "final_answer('no tariff')")
        why = ("the tariff service was unreachable; I try again rather than guess a tariff."
               if errors(request) else f"look up the current tariff in {asked.group(4)}.")
        return code_reply(why, f"print(get_tariff(region='{asked.group(4)}'))")

    return code_agent(policy, [get_tariff], "energy_advisor", max_steps=7)


def build_checked(*, factor: float = 1.609344) -> Any:
    """A ToolCallingAgent whose bare-number answer fails its ``final_answer_checks``; it answers with the unit."""
    convert = make_tool("convert", "Convert a length between units.", {"value": number("the length"),
                        "from_unit": string("its unit"), "to_unit": string("the unit wanted")}, "string",
                        lambda value, from_unit, to_unit: f"{float(value):g} {from_unit} = {float(value) * factor:.2f} "
                                                          f"{to_unit}")

    def has_unit(answer: Any, memory: Any, agent: Any = None) -> bool:
        return bool(re.fullmatch(r"-?[\d.]+ [a-z]+", str(answer)))

    def policy(request: ScriptedRequest) -> Reply:
        asked, done = re.search(r"How far is ([\d.]+) (\w+) in (\w+)\?", request.task), find(request, r"= ([\d.]+)")
        if request.is_final_summary or asked is None:
            return "no conversion"
        if done is None:
            return [Call("convert", {"value": float(asked.group(1)), "from_unit": asked.group(2), "to_unit": asked[3]})]
        rejected = any("has_unit failed" in o for o in request.observations)  # the check's error, in memory
        return [Call("final_answer", {"answer": f"{done.group(1)} km" if rejected else done.group(1)})]

    agent = tool_agent(policy, [convert], "converter", max_steps=5)
    agent.final_answer_checks = [has_unit]
    return agent


def build_unit_price(*, buys: Sequence[tuple[int, str]] = ((3, "7.50"), (2, "5.40"), (5, "11.00"))) -> Any:
    """CodeAgent: the AVERAGE price per kg of ``get_purchases`` is total paid / total kg (a weighted mean)."""
    listing = "; ".join(f"{kg} kg for {eur} EUR" for kg, eur in buys)
    get_purchases = make_tool("get_purchases", "This month's coffee purchases.", {"month": string("YYYY-MM")},
                              "string", lambda month: f"purchases {month}: {listing}", flaky=True)

    @_at_max_steps("no average")
    def policy(request: ScriptedRequest) -> str:
        done, seen = find(request, r"per kg: ([\d.]+)"), find(request, r"purchases [\d-]+: (.+)")
        if done:
            return code_reply("the weighted average answers the task.", f"final_answer('AVG: {done.group(1)} EUR per kg')")
        if seen:
            rows = re.findall(r"(\d+) kg for ([\d.]+) EUR", seen.group(1))
            return code_reply("average price per kg = total paid / total kilograms (not a mean of the bags).",
                              f"print('per kg:', round(({' + '.join(e for _, e in rows)}) / "
                              f"{sum(int(k) for k, _ in rows)}, 2))")
        month = re.search(r"in (\d{4}-\d\d)", request.task)
        return code_reply("fetch the purchases.", f"print(get_purchases(month='{month.group(1) if month else ''}'))")

    return code_agent(policy, [get_purchases], "bookkeeper", max_steps=6)
