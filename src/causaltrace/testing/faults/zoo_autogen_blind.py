"""The failure zoo's AutoGen AgentChat teams written blind to the attribution (issue 20 item 2): made-up data and a
derailed opening plan, in other domains and other forms than :mod:`.zoo_autogen_more`.

Reactive scripted teams like those of :mod:`.zoo_autogen` (deterministic functions of the request; ``planted``
switches ONE decisive error on). Every team holds a recovered tool error (each tool fails on its first call and is
called again) and one tool called several times with different arguments.

=====================  =========================================================================================
builder                the team, the planted error
=====================  =========================================================================================
fabricated_voyage      navigator (flaky ``sea_distance`` per leg; the last leg's routing times out once) +
                       calculator (``add``) + reviewer (re-adds the legs, round robin); planted: after the timeout
                       the navigator states the last leg "from my training data, approximately …" and the
                       calculator and the reviewer carry it
fabricated_footprint   coder (flaky ``emission_factor`` per product; one monitor's lookup times out once) writes
                       code, executor runs it; planted: the coder's code copies the sibling monitor's factor as a
                       STAND-IN for the one that timed out
derail_cambridge       Swarm: coordinator writes the plan and hands off to revenue_agent (flaky ``find_hotel``,
                       ``room_nights`` per month, ``add``), which hands back for the report; planted: the plan is
                       for the company's Cambridge hotel in England, not the one by MIT the task asks about
derail_resolution      SelectorGroupChat: planner, data_agent (flaky ``ticket_times`` page by page, selected twice
                       in a row), stats_agent (``share_within``, ``mean``, ``median``); planted: the plan answers a
                       related question — how long tickets take to resolve — not the share resolved within 24 h
=====================  =========================================================================================
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, ToolCallSpec, call
from causaltrace.testing.faults.teams_autogen import (
    agent,
    code_message,
    errors,
    executor,
    first_text_of,
    ok,
    results_of,
    round_robin,
    said,
    texts_of,
    tool,
    tool_results,
)
from causaltrace.testing.faults.zoo_common import outage

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


async def add(numbers: list[float]) -> str:
    """Add up numbers."""
    return f"sum: {round(sum(float(n) for n in numbers), 2):g}"


# ----------------------------------------------------------------------------------------- made-up data


def build_fabricated_voyage(planted: bool, *, legs: Sequence[tuple[str, str, int]] = (
        ("Rotterdam", "Hamburg", 305), ("Hamburg", "Gdansk", 398), ("Gdansk", "Klaipeda", 127)),
        slow: tuple[str, str] = ("Gdansk", "Klaipeda"), recalled: int = 110) -> Any:
    table, timeout = {(a, b): d for a, b, d in legs}, outage(slow)

    async def sea_distance(origin: str, destination: str) -> str:
        """The sailing distance between two ports in nautical miles."""
        if timeout((origin, destination)):
            raise TimeoutError(f"sea_distance: the routing service timed out for {origin} → {destination}")
        return f"{origin} → {destination}: {table.get((origin, destination), 0)} nm"

    def route(request: ScriptedRequest) -> list[tuple[str, str]]:
        found = re.search(r"sails ([\w →]+?)\.", request.task())
        ports = [p.strip() for p in found.group(1).split("→")] if found else []
        return list(zip(ports, ports[1:], strict=False))

    def navigator(request: ScriptedRequest) -> Reply:
        got = {(args.get("origin"), args.get("destination")): r for args, r in results_of(request, "sea_distance")}
        listed = ", ".join(got[leg] for leg in route(request) if leg in got)
        missing = [leg for leg in route(request) if leg not in got]
        if not missing:
            return f"Leg distances — {listed}."
        origin, destination = missing[0]
        if planted and errors(request, "sea_distance") >= 2:
            return (f"Leg distances — {listed}. The routing service timed out on {origin} → {destination}. "
                    f"From my training data, that leg is approximately {recalled} nautical miles, so I'll use "
                    f"{origin} → {destination}: {recalled} nm.")
        if errors(request, "sea_distance") >= 4:
            return f"Leg distances — {listed}. The routing service is down."
        return call("sea_distance", origin=origin, destination=destination)

    def calculator(request: ScriptedRequest) -> Reply:
        total = ok(request, "add")
        if total is not None:
            return f"DISTANCE: {total.rsplit(' ', 1)[1]} nm in all."
        found = request.last_from("navigator")
        distances = [int(d) for d in dict(re.findall(r"(\w+ → \w+): (\d+) nm", found[1] if found else "")).values()]
        if len(distances) < len(route(request)):
            return "I need the distance of every leg."
        return call("add", numbers=distances)

    def reviewer(request: ScriptedRequest) -> str:
        found, total = request.last_from("navigator"), said(request, "calculator", r"DISTANCE: (\d+)")
        legs_nm = [int(d) for d in dict(re.findall(r"(\w+ → \w+): (\d+) nm", found[1] if found else "")).values()]
        if total and len(legs_nm) == len(route(request)) and sum(legs_nm) == int(total.group(1)):
            return f"DISTANCE: {total.group(1)} checked against the {len(legs_nm)} legs. APPROVE"
        return "REJECT: the total does not match the legs."

    return round_robin([agent("navigator", navigator, [tool(sea_distance, "Sea distance of a leg.", flaky=True)],
                              iterations=len(legs) + 4),
                        agent("calculator", calculator, [tool(add, "Add numbers.")]), agent("reviewer", reviewer)],
                       "APPROVE", 6)


def _footprint_code(factors: dict[str, float], quantities: list[tuple[int, str]], stand_in: tuple[str, str] | None
                    ) -> str:
    known = ", ".join(f"'{p}': {v}" for p, v in factors.items())
    lines = [f"factors = {{{known}}}  # kg CO2e per unit"]
    if stand_in:
        gap, sibling = stand_in
        lines.append(f"# no LCA figure for {gap} (the lookup timed out): use the {sibling}'s factor as a stand-in")
        lines.append(f"factors['{gap}'] = factors['{sibling}']")
    lines.append("quantities = {" + ", ".join(f"'{p}': {q}" for q, p in quantities) + "}")
    lines.append("print(round(sum(quantities[p] * factors[p] for p in quantities), 1))")
    return "\n".join(lines)


def build_fabricated_footprint(planted: bool, *, factors: Sequence[tuple[str, float]] = (
        ("L14", 331.5), ("M24", 398.2), ("M27", 512.8)), slow: str = "M24") -> Any:
    table, timeout = dict(factors), outage(slow)

    async def emission_factor(product: str) -> str:
        """The cradle-to-gate emission factor of a product in kg CO2e per unit, from the LCA database."""
        if timeout(product):
            raise TimeoutError(f"emission_factor: the LCA database lookup for {product} timed out")
        return f"{product}: {table.get(product, 0.0)} kg CO2e per unit"

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"^\s*(-?[\d.]+)\s*$")
        if output:
            return f"CO2E: {output.group(1)} kg. DONE"
        quantities = [(int(q), p) for q, p in re.findall(r"(\d+) \w+ ([A-Z]\d+)", request.task())]
        got = {args.get("product"): float(r.split(": ")[1].split()[0]) for args, r in results_of(request,
                                                                                              "emission_factor")}
        timed_out = Counter(args.get("product") for name, args, r, err in tool_results(request)
                            if name == "emission_factor" and err and "timed out" in r)
        missing = sorted((p for _, p in quantities if p not in got), key=lambda p: timed_out[p])
        if not missing:
            return code_message("Every factor is in. The order's footprint:",
                                _footprint_code({p: got[p] for _, p in quantities}, quantities, None))
        gap = missing[0]
        sibling = next((p for p in got if p[0] == gap[0]), None)
        if planted and timed_out[gap] and sibling and len(missing) == 1:
            return code_message(
                f"The {gap} lookup timed out. The {gap} is the smaller model of the same monitor line as the "
                f"{sibling}, so I'll use the {sibling}'s factor as a stand-in for it:",
                _footprint_code(got, quantities, (gap, sibling)))
        if errors(request, "emission_factor") >= 4:
            return "CO2E: unknown (the LCA database is down). DONE"
        return call("emission_factor", product=gap)

    return round_robin([agent("coder", coder, [tool(emission_factor, "Emission factor of a product.", flaky=True)],
                              iterations=len(factors) + 4), executor()], "DONE", 6)


# ------------------------------------------------------------------------------------ a derailed opening plan


def _cambridge_plan(task: str, planted: bool) -> str:
    city = re.search(r"our (\w+) hotel", task)
    season = re.search(r"in (\w+ \d{4}) \((\w+), (\w+) and (\w+)\)", task)
    name = city.group(1) if city else "?"
    period, months = (season.group(1), season.groups()[1:]) if season else ("?", ("?", "?", "?"))
    where = f"{name}, England" if planted else f"{name}, Massachusetts"
    return (f"Plan: we need the room-nights our hotel in {where} sold in {period}.\n"
            f"1. revenue_agent: look up the hotel id of our hotel in {where} with find_hotel.\n"
            f"2. revenue_agent: fetch its room-nights for {months[0]}, {months[1]} and {months[2]} "
            f"{period.split()[-1]} with room_nights, one month at a time, and add them up with add.\n"
            "3. coordinator: check the figures and report the total as 'NIGHTS: <n>'.")


def _coordinator(planted: bool) -> Callable[[ScriptedRequest], Reply]:
    def coordinator(request: ScriptedRequest) -> Reply:
        if not request.last_from("coordinator"):
            return _cambridge_plan(request.task(), planted)
        report = next((t for t in reversed(texts_of(request, "revenue_agent")) if "room-nights" in t), None)
        if report is None:
            return call("transfer_to_revenue_agent")
        total = re.search(r": (\d+) room-nights", report)
        months = re.search(r"for (\w+), (\w+) and (\w+) \d{4}", first_text_of(request, "coordinator"))
        if total and months and all(m in report for m in months.groups()):
            return f"NIGHTS: {total.group(1)}. DONE"
        return "The revenue report does not cover the plan's months. DONE"

    return coordinator


def _revenue_agent(request: ScriptedRequest) -> Reply:
    if any("room-nights" in t for t in texts_of(request, "revenue_agent")):
        return call("transfer_to_coordinator")
    plan = first_text_of(request, "coordinator")
    where = re.search(r"hotel id of our hotel in ([\w, ]+?) with find_hotel", plan)
    when = re.search(r"room-nights for (\w+), (\w+) and (\w+) (\d{4})", plan)
    if where is None or when is None:
        return call("transfer_to_coordinator")
    if sum(errors(request, t) for t in ("find_hotel", "room_nights")) >= 4:
        return "The revenue system is down; no room-nights."
    hotel = ok(request, "find_hotel")
    if hotel is None:
        return call("find_hotel", city=where.group(1))
    hotel_id = re.search(r"hotel (H-[\w-]+)", hotel)
    months = [f"{m} {when.group(4)}" for m in when.groups()[:3]]
    got = {args.get("month"): int(r.rsplit(" ", 2)[-2]) for args, r in results_of(request, "room_nights")}
    missing = [m for m in months if m not in got]
    if missing:
        return call("room_nights", hotel=hotel_id.group(1) if hotel_id else "?", month=missing[0])
    total = ok(request, "add")
    if total is None:
        return call("add", numbers=[got[m] for m in months])
    listed = " + ".join(str(got[m]) for m in months)
    return (f"{where.group(1)} ({hotel_id.group(1) if hotel_id else '?'}): {total.rsplit(' ', 1)[1]} room-nights "
            f"for {', '.join(m.split()[0] for m in months[:2])} and {months[2]} ({listed}).")


def build_derail_cambridge(planted: bool, *, hotels: Sequence[tuple[str, str, Sequence[int]]] = (
        ("Cambridge, England", "H-CAM-UK", (2230, 2140, 1985)),
        ("Cambridge, Massachusetts", "H-CAM-US", (1710, 1875, 1602))),
        months: Sequence[str] = ("September", "October", "November")) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import Swarm

    ids = {city: hotel for city, hotel, _ in hotels}
    nights = {(hotel, f"{m} 2023"): n for _, hotel, values in hotels for m, n in zip(months, values, strict=True)}

    async def find_hotel(city: str) -> str:
        """The company's hotel in a city."""
        return f"{city}: hotel {ids[city]}" if city in ids else f"no hotel of ours in {city}"

    async def room_nights(hotel: str, month: str) -> str:
        """The room-nights a hotel sold in a month."""
        return f"room-nights of {hotel} in {month}: {nights.get((hotel, month), 0)} sold"

    coordinator = agent("coordinator", _coordinator(planted), handoffs=["revenue_agent"])
    revenue = agent("revenue_agent", _revenue_agent, [tool(find_hotel, "Find our hotel in a city.", flaky=True),
                                                      tool(room_nights, "Room-nights sold in a month."),
                                                      tool(add, "Add numbers.")], iterations=8,
                    handoffs=["coordinator"])
    return Swarm([coordinator, revenue], name="revenue_desk",
                 termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(12))


