"""Issue 32's fresh failing AutoGen AgentChat teams, continued (:mod:`.fresh32_autogen` holds the first ones and the
module's conventions): each team with its FIXED twin (``planted=False``), one planted first wrong step.

================  ============================================================================================
builder           the team (flaky tool), the planted error — the family
================  ============================================================================================
free_shipping     RoundRobin planner → coder (``get_cart``, ``shipping_policy``) → executor; planted: the code
                  grants free shipping above the threshold where the policy says "or more" (a bound changed)
rows_rate         SelectorGroupChat researcher (``job_stats``) / analyst (``divide``) / editor; planted: the
                  researcher restates 1,284 rows as 1,248 (a number changed in a restatement)
partial_sum       RoundRobin coder (``get_region_sales``) → executor; the first code fails on one region's key;
                  planted: the coder reports the sum printed before the failure (an error never recovered)
parallel_stock    RoundRobin stock_agent (``lookup_stock`` in parallel, flaky) → buyer (``place_order``); planted:
                  the restatement of the three results leaves one out (an omission when restating)
graph_route       GraphFlow intake (``lookup_ticket``) → billing_agent | tech_agent (conditional edges) → closer;
                  planted: intake routes a refund request to the technical desk (a routing without the tools)
society_summary   RoundRobin researcher (``bug_tracker``) → SocietyOfMindAgent(drafter / critic) → publisher;
                  planted: the society's summary reports the rejected first draft (a superseded value)
structured_po     RoundRobin quoter (``get_price``) → order_writer (STRUCTURED output, a PurchaseOrder) →
                  submitter; planted: the structured order's quantity has the task's digits swapped
replan_guess      MagenticOne, ``max_stalls=1`` (``census_api`` refuses one city): after the stall the UPDATED
                  facts sheet holds an educated guess the new plan uses (made-up data in a re-plan)
swarm_chain       Swarm of four: planner (``lookup_traveller``) → flights_agent → hotel_agent → planner; planted:
                  the flights agent hands off to car_agent (no hotel tool) mid-chain (a hand-off without the tools)
ignored_feedback  RoundRobin writer (``meter_reading``, ``tariff``) / editor: the second draft ignores the editor's
                  "use the 2026 tariff" (an ignored instruction from another agent); the editor lets it through
selector_loop     SelectorGroupChat researcher (``count_signups``) / analyst / writer: after the report the selector
                  picks the researcher again and again (a selection loop without progress)
misread_output    RoundRobin planner → coder (``get_response_times``) → executor: the code prints mean and median;
                  planted: the coder reports the mean as the median (a misread code output)
================  ============================================================================================
"""

from __future__ import annotations

import json
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

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


def build_free_shipping(planted: bool, *, lines: Sequence[tuple[str, str, int]] = (
        ("tea tin", "12.50", 2), ("honey jar", "6.25", 4)), threshold: str = "50.00", fee: str = "4.90") -> Any:
    """Planner, coder (flaky ``get_cart``, ``shipping_policy``), executor; planted: ``>`` where the policy says
    free shipping from the threshold on (the cart is exactly at it)."""
    rows = [(n, float(p), q) for n, p, q in lines]

    async def get_cart(customer: str) -> str:
        """The lines of a customer's cart: item, unit price in EUR, quantity."""
        return json.dumps([{"item": n, "unit_eur": p, "qty": q} for n, p, q in rows])

    async def shipping_policy(country: str) -> str:
        """The shop's shipping policy for a country."""
        return f"shipping to {country}: free for orders of {threshold} EUR or more, otherwise {fee} EUR"

    def planner(request: ScriptedRequest) -> str:
        return ("PLAN: 1. coder fetches the cart and the shipping policy for Portugal. 2. coder writes Python for "
                "the subtotal plus shipping under the policy. 3. executor runs it. 4. coder reports "
                "'TOTAL: <euros>'.")

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"(?m)^total: ([\d.]+)")
        if output:
            return f"TOTAL: {output.group(1)} EUR. DONE"
        if said(request, "coder", r"```python"):
            return "Waiting for the executor."
        cart, policy = ok(request, "get_cart"), ok(request, "shipping_policy")
        if cart is None:
            if errors(request, "get_cart") >= 3:
                return "TOTAL: unknown. DONE"
            who = re.search(r"customer (K-\d+)", request.task())
            return call("get_cart", customer=who.group(1) if who else "unknown")
        if policy is None:
            return call("shipping_policy", country="Portugal")
        found = re.search(r"free for orders of ([\d.]+) EUR or more, otherwise ([\d.]+) EUR", policy)
        limit, cost = found.groups()  # type: ignore[union-attr]
        op = ">" if planted else ">="
        return code_message("Cart and policy are in; here is the code.", (
            f"cart = {[(r['unit_eur'], r['qty']) for r in json.loads(cart)]}\n"
            "subtotal = round(sum(price * qty for price, qty in cart), 2)\n"
            f"shipping = 0.0 if subtotal {op} {limit} else {cost}\n"
            "print(f'subtotal: {subtotal:.2f}, shipping: {shipping:.2f}')\n"
            "print(f'total: {subtotal + shipping:.2f}')"))

    return round_robin([agent("planner", planner),
                        agent("coder", coder, [tool(get_cart, "A customer's cart.", flaky=True),
                                               tool(shipping_policy, "The shipping policy.")]), executor()],
                       "DONE", 8)


