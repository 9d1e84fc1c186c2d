"""Reactive scripted smolagents teams for the fault-injection suite (issue 7 "Proof"; ARCHITECTURE decision 8).

Each ``build_*`` function is a zero-argument-ready factory body (the suite binds ``planted``): it returns a FRESH
agent (fresh tools, fresh scripted models) whose models are deterministic functions of their request. Every team
plants ONE decisive error when ``planted=True`` and holds a recovered tool error as a distractor: a *flaky* tool
fails on the run's first call of it and the agent retries it. The failure follows the run, not the tool object
(:func:`make_tool`): a replay builds fresh tools and serves the recorded calls before its edit, so its first LIVE call
does not fail again. A ToolCallingAgent retries a failed call as it was (:func:`_retrying`), so a correction that does
meet the failure is retried, not replaced by the planted mistake; a CodeAgent's policy writes its own retry (some
teams' planted error IS their reaction to the failure, e.g. a placeholder key when the secret store fails).

==================  ============================================================================================
builder             the team, the planted error
==================  ============================================================================================
shop                ToolCallingAgent: ``get_price`` (flaky) then ``multiply(a=price, b=quantity)``; planted:
                    quantity + 1 in the multiply call (a wrong tool argument)
split               ToolCallingAgent: ``get_bill``, ``divide(numerator, denominator)``, ``log_result`` (flaky);
                    planted: the divide arguments swapped
squares             manager CodeAgent + managed ``math_agent`` (flaky ``sum_of_powers``); planted: ``range(A, B)``
readings            CodeAgent: ``get_readings`` (flaky), then counts readings of AT LEAST a threshold; planted:
                    ``>`` instead of ``>=``
landmark            manager CodeAgent + managed ``researcher`` (flaky ``search``); planted: the researcher ignores
                    the search result and states its stale belief (300 m, the 1889 height) — the manager carries it
fx                  manager ToolCallingAgent + managed ``fx_agent`` (flaky ``get_rate``); planted: the fx agent
                    states a stale rate (1.2) — the manager converts with it
newton              CodeAgent: ``get_target`` (flaky), then Newton iterations bounded by ``i < 3`` that never
                    converge; the agent retries the same code until max_steps (a loop that never converges)
job                 ToolCallingAgent: ``submit_job`` (flaky), then ``wait_for_job(job, timeout=5)`` while the job
                    needs 6 s: it retries the identical call until max_steps
ticket              manager CodeAgent routing a ticket to ``billing_agent`` or ``tech_agent`` after
                    ``classify_ticket`` (flaky); planted: ``!=`` in the routing condition (wrong delegate)
region              manager CodeAgent routing to ``eu_agent`` or ``us_agent``, then writing ``audit_log`` (flaky)
                    before answering; planted: ``!=`` in the routing condition (wrong delegate)
==================  ============================================================================================

smolagents is imported lazily (inside the builders).
"""

from __future__ import annotations

import ast
import copy
import functools
import re
from collections.abc import Callable
from typing import Any

from causaltrace.testing.smolagents import Call, ScriptedRequest

__all__ = [
    "BUILDERS",
    "code_agent",
    "code_reply",
    "errors",
    "find",
    "integer",
    "is_error",
    "last_is_error",
    "make_tool",
    "managed_answers",
    "number",
    "ok",
    "planning_task",
    "string",
    "tool_agent",
    "written_plan",
]

Reply = str | list[Call]


def is_error(observation: str) -> bool:
    """True for an observation smolagents wrote for a failed tool call or failed code."""
    return "Error:\n" in observation


def _ok(request: ScriptedRequest) -> list[str]:
    return [o for o in request.observations if not is_error(o)]


def _find(request: ScriptedRequest, pattern: str) -> re.Match[str] | None:
    """The latest successful observation matching ``pattern``."""
    for text in reversed(_ok(request)):
        found = re.search(pattern, text)
        if found:
            return found
    return None


def _errors(request: ScriptedRequest) -> int:
    return sum(1 for o in request.observations if is_error(o))


