"""Issue 32's fresh failing AutoGen AgentChat teams (development data, tuning half): reactive scripted teams written the
way a user's team fails, each with its FIXED twin (``planted=False``: the same team with the error corrected; it
succeeds).

Written from the frameworks' documented shapes (RoundRobinGroupChat, SelectorGroupChat, Swarm hand-offs,
MagenticOneGroupChat) and the scripted-team style of :mod:`.zoo_autogen` and :mod:`.clean_teams_autogen`, not from
the attribution's code. Every team opens the way such teams do (a plan, a facts sheet or a triage), holds a
recovered transient tool failure, and has correct steps before and after its ONE planted error — the first wrong
step, named by its case in :mod:`.cases_fresh32`.

================  ============================================================================================
builder           the team, the planted error (the family)
================  ============================================================================================
distance_unit     RoundRobin planner → researcher (flaky ``get_distance``, ``get_fuel_price``) → calculator →
                  reviewer; planted: the researcher restates the road distance in miles (a unit changed)
discount_sign     RoundRobin planner → coder (flaky ``get_cart``) → executor; planted: the code adds the
                  loyalty discount instead of taking it off (an operator changed)
order_id          Swarm: triage (flaky ``lookup_order``) hands off to billing_agent (``refund_quote``,
                  ``issue_refund``); planted: the refund is issued to the order id with two digits swapped (an
                  entity changed when copied)
revised_rate      RoundRobin treasurer (flaky ``get_rate``, ``rate_updates``, ``multiply``) → auditor; planted:
                  the payment is converted at the rate the later revision superseded
handback          Swarm: coordinator (flaky ``lookup_order``) hands three damaged items to refund_agent
                  (``refund_item``); planted: the refund agent hands back after two (an early hand-back)
no_tools_writer   SelectorGroupChat planner (flaky ``report_spec``) / data_agent (flaky ``query_revenue``) / writer
                  (no tools) / editor;
                  planted:
                  the selector gives the data lookup to the writer, who has no data tool and makes the figure up
                  (a routing to an agent without the tools for the request)
date_loop         RoundRobin scheduler (flaky ``check_calendar``, ``book_slot``) → assistant; ``book_slot``
                  refuses a DD/MM/YYYY date; planted: the scheduler repeats the refused call unchanged (a loop
                  without progress) until the message limit
net_price         RoundRobin planner → pricing agent (flaky ``get_licence_price``, ``multiply``) → auditor;
                  planted: the quote multiplies the price including VAT, the task says excluding (an ignored
                  instruction)
assumed_rate      RoundRobin coder (flaky ``get_sales``, ``get_rate``) → executor; planted: the code converts with
                  an assumed USD/EUR rate no tool gave (made-up data)
open_invoices     MagenticOne researcher (flaky ``list_invoices`` and ``get_invoice``) / calculator / reviewer;
                  planted: the orchestrator's plan is about the paid invoice the task sets aside (a plan about
                  another task)
expense_review    RoundRobin clerk (flaky ``get_receipts``, ``add``) / reviewer (``expense_policy``); planted: the
                  reviewer approves the draft without reading the policy (an approval nobody checked)
boxes             SelectorGroupChat planner / coder (flaky ``get_order``) / executor; planted: the code rounds the
                  number of boxes down where a partial box needs one (rounding)
================  ============================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, ToolCallSpec, call
from causaltrace.testing.faults.teams_autogen import (
    agent,
    code_message,
    errors,
    executor,
    ok,
    results_of,
    round_robin,
    said,
    texts_of,
    tool,
)
from causaltrace.testing.faults.teams_autogen import (
    terminated as _terminated,
)
from causaltrace.testing.faults.zoo_common import fmt

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


def _calculate(expression: str) -> str:
    if not re.fullmatch(r"[\d.\s*/+()-]+", expression):
        return "only arithmetic is allowed"
    return f"{expression} = {round(eval(expression), 6):g}"  # checked above: arithmetic only


def build_distance_unit(planted: bool, *, km: int = 561, price: str = "1.52") -> Any:
    """Planner, researcher, calculator, reviewer in turn; planted: the researcher restates the tool's 561 km as
    561 miles, the calculator converts them to kilometres faithfully and the reviewer checks the arithmetic."""

    async def get_distance(origin: str, destination: str) -> str:
        """The road distance between two cities."""
        return f"{origin} to {destination}: {km} km by road"

    async def get_fuel_price(country: str, fuel: str) -> str:
        """Today's average pump price of a fuel in a country."""
        return f"{fuel} in {country} today: {price} EUR per litre"

    async def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return _calculate(expression)

    def route(text: str) -> re.Match[str] | None:
        return re.search(r"from (\w+) to (\w+) using ([\d.]+) litres per 100 km", text)

    def planner(request: ScriptedRequest) -> str:
        found = route(request.task())
        if found is None:
            return "PLAN: I cannot read the trip."
        return (f"PLAN: 1. researcher finds the road distance from {found.group(1)} to {found.group(2)} and "
                "today's diesel price in Spain. 2. calculator computes the litres used at "
                f"{found.group(3)} l/100 km and their cost, in whole euros. 3. reviewer checks the arithmetic.")

    def researcher(request: ScriptedRequest) -> Reply:
        found = route(request.task())
        distance, fuel = ok(request, "get_distance"), ok(request, "get_fuel_price")
        if distance is not None and fuel is not None:
            value = re.search(r": (\d+) km", distance).group(1)  # type: ignore[union-attr]
            unit = "miles" if planted else "km"
            return (f"FOUND: {found.group(1) if found else '?'} to {found.group(2) if found else '?'} is {value} "
                    f"{unit} by road; diesel in Spain today costs {fuel.split(': ')[1]}.")
        if distance is not None:
            return call("get_fuel_price", country="Spain", fuel="diesel")
        if found is None or errors(request, "get_distance") >= 3:
            return "FOUND: nothing."
        return call("get_distance", origin=found.group(1), destination=found.group(2))

    def calculator(request: ScriptedRequest) -> Reply:
        found = said(request, "researcher", r"is (\d+) (km|miles) by road; diesel in \w+ today costs ([\d.]+) EUR")
        use = route(request.task())
        result = ok(request, "calculate")
        if result is not None:
            return f"{result} EUR. COST: {round(float(result.rsplit('= ', 1)[1]))}"
        if found is None or use is None:
            return "COST: unknown"
        distance = f"{found.group(1)} * 1.609344" if found.group(2) == "miles" else found.group(1)
        return call("calculate", expression=f"{distance} * {use.group(3)} / 100 * {found.group(3)}")

    def reviewer(request: ScriptedRequest) -> str:
        stated = said(request, "calculator", r"(.+) = ([\d.]+) EUR\. COST: (\d+)")
        if stated is None:
            return "REJECT: no cost to check."
        if round(float(stated.group(2))) == int(stated.group(3)):
            return f"COST: {stated.group(3)} checked (rounded from {stated.group(2)}). APPROVE"
        return "REJECT: the rounding is wrong."

    return round_robin([agent("planner", planner),
                        agent("researcher", researcher, [tool(get_distance, "Road distance.", flaky=True),
                                                         tool(get_fuel_price, "Fuel price.")]),
                        agent("calculator", calculator, [tool(calculate, "Evaluate arithmetic.")]),
                        agent("reviewer", reviewer)], "APPROVE", 8)