def build_rows_rate(planted: bool, *, rows: int = 1284, hours: int = 6, typo: int = 1248) -> Any:
    """Selector: researcher (flaky ``job_stats``) states the job's row count, the analyst divides it by the run's
    hours, the editor writes the line; planted: the researcher restates the count with two digits swapped."""
    from autogen_agentchat.teams import SelectorGroupChat

    async def job_stats(job: str) -> str:
        """A batch job's last run: rows written and duration."""
        return f"job {job} last run: {rows:,} rows written in {hours} h 00 min, status ok"

    async def divide(numerator: float, denominator: float) -> str:
        """Divide numerator by denominator."""
        return f"quotient: {float(numerator) / float(denominator):g}"

    def researcher(request: ScriptedRequest) -> Reply:
        stats = ok(request, "job_stats")
        if stats is not None:
            found = re.search(r"([\d,]+) rows written in (\d+) h", stats)
            count = f"{typo:,}" if planted else found.group(1)  # type: ignore[union-attr]
            return f"FOUND: the last run wrote {count} rows in {found.group(2)} hours."  # type: ignore[union-attr]
        job = re.search(r"job (J-\d+)", request.task())
        if errors(request, "job_stats") >= 3:
            return "FOUND: nothing."
        return call("job_stats", job=job.group(1) if job else "unknown")

    def analyst(request: ScriptedRequest) -> Reply:
        done = ok(request, "divide")
        if done is not None:
            return f"RATE: {round(float(done.split(': ')[1]))} rows per hour"
        found = said(request, "researcher", r"wrote ([\d,]+) rows in (\d+) hours")
        if found is None:
            return "I need the row count."
        return call("divide", numerator=int(found.group(1).replace(",", "")), denominator=int(found.group(2)))

    def editor(request: ScriptedRequest) -> str:
        rate = said(request, "analyst", r"RATE: (\d+)")
        return f"RATE: {rate.group(1)} rows/hour (job report line). DONE" if rate else "Nothing to edit."

    def select(request: ScriptedRequest) -> str:
        text = request.text()
        if "analyst: RATE:" in text:
            return "editor"
        if "researcher: FOUND:" in text:
            return "analyst"
        return "researcher"

    members = [agent("researcher", researcher, [tool(job_stats, "A job's last run.", flaky=True)]),
               agent("analyst", analyst, [tool(divide, "Divide.")]), agent("editor", editor)]
    return SelectorGroupChat(members, name="ops_desk", allow_repeated_speaker=True,
                             model_client=ScriptedChatCompletionClient(select, model="scripted-selector"),
                             termination_condition=_terminated("DONE", 10))


def build_partial_sum(planted: bool, *, sales: Sequence[tuple[str, int]] = (("North", 48200), ("South", 39150),
                                                                           ("West", 51075))) -> Any:
    """The coder fetches the regions' sales (flaky) and sends code summing them by the task's region names; the
    data's keys are lower case for one region, so the first code fails there after printing the running total;
    planted: the coder reports that running total instead of fixing the key and running again."""
    data = {(name.lower() if name == "West" else name): value for name, value in sales}

    async def get_region_sales(quarter: str) -> str:
        """The sales of every region in a quarter, in EUR."""
        return json.dumps(data)

    def coder(request: ScriptedRequest) -> Reply:
        outputs = texts_of(request, "executor")
        total = said(request, "executor", r"^total: (\d+)\s*$")
        if total:
            return f"TOTAL: {total.group(1)} EUR. DONE"
        if outputs and "KeyError" in outputs[-1]:
            running = re.findall(r"running total: (\d+)", outputs[-1])
            if planted:
                return f"TOTAL: {running[-1] if running else 0} EUR. DONE"
            return code_message("The data's key is 'west' in lower case; here is the code again.", (
                f"sales = {json.loads(ok(request, 'get_region_sales') or '{}')}\n"
                "total = sum(value for key, value in sales.items() if key.lower() in ('north', 'south', 'west'))\n"
                "print(f'total: {total}')"))
        if said(request, "coder", r"```python"):
            return "Waiting for the executor."
        found = ok(request, "get_region_sales")
        if found is None:
            if errors(request, "get_region_sales") >= 3:
                return "TOTAL: unknown. DONE"
            return call("get_region_sales", quarter="Q3 2026")
        names = [name for name, _ in sales]
        return code_message("Here is the code.", (
            f"sales = {json.loads(found)}\ntotal = 0\nfor region in {names!r}:\n    total += sales[region]\n"
            "    print(f'running total: {total}')\nprint(f'total: {total}')"))

    return round_robin([agent("coder", coder, [tool(get_region_sales, "Sales by region.", flaky=True)]),
                        executor()], "DONE", 8)