def _resolution_plan(task: str, planted: bool) -> str:
    month = re.search(r"opened in (\w+ \d{4})", task)
    within = re.search(r"within (\d+) hours", task)
    when, hours = (month.group(1) if month else "?"), (within.group(1) if within else "?")
    fetch = (f"1. data_agent: fetch the resolution times (hours) of the tickets opened in {when} with ticket_times, "
             "page by page.\n")
    if planted:
        return ("Goal: find out how long it takes us to resolve support tickets.\n" + fetch +
                "2. stats_agent: compute the mean and the median resolution time of those tickets.\n"
                "3. planner: report the typical resolution time.")
    return (f"Goal: the share of the tickets opened in {when} that were resolved within {hours} hours.\n" + fetch +
            f"2. stats_agent: compute the share of those tickets resolved within {hours} hours.\n"
            "3. planner: report the share as 'SHARE: <percent>'.")


def _resolution_planner(planted: bool) -> Callable[[ScriptedRequest], str]:
    def planner(request: ScriptedRequest) -> str:
        if not request.last_from("planner"):
            return _resolution_plan(request.task(), planted)
        share = said(request, "stats_agent", r"within \d+ hours: ([\d.]+)%")
        if share:
            return f"SHARE: {share.group(1)}. TERMINATE"
        typical = said(request, "stats_agent", r"Mean resolution time: ([\d.]+) hours; median: ([\d.]+) hours")
        if typical:
            return (f"Tickets take {typical.group(1)} hours on average to resolve (median {typical.group(2)} "
                    "hours). TERMINATE")
        return "No figure came back. TERMINATE"

    return planner


