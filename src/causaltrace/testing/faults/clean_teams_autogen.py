"""Correct AutoGen AgentChat runs for the negative set of :mod:`.clean_runs` (issue 32): reactive scripted teams in
the style of :mod:`.teams_autogen` with NO planted error, in shapes a careless detector reads as faults (a rejected
draft restated, selectors, Swarm hand-offs and hand-backs, a MagenticOne facts sheet, polling, pagination).

The teams are the rows of :data:`.clean_runs.AUTOGEN_TEAMS` (task, verifier, what each exercises, data variants);
each builder's docstring says what its team does.
autogen_agentchat is imported at import (:mod:`.clean_runs` imports this module lazily).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import partial
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import MagenticOneGroupChat, SelectorGroupChat, Swarm
from autogen_core.tools import FunctionTool

from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, call, orchestrator_policy
from causaltrace.testing.faults.teams_autogen import (
    agent,
    code_message,
    errors,
    executor,
    ok,
    results_of,
    round_robin,
    said,
    tool,
)
from causaltrace.testing.faults.teams_autogen import (
    terminated as _terminated,
)

__all__ = ["build_balance", "build_census", "build_contractor", "build_export", "build_fare", "build_fuel",
           "build_gate", "build_invoice", "build_legs", "build_nested", "build_refund", "build_rice",
           "build_router", "build_tax", "build_tickets"]


def _in_task(request: ScriptedRequest, *, pattern: str) -> str:
    """The first group of ``pattern`` in the request's task ("unknown" when it does not match)."""
    found = re.search(pattern, request.task())
    return found.group(1) if found else "unknown"


def _selector(first: str, *rules: tuple[str, str]) -> Any:
    """A scripted selector: the member of the first rule whose marker (``"name: TEXT"``) the conversation holds,
    else ``first``."""

    def select(request: ScriptedRequest) -> str:
        text = request.text()
        return next((member for marker, member in rules if marker in text), first)

    return select


#: the travel desk's selector: the member whose tools fit what the conversation still lacks
_fare_selector = _selector("planner", ("fx_agent: FARE:", "reviewer"), ("fare_agent: CHEAPEST:", "fx_agent"),
                           ("planner: PLAN:", "fare_agent"))
#: the census desk's: the researcher until both figures are found, the analyst to add, the writer
_census_selector = _selector("researcher", ("analyst: SUM:", "writer"), ("researcher: FOUND:", "analyst"))


def _member(name: str, policy: Any, tools: list[Any], description: str) -> Any:
    """A MagenticOne member: an AssistantAgent on its scripted policy, with a description for the team's listing."""
    return AssistantAgent(name, ScriptedChatCompletionClient(policy, model=f"scripted-{name}"),
                          tools=tools or None, max_tool_iterations=4, description=description)


def build_invoice(*, lines: Sequence[tuple[str, str]] = (("consulting", "1200.00"), ("travel", "184.30"),
                                                         ("software licence", "89.99"), ("printing", "12.40"))) -> Any:
    """The bookkeeper adds the invoice's lines and drafts a sentence; the reviewer rejects the format; the
    bookkeeper restates it as ``TOTAL``; the reviewer reads the lines itself, re-adds them and approves."""
    listing = ", ".join(f"{name} {amount} EUR" for name, amount in lines)

    async def get_invoice_lines(invoice: str) -> str:
        return f"invoice {invoice} lines: {listing}"

    async def add_amounts(amounts: list[float]) -> str:
        return f"sum: {sum(amounts):.2f}"

    invoice_of = partial(_in_task, pattern=r"invoice (F-\d+)")
    def bookkeeper(request: ScriptedRequest) -> Any:
        total = ok(request, "add_amounts")
        if total is not None:
            value = total.split(": ")[1]
            if said(request, "reviewer", r"^REJECT"):
                return f"TOTAL: {value} EUR"
            return f"The invoice comes to {value} euros."
        seen = ok(request, "get_invoice_lines")
        if seen is not None:
            return call("add_amounts", amounts=[float(a) for a in re.findall(r"(\d+\.\d\d) EUR", seen)])
        if errors(request, "get_invoice_lines") >= 3:
            return "TOTAL: unknown"
        return call("get_invoice_lines", invoice=invoice_of(request))

    def reviewer(request: ScriptedRequest) -> Any:
        draft = said(request, "bookkeeper", r"TOTAL: ([\d.]+) EUR")
        if draft is None:
            return "REJECT: state the total as 'TOTAL: <euros> EUR'."
        lines_seen = ok(request, "get_invoice_lines")
        if lines_seen is None:
            return call("get_invoice_lines", invoice=invoice_of(request))
        amounts = re.findall(r"(\d+\.\d\d) EUR", lines_seen)
        recomputed = f"{sum(float(a) for a in amounts):.2f}"
        if recomputed == draft.group(1):
            return f"TOTAL: {recomputed} checked against the {len(amounts)} lines of the invoice. APPROVE"
        return f"REJECT: the {len(amounts)} lines add up to {recomputed}, not {draft.group(1)}."

    keeper = agent("bookkeeper", bookkeeper, [tool(get_invoice_lines, "The line items of an invoice.", flaky=True),
                                              tool(add_amounts, "Add up amounts of money.")])
    checker = agent("reviewer", reviewer, [tool(get_invoice_lines, "The line items of an invoice.")])
    return round_robin([keeper, checker], "APPROVE", 8)