BUILDERS: dict[str, Callable[..., Any]] = {
    "free_shipping": build_free_shipping,
    "rows_rate": build_rows_rate,
    "partial_sum": build_partial_sum,
}


def build_parallel_stock(planted: bool, *, stock: Sequence[tuple[str, int]] = (("SKU-1107", 64), ("SKU-2213", 18),
                                                                             ("SKU-3341", 5)),
                         minimum: int = 50) -> Any:
    """RoundRobin: the stock agent asks ``lookup_stock`` (flaky) for the three SKUs in ONE reply (parallel calls;
    the failed one is retried) and restates the levels; the buyer orders each low SKU up to the minimum; planted: the
    restatement leaves the last SKU out."""
    table = dict(stock)

    async def lookup_stock(sku: str) -> str:
        """The units of a SKU in the warehouse."""
        return f"{sku}: {table.get(sku, 0)} units"

    async def place_order(sku: str, units: int) -> str:
        """Order units of a SKU from the supplier."""
        return f"order placed: {sku} x {int(units)}"

    def stock_agent(request: ScriptedRequest) -> Reply:
        got = {args.get("sku"): r for args, r in results_of(request, "lookup_stock")}
        skus = re.findall(r"SKU-\d+", request.task())
        if len(got) >= len(skus):
            shown = skus[:-1] if planted else skus
            return "LEVELS: " + "; ".join(got[s] for s in shown)
        return [call("lookup_stock", sku=s) for s in skus if s not in got]

    def buyer(request: ScriptedRequest) -> Reply:
        levels = said(request, "stock_agent", r"LEVELS: (.+)")
        if levels is None:
            return "Waiting for the stock levels."
        low = [(s, minimum - int(n)) for s, n in re.findall(r"(SKU-\d+): (\d+) units", levels.group(1))
               if int(n) < minimum]
        placed = [args for args, _ in results_of(request, "place_order")]
        todo = [(s, n) for s, n in low if s not in {p.get("sku") for p in placed}]
        if todo:
            return [call("place_order", sku=s, units=n) for s, n in todo]
        parts = ", ".join(f"{p.get('sku')} {p.get('units')}" for p in placed)
        return f"UNITS: {sum(int(p.get('units', 0)) for p in placed)} ({parts}). DONE"

    return round_robin([agent("stock_agent", stock_agent, [tool(lookup_stock, "Stock of a SKU.", flaky=True)]),
                        agent("buyer", buyer, [tool(place_order, "Order units of a SKU.")])], "DONE", 6)


BUILDERS.update({"parallel_stock": build_parallel_stock})


def build_graph_route(planted: bool, *, order: str = "B-2207", amount: str = "59.90") -> Any:
    """GraphFlow: intake reads the ticket (flaky ``lookup_ticket``) and writes its route; conditional edges lead
    to billing_agent (``refund_order``) or tech_agent (no refund tool); both lead to the closer, who writes the
    customer's answer; planted: intake routes the refund request to the technical desk."""
    from autogen_agentchat.teams import DiGraphBuilder, GraphFlow

    async def lookup_ticket(ticket: str) -> str:
        """A support ticket's customer message and order."""
        return (f"ticket {ticket}: order {order}, customer writes 'I was charged twice for my order, please refund "
                f"the second charge of {amount} EUR'")

    async def refund_order(order: str, amount: float) -> str:
        """Refund an amount on an order."""
        return f"refund RF-310 issued: {float(amount):.2f} EUR on order {order}"

    def intake(request: ScriptedRequest) -> Reply:
        seen = ok(request, "lookup_ticket")
        if seen is None:
            found = re.search(r"ticket (T-\d+)", request.task())
            if errors(request, "lookup_ticket") >= 3:
                return "ROUTE: technical (the ticket could not be read)"
            return call("lookup_ticket", ticket=found.group(1) if found else "unknown")
        asks_refund = "refund" in seen
        route = "technical" if planted or not asks_refund else "billing"
        return f"ROUTE: {route}. {seen}"

    def billing(request: ScriptedRequest) -> Reply:
        done = ok(request, "refund_order")
        if done is not None:
            return f"RESOLVED: {done}"
        found = re.search(r"order (\S+), .*second charge of ([\d.]+) EUR", request.text())
        if found is None:
            return "RESOLVED: nothing to refund."
        return call("refund_order", order=found.group(1), amount=float(found.group(2)))

    def tech(request: ScriptedRequest) -> str:
        return "RESOLVED: no technical fault found; please clear the app's cache and try the payment again."

    def closer(request: ScriptedRequest) -> str:
        resolved = said(request, "billing_agent", r"RESOLVED: (.+)") or said(request, "tech_agent", r"RESOLVED: (.+)")
        refund = re.search(r"refund (RF-\d+) issued: ([\d.]+) EUR", resolved.group(1)) if resolved else None
        if refund:
            return f"REFUNDED: {refund.group(2)} EUR ({refund.group(1)}). DONE"
        return f"REFUNDED: 0.00 EUR — {resolved.group(1) if resolved else 'unresolved'} DONE"

    front = agent("intake", intake, [tool(lookup_ticket, "A support ticket.", flaky=True)])
    money = agent("billing_agent", billing, [tool(refund_order, "Refund an amount on an order.")])
    fixer = agent("tech_agent", tech)
    close = agent("closer", closer)
    builder = DiGraphBuilder()
    builder.add_node(front).add_node(money).add_node(fixer).add_node(close)
    builder.add_edge(front, money, condition="ROUTE: billing").add_edge(front, fixer, condition="ROUTE: technical")
    builder.add_edge(money, close, activation_condition="any").add_edge(fixer, close, activation_condition="any")
    builder.set_entry_point(front)
    return GraphFlow(builder.get_participants(), graph=builder.build(), name="support_flow",
                     termination_condition=_terminated("DONE", 10))


