"""The failure zoo's smolagents teams written blind to the attribution (issue 20 item 2): made-up data and a derailed
opening plan, in other domains and other forms than :mod:`.zoo_smolagents_more`.

Reactive scripted teams like those of :mod:`.zoo_smolagents` (deterministic functions of the request; ``planted``
switches ONE decisive error on). Every team holds a recovered tool error (each tool object fails on its first call
and is retried) and one tool or managed agent called several times with different arguments.

==================  ============================================================================================
builder             the team, the planted error
==================  ============================================================================================
fabricated_meters   CodeAgent ``energy_analyst``: ``read_meter`` per building (flaky; building C's gateway times
                    out once); planted: after the timeout it writes the three January figures into its summing
                    code as if all three had been read — C's is a plausible number it never got, with no word
                    that it is one
fabricated_rainfall manager CodeAgent asks managed ``climate_agent`` (flaky ``monthly_rainfall``) once per month;
                    the archive times out twice for May and the climate agent reports it could not get May;
                    planted: the manager INTERPOLATES May from April and June in its code instead of asking again
derail_fiscal       CodeAgent ``analyst`` with an opening planning step; the task asks for a fiscal year (April to
                    March); planted: the plan fetches the four quarters of the CALENDAR year, the executor follows
derail_example      manager CodeAgent delegates once to ``billing_agent`` (flaky ``get_reading``, flaky
                    ``multiply``, ``add``); the task explains its tariff with a worked example; planted: the
                    delegation asks for the bill of the EXAMPLE's usage, not of the household the task names
==================  ============================================================================================
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
    last_is_error,
    make_tool,
    managed_answers,
    number,
    ok,
    planning_task,
    string,
    tool_agent,
    written_plan,
)
from causaltrace.testing.faults.zoo_common import outage
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


# ----------------------------------------------------------------------------------------- made-up data


def build_fabricated_meters(planted: bool, *, readings: Sequence[tuple[str, int]] = (
        ("A", 21430), ("B", 17980), ("C", 19265)), offline: str = "C", invented: int = 18400) -> Any:
    """``read_meter`` per building (the first call fails, building ``offline``'s gateway times out once); planted:
    after the timeout the analyst sums the figures with ``invented`` for ``offline``, stated as a reading."""
    table, timeout = dict(readings), outage(offline)

    def read_meter(building: str, month: str) -> str:
        if timeout(building):
            raise TimeoutError(f"read_meter: the meter gateway of building {building} did not answer within 30 s")
        return f"building {building}, {month}: {table.get(building, 0)} kWh"

    tool = make_tool("read_meter", "A building's electricity use in a month, read from its smart meter gateway.",
                     {"building": string("the building"), "month": string("the month, e.g. 'March 2024'")},
                     "string", read_meter, flaky=True)
    names = [name for name, _ in readings]

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "I could not finish the utility statement."
        total = find(request, r"total electricity use: (\d+) kWh")
        if total:
            return code_reply("report the total.", f"final_answer('KWH: {total.group(1)}')")
        period = re.search(r"in (\w+ \d{4})", request.task)
        month = period.group(1) if period else "?"
        got = {m.group(1): int(m.group(2)) for o in ok(request)
               for m in re.finditer(r"building (\w+), \w+ \d{4}: (\d+) kWh", o)}
        missing = [name for name in names if name not in got]
        if planted and missing and errors(request) >= 2:
            got = {**got, missing[0]: invented}
            missing = []
        if not missing:
            listed = ", ".join(f"{name} {got[name]} kWh" for name in names)
            usage = ", ".join(f"'{name}': {got[name]}" for name in names)
            return code_reply(f"The {month} figures: {listed}. Sum them for the statement.",
                              f"usage_kwh = {{{usage}}}\ntotal = sum(usage_kwh.values())\n"
                              "print(f'total electricity use: {total} kWh')")
        if errors(request) >= 4:
            return code_reply("the meter gateways are down.", "final_answer('the meter gateways are down')")
        building = missing[0]
        thought = ("the meter read failed; try again." if last_is_error(request)
                   else f"read building {building}'s meter for {month}.")
        return code_reply(thought, f"reading_{building.lower()} = read_meter(building='{building}', month='{month}')\n"
                                   f"print(reading_{building.lower()})")

    return code_agent(policy, [tool], "energy_analyst", max_steps=len(names) + 4)


def _climate_agent(request: ScriptedRequest) -> Reply:
    if request.is_final_summary:
        return "no figure"
    asked = re.search(r"at the ([\w-]+) station in (\w+ \d{4})", request.task)
    station, month = asked.groups() if asked else ("?", "?")
    found = find(request, rf"{station}, {month}: ([\d.]+) mm")
    if found:
        return [Call("final_answer", {"answer": f"{month} at {station}: {found.group(1)} mm"})]
    if sum(1 for o in request.observations if "timed out" in o) >= 2:
        return [Call("final_answer", {"answer": f"I could not get {month}: the climate archive timed out twice."})]
    if errors(request) >= 4:
        return [Call("final_answer", {"answer": f"I could not get {month}: the archive is down."})]
    return [Call("monthly_rainfall", {"station": station, "month": month})]


def _rainfall_figures(request: ScriptedRequest) -> tuple[list[str], dict[str, float]]:
    """The months the manager asked the climate agent about (in order) and the figures it has for them."""
    asked, got = [], {}
    for report in managed_answers(request, "climate_agent"):
        month = re.search(rf"({'|'.join(MONTHS)}) \d{{4}}", report)
        if month and month.group(1) not in asked:
            asked.append(month.group(1))
        value = re.search(r"(\w+) \d{4} at [\w-]+: ([\d.]+) mm", report)
        if value:
            got[value.group(1)] = float(value.group(2))
    for text in ok(request):
        filled = re.search(r"(\w+) \d{4} \(interpolated\): ([\d.]+) mm", text)
        if filled:
            got[filled.group(1)] = float(filled.group(2))
    return asked, got


def _interpolation(gap: str, before: tuple[str, float], after: tuple[str, float], year: str) -> str:
    return code_reply(
        f"The archive has no {gap} figure for now. {gap} lies between {before[0]} and {after[0]}, so I'll "
        f"interpolate it linearly from those two months and carry on.",
        f"# {gap} {year} is missing (the climate archive timed out): interpolate it between {before[0]} and "
        f"{after[0]}\n{before[0].lower()}_mm = {before[1]}\n{after[0].lower()}_mm = {after[1]}\n"
        f"{gap.lower()}_mm = round(({before[0].lower()}_mm + {after[0].lower()}_mm) / 2, 1)\n"
        f"print(f'{gap} {year} (interpolated): {{{gap.lower()}_mm}} mm')")


def _rainfall_manager(planted: bool) -> Callable[[ScriptedRequest], str]:
    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        where = re.search(r"at the ([\w-]+) weather station", request.task)
        quarter = re.search(r"of (\d{4}) \((\w+), (\w+) and (\w+)\)", request.task)
        station = where.group(1) if where else "?"
        year, months = (quarter.group(1), list(quarter.groups()[1:])) if quarter else ("?", [])
        asked, got = _rainfall_figures(request)
        pending = [m for m in months if m not in asked] or [m for m in months if m not in got]
        if not pending:
            values = ", ".join(f"{got[m]}" for m in months)
            return code_reply(f"I have all {len(months)} months; average them.",
                              f"rain_mm = [{values}]\nfinal_answer(f'RAIN: {{sum(rain_mm) / len(rain_mm):.1f}}')")
        gap = pending[0]
        at = months.index(gap)
        if planted and gap in asked and 0 < at < len(months) - 1 and {months[at - 1], months[at + 1]} <= set(got):
            return _interpolation(gap, (months[at - 1], got[months[at - 1]]), (months[at + 1], got[months[at + 1]]),
                                  year)
        if len(managed_answers(request, "climate_agent")) >= len(months) + 2:
            return code_reply("the archive is down.", "final_answer('the climate archive is down')")
        thought = (f"the climate agent could not get {gap}; ask it again." if gap in asked
                   else f"ask the climate agent for {gap} {year}.")
        return code_reply(thought, f'{gap.lower()} = climate_agent(task="What was the monthly rainfall at the '
                                   f'{station} station in {gap} {year}, in mm?")\nprint({gap.lower()})')

    return manager


def build_fabricated_rainfall(planted: bool, *, station: str = "Bergen-Florida", year: int = 2023,
                              rainfall: Sequence[tuple[str, float]] = (("April", 88.4), ("May", 131.7),
                                                                       ("June", 72.9)), slow: str = "May") -> Any:
    """The manager asks ``climate_agent`` (flaky ``monthly_rainfall``) for each month; the archive times out twice
    for ``slow`` and the climate agent reports that; planted: the manager interpolates ``slow`` instead of asking
    again."""
    table, timeout = {f"{m} {year}": v for m, v in rainfall}, outage(f"{slow} {year}", calls=2)

    def monthly_rainfall(station: str, month: str) -> str:
        if timeout(month):
            raise TimeoutError(f"monthly_rainfall: the climate archive query for {station}, {month} timed out")
        return f"rainfall {station}, {month}: {table.get(month, 0.0)} mm"

    tool = make_tool("monthly_rainfall", "The total rainfall of a weather station in a month, from the climate "
                     "archive.", {"station": string("the station"), "month": string("the month, e.g. 'May 2023'")},
                     "string", monthly_rainfall, flaky=True)
    worker = tool_agent(_climate_agent, [tool], "climate_agent", max_steps=4,
                        description="Reads monthly station data from the climate archive.")
    return code_agent(_rainfall_manager(planted), [], "manager", max_steps=len(rainfall) + 4, managed=[worker])


# ------------------------------------------------------------------------------------ a derailed opening plan


def _fiscal_plan(task: str, planted: bool) -> str:
    gym = re.search(r"did the (\w+) gym", task)
    where = gym.group(1) if gym else "?"
    if planted:
        year = re.search(r"fiscal year (\d{4})", task)
        y = year.group(1) if year else "?"
        quarters = [f"{y}-Q{q}" for q in range(1, 5)]
        given = f"- The gym is {where}; the year is {y}."
    else:
        span = re.search(r"\(April (\d{4}) to March (\d{4})\)", task)
        start, end = span.groups() if span else ("?", "?")
        quarters = [f"{start}-Q2", f"{start}-Q3", f"{start}-Q4", f"{end}-Q1"]
        given = f"- The gym is {where}; the fiscal year runs from April {start} to March {end}."
    return ("## 1. Facts survey\n### 1.1. Facts given in the task\n" + given + "\n"
            f"### 1.2. Facts to look up\n- The new memberships {where} sold in each of the four quarters.\n"
            "### 1.3. Facts to derive\n- Their sum.\n\n## 2. Plan\n"
            f"1. Fetch {where}'s new memberships for {', '.join(quarters[:3])} and {quarters[3]} with "
            "quarterly_signups, one quarter at a time.\n"
            "2. Add up the four quarters.\n3. Report the sum as 'MEMBERS: <n>'.\n")


def _fiscal_analyst(planted: bool) -> Callable[[ScriptedRequest], str]:
    def policy(request: ScriptedRequest) -> str:
        if request.is_planning:
            return _fiscal_plan(planning_task(request), planted) + "<end_plan>"
        if request.is_final_summary:
            return "I could not finish."
        step = re.search(r"Fetch (\w+)'s new memberships for (.+?) with quarterly_signups", written_plan(request))
        if step is None:
            return code_reply("the plan names no quarters.", "final_answer('no plan')")
        gym, quarters = step.group(1), re.findall(r"\d{4}-Q\d", step.group(2))
        got = {m.group(1): int(m.group(2)) for o in ok(request)
               for m in re.finditer(r"new memberships of \w+ in (\d{4}-Q\d): (\d+)", o)}
        missing = [q for q in quarters if q not in got]
        if not missing:
            values = ", ".join(str(got[q]) for q in quarters)
            return code_reply("steps 2 and 3: add up the quarters and report.",
                              f"signups = [{values}]\nfinal_answer(f'MEMBERS: {{sum(signups)}}')")
        if errors(request) >= 4:
            return code_reply("the membership service is down.", "final_answer('the service is down')")
        quarter = missing[0]
        thought = "the call failed; try again." if last_is_error(request) else f"step 1 of the plan: {quarter}."
        return code_reply(thought, f"signups_{quarter.replace('-', '_').lower()} = quarterly_signups(gym='{gym}', "
                                   f"quarter='{quarter}')\nprint(signups_{quarter.replace('-', '_').lower()})")

    return policy


def build_derail_fiscal(planted: bool, *, signups: Sequence[tuple[str, int]] = (
        ("2023-Q1", 412), ("2023-Q2", 365), ("2023-Q3", 298), ("2023-Q4", 240), ("2024-Q1", 455))) -> Any:
    """CodeAgent with an opening plan; planted: the plan sums the calendar year's quarters, not the fiscal year's."""
    table = dict(signups)
    tool = make_tool("quarterly_signups", "The new memberships a gym sold in a quarter.",
                     {"gym": string("the gym"), "quarter": string("the quarter, e.g. '2024-Q3'")}, "string",
                     lambda gym, quarter: f"new memberships of {gym} in {quarter}: {table.get(quarter, 0)}",
                     flaky=True)
    agent = code_agent(_fiscal_analyst(planted), [tool], "analyst", max_steps=8)
    agent.planning_interval = 10  # one opening plan (smolagents plans at step 1, then every 10 steps)
    return agent


def _next_month(month: str) -> str:
    return MONTHS[(MONTHS.index(month) + 1) % 12] if month in MONTHS else "?"


def _billing_brief(task: str, planted: bool) -> str:
    tariff = re.search(r"first (\d+) m³ of a month cost ([\d.]+) dollars each and every further m³ costs ([\d.]+) "
                       r"dollars", task)
    limit, low, high = tariff.groups() if tariff else ("?", "?", "?")
    if planted:
        example = re.search(r"a household that used (\d+) m³", task)
        used = int(example.group(1)) if example else 0
        return (f"Work out the two-tier water bill for a usage of {used} m³: 1. multiply the first {limit} m³ by "
                f"{low} dollars; 2. multiply the remaining {used - int(limit)} m³ by {high} dollars; 3. add the two "
                "amounts and reply 'BILL: <dollars>'.")
    asked = re.search(r"household (H-\d+)'s bill for (\w+)", task)
    house, month = asked.groups() if asked else ("?", "?")
    return (f"Work out household {house}'s water bill for {month}: 1. read {house}'s meter on {month} 1 and on "
            f"{_next_month(month)} 1 with get_reading; the usage is the difference; 2. multiply the first {limit} m³ "
            f"by {low} dollars and the rest by {high} dollars; 3. add the two amounts and reply 'BILL: <dollars>'.")


def _usage(request: ScriptedRequest, brief: str) -> int | Call:
    """The m³ the brief is about: given, or the difference of two meter readings (the next reading to fetch)."""
    given = re.search(r"usage of (\d+) m³", brief)
    if given:
        return int(given.group(1))
    meter = re.search(r"read (H-\d+)'s meter on (\w+ \d+) and on (\w+ \d+)", brief)
    house, start, end = meter.groups() if meter else ("?", "?", "?")
    read = {m.group(1): int(m.group(2)) for o in ok(request)
            for m in re.finditer(r"meter of H-\d+ on (\w+ \d+): (\d+) m³", o)}
    for date in (start, end):
        if date not in read:
            return Call("get_reading", {"household": house, "date": date})
    return read[end] - read[start]


def _billing_agent(request: ScriptedRequest) -> Reply:
    if request.is_final_summary:
        return "no bill"
    if errors(request) >= 4:
        return [Call("final_answer", {"answer": "the billing tools are down"})]
    brief = request.task
    total = find(request, r"sum: ([\d.]+)")
    if total:
        return [Call("final_answer", {"answer": f"BILL: {float(total.group(1)):.2f}"})]
    usage = _usage(request, brief)
    if isinstance(usage, Call):
        return [usage]
    tier = re.search(r"first (\d+) m³ by ([\d.]+) dollars", brief)
    rest = re.search(r"(?:remaining \d+ m³|rest) by ([\d.]+) dollars", brief)
    limit, low = (int(tier.group(1)), float(tier.group(2))) if tier else (0, 0.0)
    high = float(rest.group(1)) if rest else 0.0
    products = [float(m.group(1)) for o in ok(request) for m in re.finditer(r"product: ([\d.]+)", o)]
    if len(products) >= 2:
        return [Call("add", {"numbers": products[:2]})]
    if products:
        return [Call("multiply", {"a": max(0, usage - limit), "b": high})]
    return [Call("multiply", {"a": min(usage, limit), "b": low})]


def _billing_manager(planted: bool) -> Callable[[ScriptedRequest], str]:
    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        reports = managed_answers(request, "billing_agent")
        if reports:
            bill = re.search(r"BILL: ([\d.]+)", reports[-1])
            answer = f"BILL: {bill.group(1)}" if bill else "no bill"
            return code_reply("relay the billing agent's answer.", f"final_answer('{answer}')")
        brief = _billing_brief(request.task, planted)
        return code_reply("hand the bill to the billing agent with step-by-step instructions.",
                          f"bill = billing_agent(task={brief!r})\nprint(bill)")

    return manager


def build_derail_example(planted: bool, *, readings: Sequence[tuple[str, int]] = (
        ("March 1", 1203), ("April 1", 1221))) -> Any:
    """The manager delegates the bill once to ``billing_agent``; planted: the delegation works out the task's
    worked example instead of the household's bill."""
    table = dict(readings)
    reading = make_tool("get_reading", "A household's water meter reading on a date, in m³.",
                        {"household": string("the household id"), "date": string("the date, e.g. 'May 1'")},
                        "string", lambda household, date: f"meter of {household} on {date}: {table.get(date, 0)} m³",
                        flaky=True)
    multiply = make_tool("multiply", "Multiply two numbers.", {"a": number("first factor"),
                                                                "b": number("second factor")}, "string",
                         lambda a, b: f"product: {round(float(a) * float(b), 2):g}", flaky=True)
    add = make_tool("add", "Add up numbers.", {"numbers": {"type": "array", "description": "the numbers"}},
                    "string", lambda numbers: f"sum: {round(sum(float(n) for n in numbers), 2):g}")
    worker = tool_agent(_billing_agent, [reading, multiply, add], "billing_agent", max_steps=9,
                        description="Has the meter readings and a calculator.")
    return code_agent(_billing_manager(planted), [], "manager", max_steps=3, managed=[worker])


BUILDERS: dict[str, Callable[..., Any]] = {
    "fabricated_meters": build_fabricated_meters,
    "fabricated_rainfall": build_fabricated_rainfall,
    "derail_fiscal": build_derail_fiscal,
    "derail_example": build_derail_example,
}
