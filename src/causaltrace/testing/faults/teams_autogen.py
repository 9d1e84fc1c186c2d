"""Reactive scripted AutoGen AgentChat teams for the fault-injection suite (issue 7 "Proof"; decision 8).

Each ``build_*(planted)`` returns a FRESH team (fresh tools, fresh :class:`ScriptedChatCompletionClient` s whose
answers are deterministic functions of the request). ``planted=True`` plants ONE decisive error; every team also
holds a recovered tool error as a distractor: a *flaky* tool fails on the run's first call of it and the agent
retries the failed call as it was. The failure follows the run, not the team object (:func:`_flaky`): a replay
builds a fresh team and serves the recorded calls before its edit, so its first LIVE call does not fail again; and
an agent retries a failed call as it was (:func:`_retrying`), so a correction that does meet the failure is retried,
not replaced by the planted mistake.

==========  ================================================================================================
builder     the team, the planted error
==========  ================================================================================================
shop        clerk (``get_price`` flaky, ``multiply``) + auditor; planted: quantity + 1 in ``multiply``
split       splitter (``get_bill``, ``divide``, ``log_result`` flaky) + auditor; planted: divide args swapped
slice       coder (``get_scores`` flaky) writes code, executor runs it; planted: ``scores[:len(scores) - 1]``
orders      coder (``get_orders`` flaky) writes code counting orders of AT LEAST 100; planted: ``>``
landmark    researcher (``search`` flaky) states the Eiffel Tower's height, calculator (``subtract``) uses it;
            planted: the researcher states its stale belief (300 m) instead of the search result (330 m)
fx          fx_agent (``get_rate`` flaky) states the EUR→USD rate, accountant (``multiply``) converts; planted:
            a stale rate 1.25 (the search said 1.08)
job         runner: ``submit_job`` (flaky) then ``wait_for_job(job, timeout=5)`` — the job needs 6 s, the runner
            repeats the identical call until the message limit (a loop that never converges)
newton      coder (``get_target`` flaky) sends Newton code bounded by ``i < 3``; the executor says "not
            converged", the coder resends the same code until the message limit
swarm       Swarm: triage (``classify_ticket`` flaky) hands off to billing_agent or tech_agent; planted:
            the handoff goes to tech_agent
selector    SelectorGroupChat: triage (``classify_ticket`` flaky), then the selector picks billing_agent or
            tech_agent; planted: the selector picks tech_agent
==========  ================================================================================================
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from autogen_core import FunctionCall
from autogen_core.models import AssistantMessage, FunctionExecutionResultMessage

from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, ToolCallSpec, call

__all__ = ["BUILDERS", "agent", "code_message", "errors", "executor", "first_text_of", "ok", "results_of",
           "round_robin", "said", "terminated", "texts_of", "tool", "tool_results"]

Reply = str | ToolCallSpec | list[ToolCallSpec]


def tool_results(request: ScriptedRequest) -> list[tuple[str, dict[str, Any], str, bool]]:
    """``(tool name, arguments, result text, is_error)`` of every tool call in the request, oldest first."""
    calls: dict[str, FunctionCall] = {}
    out: list[tuple[str, dict[str, Any], str, bool]] = []
    for m in request.messages:
        if isinstance(m, AssistantMessage) and isinstance(m.content, list):
            for c in m.content:
                if isinstance(c, FunctionCall):
                    calls[c.id] = c
        elif isinstance(m, FunctionExecutionResultMessage):
            for r in m.content:
                fc = calls.get(r.call_id)
                try:
                    args = json.loads(fc.arguments) if fc else {}
                except ValueError:
                    args = {}
                out.append((r.name, args, r.content, bool(r.is_error)))
    return out


def _ok(request: ScriptedRequest, tool: str) -> str | None:
    """The latest successful result of ``tool``."""
    found = [content for name, _, content, err in tool_results(request) if name == tool and not err]
    return found[-1] if found else None


def _errors(request: ScriptedRequest, tool: str) -> int:
    return sum(1 for name, _, _, err in tool_results(request) if name == tool and err)


def _said(request: ScriptedRequest, source: str, pattern: str) -> re.Match[str] | None:
    found = request.last_from(source)
    return re.search(pattern, found[1]) if found else None


# The request readers only the zoo's teams use (:mod:`.zoo_autogen`, ``_more``, ``_blind``).


def results_of(request: ScriptedRequest, name: str) -> list[tuple[dict[str, Any], str]]:
    """``(arguments, result)`` of every successful call of tool ``name``, oldest first."""
    return [(args, content) for tool_name, args, content, err in tool_results(request) if tool_name == name and not err]


def texts_of(request: ScriptedRequest, source: str) -> list[str]:
    """The texts of every message from ``source``, oldest first."""
    return [m.content for m in request.messages
            if getattr(m, "source", None) == source and isinstance(getattr(m, "content", None), str)]


def first_text_of(request: ScriptedRequest, source: str) -> str:
    """The text of the first message from ``source`` ("" before it spoke)."""
    texts = texts_of(request, source)
    return texts[0] if texts else ""


#: What a flaky tool says on its first call: a transient failure, to be retried as it was.
TRANSIENT = "service temporarily unavailable, try again"


def _failed_calls(request: ScriptedRequest) -> list[ToolCallSpec]:
    """The calls of the latest tool round that failed transiently (:data:`TRANSIENT`), as they were; [] when the
    request does not end with such a round."""
    if not request.messages or not isinstance(request.messages[-1], FunctionExecutionResultMessage):
        return []
    failed = {r.call_id for r in request.messages[-1].content if r.is_error and TRANSIENT in r.content}
    for m in reversed(request.messages[:-1]) if failed else ():
        if isinstance(m, AssistantMessage) and isinstance(m.content, list):
            return [ToolCallSpec(c.name, json.loads(c.arguments)) for c in m.content
                    if isinstance(c, FunctionCall) and c.id in failed]
    return []


def _retrying(policy: Callable[[ScriptedRequest], Reply]) -> Callable[[ScriptedRequest], Reply]:
    """``policy``, except that after a transient tool failure the agent retries the failed call as it was, as a
    model told "try again" does. Why it matters: the flaky tools fail on the first call of a fresh team, and in a
    replay that is the first LIVE call, often the corrected one; a policy that recomputed its call there would put
    the planted mistake back (a corrected ``unit: lb → kg`` failed, then ``lb`` again), so no correction of a later
    step could flip."""

    def retrying(request: ScriptedRequest) -> Reply:
        return _failed_calls(request) or policy(request)

    return retrying


def _flaky(fn: Callable[..., Any], name: str, state: dict[str, Any]) -> Callable[..., Any]:
    """Wrap an async tool function so that the RUN's first call of it raises (the recovered distractor): its first
    call on this object, unless the agent's conversation (``state["context"]``, bound by :func:`_agent`) already
    holds a result of it — a replay serves the recorded calls before its edit without reaching the tool object, and
    the run's transient failure is among them, so the first LIVE call must not fail again."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        state["calls"] += 1
        if state["calls"] == 1 and not await _called_before(state.get("context"), name):
            raise RuntimeError(f"{name}: {TRANSIENT}")
        return await fn(*args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__annotations__ = fn.__annotations__
    import inspect

    wrapper.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return wrapper


async def _called_before(context: Any, name: str) -> bool:
    """Whether the model context holds a result of tool ``name`` (this run called it before)."""
    if context is None:
        return False
    return any(isinstance(m, FunctionExecutionResultMessage) and any(r.name == name for r in m.content)
               for m in await context.get_messages())


def _tool(fn: Callable[..., Any], description: str, *, flaky: bool = False) -> Any:
    from autogen_core.tools import FunctionTool

    if not flaky:
        return FunctionTool(fn, description=description, name=fn.__name__)
    state: dict[str, Any] = {"calls": 0}
    tool = FunctionTool(_flaky(fn, fn.__name__, state), description=description, name=fn.__name__)
    tool.flaky_state = state  # type: ignore[attr-defined]  # _agent binds its model context
    return tool


def _agent(name: str, policy: Callable[[ScriptedRequest], Reply], tools: list[Any] | None = None, *,
           iterations: int = 6, handoffs: list[str] | None = None) -> Any:
    from autogen_agentchat.agents import AssistantAgent

    kwargs: dict[str, Any] = {}
    if handoffs:
        kwargs["handoffs"] = handoffs
    from autogen_core.model_context import UnboundedChatCompletionContext

    context = UnboundedChatCompletionContext()  # the agent's default, made here so its flaky tools can read it
    for t in tools or ():
        if hasattr(t, "flaky_state"):
            t.flaky_state["context"] = context
    return AssistantAgent(name, model_client=ScriptedChatCompletionClient(_retrying(policy), model=f"scripted-{name}"),
                          tools=tools or None, max_tool_iterations=iterations, model_context=context,
                          system_message=f"You are {name}.", **kwargs)


def _executor() -> Any:
    import warnings

    from autogen_agentchat.agents import CodeExecutorAgent

    from causaltrace.instrumentation.autogen import SandboxCodeExecutor
    from causaltrace.replay.executor import default_sandbox

    with warnings.catch_warnings():  # "no approval function": the scripted code is the suite's own
        warnings.simplefilter("ignore", UserWarning)
        return CodeExecutorAgent("executor", code_executor=SandboxCodeExecutor(default_sandbox()))


def terminated(keyword: str, limit: int) -> Any:
    """The scripted teams' end: the keyword said, or ``limit`` messages."""
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination

    return TextMentionTermination(keyword) | MaxMessageTermination(limit)


def _round_robin(agents: list[Any], keyword: str, limit: int) -> Any:
    from autogen_agentchat.teams import RoundRobinGroupChat

    return RoundRobinGroupChat(agents, name="team", termination_condition=terminated(keyword, limit))


def _auditor(label: str) -> Any:
    def policy(request: ScriptedRequest) -> str:
        for source in ("clerk", "splitter"):
            found = _said(request, source, rf"{label}: (-?[\d.]+)")
            if found:
                return f"{label}: {found.group(1)} checked. APPROVE"
        return "REJECT: no result to check."

    return _agent("auditor", policy)


def _code_message(thought: str, code: str) -> str:
    return f"{thought}\n```python\n{code}\n```"


# ----------------------------------------------------------------------------------- wrong tool argument


def build_shop(planted: bool) -> Any:
    async def get_price(item: str) -> int:
        """The unit price of an item in dollars."""
        return {"widget": 12, "gadget": 7}.get(item, 0)

    async def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    def clerk(request: ScriptedRequest) -> Reply:
        order = re.search(r"Buy (\d+) boxes of (\w+)s", request.task())
        if order is None:
            return "I cannot read the order."
        quantity, item = int(order.group(1)), order.group(2)
        product = _ok(request, "multiply")
        if product is not None:
            return f"TOTAL: {float(product):g}"
        price = _ok(request, "get_price")
        if price is not None:
            return call("multiply", a=int(price), b=quantity + (1 if planted else 0))
        if _errors(request, "get_price") >= 3:
            return "TOTAL: unknown (the price service is down)"
        return call("get_price", item=item)

    clerk_agent = _agent("clerk", clerk, [_tool(get_price, "Unit price of an item.", flaky=True),
                                          _tool(multiply, "Multiply two numbers.")])
    return _round_robin([clerk_agent, _auditor("TOTAL")], "APPROVE", 6)


def build_split(planted: bool) -> Any:
    async def get_bill(table: str) -> int:
        """The bill of a table in dollars."""
        return 120

    async def divide(numerator: float, denominator: float) -> float:
        """Divide numerator by denominator."""
        return round(numerator / denominator, 4)

    async def log_result(value: str) -> str:
        """Record a computed share in the ledger."""
        return f"logged {value}"

    def splitter(request: ScriptedRequest) -> Reply:
        found = re.search(r"among (\d+) people at table (\w+)", request.task())
        if found is None:
            return "I cannot read the task."
        people, table = int(found.group(1)), found.group(2)
        quotient = _ok(request, "divide")
        if quotient is not None and _ok(request, "log_result") is not None:
            return f"SHARE: {float(quotient):g}"
        if quotient is not None:
            if _errors(request, "log_result") >= 3:
                return "SHARE: unknown (the ledger is down)"
            return call("log_result", value=f"{float(quotient):g}")
        bill = _ok(request, "get_bill")
        if bill is not None:
            total = int(bill)
            if planted:
                return call("divide", numerator=people, denominator=total)
            return call("divide", numerator=total, denominator=people)
        return call("get_bill", table=table)

    agent = _agent("splitter", splitter, [_tool(get_bill, "The bill of a table."), _tool(divide, "Divide."),
                                          _tool(log_result, "Log a share.", flaky=True)])
    return _round_robin([agent, _auditor("SHARE")], "APPROVE", 6)


# ------------------------------------------------------------------------------------------ boundary bugs


def _coder_team(tool_fn: Callable[..., Any], tool_name: str, write: Callable[[list[int]], str],
                label: str, *, limit: int = 8) -> Any:
    """A coder that fetches data with a flaky tool, sends code, and reports the executor's printed number."""

    def coder(request: ScriptedRequest) -> Reply:
        output = _said(request, "executor", r"^\s*(-?[\d.]+)\s*$")
        if output:
            return f"{label}: {output.group(1)}. DONE"
        data = _ok(request, tool_name)
        if data is not None:
            return _code_message("Here is the code.", write(json.loads(data)))
        if _errors(request, tool_name) >= 3:
            return f"{label}: unknown. DONE"
        return call(tool_name, source="A")

    return _round_robin([_agent("coder", coder, [_tool(tool_fn, "Fetch the data.", flaky=True)]), _executor()],
                        "DONE", limit)


def build_slice(planted: bool) -> Any:
    async def get_scores(source: str) -> str:
        """The scores of a team."""
        return json.dumps([4, 8, 15, 16, 23, 42])

    end = "len(scores) - 1" if planted else "len(scores)"
    return _coder_team(get_scores, "get_scores",
                       lambda data: f"scores = {data}\nprint(sum(scores[:{end}]))", "TOTAL")


def build_orders(planted: bool) -> Any:
    async def get_orders(source: str) -> str:
        """The order amounts in dollars."""
        return json.dumps([250, 100, 40, 100, 99, 180])

    op = ">" if planted else ">="
    return _coder_team(get_orders, "get_orders",
                       lambda data: f"orders = {data}\nprint(len([o for o in orders if o {op} 100]))", "COUNT")


# ------------------------------------------------------------------------------------ a wrong fact carried


def build_landmark(planted: bool) -> Any:
    async def search(query: str) -> str:
        """Search an encyclopedia."""
        return "Eiffel Tower: 330 metres tall (antennas included)."

    async def subtract(a: float, b: float) -> float:
        """a minus b."""
        return a - b

    def researcher(request: ScriptedRequest) -> Reply:
        found = _ok(request, "search")
        if found is not None:
            height = 300 if planted else int(re.search(r"(\d+) metres", found).group(1))  # type: ignore[union-attr]
            return f"The Eiffel Tower is {height} metres tall."
        if _errors(request, "search") >= 3:
            return "I could not find the height."
        return call("search", query="Eiffel Tower height")

    def calculator(request: ScriptedRequest) -> Reply:
        diff = _ok(request, "subtract")
        if diff is not None:
            return f"DIFF: {float(diff):g}. DONE"
        stated = _said(request, "researcher", r"(\d+) metres tall")
        other = re.search(r"\((\d+) m\)", request.task())
        if stated and other:
            return call("subtract", a=int(stated.group(1)), b=int(other.group(1)))
        return "I need the height first."

    return _round_robin([_agent("researcher", researcher, [_tool(search, "Search.", flaky=True)]),
                         _agent("calculator", calculator, [_tool(subtract, "Subtract.")])], "DONE", 6)


def build_fx(planted: bool) -> Any:
    async def get_rate(pair: str) -> str:
        """The current exchange rate of a currency pair."""
        return f"rate {pair}: 1.08"

    async def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return round(a * b, 4)

    def fx_agent(request: ScriptedRequest) -> Reply:
        found = _ok(request, "get_rate")
        if found is not None:
            rate = "1.25" if planted else found.rsplit(": ", 1)[1]
            return f"Today 1 EUR = {rate} USD."
        if _errors(request, "get_rate") >= 3:
            return "I could not get the rate."
        return call("get_rate", pair="EUR/USD")

    def accountant(request: ScriptedRequest) -> Reply:
        product = _ok(request, "multiply")
        if product is not None:
            return f"USD: {float(product):.2f}. DONE"
        rate = _said(request, "fx_agent", r"1 EUR = ([\d.]+) USD")
        amount = re.search(r"Convert (\d+) EUR", request.task())
        if rate and amount:
            return call("multiply", a=int(amount.group(1)), b=float(rate.group(1)))
        return "I need the rate first."

    return _round_robin([_agent("fx_agent", fx_agent, [_tool(get_rate, "Exchange rate.", flaky=True)]),
                         _agent("accountant", accountant, [_tool(multiply, "Multiply.")])], "DONE", 6)


# -------------------------------------------------------------------------------- a loop that never converges


def build_job(planted: bool) -> Any:
    async def submit_job(report: str) -> str:
        """Submit a report job."""
        return f"submitted job {report}-job"

    async def wait_for_job(job: str, timeout: int) -> str:  # noqa: ASYNC109 - a tool argument, not a deadline
        """Wait for a job to finish."""
        return f"job {job} done: 4213 rows" if int(timeout) >= 6 else f"job {job} still running after {timeout} s"

    def runner(request: ScriptedRequest) -> Reply:
        waited = _ok(request, "wait_for_job")
        if waited is not None and "done" in waited:
            rows = re.search(r"done: (\d+) rows", waited)
            return f"ROWS: {rows.group(1) if rows else 'unknown'}. DONE"
        job = _ok(request, "submit_job")
        if job is not None:
            return call("wait_for_job", job=job.rsplit(" ", 1)[1], timeout=5 if planted else 10)
        if _errors(request, "submit_job") >= 3:
            return "ROWS: unknown. DONE"
        return call("submit_job", report="sales")

    agent = _agent("runner", runner, [_tool(submit_job, "Submit a job.", flaky=True),
                                      _tool(wait_for_job, "Wait for a job.")], iterations=4)
    return _round_robin([agent], "DONE", 3)


def build_newton(planted: bool) -> Any:
    async def get_target(source: str) -> str:
        """The number whose square root is wanted."""
        return "2"

    bound = 3 if planted else 6

    def coder(request: ScriptedRequest) -> Reply:
        done = _said(request, "executor", r"converged: ([\d.]+)")
        if done and "not" not in done.string:
            return f"ROOT: {done.group(1)}. DONE"
        target = _ok(request, "get_target")
        if target is not None:
            return _code_message("Newton's method:",
                                 f"target = {target}\nx = 1.0\ni = 0\n"
                                 f"while abs(x * x - target) > 1e-9 and i < {bound}:\n"
                                 "    x = (x + target / x) / 2\n    i += 1\n"
                                 "if abs(x * x - target) <= 1e-9:\n    print(f'converged: {x:.6f}')\n"
                                 "else:\n    print('not converged')")
        if _errors(request, "get_target") >= 3:
            return "ROOT: unknown. DONE"
        return call("get_target", source="A")

    return _round_robin([_agent("coder", coder, [_tool(get_target, "Fetch the target.", flaky=True)]),
                         _executor()], "DONE", 8)


# --------------------------------------------------------------------------------------- a wrong handoff


async def _refund_amount(order: str) -> str:
    """The refundable amount of an order."""
    return f"refund for order {order}: 40 dollars"


async def _classify_ticket(text: str) -> str:
    """Classify a support ticket."""
    return "billing" if "refund" in text else "tech"


def _billing_policy(request: ScriptedRequest) -> Reply:
    found = _ok(request, "_refund_amount")
    if found is not None:
        amount = re.search(r": (\d+) dollars", found)
        return f"REFUND: {amount.group(1) if amount else 'unknown'}. DONE"
    return call("_refund_amount", order="B7")


def _tech_policy(request: ScriptedRequest) -> str:
    return "Please restart the device. DONE"


def _ticket_agents(handoffs: bool) -> tuple[Any, Any]:
    billing = _agent("billing_agent", _billing_policy, [_tool(_refund_amount, "Refundable amount.")],
                     handoffs=["triage"] if handoffs else None)
    tech = _agent("tech_agent", _tech_policy, handoffs=["triage"] if handoffs else None)
    return billing, tech


def build_swarm(planted: bool) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import Swarm

    def triage(request: ScriptedRequest) -> Reply:
        category = _ok(request, "_classify_ticket")
        if category is not None:
            target = "tech_agent" if planted or category != "billing" else "billing_agent"
            return call(f"transfer_to_{target}")
        if _errors(request, "_classify_ticket") >= 3:
            return "I cannot classify the ticket. DONE"
        return call("_classify_ticket", text=request.task())

    agent = _agent("triage", triage, [_tool(_classify_ticket, "Classify a ticket.", flaky=True)],
                   handoffs=["billing_agent", "tech_agent"])
    billing, tech = _ticket_agents(True)
    return Swarm([agent, billing, tech], name="desk",
                 termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(12))


def build_selector(planted: bool) -> Any:
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat

    def triage(request: ScriptedRequest) -> Reply:
        category = _ok(request, "_classify_ticket")
        if category is not None:
            return f"The ticket is about {category}."
        if _errors(request, "_classify_ticket") >= 3:
            return "The ticket is about nothing I know."
        return call("_classify_ticket", text=request.task())

    def selector(request: ScriptedRequest) -> str:
        text = request.text()
        if "triage: The ticket is about billing" in text:
            return "tech_agent" if planted else "billing_agent"
        if "triage: The ticket is about" in text:
            return "tech_agent"
        return "triage"

    agent = _agent("triage", triage, [_tool(_classify_ticket, "Classify a ticket.", flaky=True)])
    billing, tech = _ticket_agents(False)
    return SelectorGroupChat([agent, billing, tech], name="desk",
                             model_client=ScriptedChatCompletionClient(selector, model="scripted-selector"),
                             termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(10))


BUILDERS: dict[str, Callable[[bool], Any]] = {
    "shop": build_shop,
    "split": build_split,
    "slice": build_slice,
    "orders": build_orders,
    "landmark": build_landmark,
    "fx": build_fx,
    "job": build_job,
    "newton": build_newton,
    "swarm": build_swarm,
    "selector": build_selector,
}


# The helpers the zoo's teams (:mod:`causaltrace.testing.faults.zoo_autogen` and its siblings) build on, by public
# names.
ok = _ok
errors = _errors
said = _said
tool = _tool
agent = _agent
executor = _executor
round_robin = _round_robin
code_message = _code_message