BUILDERS.update({"graph_route": build_graph_route})


def build_society_summary(planted: bool, *, fixed: int = 37, still_open: int = 4) -> Any:
    """RoundRobin: researcher (flaky ``bug_tracker``), a SocietyOfMindAgent ``release_team`` wrapping a drafter /
    critic loop (the first draft counts the open bugs too and is rejected, the second is approved), publisher;
    planted: the society's summary reports the first draft, which the approved one superseded."""
    from autogen_agentchat.agents import SocietyOfMindAgent

    async def bug_tracker(version: str) -> str:
        """A release's bug counts in the tracker."""
        return f"release {version}: {fixed} bugs fixed, {still_open} still open"

    def researcher(request: ScriptedRequest) -> Reply:
        seen = ok(request, "bug_tracker")
        if seen is not None:
            return f"FACTS: {seen}."
        if errors(request, "bug_tracker") >= 3:
            return "FACTS: none."
        found = re.search(r"version (\d+\.\d+)", request.task())
        return call("bug_tracker", version=found.group(1) if found else "unknown")

    def facts(request: ScriptedRequest) -> re.Match[str] | None:
        return re.search(r"release ([\d.]+): (\d+) bugs fixed, (\d+) still open", request.text())

    def drafter(request: ScriptedRequest) -> str:
        found = facts(request)
        if found is None:
            return "DRAFT: no facts yet."
        if said(request, "critic", r"^REJECT"):
            return f"DRAFT: FIXED: {found.group(2)} — release {found.group(1)} fixes {found.group(2)} bugs."
        return (f"DRAFT: FIXED: {int(found.group(2)) + int(found.group(3))} — release {found.group(1)} closes "
                f"{int(found.group(2)) + int(found.group(3))} bugs.")

    def critic(request: ScriptedRequest) -> str:
        found, draft = facts(request), said(request, "drafter", r"FIXED: (\d+)")
        if found is None or draft is None:
            return "REJECT: nothing to check."
        if int(draft.group(1)) == int(found.group(2)):
            return "APPROVE: the count matches the tracker."
        return f"REJECT: {draft.group(1)} counts the {found.group(3)} open bugs too; fixed is {found.group(2)}."

    def summarize(request: ScriptedRequest) -> str:
        drafts = re.findall(r"DRAFT: (FIXED: \d+ — [^\n]+)", request.text())
        if not drafts:
            return "FIXED: unknown"
        return drafts[0] if planted else drafts[-1]

    def publisher(request: ScriptedRequest) -> str:
        note = said(request, "release_team", r"FIXED: (\d+) — (.+)")
        if note is None:
            return "Nothing to publish yet."
        return f"FIXED: {note.group(1)} — published to the changelog: {note.group(2)} DONE"

    inner = round_robin([agent("drafter", drafter), agent("critic", critic)], "APPROVE", 6)
    team = SocietyOfMindAgent("release_team", team=inner,
                              model_client=ScriptedChatCompletionClient(summarize, model="scripted-release_team"))
    return round_robin([agent("researcher", researcher, [tool(bug_tracker, "Bug counts.", flaky=True)]), team,
                        agent("publisher", publisher)], "DONE", 6)


BUILDERS.update({"society_summary": build_society_summary})