def build_fare(*, fares: Sequence[tuple[str, str]] = (("UA 412", "188.40"), ("AA 2231", "172.15"),
                                                      ("B6 901", "179.00")), rate: str = "0.9213") -> Any:
    """Selector: planner → fare_agent → fx_agent → reviewer (by the conversation: who has spoken and what is
    missing); the reviewer checks the fare and the rate with its own tools."""
    listing = ", ".join(f"{flight} at {price} USD" for flight, price in fares)

    async def search_fares(origin: str, destination: str, date: str) -> str:
        return f"fares {origin}-{destination} on {date}: {listing}"

    async def get_rate(pair: str) -> str:
        return f"rate {pair}: {rate}"

    async def multiply(a: float, b: float) -> float:
        return round(a * b, 6)

    def trip(text: str) -> re.Match[str] | None:
        return re.search(r"from (\w{3}) to (\w{3}) on (\d{4}-\d\d-\d\d)", text)

    def cheapest(text: str) -> tuple[str, str]:
        rows = re.findall(r"([A-Z0-9]{2} \d+) at ([\d.]+) USD", text)
        return min(rows, key=lambda row: float(row[1]))

    def planner(request: ScriptedRequest) -> str:
        found = trip(request.task())
        if found is None:
            return "PLAN: I cannot read the trip."
        return (f"PLAN: 1. fare_agent finds the cheapest fare from {found.group(1)} to {found.group(2)} on "
                f"{found.group(3)}, in USD. 2. fx_agent converts it to EUR at today's USD/EUR rate, rounded to "
                "cents. 3. reviewer checks both.")

    def fare_agent(request: ScriptedRequest) -> Any:
        seen = ok(request, "search_fares")
        if seen is not None:
            flight, price = cheapest(seen)
            return f"CHEAPEST: {flight} at {price} USD"
        found = trip(request.task())
        if found is None or errors(request, "search_fares") >= 3:
            return "CHEAPEST: unknown"
        return call("search_fares", origin=found.group(1), destination=found.group(2), date=found.group(3))

    def fx_agent(request: ScriptedRequest) -> Any:
        product = ok(request, "multiply")
        fare = said(request, "fare_agent", r"CHEAPEST: (.+?) at ([\d.]+) USD")
        rate_seen = ok(request, "get_rate")
        if product is not None and fare and rate_seen:
            return (f"FARE: {float(product):.2f} EUR ({fare.group(2)} USD at {rate_seen.split(': ')[1]}, rounded "
                    "to cents)")
        if rate_seen is not None and fare:
            return call("multiply", a=float(fare.group(2)), b=float(rate_seen.split(": ")[1]))
        return call("get_rate", pair="USD/EUR")

    def reviewer(request: ScriptedRequest) -> Any:
        stated = said(request, "fx_agent", r"FARE: ([\d.]+) EUR \(([\d.]+) USD at ([\d.]+)")
        if stated is None:
            return "REJECT: no converted fare to check."
        found = trip(request.task())
        seen = ok(request, "search_fares")
        if seen is None and found is not None:
            return call("search_fares", origin=found.group(1), destination=found.group(2), date=found.group(3))
        rate_seen = ok(request, "get_rate")
        if rate_seen is None:
            return call("get_rate", pair="USD/EUR")
        _, low = cheapest(seen or "")
        expected = f"{float(low) * float(rate_seen.split(': ')[1]):.2f}"
        if low == stated.group(2) and expected == stated.group(1):
            return f"FARE: {expected} EUR checked: the cheapest fare and today's rate. APPROVE"
        return f"REJECT: expected {expected} EUR from the {low} USD fare."

    members = [agent("planner", planner),
               agent("fare_agent", fare_agent, [tool(search_fares, "The fares of the flights between two airports on a date.", flaky=True)]),
               agent("fx_agent", fx_agent, [tool(get_rate, "Today's exchange rate of a currency pair."), tool(multiply, "Multiply two numbers.")]),
               agent("reviewer", reviewer, [tool(search_fares, "The fares of the flights between two airports on a date."), tool(get_rate, "Today's exchange rate of a currency pair.")])]
    return SelectorGroupChat(members, name="travel_desk",
                             model_client=ScriptedChatCompletionClient(_fare_selector, model="scripted-selector"),
                             termination_condition=_terminated("APPROVE", 12))