def build_discount_sign(planted: bool, *, lines: Sequence[tuple[str, str, int]] = (
        ("walking boots", "49.90", 2), ("wool socks", "15.00", 3), ("insoles", "7.45", 4))) -> Any:
    """Planner, coder (flaky ``get_cart``), executor; planted: the code adds the discount (``+``) instead of taking
    it off (``-``)."""
    import json

    async def get_cart(customer: str) -> str:
        """The lines of a customer's cart: item, unit price in EUR, quantity."""
        return json.dumps([{"item": i, "unit_eur": float(p), "qty": q} for i, p, q in lines])

    def planner(request: ScriptedRequest) -> str:
        who = re.search(r"customer (K-\d+)", request.task())
        pct = re.search(r"(\d+)% loyalty discount", request.task())
        return (f"PLAN: 1. coder fetches the cart of {who.group(1) if who else 'the customer'}. 2. coder writes "
                f"Python for the subtotal and takes the {pct.group(1) if pct else '?'}% loyalty discount off it. "
                "3. executor runs it. 4. coder reports 'CHARGE: <euros>'.")

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"charge: ([\d.]+)")
        if output:
            return f"CHARGE: {output.group(1)}. DONE"
        if said(request, "coder", r"```python"):
            return "Waiting for the executor."
        cart = ok(request, "get_cart")
        pct = re.search(r"(\d+)% loyalty discount", request.task())
        if cart is not None and pct:
            rows = json.loads(cart)
            sign = "+" if planted else "-"
            return code_message("The cart is in; here is the code.", (
                f"cart = {[(r['unit_eur'], r['qty']) for r in rows]}\n"
                "subtotal = sum(price * qty for price, qty in cart)\n"
                f"charge = subtotal {sign} subtotal * {pct.group(1)} / 100\n"
                "print(f'subtotal: {subtotal:.2f}')\nprint(f'charge: {charge:.2f}')"))
        if errors(request, "get_cart") >= 3:
            return "CHARGE: unknown. DONE"
        who = re.search(r"customer (K-\d+)", request.task())
        return call("get_cart", customer=who.group(1) if who else "unknown")

    return round_robin([agent("planner", planner),
                        agent("coder", coder, [tool(get_cart, "A customer's cart.", flaky=True)]), executor()],
                       "DONE", 8)