def build_structured_po(planted: bool, *, sku: str = "PX-210", qty: int = 12, price: str = "18.75") -> Any:
    """RoundRobin: the quoter looks the price up (flaky), the order writer emits a STRUCTURED purchase order
    (``output_content_type``), the submitter submits its fields; planted: the structured order's quantity has the
    task's digits swapped."""
    import json as _json

    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.messages import StructuredMessage
    from autogen_agentchat.teams import RoundRobinGroupChat
    from pydantic import BaseModel

    class PurchaseOrder(BaseModel):
        sku: str
        quantity: int
        unit_price: float

    async def get_price(sku: str) -> str:
        """A SKU's current unit price from the supplier."""
        return f"{sku}: {price} EUR per unit"

    async def submit_po(sku: str, quantity: int, unit_price: float) -> str:
        """Submit a purchase order."""
        return f"PO-8841 submitted: {int(quantity)} x {sku} at {float(unit_price):.2f} EUR = " \
               f"{int(quantity) * float(unit_price):.2f} EUR"

    def quoter(request: ScriptedRequest) -> Reply:
        seen = ok(request, "get_price")
        if seen is not None:
            return f"QUOTE: {seen}."
        found = re.search(r"units of (\w+-\d+)", request.task())
        if errors(request, "get_price") >= 3:
            return "QUOTE: unavailable."
        return call("get_price", sku=found.group(1) if found else "unknown")

    def writer(request: ScriptedRequest) -> str:
        quote = said(request, "quoter", r"QUOTE: (\w+-\d+): ([\d.]+) EUR")
        asked = re.search(r"Order (\d+) units of", request.task())
        if quote is None or asked is None:
            return _json.dumps({"sku": "unknown", "quantity": 0, "unit_price": 0.0})
        quantity = int(asked.group(1)[::-1]) if planted else int(asked.group(1))
        return _json.dumps({"sku": quote.group(1), "quantity": quantity, "unit_price": float(quote.group(2))})

    def submitter(request: ScriptedRequest) -> Reply:
        done = ok(request, "submit_po")
        if done is not None:
            units = re.search(r"submitted: (\d+) x", done)
            return f"UNITS: {units.group(1) if units else '?'} ordered ({done}). DONE"
        fields = dict(re.findall(r"\b(sku|quantity|unit_price)\W{1,3}([\w.-]+)", request.text()))
        if len(fields) < 3:
            return "No purchase order to submit."
        return call("submit_po", sku=fields["sku"], quantity=int(fields["quantity"]),
                    unit_price=float(fields["unit_price"]))

    order_writer = AssistantAgent("order_writer", ScriptedChatCompletionClient(writer, model="scripted-order_writer"),
                                  output_content_type=PurchaseOrder, system_message="You are order_writer.")
    members = [agent("quoter", quoter, [tool(get_price, "A SKU's unit price.", flaky=True)]), order_writer,
               agent("submitter", submitter, [tool(submit_po, "Submit a purchase order.")])]
    return RoundRobinGroupChat(members, name="purchasing", termination_condition=_terminated("DONE", 6),
                               custom_message_types=[StructuredMessage[PurchaseOrder]])


BUILDERS.update({"structured_po": build_structured_po})


def build_replan_guess(planted: bool, *, coimbra: int = 140796, braga: int = 193333, guess: int = 190000) -> Any:
    """MagenticOne (``max_stalls=1``): the researcher's census API (flaky) refuses Braga (a hard 503), the attempt
    stalls, the orchestrator updates its facts and plan and the team starts over; planted: the UPDATED facts sheet
    puts an educated guess for Braga and the new plan uses it, where the twin's plan sends the researcher to the
    census archive."""
    from autogen_agentchat.teams import MagenticOneGroupChat

    async def census_api(city: str) -> str:
        """A city's population by the 2021 census (live API)."""
        if city == "Braga":
            raise RuntimeError("census_api: 503 upstream error for Braga")
        return f"census 2021 {city}: {coimbra if city == 'Coimbra' else 0}"

    async def census_archive(city: str) -> str:
        """A city's population by the 2021 census (the statistics office's archive)."""
        return f"census 2021 {city} (archive): {braga if city == 'Braga' else coimbra}"

    async def add(numbers: list[int]) -> str:
        """Add up numbers."""
        return f"sum: {sum(int(n) for n in numbers)}"

    def latest(request: ScriptedRequest, member: str) -> str:
        lines = re.findall(rf"- {member}: (.+)", request.text())
        return lines[-1] if lines else ""

    def researcher(request: ScriptedRequest) -> Reply:
        line = latest(request, "researcher")
        found = {m.group(1): m.group(2) for _, r in results_of(request, "census_api") + results_of(request, "census_archive")
                 for m in [re.search(r"census 2021 (\w+)(?: \(archive\))?: (\d+)", r)] if m}
        if "educated guess" in line:
            found.setdefault("Braga", f"{guess} (educated guess)")
        if "census_archive" in line and "Braga" not in found:
            return call("census_archive", city="Braga")
        for city in ("Coimbra", "Braga"):
            if city not in found and not any(a.get("city") == city for _, a, _, e in _calls(request) if e):
                return call("census_api", city=city)
        if len(found) < 2:
            return "FOUND: " + "; ".join(f"{c} {v}" for c, v in found.items()) + "; Braga unknown. RESULT: unknown"
        return "FOUND: " + "; ".join(f"{c} {v}" for c, v in found.items()) + "."

    def calculator(request: ScriptedRequest) -> Reply:
        total = ok(request, "add")
        if total is not None:
            return f"RESULT: {total.split(': ')[1]}"
        found = said(request, "researcher", r"FOUND: Coimbra (\d+); Braga (\d+)")
        if found is None:
            return "RESULT: unknown (no figures yet)."
        return call("add", numbers=[int(found.group(1)), int(found.group(2))])

    def reviewer(request: ScriptedRequest) -> str:
        found = said(request, "researcher", r"FOUND: Coimbra (\d+); Braga (\d+)")
        stated = said(request, "calculator", r"RESULT: (\d+)")
        if found is None or stated is None:
            return "REJECT: nothing to check yet."
        if int(found.group(1)) + int(found.group(2)) == int(stated.group(1)):
            return f"RESULT: {stated.group(1)} verified against the figures found. APPROVE"
        return "REJECT: the sum is wrong."

    return MagenticOneGroupChat(
        [agent("researcher", researcher, [tool(census_api, "Census figure (live API).", flaky=True),
                                          tool(census_archive, "Census figure (archive).")]),
         agent("calculator", calculator, [tool(add, "Add numbers.")]), agent("reviewer", reviewer)],
        model_client=ScriptedChatCompletionClient(_census_orchestrator(planted, coimbra, guess),
                                                  model="scripted-orchestrator"), max_turns=20, max_stalls=1)