def build_refund(*, lines: Sequence[tuple[str, str, str]] = (("desk lamp", "34.90", "damaged on delivery"),
                                                             ("lamp bulb", "4.50", "delivered"),
                                                             ("shipping", "5.00", "charged"))) -> Any:
    """Swarm: triage looks the order up (flaky) and hands off to billing_agent, which quotes and refunds the
    damaged item only."""
    table = {name: (amount, state) for name, amount, state in lines}

    async def lookup_order(order: str) -> str:
        rows = ", ".join(f"{name} {amount} EUR ({state})" for name, amount, state in lines)
        return f"order {order} for Marta Ruiz: {rows}"

    async def refund_quote(order: str, item: str) -> str:
        amount = table.get(item, ("0.00", ""))[0]
        return f"refundable for {item} on order {order}: {amount} EUR"

    async def issue_refund(order: str, amount: float) -> str:
        return f"refund R-77 issued: {amount:.2f} EUR to order {order}"

    order_of = partial(_in_task, pattern=r"order (A-\d+)")
    def triage(request: ScriptedRequest) -> Any:
        seen = ok(request, "lookup_order")
        if seen is not None:
            return call("transfer_to_billing_agent")
        if errors(request, "lookup_order") >= 3:
            return "I cannot find the order. DONE"
        return call("lookup_order", order=order_of(request))

    def billing(request: ScriptedRequest) -> Any:
        issued = ok(request, "issue_refund")
        if issued is not None:
            found = re.search(r"refund (R-\d+) issued: ([\d.]+) EUR to order (\S+)", issued)
            return f"REFUND: {found.group(2)} EUR ({found.group(1)}) for order {found.group(3)}. DONE" if found \
                else "REFUND: unknown. DONE"
        quote = ok(request, "refund_quote")
        if quote is not None:
            return call("issue_refund", order=order_of(request), amount=float(quote.split(": ")[1].split()[0]))
        damaged = re.search(r"(?:the |my )([\w ]+?) (?:arrived|was|is) (?:broken|damaged)", request.task())
        return call("refund_quote", order=order_of(request), item=damaged.group(1) if damaged else "unknown")

    front = agent("triage", triage, [tool(lookup_order, "An order's customer and lines, with each line's state.", flaky=True)],
                  handoffs=["billing_agent"])
    money = agent("billing_agent", billing, [tool(refund_quote, "The refundable amount of one item of an order."),
                                             tool(issue_refund, "Refund an amount to the customer of an order.")], handoffs=["triage"])
    return Swarm([front, money], name="support", termination_condition=_terminated("DONE", 12))


def _route(text: str) -> re.Match[str] | None:
    return re.search(r"from (\w+) to (\w+) in a van using ([\d.]+) litres per 100 km", text)


def _fuel_orchestrator(request: ScriptedRequest) -> str:
    """The scripted MagenticOne orchestrator of :mod:`causaltrace.testing.autogen`, with a facts sheet that restates
    the task's figures."""
    prompt = request.last_user_text()
    if "Here is the pre-survey:" in prompt:
        found = _route(prompt)
        given = (f"- A van drives from {found.group(1)} to {found.group(2)} using {found.group(3)} litres per "
                 "100 km.") if found else "- Nothing."
        return (f"1. GIVEN OR VERIFIED FACTS\n{given}\n\n2. FACTS TO LOOK UP\n- The road distance.\n"
                "- Today's diesel price in Spain.\n\n3. FACTS TO DERIVE\n- The litres used and their cost, in "
                "whole euros.\n\n4. EDUCATED GUESSES\n- None.")
    # the base policy's instruction for a "reviewer" names the arithmetic team's solver: here it is the calculator
    base = orchestrator_policy(("researcher", "calculator", "reviewer"))
    return base(request).replace("the solver's arithmetic", "the calculator's arithmetic")


def build_fuel(*, km: int = 561, price: str = "1.52") -> Any:
    """MagenticOne over researcher → calculator → reviewer; the orchestrator's facts sheet restates the task's
    figures (the scripted orchestrator of :mod:`causaltrace.testing.autogen` for everything else)."""
    async def get_distance(origin: str, destination: str) -> str:
        return f"{origin} to {destination}: {km} km by road"

    async def get_fuel_price(country: str, fuel: str) -> str:
        return f"{fuel} in {country} today: {price} EUR per litre"

    async def calculate(expression: str) -> str:
        if not re.fullmatch(r"[\d.\s*/+()-]+", expression):
            return "only arithmetic is allowed"
        return f"{expression} = {round(eval(expression), 6):g}"  # checked above: arithmetic only

    def researcher(request: ScriptedRequest) -> Any:
        distance = ok(request, "get_distance")
        fuel = ok(request, "get_fuel_price")
        found = _route(request.text())
        if distance is not None and fuel is not None:
            return f"FOUND: {distance}; {fuel}."
        if distance is not None:
            return call("get_fuel_price", country="Spain", fuel="diesel")
        if found is None:
            return "FOUND: nothing (no route in the request)."
        return call("get_distance", origin=found.group(1), destination=found.group(2))

    def calculator(request: ScriptedRequest) -> Any:
        found = said(request, "researcher", r": (\d+) km by road; diesel in \w+ today: ([\d.]+) EUR per litre")
        use = _route(request.text())
        result = ok(request, "calculate")
        if result is not None:
            value = float(result.rsplit("= ", 1)[1])
            return f"{result} EUR for the trip. RESULT: {round(value)} (whole euros)"
        if found is None or use is None:
            return "RESULT: unknown"
        return call("calculate", expression=f"{found.group(1)} * {use.group(3)} / 100 * {found.group(2)}")

    def reviewer(request: ScriptedRequest) -> Any:
        found = said(request, "researcher", r": (\d+) km by road; diesel in \w+ today: ([\d.]+) EUR per litre")
        stated = said(request, "calculator", r"RESULT: (\d+)")
        use = _route(request.text())
        if found is None or stated is None or use is None:
            return "REJECT: nothing to check yet."
        litres = float(found.group(1)) * float(use.group(3)) / 100
        expected = round(litres * float(found.group(2)))
        if expected == int(stated.group(1)):
            return f"RESULT: {expected} verified ({litres:g} litres at {found.group(2)} EUR). APPROVE"
        return f"REJECT: {litres:g} litres at {found.group(2)} EUR is {expected} euros."

    return MagenticOneGroupChat(
        [_member("researcher", researcher, [FunctionTool(get_distance, description="The road distance between two cities."),
                                           FunctionTool(get_fuel_price, description="Today's average pump price of a fuel in a country.")],
                "Looks up distances and fuel prices."),
         _member("calculator", calculator, [FunctionTool(calculate, description="Evaluate an arithmetic expression (numbers, + - * / and parentheses).")],
                "Computes with a calculator."),
         _member("reviewer", reviewer, [], "Checks the calculation against the figures found.")],
        model_client=ScriptedChatCompletionClient(_fuel_orchestrator, model="scripted-orchestrator"), max_turns=12)


