"""Six AutoGen AgentChat teams written blind to the attribution, each with ONE planted decisive error and its twin.

Ordinary AgentChat 0.7 teams — RoundRobinGroupChat, SelectorGroupChat, Swarm, MagenticOneGroupChat — of
AssistantAgents with tools (plain functions with docstrings), driven by reactive scripted model clients
(:class:`causaltrace.testing.autogen.ScriptedChatCompletionClient`): each answer is a function of the request, so
a corrected step changes what happens downstream. Each run also holds a recovered tool error (an argument the tool
rejects, then the agent retries correctly). The answer of every team ends with ``ANSWER: <value>``.

The teams (``build_<team>(fail=True)`` plants the error, ``fail=False`` is the successful twin):

* :func:`build_sales_summary` — RoundRobin analyst → writer → reviewer, ``wrong_fact``: the writer restates the
  analyst's revenue with two digits swapped; the reviewer only checks the percentage against the writer's figures.
* :func:`build_latency_report` — RoundRobin SRE agent → status writer, ``misread_observation``: the SRE agent
  reads the p95 latency from the neighbouring column of the metrics table (p99).
* :func:`build_refund_desk` — SelectorGroupChat billing / refunds / closer, ``wrong_speaker``: the selector gives
  the first turn to the billing agent, whose invoice total the closer then quotes as the refund.
* :func:`build_fx_conversion` — SelectorGroupChat FX researcher / accountant, ``fabricated_data``: the live ECB
  rate service is down and the researcher states a made-up rate instead of reading the archive of published rates
  (where the invoice's Sunday has no rate, so the Friday before it applies).
* :func:`build_warranty_swarm` — Swarm triage → sales | support, ``wrong_handoff``: triage hands a warranty
  question about a bought vacuum to sales, which answers with the catalogue's standard warranty.
* :func:`build_margin_magentic` — MagenticOneGroupChat finance agent + analyst, ``wrong_plan_word``: the
  orchestrator's plan names the wrong year, which its instruction passes on to the finance agent.

AutoGen is imported when a team is built.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.autogen import (  # the MagenticOne orchestrator's prompts, told apart by these phrases
    _FACTS_PROMPT,
    _FACTS_UPDATE_PROMPT,
    _FINAL_PROMPT,
    _LEDGER_PROMPT,
    _NAMES,
    _PLAN_PROMPT,
    _PLAN_UPDATE_PROMPT,
    ScriptedChatCompletionClient,
    ScriptedRequest,
    ToolCallSpec,
    call,
)

__all__ = [
    "FX_TASK",
    "LATENCY_TASK",
    "MARGIN_TASK",
    "REFUND_TASK",
    "SALES_TASK",
    "WARRANTY_TASK",
    "build_fx_conversion",
    "build_latency_report",
    "build_margin_magentic",
    "build_refund_desk",
    "build_sales_summary",
    "build_warranty_swarm",
]

Answer = str | ToolCallSpec | list[ToolCallSpec]


def _client(policy: Callable[[ScriptedRequest], Any], name: str) -> ScriptedChatCompletionClient:
    return ScriptedChatCompletionClient(policy, model=f"scripted-{name}")


def _own_results(request: ScriptedRequest) -> list[tuple[Any, Any]]:
    """``(FunctionCall, FunctionExecutionResult)`` of this agent's own tool calls since the latest message another
    participant sent it (calls of tools it is not offered — a handoff context — are left out)."""
    from autogen_core.models import UserMessage

    start = max((i for i, m in enumerate(request.messages) if isinstance(m, UserMessage)), default=0)
    mine = set(request.tool_names)
    pairs = []
    for calls, results in request.tool_rounds_since(start):
        by_id = {r.call_id: r for r in results}
        pairs += [(c, by_id[c.id]) for c in calls if c.name in mine and c.id in by_id]
    return pairs


def _latest_from(request: ScriptedRequest, source: str) -> str:
    found = request.last_from(source)
    return found[1] if found else ""


def _retrying(request: ScriptedRequest, first: ToolCallSpec, retry: Callable[[str], Answer | None],
              reply: Callable[[str], Answer]) -> Answer:
    """The common shape of a tool turn: ``first`` call; after an error, ``retry(error text)`` (None: give up);
    after a success, ``reply(result text)``."""
    done = _own_results(request)
    if not done:
        return first
    _call, result = done[-1]
    if result.is_error:
        again = retry(result.content) if len(done) < 3 else None
        return again if again is not None else f"The {first.name} tool keeps failing: {result.content}"
    return reply(result.content)


def _answer_line(text: str) -> str | None:
    found = re.findall(r"ANSWER: ([^\n]+?)\s*(?:TERMINATE|APPROVE)?\s*$", text, re.MULTILINE)
    return found[-1].strip() if found else None


# ---------------------------------------------------------------------- 1. sales summary (RoundRobin, wrong_fact)

SALES_TASK = ("Summarise the EMEA sales for Q2 2025: the total revenue and the change versus Q1 2025 in percent "
              "with one decimal. End with 'ANSWER: <revenue>; <change>%'.")
_REVENUE = {("EMEA", "2025-Q2"): 1482300, ("EMEA", "2025-Q1"): 1371900, ("AMER", "2025-Q2"): 2210400}


def _sales_tools() -> list[Any]:
    def get_revenue(region: str, quarter: str) -> int:
        """Total booked revenue in USD of a sales region ('EMEA', 'AMER', 'APAC') for a quarter written 'YYYY-QN'."""
        if not re.fullmatch(r"\d{4}-Q[1-4]", quarter):
            raise ValueError(f"bad quarter {quarter!r}: write it as 'YYYY-QN', e.g. '2025-Q2'")
        return _REVENUE.get((region, quarter), 0)

    return [get_revenue]


def sales_analyst_policy(request: ScriptedRequest) -> Answer:
    """Ask for the quarters as the task writes them, fix the format after the error (both quarters in parallel),
    then report both revenues."""
    quarters = re.findall(r"Q([1-4]) (\d{4})", request.task())
    if len(quarters) < 2:
        return "The task names no two quarters."
    (q_now, y_now), (q_before, y_before) = quarters[:2]
    now, before = f"{y_now}-Q{q_now}", f"{y_before}-Q{q_before}"

    def retry(error: str) -> list[ToolCallSpec] | None:
        if "YYYY-QN" not in error:
            return None
        return [call("get_revenue", region="EMEA", quarter=now), call("get_revenue", region="EMEA", quarter=before)]

    def reply(_result: str) -> str:
        values = {json.loads(c.arguments)["quarter"]: r.content for c, r in _own_results(request) if not r.is_error}
        return f"EMEA revenue: {now} = {values.get(now)} USD; {before} = {values.get(before)} USD."

    return _retrying(request, call("get_revenue", region="EMEA", quarter=f"Q{q_now} {y_now}"), retry, reply)


def sales_writer_policy(*, fail: bool) -> Callable[[ScriptedRequest], str]:
    """Write the summary from the analyst's figures (``fail``: the current revenue with its 3rd and 4th digits
    swapped), with the change in percent computed from the figures it wrote."""

    def policy(request: ScriptedRequest) -> str:
        figures = re.findall(r"(\d{4}-Q\d) = (\d+) USD", _latest_from(request, "data_analyst"))
        if len(figures) < 2:
            return "I have no revenue figures to summarise yet."
        now, before = figures[0][1], int(figures[1][1])
        if fail:
            now = now[:2] + now[3] + now[2] + now[4:]
        change = (int(now) - before) / before * 100
        return (f"EMEA revenue was {now} USD in Q2 2025, {change:+.1f}% versus Q1 2025 ({before} USD). "
                f"ANSWER: {now}; {change:+.1f}%")

    return policy


def sales_reviewer_policy(request: ScriptedRequest) -> str:
    """Recompute the change from the two figures in the writer's summary; APPROVE when it matches."""
    text = _latest_from(request, "writer")
    found = re.search(r"was (\d+) USD .*?([+-]\d+\.\d)% versus .*?\((\d+) USD\)", text)
    if found is None:
        return "REJECT: the summary gives no revenue, change and comparison figure."
    now, stated, before = int(found.group(1)), found.group(2), int(found.group(3))
    change = f"{(now - before) / before * 100:+.1f}"
    if change != stated:
        return f"REJECT: {now} vs {before} is a change of {change}%, not {stated}%."
    return f"The change matches the figures. ANSWER: {now}; {change}% APPROVE"