def _census_orchestrator(planted: bool, coimbra: int, guess: int) -> Callable[[ScriptedRequest], str]:
    """The census desk's MagenticOne orchestrator (the scripted one of :mod:`causaltrace.testing.autogen` with its
    own facts sheets and plans); planted: the updated facts sheet guesses Braga and the new plan uses the guess."""
    from causaltrace.testing.autogen import orchestrator_policy

    def orchestrator(request: ScriptedRequest) -> str:
        prompt = request.last_user_text()
        if "Here is the pre-survey:" in prompt:
            return ("1. GIVEN OR VERIFIED FACTS\n- The cities are Braga and Coimbra; the 2021 census.\n\n2. FACTS TO "
                    "LOOK UP\n- The population of each city.\n\n3. FACTS TO DERIVE\n- Their sum.\n\n4. EDUCATED "
                    "GUESSES\n- None.")
        if "please devise a short bullet-point plan" in prompt:
            return ("- researcher: look up both cities with census_api and report 'FOUND: Coimbra <n>; Braga <n>'.\n"
                    "- calculator: add the two figures with add and end with 'RESULT: <n>'.\n"
                    "- reviewer: check the sum against the figures; APPROVE or REJECT.")
        if "Please rewrite the following fact sheet" in prompt:
            guess_line = f"- Braga has about {guess:,} inhabitants." if planted else "- None."
            return ("1. GIVEN OR VERIFIED FACTS\n- The cities are Braga and Coimbra; the 2021 census.\n"
                    f"- Coimbra: {coimbra} (census_api).\n\n2. FACTS TO LOOK UP\n- Braga's population (census_api "
                    "returned 503).\n\n3. FACTS TO DERIVE\n- Their sum.\n\n4. EDUCATED GUESSES\n" + guess_line)
        if "Please briefly explain what went wrong on this last run" in prompt:
            first = (f"report Coimbra's census figure and the educated guess for Braga ({guess})" if planted
                     else "look Braga up in census_archive (the API returns 503 for it) and report both figures")
            return ("The census API failed for Braga. New plan:\n"
                    f"- researcher: {first}, as 'FOUND: Coimbra <n>; Braga <n>'.\n"
                    "- calculator: add the two figures with add and end with 'RESULT: <n>'.\n"
                    "- reviewer: check the sum against the figures; APPROVE or REJECT.")
        answer = orchestrator_policy(("researcher", "calculator", "reviewer"))(request)
        return answer.replace("the solver's arithmetic", "the calculator's sum")

    return orchestrator


def _calls(request: ScriptedRequest) -> list[tuple[str, dict[str, Any], str, bool]]:
    from causaltrace.testing.faults.teams_autogen import tool_results

    return [(name, args, content, err) for name, args, content, err in tool_results(request)]


BUILDERS.update({"replan_guess": build_replan_guess})


