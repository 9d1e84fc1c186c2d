"""The failure zoo's smolagents teams, continued (issue 20 item 2): made-up data and a derailed opening plan.

Reactive scripted teams like those of :mod:`.zoo_smolagents` (deterministic functions of the request; ``planted``
switches ONE decisive error on). Every team holds a recovered tool error (each tool object fails on its first call
and is retried) and, where the team allows, one tool or managed agent called several times with different
arguments.

=====================  =========================================================================================
builder                the team, the planted error
=====================  =========================================================================================
fabricated_sales       CodeAgent ``analyst``: ``get_sales`` per region (flaky; times out once for West); planted:
                       after the second failure it writes code that SIMULATES West's monthly figures, the sum
                       code adds them faithfully
fabricated_census      manager CodeAgent asks managed ``researcher`` (flaky ``web_search``) once per city; the
                       first query for Nice finds nothing; planted: the researcher answers "from what I know,
                       roughly …" instead of searching again, the manager adds that figure
fabricated_apikey      CodeAgent ``quant``: ``get_secret`` (flaky) for the API key, then ``price_history``
                       (flaky); planted: when the secret store fails it calls the API with the public ``demo``
                       key, which serves the API's sample data, and averages those closes
derail_keyerror        CodeAgent ``engineer`` with an opening planning step; the task mentions an unrelated
                       KeyError of a nightly job; planted: the plan debugs that error (read the log, describe the
                       table, report a root cause) instead of counting the shipped orders the task asks for
derail_refund          manager ToolCallingAgent delegates to ``support_agent`` (flaky ``search_tickets``,
                       ``release_notes``, ``list_refunds``, ``add``); planted: its first delegation is a plan to
                       investigate the customer's old checkout crash, not to total the customer's refunds
derail_warehouse       manager ToolCallingAgent with an opening planning step and managed ``logistics_agent``
                       (flaky ``get_deliveries``, ``mean``, ``count_over``), asked twice; planted: the plan re-checks
                       the Madrid average the task mentions instead of counting Valencia's late deliveries
=====================  =========================================================================================
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
    is_error,
    last_is_error,
    make_tool,
    managed_answers,
    number,
    planning_task,
    string,
    tool_agent,
    written_plan,
)
from causaltrace.testing.faults.zoo_common import outage
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]


# ----------------------------------------------------------------------------------------- made-up data


def build_fabricated_sales(planted: bool, *, regions: Sequence[tuple[str, int]] = (
        ("North", 48200), ("South", 51750), ("West", 39900)), down: str = "West",
        sample: Sequence[int] = (15400, 16100, 15900)) -> Any:
    """``get_sales`` per region (the first call fails, region ``down`` times out once); planted: after the second
    failure the analyst simulates ``down``'s quarter from ``sample`` monthly figures."""
    table, timeout = dict(regions), outage(down)

    def get_sales(region: str) -> str:
        if timeout(region):
            raise RuntimeError(f"get_sales: upstream timeout (504) while fetching region {region!r}")
        return f"Q3 revenue of {region}: {table.get(region, 0)} dollars"

    tool = make_tool("get_sales", "The Q3 revenue of a sales region in dollars.", {"region": string("the region")},
                     "string", get_sales, flaky=True)
    names = [name for name, _ in regions]

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "I could not finish the report."
        got = {m.group(1): int(m.group(2)) for o in request.observations if not is_error(o)
               for m in re.finditer(r"Q3 revenue of (\w+)(?: \(simulated\))?: (\d+) dollars", o)}
        missing = [name for name in names if name not in got]
        if not missing:
            values = " + ".join(str(got[name]) for name in names)
            return code_reply(f"I have the Q3 revenue of all {len(names)} regions; add them up.",
                              f"total = {values}\nfinal_answer(f'TOTAL: {{total}}')")
        region = missing[0]
        var = region.lower()
        if planted and errors(request) >= 2:
            months = ", ".join(str(v) for v in sample)
            return code_reply(
                f"get_sales failed again, this time with a 504 timeout for {region}. Rather than stall the report, "
                f"I'll simulate {region}'s Q3 revenue with sample monthly figures in the same range as the other "
                "regions and carry on.",
                f"# get_sales keeps failing for {region}: simulate its quarter from sample monthly figures\n"
                f"{var}_monthly = [{months}]  # sample July, August, September revenue\n"
                f"{var} = sum({var}_monthly)\n"
                f"print(f'Q3 revenue of {region} (simulated): {{{var}}} dollars')")
        if errors(request) >= 4:
            return code_reply("the sales service is down.", "final_answer('the sales service is down')")
        thought = (f"the call failed ({'timeout' if 'timeout' in request.observations[-1] else 'unavailable'}); "
                   "try again." if last_is_error(request) else f"fetch the Q3 revenue of {region}.")
        return code_reply(thought, f"{var} = get_sales(region='{region}')\nprint({var})")

    return code_agent(policy, [tool], "analyst", max_steps=len(names) + 4)