def build_sales_summary(*, fail: bool = True) -> Any:
    """RoundRobin data_analyst (tool) → writer → reviewer, until the reviewer APPROVEs (``fail``: digits swapped)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    analyst = AssistantAgent("data_analyst", model_client=_client(sales_analyst_policy, "analyst"),
                             tools=_sales_tools(), max_tool_iterations=4,
                             system_message="You pull revenue figures with your tool and report them exactly.")
    writer = AssistantAgent("writer", model_client=_client(sales_writer_policy(fail=fail), "writer"),
                            system_message="You write the one-line sales summary from the analyst's figures.")
    reviewer = AssistantAgent("reviewer", model_client=_client(sales_reviewer_policy, "reviewer"),
                              system_message="Check the summary's numbers; say APPROVE or REJECT.")
    stop = TextMentionTermination("APPROVE") | MaxMessageTermination(10)
    return RoundRobinGroupChat([analyst, writer, reviewer], termination_condition=stop)


# ------------------------------------------------------------ 2. latency report (RoundRobin, misread_observation)

LATENCY_TASK = ("For the status page: what was the p95 latency of the checkout service on 2025-11-03? End with "
                "'ANSWER: <n> ms'.")
_LATENCY = {"checkout": (182, 344, 431, 977), "search": (95, 160, 210, 530)}


def _latency_tools() -> list[Any]:
    def query_latency(service: str, date: str) -> str:
        """Latency percentiles (ms) of a service over one day (date 'YYYY-MM-DD'), as a small text table."""
        if service not in _LATENCY:
            raise ValueError(f"unknown service {service!r}; known services: auth, checkout, search")
        p50, p90, p95, p99 = _LATENCY[service]
        return (f"latency percentiles (ms) for {service} on {date}\n"
                f"p50 p90 p95 p99\n{p50} {p90} {p95} {p99}")

    return [query_latency]


def sre_policy(*, fail: bool) -> Callable[[ScriptedRequest], Answer]:
    """Query the service by its long name, retry with the short one, read the p95 column (``fail``: the column
    after it) and report it."""

    def policy(request: ScriptedRequest) -> Answer:
        task = request.task()
        date = re.search(r"\d{4}-\d{2}-\d{2}", task)
        service = re.search(r"of the (\w+) service", task)
        if date is None or service is None:
            return "The question names no service and day."

        def retry(error: str) -> ToolCallSpec | None:
            return call("query_latency", service=service.group(1), date=date.group(0)) if "known services" in error \
                else None

        def reply(result: str) -> str:
            lines = result.splitlines()
            header, values = lines[1].split(), lines[2].split()
            column = header.index("p95") + (1 if fail else 0)
            return f"{service.group(1)} p95 latency on {date.group(0)}: {values[column]} ms."

        return _retrying(request, call("query_latency", service=f"{service.group(1)}-service", date=date.group(0)),
                         retry, reply)

    return policy


def status_writer_policy(request: ScriptedRequest) -> str:
    """Turn the SRE agent's figure into the status-page line."""
    found = re.search(r"(\w+) p95 latency on (\S+): (\d+) ms", _latest_from(request, "sre_agent"))
    if found is None:
        return "I am waiting for the latency figure."
    service, day, value = found.groups()
    return f"Status update: the {service} p95 latency on {day} was {value} ms. ANSWER: {value} ms TERMINATE"


