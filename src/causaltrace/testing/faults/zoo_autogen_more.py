"""The failure zoo's AutoGen AgentChat teams, continued (issue 20 item 2): made-up data and a derailed opening plan.

Reactive scripted teams like those of :mod:`.zoo_autogen` (deterministic functions of the request; ``planted``
switches ONE decisive error on). Every team holds a recovered tool error (each tool fails on its first call and is
called again) and one tool called several times with different arguments; the derailed teams consult their
planner twice, and the selector team picks the same speaker twice in a row.

=================  =============================================================================================
builder            the team, the planted error
=================  =============================================================================================
fabricated_sales   fetcher (flaky ``get_sales`` per region; West times out once) + analyst (``add``); planted:
                   after the second failure the fetcher ASSUMES West's revenue and states it with the real two
fabricated_census  researcher (flaky ``web_search`` per city; the first query for Nice finds nothing) + calculator
                   (``add``); planted: the researcher uses a HYPOTHETICAL population for Nice instead of searching
                   again
fabricated_csv     coder (flaky ``download_file`` per month; the May file's connection resets once) writes code,
                   executor runs it; planted: the coder's code GENERATES a synthetic May series and computes the
                   growth on it
derail_keyerror    planner + engineer (flaky ``read_log``, ``describe_table``, ``count_orders``); planted: the
                   opening plan debugs the KeyError the task mentions in passing, not the shipped-orders count
derail_refund      SelectorGroupChat: planning_agent, support_agent (flaky ``search_tickets``, ``release_notes``,
                   ``list_refunds``), analyst_agent (``add``); planted: the plan investigates the customer's old
                   checkout crash (support_agent twice in a row) instead of totalling the refunds
derail_warehouse   lead + logistics (flaky ``get_deliveries``) + analyst (``mean``, ``count_over``), round robin;
                   planted: the lead's plan re-checks the Madrid average the task mentions, not Valencia's late
                   deliveries
=================  =============================================================================================
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
    first_text_of,
    ok,
    results_of,
    round_robin,
    said,
    texts_of,
    tool,
)
from causaltrace.testing.faults.zoo_common import outage

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


# ----------------------------------------------------------------------------------------- made-up data


def build_fabricated_sales(planted: bool, *, regions: Sequence[tuple[str, int]] = (
        ("North", 48200), ("South", 51750), ("West", 39900)), down: str = "West") -> Any:
    table, timeout = dict(regions), outage(down)
    names = [name for name, _ in regions]

    async def get_sales(region: str) -> str:
        """The Q3 revenue of a sales region in dollars."""
        if timeout(region):
            raise RuntimeError(f"get_sales: upstream timeout (504) while fetching region {region!r}")
        return f"Q3 revenue of {region}: {table.get(region, 0)} dollars"

    def fetcher(request: ScriptedRequest) -> Reply:
        got = {args.get("region"): int(re.search(r": (\d+) dollars", r).group(1))  # type: ignore[union-attr]
               for args, r in results_of(request, "get_sales")}
        missing = [name for name in names if name not in got]
        figures = ", ".join(f"{name}: {got[name]} dollars" for name in names if name in got)
        if not missing:
            return f"Q3 revenue by region — {figures}."
        if planted and errors(request, "get_sales") >= 2:
            guess = int(round(sum(got.values()) / max(1, len(got)), -3))
            gap = missing[0]
            return (f"Q3 revenue by region — {figures}. The sales service timed out for {gap}; assuming {gap} "
                    f"performed in line with the other regions, I'll take {gap}: {guess} dollars (their average, "
                    "rounded) so the total can go ahead.")
        if errors(request, "get_sales") >= 4:
            return f"Q3 revenue by region — {figures}. The sales service is down."
        return call("get_sales", region=missing[0])

    def analyst(request: ScriptedRequest) -> Reply:
        total = ok(request, "add")
        if total is not None:
            return f"TOTAL: {total.rsplit(' ', 1)[1]}. DONE"
        found = request.last_from("fetcher")
        values = re.findall(r"(\w+): (\d+) dollars", found[1] if found else "")
        if len(values) < len(names):
            return "I need the revenue of every region."
        return call("add", numbers=[int(v) for _, v in values])

    async def add(numbers: list[int]) -> str:
        """Add up numbers."""
        return f"sum: {sum(int(n) for n in numbers)}"

    return round_robin([agent("fetcher", fetcher, [tool(get_sales, "Q3 revenue of a region.", flaky=True)],
                              iterations=len(names) + 4),
                        agent("analyst", analyst, [tool(add, "Add numbers.")])], "DONE", 5)


def build_fabricated_census(planted: bool, *, cities: Sequence[tuple[str, int]] = (
        ("Lyon", 522250), ("Marseille", 873076), ("Nice", 348085)), sparse: str = "Nice",
        hypothetical: int = 350000) -> Any:
    names = [city for city, _ in cities]

    async def web_search(query: str) -> str:
        """Search the web."""
        for city, population in cities:
            if city in query and not (city == sparse and "INSEE" not in query):
                return f"{city} (commune) — population {population:,} (INSEE, 2021 census)"
        return f"No results found for '{query}'."

    def researcher(request: ScriptedRequest) -> Reply:
        results = results_of(request, "web_search")
        got = {m.group(1): m.group(2) for _, r in results
               for m in [re.search(r"(\w+) \(commune\) — population ([\d,]+)", r)] if m}
        lines = " ".join(f"{c}: {got[c]} inhabitants (INSEE, 2021 census)." for c in names if c in got)
        missing = [c for c in names if c not in got]
        if not missing:
            return lines
        city = missing[0]
        if any(city in args.get("query", "") and r.startswith("No results") for args, r in results):
            if planted:
                return (f"{lines} I couldn't find census data for {city}, so for the purposes of this calculation "
                        f"let's use a hypothetical population of {hypothetical:,} for {city}.")
            return call("web_search", query=f"{city} France population INSEE")
        if errors(request, "web_search") >= 3:
            return f"{lines} The search is down."
        return call("web_search", query=f"population of {city} latest census")

    async def add(numbers: list[int]) -> str:
        """Add up numbers."""
        return f"sum: {sum(int(n) for n in numbers)}"

    def calculator(request: ScriptedRequest) -> Reply:
        total = ok(request, "add")
        if total is not None:
            return f"TOTAL: {total.rsplit(' ', 1)[1]}. DONE"
        text = first_text_of(request, "researcher")
        values = [re.search(rf"{c}[^.]*?([\d,]{{5,}})", text) for c in names]
        if not all(values):
            return "I need every population."
        return call("add", numbers=[int(v.group(1).replace(",", "")) for v in values if v])

    return round_robin([agent("researcher", researcher, [tool(web_search, "Web search.", flaky=True)],
                              iterations=len(names) + 4),
                        agent("calculator", calculator, [tool(add, "Add numbers.")])], "DONE", 5)


def _visits(values: Sequence[int]) -> str:
    return "day,visitors\n" + "\n".join(f"{i},{v}" for i, v in enumerate(values, 1))


def build_fabricated_csv(planted: bool, *, files: Sequence[tuple[str, Sequence[int]]] = (
        ("april.csv", (1200, 1340, 1285, 1410, 1500, 1620, 1580)),
        ("may.csv", (1310, 1365, 1402, 1455, 1580, 1710, 1655))), broken: str = "may.csv") -> Any:
    table, reset = dict(files), outage(broken)

    async def download_file(url: str) -> str:
        """Download a text file."""
        name = url.rsplit("/", 1)[-1]
        if reset(name):
            raise ConnectionError(f"download_file: connection reset by peer while reading {url}")
        return _visits(table.get(name, ()))

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"^\s*(-?[\d.]+)\s*$")
        if output:
            return f"GROWTH: {output.group(1)}. DONE"
        urls = re.findall(r"https://\S+?\.csv", request.task())
        got = {args.get("url"): [int(v) for v in re.findall(r"^\d+,(\d+)$", r, re.M)]
               for args, r in results_of(request, "download_file")}
        missing = [u for u in urls if u not in got]
        first = got.get(urls[0], []) if urls else []
        if missing and planted and errors(request, "download_file") >= 2:
            return code_message(
                "The May file could not be downloaded (connection reset by peer). To keep the analysis moving, I'll "
                "generate a synthetic May series from April's level and compute the growth on it:",
                f"import random\n\nrandom.seed(42)\napril = {first}\n"
                "# synthetic stand-in for may.csv (the download failed): April's values with 0-10 % growth\n"
                "may = [round(v * random.uniform(1.0, 1.1)) for v in april]\n"
                "growth = sum(may) / len(may) - sum(april) / len(april)\nprint(round(growth, 1))")
        if missing and errors(request, "download_file") >= 4:
            return "GROWTH: unknown. DONE"
        if missing:
            return call("download_file", url=missing[0])
        return code_message("Both files are in. Here is the comparison:",
                            f"april = {got[urls[0]]}\nmay = {got[urls[1]]}\n"
                            "growth = sum(may) / len(may) - sum(april) / len(april)\nprint(round(growth, 1))")

    return round_robin([agent("coder", coder, [tool(download_file, "Download a file.", flaky=True)],
                              iterations=len(files) + 4), executor()], "DONE", 6)


# ------------------------------------------------------------------------------------ a derailed opening plan


def _keyerror_plan(task: str, planted: bool) -> str:
    if planted:
        error = re.search(r"the (\w+) job failed again last night with (KeyError: '(\w+)')", task)
        job, name, key = error.groups() if error else ("nightly", "the error", "?")
        return (f"Plan: the {job} job is failing with {name}, so let's find out why before anything else.\n"
                f"1. engineer: read the {job} job's log and locate the traceback of the {name}.\n"
                f"2. engineer: describe the orders table to check whether the {key} column was renamed or dropped.\n"
                "3. engineer: compare the key the job reads with the table's current columns and report the root "
                "cause and the fix.")
    asked = re.search(r"orders the (\w+) store shipped in (\w+)", task)
    store, month = asked.groups() if asked else ("?", "?")
    return (f"Plan: we need the number of orders the {store} store shipped in {month}.\n"
            f"1. engineer: count the orders of the {store} store with status shipped in {month} using count_orders.\n"
            "2. engineer: report the count as 'SHIPPED: <n>'.")


def _keyerror_engineer(request: ScriptedRequest) -> Reply:
    plan = first_text_of(request, "planner")
    if sum(errors(request, t) for t in ("read_log", "describe_table", "count_orders")) >= 4:
        return "The tools are down. DONE"
    count = re.search(r"count the orders of the (\w+) store with status (\w+) in (\w+)", plan)
    if count:
        done = ok(request, "count_orders")
        if done is not None:
            return f"SHIPPED: {done.rsplit(' ', 1)[1]}. DONE"
        store, status, month = count.groups()
        return call("count_orders", store=store, month=month, status=status)
    job = re.search(r"read the (\w+) job's log", plan)
    log = ok(request, "read_log")
    if job and log is None:
        return call("read_log", job=job.group(1))
    table = re.search(r"describe the (\w+) table", plan)
    columns = ok(request, "describe_table")
    if table and columns is None:
        return call("describe_table", table=table.group(1))
    key = re.search(r"KeyError: '(\w+)'", log or "")
    renamed = next((c for c in (columns or "").split(": ", 1)[-1].split(", ") if c.endswith("_id")
                    and c != "order_id"), "?")
    missing = key.group(1) if key else "?"
    return (f"Root cause: report.py reads row['{missing}'], but the orders table has no {missing} column any more "
            f"(it is {renamed} now). Fix: read '{renamed}' in report.py. DONE")


def build_derail_keyerror(planted: bool, *, shipped: int = 57) -> Any:
    async def read_log(job: str) -> str:
        """The last log of a scheduled job."""
        return (f"{job} 02:00:13 ERROR Traceback (most recent call last): File \"report.py\", line 88, in build: "
                "shop = row['store_id'] KeyError: 'store_id'")

    async def describe_table(table: str) -> str:
        """The columns of a database table."""
        return f"{table} columns: order_id, shop_id, status, shipped_at, total"

    async def count_orders(store: str, month: str, status: str) -> str:
        """Count the orders of a store in a month with a status."""
        return f"orders of {store} in {month} with status {status}: {shipped if status == 'shipped' else 0}"

    def planner(request: ScriptedRequest) -> str:
        if request.last_from("planner"):
            return "The plan stands; engineer, please carry on."
        return _keyerror_plan(request.task(), planted)

    tools = [tool(read_log, "Read a job's log.", flaky=True), tool(describe_table, "Describe a table.", flaky=True),
             tool(count_orders, "Count orders.", flaky=True)]
    return round_robin([agent("planner", planner), agent("engineer", _keyerror_engineer, tools, iterations=8)],
                       "DONE", 5)


def _refund_plan(task: str, planted: bool) -> str:
    customer = re.search(r"[Cc]ustomer (C-\d+)", task)
    who = customer.group(1) if customer else "the customer"
    if planted:
        return (f"Let me break this down. Customer {who} reported that the app crashes at checkout on Android, so we "
                "need to find out what caused it and whether it is fixed.\n"
                f"1. support_agent: search {who}'s tickets for the checkout crash and find the affected app version "
                "and the error.\n"
                "2. support_agent: look up the release notes for the version that fixed the crash.\n"
                "3. I'll summarise the cause and the fix once the support agent has reported.")
    month = re.search(r"refunded to customer C-\d+ in (\w+)", task)
    when = month.group(1) if month else "the month"
    return (f"Let me break this down. We need the total refunded to customer {who} in {when}.\n"
            f"1. support_agent: list the refunds issued to customer {who} in {when}.\n"
            "2. analyst_agent: add up the amounts of those refunds.\n"
            "3. I'll report the total as 'REFUNDED: <dollars>'.")


#: a plan line that assigns a step to an agent ("1. support_agent: …")
_ASSIGNED = r"^\d+\. (?:support_agent|analyst_agent): "


def _refund_planner(planted: bool) -> Callable[[ScriptedRequest], str]:
    def planning_agent(request: ScriptedRequest) -> str:
        if not request.last_from("planning_agent"):
            return _refund_plan(request.task(), planted)
        own = texts_of(request, "planning_agent")
        if len(own) == 1 and re.search(r"refunded to customer C-\d+ in \w+", own[0]) and not re.search(
                _ASSIGNED, own[0], re.M):
            # its opening stated the request but assigned no step: it plans that request now, as the fixed planner
            # does from the task (neither the derailed nor the fixed opening is such a message)
            return _refund_plan(own[0], False)
        total = said(request, "analyst_agent", r"add up to ([\d.]+) dollars")
        if total:
            return f"REFUNDED: {float(total.group(1)):.2f}. TERMINATE"
        reports = " ".join(texts_of(request, "support_agent")) or "no report."
        return f"Summary: {reports} TERMINATE"

    return planning_agent


def _support_agent(request: ScriptedRequest) -> Reply:
    plans = [t for t in texts_of(request, "planning_agent") if re.search(_ASSIGNED, t, re.M)]
    plan = plans[0] if plans else first_text_of(request, "planning_agent")  # the first plan that assigns steps
    mine = re.findall(r"^\d+\. support_agent: (.+)$", plan, re.M)
    step = mine[min(len(texts_of(request, "support_agent")), len(mine) - 1)] if mine else ""
    who = re.search(r"(C-\d+)", plan)
    customer = who.group(1) if who else "?"
    if "list the refunds" in step:
        listed = ok(request, "list_refunds")
        if listed is not None:
            return listed
        month = re.search(r" in (\w+)\.?$", step)
        return call("list_refunds", customer=customer, month=month.group(1) if month else "?")
    ticket = re.search(r"(T-\d+) \(C-\d+\): app ([\d.]+) (.+?); ", ok(request, "search_tickets") or "")
    if ticket is None:
        return call("search_tickets", customer=customer, query="checkout crash Android")
    if "release notes" in step:
        notes = ok(request, "release_notes")
        if notes is None:
            return call("release_notes", after=ticket.group(2))
        version = re.search(r"release ([\d.]+)", notes)
        return f"The crash was fixed in release {version.group(1) if version else '?'}."
    return f"Ticket {ticket.group(1)}: app {ticket.group(2)} {ticket.group(3)}."


def build_derail_refund(planted: bool, *, refunds: Sequence[tuple[str, float]] = (
        ("R-19", 25.0), ("R-23", 14.5), ("R-31", 60.0))) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    async def search_tickets(customer: str, query: str) -> str:
        """Search a customer's support tickets."""
        return (f"T-881 ({customer}): app 5.3.0 on Android crashes at checkout (NullPointerException in "
                "PaymentSheet); status: answered")

    async def release_notes(after: str) -> str:
        """Release notes of the app after a version."""
        return "release 5.3.1: fixes a crash in PaymentSheet at checkout on Android"

    async def list_refunds(customer: str, month: str) -> str:
        """The refunds issued to a customer in a month."""
        return f"refunds of {customer} in {month}: " + ", ".join(f"{r} {a:.2f}" for r, a in refunds)

    async def add(numbers: list[float]) -> str:
        """Add up numbers."""
        return f"sum: {sum(float(n) for n in numbers):.2f}"

    def analyst_agent(request: ScriptedRequest) -> Reply:
        total = ok(request, "add")
        if total is not None:
            return f"The refunds add up to {total.rsplit(' ', 1)[1]} dollars."
        found = request.last_from("support_agent")
        amounts = re.findall(r"R-\d+ ([\d.]+)", found[1] if found else "")
        return call("add", numbers=[float(a) for a in amounts]) if amounts else "I see no refunds to add."

    def selector(request: ScriptedRequest) -> str:
        history = request.text().split("Only return the role.", 1)[-1].rsplit("Read the above conversation", 1)[0]
        spoke = re.findall(r"^(planning_agent|support_agent|analyst_agent): ", history, re.M)
        if "planning_agent" not in spoke:
            return "planning_agent"
        plan = history[history.index("planning_agent: "):]
        assigned = re.findall(r"^\d+\. (support_agent|analyst_agent): ", plan, re.M)
        done = len([s for s in spoke[spoke.index("planning_agent") + 1:] if s != "planning_agent"])
        return assigned[done] if done < len(assigned) else "planning_agent"

    team = [agent("planning_agent", _refund_planner(planted)),
            agent("support_agent", _support_agent, [tool(search_tickets, "Search tickets.", flaky=True),
                                                    tool(release_notes, "Release notes.", flaky=True),
                                                    tool(list_refunds, "List refunds.", flaky=True)], iterations=6),
            agent("analyst_agent", analyst_agent, [tool(add, "Add numbers.")])]
    return SelectorGroupChat(team, name="desk", allow_repeated_speaker=True,
                             model_client=ScriptedChatCompletionClient(selector, model="scripted-selector"),
                             termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(8))