def build_legs(*, legs: Sequence[tuple[str, str, float]] = (("Boston", "Providence", 50.3),
                                                            ("Providence", "New Haven", 103.6),
                                                            ("New Haven", "New York", 79.8))) -> Any:
    """The coder fetches the legs (flaky), sends code summing the miles and converting to km, and reports."""

    async def get_legs(route: str) -> str:
        return json.dumps([list(leg) for leg in legs])

    def coder(request: ScriptedRequest) -> Any:
        output = said(request, "executor", r"total miles: ([\d.]+)\s+total km: ([\d.]+)")
        if output:
            return (f"KM: {output.group(2)} ({output.group(1)} miles x 1.609344, rounded to 0.1 km). DONE")
        data = ok(request, "get_legs")
        if data is not None:
            rows = json.loads(data)
            return code_message("Sum every leg and convert the miles to kilometres:",
                                f"legs = {rows!r}\ntotal_miles = round(sum(leg[2] for leg in legs), 1)\n"
                                "print('total miles:', total_miles)\n"
                                "print('total km:', round(total_miles * 1.609344, 1))")
        if errors(request, "get_legs") >= 3:
            return "KM: unknown. DONE"
        route = re.search(r"route (\S+)", request.task())
        return call("get_legs", route=route.group(1) if route else "unknown")

    return round_robin([agent("coder", coder, [tool(get_legs, "The legs of a route with their lengths in miles.", flaky=True)]), executor()], "DONE", 8)


def build_tickets(*, pages: Sequence[Sequence[tuple[str, str, str]]] = (
        (("T-101", "open", "high"), ("T-102", "closed", "low"), ("T-103", "open", "low"), ("T-104", "open", "medium")),
        (("T-105", "closed", "high"), ("T-106", "open", "high"), ("T-107", "closed", "medium"),
         ("T-108", "open", "low")),
        (("T-109", "open", "medium"),))) -> Any:
    """``list_tickets(queue, cursor)`` page by page until no cursor is left; the reviewer checks the count with
    ``queue_stats``."""
    every = [row for page in pages for row in page]

    async def list_tickets(queue: str, cursor: str) -> str:
        index = 0 if not cursor else int(cursor.lstrip("c")) - 1
        if not 0 <= index < len(pages):
            return f"queue {queue}: no such page"
        start = sum(len(p) for p in pages[:index]) + 1
        rows = ", ".join(f"{t} {state} {prio}" for t, state, prio in pages[index])
        after = f"c{index + 2}" if index + 1 < len(pages) else "none"
        return (f"queue {queue} tickets {start}-{start + len(pages[index]) - 1} of {len(every)}: {rows}; "
                f"next cursor: {after}")

    async def queue_stats(queue: str) -> str:
        open_ = [t for t in every if t[1] == "open"]
        high = [t for t in open_ if t[2] == "high"]
        return f"queue {queue}: {len(every)} tickets, {len(open_)} open, {len(high)} open with high priority"

    queue_of = partial(_in_task, pattern=r"the (\w+) queue")
    def analyst(request: ScriptedRequest) -> Any:
        pages_seen = results_of(request, "list_tickets")
        last = pages_seen[-1][1] if pages_seen else ""
        cursor = re.search(r"next cursor: (\w+)", last)
        if cursor and cursor.group(1) == "none":
            rows = [m for _, text in pages_seen for m in re.findall(r"(T-\d+) (open|closed) (\w+)", text)]
            open_ = [r for r in rows if r[1] == "open"]
            high = [r for r in open_ if r[2] == "high"]
            return (f"OPEN: {len(open_)} of {len(rows)} tickets in the {queue_of(request)} queue, {len(high)} with "
                    f"high priority ({', '.join(r[0] for r in high)}).")
        return call("list_tickets", queue=queue_of(request), cursor=cursor.group(1) if cursor else "")

    def reviewer(request: ScriptedRequest) -> Any:
        stated = said(request, "analyst", r"OPEN: (\d+) of (\d+) tickets .*?, (\d+) with high priority")
        if stated is None:
            return "REJECT: no count to check."
        stats = ok(request, "queue_stats")
        if stats is None:
            return call("queue_stats", queue=queue_of(request))
        found = re.search(r"(\d+) tickets, (\d+) open, (\d+) open with high", stats)
        if found and found.groups() == (stated.group(2), stated.group(1), stated.group(3)):
            return f"OPEN: {stated.group(1)} checked against queue_stats. APPROVE"
        return "REJECT: the counts differ from queue_stats."

    return round_robin([agent("analyst", analyst, [tool(list_tickets, "One page of a support queue's tickets; pass the previous page's next cursor ('' for the first).")], iterations=6),
                        agent("reviewer", reviewer, [tool(queue_stats, "The counts of a support queue.")])], "APPROVE", 6)