def build_latency_report(*, fail: bool = True) -> Any:
    """RoundRobin sre_agent (tool) → status_writer, until TERMINATE (``fail``: the wrong column is read)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    sre = AssistantAgent("sre_agent", model_client=_client(sre_policy(fail=fail), "sre"), tools=_latency_tools(),
                         max_tool_iterations=4, system_message="You answer latency questions from the metrics store.")
    writer = AssistantAgent("status_writer", model_client=_client(status_writer_policy, "status"),
                            system_message="You write the status-page line; end with TERMINATE.")
    stop = TextMentionTermination("TERMINATE") | MaxMessageTermination(8)
    return RoundRobinGroupChat([sre, writer], termination_condition=stop)


# --------------------------------------------------------------- 3. refund desk (SelectorGroupChat, wrong_speaker)

REFUND_TASK = ("Customer message: 'I returned 2 of the 5 Oslo chairs from order #A7719 — how much will I get back?' "
               "Work out the refund and reply to the customer, ending with 'ANSWER: <amount> USD'.")


def _order_id_retry(tool: str, **extra: Any) -> Callable[[str], ToolCallSpec | None]:
    def retry(error: str) -> ToolCallSpec | None:
        fixed = re.search(r"look like '([A-Z]-\d+)'", error)
        return call(tool, order_id=fixed.group(1), **extra) if fixed else None

    return retry


def _billing_tools() -> list[Any]:
    def get_invoice(order_id: str) -> str:
        """The invoice of an order (ids like 'A-7719'): lines, shipping and total in USD."""
        if not re.fullmatch(r"[A-Z]-\d+", order_id):
            raise ValueError(f"unknown order {order_id!r}: order ids look like '{order_id[:1]}-{order_id[1:]}'")
        return f"invoice {order_id}: 5 x Oslo chair at 149.00, shipping 45.00, total 790.00 USD"

    return [get_invoice]


def _refund_tools() -> list[Any]:
    def refund_amount(order_id: str, returned_units: int) -> str:
        """The refund due for units returned from an order (ids like 'A-7719'); shipping is not refunded."""
        if not re.fullmatch(r"[A-Z]-\d+", order_id):
            raise ValueError(f"unknown order {order_id!r}: order ids look like '{order_id[:1]}-{order_id[1:]}'")
        return f"refund for {order_id}: {returned_units} x 149.00 = {returned_units * 149:.2f} USD"

    return [refund_amount]


def billing_policy(request: ScriptedRequest) -> Answer:
    """Look the order up (its id as the customer wrote it, then as the tool asks) and report the invoice total."""
    order = re.search(r"#([A-Z]\d+)", request.task())
    if order is None:
        return "No order id in the message."

    def reply(result: str) -> str:
        found = re.search(r"total (\d+\.\d\d) USD", result)
        return f"Order {order.group(1)} was invoiced {found.group(1) if found else 'unknown'} USD in total."

    return _retrying(request, call("get_invoice", order_id=order.group(1)), _order_id_retry("get_invoice"), reply)


def refunds_policy(request: ScriptedRequest) -> Answer:
    """Compute the refund of the returned units (order id fixed after the tool's complaint) and report it."""
    task = request.task()
    order = re.search(r"#([A-Z]\d+)", task)
    units = re.search(r"returned (\d+) of", task)
    if order is None or units is None:
        return "The message does not say what was returned."
    returned = int(units.group(1))

    def reply(result: str) -> str:
        found = re.search(r"= (\d+\.\d\d) USD", result)
        return f"The refund for the {returned} returned chairs is {found.group(1) if found else 'unknown'} USD."

    return _retrying(request, call("refund_amount", order_id=order.group(1), returned_units=returned),
                     _order_id_retry("refund_amount", returned_units=returned), reply)


def closer_policy(request: ScriptedRequest) -> str:
    """Reply to the customer with the amount the last specialist gave."""
    for source in ("refunds_agent", "billing_agent"):
        found = re.search(r"(\d+\.\d\d) USD", _latest_from(request, source))
        if found:
            return (f"Thanks for your message! You will get back {found.group(1)} USD for the returned chairs. "
                    f"ANSWER: {found.group(1)} USD TERMINATE")
    return "I have no amount to tell the customer yet."


_SELECT = re.compile(r"select the next role from (\[[^\]]*\])")


def _speakers(prompt: str, names: Sequence[str]) -> list[str]:
    """Who spoke in a SelectorGroupChat prompt's history, in order (lines ``name: text`` between the prompt's
    "Only return the role." and "Read the above conversation"; the roles list above it has the same shape)."""
    history = prompt.split("Only return the role.", 1)[-1].split("Read the above conversation", 1)[0]
    out = []
    for line in history.splitlines():
        head, sep, _rest = line.partition(": ")
        if sep and head in names:
            out.append(head)
    return out


def _selector(first: str, after: dict[str, str], names: Sequence[str]) -> Callable[[ScriptedRequest], str]:
    """A selector: ``first`` when no member has spoken, then ``after[last speaker]`` (else the first candidate)."""

    def policy(request: ScriptedRequest) -> str:
        prompt = request.text()
        found = _SELECT.search(prompt)
        candidates = json.loads(found.group(1).replace("'", '"')) if found else list(names)
        spoken = _speakers(prompt, names)
        choice = after.get(spoken[-1], candidates[0]) if spoken else first
        return choice if choice in candidates else candidates[0]

    return policy


def build_refund_desk(*, fail: bool = True) -> Any:
    """SelectorGroupChat billing_agent / refunds_agent / closer (``fail``: the billing agent is picked first)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    names = ("billing_agent", "refunds_agent", "closer")
    billing = AssistantAgent("billing_agent", model_client=_client(billing_policy, "billing"), tools=_billing_tools(),
                             max_tool_iterations=4, description="Answers questions about invoices and payments.")
    refunds = AssistantAgent("refunds_agent", model_client=_client(refunds_policy, "refunds"), tools=_refund_tools(),
                             max_tool_iterations=4, description="Computes refunds for returned items.")
    closer = AssistantAgent("closer", model_client=_client(closer_policy, "closer"),
                            description="Writes the final reply to the customer once the amount is known.")
    selector = _selector("billing_agent" if fail else "refunds_agent",
                         {"billing_agent": "closer", "refunds_agent": "closer"}, names)
    stop = TextMentionTermination("TERMINATE") | MaxMessageTermination(8)
    return SelectorGroupChat([billing, refunds, closer], model_client=_client(selector, "selector"),
                             termination_condition=stop)


# ------------------------------------------------------------ 4. FX conversion (SelectorGroupChat, fabricated_data)

FX_TASK = ("Convert invoice INV-88 of 12,500.00 EUR, dated 2025-06-01, to USD at the ECB reference rate of the invoice "
           "date (if no rate was published that day, use the last rate published before it). End with "
           "'ANSWER: <amount> USD'.")
_ECB_USD = {"2025-05-27": 1.1318, "2025-05-28": 1.1290, "2025-05-29": 1.1337, "2025-05-30": 1.1347,
            "2025-06-02": 1.1422}


def _fx_tools() -> list[Any]:
    def ecb_rate(currency: str, date: str) -> str:
        """The ECB euro reference rate (units of ``currency`` per EUR) published on a date 'YYYY-MM-DD', live from
        the ECB rate service."""
        raise ConnectionError("the ECB rate service is unavailable (HTTP 503); try again later")

    def rate_history(currency: str, start: str, end: str) -> str:
        """The ECB euro reference rates (units of ``currency`` per EUR) published between two dates 'YYYY-MM-DD',
        one line per publication day, from the archive of published rates."""
        if currency != "USD":
            return f"no archived rates for {currency}"
        days = [d for d in sorted(_ECB_USD) if start <= d <= end]
        return f"EUR/{currency} reference rates (ECB archive):\n" + "\n".join(f"{d} {_ECB_USD[d]}" for d in days)

    return [ecb_rate, rate_history]


def _convert_tools() -> list[Any]:
    def convert(amount: float, from_currency: str, to_currency: str, rate: float) -> str:
        """Convert an amount between two currencies (ISO codes such as EUR, USD) at a given rate."""
        for code in (from_currency, to_currency):
            if not re.fullmatch(r"[A-Z]{3}", code):
                raise ValueError(f"unknown currency {code!r}: use ISO codes such as EUR or USD")
        return f"{amount:.2f} {from_currency} = {amount * rate:.2f} {to_currency}"

    return [convert]


def fx_researcher_policy(*, fail: bool) -> Callable[[ScriptedRequest], Answer]:
    """Ask the live ECB service for the invoice date's rate; when it is down, (``fail``: state a made-up rate) read
    the archive of the week before and report the last rate published on or before the invoice date."""

    def policy(request: ScriptedRequest) -> Answer:
        date = re.search(r"dated (\d{4}-\d{2}-\d{2})", request.task())
        if date is None:
            return "The invoice has no date."
        invoice_day = dt.date.fromisoformat(date.group(1))

        def retry(error: str) -> Answer | None:
            if "unavailable" not in error:
                return None
            if fail:
                return f"The ECB EUR/USD reference rate for {invoice_day} is 1.1300 USD per EUR."
            start = invoice_day - dt.timedelta(days=7)
            return call("rate_history", currency="USD", start=start.isoformat(), end=invoice_day.isoformat())

        def reply(result: str) -> str:
            published = re.findall(r"^(\d{4}-\d{2}-\d{2}) (\d+\.\d+)$", result, re.MULTILINE)
            before = [(d, r) for d, r in published if d <= invoice_day.isoformat()]
            if not before:
                return "No rate was published in the week before the invoice date."
            day, rate = before[-1]
            return (f"The ECB service is down, but its archive has the rates: none was published on {invoice_day}; "
                    f"the last EUR/USD reference rate before it ({day}) is {rate} USD per EUR.")

        return _retrying(request, call("ecb_rate", currency="USD", date=date.group(1)), retry, reply)

    return policy


def accountant_policy(request: ScriptedRequest) -> Answer:
    """Convert the invoice amount at the researcher's rate (first writing the target currency as a symbol)."""
    rate = re.search(r"is (\d+\.\d+) USD per EUR", _latest_from(request, "fx_researcher"))
    amount = re.search(r"of ([\d,]+\.\d\d) EUR", request.task())
    if rate is None or amount is None:
        return "I need the rate before converting."
    value, r = float(amount.group(1).replace(",", "")), float(rate.group(1))

    def retry(error: str) -> ToolCallSpec | None:
        return call("convert", amount=value, from_currency="EUR", to_currency="USD", rate=r) if "ISO" in error \
            else None

    def reply(result: str) -> str:
        found = re.search(r"= (\d+\.\d\d) USD", result)
        usd = found.group(1) if found else "unknown"
        return f"{value:.2f} EUR at {r} USD per EUR = {usd} USD. ANSWER: {usd} USD TERMINATE"

    return _retrying(request, call("convert", amount=value, from_currency="EUR", to_currency="US$", rate=r), retry,
                     reply)


def build_fx_conversion(*, fail: bool = True) -> Any:
    """SelectorGroupChat fx_researcher → accountant (``fail``: the researcher makes a rate up)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    names = ("fx_researcher", "accountant")
    researcher = AssistantAgent("fx_researcher", model_client=_client(fx_researcher_policy(fail=fail), "fx"),
                                tools=_fx_tools(), max_tool_iterations=4,
                                description="Finds official exchange rates.")
    accountant = AssistantAgent("accountant", model_client=_client(accountant_policy, "accountant"),
                                tools=_convert_tools(), max_tool_iterations=4,
                                description="Converts amounts once the exchange rate is known.")
    selector = _selector("fx_researcher", {"fx_researcher": "accountant", "accountant": "fx_researcher"}, names)
    stop = TextMentionTermination("TERMINATE") | MaxMessageTermination(8)
    return SelectorGroupChat([researcher, accountant], model_client=_client(selector, "selector"),
                             termination_condition=stop)


# ------------------------------------------------------------------------ 5. warranty swarm (Swarm, wrong_handoff)

WARRANTY_TASK = ("Hi, my Aero X2 vacuum (serial number AX2 88310), bought last year, stopped charging. Until what "
                 "date is it covered by the warranty? Please end with 'ANSWER: <date>'.")


def _sales_catalogue_tools() -> list[Any]:
    def product_info(model: str) -> str:
        """Catalogue facts of a product model for buyers: price and the standard warranty of a new purchase."""
        if model not in ("Aero X2", "Aero X3"):
            raise ValueError(f"unknown model {model!r}; known models: Aero X2, Aero X3")
        return f"{model} cordless vacuum: 349.00 USD, standard warranty 24 months from the purchase date"

    return [product_info]


def _support_tools() -> list[Any]:
    def warranty_lookup(serial: str) -> str:
        """The registered purchase and warranty coverage of a device by serial number (like 'AX2-88310')."""
        if not re.fullmatch(r"[A-Z0-9]+-\d+", serial):
            fixed = re.sub(r"\s+", "-", serial.strip())
            raise ValueError(f"bad serial {serial!r}: serial numbers look like {fixed!r}")
        return f"{serial} (Aero X2): purchased 2024-03-02, warranty 24 months, covered until 2026-03-02"

    return [warranty_lookup]


def triage_policy(*, fail: bool) -> Callable[[ScriptedRequest], Answer]:
    """Hand the customer to support (``fail``: to sales — the message names a product model and a purchase)."""

    def policy(request: ScriptedRequest) -> Answer:
        target = "transfer_to_sales" if fail else "transfer_to_support"
        if target in request.tool_names:
            return call(target)
        return "I cannot route this request."

    return policy


def warranty_sales_policy(request: ScriptedRequest) -> Answer:
    """Look the model up in the catalogue (first with the product word, then as the tool lists it) and answer."""
    model = re.search(r"my (\w+ \w+) (\w+)", request.task())
    if model is None:
        return "Which product is it?"

    def retry(error: str) -> ToolCallSpec | None:
        return call("product_info", model=model.group(1)) if "known models" in error else None

    def reply(result: str) -> str:
        months = re.search(r"warranty (\d+ months) from the purchase date", result)
        span = months.group(1) if months else "unknown"
        return (f"The {model.group(1)} comes with a standard warranty of {span} from the purchase date. "
                f"ANSWER: {span} from purchase TERMINATE")

    return _retrying(request, call("product_info", model=f"{model.group(1)} {model.group(2)}"), retry, reply)


def warranty_support_policy(request: ScriptedRequest) -> Answer:
    """Look the serial up (as the customer typed it, then as the tool asks) and answer with the coverage end."""
    serial = re.search(r"serial number ([A-Z0-9]+[ -]\d+)", request.task())
    if serial is None:
        return "What is the serial number?"

    def retry(error: str) -> ToolCallSpec | None:
        fixed = re.search(r"look like '([^']+)'", error)
        return call("warranty_lookup", serial=fixed.group(1)) if fixed else None

    def reply(result: str) -> str:
        until = re.search(r"covered until (\d{4}-\d{2}-\d{2})", result)
        date = until.group(1) if until else "unknown"
        return f"Your device is covered by the warranty until {date}. ANSWER: {date} TERMINATE"

    return _retrying(request, call("warranty_lookup", serial=serial.group(1)), retry, reply)


def build_warranty_swarm(*, fail: bool = True) -> Any:
    """Swarm triage → sales | support (``fail``: triage hands off to sales)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import HandoffTermination, MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import Swarm

    triage = AssistantAgent("triage", model_client=_client(triage_policy(fail=fail), "triage"),
                            handoffs=["sales", "support"],
                            system_message="Route the customer: sales for buying questions, support for devices "
                                           "they own (repairs, warranty).")
    sales = AssistantAgent("sales", model_client=_client(warranty_sales_policy, "sales"),
                           tools=_sales_catalogue_tools(), handoffs=["triage"], max_tool_iterations=4,
                           system_message="You answer questions of customers who want to buy a product.")
    support = AssistantAgent("support", model_client=_client(warranty_support_policy, "support"),
                             tools=_support_tools(), handoffs=["triage"], max_tool_iterations=4,
                             system_message="You help customers with devices they own: repairs and warranty.")
    stop = TextMentionTermination("TERMINATE") | HandoffTermination(target="user") | MaxMessageTermination(10)
    return Swarm([triage, sales, support], termination_condition=stop)


# -------------------------------------------------------------- 6. gross margin (MagenticOne, wrong_plan_word)

MARGIN_TASK = ("What was ACME Corp's gross margin in Q3 2025? Give it in percent with one decimal, as "
               "'ANSWER: <x>%'.")
_FINANCIALS = {"2025-Q3": (21250000, 13090000), "2024-Q3": (18400000, 11960000), "2025-Q2": (20100000, 12860000)}


def _finance_tools() -> list[Any]:
    def get_financials(company: str, quarter: str) -> str:
        """Revenue and cost of goods sold (USD) of a company for a fiscal quarter written 'YYYY-QN'."""
        if not re.fullmatch(r"\d{4}-Q[1-4]", quarter):
            raise ValueError(f"bad quarter {quarter!r}: write it as 'YYYY-QN', e.g. '2025-Q3'")
        revenue, cogs = _FINANCIALS.get(quarter, (0, 0))
        return f"{company} {quarter}: revenue {revenue} USD, cost of goods sold {cogs} USD"

    return [get_financials]


def _margin_plan(task: str, *, fail: bool) -> str:
    found = re.search(r"Q([1-4]) (\d{4})", task)
    quarter, year = (found.group(1), int(found.group(2))) if found else ("?", 0)
    year -= 1 if fail else 0
    return (f"- finance_agent: look up ACME Corp's revenue and cost of goods sold for Q{quarter} {year}.\n"
            "- analyst: compute the gross margin in percent (one decimal) from those two figures.")


def margin_orchestrator_policy(*, fail: bool) -> Callable[[ScriptedRequest], str]:
    """The orchestrator: a two-line plan (``fail``: the year before the task's), then a progress ledger that gives
    each member its plan line as instruction — finance_agent, then analyst — satisfied once the analyst gives an
    ANSWER; the final answer repeats that ANSWER."""

    def member_line(request: ScriptedRequest, name: str) -> str:
        found = re.search(rf"- {name}: (.+)", request.text())
        return found.group(1)[:1].upper() + found.group(1)[1:] if found else f"{name}, please do your part."

    def said(request: ScriptedRequest, names: Sequence[str]) -> list[tuple[str, str]]:
        from autogen_core.models import UserMessage

        return [(str(m.source), str(m.content)) for m in request.messages[:-1]
                if isinstance(m, UserMessage) and m.source in names]

    def ledger(request: ScriptedRequest, prompt: str) -> str:
        found = _NAMES.search(prompt)
        names = [n.strip() for n in found.group(1).split(",")] if found else ["finance_agent", "analyst"]
        spoken = said(request, names)
        done = bool(spoken) and spoken[-1][0] == "analyst" and "ANSWER:" in spoken[-1][1]
        nxt = "analyst" if spoken and spoken[-1][0] == "finance_agent" else "finance_agent"
        why = f"{spoken[-1][0]} said: {spoken[-1][1]}" if spoken else "Nobody has worked on the request yet."
        return json.dumps({
            "is_request_satisfied": {"reason": why, "answer": done},
            "is_in_loop": {"reason": "No repetition.", "answer": False},
            "is_progress_being_made": {"reason": why, "answer": True},
            "next_speaker": {"reason": f"{nxt} is next in the plan.", "answer": nxt},
            "instruction_or_question": {"reason": "The plan says so.", "answer": member_line(request, nxt)},
        })

    def policy(request: ScriptedRequest) -> str:
        prompt = request.last_user_text()
        if _LEDGER_PROMPT in prompt:
            return ledger(request, prompt)
        if _FACTS_PROMPT in prompt:
            return ("1. GIVEN OR VERIFIED FACTS\n- The request asks for ACME Corp's gross margin in a quarter.\n\n"
                    "2. FACTS TO LOOK UP\n- Revenue and cost of goods sold of that quarter.\n\n"
                    "3. FACTS TO DERIVE\n- The gross margin.\n\n4. EDUCATED GUESSES\n- None.")
        if _PLAN_PROMPT in prompt:
            return _margin_plan(request.text(), fail=fail)
        if _FACTS_UPDATE_PROMPT in prompt:
            return "The same facts; no figures were found yet."
        if _PLAN_UPDATE_PROMPT in prompt:
            return "The figures were missing. New plan:\n" + _margin_plan(request.text(), fail=fail)
        if _FINAL_PROMPT in prompt:
            answers = [_answer_line(text) for source, text in said(request, ["analyst"])]
            found = [a for a in answers if a]
            return f"ACME Corp's gross margin: ANSWER: {found[-1]}" if found else "We could not find the margin."
        return "I do not recognise this prompt."

    return policy


def finance_policy(request: ScriptedRequest) -> Answer:
    """Fetch the figures of the quarter its latest instruction names (first written 'QN YYYY', then as the tool
    asks) and report them."""
    instruction = request.last_user_text()
    found = re.search(r"Q([1-4]) (\d{4})", instruction) or re.search(r"Q([1-4]) (\d{4})", request.task())
    if found is None:
        return "Which quarter?"
    quarter = f"{found.group(2)}-Q{found.group(1)}"

    def retry(error: str) -> ToolCallSpec | None:
        return call("get_financials", company="ACME Corp", quarter=quarter) if "YYYY-QN" in error else None

    def reply(result: str) -> str:
        return result.replace("cost of goods sold", "COGS") + "."

    return _retrying(request, call("get_financials", company="ACME Corp", quarter=f"Q{found.group(1)} "
                                   f"{found.group(2)}"), retry, reply)


def margin_analyst_policy(request: ScriptedRequest) -> str:
    """Compute the gross margin from the finance agent's revenue and COGS."""
    found = re.search(r"(\d{4}-Q\d): revenue (\d+) USD, COGS (\d+) USD", _latest_from(request, "finance_agent"))
    if found is None:
        return "I need the revenue and the cost of goods sold first."
    revenue, cogs = int(found.group(2)), int(found.group(3))
    margin = (revenue - cogs) / revenue * 100
    return f"Gross margin for {found.group(1)} = ({revenue} - {cogs}) / {revenue} = {margin:.1f}%. ANSWER: {margin:.1f}%"


def build_margin_magentic(*, fail: bool = True) -> Any:
    """MagenticOneGroupChat finance_agent (tool) + analyst (``fail``: the orchestrator's plan names 2024)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.teams import MagenticOneGroupChat

    finance = AssistantAgent("finance_agent", model_client=_client(finance_policy, "finance"), tools=_finance_tools(),
                             max_tool_iterations=4, description="Looks up a company's quarterly financial figures.")
    analyst = AssistantAgent("analyst", model_client=_client(margin_analyst_policy, "margin"),
                             description="Computes financial ratios from figures given to it.")
    return MagenticOneGroupChat([finance, analyst], model_client=_client(margin_orchestrator_policy(fail=fail),
                                                                         "orchestrator"), max_turns=12)
