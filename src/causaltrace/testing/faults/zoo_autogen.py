"""The failure zoo's AutoGen AgentChat teams (issue 20 item 2): reactive scripted teams, one per failure type, each
parameterised by a VARIANT (its data) so one team gives several cases.

Every team plants ONE decisive error when ``planted=True`` and carries distractors: a flaky tool that fails once and
is retried (a recovered tool error), one tool called once per item with different arguments, the same call
repeated with progress, a reviewer consulted twice, a speaker selected twice in a row.

==========  ================================================================================================
builder     the team, the planted error
==========  ================================================================================================
plan_word   planner states the plan, converter (flaky ``convert``) converts item by item; planted: the plan
            names the wrong unit for one item (the converter follows it faithfully)
misread     forecaster (flaky ``get_forecast``, ``c_to_f``) + auditor; planted: it reads the day before
premature   shopper (flaky ``get_price`` per item) + auditor; planted: it totals before the last item
reviewer    drafter (flaky ``multiply``) and reviewer take turns; the first draft is rejected for its format;
            planted: the reviewer approves the second draft, which misses the discount of the task
progress    runner: ``submit_job`` (flaky), ``poll_job`` repeated WITH progress, ``divide``; planted: the
            divisor miscopied from the task (the repetition is not the fault)
ignored     supervisor asks bookkeeper (flaky ``get_orders``, ``add``) for one account at a time, excluding
            cancelled orders; planted: the bookkeeper ignores the exclusion for one account
unit        shipper (flaky ``shipping_cost(weight, unit)`` per parcel) + auditor; planted: one parcel in ``lb``
speaker     SelectorGroupChat: researcher (flaky ``lookup_population``, selected twice in a row), calculator
            (``subtract``), guesser; planted: the selector picks the guesser instead of the calculator
average     coder (flaky ``get_temperature`` per city) writes code, executor runs it; planted: ``/ 2`` for
            three cities
==========  ================================================================================================

The teams of the made-up-data and derailed-plan types (``fabricated_data``, ``task_derailment``) are in
:mod:`.zoo_autogen_more`.
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
from causaltrace.testing.faults.zoo_common import FACTORS, fmt

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


def _auditor(source: str, label: str) -> Any:
    def policy(request: ScriptedRequest) -> str:
        found = said(request, source, rf"{label}: (-?[\d.]+)")
        if found:
            return f"{label}: {found.group(1)} checked. APPROVE"
        return "REJECT: no result to check."

    return agent("auditor", policy)


# ------------------------------------------------------------------------ a wrong word in a faithful plan


def build_plan_word(planted: bool, *, items: Sequence[float] = (12, 5), unit: str = "pounds",
                    wrong: str = "ounces", target: str = "kilograms", label: str = "KG", at: int = 0) -> Any:
    async def convert(value: float, unit: str) -> str:
        """Convert an amount in a unit to the target unit."""
        return f"{value:g} {unit} = {fmt(float(value) * FACTORS[unit])} {target}"

    def planner(request: ScriptedRequest) -> str:
        if request.last_from("planner"):
            return "The plan stands."
        parts = [f"{v:g} {wrong if planted and i == at else unit}" for i, v in enumerate(items)]
        return f"Plan: convert {', '.join(parts)} to {target}, one at a time, then add them up."

    def converter(request: ScriptedRequest) -> Reply:
        plan = said(request, "planner", r"Plan: convert (.+) to ")
        if plan is None:
            return "I need a plan."
        wanted = [(float(v), u) for v, u in re.findall(r"([\d.]+) (\w+)", plan.group(1))]
        done = results_of(request, "convert")
        if len(done) >= len(wanted):
            values = [float(re.search(rf"= (-?[\d.]+) {target}", r).group(1)) for _, r in done]  # type: ignore[union-attr]
            return f"{label}: {fmt(sum(values))}. DONE"
        if errors(request, "convert") >= 3:
            return f"{label}: unknown. DONE"
        value, word = wanted[len(done)]
        return call("convert", value=value, unit=word)

    return round_robin([agent("planner", planner),
                        agent("converter", converter, [tool(convert, "Convert an amount.", flaky=True)],
                              iterations=8)], "DONE", 6)


# ------------------------------------------------------------------------------------ a misread observation


def build_misread(planted: bool, *, city: str = "Oslo", day: str = "Tuesday",
                  forecast: Sequence[tuple[str, int]] = (("Monday", 18), ("Tuesday", 21), ("Wednesday", 16))) -> Any:
    text = ", ".join(f"{d} {t} C" for d, t in forecast)
    days = [d for d, _ in forecast]

    async def get_forecast(city: str) -> str:
        """The three-day forecast of a city."""
        return f"{city} forecast: {text}"

    async def c_to_f(celsius: float) -> str:
        """Celsius to Fahrenheit."""
        return f"fahrenheit: {fmt(float(celsius) * 9 / 5 + 32)}"

    def forecaster(request: ScriptedRequest) -> Reply:
        done = ok(request, "c_to_f")
        if done is not None:
            return f"F: {done.rsplit(' ', 1)[1]}"
        seen = ok(request, "get_forecast")
        if seen is not None:
            wanted = days[days.index(day) - 1] if planted else day
            value = re.search(rf"{wanted} (-?\d+) C", seen)
            return call("c_to_f", celsius=int(value.group(1)) if value else 0)
        if errors(request, "get_forecast") >= 3:
            return "F: unknown"
        return call("get_forecast", city=city)

    worker = agent("forecaster", forecaster, [tool(get_forecast, "Forecast.", flaky=True),
                                              tool(c_to_f, "Celsius to Fahrenheit.")])
    return round_robin([worker, _auditor("forecaster", "F")], "APPROVE", 6)


# --------------------------------------------------------------------------------------- premature stop


def build_premature(planted: bool, *, prices: Sequence[tuple[str, int]] = (("widget", 12), ("gadget", 7),
                                                                          ("gizmo", 30))) -> Any:
    table = dict(prices)

    async def get_price(item: str) -> str:
        """The unit price of an item in dollars."""
        return f"price of {item}: {table.get(item, 0)} dollars"

    def shopper(request: ScriptedRequest) -> Reply:
        seen = {args.get("item"): int(re.search(r": (\d+) dollars", r).group(1))  # type: ignore[union-attr]
                for args, r in results_of(request, "get_price")}
        missing = [name for name, _ in prices if name not in seen]
        if not missing or (planted and len(missing) == 1):
            return f"TOTAL: {sum(seen.values())}"
        if errors(request, "get_price") >= 3:
            return "TOTAL: unknown"
        return call("get_price", item=missing[0])

    worker = agent("shopper", shopper, [tool(get_price, "Unit price.", flaky=True)], iterations=len(prices) + 3)
    return round_robin([worker, _auditor("shopper", "TOTAL")], "APPROVE", 6)


# ----------------------------------------------------------------------------- a reviewer approving wrong


def build_reviewer(planted: bool, *, qty: int = 3, price: int = 40, discount: int = 10) -> Any:
    factor = round(1 - discount / 100, 4)

    async def multiply(a: float, b: float) -> str:
        """Multiply two numbers."""
        return f"product: {fmt(float(a) * float(b))}"

    def drafter(request: ScriptedRequest) -> Reply:
        feedback = " ".join(texts_of(request, "reviewer"))
        products = results_of(request, "multiply")
        base = [r for args, r in products if float(args.get("b", 0)) != factor]
        disc = [r for args, r in products if float(args.get("b", 0)) == factor]
        if not base:
            if errors(request, "multiply") >= 3:
                return "The total is unknown."
            return call("multiply", a=qty, b=price)
        value = base[-1].rsplit(" ", 1)[1]
        if "discount" in feedback:
            if not disc:
                return call("multiply", a=float(value), b=factor)
            value = disc[-1].rsplit(" ", 1)[1]
        return f"TOTAL: {value}" if "TOTAL:" in feedback else f"The total is {value} dollars."

    def reviewer(request: ScriptedRequest) -> str:
        found = request.last_from("drafter")
        text = found[1] if found else ""
        if not text.startswith("TOTAL:"):
            return "REJECT: state it as 'TOTAL: <dollars>'."
        value = float(text.split(":", 1)[1])
        if planted or value == round(qty * price * factor, 2):
            return f"TOTAL: {fmt(value)} approved. APPROVE"
        return f"REJECT: the {discount}% member discount is missing."

    return round_robin([agent("drafter", drafter, [tool(multiply, "Multiply.", flaky=True)]),
                        agent("reviewer", reviewer)], "APPROVE", 10)


# ------------------------------------------------------------------ repetition with progress, then a typo


def build_progress(planted: bool, *, days: int = 7, rows: int = 4214, polls: int = 3, typo: int = 1) -> Any:
    state = {"polls": 0}

    async def submit_job(report: str) -> str:
        """Submit a report job."""
        return f"submitted job {report}-7"

    async def poll_job(job: str) -> str:
        """The status of a job."""
        state["polls"] += 1
        if state["polls"] >= polls:
            return f"job {job} done: {rows} rows"
        return f"job {job} running: {100 * state['polls'] // polls}% done"

    async def divide(numerator: float, denominator: float) -> str:
        """Divide numerator by denominator."""
        return f"quotient: {fmt(float(numerator) / float(denominator))}"

    def runner(request: ScriptedRequest) -> Reply:
        quotient = ok(request, "divide")
        if quotient is not None:
            return f"AVG: {quotient.rsplit(' ', 1)[1]}. DONE"
        status = ok(request, "poll_job")
        if status is not None and "done:" in status:
            over = re.search(r"over (\d+) days", request.task())
            n = int(over.group(1)) if over else 1
            total = int(re.search(r"done: (\d+) rows", status).group(1))  # type: ignore[union-attr]
            return call("divide", numerator=total, denominator=n + (typo if planted else 0))
        job = ok(request, "submit_job")
        if job is not None:
            return call("poll_job", job=job.rsplit(" ", 1)[1])
        if errors(request, "submit_job") >= 3:
            return "AVG: unknown. DONE"
        return call("submit_job", report="sales")

    worker = agent("runner", runner, [tool(submit_job, "Submit a job.", flaky=True), tool(poll_job, "Poll a job."),
                                      tool(divide, "Divide.")], iterations=polls + 6)
    return round_robin([worker], "DONE", 3)


# --------------------------------------------------------------------------------- an ignored instruction


def build_ignored(planted: bool, *, accounts: Sequence[tuple[str, Sequence[tuple[int, str]]]] = (
        ("K4", ((120, "paid"), (80, "cancelled"), (45, "paid"))), ("K5", ((60, "paid"), (30, "paid")))),
        at: int = 0) -> Any:
    table = {name: orders for name, orders in accounts}
    names = [name for name, _ in accounts]

    async def get_orders(account: str) -> str:
        """The orders of an account."""
        return f"orders of {account}: " + ", ".join(f"{a} {s}" for a, s in table.get(account, ()))

    async def add(numbers: list[int]) -> str:
        """Add up numbers."""
        return f"sum: {sum(int(n) for n in numbers)}"

    def supervisor(request: ScriptedRequest) -> str:
        sums = [int(m.group(1)) for t in texts_of(request, "bookkeeper") for m in [re.search(r"SUM: (\d+)", t)]
                if m]
        if len(sums) >= len(names):
            return f"TOTAL: {sum(sums)}. DONE"
        return f"bookkeeper: sum the order amounts of account {names[len(sums)]}, excluding cancelled orders."

    def bookkeeper(request: ScriptedRequest) -> Reply:
        asked = said(request, "supervisor", r"account (\w+), (excluding cancelled)?")
        if asked is None:
            return "Which account?"
        name = asked.group(1)
        reported = len([t for t in texts_of(request, "bookkeeper") if t.startswith("SUM:")])
        added = results_of(request, "add")
        if len(added) > reported:
            return f"SUM: {added[-1][1].rsplit(' ', 1)[1]}"
        orders = [r for args, r in results_of(request, "get_orders") if args.get("account") == name]
        if orders:
            pairs = re.findall(r"(\d+) (\w+)", orders[-1].split(": ", 1)[1])
            skip = asked.group(2) is not None and not (planted and names.index(name) == at)
            return call("add", numbers=[int(a) for a, s in pairs if not (skip and s == "cancelled")])
        if errors(request, "get_orders") >= 3:
            return "SUM: 0"
        return call("get_orders", account=name)

    worker = agent("bookkeeper", bookkeeper, [tool(get_orders, "Orders of an account.", flaky=True),
                                              tool(add, "Add numbers.")])
    return round_robin([agent("supervisor", supervisor), worker], "DONE", 2 * len(names) + 3)


# ------------------------------------------------------------------------------------ a tool's wrong unit


def build_unit(planted: bool, *, parcels: Sequence[float] = (2, 3), at: int = 1, rate: float = 5.0) -> Any:
    async def shipping_cost(weight: float, unit: str) -> str:
        """The shipping cost of a parcel."""
        kg = float(weight) * (0.4536 if unit == "lb" else 1.0)
        return f"shipping {weight:g} {unit}: {fmt(kg * rate)} dollars"

    def shipper(request: ScriptedRequest) -> Reply:
        costs = [float(re.search(r": ([\d.]+) dollars", r).group(1))  # type: ignore[union-attr]
                 for _, r in results_of(request, "shipping_cost")]
        if len(costs) >= len(parcels):
            return f"COST: {fmt(sum(costs))}"
        if errors(request, "shipping_cost") >= 3:
            return "COST: unknown"
        i = len(costs)
        return call("shipping_cost", weight=parcels[i], unit="lb" if planted and i == at else "kg")

    worker = agent("shipper", shipper, [tool(shipping_cost, "Shipping cost.", flaky=True)],
                   iterations=len(parcels) + 3)
    return round_robin([worker, _auditor("shipper", "COST")], "APPROVE", 6)


# ------------------------------------------------------------------------------- a wrong speaker selection


def build_speaker(planted: bool, *, cities: Sequence[tuple[str, int]] = (("Oslo", 709000), ("Bergen", 285000)),
                  guess: int = 400000) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    table = dict(cities)
    names = [c for c, _ in cities]

    async def lookup_population(city: str) -> str:
        """The population of a city."""
        return f"population of {city}: {table.get(city, 0)}"

    async def subtract(a: int, b: int) -> str:
        """a minus b."""
        return f"difference: {int(a) - int(b)}"

    def researcher(request: ScriptedRequest) -> Reply:
        stated = " ".join(texts_of(request, "researcher"))
        todo = [c for c in names if f"population of {c} is" not in stated]
        if not todo:
            return "I have stated every population."
        found = [r for args, r in results_of(request, "lookup_population") if args.get("city") == todo[0]]
        if found:
            return f"The population of {todo[0]} is {found[-1].rsplit(' ', 1)[1]}."
        if errors(request, "lookup_population") >= 3:
            return "I cannot look it up."
        return call("lookup_population", city=todo[0])

    def calculator(request: ScriptedRequest) -> Reply:
        diff = ok(request, "subtract")
        if diff is not None:
            return f"ANSWER: {diff.rsplit(' ', 1)[1]}. DONE"
        text = " ".join(texts_of(request, "researcher"))
        values = [re.search(rf"population of {c} is (\d+)", text) for c in names]
        if not all(values):
            return "I need both populations."
        return call("subtract", a=int(values[0].group(1)), b=int(values[1].group(1)))  # type: ignore[union-attr]

    def guesser(request: ScriptedRequest) -> str:
        return f"ANSWER: {guess}. DONE"

    def selector(request: ScriptedRequest) -> str:
        text = request.text()
        if sum(f"population of {c} is" in text for c in names) < len(names):
            return "researcher"
        return "guesser" if planted else "calculator"

    team = [agent("researcher", researcher, [tool(lookup_population, "Population.", flaky=True)]),
            agent("calculator", calculator, [tool(subtract, "Subtract.")]), agent("guesser", guesser)]
    return SelectorGroupChat(team, name="desk", allow_repeated_speaker=True,
                             model_client=ScriptedChatCompletionClient(selector, model="scripted-selector"),
                             termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(10))


# ---------------------------------------------------------------------------- wrong code logic (divisor)


def build_average(planted: bool, *, temps: Sequence[tuple[str, int]] = (("Paris", 21), ("Rome", 27),
                                                                        ("Oslo", 12))) -> Any:
    table = dict(temps)
    cities = [c for c, _ in temps]

    async def get_temperature(city: str) -> str:
        """Today's temperature of a city in Celsius."""
        return f"temperature in {city}: {table.get(city, 0)} C"

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"^\s*(-?[\d.]+)\s*$")
        if output:
            return f"AVG: {output.group(1)}. DONE"
        got = {args.get("city"): int(re.search(r": (-?\d+) C", r).group(1))  # type: ignore[union-attr]
               for args, r in results_of(request, "get_temperature")}
        missing = [c for c in cities if c not in got]
        if missing:
            if errors(request, "get_temperature") >= 3:
                return "AVG: unknown. DONE"
            return call("get_temperature", city=missing[0])
        divisor = len(cities) - 1 if planted else len(cities)
        values = [got[c] for c in cities]
        return code_message("Here is the code.", f"temps = {values}\nprint(round(sum(temps) / {divisor}, 1))")

    return round_robin([agent("coder", coder, [tool(get_temperature, "Temperature.", flaky=True)],
                              iterations=len(cities) + 3), executor()], "DONE", 6)


BUILDERS: dict[str, Callable[..., Any]] = {
    "plan_word": build_plan_word,
    "misread": build_misread,
    "premature": build_premature,
    "reviewer": build_reviewer,
    "progress": build_progress,
    "ignored": build_ignored,
    "unit": build_unit,
    "speaker": build_speaker,
    "average": build_average,
}