def build_gate(*, published: str = "B12", changed: str = "C4") -> Any:
    """``flight_status`` gives the published gate (flaky), ``gate_changes`` the later change; the notifier
    sends the passenger the new gate."""

    async def flight_status(flight: str, date: str) -> str:
        return f"{flight} on {date}: on time, gate {published} (published 07:10)"

    async def gate_changes(flight: str, date: str) -> str:
        return f"{flight} on {date}: gate changed from {published} to {changed} at 09:45"

    async def send_notice(passenger: str, text: str) -> str:
        return f"notice sent to {passenger}: {text}"

    def trip(request: ScriptedRequest) -> re.Match[str] | None:
        return re.search(r"passenger ([A-Z]\w+ [A-Z]\w+) on ([A-Z]{2} \d+) on (\d{4}-\d\d-\d\d)", request.task())

    def gate_agent(request: ScriptedRequest) -> Any:
        found = trip(request)
        if found is None:
            return "GATE: unknown"
        moved = ok(request, "gate_changes")
        if moved is not None:
            new = re.search(r"to (\w+) at (\d\d:\d\d)", moved)
            return (f"GATE: {new.group(1)} for {found.group(2)} on {found.group(3)} (changed at {new.group(2)}; "
                    "the published gate no longer holds)") if new else "GATE: unknown"
        if ok(request, "flight_status") is not None:
            return call("gate_changes", flight=found.group(2), date=found.group(3))
        if errors(request, "flight_status") >= 3:
            return "GATE: unknown"
        return call("flight_status", flight=found.group(2), date=found.group(3))

    def notifier(request: ScriptedRequest) -> Any:
        found = trip(request)
        gate = said(request, "gate_agent", r"GATE: (\w+) for ([A-Z]{2} \d+)")
        if found is None or gate is None:
            return "Nothing to send yet."
        sent = ok(request, "send_notice")
        if sent is not None:
            return f"GATE: {gate.group(1)} ({sent.rstrip('.')}). DONE"
        return call("send_notice", passenger=found.group(1),
                    text=f"{gate.group(2)} on {found.group(3)} boards at gate {gate.group(1)}.")

    return round_robin([agent("gate_agent", gate_agent, [tool(flight_status, "A flight's status and gate as published in the morning.", flaky=True),
                                                         tool(gate_changes, "Gate changes announced for a flight since its status was published.")]),
                        agent("notifier", notifier, [tool(send_notice, "Send a passenger a text message.")])], "DONE", 6)


def build_router(*, account: str = "5521", credit: float = 10.0) -> Any:
    """Swarm: triage looks the account up (flaky), hands off to tech_agent (diagnostics, update), which hands
    back; triage then hands off to billing_agent for the credit the task asks for."""

    async def lookup_account(account: str) -> str:
        return f"account {account}: Lea Brandt, router R-88, 3 outages this week (eligible for goodwill credit)"

    async def run_diagnostics(device: str) -> str:
        return f"{device}: firmware 2.1 outdated, connection drops fixed by firmware 2.4"

    async def apply_update(device: str, firmware: str) -> str:
        return f"{device} updated to firmware {firmware}; connection stable for 10 minutes"

    async def issue_credit(account: str, amount: float) -> str:
        return f"credit C-310: {amount:.2f} EUR to account {account}"

    account_of = partial(_in_task, pattern=r"account (\d+)")
    def triage(request: ScriptedRequest) -> Any:
        if ok(request, "lookup_account") is None:
            if errors(request, "lookup_account") >= 3:
                return "I cannot find the account. DONE"
            return call("lookup_account", account=account_of(request))
        if ok(request, "transfer_to_tech_agent") is not None:  # tech_agent has handed the account back
            return call("transfer_to_billing_agent")
        return call("transfer_to_tech_agent")

    def tech(request: ScriptedRequest) -> Any:
        updated = ok(request, "apply_update")
        if updated is not None:
            return call("transfer_to_triage")
        found = ok(request, "run_diagnostics")
        if found is not None:
            fix = re.search(r"(\S+): .*fixed by firmware ([\d.]+)", found)
            return call("apply_update", device=fix.group(1), firmware=fix.group(2)) if fix else "FIXED: no. DONE"
        return call("run_diagnostics", device="R-88")

    def billing(request: ScriptedRequest) -> Any:
        done = ok(request, "issue_credit")
        if done is not None:
            found = re.search(r"credit (C-\d+): ([\d.]+) EUR", done)
            return f"CREDIT: {found.group(2)} EUR ({found.group(1)}); the router is fixed. DONE" if found \
                else "CREDIT: unknown. DONE"
        amount = re.search(r"the (\d+) EUR goodwill credit", request.task())
        return call("issue_credit", account=account_of(request), amount=float(amount.group(1)) if amount else 0.0)

    return Swarm([agent("triage", triage, [tool(lookup_account, "An account's customer, devices and outage record.", flaky=True)],
                        handoffs=["tech_agent", "billing_agent"]),
                  agent("tech_agent", tech, [tool(run_diagnostics, "Diagnose a customer's device remotely."), tool(apply_update, "Install a firmware version on a device.")],
                        handoffs=["triage"]),
                  agent("billing_agent", billing, [tool(issue_credit, "Credit an amount to an account.")], handoffs=["triage"])],
                 name="helpdesk", termination_condition=_terminated("DONE", 16))


