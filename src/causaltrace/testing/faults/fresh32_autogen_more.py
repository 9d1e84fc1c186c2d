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
    round_robin,
    said,
    texts_of,
    tool,
)

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


def _terminated(keyword: str, limit: int) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination

    return TextMentionTermination(keyword) | MaxMessageTermination(limit)


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
