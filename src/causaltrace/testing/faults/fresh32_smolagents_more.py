"""Issue 32's fresh failing smolagents teams, continued (:mod:`.fresh32_smolagents` holds the first ones and the
module's conventions): each team with its FIXED twin (``planted=False``), one planted first wrong step.

==================  ============================================================================================
builder             the team (flaky tool), the planted error — the family
==================  ============================================================================================
recalibrated        CodeAgent + plan (``get_readings``), ``calibration_log``: the average is taken over the
                    readings the calibration's corrected series superseded — a superseded value
city_loop           manager CodeAgent + plan, managed ``air_agent`` (``air_quality``): the loop over the task's
                    cities is written without the last one — an item of "A, B and C" never handled
plan_update         ToolCallingAgent re-planning every 3 steps (``nda_status``): the UPDATED plan's "still to look
                    up" leaves the last supplier out — an omission in a plan update
parallel_rates      ToolCallingAgent (``refund_batch``), parallel ``get_rate`` calls in one reply: one asks USD for
                    the CAD refund — a currency changed in a parallel call
nested_managers     director → managed ``finance_lead`` → managed ``ledger_agent`` (``ledger_balance``): the
                    finance lead adds a USD balance as EUR — the director's "in EUR" ignored, two levels down
checked_answer      ToolCallingAgent with ``final_answer_checks`` (``get_deliveries``): the answer rejected for its
                    missing unit is rewritten with the value rounded — a value changed while reformatting
case_compare        CodeAgent + plan (``invoice_lines``), a helper function: ``== 'USD'`` against the lines'
                    ``usd`` — a condition that never holds (the USD lines added unconverted)
sort_order          CodeAgent (``list_invoices``): the "three most recent" sorted oldest first — a sort order
swallowed_error     CodeAgent + plan (``month_status``), one loop over ``store_sales``: ``try/except: continue``
                    swallows the store the live system refused — an error never recovered
wrong_variable      CodeAgent (``get_quote_lines``): the answer formats ``subtotal`` beside the ``total`` with VAT
                    it computed — a superseded value in code
misread_report      manager + managed ``finance_agent`` (``pnl_report``): the manager reads the report's gross
                    revenue as the net one — a misread report
same_bug            CodeAgent (``exam_scores``): the code fails (the pass mark written as a string) and is sent again
                    unchanged until max steps — a loop without progress
==================  ============================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.faults.fresh32_smolagents import fetch_step, survey, task_of
from causaltrace.testing.faults.teams_smolagents import (
    code_agent,
    code_reply,
    errors,
    find,
    make_tool,
    managed_answers,
    string,
    tool_agent,
)
from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = ["BUILDERS"]

Reply = str | list[Call]


def build_recalibrated(planted: bool, *, raw: Sequence[float] = (21.4, 21.9, 22.3, 22.1, 22.0),
                       offset: float = -0.8) -> Any:
    """Fetch the readings, then the calibration log (which corrects them), then average; planted: the code
    averages the raw readings the corrected series replaced."""
    corrected = [round(r + offset, 1) for r in raw]
    get_readings = make_tool("get_readings", "The last five readings of a sensor in degrees C.",
                             {"sensor": string("the sensor id")}, "array", lambda sensor: list(raw), flaky=True)
    calibration = make_tool("calibration_log", "The latest calibration of a sensor and what it corrected.",
                            {"sensor": string("the sensor id")}, "string",
                            lambda sensor: f"calibration of {sensor} at 10:05: the last five readings corrected to "
                                           f"{corrected} (offset {offset:+g} C); use the corrected series")

    def policy(request: ScriptedRequest) -> str:
        sensor = (re.search(r"sensor (S-\d+)", task_of(request)) or [None, "S-7"])[1]
        if request.is_planning:
            return survey([f"The sensor is {sensor}.", "The answer is in degrees C, to 1 decimal."],
                          [f"The last five readings of {sensor} (get_readings).",
                           "Whether a calibration corrected them (calibration_log)."],
                          ["The average of the (corrected) readings."],
                          ["Fetch the readings.", "Check the calibration log.", "Average the readings to use.",
                           "Report 'AVG: <C>'."])
        if request.is_final_summary:
            return "no average"
        avg = find(request, r"average: ([\d.]+)")
        if avg:
            return code_reply("the average answers the task.", f"final_answer('AVG: {avg.group(1)}')")
        fixed = find(request, r"corrected to (\[[^\]]+\])")
        if fixed:
            series = "readings" if planted else "corrected"
            return code_reply("average the readings.", ("" if planted else f"corrected = {fixed.group(1)}\n")
                              + f"avg = round(sum({series}) / len({series}), 1)\nprint('average:', avg)")
        if find(request, r"readings: \["):
            return code_reply("check whether a calibration corrected them.", f"print(calibration_log(sensor='{sensor}'))")
        return fetch_step(request, f"fetch the readings of {sensor}.",
                          f"readings = get_readings(sensor='{sensor}')\nprint('readings:', readings)", "no readings")

    agent = code_agent(policy, [get_readings, calibration], "analyst", max_steps=7)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_city_loop(planted: bool, *, aqi: Sequence[tuple[str, int]] = (("Lisbon", 42), ("Porto", 38),
                                                                       ("Faro", 55))) -> Any:
    """The manager plans, then loops over the task's cities in code, asking ``air_agent`` for each; planted: the
    loop's list is written without the last city."""
    table = dict(aqi)
    air_quality = make_tool("air_quality", "Today's air quality index of a city.", {"city": string("the city")},
                            "string", lambda city: f"AQI of {city} today: {table.get(city, 0)}", flaky=True)

    def air(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no AQI"
        found = find(request, r"AQI of \w+ today: (\d+)")
        if found:
            return [Call("final_answer", {"answer": found.group(1)})]
        city = re.search(r"AQI of (\w+)", request.task)
        if city is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("air_quality", {"city": city.group(1)})]

    worker = tool_agent(air, [air_quality], "air_agent", max_steps=4, description="Knows today's air quality.")

    def cities_of(text: str) -> list[str]:
        found = re.search(r"of ([A-Z]\w+(?:, [A-Z]\w+)* and [A-Z]\w+)", text)
        return re.split(r", | and ", found.group(1)) if found else []

    def manager(request: ScriptedRequest) -> str:
        cities = cities_of(task_of(request))
        if request.is_planning:
            return survey([f"The cities are {', '.join(cities)}."], ["Today's AQI of each city (air_agent)."],
                          ["Nothing."], ["Ask air_agent for each city in a loop.",
                                         "Report 'AQI: <city> <n>, ...' in the task's order."])
        if request.is_final_summary:
            return "no answer"
        got = find(request, r"aqi by city: (\{.+\})")
        if got:
            pairs = re.findall(r"'(\w+)': '(\d+)'", got.group(1))
            return code_reply("report the indexes.", f"final_answer('AQI: {', '.join(f'{c} {n}' for c, n in pairs)}')")
        loop = cities[:-1] if planted else cities
        return code_reply("ask air_agent for every city of the task.",
                          f"aqi = {{}}\nfor city in {loop!r}:\n"
                          "    aqi[city] = air_agent(task=f'What is the AQI of {city} today?').strip().splitlines()[-1]\n"
                          "print('aqi by city:', aqi)")

    agent = code_agent(manager, [], "manager", max_steps=4, managed=[worker])
    agent.planning_interval = 10  # one opening plan
    return agent


