"""The failure zoo's smolagents teams (issue 20 item 2): reactive scripted teams, one per failure type, each
parameterised by a VARIANT (its data) so one team gives several cases.

Every team plants ONE decisive error when ``planted=True`` and carries distractors that a careless attribution
reads as faults: a flaky tool that fails once and is retried (a recovered tool error), one managed agent called
several times with different arguments, the same action repeated with progress, a reviewer consulted twice.

==================  ============================================================================================
builder             the team, the planted error
==================  ============================================================================================
plan_word           manager ToolCallingAgent delegates one conversion per item to ``converter`` (flaky
                    ``convert``); planted: the manager names the wrong unit for one item (the converter follows it)
misread             ToolCallingAgent: ``get_forecast`` (flaky) then ``c_to_f``; planted: it reads the day before
premature           ToolCallingAgent: ``get_price`` once per item (flaky); planted: it answers after all but one
reviewer            manager + managed ``drafter`` (flaky ``multiply``) and ``reviewer`` (asked twice); planted:
                    the reviewer approves the second draft, which misses the discount of the task
progress            ToolCallingAgent: ``submit_job`` (flaky), ``poll_job`` repeated WITH progress, then
                    ``divide``; planted: the divisor miscopied from the task (the repetition is not the fault)
ignored             manager delegates one sum per account to ``bookkeeper`` (flaky ``get_orders``, ``add``);
                    planted: the bookkeeper ignores "excluding cancelled orders" for one account
unit                ToolCallingAgent: ``shipping_cost(weight, unit)`` once per parcel (flaky); planted: one parcel
                    priced in pounds while the task gives kilograms
average             manager CodeAgent asks ``weather_agent`` (flaky ``get_temperature``) once per city, then
                    averages in code; planted: the divisor is 2 for three cities
==================  ============================================================================================

The teams of the made-up-data and derailed-plan types (``fabricated_data``, ``task_derailment``) are in
:mod:`.zoo_smolagents_more`.
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
    make_tool,
    managed_answers,
    number,
    string,
    tool_agent,
)
from causaltrace.testing.faults.zoo_common import FACTORS, fmt
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]


def _number_answer(text: str) -> float | None:
    found = re.search(r"-?\d+(?:\.\d+)?", text)
    return float(found.group(0)) if found else None


# ------------------------------------------------------------------------ a wrong word in a faithful plan


def build_plan_word(planted: bool, *, items: Sequence[float] = (12, 5), unit: str = "pounds",
                    wrong: str = "ounces", target: str = "kilograms", label: str = "KG", at: int = 0) -> Any:
    """One delegation per item; planted: item ``at`` is delegated with the unit ``wrong``."""
    convert = make_tool("convert", f"Convert an amount in a unit to {target}.",
                        {"value": number("the amount"), "unit": string("its unit")}, "string",
                        lambda value, unit: f"{value} {unit} = {fmt(float(value) * FACTORS[unit])} {target}",
                        flaky=True)

    def converter(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no conversion"
        done = find(request, rf"= (-?[\d.]+) {target}")
        if done:
            return [Call("final_answer", {"answer": f"{done.group(1)} {target}"})]
        asked = re.search(r"Convert ([\d.]+) (\w+) to", request.task)
        if asked is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("convert", {"value": float(asked.group(1)), "unit": asked.group(2)})]

    worker = tool_agent(converter, [convert], "converter", max_steps=4, description=f"Converts amounts to {target}.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        answers = [_number_answer(a) for a in managed_answers(request, "converter")]
        if len(answers) >= len(items):
            return [Call("final_answer", {"answer": f"{label}: {fmt(sum(a or 0 for a in answers))}"})]
        i = len(answers)
        word = wrong if planted and i == at else unit
        return [Call("converter", {"task": f"Convert {items[i]:g} {word} to {target}."})]

    return tool_agent(manager, [], "manager", max_steps=len(items) + 2, managed=[worker])


# ------------------------------------------------------------------------------------ a misread observation


def build_misread(planted: bool, *, city: str = "Oslo", day: str = "Tuesday",
                  forecast: Sequence[tuple[str, int]] = (("Monday", 18), ("Tuesday", 21), ("Wednesday", 16))) -> Any:
    """``get_forecast`` (flaky) then ``c_to_f``; planted: the agent takes the value of the day before."""
    text = ", ".join(f"{d} {t} C" for d, t in forecast)
    get_forecast = make_tool("get_forecast", "The three-day forecast of a city.", {"city": string("the city")},
                             "string", lambda city: f"{city} forecast: {text}", flaky=True)
    c_to_f = make_tool("c_to_f", "Celsius to Fahrenheit.", {"celsius": number("degrees Celsius")}, "string",
                       lambda celsius: f"fahrenheit: {fmt(float(celsius) * 9 / 5 + 32)}")
    days = [d for d, _ in forecast]

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no temperature"
        done = find(request, r"fahrenheit: (-?[\d.]+)")
        if done:
            return [Call("final_answer", {"answer": f"F: {done.group(1)}"})]
        seen = find(request, r"forecast: (.+)")
        if seen:
            wanted = days[days.index(day) - 1] if planted else day
            value = re.search(rf"{wanted} (-?\d+) C", seen.group(1))
            return [Call("c_to_f", {"celsius": int(value.group(1)) if value else 0})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "no forecast"})]
        return [Call("get_forecast", {"city": city})]

    return tool_agent(policy, [get_forecast, c_to_f], "forecaster")


# --------------------------------------------------------------------------------------- premature stop


def build_premature(planted: bool, *, prices: Sequence[tuple[str, int]] = (("widget", 12), ("gadget", 7),
                                                                          ("gizmo", 30))) -> Any:
    """One ``get_price`` per item (flaky), then the total; planted: it answers before the last item."""
    table = dict(prices)
    get_price = make_tool("get_price", "The unit price of an item in dollars.", {"item": string("the item")},
                          "string", lambda item: f"price of {item}: {table.get(item, 0)} dollars", flaky=True)

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no total"
        seen = {m.group(1): int(m.group(2)) for o in request.observations
                for m in re.finditer(r"price of (\w+): (\d+) dollars", o)}
        wanted = [name for name, _ in prices]
        missing = [name for name in wanted if name not in seen]
        if not missing or (planted and len(missing) == 1):
            return [Call("final_answer", {"answer": f"TOTAL: {sum(seen.values())}"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the price service is down"})]
        return [Call("get_price", {"item": missing[0]})]

    return tool_agent(policy, [get_price], "shopper", max_steps=len(prices) + 3)


# ----------------------------------------------------------------------------- a reviewer approving wrong


def build_reviewer(planted: bool, *, qty: int = 3, price: int = 40, discount: int = 10) -> Any:
    """The manager asks ``drafter`` for the total and ``reviewer`` to check each draft; the first draft is rejected
    for its format; planted: the reviewer approves the second, which misses the discount."""
    multiply = make_tool("multiply", "Multiply two numbers.", {"a": number("first"), "b": number("second")},
                         "string", lambda a, b: f"product: {fmt(float(a) * float(b))}", flaky=True)

    def drafter(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no draft"
        products = [m.group(1) for o in request.observations for m in [re.search(r"product: (-?[\d.]+)", o)] if m]
        steps = 2 if "discount" in request.task else 1
        if len(products) >= steps:
            value = products[-1]
            return [Call("final_answer", {"answer": f"TOTAL: {value}" if "TOTAL:" in request.task
                                          else f"The total is {value} dollars."})]
        if products:
            return [Call("multiply", {"a": float(products[-1]), "b": 1 - discount / 100})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("multiply", {"a": qty, "b": price})]

    def reviewer(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no verdict"
        draft = re.search(r"Draft: (.+)", request.task)
        text = draft.group(1) if draft else ""
        if not text.startswith("TOTAL:"):
            return [Call("final_answer", {"answer": "REJECT: state it as 'TOTAL: <dollars>'."})]
        if planted or _number_answer(text) == round(qty * price * (1 - discount / 100), 2):
            return [Call("final_answer", {"answer": "APPROVE"})]
        return [Call("final_answer", {"answer": f"REJECT: the {discount}% member discount is missing."})]

    draft_agent = tool_agent(drafter, [multiply], "drafter", max_steps=5, description="Drafts totals.")
    review_agent = tool_agent(reviewer, [], "reviewer", max_steps=2, description="Checks a draft against the task.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        drafts = managed_answers(request, "drafter")
        verdicts = managed_answers(request, "reviewer")
        if verdicts and verdicts[-1].startswith("APPROVE") and drafts:
            return [Call("final_answer", {"answer": drafts[-1]})]
        if len(verdicts) < len(drafts):
            return [Call("reviewer", {"task": f"Task: {request.task.splitlines()[0]}\nDraft: {drafts[-1]}"})]
        if len(drafts) >= 3:
            return [Call("final_answer", {"answer": "no approved draft"})]
        feedback = "" if not verdicts else " " + " ".join(v.replace("REJECT: ", "") for v in verdicts)
        return [Call("drafter", {"task": f"Compute {qty} times {price} dollars.{feedback}"})]

    return tool_agent(manager, [], "manager", max_steps=9, managed=[draft_agent, review_agent])


# ------------------------------------------------------------------ repetition with progress, then a typo


def build_progress(planted: bool, *, days: int = 7, rows: int = 4214, polls: int = 3, typo: int = 1) -> Any:
    """``submit_job`` (flaky), ``poll_job`` until done (each poll makes progress), then ``divide`` rows by days;
    planted: the days miscopied (``days + typo``)."""
    submit = make_tool("submit_job", "Submit a report job.", {"report": string("the report")}, "string",
                       lambda report: f"submitted job {report}-7", flaky=True)
    state = {"polls": 0}

    def poll(job: str) -> str:
        state["polls"] += 1
        if state["polls"] >= polls:
            return f"job {job} done: {rows} rows"
        return f"job {job} running: {100 * state['polls'] // polls}% done"

    poll_job = make_tool("poll_job", "The status of a job.", {"job": string("the job id")}, "string", poll)
    divide = make_tool("divide", "Divide numerator by denominator.",
                       {"numerator": number("dividend"), "denominator": number("divisor")}, "string",
                       lambda numerator, denominator: f"quotient: {fmt(float(numerator) / float(denominator))}")

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no average"
        quotient = find(request, r"quotient: (-?[\d.]+)")
        if quotient:
            return [Call("final_answer", {"answer": f"AVG: {quotient.group(1)}"})]
        done = find(request, r"done: (\d+) rows")
        if done:
            over = re.search(r"over (\d+) days", request.task)
            n = int(over.group(1)) if over else 1
            return [Call("divide", {"numerator": int(done.group(1)), "denominator": n + (typo if planted else 0)})]
        job = find(request, r"submitted job (\S+)")
        if job:
            return [Call("poll_job", {"job": job.group(1)})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "cannot submit"})]
        return [Call("submit_job", {"report": "sales"})]

    return tool_agent(policy, [submit, poll_job, divide], "runner", max_steps=polls + 5)


# --------------------------------------------------------------------------------- an ignored instruction


def build_ignored(planted: bool, *, accounts: Sequence[tuple[str, Sequence[tuple[int, str]]]] = (
        ("K4", ((120, "paid"), (80, "cancelled"), (45, "paid"))), ("K5", ((60, "paid"), (30, "paid")))),
        at: int = 0) -> Any:
    """One delegation per account to ``bookkeeper``, told to exclude cancelled orders; planted: for account
    ``at`` the bookkeeper adds every order."""
    table = {name: orders for name, orders in accounts}
    get_orders = make_tool("get_orders", "The orders of an account.", {"account": string("the account")},
                           "string", lambda account: f"orders of {account}: " + ", ".join(
                               f"{a} {s}" for a, s in table.get(account, ())), flaky=True)
    add = make_tool("add", "Add up numbers.", {"numbers": {"type": "array", "description": "the numbers"}},
                    "string", lambda numbers: f"sum: {sum(int(n) for n in numbers)}")
    names = [name for name, _ in accounts]

    def bookkeeper(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no sum"
        total = find(request, r"sum: (\d+)")
        if total:
            return [Call("final_answer", {"answer": f"sum: {total.group(1)}"})]
        account = re.search(r"account (\w+)", request.task)
        name = account.group(1) if account else "?"
        orders = find(request, rf"orders of {name}: (.+)")
        if orders:
            pairs = re.findall(r"(\d+) (\w+)", orders.group(1))
            skip = "excluding cancelled" in request.task and not (planted and names.index(name) == at)
            return [Call("add", {"numbers": [int(a) for a, s in pairs if not (skip and s == "cancelled")]})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("get_orders", {"account": name})]

    worker = tool_agent(bookkeeper, [get_orders, add], "bookkeeper", max_steps=5, description="Sums orders.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        sums = [_number_answer(a) for a in managed_answers(request, "bookkeeper")]
        if len(sums) >= len(names):
            return [Call("final_answer", {"answer": f"TOTAL: {fmt(sum(s or 0 for s in sums))}"})]
        return [Call("bookkeeper", {"task": f"Sum the order amounts of account {names[len(sums)]}, "
                                            "excluding cancelled orders."})]

    return tool_agent(manager, [], "manager", max_steps=len(names) + 2, managed=[worker])


# ------------------------------------------------------------------------------------ a tool's wrong unit


def build_unit(planted: bool, *, parcels: Sequence[float] = (2, 3), at: int = 1, rate: float = 5.0) -> Any:
    """One ``shipping_cost(weight, unit)`` per parcel (flaky); planted: parcel ``at`` is priced in ``lb``."""

    def cost(weight: float, unit: str) -> str:
        kg = float(weight) * (0.4536 if unit == "lb" else 1.0)
        return f"shipping {weight} {unit}: {fmt(kg * rate)} dollars"

    shipping = make_tool("shipping_cost", "The shipping cost of a parcel.",
                         {"weight": number("the weight"), "unit": string("kg or lb")}, "string", cost, flaky=True)

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no cost"
        costs = [float(m.group(1)) for o in request.observations
                 for m in [re.search(r"shipping [\d.]+ \w+: ([\d.]+) dollars", o)] if m]
        if len(costs) >= len(parcels):
            return [Call("final_answer", {"answer": f"COST: {fmt(sum(costs))}"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the shipping service is down"})]
        i = len(costs)
        unit = "lb" if planted and i == at else "kg"
        return [Call("shipping_cost", {"weight": parcels[i], "unit": unit})]

    return tool_agent(policy, [shipping], "shipper", max_steps=len(parcels) + 3)


# ---------------------------------------------------------------------------- wrong code logic (divisor)


def build_average(planted: bool, *, temps: Sequence[tuple[str, int]] = (("Paris", 21), ("Rome", 27),
                                                                        ("Oslo", 12))) -> Any:
    """The manager asks ``weather_agent`` once per city (separate code steps), then averages in code; planted:
    ``/ 2`` for three cities."""
    table = dict(temps)
    tool = make_tool("get_temperature", "Today's temperature of a city in Celsius.", {"city": string("the city")},
                     "string", lambda city: f"temperature in {city}: {table.get(city, 0)} C", flaky=True)

    def weather(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no temperature"
        found = find(request, r"temperature in (\w+): (-?\d+) C")
        if found:
            return [Call("final_answer", {"answer": f"{found.group(2)}"})]
        city = re.search(r"temperature in (\w+)", request.task)
        if city is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("get_temperature", {"city": city.group(1)})]

    worker = tool_agent(weather, [tool], "weather_agent", max_steps=4, description="Knows today's temperatures.")
    cities = [c for c, _ in temps]

    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        got = [_number_answer(a) for a in managed_answers(request, "weather_agent")]
        if len(got) < len(cities):
            city = cities[len(got)]
            return code_reply(f"ask for {city}.", f"report = weather_agent(task='What is the temperature in "
                                                  f"{city} today?')\nprint(report)")
        divisor = len(cities) - 1 if planted else len(cities)
        values = " + ".join(fmt(g or 0) for g in got)
        return code_reply("average the temperatures.", f"avg = ({values}) / {divisor}\n"
                                                        "final_answer(f'AVG: {round(avg, 1)}')")

    return code_agent(manager, [], "manager", max_steps=len(cities) + 2, managed=[worker])


BUILDERS: dict[str, Callable[..., Any]] = {
    "plan_word": build_plan_word,
    "misread": build_misread,
    "premature": build_premature,
    "reviewer": build_reviewer,
    "progress": build_progress,
    "ignored": build_ignored,
    "unit": build_unit,
    "average": build_average,
}


