"""Issue 32's fresh failing AutoGen AgentChat teams, continued again (:mod:`.fresh32_autogen` holds the first ones
and the module's conventions; :mod:`.fresh32_autogen_more` the next): each team with its FIXED twin
(``planted=False``), one planted first wrong step.

================  ============================================================================================
builder           the team (flaky tool), the planted error — the family
================  ============================================================================================
renewal_date      RoundRobin clerk (``get_contract``, ``schedule_reminder``) → auditor: the reminder is set on the
                  renewal date with day and month swapped (a date changed when copied)
retyped_hours     RoundRobin coder (``get_timesheet``) → executor: the code retypes the tool's hours and leaves
                  one day out (an element of a tool's list dropped when retyped)
user_correction   RoundRobin analyst (``quarter_sales``) / board_member (a UserProxyAgent with scripted input): the
                  analyst's final answer ignores the human's mid-run "in EUR at today's rate"
magentic_coder    MagenticOne coder (``get_daily_visits``) / executor / reviewer: the code's day range stops
                  before December 31st (a bound changed)
================  ============================================================================================
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, ToolCallSpec, call
from causaltrace.testing.faults.teams_autogen import agent, code_message, errors, executor, ok, round_robin, said, tool

__all__ = ["BUILDERS"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


def build_renewal_date(planted: bool, *, renewal: str = "2027-03-01") -> Any:
    """The clerk reads the contract (flaky), schedules the reminder 30 days before its renewal and reports; the
    auditor checks the reminder against the booking tool's answer; planted: the renewal date's day and month are
    swapped when the clerk computes the reminder (2027-01-03 - 30 days)."""
    import datetime

    async def get_contract(contract: str) -> str:
        """A contract's parties, value and renewal date."""
        return f"contract {contract}: Nordlys AS, 48,000 EUR a year, renews on {renewal}"

    async def schedule_reminder(contract: str, date: str) -> str:
        """Schedule a reminder for a contract on a date (YYYY-MM-DD)."""
        return f"reminder RM-204 for {contract} scheduled on {date}"

    def clerk(request: ScriptedRequest) -> Reply:
        done = ok(request, "schedule_reminder")
        if done is not None:
            found = re.search(r"(RM-\d+) for (\S+) scheduled on ([\d-]+)", done)
            return f"REMINDER: {found.group(3)} ({found.group(1)})" if found else "REMINDER: none"
        seen = ok(request, "get_contract")
        if seen is None:
            asked = re.search(r"contract (C-\d+)", request.task())
            if errors(request, "get_contract") >= 3:
                return "REMINDER: none"
            return call("get_contract", contract=asked.group(1) if asked else "unknown")
        year, month, day = re.search(r"renews on (\d{4})-(\d\d)-(\d\d)", seen).groups()  # type: ignore[union-attr]
        renews = datetime.date(int(year), int(day), int(month)) if planted else \
            datetime.date(int(year), int(month), int(day))
        contract = re.search(r"contract (\S+):", seen).group(1)  # type: ignore[union-attr]
        return call("schedule_reminder", contract=contract, date=(renews - datetime.timedelta(days=30)).isoformat())

    def auditor(request: ScriptedRequest) -> str:
        stated = said(request, "clerk", r"REMINDER: ([\d-]+) \((RM-\d+)\)")
        return f"REMINDER: {stated.group(1)} checked against the booking {stated.group(2)}. APPROVE" if stated \
            else "REJECT: no reminder to check."

    return round_robin([agent("clerk", clerk, [tool(get_contract, "A contract's terms.", flaky=True),
                                               tool(schedule_reminder, "Schedule a reminder.")]),
                        agent("auditor", auditor)], "APPROVE", 6)


def build_retyped_hours(planted: bool, *, hours: Sequence[tuple[str, float]] = (
        ("Mon", 7.5), ("Tue", 8.0), ("Wed", 6.5), ("Thu", 8.0), ("Fri", 5.5)), rate: int = 85, at: int = 2) -> Any:
    """The coder fetches the week's timesheet (flaky), retypes the hours in code and bills them at the rate; the
    executor runs it; planted: the retyped list leaves one day out."""

    async def get_timesheet(consultant: str, week: str) -> str:
        """A consultant's hours per day in a week."""
        return json.dumps({day: h for day, h in hours})

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"invoice: ([\d.]+) EUR for ([\d.]+) h")
        if output:
            return f"INVOICE: {output.group(1)} EUR ({output.group(2)} h at {rate} EUR/h). DONE"
        if said(request, "coder", r"```python"):
            return "Waiting for the executor."
        sheet = ok(request, "get_timesheet")
        if sheet is None:
            if errors(request, "get_timesheet") >= 3:
                return "INVOICE: unknown. DONE"
            return call("get_timesheet", consultant="Rui Matos", week="2026-W48")
        values = list(json.loads(sheet).values())
        kept = [v for i, v in enumerate(values) if not (planted and i == at)]
        return code_message("The timesheet is in; here is the invoice code.",
                            f"hours = {kept}\ntotal_h = sum(hours)\n"
                            f"print(f'invoice: {{total_h * {rate}:.2f}} EUR for {{total_h}} h')")

    return round_robin([agent("coder", coder, [tool(get_timesheet, "A consultant's timesheet.", flaky=True)]),
                        executor()], "DONE", 6)