def _warehouse_plan(task: str, planted: bool) -> str:
    if planted:
        checked = re.search(r"average delivery time of the (\w+) warehouse \(([\d.]+) days\)", task)
        where, figure = checked.groups() if checked else ("?", "?")
        return (f"Before anything else, let's double-check the intern's figure for the {where} warehouse.\n"
                f"1. logistics: fetch last week's delivery times of the {where} warehouse.\n"
                "2. analyst: compute the average delivery time in days.\n"
                f"3. lead: compare it with the intern's {figure} days and report the result.")
    asked = re.search(r"more than (\d+) days — of the (\w+) warehouse", task)
    limit, where = asked.groups() if asked else ("?", "?")
    return (f"We need last week's late deliveries of the {where} warehouse.\n"
            f"1. logistics: fetch last week's delivery times of the {where} warehouse.\n"
            f"2. analyst: count the deliveries that took more than {limit} days.\n"
            "3. lead: report the count as 'LATE: <n>'.")


def build_derail_warehouse(planted: bool, *, times: Sequence[tuple[str, Sequence[float]]] = (
        ("Madrid", (3, 5, 4, 6, 2, 4.5)), ("Valencia", (4, 7, 3, 6, 5, 8, 2)))) -> Any:
    table = dict(times)

    async def get_deliveries(warehouse: str) -> str:
        """Last week's delivery times of a warehouse."""
        return f"deliveries of {warehouse} last week (days): " + ", ".join(f"{t:g}" for t in table.get(warehouse, ()))

    async def mean(values: list[float]) -> str:
        """The mean of numbers."""
        return f"mean: {round(sum(float(v) for v in values) / max(1, len(values)), 2):g}"

    async def count_over(values: list[float], limit: float) -> str:
        """How many numbers exceed a limit."""
        return f"count: {sum(1 for v in values if float(v) > float(limit))}"

    def lead(request: ScriptedRequest) -> str:
        if not request.last_from("lead"):
            return _warehouse_plan(request.task(), planted)
        plan, figure = first_text_of(request, "lead"), said(request, "analyst", r"([\d.]+)")
        value = figure.group(1) if figure else "?"
        if "count the deliveries" in plan:
            return f"LATE: {value}. DONE"
        where = re.search(r"times of the (\w+) warehouse", plan)
        intern = re.search(r"intern's ([\d.]+) days", plan)
        return (f"The {where.group(1) if where else '?'} warehouse's average delivery time last week was {value} days, "
                f"in line with the intern's {intern.group(1) if intern else '?'} days. DONE")

    def logistics(request: ScriptedRequest) -> Reply:
        fetched = ok(request, "get_deliveries")
        if fetched is not None:
            return fetched
        plan = first_text_of(request, "lead")
        where = re.search(r"logistics: fetch last week's delivery times of the (\w+) warehouse", plan)
        return call("get_deliveries", warehouse=where.group(1) if where else "?")

    def analyst(request: ScriptedRequest) -> Reply:
        result = ok(request, "count_over") or ok(request, "mean")
        if result is not None:
            return f"Result — {result}"
        found = request.last_from("logistics")
        values = [float(v) for v in re.findall(r"[\d.]+", (found[1] if found else "").split(": ", 1)[-1])]
        over = re.search(r"analyst: count the deliveries that took more than (\d+) days",
                         first_text_of(request, "lead"))
        if over:
            return call("count_over", values=values, limit=float(over.group(1)))
        return call("mean", values=values)

    return round_robin([agent("lead", lead),
                        agent("logistics", logistics, [tool(get_deliveries, "Delivery times.", flaky=True)]),
                        agent("analyst", analyst, [tool(mean, "Mean."), tool(count_over, "Count over a limit.")])],
                       "DONE", 6)


BUILDERS: dict[str, Callable[..., Any]] = {
    "fabricated_sales": build_fabricated_sales,
    "fabricated_census": build_fabricated_census,
    "fabricated_csv": build_fabricated_csv,
    "derail_keyerror": build_derail_keyerror,
    "derail_refund": build_derail_refund,
    "derail_warehouse": build_derail_warehouse,
}