def build_order_id(planted: bool, *, order: str = "A-512", swapped: str = "A-521", amount: str = "34.90") -> Any:
    """Swarm: triage looks the order up (flaky) and hands off to billing_agent, which quotes the broken item and
    issues the refund; planted: the refund goes to the order id with its last two digits swapped."""
    from autogen_agentchat.teams import Swarm

    async def lookup_order(order: str) -> str:
        """An order's customer and lines."""
        return f"order {order} for Marta Ruiz: desk lamp {amount} EUR (delivered broken), lamp bulb 4.50 EUR"

    async def refund_quote(order: str, item: str) -> str:
        """The refundable amount of one item of an order."""
        return f"refundable for {item} on order {order}: {amount if item == 'desk lamp' else '0.00'} EUR"

    async def issue_refund(order: str, amount: float) -> str:
        """Refund an amount to the customer of an order."""
        who = "Marta Ruiz" if order == "A-512" else "Pieter Smit"
        return f"refund R-77 issued: {float(amount):.2f} EUR to order {order} ({who})"

    def order_of(request: ScriptedRequest) -> str:
        found = re.search(r"order (A-\d+)", request.task())
        return found.group(1) if found else "unknown"

    def triage(request: ScriptedRequest) -> Reply:
        if ok(request, "lookup_order") is not None:
            return call("transfer_to_billing_agent")
        if errors(request, "lookup_order") >= 3:
            return "I cannot find the order. DONE"
        return call("lookup_order", order=order_of(request))

    def billing(request: ScriptedRequest) -> Reply:
        issued = ok(request, "issue_refund")
        if issued is not None:
            found = re.search(r"issued: ([\d.]+) EUR to order (\S+)", issued)
            return f"REFUNDED: {found.group(2)} {found.group(1)} EUR. DONE" if found else "REFUNDED: none. DONE"
        quote = ok(request, "refund_quote")
        if quote is not None:
            target = swapped if planted else order_of(request)
            return call("issue_refund", order=target, amount=float(quote.split(": ")[1].split()[0]))
        return call("refund_quote", order=order_of(request), item="desk lamp")

    front = agent("triage", triage, [tool(lookup_order, "An order's customer and lines.", flaky=True)],
                  handoffs=["billing_agent"])
    money = agent("billing_agent", billing, [tool(refund_quote, "The refundable amount of an item."),
                                             tool(issue_refund, "Refund an amount to an order's customer.")],
                  handoffs=["triage"])
    return Swarm([front, money], name="support", termination_condition=_terminated("DONE", 12))


def build_revised_rate(planted: bool, *, amount: int = 12400, first: str = "1.1612", revised: str = "1.1574") -> Any:
    """The treasurer reads the GBP/EUR rate (flaky), then its revisions, converts and reports; the auditor checks the
    multiplication; planted: the conversion uses the rate the revision superseded."""

    async def get_rate(pair: str) -> str:
        """The morning fixing of a currency pair."""
        return f"{pair} {first} (fixing published 09:00)"

    async def rate_updates(pair: str) -> str:
        """Revisions of a currency pair's rate since the morning fixing."""
        return f"{pair} revised at 11:30: {revised} (replaces the 09:00 fixing)"

    async def multiply(a: float, b: float) -> str:
        """Multiply two numbers."""
        return f"product: {float(a) * float(b):.2f}"

    def treasurer(request: ScriptedRequest) -> Reply:
        product = results_of(request, "multiply")
        if product:
            args, result = product[-1]
            return f"EUR: {result.split(': ')[1]} ({fmt(float(args['a']))} GBP at {args['b']:g})"
        fixing, update = ok(request, "get_rate"), ok(request, "rate_updates")
        if fixing is not None and update is not None:
            rate = fixing.split()[1] if planted else re.search(r": ([\d.]+)", update).group(1)  # type: ignore[union-attr]
            return call("multiply", a=amount, b=float(rate))
        if fixing is not None:
            return call("rate_updates", pair="GBP/EUR")
        if errors(request, "get_rate") >= 3:
            return "EUR: unknown"
        return call("get_rate", pair="GBP/EUR")

    def auditor(request: ScriptedRequest) -> str:
        stated = said(request, "treasurer", r"EUR: ([\d.]+) \(([\d.]+) GBP at ([\d.]+)\)")
        if stated is None:
            return "REJECT: no conversion to check."
        if f"{float(stated.group(2)) * float(stated.group(3)):.2f}" == stated.group(1):
            return f"EUR: {stated.group(1)} checked. APPROVE"
        return "REJECT: the multiplication is wrong."

    return round_robin([agent("treasurer", treasurer, [tool(get_rate, "Morning fixing.", flaky=True),
                                                       tool(rate_updates, "Rate revisions."),
                                                       tool(multiply, "Multiply.")]),
                        agent("auditor", auditor)], "APPROVE", 6)