# The request readers only the zoo's teams use (:mod:`.zoo_smolagents`, ``_more``, ``_blind``).


def last_is_error(request: ScriptedRequest) -> bool:
    """True when the request's latest observation is an error (the agent is about to retry)."""
    return bool(request.observations) and is_error(request.observations[-1])


def managed_answers(request: ScriptedRequest, agent: str) -> list[str]:
    """The answers of managed agent ``agent`` in the request's observations, oldest first."""
    out = []
    for text in request.observations:
        found = re.search(rf"managed agent '{agent}':\s*(.+)", text, re.S)
        if found:
            out.append(found.group(1).strip())
    return out


def planning_task(request: ScriptedRequest) -> str:
    """The task inside smolagents' initial planning prompt ("Here is your task: ```…```")."""
    for _, text in request.messages:
        found = re.search(r"Here is your task:\s*```\s*(.*?)\s*```", text, re.S)
        if found:
            return found.group(1)
    return ""


def written_plan(request: ScriptedRequest) -> str:
    """The plan the agent wrote in its planning step (smolagents puts it back into the agent's memory)."""
    for role, text in request.messages:
        if role == "assistant" and "plan of action" in text:
            return text
    return ""


def make_tool(name: str, description: str, inputs: dict[str, dict[str, str]], output_type: str,
              fn: Callable[..., Any], *, flaky: bool = False) -> Any:
    """A fresh smolagents Tool calling ``fn(**arguments)``; ``flaky=True`` makes the RUN's first call of it raise:
    its first call on this object, unless the memory of the agents bound to it (its agent, and the agents managing
    that one: :func:`_bind_flaky`) shows an earlier call — a replay serves the recorded calls before its edit without
    reaching the tool object, and the run's transient failure is among them, so the first LIVE call must not fail
    again."""
    from smolagents import Tool

    state: dict[str, Any] = {"calls": 0, "seen_by": []}

    def forward(self: Any, **kwargs: Any) -> Any:
        state["calls"] += 1
        if flaky and state["calls"] == 1 and not _called_before(state["seen_by"]):
            raise RuntimeError(f"{name}: {TRANSIENT}")
        return fn(**kwargs)

    cls = type(f"{name}_tool", (Tool,), {
        "name": name, "description": description, "inputs": inputs, "output_type": output_type,
        "forward": forward, "skip_forward_signature_validation": True,
    })
    tool = cls()
    if flaky:
        tool.flaky_state = state
    return tool


def _called_before(seen_by: list[tuple[Any, str]]) -> bool:
    """Whether an agent's memory holds a finished step that called ``callee`` (a tool or a managed agent; by name
    in a ToolCallingAgent's calls, as ``callee(`` in a CodeAgent's code) for any ``(agent, callee)``."""
    from smolagents.memory import ActionStep

    return any(isinstance(step, ActionStep) and any(c.name == callee or f"{callee}(" in str(c.arguments)
                                                    for c in step.tool_calls or ())
               for agent, callee in seen_by for step in agent.memory.steps)


def _bind_flaky(agent: Any, tools: list[Any], managed: list[Any]) -> Any:
    """Let ``agent``'s memory tell its flaky tools, and its managed agents' flaky tools, that the run called them
    before (a managed agent's memory starts afresh with every task, its manager's does not)."""
    for tool in tools:
        if hasattr(tool, "flaky_state"):
            tool.flaky_state["seen_by"].append((agent, tool.name))
    for worker in managed:
        for tool in worker.tools.values():
            if hasattr(tool, "flaky_state"):
                tool.flaky_state["seen_by"].append((agent, worker.name))
    return agent


#: What a flaky tool says on its first call: a transient failure, to be retried as it was.
TRANSIENT = "service temporarily unavailable, try again"

_FAILED_CALL = re.compile(r"Error executing tool '(\w+)' with arguments (\{.*)", re.S)