BUILDERS: dict[str, Callable[..., Any]] = {
    "recalibrated": build_recalibrated,
    "city_loop": build_city_loop,
}


def _plan_task(request: ScriptedRequest) -> str:
    """The task inside a planning prompt, the initial one or an update."""
    for _, text in request.messages:
        found = re.search(r"(?:Here is your task:|You have been given the following task:)\s*```\s*(.*?)\s*```",
                          text, re.S)
        if found:
            return found.group(1)
    return request.task


def build_plan_update(planted: bool, *, status: Sequence[tuple[str, str]] = (
        ("Alvor", "signed 2026-10-02"), ("Brisa", "not signed"), ("Cantal", "signed 2026-11-14"),
        ("Dorna", "signed 2026-11-29"))) -> Any:
    """ToolCallingAgent re-planning every 3 steps: it looks up each supplier's NDA the LATEST plan still lists;
    planted: the updated plan's "still to look up" leaves out the last supplier (the agent follows it)."""
    table = dict(status)
    nda = make_tool("nda_status", "Whether a supplier has signed our NDA.", {"supplier": string("the supplier")},
                    "string", lambda supplier: f"NDA of {supplier}: {table.get(supplier, 'unknown')}", flaky=True)

    def suppliers(text: str) -> list[str]:
        found = re.search(r"suppliers ([A-Z]\w+(?:, [A-Z]\w+)* and [A-Z]\w+)", text)
        return re.split(r", | and ", found.group(1)) if found else []

    def seen(request: ScriptedRequest) -> dict[str, str]:
        return {m.group(1): m.group(2) for o in request.observations for m in [re.search(r"NDA of (\w+): (.+)", o)]
                if m}

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_planning:
            names, known = suppliers(_plan_task(request)), seen(request)
            if not known:
                return survey([f"The suppliers are {', '.join(names)}."],
                              [f"The NDA status of {n} (nda_status)." for n in names],
                              ["Which of them signed."], ["Look up each supplier's NDA status.",
                                                          "Report 'SIGNED: <names>' in the task's order."])
            todo = [n for n in names if n not in known]
            if planted:
                todo = todo[:-1]
            steps = "\n".join(["1. Look up the NDA status of " + ", ".join(todo) + ".",
                               "2. Report 'SIGNED: <names>' in the task's order."])
            return ("## 1. Updated facts survey\n### 1.1. Facts given in the task\n"
                    f"- The suppliers are {', '.join(names)}.\n### 1.2. Facts that we have learned\n"
                    + "\n".join(f"- NDA of {n}: {s}." for n, s in known.items())
                    + "\n### 1.3. Facts still to look up\n" + "\n".join(f"- The NDA status of {n}." for n in todo)
                    + "\n### 1.4. Facts still to derive\n- Which of them signed.\n\n## 2. Plan\n" + steps
                    + "\n<end_plan>")
        if request.is_final_summary:
            return "no answer"
        plans = [text for role, text in request.messages if role == "assistant" and "Facts" in text]
        latest = plans[-1] if plans else ""
        section = latest.split("still to look up")[-1].split("###")[0] if "still to look up" in latest else latest
        wanted = re.findall(r"The NDA status of (\w+)", section)
        known = seen(request)
        todo = [n for n in wanted if n not in known]
        if not todo:
            names = suppliers(request.task)
            return [Call("final_answer", {"answer": "SIGNED: " + ", ".join(
                n for n in names if known.get(n, "").startswith("signed"))})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the NDA register is down"})]
        return [Call("nda_status", {"supplier": todo[0]})]

    agent = tool_agent(policy, [nda], "clerk", max_steps=8)
    agent.planning_interval = 3
    return agent


def build_parallel_rates(planted: bool, *, refunds: Sequence[tuple[str, str]] = (("120", "CAD"), ("80", "GBP"),
                                                                                ("45", "CHF")),
                         rates: Sequence[tuple[str, str]] = (("CAD", "0.6712"), ("GBP", "1.1574"), ("CHF", "1.0652"),
                                                             ("USD", "0.9187"))) -> Any:
    """ToolCallingAgent: ``refund_batch`` (flaky) lists the refunds, then ONE reply asks ``get_rate`` for every
    currency in parallel, then the calculator; planted: one of the parallel calls asks USD for the CAD refund."""
    table = dict(rates)
    batch = make_tool("refund_batch", "The refunds of a batch with their amounts and currencies.",
                      {"batch": string("the batch id")}, "string",
                      lambda batch: f"refunds of {batch}: " + ", ".join(f"{a} {c}" for a, c in refunds), flaky=True)
    get_rate = make_tool("get_rate", "Today's exchange rate of a currency pair.", {"pair": string("like CAD/EUR")},
                         "string", lambda pair: f"rate {pair}: {table.get(pair.split('/')[0], '0')}")
    calculator = make_tool("calculator", "Evaluate an arithmetic expression.", {"expression": string("arithmetic")},
                           "string", lambda expression: f"{expression} = {round(eval(expression), 2):.2f}"
                           if re.fullmatch(r"[\d.\s*+]+", expression) else "only + and * are allowed")

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no total"
        done = find(request, r"= ([\d.]+)$")
        if done:
            return [Call("final_answer", {"answer": f"TOTAL: {done.group(1)}"})]
        listed = find(request, r"refunds of \S+: (.+)")
        if listed is None:
            if errors(request) >= 3:
                return [Call("final_answer", {"answer": "the refund service is down"})]
            found = re.search(r"batch (R-\d+)", request.task)
            return [Call("refund_batch", {"batch": found.group(1) if found else "unknown"})]
        items = re.findall(r"([\d.]+) ([A-Z]{3})", listed.group(1))
        got = [m for o in request.observations for m in re.finditer(r"rate ([A-Z]{3})/EUR: ([\d.]+)", o)]
        if len(got) < len(items):
            codes = ["USD" if planted and i == 0 else c for i, (_, c) in enumerate(items)]
            return [Call("get_rate", {"pair": f"{c}/EUR"}) for c in codes]
        rate_of = [m.group(2) for m in got]
        return [Call("calculator", {"expression": " + ".join(f"{a} * {r}" for (a, _), r in zip(items, rate_of, strict=True))})]

    return tool_agent(policy, [batch, get_rate, calculator], "fx_clerk", max_steps=6)


BUILDERS.update({"plan_update": build_plan_update, "parallel_rates": build_parallel_rates})


def build_nested_managers(planted: bool, *, balances: Sequence[tuple[str, str, str]] = (
        ("4410", "15200.00", "EUR"), ("4420", "9800.00", "USD")), rate: str = "0.9187") -> Any:
    """Three levels: the director asks ``finance_lead``, which asks ``ledger_agent`` (flaky ``ledger_balance``)
    for each account and adds them with the calculator (``get_rate`` for a foreign account); planted: the finance
    lead adds the USD balance as if it were EUR (the director's "in EUR" ignored)."""
    table = {a: (v, c) for a, v, c in balances}
    ledger_balance = make_tool("ledger_balance", "The cash balance of a ledger account in its own currency.",
                               {"account": string("the account number")}, "string",
                               lambda account: f"account {account}: {table[account][0]} {table[account][1]}"
                               if account in table else f"no account {account}", flaky=True)
    get_rate = make_tool("get_rate", "Today's exchange rate of a currency pair.", {"pair": string("like USD/EUR")},
                         "string", lambda pair: f"rate {pair}: {rate}")
    calculator = make_tool("calculator", "Evaluate an arithmetic expression.", {"expression": string("arithmetic")},
                           "string", lambda expression: f"{expression} = {round(eval(expression), 2):.2f}"
                           if re.fullmatch(r"[\d.\s*+]+", expression) else "only + and * are allowed")

    def ledger(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no balance"
        found = find(request, r"account \d+: ([\d.]+) ([A-Z]{3})")
        if found:
            return [Call("final_answer", {"answer": f"{found.group(1)} {found.group(2)}"})]
        account = re.search(r"account (\d+)", request.task)
        if account is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("ledger_balance", {"account": account.group(1)})]

    ledger_agent = tool_agent(ledger, [ledger_balance], "ledger_agent", max_steps=4,
                              description="Reads account balances in the ledger.")

    def lead(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no total"
        total = find(request, r"= ([\d.]+)$")
        if total:
            return [Call("final_answer", {"answer": f"combined cash: {total.group(1)} EUR"})]
        accounts = re.findall(r"\b(\d{4})\b", request.task)
        got = [re.search(r"([\d.]+) ([A-Z]{3})", a) for a in managed_answers(request, "ledger_agent")]
        if len(got) < len(accounts):
            return [Call("ledger_agent", {"task": f"What is the cash balance of account {accounts[len(got)]}?"})]
        foreign = sorted({m.group(2) for m in got if m and m.group(2) != "EUR"})
        rates = {m.group(1): m.group(2) for o in request.observations for m in [re.search(r"rate (\w+)/EUR: ([\d.]+)", o)]
                 if m}
        if foreign and not planted and foreign[0] not in rates:
            return [Call("get_rate", {"pair": f"{foreign[0]}/EUR"})]
        terms = [m.group(1) if m.group(2) == "EUR" or planted else f"{m.group(1)} * {rates[m.group(2)]}"
                 for m in got if m]
        return [Call("calculator", {"expression": " + ".join(terms)})]

    finance_lead = tool_agent(lead, [get_rate, calculator], "finance_lead", max_steps=7, managed=[ledger_agent],
                              description="Answers finance questions, in EUR, with the ledger team.")

    def director(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        answers = managed_answers(request, "finance_lead")
        found = re.search(r"combined cash: ([\d.]+) EUR", answers[-1]) if answers else None
        if found:
            return [Call("final_answer", {"answer": f"CASH: {found.group(1)} EUR"})]
        accounts = re.findall(r"\b(\d{4})\b", request.task)
        return [Call("finance_lead", {"task": f"Find the combined cash balance of accounts {' and '.join(accounts)}, "
                                              "in EUR."})]

    return tool_agent(director, [], "director", max_steps=3, managed=[finance_lead])


def build_checked_answer(planted: bool, *, days: Sequence[int] = (3, 4, 2, 5, 3)) -> Any:
    """ToolCallingAgent with a final-answer check (the answer must end with its unit, 'days'): ``get_deliveries``
    (flaky), the calculator, a first answer without the unit (rejected), the answer again; planted: the value is
    rounded to whole days when the answer is rewritten."""
    get_deliveries = make_tool("get_deliveries", "The delivery times of a warehouse's orders last week, in days.",
                               {"warehouse": string("the warehouse")}, "string",
                               lambda warehouse: f"deliveries of {warehouse} last week (days): "
                                                 + ", ".join(str(d) for d in days), flaky=True)
    calculator = make_tool("calculator", "Evaluate an arithmetic expression.", {"expression": string("arithmetic")},
                           "string", lambda expression: f"{expression} = {round(eval(expression), 2):g}"
                           if re.fullmatch(r"[\d.\s*/+()-]+", expression) else "only arithmetic is allowed")

    def with_unit(final_answer: Any, memory: Any, agent: Any = None) -> bool:
        if not str(final_answer).rstrip().endswith("days"):
            raise ValueError("the answer must end with its unit: 'AVG: <value> days'")
        return True

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no average"
        mean = find(request, r"= ([\d.]+)$")
        rejected = any("must end with its unit" in o for o in request.observations)
        if mean and rejected:
            value = f"{round(float(mean.group(1)))}" if planted else mean.group(1)
            return [Call("final_answer", {"answer": f"AVG: {value} days"})]
        if mean:
            return [Call("final_answer", {"answer": f"AVG: {mean.group(1)}"})]
        listed = find(request, r"\(days\): ([\d, ]+)")
        if listed:
            values = [v.strip() for v in listed.group(1).split(",")]
            return [Call("calculator", {"expression": f"({' + '.join(values)}) / {len(values)}"})]
        if errors(request) >= 3:
            return [Call("final_answer", {"answer": "the delivery service is down"})]
        found = re.search(r"the (\w+) warehouse", request.task)
        return [Call("get_deliveries", {"warehouse": found.group(1) if found else "unknown"})]

    agent = tool_agent(policy, [get_deliveries, calculator], "ops_agent", max_steps=7)
    agent.final_answer_checks = [with_unit]
    return agent


BUILDERS.update({"nested_managers": build_nested_managers, "checked_answer": build_checked_answer})


def build_case_compare(planted: bool, *, lines: Sequence[tuple[str, str, str]] = (
        ("hosting", "240.00", "EUR"), ("support", "180.00", "usd"), ("licences", "95.50", "EUR"),
        ("training", "60.00", "usd")), rate: str = "0.9187") -> Any:
    """CodeAgent with a plan: ``invoice_lines`` (flaky) and ``get_rate``, then a helper function converting each
    line to EUR; planted: the helper compares the currency with ``== 'USD'`` while the lines say ``usd`` (the
    condition never holds, the USD lines are added unconverted)."""
    rows = [{"item": i, "amount": float(a), "currency": c} for i, a, c in lines]
    invoice_lines = make_tool("invoice_lines", "The lines of a supplier invoice with their currencies.",
                              {"invoice": string("the invoice id")}, "array", lambda invoice: rows, flaky=True)
    get_rate = make_tool("get_rate", "Today's exchange rate of a currency pair.", {"pair": string("like USD/EUR")},
                         "string", lambda pair: f"rate {pair}: {rate}")

    def policy(request: ScriptedRequest) -> str:
        invoice = (re.search(r"invoice (SI-\d+)", task_of(request)) or [None, "SI-1"])[1]
        if request.is_planning:
            return survey([f"The invoice is {invoice}; its lines may be in EUR or USD."],
                          ["The invoice's lines (invoice_lines).", "Today's USD/EUR rate (get_rate)."],
                          ["The total in EUR, to the cent."],
                          ["Fetch the lines and the rate.", "Convert each USD line to EUR and add them up.",
                           "Report 'TOTAL: <EUR> EUR'."])
        if request.is_final_summary:
            return "no total"
        total = find(request, r"total eur: ([\d.]+)")
        if total:
            return code_reply("the total answers the task.", f"final_answer('TOTAL: {total.group(1)} EUR')")
        seen_rate = find(request, r"rate USD/EUR: ([\d.]+)")
        if seen_rate:
            wanted = "'USD'" if planted else "'usd'"
            test = f"line['currency'] == {wanted}" if planted else f"line['currency'].lower() == {wanted}"
            return code_reply("convert the USD lines and add everything up.",
                              "def to_eur(line):\n"
                              f"    if {test}:\n        return line['amount'] * rate\n    return line['amount']\n\n"
                              f"rate = {seen_rate.group(1)}\n"
                              "total = round(sum(to_eur(line) for line in lines), 2)\nprint(f'total eur: {total:.2f}')")
        if find(request, r"lines: \["):
            return code_reply("fetch today's USD/EUR rate.", "print(get_rate(pair='USD/EUR'))")
        return fetch_step(request, f"fetch the lines of {invoice}.",
                          f"lines = invoice_lines(invoice='{invoice}')\nprint('lines:', lines)", "no lines")

    agent = code_agent(policy, [invoice_lines, get_rate], "accountant", max_steps=7)
    agent.planning_interval = 10  # one opening plan
    return agent


def build_sort_order(planted: bool, *, invoices: Sequence[tuple[str, str, str]] = (
        ("INV-118", "2026-02-11", "420.00"), ("INV-131", "2026-06-30", "310.00"), ("INV-125", "2026-04-02", "505.00"),
        ("INV-140", "2026-09-15", "275.00"), ("INV-137", "2026-08-01", "640.00"))) -> Any:
    """CodeAgent: ``list_invoices`` (flaky), then code sorting by date to take the three most recent and add their
    amounts; planted: the sort is ascending (the three OLDEST are taken)."""
    rows = [{"invoice": i, "date": d, "amount": float(a)} for i, d, a in invoices]
    list_invoices = make_tool("list_invoices", "A client's invoices with their dates and amounts.",
                              {"client": string("the client")}, "array", lambda client: rows, flaky=True)

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no total"
        client = (re.search(r"client (\w+)", request.task) or [None, "unknown"])[1]
        total = find(request, r"recent total: ([\d.]+) \(([^)]*)\)")
        if total:
            return code_reply("the total answers the task.",
                              f"final_answer('RECENT: {total.group(1)} EUR ({total.group(2)})')")
        if find(request, r"invoices: \["):
            order = "" if planted else ", reverse=True"
            return code_reply("take the three most recent invoices and add their amounts.",
                              f"recent = sorted(invoices, key=lambda row: row['date']{order})[:3]\n"
                              "total = round(sum(row['amount'] for row in recent), 2)\n"
                              "names = ', '.join(row['invoice'] for row in recent)\n"
                              "print(f'recent total: {total:.2f} ({names})')")
        return fetch_step(request, f"list the invoices of {client}.",
                          f"invoices = list_invoices(client='{client}')\nprint('invoices:', invoices)", "no invoices")

    return code_agent(policy, [list_invoices], "analyst", max_steps=6)


BUILDERS.update({"case_compare": build_case_compare, "sort_order": build_sort_order})


def build_swallowed_error(planted: bool, *, sales: Sequence[tuple[str, int]] = (("Lisbon", 48210), ("Porto", 39975),
                                                                              ("Faro", 21440))) -> Any:
    """CodeAgent with a plan: ``month_status`` (flaky) says the month is closed, then ONE loop sums ``store_sales``,
    which refuses a store closed for inventory and names ``archived_sales``; planted: the loop wraps the call in
    ``try/except: continue`` and the refused store is silently left out (the twin's loop asks the archive)."""
    table = dict(sales)

    def live(store: str, month: str) -> str:
        if store == "Faro":
            raise RuntimeError("store_sales: Faro is closed for inventory; its figures are in archived_sales")
        return f"{table.get(store, 0)}"

    month_status = make_tool("month_status", "Whether a month's sales figures are closed (final).",
                             {"month": string("YYYY-MM")}, "string",
                             lambda month: f"month {month}: closed on {month}-30, figures final", flaky=True)
    store_sales = make_tool("store_sales", "A store's sales in a month, in EUR (live system).",
                            {"store": string("the store"), "month": string("YYYY-MM")}, "string", live)
    archived = make_tool("archived_sales", "A store's sales in a month, in EUR (archive).",
                         {"store": string("the store"), "month": string("YYYY-MM")}, "string",
                         lambda store, month: f"{table.get(store, 0)}")

    def stores_of(text: str) -> list[str]:
        found = re.search(r"stores ([A-Z]\w+(?:, [A-Z]\w+)* and [A-Z]\w+)", text)
        return re.split(r", | and ", found.group(1)) if found else []

    def policy(request: ScriptedRequest) -> str:
        stores = stores_of(task_of(request))
        if request.is_planning:
            return survey([f"The stores are {', '.join(stores)}; the month is November 2026."],
                          ["Whether November's figures are final (month_status).",
                           "Each store's November sales (store_sales)."], ["Their total in EUR."],
                          ["Check that the month is closed.", "Get each store's sales in one loop and add them up.",
                           "Report 'TOTAL: <EUR>'."])
        if request.is_final_summary:
            return "no total"
        total = find(request, r"total: (\d+) over (\d+) stores")
        if total:
            return code_reply("the total answers the task.", f"final_answer('TOTAL: {total.group(1)}')")
        if find(request, r"figures final") is None:
            return fetch_step(request, "check that November's figures are final.",
                              "print(month_status(month='2026-11'))", "no month status")
        if planted:
            fallback = "    except Exception:\n        continue\n"
        else:
            fallback = ("    except Exception as error:\n        print('live system refused', store, '-', error)\n"
                        "        total += int(archived_sales(store=store, month='2026-11'))\n        counted += 1\n")
        return code_reply("the month is closed: get every store's sales and add them up.",
                          f"total, counted = 0, 0\nfor store in {stores!r}:\n    try:\n"
                          "        total += int(store_sales(store=store, month='2026-11'))\n        counted += 1\n"
                          f"{fallback}print(f'total: {{total}} over {{counted}} stores')")

    agent = code_agent(policy, [month_status, store_sales, archived], "analyst", max_steps=6)
    agent.planning_interval = 10  # one opening plan
    return agent


BUILDERS.update({"swallowed_error": build_swallowed_error})


def build_wrong_variable(planted: bool, *, lines: Sequence[tuple[str, str, int]] = (
        ("desk", "249.00", 2), ("chair", "129.50", 4), ("lamp", "39.90", 3)), vat: int = 23) -> Any:
    """CodeAgent: ``get_quote_lines`` (flaky), then ONE code step computing the subtotal and the total with VAT and
    answering; planted: the answer formats ``subtotal`` where the task asks for the total with VAT."""
    rows = [{"item": i, "unit_eur": float(p), "qty": q} for i, p, q in lines]
    get_lines = make_tool("get_quote_lines", "The lines of a quote: item, unit price in EUR without VAT, quantity.",
                          {"quote": string("the quote id")}, "array", lambda quote: rows, flaky=True)

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no total"
        quote = (re.search(r"quote (Q-\d+)", request.task) or [None, "Q-1"])[1]
        if find(request, r"lines: \["):
            shown = "subtotal" if planted else "total"
            return code_reply(f"add the lines up, add {vat}% VAT and answer.",
                              "subtotal = round(sum(line['unit_eur'] * line['qty'] for line in lines), 2)\n"
                              f"total = round(subtotal * (1 + {vat} / 100), 2)\n"
                              "print(f'subtotal: {subtotal:.2f}, total with VAT: {total:.2f}')\n"
                              f"final_answer(f'TOTAL: {{{shown}:.2f}} EUR incl. VAT')")
        return fetch_step(request, f"fetch the lines of {quote}.",
                          f"lines = get_quote_lines(quote='{quote}')\nprint('lines:', lines)", "no lines")

    return code_agent(policy, [get_lines], "sales_agent", max_steps=5)


def build_misread_report(planted: bool, *, gross: str = "182,400", net: str = "151,920") -> Any:
    """Manager ToolCallingAgent + managed ``finance_agent`` (flaky ``pnl_report``), whose answer quotes the report's
    gross and net revenue; planted: the manager reports the gross figure where the task asks for the net one."""
    pnl = make_tool("pnl_report", "A quarter's profit and loss summary.", {"quarter": string("like Q3 2026")}, "string",
                    lambda quarter: f"P&L {quarter}: gross revenue {gross} EUR; refunds and discounts 30,480 EUR; "
                                    f"net revenue {net} EUR; operating costs 98,300 EUR", flaky=True)

    def finance(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no report"
        found = find(request, r"P&L [^:]+: (.+)")
        if found:
            return [Call("final_answer", {"answer": f"From the P&L: {found.group(1)}."})]
        quarter = re.search(r"(Q\d \d{4})", request.task)
        if quarter is None or errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("pnl_report", {"quarter": quarter.group(1)})]

    worker = tool_agent(finance, [pnl], "finance_agent", max_steps=4, description="Reads the P&L reports.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        answers = managed_answers(request, "finance_agent")
        if answers:
            label = "gross revenue" if planted else "net revenue"
            found = re.search(rf"{label} ([\d,]+) EUR", answers[-1])
            return [Call("final_answer", {"answer": f"NET: {found.group(1) if found else 'unknown'} EUR"})]
        quarter = re.search(r"(Q\d \d{4})", request.task)
        return [Call("finance_agent", {"task": f"Summarise the P&L of {quarter.group(1) if quarter else '?'}."})]

    return tool_agent(manager, [], "manager", max_steps=3, managed=[worker])


BUILDERS.update({"wrong_variable": build_wrong_variable, "misread_report": build_misread_report})


def build_same_bug(planted: bool, *, scores: Sequence[int] = (71, 84, 90, 66, 78)) -> Any:
    """CodeAgent: ``exam_scores`` (flaky), then code that fails with a TypeError (the pass mark written as a string);
    planted: the agent sends the SAME code again after each failure (a loop without progress) until max steps; the
    twin fixes the name after the first failure."""
    get_scores = make_tool("exam_scores", "The scores of a class in an exam.", {"klass": string("the class")},
                           "array", lambda klass: list(scores), flaky=True)

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "I could not compute the pass rate."
        passed = find(request, r"pass rate: ([\d.]+)%")
        if passed:
            return code_reply("the rate answers the task.", f"final_answer('PASS: {passed.group(1)}%')")
        if find(request, r"scores: \["):
            failed = [o for o in request.observations if "not supported between" in o]
            threshold = "'75'" if planted or not failed else "75"
            thought = "try again." if failed and planted else "compute the share of scores of at least 75."
            return code_reply(thought, f"threshold = {threshold}  # the pass mark from the task\n"
                                       "rate = round(100 * sum(1 for s in scores if s >= threshold) / len(scores), 1)\n"
                                       "print(f'pass rate: {rate}%')")
        return fetch_step(request, "fetch the class's scores.",
                          "scores = exam_scores(klass='7B')\nprint('scores:', scores)", "no scores")

    return code_agent(policy, [get_scores], "teacher_aide", max_steps=6)


BUILDERS.update({"same_bug": build_same_bug})