def build_handback(planted: bool, *, items: Sequence[tuple[str, str]] = (("lamp", "34.90"), ("bulb", "4.50"),
                                                                        ("shade", "12.00"))) -> Any:
    """Swarm: the coordinator looks the order up (flaky) and hands the damaged items to refund_agent, which refunds
    them one by one and hands back; the coordinator reports the refunded total; planted: the refund agent hands
    back after all but the last item."""
    from autogen_agentchat.teams import Swarm

    table = dict(items)

    async def lookup_order(order: str) -> str:
        """An order's lines and their state."""
        return f"order {order}: " + ", ".join(f"{name} {price} EUR (damaged)" for name, price in items)

    async def refund_item(order: str, item: str) -> str:
        """Refund one item of an order."""
        return f"refunded {item} of order {order}: {table.get(item, '0.00')} EUR"

    def order_of(request: ScriptedRequest) -> str:
        found = re.search(r"[Oo]rder (A-\d+)", request.task())
        return found.group(1) if found else "unknown"

    def wanted(request: ScriptedRequest) -> list[str]:
        found = re.search(r"with the (\w+), the (\w+) and the (\w+) damaged", request.task())
        return list(found.groups()) if found else []

    def coordinator(request: ScriptedRequest) -> Reply:
        back = [t for t in texts_of(request, "refund_agent") if t.startswith("Refunds issued")]
        if back:
            total = sum(float(v) for v in re.findall(r": ([\d.]+) EUR", back[-1]))
            return f"REFUNDED: {total:.2f} EUR for order {order_of(request)}. DONE"
        if ok(request, "lookup_order") is not None:
            return call("transfer_to_refund_agent")
        if errors(request, "lookup_order") >= 3:
            return "I cannot find the order. DONE"
        return call("lookup_order", order=order_of(request))

    def refunder(request: ScriptedRequest) -> Reply:
        done = [args.get("item") for args, _ in results_of(request, "refund_item")]
        todo = [i for i in wanted(request) if i not in done]
        if texts_of(request, "refund_agent"):
            return call("transfer_to_coordinator")
        if not todo or (planted and len(todo) == 1):
            refunds = "; ".join(r for _, r in results_of(request, "refund_item"))
            return f"Refunds issued: {refunds}."
        return call("refund_item", order=order_of(request), item=todo[0])

    front = agent("coordinator", coordinator, [tool(lookup_order, "An order's lines.", flaky=True)],
                  handoffs=["refund_agent"])
    back_office = agent("refund_agent", refunder, [tool(refund_item, "Refund one item of an order.")],
                        handoffs=["coordinator"], iterations=len(items) + 2)
    return Swarm([front, back_office], name="returns", termination_condition=_terminated("DONE", 12))


def build_no_tools_writer(planted: bool, *, revenue: str = "2481300") -> Any:
    """Selector: planner, then the data lookup, then the writer drafts the line and the editor checks its format;
    planted: the selector gives the lookup to the writer (no tools), who writes a figure no tool gave."""
    from autogen_agentchat.teams import SelectorGroupChat

    async def query_revenue(region: str, quarter: str) -> str:
        """The booked revenue of a sales region in a quarter, from the sales database."""
        return f"revenue of {region} in {quarter}: {revenue} EUR (booked, final)"

    async def report_spec(report: str) -> str:
        """The house style of a report line."""
        return f"spec of {report}: booked revenue only, in whole EUR, from the sales database"

    def planner(request: ScriptedRequest) -> Reply:
        spec = ok(request, "report_spec")
        if spec is None:
            if errors(request, "report_spec") >= 3:
                return "PLAN: the report spec is unavailable."
            return call("report_spec", report="quarterly revenue")
        asked = re.search(r"the (Q\d \d{4}) revenue of the (\w+) region", request.task())
        quarter, region = asked.groups() if asked else ("?", "?")
        return (f"PLAN: 1. Query the sales database for the booked revenue of {region} in {quarter}. 2. Write it as "
                "'REVENUE: <EUR>' for the report (whole euros). 3. Check the line's format.")

    def data_agent(request: ScriptedRequest) -> Reply:
        found = ok(request, "query_revenue")
        if found is not None:
            return f"DATA: {found}"
        asked = re.search(r"the (Q\d \d{4}) revenue of the (\w+) region", request.task())
        if asked is None or errors(request, "query_revenue") >= 3:
            return "DATA: none"
        return call("query_revenue", region=asked.group(2), quarter=asked.group(1))

    def writer(request: ScriptedRequest) -> str:
        data = said(request, "data_agent", r": (\d+) EUR")
        if data:
            return f"REVENUE: {data.group(1)} EUR (booked, final)."
        return "REVENUE: 2350000 EUR (in line with the region's recent quarters)."

    def editor(request: ScriptedRequest) -> str:
        draft = said(request, "writer", r"REVENUE: (\d+) EUR")
        if draft is None:
            return "No draft to edit yet."
        return f"REVENUE: {draft.group(1)} EUR. Format checked for the report. DONE"

    def select(request: ScriptedRequest) -> str:
        text = request.text()
        if "writer: REVENUE:" in text:
            return "editor"
        if "data_agent: DATA:" in text:
            return "writer"
        if "planner: PLAN:" in text:
            return "writer" if planted else "data_agent"
        return "planner"

    members = [agent("planner", planner, [tool(report_spec, "A report's house style.", flaky=True)]),
               agent("data_agent", data_agent, [tool(query_revenue, "Query the sales database.", flaky=True)]),
               agent("writer", writer), agent("editor", editor)]
    return SelectorGroupChat(members, name="report_desk",
                             model_client=ScriptedChatCompletionClient(select, model="scripted-selector"),
                             termination_condition=_terminated("DONE", 10))