def _failed_call(observation: str) -> Call | None:
    """The tool call a ToolCallingAgent's error observation names (``Error executing tool 'x' with arguments
    {...}: ...``), or None."""
    found = _FAILED_CALL.search(observation)
    if found is None:
        return None
    text = found.group(2)
    for end in (m.end() for m in re.finditer(r"\}(?=: )", text)):  # the arguments' repr ends at a "}: "
        try:
            arguments = ast.literal_eval(text[:end])
        except (ValueError, SyntaxError):
            continue
        if isinstance(arguments, dict):
            return Call(found.group(1), arguments)
    return None


def _retrying(policy: Callable[[ScriptedRequest], Reply]) -> Callable[[ScriptedRequest], Reply]:
    """A ToolCallingAgent's ``policy``, except that after a transient tool failure (:data:`TRANSIENT`) the agent
    retries the call its error names as it was, as a model told "try again" does. Why it matters: the flaky tools
    fail on the first call of a fresh team, and in a replay that is the first LIVE call, often the corrected one; a
    policy that recomputed its call there would put the planted mistake back (a corrected ``unit: lb → kg`` failed,
    then ``lb`` again), so no correction of a later step could flip. The recorded runs are unchanged: every
    ToolCallingAgent policy of the suite retried the same call anyway."""

    def retrying(request: ScriptedRequest) -> Reply:
        last = request.observations[-1] if request.observations else ""
        if TRANSIENT in last and request.tool_names and request.messages[-1][0] == "tool-response":
            again = _failed_call(last)
            if again is not None:
                return [again]
        return policy(request)

    return retrying


def _s(desc: str) -> dict[str, str]:
    return {"type": "string", "description": desc}


def _n(desc: str) -> dict[str, str]:
    return {"type": "number", "description": desc}


def _i(desc: str) -> dict[str, str]:
    return {"type": "integer", "description": desc}


def _code(thought: str, code: str) -> str:
    return f"Thought: {thought}\n<code>\n{code}\n</code>"


def _summary(_: ScriptedRequest) -> str:
    return "I could not finish the task."


@functools.cache
def _parsed_templates(name: str) -> dict[str, Any]:
    """smolagents' prompt templates ``name`` (``toolcalling_agent``, ``code_agent``), parsed once per process."""
    import importlib.resources

    import yaml

    return yaml.safe_load(importlib.resources.files("smolagents.prompts").joinpath(f"{name}.yaml").read_text())


def _templates(name: str) -> dict[str, Any]:
    """A copy of the default prompt templates an agent of this kind would load itself — without parsing the YAML
    for every agent: smolagents' pure-Python YAML parse was ~35 ms of the ~47 ms a team of this suite took to build,
    and a repair builds the team again for every replay (the recorded run's wall time, the repair ratio's
    denominator, does not include the build). The same templates: the agents' requests are unchanged."""
    return copy.deepcopy(_parsed_templates(name))


def _tool_agent(policy: Callable[[ScriptedRequest], Reply], tools: list[Any], name: str, *, max_steps: int = 6,
                description: str | None = None, managed: list[Any] | None = None) -> Any:
    from smolagents import LogLevel, ToolCallingAgent

    from causaltrace.testing.smolagents import ScriptedModel

    return _bind_flaky(ToolCallingAgent(tools=tools, model=ScriptedModel(_retrying(policy)), name=name,
                                        description=description, max_steps=max_steps, managed_agents=managed or [],
                                        verbosity_level=LogLevel.OFF,
                                        prompt_templates=_templates("toolcalling_agent")), tools, managed or [])


def _code_agent(policy: Callable[[ScriptedRequest], Reply], tools: list[Any], name: str, *, max_steps: int = 6,
                managed: list[Any] | None = None) -> Any:
    from smolagents import CodeAgent, LogLevel

    from causaltrace.testing.smolagents import ScriptedModel

    return _bind_flaky(CodeAgent(tools=tools, model=ScriptedModel(policy), name=name, max_steps=max_steps,
                                 managed_agents=managed or [], verbosity_level=LogLevel.OFF,
                                 prompt_templates=_templates("code_agent")), tools, managed or [])