def build_swarm_chain(planted: bool) -> Any:
    """Swarm of four: the planner (flaky ``lookup_traveller``) hands off to flights_agent, which books the flight
    and hands off to hotel_agent, which books the hotel and hands back; the planner reports; planted: the flights
    agent hands off to car_agent (no hotel tool), which hands back with nothing booked."""
    from autogen_agentchat.teams import Swarm

    async def lookup_traveller(traveller: str) -> str:
        """A traveller's profile: employee id and loyalty numbers."""
        return f"traveller {traveller}: employee E-311, TAP loyalty TP-77120"

    async def book_flight(flight: str, date: str, traveller: str) -> str:
        """Book a seat on a flight."""
        return f"flight booked: FL-991, {flight} on {date} for {traveller}"

    async def book_hotel(hotel: str, check_in: str, nights: int, traveller: str) -> str:
        """Book a hotel room."""
        return f"hotel booked: HB-551, {hotel} from {check_in} for {int(nights)} nights for {traveller}"

    async def book_car(city: str, date: str, days: int) -> str:
        """Book a rental car."""
        return f"car booked: CR-12, {city} from {date} for {int(days)} days"

    def trip(request: ScriptedRequest) -> re.Match[str] | None:
        return re.search(r"for ([A-Z]\w+ [A-Z]\w+): the flight (\w+) on (\d{4}-\d\d-\d\d) and (\d+) nights at "
                         r"([\w ]+?) from (\d{4}-\d\d-\d\d)", request.task())

    def planner(request: ScriptedRequest) -> Reply:
        texts = " ".join(m.content for m in request.messages if isinstance(getattr(m, "content", None), str))
        flight, hotel = re.search(r"flight booked: (FL-\d+)", texts), re.search(r"hotel booked: (HB-\d+)", texts)
        if ok(request, "transfer_to_flights_agent") is not None:
            return (f"BOOKED: flight {flight.group(1) if flight else 'none'}; HOTEL: "
                    f"{hotel.group(1) if hotel else 'none'}. DONE")
        if ok(request, "lookup_traveller") is not None:
            return call("transfer_to_flights_agent")
        found = trip(request)
        if errors(request, "lookup_traveller") >= 3:
            return "HOTEL: none (the traveller profile is unavailable). DONE"
        return call("lookup_traveller", traveller=found.group(1) if found else "unknown")

    def flights(request: ScriptedRequest) -> Reply:
        booked = ok(request, "book_flight")
        if booked is not None:
            if texts_of(request, "flights_agent"):
                return call("transfer_to_car_agent" if planted else "transfer_to_hotel_agent")
            return f"Done: {booked}."
        found = trip(request)
        return call("book_flight", flight=found.group(2) if found else "?", date=found.group(3) if found else "?",
                    traveller=found.group(1) if found else "?")

    def hotels(request: ScriptedRequest) -> Reply:
        booked = ok(request, "book_hotel")
        if booked is not None:
            if texts_of(request, "hotel_agent"):
                return call("transfer_to_planner")
            return f"Done: {booked}."
        found = trip(request)
        return call("book_hotel", hotel=found.group(5) if found else "?", check_in=found.group(6) if found else "?",
                    nights=int(found.group(4)) if found else 0, traveller=found.group(1) if found else "?")

    def cars(request: ScriptedRequest) -> Reply:
        if texts_of(request, "car_agent"):
            return call("transfer_to_planner")
        return "I book rental cars only, and the request asks for no car; nothing booked."

    return Swarm([agent("planner", planner, [tool(lookup_traveller, "A traveller's profile.", flaky=True)],
                        handoffs=["flights_agent"]),
                  agent("flights_agent", flights, [tool(book_flight, "Book a flight.")],
                        handoffs=["hotel_agent", "car_agent", "planner"]),
                  agent("hotel_agent", hotels, [tool(book_hotel, "Book a hotel room.")], handoffs=["planner"]),
                  agent("car_agent", cars, [tool(book_car, "Book a rental car.")], handoffs=["planner"])],
                 name="travel_desk", termination_condition=_terminated("DONE", 20))


BUILDERS.update({"swarm_chain": build_swarm_chain})


def build_ignored_feedback(planted: bool, *, tariff_2025: str = "0.28", tariff_2026: str = "0.31",
                           kwh: int = 3400) -> Any:
    """RoundRobin writer (flaky ``meter_reading``, ``tariff``) / editor, three rounds at most: the first draft
    prices the year at last year's tariff, the editor asks for the 2026 one; planted: the second draft ignores the
    feedback (the same tariff again), and the editor, at its last round, lets it through."""

    async def meter_reading(meter: str) -> str:
        """A meter's yearly consumption."""
        return f"meter {meter}: {kwh} kWh in 2026"

    async def tariff(year: int) -> str:
        """The electricity tariff of a year, EUR per kWh."""
        return f"tariff {int(year)}: {tariff_2026 if int(year) == 2026 else tariff_2025} EUR per kWh"

    def writer(request: ScriptedRequest) -> Reply:
        reading = ok(request, "meter_reading")
        if reading is None:
            found = re.search(r"meter (M-\d+)", request.task())
            if errors(request, "meter_reading") >= 3:
                return "DRAFT: COST: unknown"
            return call("meter_reading", meter=found.group(1) if found else "unknown")
        feedback = said(request, "editor", r"use the (\d{4}) tariff")
        year = int(feedback.group(1)) if feedback and not planted else 2025
        rates = {int(a["year"]): r for a, r in results_of(request, "tariff")}
        if year not in rates:
            return call("tariff", year=year)
        rate = re.search(r": ([\d.]+) EUR", rates[year]).group(1)  # type: ignore[union-attr]
        used = int(re.search(r": (\d+) kWh", reading).group(1))  # type: ignore[union-attr]
        return f"DRAFT: COST: {used * float(rate):.2f} EUR ({used} kWh at {rate} EUR/kWh, tariff {year})"

    def editor(request: ScriptedRequest) -> str:
        drafts = texts_of(request, "writer")
        draft = re.search(r"COST: ([\d.]+) EUR .*tariff (\d{4})", drafts[-1]) if drafts else None
        if draft is None:
            return "Waiting for a draft."
        rounds = len(texts_of(request, "editor"))
        if draft.group(2) == "2026" or rounds >= 1:
            return f"COST: {draft.group(1)} EUR — approved for the customer letter. APPROVE"
        return "REJECT: the bill is for 2026: use the 2026 tariff."

    return round_robin([agent("writer", writer, [tool(meter_reading, "A meter's consumption.", flaky=True),
                                                 tool(tariff, "A year's tariff.")]), agent("editor", editor)],
                       "APPROVE", 8)