def build_contractor(*, rate: int = 410) -> Any:
    """The estimator says "assuming 22 working days, as the task says" (the task's own assumption, not made-up
    data), multiplies the day rate it looked up (flaky), and the reviewer re-reads the rate and approves."""

    async def get_day_rate(contractor: str) -> str:
        return f"{contractor}: {rate} EUR per day (rate card 2026)"

    async def multiply(a: float, b: float) -> float:
        return a * b

    who = partial(_in_task, pattern=r"contractor ([A-Z]\w+ [A-Z]\w+)")
    def days(request: ScriptedRequest) -> int:
        found = re.search(r"Assume (\d+) working days", request.task())
        return int(found.group(1)) if found else 0

    def estimator(request: ScriptedRequest) -> Any:
        product = ok(request, "multiply")
        seen = ok(request, "get_day_rate")
        if product is not None and seen is not None:
            day = re.search(r": (\d+) EUR per day", seen)
            return (f"Assuming {days(request)} working days per month, as the task says: {days(request)} x "
                    f"{day.group(1) if day else '?'} EUR = {float(product):g} EUR. MONTHLY: {float(product):g} EUR")
        if seen is not None:
            day = re.search(r": (\d+) EUR per day", seen)
            return call("multiply", a=days(request), b=int(day.group(1)) if day else 0)
        if errors(request, "get_day_rate") >= 3:
            return "MONTHLY: unknown"
        return call("get_day_rate", contractor=who(request))

    def reviewer(request: ScriptedRequest) -> Any:
        stated = said(request, "estimator", r"MONTHLY: (\d+) EUR")
        if stated is None:
            return "REJECT: no estimate yet."
        seen = ok(request, "get_day_rate")
        if seen is None:
            return call("get_day_rate", contractor=who(request))
        day = re.search(r": (\d+) EUR per day", seen)
        expected = days(request) * int(day.group(1)) if day else -1
        if expected == int(stated.group(1)):
            return f"MONTHLY: {expected} EUR checked against the rate card. APPROVE"
        return f"REJECT: {days(request)} days at the rate card's rate is {expected} EUR."

    return round_robin([agent("estimator", estimator, [tool(get_day_rate, "A contractor's day rate from the rate card.", flaky=True),
                                                       tool(multiply, "Multiply two numbers.")]),
                        agent("reviewer", reviewer, [tool(get_day_rate, "A contractor's day rate from the rate card.")])], "APPROVE", 6)


def build_rice(*, offers: Sequence[tuple[str, int, str]] = (("FreshMart", 5, "11.50"), ("Bodega", 2, "4.90"),
                                                            ("GrainCo", 10, "21.00"))) -> Any:
    """One reply with a ``get_offer`` call per store (parallel), then one with a ``unit_price`` call per offer
    (parallel), then the cheapest per kilogram — not the cheapest bag."""
    table = {store: (kg, price) for store, kg, price in offers}

    async def get_offer(store: str, product: str) -> str:
        kg, price = table.get(store, (0, "0"))
        return f"{store}: {kg} kg {product} for {price} EUR"

    async def unit_price(store: str, price: float, kilograms: float) -> str:
        return f"{store}: {price / kilograms:.2f} EUR per kg"

    def buyer(request: ScriptedRequest) -> Any:
        stores = re.findall(r"\b([A-Z][a-z]+[A-Z]?[a-z]*)\b(?=,| or| and|\?)", request.task())
        stores = [s for s in stores if s in table] or list(table)
        per_kg = {m.group(1): m.group(2) for _, text in results_of(request, "unit_price")
                  for m in [re.search(r"(\w+): ([\d.]+) EUR per kg", text)] if m}
        if len(per_kg) == len(stores):
            best = min(per_kg, key=lambda s: float(per_kg[s]))
            listing = ", ".join(f"{s} {per_kg[s]}" for s in stores)
            return f"Per kg: {listing} EUR. CHEAPEST: {best} at {per_kg[best]} EUR per kg. DONE"
        seen = {m.group(1): (int(m.group(2)), float(m.group(3))) for _, text in results_of(request, "get_offer")
                for m in [re.search(r"(\w+): (\d+) kg \w+ for ([\d.]+) EUR", text)] if m}
        if len(seen) == len(stores):
            return [call("unit_price", store=s, price=seen[s][1], kilograms=seen[s][0]) for s in stores]
        return [call("get_offer", store=s, product="rice") for s in stores if s not in seen]

    return round_robin([agent("buyer", buyer, [tool(get_offer, "A store's offer for a product: bag size and price."),
                                               tool(unit_price, "The price per kilogram of an offer.")])], "DONE", 3)