# ------------------------------------------------------------------------------------ wrong tool argument


def build_shop(planted: bool) -> Any:
    """``get_price`` (flaky) → ``multiply(price, quantity)`` → ``TOTAL: n``; planted: quantity + 1."""
    prices = {"widget": 12, "gadget": 7}
    get_price = make_tool("get_price", "The unit price of an item in dollars.", {"item": _s("the item")}, "string",
                          lambda item: f"price of {item}: {prices.get(item, 0)} dollars", flaky=True)
    multiply = make_tool("multiply", "Multiply two numbers.", {"a": _n("first factor"), "b": _n("second factor")},
                         "string", lambda a, b: f"product: {a * b}")

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no total"
        task = request.task
        qty = re.search(r"Buy (\d+) boxes of (\w+)s", task)
        if qty is None:
            return [Call("final_answer", {"answer": "I cannot read the order."})]
        quantity, item = int(qty.group(1)), qty.group(2)
        product = _find(request, r"product: (-?[\d.]+)")
        if product:
            return [Call("final_answer", {"answer": f"TOTAL: {product.group(1)}"})]
        price = _find(request, rf"price of {item}: (\d+) dollars")
        if price:
            return [Call("multiply", {"a": int(price.group(1)), "b": quantity + (1 if planted else 0)})]
        if _errors(request) >= 3:
            return [Call("final_answer", {"answer": "the price service is down"})]
        return [Call("get_price", {"item": item})]

    return _tool_agent(policy, [get_price, multiply], "shopper")


def build_split(planted: bool) -> Any:
    """``get_bill`` → ``divide(numerator, denominator)`` → ``log_result`` (flaky) → ``SHARE: x``; planted: swap."""
    get_bill = make_tool("get_bill", "The bill of a table in dollars.", {"table": _s("the table name")}, "string",
                         lambda table: f"bill for table {table}: 120 dollars")
    divide = make_tool("divide", "Divide numerator by denominator.",
                       {"numerator": _n("the dividend"), "denominator": _n("the divisor")}, "string",
                       lambda numerator, denominator: f"quotient: {round(numerator / denominator, 4):g}")
    log_result = make_tool("log_result", "Record a computed share in the ledger.", {"value": _s("the share")},
                           "string", lambda value: f"logged {value}", flaky=True)

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no share"
        found = re.search(r"among (\d+) people at table (\w+)", request.task)
        if found is None:
            return [Call("final_answer", {"answer": "I cannot read the task."})]
        people, table = int(found.group(1)), found.group(2)
        quotient = _find(request, r"quotient: (-?[\d.e-]+)")
        if quotient and _find(request, r"logged "):
            return [Call("final_answer", {"answer": f"SHARE: {quotient.group(1)}"})]
        if quotient:
            if _errors(request) >= 3:
                return [Call("final_answer", {"answer": "the ledger is down"})]
            return [Call("log_result", {"value": quotient.group(1)})]
        bill = _find(request, rf"bill for table {table}: (\d+) dollars")
        if bill:
            total = int(bill.group(1))
            args = {"numerator": people, "denominator": total} if planted else {"numerator": total,
                                                                                "denominator": people}
            return [Call("divide", args)]
        return [Call("get_bill", {"table": table})]

    return _tool_agent(policy, [get_bill, divide, log_result], "splitter")


# ------------------------------------------------------------------------------------------ boundary bugs


def build_squares(planted: bool) -> Any:
    """The example team with a flaky ``sum_of_powers``; planted: the manager's ``range(A, B)``."""
    from causaltrace.testing.smolagents import code_manager_policy, tool_worker_policy

    def sum_of_powers(numbers: list, power: int) -> int:
        return sum(int(n) ** int(power) for n in numbers)

    tool = make_tool("sum_of_powers", "Add up each number raised to a power.",
                     {"numbers": {"type": "array", "description": "the integers"}, "power": _i("the exponent")},
                     "integer", sum_of_powers, flaky=True)
    worker = _tool_agent(tool_worker_policy(), [tool], "math_agent", max_steps=4,
                         description="Adds up the squares (or cubes) of a list of integers.")
    return _code_agent(code_manager_policy(off_by_one=planted), [], "manager", max_steps=5, managed=[worker])