def build_date_loop(planted: bool, *, person: str = "Dana Kim", booking: str = "BK-4410") -> Any:
    """The scheduler checks the calendar (flaky), then books; ``book_slot`` refuses a DD/MM/YYYY date; planted: it
    repeats the refused call unchanged instead of rewriting the date."""

    async def check_calendar(person: str, date: str) -> str:
        """A person's free time on a date (YYYY-MM-DD)."""
        return f"{person} on {date}: free 15:00-16:30"

    async def book_slot(person: str, date: str, time: str, minutes: int) -> str:
        """Book a meeting with a person (date as YYYY-MM-DD)."""
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", date):
            raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")
        return f"booked {booking}: {person} on {date} at {time} for {int(minutes)} minutes"

    def scheduler(request: ScriptedRequest) -> Reply:
        done = ok(request, "book_slot")
        if done is not None:
            return f"BOOKED: {done.split(':')[0].split()[1]} ({done.split(': ', 1)[1]})"
        free = ok(request, "check_calendar")
        if free is None:
            if errors(request, "check_calendar") >= 3:
                return "BOOKED: none"
            return call("check_calendar", person=person, date="2026-12-07")
        refused = [args for name, args in _failed(request) if name == "book_slot"]
        date = "07/12/2026"
        if refused and not planted:
            day, month, year = refused[-1]["date"].split("/")
            date = f"{year}-{month}-{day}"
        return call("book_slot", person=person, date=date, time="15:00", minutes=30)

    def assistant(request: ScriptedRequest) -> str:
        booked = said(request, "scheduler", r"BOOKED: (BK-\d+)")
        if booked:
            return f"BOOKED: {booked.group(1)} confirmed with {person}. DONE"
        return "Still waiting for the booking."

    return round_robin([agent("scheduler", scheduler, [tool(check_calendar, "A person's free time.", flaky=True),
                                                       tool(book_slot, "Book a meeting.")], iterations=4),
                        agent("assistant", assistant)], "DONE", 5)


def _failed(request: ScriptedRequest) -> list[tuple[str, dict[str, Any]]]:
    from causaltrace.testing.faults.teams_autogen import tool_results

    return [(name, args) for name, args, _, err in tool_results(request) if err]


def build_net_price(planted: bool, *, gross: str = "123.00", net: str = "100.00", qty: int = 3) -> Any:
    """Planner, pricing agent (flaky ``get_licence_price``, ``multiply``), auditor; planted: the pricing agent
    multiplies the price including VAT although the task asks for the quote excluding VAT."""

    async def get_licence_price(product: str) -> str:
        """The list price of one licence of a product."""
        return f"{product}: {gross} EUR per licence incl. 23% VAT (net {net} EUR)"

    async def multiply(a: float, b: float) -> str:
        """Multiply two numbers."""
        return f"product: {float(a) * float(b):.2f}"

    def product_of(request: ScriptedRequest) -> str:
        found = re.search(r"licences of ([\w ]+?) for", request.task())
        return found.group(1) if found else "unknown"

    def planner(request: ScriptedRequest) -> str:
        return (f"PLAN: 1. pricing looks up the list price of {product_of(request)} and multiplies it by {qty} "
                "licences, excluding VAT (the customer is outside the EU). 2. auditor checks the multiplication.")

    def pricing(request: ScriptedRequest) -> Reply:
        product = results_of(request, "multiply")
        if product:
            args, result = product[-1]
            return f"NET: {result.split(': ')[1]} ({int(args['b'])} x {float(args['a']):.2f} EUR)"
        listed = ok(request, "get_licence_price")
        if listed is not None:
            price = re.search(r": ([\d.]+) EUR per licence", listed) if planted else re.search(r"net ([\d.]+)", listed)
            return call("multiply", a=float(price.group(1)), b=qty)  # type: ignore[union-attr]
        if errors(request, "get_licence_price") >= 3:
            return "NET: unknown"
        return call("get_licence_price", product=product_of(request))

    def auditor(request: ScriptedRequest) -> str:
        stated = said(request, "pricing", r"NET: ([\d.]+) \((\d+) x ([\d.]+) EUR\)")
        if stated is None:
            return "REJECT: no quote to check."
        if f"{int(stated.group(2)) * float(stated.group(3)):.2f}" == stated.group(1):
            return f"NET: {stated.group(1)} checked. APPROVE"
        return "REJECT: the multiplication is wrong."

    return round_robin([agent("planner", planner),
                        agent("pricing", pricing, [tool(get_licence_price, "Licence list price.", flaky=True),
                                                   tool(multiply, "Multiply.")]),
                        agent("auditor", auditor)], "APPROVE", 8)