def build_export(*, rows: int = 1284, progress: Sequence[int] = (30, 70)) -> Any:
    """``start_export`` (flaky), ``export_status`` polled until done — every poll reports more progress — then
    ``download_export`` and the row count it gives."""
    state = {"polls": 0}

    async def start_export(table: str, since: str) -> str:
        return f"export X-{table}-{since} started"

    async def export_status(export: str) -> str:
        state["polls"] += 1
        if state["polls"] <= len(progress):
            return f"export {export}: {progress[state['polls'] - 1]}% done"
        return f"export {export}: done"

    async def download_export(export: str) -> str:
        return f"downloaded {export}.csv: {rows} rows"

    def exporter(request: ScriptedRequest) -> Any:
        got = ok(request, "download_export")
        if got is not None:
            found = re.search(r"downloaded (\S+): (\d+) rows", got)
            return f"ROWS: {found.group(2)} in {found.group(1)}. DONE" if found else "ROWS: unknown. DONE"
        started = ok(request, "start_export")
        if started is not None:
            export = started.split()[1]
            status = ok(request, "export_status")
            if status is not None and status.endswith(": done"):
                return call("download_export", export=export)
            return call("export_status", export=export)
        if errors(request, "start_export") >= 3:
            return "ROWS: unknown. DONE"
        asked = re.search(r"the (\w+) table since (\d{4}-\d\d-\d\d)", request.task())
        return call("start_export", table=asked.group(1) if asked else "unknown",
                    since=asked.group(2) if asked else "unknown")

    return round_robin([agent("exporter", exporter, [tool(start_export, "Start exporting a table's rows since a date.", flaky=True),
                                                     tool(export_status, "The progress of an export."),
                                                     tool(download_export, "Download a finished export.")],
                              iterations=8)], "DONE", 3)


def build_census(*, figures: Sequence[tuple[str, str]] = (("Lisbon", "2,870,208"), ("Porto", "1,736,228"))) -> Any:
    """SelectorGroupChat: the researcher looks up both census figures (``census``, flaky on the first), the analyst
    adds them with ``add``, the writer states the sum in millions to one decimal, as the task asks."""
    table = dict(figures)

    async def census(area: str, year: int) -> str:
        return f"{area} metropolitan area, {year} census: {table.get(area, '0')} inhabitants"

    async def add(a: int, b: int) -> int:
        return a + b

    def researcher(request: ScriptedRequest) -> Any:
        asked = re.search(r"of (\w+)'s and (\w+)'s metro areas in (\d{4})", request.task())
        if asked is None:
            return "FOUND: nothing."
        areas, year = [asked.group(1), asked.group(2)], int(asked.group(3))
        found = {m.group(1): m.group(2) for _, text in results_of(request, "census")
                 for m in [re.search(r"(\w+) metropolitan area, \d+ census: ([\d,]+)", text)] if m}
        missing = [a for a in areas if a not in found]
        if not missing:
            return "FOUND: " + "; ".join(f"{a} {found[a]} ({year} census)" for a in areas)
        return call("census", area=missing[0], year=year)

    def analyst(request: ScriptedRequest) -> Any:
        total = ok(request, "add")
        if total is not None:
            return f"SUM: {int(total)} inhabitants"
        found = said(request, "researcher", r"FOUND: \w+ ([\d,]+) .*?; \w+ ([\d,]+)")
        if found is None:
            return "SUM: unknown"
        return call("add", a=int(found.group(1).replace(",", "")), b=int(found.group(2).replace(",", "")))

    def writer(request: ScriptedRequest) -> str:
        total = said(request, "analyst", r"SUM: (\d+)")
        if total is None:
            return "POP: unknown. DONE"
        return f"POP: {int(total.group(1)) / 1e6:.1f} million ({int(total.group(1)):,} inhabitants, rounded). DONE"

    return SelectorGroupChat(
        [agent("researcher", researcher, [tool(census, "A metropolitan area's population in a census year.", flaky=True)]),
         agent("analyst", analyst, [tool(add, "Add two integers.")]), agent("writer", writer)],
        name="census_desk", model_client=ScriptedChatCompletionClient(_census_selector, model="scripted-selector"),
        termination_condition=_terminated("DONE", 10))