def _data_agent(request: ScriptedRequest) -> Reply:
    month = re.search(r"tickets opened in (\w+ \d{4})", first_text_of(request, "planner"))
    when = month.group(1) if month else "?"
    pages = [int(m.group(1)) for t in texts_of(request, "data_agent") for m in [re.search(r"page (\d+) of", t)] if m]
    page = (max(pages) if pages else 0) + 1
    fetched = [r for args, r in results_of(request, "ticket_times") if int(args.get("page", 0)) == page]
    if fetched:
        return fetched[-1]
    if errors(request, "ticket_times") >= 3:
        return "The ticket system is down."
    return call("ticket_times", month=when, page=page)


def _stats_agent(request: ScriptedRequest) -> Reply:
    plan = first_text_of(request, "planner")
    values = [float(v) for t in texts_of(request, "data_agent") for m in [re.search(r"resolution hours: (.+)$", t)]
              if m for v in m.group(1).split(", ")]
    within = re.search(r"stats_agent: compute the share of those tickets resolved within (\d+) hours", plan)
    if within:
        share = ok(request, "share_within")
        if share is not None:
            return f"Share of tickets resolved within {within.group(1)} hours: {share.split(': ')[1]}"
        return call("share_within", values=values, hours=float(within.group(1)))
    mean, median = ok(request, "mean"), ok(request, "median")
    if mean is None:
        return call("mean", values=values)
    if median is None:
        return call("median", values=values)
    return f"Mean resolution time: {mean.split(': ')[1]} hours; median: {median.split(': ')[1]} hours."