def build_assumed_rate(planted: bool, *, sales: Sequence[str] = ("1240.00", "980.50", "2315.75"),
                       rate: str = "0.9187") -> Any:
    """The coder fetches the October sales (flaky) and today's rate, writes the conversion, the executor runs it;
    planted: the code converts at an assumed rate (0.92) no tool gave, without asking ``get_rate``."""
    import json

    async def get_sales(shop: str, month: str) -> str:
        """The daily sales totals of a shop in a month, in USD."""
        return json.dumps([float(s) for s in sales])

    async def get_rate(pair: str) -> str:
        """Today's exchange rate of a currency pair."""
        return f"rate {pair}: {rate}"

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"total eur: ([\d.]+)")
        if output:
            return f"TOTAL: {output.group(1)}. DONE"
        if said(request, "coder", r"```python"):
            return "Waiting for the executor."
        data = ok(request, "get_sales")
        if data is None:
            if errors(request, "get_sales") >= 3:
                return "TOTAL: unknown. DONE"
            return call("get_sales", shop="US", month="2026-10")
        seen = ok(request, "get_rate")
        if planted:
            value, note = "0.92", "  # approximate USD/EUR rate"
        elif seen is None:
            return call("get_rate", pair="USD/EUR")
        else:
            value, note = seen.split(": ")[1], "  # today's USD/EUR rate"
        return code_message("Here is the conversion.", (
            f"sales_usd = {json.loads(data)}\nrate = {value}{note}\n"
            "total = round(sum(sales_usd) * rate, 2)\nprint(f'total eur: {total:.2f}')"))

    return round_robin([agent("coder", coder, [tool(get_sales, "Daily sales of a shop.", flaky=True),
                                               tool(get_rate, "Today's exchange rate.")]), executor()], "DONE", 6)


def _invoice_orchestrator(planted: bool, paid: tuple[str, int]) -> Callable[[ScriptedRequest], str]:
    """The scripted MagenticOne orchestrator of :mod:`causaltrace.testing.autogen` with the invoice desk's facts
    sheet and plan; planted: the plan's first line is about the paid invoice the task sets aside."""
    from causaltrace.testing.autogen import orchestrator_policy

    def customer_of(text: str) -> str:
        found = re.search(r"total of ([A-Z]\w+ Ltd)'s open invoices", text)
        return found.group(1) if found else "the customer"

    def orchestrator(request: ScriptedRequest) -> str:
        prompt = request.last_user_text()
        who = customer_of(prompt) if "open invoices" in prompt else customer_of(request.text())
        if "Here is the pre-survey:" in prompt:
            return (f"1. GIVEN OR VERIFIED FACTS\n- Invoice {paid[0]} of {who} ({paid[1]:,} EUR) was paid last "
                    f"week and is left aside.\n\n2. FACTS TO LOOK UP\n- The open invoices of {who} and their "
                    "amounts.\n\n3. FACTS TO DERIVE\n- Their total in euros.\n\n4. EDUCATED GUESSES\n- None.")
        if "please devise a short bullet-point plan" in prompt:
            if planted:
                first = (f"look up invoice {paid[0]} of {who} with get_invoice and report its amount and state, "
                         "to confirm the payment")
            else:
                first = f"list the open invoices of {who} with list_invoices and report each amount"
            return (f"- researcher: {first}.\n- calculator: add up the amounts the researcher reports and end "
                    "with 'RESULT: <euros>'.\n- reviewer: check the calculator's sum against the researcher's "
                    "amounts; say APPROVE if it is right, else REJECT.")
        answer = orchestrator_policy(("researcher", "calculator", "reviewer"))(request)
        return answer.replace("the solver's arithmetic", "the calculator's sum")

    return orchestrator