def build_tax(*, rate: int = 4) -> Any:
    """MagenticOne: the researcher's first ``lookup_tax`` times out (not a transient "try again": it reports
    ``RESULT: unknown``), the orchestrator counts a stall, updates its facts and plan (``max_stalls=1``) and starts
    over; the second lookup succeeds, the calculator multiplies, the reviewer checks."""
    calls = {"n": 0}

    async def lookup_tax(city: str) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("lookup_tax: upstream registry timed out after 30 s")
        return f"{city} tourist tax: {rate} EUR per person per night (up to 7 nights)"

    async def multiply(a: float, b: float, c: float) -> float:
        return a * b * c

    def stay(request: ScriptedRequest) -> re.Match[str] | None:
        return re.search(r"(\d+) nights for (\d+) adults in (\w+)", request.text())

    def researcher(request: ScriptedRequest) -> Any:
        found, asked = ok(request, "lookup_tax"), stay(request)
        if found is not None:
            return f"FOUND: {found}."
        if errors(request, "lookup_tax"):
            return "RESULT: unknown (the tax registry timed out)."
        return call("lookup_tax", city=asked.group(3) if asked else "unknown")

    def calculator(request: ScriptedRequest) -> Any:
        product = ok(request, "multiply")
        if product is not None:
            return f"RESULT: {round(float(product))} (nights x adults x EUR per person per night)"
        rate_said, asked = said(request, "researcher", r"tax: (\d+) EUR per person per night"), stay(request)
        if rate_said is None or asked is None:
            return "RESULT: unknown (no rate yet)."
        return call("multiply", a=int(asked.group(1)), b=int(asked.group(2)), c=int(rate_said.group(1)))

    def reviewer(request: ScriptedRequest) -> str:
        rate_said, asked = said(request, "researcher", r"tax: (\d+) EUR per person per night"), stay(request)
        stated = said(request, "calculator", r"RESULT: (\d+)")
        if rate_said is None or asked is None or stated is None:
            return "REJECT: nothing to check yet."
        expected = int(asked.group(1)) * int(asked.group(2)) * int(rate_said.group(1))
        if expected == int(stated.group(1)):
            return f"RESULT: {expected} verified against the registry's rate. APPROVE"
        return f"REJECT: the tax is {expected} EUR."

    instructions = {"researcher": "Look up the tourist tax per person per night of the city in the request.",
                    "calculator": "Multiply the nights, the adults and the rate the researcher found.",
                    "reviewer": "Check the calculator's product against the rate found: APPROVE or REJECT."}

    def orchestrator(request: ScriptedRequest) -> str:
        prompt, asked = request.last_user_text(), stay(request)
        if "Here is the pre-survey:" in prompt and asked:
            return (f"1. GIVEN OR VERIFIED FACTS\n- {asked.group(1)} nights, {asked.group(2)} adults, "
                    f"{asked.group(3)}.\n\n2. FACTS TO LOOK UP\n- The tourist tax of {asked.group(3)}.\n\n"
                    "3. FACTS TO DERIVE\n- The tax for the stay.\n\n4. EDUCATED GUESSES\n- None.")
        answer = orchestrator_policy(("researcher", "calculator", "reviewer"))(request)
        if answer.startswith("{"):  # the progress ledger: an instruction fit for its member
            ledger = json.loads(answer)
            nxt = ledger["next_speaker"]["answer"]
            ledger["instruction_or_question"]["answer"] = instructions.get(nxt, f"{nxt}, please continue.")
            return json.dumps(ledger)
        return answer.replace("the solver's arithmetic", "the calculator's arithmetic")

    return MagenticOneGroupChat(
        [_member("researcher", researcher, [FunctionTool(lookup_tax, description="A city's tourist tax.")],
                "Looks up tourist taxes."),
         _member("calculator", calculator, [FunctionTool(multiply, description="Multiply three numbers.")], "Multiplies."),
         _member("reviewer", reviewer, [], "Checks the calculation against the rate found.")],
        model_client=ScriptedChatCompletionClient(orchestrator, model="scripted-orchestrator"), max_turns=20,
        max_stalls=1)


def build_balance(*, balance: str = "1,204.50") -> Any:
    """An assistant with ``reflect_on_tool_use``: after ``get_balance`` the model is asked again (the reflection) and
    restates the balance without its thousands separator, as the task's format asks."""

    async def get_balance(account: str) -> str:
        return f"balance of {account}: {balance} EUR (as of today 08:00)"

    def teller(request: ScriptedRequest) -> Any:
        seen = ok(request, "get_balance")
        if seen is not None:
            found = re.search(r"balance of (\S+): ([\d,.]+) EUR", seen)
            amount = found.group(2).replace(",", "") if found else "unknown"
            return f"Account {found.group(1) if found else '?'} holds {amount} EUR. BALANCE: {amount}. DONE"
        if errors(request, "get_balance") >= 3:
            return "BALANCE: unknown. DONE"
        return call("get_balance", account=_in_task(request, pattern=r"account (ACC-\d+)"))

    worker = AssistantAgent("teller", ScriptedChatCompletionClient(teller, model="scripted-teller"),
                            tools=[tool(get_balance, "An account's current balance.")], reflect_on_tool_use=True,
                            system_message="You are teller.")
    return round_robin([worker], "DONE", 3)


def build_nested(*, populations: Sequence[tuple[str, str]] = (("Braga", "193,333"), ("Coimbra", "140,796"))) -> Any:
    """A SocietyOfMindAgent ``research_team`` (an inner round robin of ``researcher`` with ``get_population``, flaky)
    summarises its inner team's findings for the outer round robin, where the reviewer approves the comparison."""
    from autogen_agentchat.agents import SocietyOfMindAgent

    table = dict(populations)

    async def get_population(city: str) -> str:
        return f"{city}: {table.get(city, '0')} inhabitants (2021 census)"

    def researcher(request: ScriptedRequest) -> Any:
        cities = re.findall(r"\b([A-Z][a-z]+) or ([A-Z][a-z]+)\?", request.task())
        found = [text for _, text in results_of(request, "get_population")]
        if not cities or len(found) >= 2:
            return "FOUND: " + "; ".join(found) + ". DONE"
        return call("get_population", city=cities[0][len(found)])

    def summary(request: ScriptedRequest) -> str:
        rows = [(city, int(n.replace(",", ""))) for city, n in re.findall(r"(\w+): ([\d,]+) inhabitants", request.text())]
        if len(rows) < 2:
            return "LARGER: unknown"
        (a, x), (b, y) = rows[:2]
        return f"LARGER: {a if x > y else b} ({x:,} vs {y:,} inhabitants, 2021 census)."

    inner = round_robin([agent("researcher", researcher, [tool(get_population, "A city's population.", flaky=True)])],
                        "DONE", 6)
    team = SocietyOfMindAgent("research_team", team=inner,
                              model_client=ScriptedChatCompletionClient(summary, model="scripted-research_team"))
    reviewer = agent("reviewer", lambda request: (f"LARGER: {found.group(1)} checked. APPROVE" if (found := said(
        request, "research_team", r"LARGER: (\w+) \(")) else "REJECT: no comparison yet."))
    return round_robin([team, reviewer], "APPROVE", 6)