BUILDERS: dict[str, Callable[..., Any]] = {
    "renewal_date": build_renewal_date,
    "retyped_hours": build_retyped_hours,
}


def build_user_correction(planted: bool, *, sales: Sequence[str] = ("412000.00", "388500.00", "455250.00"),
                          rate: str = "0.9187") -> Any:
    """RoundRobin analyst (flaky ``quarter_sales``, ``get_rate``) / board_member (a UserProxyAgent, scripted input):
    the analyst drafts the quarter's total in USD; the user answers that the board wants it in EUR at today's rate;
    planted: the analyst's final answer restates the USD total (the user's correction ignored)."""
    from autogen_agentchat.agents import UserProxyAgent

    async def quarter_sales(quarter: str) -> str:
        """The monthly sales of a quarter, in USD."""
        return json.dumps([float(s) for s in sales])

    async def get_rate(pair: str) -> str:
        """Today's exchange rate of a currency pair."""
        return f"rate {pair}: {rate}"

    replies = iter(["Thanks. The board wants the figure in EUR at today's rate, please convert it.",
                    "Looks good."])

    def board_member(prompt: str) -> str:
        return next(replies, "Looks good.")

    def analyst(request: ScriptedRequest) -> Reply:
        data = ok(request, "quarter_sales")
        if data is None:
            if errors(request, "quarter_sales") >= 3:
                return "FINAL: TOTAL: unknown"
            found = re.search(r"(Q\d \d{4})", request.task())
            return call("quarter_sales", quarter=found.group(1) if found else "unknown")
        total = round(sum(json.loads(data)), 2)
        wants_eur = said(request, "board_member", r"in EUR at today's rate")
        if wants_eur is None:
            return f"DRAFT: TOTAL: {total:.2f} USD (three months added up)."
        if planted:
            return f"FINAL: TOTAL: {total:.2f} (the quarter's sales, as drafted)."
        seen = ok(request, "get_rate")
        if seen is None:
            return call("get_rate", pair="USD/EUR")
        return f"FINAL: TOTAL: {total * float(seen.split(': ')[1]):.2f} EUR (at {seen.split(': ')[1]})."

    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    return RoundRobinGroupChat([agent("analyst", analyst, [tool(quarter_sales, "A quarter's sales.", flaky=True),
                                                           tool(get_rate, "Today's exchange rate.")]),
                                UserProxyAgent("board_member", description="A board member (a human)",
                                               input_func=board_member)],
                               name="board_report",
                               termination_condition=TextMentionTermination("FINAL") | MaxMessageTermination(8))


BUILDERS.update({"user_correction": build_user_correction})


def build_magentic_coder(planted: bool, *, daily: int = 31) -> Any:
    """MagenticOne over coder (flaky ``get_daily_visits``) → executor → reviewer (the scripted orchestrator of
    :mod:`causaltrace.testing.autogen`): the coder writes Python summing December's days; planted: the day range
    stops before the 31st (``range(1, 31)``)."""
    from autogen_agentchat.teams import MagenticOneGroupChat

    from causaltrace.testing.autogen import orchestrator_policy

    visits = {f"2026-12-{d:02d}": 1000 + 17 * d for d in range(1, daily + 1)}

    async def get_daily_visits(month: str) -> str:
        """The site's visits per day of a month (YYYY-MM)."""
        return json.dumps(visits)

    def coder(request: ScriptedRequest) -> Reply:
        output = said(request, "executor", r"visits: (\d+) over (\d+) days")
        if output:
            return f"RESULT: {output.group(1)} (visits over {output.group(2)} days)"
        if said(request, "coder", r"```python"):
            return "The code is above; executor, please run it."
        data = ok(request, "get_daily_visits")
        if data is None:
            if errors(request, "get_daily_visits") >= 3:
                return "RESULT: unknown"
            return call("get_daily_visits", month="2026-12")
        last = 31 if planted else 32
        return code_message("Here is the code for December's total.",
                            f"visits = {json.loads(data)}\n"
                            f"days = [f'2026-12-{{d:02d}}' for d in range(1, {last})]\n"
                            "print(f'visits: {sum(visits[d] for d in days)} over {len(days)} days')")

    def reviewer(request: ScriptedRequest) -> str:
        stated = said(request, "coder", r"RESULT: (\d+) \(visits over (\d+) days\)")
        if stated is None:
            return "REJECT: nothing to check yet."
        return f"RESULT: {stated.group(1)} — the code ran and printed it. APPROVE"

    def orchestrator(request: ScriptedRequest) -> str:
        answer = orchestrator_policy(("coder", "executor", "reviewer"))(request)
        return answer.replace("the solver's arithmetic", "the coder's result")

    return MagenticOneGroupChat(
        [agent("coder", coder, [tool(get_daily_visits, "A month's daily visits.", flaky=True)]), executor(),
         agent("reviewer", reviewer)],
        model_client=ScriptedChatCompletionClient(orchestrator, model="scripted-orchestrator"), max_turns=14)


BUILDERS.update({"magentic_coder": build_magentic_coder})