def build_open_invoices(planted: bool, *, paid: tuple[str, int] = ("INV-3301", 1900),
                        open_: Sequence[tuple[str, int]] = (("INV-3342", 2150), ("INV-3360", 1410),
                                                            ("INV-3371", 750))) -> Any:
    """MagenticOne over researcher → calculator → reviewer (the scripted orchestrator of
    :mod:`causaltrace.testing.autogen`, with its own facts sheet and plan); the members follow the plan's line for
    them; planted: the plan is about the paid invoice the task sets aside (confirm INV-3301), not the open ones."""
    from autogen_agentchat.teams import MagenticOneGroupChat

    async def list_invoices(customer: str, status: str) -> str:
        """A customer's invoices with a status (open or paid)."""
        rows = open_ if status == "open" else (paid,)
        return f"{status} invoices of {customer}: " + ", ".join(f"{i} {a} EUR" for i, a in rows)

    async def get_invoice(invoice: str) -> str:
        """One invoice's amount and state."""
        amounts = dict(open_)
        if invoice == paid[0]:
            return f"{invoice}: {paid[1]} EUR, paid on 2026-12-01"
        return f"{invoice}: {amounts.get(invoice, 0)} EUR, open"

    async def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return _calculate(expression)

    def plan_line(request: ScriptedRequest, member: str) -> str:
        found = re.findall(rf"- {member}: (.+)", request.text())
        return found[0] if found else ""

    def researcher(request: ScriptedRequest) -> Reply:
        line = plan_line(request, "researcher")
        rows = [r for _, r in results_of(request, "list_invoices")] + [r for _, r in results_of(request, "get_invoice")]
        if rows:
            amounts = re.findall(r"(INV-\d+):? (\d+) EUR", " ".join(rows))
            return "FOUND: " + ", ".join(f"{i} {a} EUR" for i, a in amounts) + "."
        asked = re.search(r"look up invoice (INV-\d+)", line)
        if asked:
            return call("get_invoice", invoice=asked.group(1))
        listed = re.search(r"list the (\w+) invoices of ([\w ]+?) with", line)
        if listed is None or errors(request, "list_invoices") >= 3:
            return "FOUND: nothing. RESULT: unknown"
        return call("list_invoices", customer=listed.group(2), status=listed.group(1))

    def calculator(request: ScriptedRequest) -> Reply:
        result = ok(request, "calculate")
        if result is not None:
            return f"{result} EUR. RESULT: {round(float(result.rsplit('= ', 1)[1]))}"
        found = said(request, "researcher", r"FOUND: (.+)")
        amounts = re.findall(r"INV-\d+ (\d+) EUR", found.group(1)) if found else []
        if not amounts:
            return "RESULT: unknown"
        return call("calculate", expression=" + ".join(amounts))

    def reviewer(request: ScriptedRequest) -> str:
        found = said(request, "researcher", r"FOUND: (.+)")
        stated = said(request, "calculator", r"RESULT: (\d+)")
        if found is None or stated is None:
            return "REJECT: nothing to check yet."
        expected = sum(int(a) for a in re.findall(r"INV-\d+ (\d+) EUR", found.group(1)))
        if expected == int(stated.group(1)):
            return f"RESULT: {expected} verified against the amounts found. APPROVE"
        return f"REJECT: the amounts add up to {expected}."

    return MagenticOneGroupChat(
        [agent("researcher", researcher, [tool(list_invoices, "A customer's invoices by status.", flaky=True),
                                          tool(get_invoice, "One invoice's amount and state.", flaky=True)]),
         agent("calculator", calculator, [tool(calculate, "Evaluate arithmetic.")]), agent("reviewer", reviewer)],
        model_client=ScriptedChatCompletionClient(_invoice_orchestrator(planted, paid), model="scripted-orchestrator"),
        max_turns=10)