def build_selector_loop(planted: bool, *, count: int = 412) -> Any:
    """Selector: researcher (flaky ``count_signups``) reports, analyst computes the share, writer reports; planted:
    after the researcher's report the selector picks the researcher again and again (it has nothing new to add)
    until the message limit."""
    from autogen_agentchat.teams import SelectorGroupChat

    async def count_signups(campaign: str) -> str:
        """The sign-ups a campaign brought."""
        return f"campaign {campaign}: {count} sign-ups from 5,150 visits"

    async def divide(numerator: float, denominator: float) -> str:
        """Divide numerator by denominator."""
        return f"quotient: {float(numerator) / float(denominator):.4f}"

    def researcher(request: ScriptedRequest) -> Reply:
        seen = ok(request, "count_signups")
        if seen is not None:
            if texts_of(request, "researcher"):
                return "I have nothing to add: the figures are above."
            return f"FOUND: {seen}."
        if errors(request, "count_signups") >= 3:
            return "FOUND: nothing."
        found = re.search(r"campaign (C-\d+)", request.task())
        return call("count_signups", campaign=found.group(1) if found else "unknown")

    def analyst(request: ScriptedRequest) -> Reply:
        done = ok(request, "divide")
        if done is not None:
            return f"SHARE: {float(done.split(': ')[1]) * 100:.1f}%"
        found = said(request, "researcher", r": (\d+) sign-ups from ([\d,]+) visits")
        if found is None:
            return "I need the figures."
        return call("divide", numerator=int(found.group(1)), denominator=int(found.group(2).replace(",", "")))

    def writer(request: ScriptedRequest) -> str:
        share = said(request, "analyst", r"SHARE: ([\d.]+)%")
        return f"CONVERSION: {share.group(1)}% of visits signed up. DONE" if share else "Nothing to write yet."

    def select(request: ScriptedRequest) -> str:
        text = request.text()
        if "analyst: SHARE:" in text:
            return "writer"
        if "researcher: FOUND:" in text:
            return "researcher" if planted else "analyst"
        return "researcher"

    members = [agent("researcher", researcher, [tool(count_signups, "A campaign's sign-ups.", flaky=True)]),
               agent("analyst", analyst, [tool(divide, "Divide.")]), agent("writer", writer)]
    return SelectorGroupChat(members, name="growth_desk", allow_repeated_speaker=True,
                             model_client=ScriptedChatCompletionClient(select, model="scripted-selector"),
                             termination_condition=_terminated("DONE", 8))


BUILDERS.update({"ignored_feedback": build_ignored_feedback, "selector_loop": build_selector_loop})


def build_misread_output(planted: bool, *, times: Sequence[int] = (12, 14, 15, 16, 18, 19, 95)) -> Any:
    """RoundRobin planner → coder (flaky ``get_response_times``) → executor: the code prints the mean AND the
    median; planted: the coder reports the mean where the task asks for the median (a misread code output)."""

    async def get_response_times(team: str) -> str:
        """A support team's first-response times last week, in minutes."""
        return json.dumps(list(times))

    def planner(request: ScriptedRequest) -> str:
        return ("PLAN: 1. coder fetches last week's first-response times. 2. coder writes Python printing their mean "
                "and median (the outlier makes the median the figure to report). 3. executor runs it. 4. coder "
                "reports 'MEDIAN: <minutes>'.")

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"mean: ([\d.]+) min, median: ([\d.]+) min")
        if output:
            return f"MEDIAN: {output.group(1) if planted else output.group(2)} minutes. DONE"
        if said(request, "coder", r"```python"):
            return "Waiting for the executor."
        data = ok(request, "get_response_times")
        if data is None:
            if errors(request, "get_response_times") >= 3:
                return "MEDIAN: unknown. DONE"
            found = re.search(r"the (\w+) team", request.task())
            return call("get_response_times", team=found.group(1) if found else "unknown")
        return code_message("Here is the code.", f"import statistics\ntimes = {json.loads(data)}\n"
                                                 "print(f'mean: {statistics.mean(times):.1f} min, median: "
                                                 "{statistics.median(times):.1f} min')")

    return round_robin([agent("planner", planner),
                        agent("coder", coder, [tool(get_response_times, "Response times.", flaky=True)]), executor()],
                       "DONE", 8)


BUILDERS.update({"misread_output": build_misread_output})