def build_readings(planted: bool) -> Any:
    """``get_readings`` (flaky; the code is retried), then count the readings of AT LEAST the threshold."""
    flaky = make_tool("get_readings", "The latest readings of a sensor.", {"sensor": _s("the sensor id")},
                      "array", lambda sensor: [12, 50, 73, 50, 41, 88, 49], flaky=True)

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no count"
        found = re.search(r"at least (\d+)", request.task)
        if found is None:
            return _code("no threshold.", "final_answer('no threshold')")
        limit = int(found.group(1))
        if _find(request, r"readings: \["):
            op = ">" if planted else ">="
            return _code(f"count the readings of at least {limit}.",
                         f"count = len([r for r in readings if r {op} {limit}])\nfinal_answer(count)")
        if _errors(request) >= 3:
            return _code("the sensor is down.", "final_answer('sensor down')")
        return _code("fetch the readings of sensor A.", "readings = get_readings(sensor='A')\nprint('readings:', readings)")

    return _code_agent(policy, [flaky], "analyst")


# ------------------------------------------------------------------------------------ a wrong fact carried


def build_landmark(planted: bool) -> Any:
    """The manager asks ``researcher`` for the Eiffel Tower's height and subtracts the height given in the task."""

    def search(query: str) -> str:
        return "Eiffel Tower: 330 metres tall (antennas included)."

    tool = make_tool("search", "Search an encyclopedia.", {"query": _s("what to look up")}, "string", search,
                     flaky=True)

    def researcher(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no height"
        found = _find(request, r"Eiffel Tower: (\d+) metres")
        if found:
            height = 300 if planted else int(found.group(1))  # planted: its stale belief, not the search result
            return [Call("final_answer", {"answer": f"The Eiffel Tower is {height} metres tall."})]
        if _errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("search", {"query": "Eiffel Tower height"})]

    worker = _tool_agent(researcher, [tool], "researcher", max_steps=5,
                         description="Looks facts up in an encyclopedia.")

    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        other = re.search(r"\((\d+) m\)", request.task)
        reported = _find(request, r"Eiffel Tower is (\d+) metres")
        if reported and other:
            return _code("subtract the two heights.",
                         f"eiffel = {reported.group(1)}\nfinal_answer(f'DIFF: {{eiffel - {other.group(1)}}}')")
        return _code("ask the researcher for the height.",
                     'report = researcher(task="Find the height of the Eiffel Tower in metres.")\nprint(report)')

    return _code_agent(manager, [], "manager", max_steps=4, managed=[worker])