def build_expense_review(planted: bool, *, meals: Sequence[tuple[str, str]] = (("2026-11-03", "38.50"),
                                                                              ("2026-11-04", "52.00"),
                                                                              ("2026-11-05", "31.20")),
                         cap: str = "40.00") -> Any:
    """The clerk adds the meal receipts (flaky) and drafts the reimbursement; the reviewer's job is to check it
    against the expense policy with its own tool; the first draft ignores the policy's cap per meal; planted: the
    reviewer approves it without reading the policy (the twin's reviewer reads it and rejects, the clerk redrafts)."""

    async def get_receipts(trip: str) -> str:
        """The meal receipts of a business trip."""
        return f"receipts of trip {trip}: " + ", ".join(f"meal {d} {a} EUR" for d, a in meals)

    async def add(numbers: list[float]) -> str:
        """Add up numbers."""
        return f"sum: {sum(float(n) for n in numbers):.2f}"

    async def expense_policy(category: str) -> str:
        """The company's expense policy for a category."""
        return f"policy for {category}: reimbursed up to {cap} EUR per meal; the excess is not reimbursed"

    def trip_of(request: ScriptedRequest) -> str:
        found = re.search(r"trip (T-\d+)", request.task())
        return found.group(1) if found else "unknown"

    def clerk(request: ScriptedRequest) -> Reply:
        sums = results_of(request, "add")
        rejected = said(request, "reviewer", r"REJECT: .*up to ([\d.]+) EUR per meal")
        receipts = ok(request, "get_receipts")
        if receipts is None:
            if errors(request, "get_receipts") >= 3:
                return "REIMBURSE: unknown"
            return call("get_receipts", trip=trip_of(request))
        amounts = [float(a) for a in re.findall(r"meal [\d-]+ ([\d.]+) EUR", receipts)]
        capped = [min(a, float(rejected.group(1))) for a in amounts] if rejected else amounts
        if not sums or (rejected and [float(n) for n in sums[-1][0]["numbers"]] != capped):
            return call("add", numbers=capped)
        return f"REIMBURSE: {sums[-1][1].split(': ')[1]} EUR for {len(amounts)} meals of trip {trip_of(request)}"

    def reviewer(request: ScriptedRequest) -> Reply:
        draft = said(request, "clerk", r"REIMBURSE: ([\d.]+) EUR")
        if draft is None:
            return "Waiting for a draft."
        if planted:
            return f"REIMBURSE: {draft.group(1)} EUR looks fine. APPROVE"
        policy = ok(request, "expense_policy")
        if policy is None:
            return call("expense_policy", category="meals")
        receipts = ok(request, "get_receipts")
        if receipts is None:
            return call("get_receipts", trip=trip_of(request))
        limit = float(re.search(r"up to ([\d.]+) EUR", policy).group(1))  # type: ignore[union-attr]
        amounts = [float(a) for a in re.findall(r"meal [\d-]+ ([\d.]+) EUR", receipts)]
        expected = sum(min(a, limit) for a in amounts)
        if f"{expected:.2f}" == draft.group(1):
            return f"REIMBURSE: {draft.group(1)} EUR matches the policy. APPROVE"
        return (f"REJECT: the policy reimburses up to {limit:.2f} EUR per meal; "
                f"{sum(a > limit for a in amounts)} meal(s) exceed it, expected {expected:.2f}.")

    return round_robin([agent("clerk", clerk, [tool(get_receipts, "Meal receipts of a trip.", flaky=True),
                                               tool(add, "Add numbers.")]),
                        agent("reviewer", reviewer, [tool(expense_policy, "The expense policy."),
                                                     tool(get_receipts, "Meal receipts of a trip.")])],
                       "APPROVE", 8)


def build_boxes(planted: bool, *, jars: int = 250, per_box: int = 12, price: str = "1.85") -> Any:
    """Selector: planner, coder (flaky ``get_order``), executor, coder's report; planted: the code rounds the
    number of boxes down (``//``) where a partial box still needs a box (rounding up)."""
    from autogen_agentchat.teams import SelectorGroupChat

    async def get_order(order: str) -> str:
        """An order's lines."""
        return f"order {order}: {jars} jars of honey, packed {per_box} per box; boxes cost {price} EUR each"

    def planner(request: ScriptedRequest) -> str:
        return ("PLAN: 1. coder reads the order and writes Python for the number of boxes (every jar must be "
                "packed; a partly filled box is still a box) and their cost. 2. executor runs it. 3. coder reports "
                "'BOXES: <n> boxes, COST: <euros> EUR'.")

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"boxes: (\d+), cost: ([\d.]+)")
        if output:
            return f"BOXES: {output.group(1)} boxes, COST: {output.group(2)} EUR. DONE"
        seen = ok(request, "get_order")
        if seen is None:
            order = re.search(r"[Oo]rder (H-\d+)", request.task())
            if errors(request, "get_order") >= 3:
                return "BOXES: unknown. DONE"
            return call("get_order", order=order.group(1) if order else "unknown")
        found = re.search(r"(\d+) jars of \w+, packed (\d+) per box; boxes cost ([\d.]+) EUR", seen)
        n, size, each = found.groups()  # type: ignore[union-attr]
        count = f"{n} // {size}" if planted else f"-(-{n} // {size})"
        return code_message("Here is the code.", f"boxes = {count}\ncost = round(boxes * {each}, 2)\n"
                                                 "print(f'boxes: {boxes}, cost: {cost:.2f}')")

    def select(request: ScriptedRequest) -> str:
        text = request.text()
        if re.search(r"executor: .*boxes: \d+", text):
            return "coder"
        if "coder: Here is the code." in text:
            return "executor"
        if "planner: PLAN:" in text:
            return "coder"
        return "planner"

    return SelectorGroupChat([agent("planner", planner),
                              agent("coder", coder, [tool(get_order, "An order's lines.", flaky=True)]), executor()],
                             name="packing", allow_repeated_speaker=True,
                             model_client=ScriptedChatCompletionClient(select, model="scripted-selector"),
                             termination_condition=_terminated("DONE", 10))


BUILDERS: dict[str, Callable[..., Any]] = {
    "distance_unit": build_distance_unit,
    "discount_sign": build_discount_sign,
    "order_id": build_order_id,
    "revised_rate": build_revised_rate,
    "handback": build_handback,
    "no_tools_writer": build_no_tools_writer,
    "date_loop": build_date_loop,
    "net_price": build_net_price,
    "assumed_rate": build_assumed_rate,
    "open_invoices": build_open_invoices,
    "expense_review": build_expense_review,
    "boxes": build_boxes,
}