def _census_researcher(planted: bool, recalled: int) -> Callable[[ScriptedRequest], Reply]:
    def researcher(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no population"
        asked = re.search(r"population of (\w+)", request.task)
        city = asked.group(1) if asked else "?"
        found = find(request, rf"{city} \(commune\) — population ([\d,]+)")
        if found:
            return [Call("final_answer", {"answer": f"{city} has {found.group(1)} inhabitants (INSEE, 2021 "
                                                    "census)."})]
        if any("No results found" in o for o in request.observations):
            if planted:
                return [Call("final_answer", {"answer": (
                    f"The search came back empty for {city}, so I can't cite a source, but from what I know "
                    f"{city} has roughly {recalled:,} inhabitants.")})]
            return [Call("web_search", {"query": f"{city} France population INSEE"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("web_search", {"query": f"population of {city} latest census"})]

    return researcher


def build_fabricated_census(planted: bool, *, cities: Sequence[tuple[str, int]] = (
        ("Lyon", 522250), ("Marseille", 873076), ("Nice", 348085)), sparse: str = "Nice",
        recalled: int = 340000) -> Any:
    """The manager asks ``researcher`` (flaky ``web_search``) for each city's population, then adds them; the first
    query for ``sparse`` finds nothing; planted: the researcher states a figure from memory instead."""

    def web_search(query: str) -> str:
        for city, population in cities:
            if city in query and not (city == sparse and "INSEE" not in query):
                return f"{city} (commune) — population {population:,} (INSEE, 2021 census)"
        return f"No results found for '{query}'."

    tool = make_tool("web_search", "Search the web.", {"query": string("the query")}, "string", web_search,
                     flaky=True)
    worker = tool_agent(_census_researcher(planted, recalled), [tool], "researcher", max_steps=5,
                        description="Looks facts up on the web.")
    names = [city for city, _ in cities]

    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        reports = managed_answers(request, "researcher")
        if len(reports) < len(names):
            city = names[len(reports)]
            return code_reply(f"ask the researcher for the population of {city}.",
                              f'{city.lower()} = researcher(task="What is the population of {city} according to '
                              f'the latest census?")\nprint({city.lower()})')
        values = [re.search(r"([\d,]{5,})", text) for text in reports]
        summed = " + ".join(m.group(1).replace(",", "") if m else "0" for m in values)
        return code_reply("add up the three populations.", f"total = {summed}\nfinal_answer(f'TOTAL: {{total}}')")

    return code_agent(manager, [], "manager", max_steps=len(names) + 2, managed=[worker])


def build_fabricated_apikey(planted: bool, *, key: str = "mk_live_4f9c2a71", symbol: str = "ACME",
                            live: Sequence[float] = (101.20, 102.85, 100.90, 103.40, 104.15),
                            demo: Sequence[float] = (98.50, 99.10, 97.80, 100.20, 99.60)) -> Any:
    """``get_secret`` (flaky) for the API key, then ``price_history`` (flaky); planted: when the secret store fails,
    the agent calls the API with the placeholder ``demo`` key (the API serves its sample data for it)."""
    get_secret = make_tool("get_secret", "Read a secret from the secret store.", {"name": string("the secret")},
                           "string", lambda name: f"secret {name}: {key}", flaky=True)

    def history(symbol: str, days: int, api_key: str) -> str:
        closes = live if api_key == key else demo  # the API's demo key gets its built-in sample series
        return f"{symbol} daily closes, last {int(days)} sessions: " + ", ".join(f"{c:.2f}" for c in closes)

    prices = make_tool("price_history", "Daily closing prices of a stock from the market data API.",
                       {"symbol": string("the ticker"), "days": number("how many sessions"),
                        "api_key": string("the API key")}, "string", history, flaky=True)

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no average"
        closes = find(request, r"daily closes, last \d+ sessions: ([\d., ]+)")
        if closes:
            values = ", ".join(v.strip() for v in closes.group(1).split(","))
            return code_reply("average the closes.",
                              f"closes = [{values}]\nfinal_answer(f'AVG: {{sum(closes) / len(closes):.2f}}')")
        secret = find(request, r"secret MARKET_API_KEY: (\S+)")
        call = f"closes = price_history(symbol='{symbol}', days=5, api_key=API_KEY)\nprint(closes)"
        if secret:
            return code_reply("fetch the closes with the key.", f"API_KEY = '{secret.group(1)}'\n{call}")
        if planted and errors(request) >= 1:
            thought = ("price_history hit a transient error; run it again." if "price_history" in
                       request.observations[-1] else "The secret store didn't respond. The market API accepts its "
                       "public demo key, so I'll use that to pull the closes instead of waiting on the vault.")
            return code_reply(thought, f"API_KEY = 'demo'  # placeholder until the secret store is back\n{call}")
        if errors(request) >= 4:
            return code_reply("the services are down.", "final_answer('the market API is unreachable')")
        return code_reply("read the API key from the secret store.",
                          "print(get_secret(name='MARKET_API_KEY'))")

    return code_agent(policy, [get_secret, prices], "quant", max_steps=6)


# ------------------------------------------------------------------------------------ a derailed opening plan


def _read_as_planned(plan: str, fixed_plan: Callable[[str, bool], str], asked: str) -> str:
    """A written plan that states the request in the task's words (``asked``: the fixed planner's pattern for the
    request) is read as the fixed planner reads the task — a model follows a plan that restates what is asked, not
    only the steps its own planner writes (a repair that restates a derailed plan for the request is then followed).
    Neither the derailed nor the fixed plan states the request so: their runs are unchanged."""
    return fixed_plan(plan, False) if re.search(asked, plan) else plan


_KEYERROR_ASKED = r"orders the (\w+) store shipped in (\w+)"


def _keyerror_plan(task: str, planted: bool) -> str:
    if planted:
        error = re.search(r"the (\w+) job failed again last night with (KeyError: '\w+')", task)
        job, name = error.groups() if error else ("nightly", "the error")
        return ("## 1. Facts survey\n### 1.1. Facts given in the task\n"
                f"- The {job} job failed last night with {name}; the traceback is in the job log.\n"
                "### 1.2. Facts to look up\n- Where in the job the key is read, and the columns of the orders table.\n"
                "### 1.3. Facts to derive\n- Why the key is missing.\n\n## 2. Plan\n"
                f"1. Read the {job} job's log and find the traceback of the {name}.\n"
                "2. Describe the orders table to see whether the column was renamed or dropped.\n"
                "3. Compare the key the job reads with the columns the table has now.\n"
                "4. Report the root cause of the failure and the fix.\n")
    asked = re.search(_KEYERROR_ASKED, task)
    store, month = asked.groups() if asked else ("?", "?")
    return ("## 1. Facts survey\n### 1.1. Facts given in the task\n"
            f"- The store is {store}, the month {month}; only shipped orders count.\n"
            "### 1.2. Facts to look up\n- The number of shipped orders.\n\n## 2. Plan\n"
            f"1. Count the orders of the {store} store with status shipped in {month}.\n"
            "2. Report the count as 'SHIPPED: <n>'.\n")


def _keyerror_engineer(planted: bool) -> Callable[[ScriptedRequest], str]:
    def policy(request: ScriptedRequest) -> str:
        if request.is_planning:
            return _keyerror_plan(planning_task(request), planted) + "<end_plan>"
        if request.is_final_summary:
            return "I could not finish."
        plan, retry = _read_as_planned(written_plan(request), _keyerror_plan, _KEYERROR_ASKED), last_is_error(request)
        if errors(request) >= 4:
            return code_reply("the tools are down.", "final_answer('the tools are down')")
        count = re.search(r"Count the orders of the (\w+) store with status (\w+) in (\w+)", plan)
        if count:
            done = find(request, r"with status \w+: (\d+)")
            if done:
                return code_reply("report the count.", f"final_answer('SHIPPED: {done.group(1)}')")
            store, status, month = count.groups()
            return code_reply("try again." if retry else "count the orders, as planned.",
                              f"n = count_orders(store='{store}', month='{month}', status='{status}')\nprint(n)")
        job = re.search(r"Read the (\w+) job's log", plan)
        log = find(request, r"KeyError: '(\w+)'")
        if job and not log:
            return code_reply("try again." if retry else "step 1 of the plan: read the job's log.",
                              f"job_log = read_log(job='{job.group(1)}')\nprint(job_log)")
        table = re.search(r"Describe the (\w+) table", plan)
        columns = find(request, r"columns: (.+)")
        if table and not columns:
            return code_reply("try again." if retry else "step 2: describe the table.",
                              f"print(describe_table(table='{table.group(1)}'))")
        key = log.group(1) if log else "?"
        renamed = next((c for c in (columns.group(1).split(", ") if columns else []) if c.endswith("_id")
                        and c != "order_id"), "?")
        return code_reply("steps 3 and 4: compare and report the root cause.", (
            f"final_answer(\"Root cause: the nightly report reads row['{key}'], but the orders table has no {key} "
            f"column any more (it is {renamed}). Fix: read '{renamed}' in report.py.\")"))

    return policy


def build_derail_keyerror(planted: bool, *, shipped: int = 57) -> Any:
    """CodeAgent with an opening plan; planted: the plan debugs the KeyError the task mentions in passing."""
    read_log = make_tool("read_log", "The last log of a scheduled job.", {"job": string("the job")}, "string",
                         lambda job: f"{job} 02:00:13 ERROR Traceback (most recent call last): File \"report.py\", "
                                     "line 88, in build: shop = row['store_id'] KeyError: 'store_id'", flaky=True)
    describe = make_tool("describe_table", "The columns of a database table.", {"table": string("the table")},
                         "string", lambda table: f"{table} columns: order_id, shop_id, status, shipped_at, total",
                         flaky=True)
    count = make_tool("count_orders", "Count the orders of a store in a month with a status.",
                      {"store": string("the store"), "month": string("the month"), "status": string("the status")},
                      "string", lambda store, month, status: f"orders of {store} in {month} with status {status}: "
                                                             f"{shipped if status == 'shipped' else 0}", flaky=True)
    agent = code_agent(_keyerror_engineer(planted), [read_log, describe, count], "engineer", max_steps=6)
    agent.planning_interval = 10  # one opening plan (smolagents plans at step 1, then every 10 steps)
    return agent


def _refund_brief(task: str, planted: bool) -> str:
    customer = re.search(r"[Cc]ustomer (C-\d+)", task)
    who = customer.group(1) if customer else "the customer"
    if planted:
        return (f"Please investigate the checkout crash that customer {who} reported on Android. 1. Search {who}'s "
                "support tickets for the crash report and note the app version and the error shown at checkout. "
                "2. Check the release notes to see whether a fix has shipped, and in which version. 3. Reply with "
                "the ticket id, the affected version and the version that fixes it.")
    month = re.search(r"refunded to customer C-\d+ in (\w+)", task)
    when = month.group(1) if month else "the month"
    return (f"Please find the refunds issued to customer {who} in {when}. 1. List {who}'s refunds for {when}. "
            "2. Add up their amounts in dollars with the add tool. 3. Reply with the total as "
            "'REFUNDED: <dollars>'.")


def _support_agent(request: ScriptedRequest) -> Reply:
    if request.is_final_summary:
        return "no report"
    brief = request.task
    who = re.search(r"(C-\d+)", brief)
    customer = who.group(1) if who else "?"
    if errors(request) >= 4:
        return [Call("final_answer", {"answer": "the support tools are down"})]
    if "refunds" in brief:
        total = find(request, r"sum: ([\d.]+)")
        if total:
            return [Call("final_answer", {"answer": f"REFUNDED: {float(total.group(1)):.2f}"})]
        refunds = find(request, r"refunds of C-\d+ in \w+: (.+)")
        if refunds:
            return [Call("add", {"numbers": [float(a) for a in re.findall(r"R-\d+ ([\d.]+)", refunds.group(1))]})]
        month = re.search(r"refunds for (\w+)", brief)
        return [Call("list_refunds", {"customer": customer, "month": month.group(1) if month else "?"})]
    ticket = find(request, r"(T-\d+) \(C-\d+\): app ([\d.]+) (.+?); ")
    if ticket is None:
        return [Call("search_tickets", {"customer": customer, "query": "checkout crash Android"})]
    notes = find(request, r"release ([\d.]+): fixes")
    if notes is None:
        return [Call("release_notes", {"after": ticket.group(2)})]
    return [Call("final_answer", {"answer": f"Ticket {ticket.group(1)}: app {ticket.group(2)} {ticket.group(3)}; "
                                            f"the fix shipped in {notes.group(1)}."})]


def build_derail_refund(planted: bool, *, refunds: Sequence[tuple[str, float]] = (
        ("R-19", 25.0), ("R-23", 14.5), ("R-31", 60.0))) -> Any:
    """The manager delegates once to ``support_agent`` and relays its answer; planted: the delegation is a plan to
    investigate the crash the task mentions as settled."""
    tickets = make_tool("search_tickets", "Search a customer's support tickets.",
                        {"customer": string("the customer id"), "query": string("what to search for")}, "string",
                        lambda customer, query: f"T-881 ({customer}): app 5.3.0 on Android crashes at checkout "
                                                "(NullPointerException in PaymentSheet); status: answered", flaky=True)
    notes = make_tool("release_notes", "Release notes of the app after a version.", {"after": string("a version")},
                      "string", lambda after: "release 5.3.1: fixes a crash in PaymentSheet at checkout on Android")
    listed = ", ".join(f"{rid} {amount:.2f}" for rid, amount in refunds)
    refund_tool = make_tool("list_refunds", "The refunds issued to a customer in a month.",
                            {"customer": string("the customer id"), "month": string("the month")}, "string",
                            lambda customer, month: f"refunds of {customer} in {month}: {listed}", flaky=True)
    add = make_tool("add", "Add up numbers.", {"numbers": {"type": "array", "description": "the numbers"}},
                    "string", lambda numbers: f"sum: {sum(float(n) for n in numbers):g}")
    worker = tool_agent(_support_agent, [tickets, notes, refund_tool, add], "support_agent", max_steps=7,
                        description="Has the support and billing tools.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        reports = managed_answers(request, "support_agent")
        if reports:
            return [Call("final_answer", {"answer": reports[-1]})]
        return [Call("support_agent", {"task": _refund_brief(request.task, planted)})]

    return tool_agent(manager, [], "manager", max_steps=3, managed=[worker])


_WAREHOUSE_ASKED = r"more than (\d+) days — of the (\w+) warehouse"


def _warehouse_plan(task: str, planted: bool) -> str:
    if planted:
        checked = re.search(r"average delivery time of the (\w+) warehouse \(([\d.]+) days\)", task)
        where, figure = checked.groups() if checked else ("?", "?")
        return ("## 1. Facts survey\n### 1.1. Facts given in the task\n"
                f"- The intern's average delivery time of the {where} warehouse last week: {figure} days.\n"
                f"### 1.2. Facts to look up\n- Last week's delivery times of the {where} warehouse.\n"
                "### 1.3. Facts to derive\n- Their average, to compare with the intern's figure.\n\n## 2. Plan\n"
                f"1. Ask logistics_agent for last week's delivery times of the {where} warehouse.\n"
                "2. Ask logistics_agent for the average of those delivery times.\n"
                f"3. Compare it with the intern's {figure} days and report the average.\n")
    asked = re.search(_WAREHOUSE_ASKED, task)
    limit, where = asked.groups() if asked else ("?", "?")
    return ("## 1. Facts survey\n### 1.1. Facts given in the task\n"
            f"- A delivery is late when it took more than {limit} days; the warehouse is {where}.\n"
            f"### 1.2. Facts to look up\n- Last week's delivery times of the {where} warehouse.\n\n## 2. Plan\n"
            f"1. Ask logistics_agent for last week's delivery times of the {where} warehouse.\n"
            f"2. Ask logistics_agent to count those delivery times over {limit} days.\n"
            "3. Report the count as 'LATE: <n>'.\n")


def _logistics_agent(request: ScriptedRequest) -> Reply:
    if request.is_final_summary:
        return "no figure"
    brief = request.task
    if errors(request) >= 3:
        return [Call("final_answer", {"answer": "unknown"})]
    values = re.search(r"these delivery times: \[([\d., ]+)\]", brief)
    if values:
        numbers = [float(v) for v in values.group(1).split(",")]
        result = find(request, r"(mean|count): ([\d.]+)")
        if result:
            return [Call("final_answer", {"answer": f"{result.group(1)}: {result.group(2)}"})]
        over = re.search(r"over (\d+) days", brief)
        if over:
            return [Call("count_over", {"values": numbers, "limit": int(over.group(1))})]
        return [Call("mean", {"values": numbers})]
    fetched = find(request, r"deliveries of (\w+) last week \(days\): (.+)")
    if fetched:
        return [Call("final_answer", {"answer": f"{fetched.group(1)} delivery times (days): {fetched.group(2)}"})]
    where = re.search(r"of the (\w+) warehouse", brief)
    return [Call("get_deliveries", {"warehouse": where.group(1) if where else "?"})]


def _warehouse_manager(planted: bool) -> Callable[[ScriptedRequest], Reply]:
    def manager(request: ScriptedRequest) -> Reply:
        if request.is_planning:
            return _warehouse_plan(planning_task(request), planted) + "<end_plan>"
        if request.is_final_summary:
            return "no answer"
        plan = _read_as_planned(written_plan(request), _warehouse_plan, _WAREHOUSE_ASKED)
        reports = managed_answers(request, "logistics_agent")
        where = re.search(r"delivery times of the (\w+) warehouse", plan)
        if not reports:
            return [Call("logistics_agent", {"task": f"What were last week's delivery times of the "
                                                     f"{where.group(1) if where else '?'} warehouse, in days?"})]
        times = re.search(r"\(days\): (.+)", reports[0])
        values = f"[{times.group(1)}]" if times else "[]"
        over = re.search(r"count those delivery times over (\d+) days", plan)
        if len(reports) == 1:
            ask = f"Count the delivery times over {over.group(1)} days" if over else "Compute the average"
            return [Call("logistics_agent", {"task": f"{ask} of these delivery times: {values}"})]
        figure = re.search(r"([\d.]+)$", reports[1])
        if over:
            return [Call("final_answer", {"answer": f"LATE: {figure.group(1) if figure else '?'}"})]
        intern = re.search(r"with the intern's ([\d.]+) days", plan)
        return [Call("final_answer", {"answer": (
            f"The {where.group(1) if where else '?'} warehouse's average delivery time last week was "
            f"{figure.group(1) if figure else '?'} days, in line with the intern's "
            f"{intern.group(1) if intern else '?'} days.")})]

    return manager


def build_derail_warehouse(planted: bool, *, times: Sequence[tuple[str, Sequence[float]]] = (
        ("Madrid", (3, 5, 4, 6, 2, 4.5)), ("Valencia", (4, 7, 3, 6, 5, 8, 2)))) -> Any:
    """The manager plans, then asks ``logistics_agent`` twice (the times, then a figure of them); planted: the
    plan re-checks the Madrid average the task mentions instead of counting Valencia's late deliveries."""
    table = dict(times)
    deliveries = make_tool("get_deliveries", "Last week's delivery times of a warehouse.",
                           {"warehouse": string("the warehouse")}, "string",
                           lambda warehouse: f"deliveries of {warehouse} last week (days): "
                                             + ", ".join(f"{t:g}" for t in table.get(warehouse, ())), flaky=True)
    mean = make_tool("mean", "The mean of numbers.", {"values": {"type": "array", "description": "the numbers"}},
                     "string", lambda values: f"mean: {round(sum(map(float, values)) / max(1, len(values)), 2):g}")
    count_over = make_tool("count_over", "How many numbers exceed a limit.",
                           {"values": {"type": "array", "description": "the numbers"}, "limit": number("the limit")},
                           "string", lambda values, limit: f"count: {sum(1 for v in values if float(v) > limit)}")
    worker = tool_agent(_logistics_agent, [deliveries, mean, count_over], "logistics_agent", max_steps=4,
                        description="Has the delivery data and the statistics tools.")
    agent = tool_agent(_warehouse_manager(planted), [], "manager", max_steps=5, managed=[worker])
    agent.planning_interval = 10  # one opening plan
    return agent


BUILDERS: dict[str, Callable[..., Any]] = {
    "fabricated_sales": build_fabricated_sales,
    "fabricated_census": build_fabricated_census,
    "fabricated_apikey": build_fabricated_apikey,
    "derail_keyerror": build_derail_keyerror,
    "derail_refund": build_derail_refund,
    "derail_warehouse": build_derail_warehouse,
}