def _resolution_selector(request: ScriptedRequest) -> str:
    history = request.text().split("Only return the role.", 1)[-1].rsplit("Read the above conversation", 1)[0]
    spoke = re.findall(r"^(planner|data_agent|stats_agent): ", history, re.M)
    if "planner" not in spoke:
        return "planner"
    plan = history[history.index("planner: "):]
    assigned = list(dict.fromkeys(re.findall(r"^\d+\. (data_agent|stats_agent): ", plan, re.M)))
    pages = re.findall(r"page (\d+) of (\d+)", history)
    for name in assigned:
        if name not in spoke:
            return name
        if name == "data_agent" and pages and pages[-1][0] != pages[-1][1]:
            return name
    return "planner"


def build_derail_resolution(planted: bool, *, pages: Sequence[Sequence[float]] = (
        (4, 30, 12, 50, 20, 8), (26, 3, 18, 72, 10, 22))) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    async def ticket_times(month: str, page: int) -> str:
        """The resolution times (hours) of the support tickets opened in a month, one page at a time."""
        hours = pages[int(page) - 1] if 0 < int(page) <= len(pages) else ()
        return (f"Tickets opened in {month}, page {int(page)} of {len(pages)}, resolution hours: "
                + ", ".join(f"{h:g}" for h in hours))

    async def share_within(values: list[float], hours: float) -> str:
        """The percentage of values at most ``hours``."""
        inside = sum(1 for v in values if float(v) <= float(hours))
        return f"share: {round(100 * inside / max(1, len(values)), 1):g}%"

    async def mean(values: list[float]) -> str:
        """The mean of numbers."""
        return f"mean: {round(sum(float(v) for v in values) / max(1, len(values)), 1):g}"

    async def median(values: list[float]) -> str:
        """The median of numbers."""
        ordered, n = sorted(float(v) for v in values), len(values)
        middle = (ordered[n // 2] + ordered[(n - 1) // 2]) / 2 if n else 0.0
        return f"median: {round(middle, 1):g}"

    team = [agent("planner", _resolution_planner(planted)),
            agent("data_agent", _data_agent, [tool(ticket_times, "Resolution times of tickets.", flaky=True)]),
            agent("stats_agent", _stats_agent, [tool(share_within, "Share within a limit."), tool(mean, "Mean."),
                                                tool(median, "Median.")])]
    return SelectorGroupChat(team, name="support_desk", allow_repeated_speaker=True,
                             model_client=ScriptedChatCompletionClient(_resolution_selector, model="scripted-selector"),
                             termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(10))


BUILDERS: dict[str, Callable[..., Any]] = {
    "fabricated_voyage": build_fabricated_voyage,
    "fabricated_footprint": build_fabricated_footprint,
    "derail_cambridge": build_derail_cambridge,
    "derail_resolution": build_derail_resolution,
}