def build_fx(planted: bool) -> Any:
    """The manager asks ``fx_agent`` for the EUR→USD rate and converts the amount of the task with it."""
    tool = make_tool("get_rate", "The current exchange rate of a currency pair.", {"pair": _s("like EUR/USD")},
                     "string", lambda pair: f"rate {pair}: 1.08", flaky=True)

    def fx(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no rate"
        found = _find(request, r"rate EUR/USD: ([\d.]+)")
        if found:
            rate = "1.2" if planted else found.group(1)  # planted: a stale rate from its memory
            return [Call("final_answer", {"answer": f"1 EUR = {rate} USD"})]
        if _errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        return [Call("get_rate", {"pair": "EUR/USD"})]

    worker = _tool_agent(fx, [tool], "fx_agent", max_steps=5, description="Knows exchange rates.")

    def manager(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        amount = re.search(r"Convert (\d+) EUR", request.task)
        rate = _find(request, r"1 EUR = ([\d.]+) USD")
        if amount and rate:
            return [Call("final_answer", {"answer": f"USD: {int(amount.group(1)) * float(rate.group(1)):.2f}"})]
        return [Call("fx_agent", {"task": "What is the EUR to USD exchange rate?"})]

    return _tool_agent(manager, [], "manager", max_steps=4, managed=[worker])


# -------------------------------------------------------------------------------- a loop that never converges


def build_newton(planted: bool) -> Any:
    """``get_target`` (flaky), then Newton iterations for the square root bounded by ``i < 3`` (planted; the
    working agent allows 6): never converged, the agent reruns the same code until max_steps."""
    tool = make_tool("get_target", "The number whose square root is wanted.", {"name": _s("the dataset")},
                     "number", lambda name: 2, flaky=True)
    bound = 3 if planted else 6

    def policy(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "it did not converge"
        done = _find(request, r"converged: ([\d.]+)")
        if done:
            return _code("it converged.", f"final_answer('ROOT: {done.group(1)}')")
        if _find(request, r"target: ") or _find(request, r"not converged"):
            return _code("iterate Newton's method.",
                         "x = 1.0\ni = 0\n"
                         f"while abs(x * x - target) > 1e-9 and i < {bound}:\n"
                         "    x = (x + target / x) / 2\n    i += 1\n"
                         "if abs(x * x - target) <= 1e-9:\n    print(f'converged: {x:.6f}')\n"
                         "else:\n    print('not converged')")
        if _errors(request) >= 3:
            return _code("no target.", "final_answer('no target')")
        return _code("fetch the target.", "target = get_target(name='demo')\nprint('target:', target)")

    return _code_agent(policy, [tool], "solver", max_steps=5)


def build_job(planted: bool) -> Any:
    """``submit_job`` (flaky) then ``wait_for_job(job, timeout)``: the job needs 6 s; planted timeout 5 is retried
    unchanged until max_steps."""
    submit = make_tool("submit_job", "Submit a report job.", {"report": _s("the report name")}, "string",
                       lambda report: f"submitted job {report}-job", flaky=True)

    def wait(job: str, timeout: int) -> str:
        return f"job {job} done: 4213 rows" if int(timeout) >= 6 else f"job {job} still running after {timeout} s"

    waiter = make_tool("wait_for_job", "Wait for a job to finish.", {"job": _s("the job id"),
                                                                    "timeout": _i("seconds to wait")},
                       "string", wait)

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "the job never finished"
        done = _find(request, r"done: (\d+) rows")
        if done:
            return [Call("final_answer", {"answer": f"ROWS: {done.group(1)}"})]
        job = _find(request, r"submitted job (\S+)")
        if job:
            return [Call("wait_for_job", {"job": job.group(1), "timeout": 5 if planted else 10})]
        if _errors(request) >= 3:
            return [Call("final_answer", {"answer": "cannot submit"})]
        return [Call("submit_job", {"report": "sales"})]

    return _tool_agent(policy, [submit, waiter], "runner", max_steps=6)


# --------------------------------------------------------------------------------------- a wrong handoff


def build_ticket(planted: bool) -> Any:
    """The manager classifies a ticket (flaky ``classify_ticket``) and delegates it; planted: ``!=``."""
    refund = make_tool("refund_amount", "The refundable amount of an order.", {"order": _s("the order id")},
                       "string", lambda order: f"refund for order {order}: 40 dollars")

    def billing(request: ScriptedRequest) -> Reply:
        found = _find(request, r"refund for order \w+: (\d+) dollars")
        if found:
            return [Call("final_answer", {"answer": f"REFUND: {found.group(1)}"})]
        order = re.search(r"order (\w+)", request.task)
        return [Call("refund_amount", {"order": order.group(1) if order else "unknown"})]

    def tech(request: ScriptedRequest) -> Reply:
        return [Call("final_answer", {"answer": "Please restart the device."})]

    billing_agent = _tool_agent(billing, [refund], "billing_agent", max_steps=3, description="Handles refunds.")
    tech_agent = _tool_agent(tech, [], "tech_agent", max_steps=3, description="Handles technical problems.")
    classify = make_tool("classify_ticket", "Classify a support ticket.", {"text": _s("the ticket")}, "string",
                         lambda text: "category: billing" if "refund" in text else "category: tech", flaky=True)

    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        answer = _find(request, r"managed agent '\w+':\s*(.+)")
        if answer:
            return _code("relay the answer.", f"final_answer({answer.group(1).strip()!r})")
        category = _find(request, r"category: (\w+)")
        if category:
            op = "!=" if planted else "=="
            return _code("route the ticket.",
                         f"if category {op} 'billing':\n"
                         "    answer = billing_agent(task='Refund order B7 and say how much.')\n"
                         "else:\n"
                         "    answer = tech_agent(task='Help with the device.')\n"
                         "print(answer)")
        if _errors(request) >= 3:
            return _code("cannot classify.", "final_answer('cannot classify')")
        return _code("classify the ticket.",
                     "category = classify_ticket(text='I want a refund for order B7.').replace('category: ', '')\n"
                     "print('category:', category)")

    return _code_agent(manager, [classify], "manager", max_steps=5, managed=[billing_agent, tech_agent])


def build_region(planted: bool) -> Any:
    """The manager routes a VAT question to ``eu_agent`` (flaky ``vat_rate``) or ``us_agent``; planted: ``!=``."""
    vat = make_tool("vat_rate", "The VAT rate of an EU country in percent.", {"country": _s("the country")},
                    "string", lambda country: f"VAT in {country}: 20 percent", flaky=True)

    def eu(request: ScriptedRequest) -> Reply:
        found = _find(request, r"VAT in \w+: (\d+) percent")
        if found:
            return [Call("final_answer", {"answer": f"VAT: {found.group(1)}%"})]
        if _errors(request) >= 3:
            return [Call("final_answer", {"answer": "unknown"})]
        country = re.search(r"in (\w+)\?", request.task)
        return [Call("vat_rate", {"country": country.group(1) if country else "unknown"})]

    def us(request: ScriptedRequest) -> Reply:
        return [Call("final_answer", {"answer": "There is no VAT; sales tax varies by state."})]

    eu_agent = _tool_agent(eu, [vat], "eu_agent", max_steps=4, description="Answers EU tax questions.")
    us_agent = _tool_agent(us, [], "us_agent", max_steps=3, description="Answers US tax questions.")

    audit = make_tool("audit_log", "Write a note to the audit log.", {"note": _s("the note")}, "string",
                      lambda note: f"audited: {note}", flaky=True)

    def manager(request: ScriptedRequest) -> str:
        if request.is_final_summary:
            return "no answer"
        answer = _find(request, r"managed agent '\w+':\s*(.+)")
        if answer and _find(request, r"audited: "):
            return _code("relay the answer.", f"final_answer({answer.group(1).strip()!r})")
        if answer:
            return _code("audit the answer.", "print(audit_log(note='tax question answered'))")
        country = re.search(r"in (\w+)\?", request.task)
        name = country.group(1) if country else "unknown"
        op = "!=" if planted else "=="
        return _code(f"{name} is in the EU; route the question.",
                     f"region = 'EU'\nif region {op} 'EU':\n"
                     f"    answer = eu_agent(task='What is the VAT rate in {name}?')\n"
                     "else:\n"
                     f"    answer = us_agent(task='What is the sales tax in {name}?')\n"
                     "print(answer)")

    return _code_agent(manager, [audit], "manager", max_steps=6, managed=[eu_agent, us_agent])


BUILDERS: dict[str, Callable[[bool], Any]] = {
    "shop": build_shop,
    "split": build_split,
    "squares": build_squares,
    "readings": build_readings,
    "landmark": build_landmark,
    "fx": build_fx,
    "newton": build_newton,
    "job": build_job,
    "ticket": build_ticket,
    "region": build_region,
}


# The helpers the zoo's teams (:mod:`causaltrace.testing.faults.zoo_smolagents` and its siblings) build on, by
# public names.
ok = _ok
find = _find
errors = _errors
string, number, integer = _s, _n, _i
code_reply = _code
tool_agent = _tool_agent
code_agent = _code_agent
