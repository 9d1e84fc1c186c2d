"""A small AutoGen AgentChat team traced by causaltrace: a planner, a tool-using solver and a reviewer.

The module exposes what the CLI and the replay executor need (ARCHITECTURE "Shared contracts"):

* ``build()`` — a zero-argument factory returning a FRESH team (RoundRobinGroupChat: planner → solver → reviewer,
  stopping on ``APPROVE`` or after 12 messages); ``build_failing()`` — the same team with the planted fault;
* ``TASK`` — the task; ``verify`` — ``Outcome -> Verdict``, checking that the final answer's RESULT is 126.

Offline by default: the agents run on the REACTIVE scripted clients of :mod:`causaltrace.testing.autogen`
(deterministic functions of each request). With ``--model NAME`` or ``CAUSALTRACE_MODEL=NAME`` they talk to an
OpenAI-compatible endpoint instead (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, e.g. a litellm proxy or llama.cpp).

The fault (``--fail``): the solver calls ``add(17, 26)`` instead of ``add(17, 25)`` — one argument off by one. It
then multiplies the wrong sum (43 * 3 = 129), and the reviewer, who re-checks only the arithmetic it is shown,
approves: the error is carried forward and the verifier fails. A +-1 mutation of that tool_call's ``b`` argument
(ARCHITECTURE decision 9) repairs the run.

Run it:  python examples/autogen_team.py [--fail] [--model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys

from causaltrace.schema import Outcome, Verdict

TASK = "Compute (17 + 25) * 3. Report the answer as 'RESULT: <number>'."
EXPECTED = 126

_PLANNER_PROMPT = "You are the planner. Restate the numbers of the task as a two-step plan for the solver."
_SOLVER_PROMPT = "You are the solver. Use the add and multiply tools on the planner's numbers; end with 'RESULT: n'."
_REVIEWER_PROMPT = "You are the reviewer. Check the solver's arithmetic. Say APPROVE if it is right, else REJECT."


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _real_client(model: str):  # pragma: no cover - needs a model endpoint
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(
        model=model,
        base_url=os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY", "x"),
        temperature=0,
        model_info={
            "vision": False,
            "function_calling": True,
            "json_output": True,
            "family": "unknown",
            "structured_output": True,
        },
    )


def _build(*, fail: bool, model: str | None = None):
    from causaltrace.testing.autogen import planner_client, reviewer_client, solver_client

    model = model if model is not None else os.environ.get("CAUSALTRACE_MODEL")
    if model:
        return build_with((_real_client(model), _real_client(model), _real_client(model)))
    return build_with((planner_client(), solver_client(off_by_one=fail), reviewer_client()))


def build_with(clients):
    """The team on the given (planner, solver, reviewer) model clients — e.g. real OpenAI clients on a scripted
    endpoint (``causaltrace.testing.openai_wire``), as the overhead benchmark drives them."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.tools import FunctionTool

    tools = [
        FunctionTool(add, description="Add two integers."),
        FunctionTool(multiply, description="Multiply two integers."),
    ]
    planner = AssistantAgent("planner", model_client=clients[0], system_message=_PLANNER_PROMPT)
    solver = AssistantAgent(
        "solver", model_client=clients[1], system_message=_SOLVER_PROMPT, tools=tools, max_tool_iterations=5
    )
    reviewer = AssistantAgent("reviewer", model_client=clients[2], system_message=_REVIEWER_PROMPT)
    termination = TextMentionTermination("APPROVE") | MaxMessageTermination(12)
    return RoundRobinGroupChat([planner, solver, reviewer], name="team", termination_condition=termination)


def build():
    """A fresh planner / solver / reviewer team (the factory for ``--factory examples/autogen_team.py:build``)."""
    return _build(fail=False)


def build_failing():
    """The same team whose solver passes ``add`` an argument off by one (``--fail``)."""
    return _build(fail=True)


def verify(outcome: Outcome) -> Verdict:
    """Success when the final answer reports ``RESULT: 126``."""
    found = re.search(r"RESULT:\s*(-?\d+)", outcome.final_answer or "")
    if found is None:
        return Verdict(passed=False, reason="the final answer reports no RESULT")
    value = int(found.group(1))
    if value != EXPECTED:
        return Verdict(passed=False, reason=f"RESULT {value} is wrong: (17 + 25) * 3 = {EXPECTED}")
    return Verdict(passed=True)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fail", action="store_true", help="plant the off-by-one tool argument")
    parser.add_argument("--model", help="an OpenAI-compatible model name (default: the offline scripted clients)")
    args = parser.parse_args(argv)

    import causaltrace
    from causaltrace.instrumentation.autogen import instrument_autogen

    instrument_autogen()
    team = _build(fail=args.fail, model=args.model)
    async with causaltrace.run(task=TASK, verify=verify, name="autogen_team") as handle:
        await team.run(task=TASK)
    outcome = handle.outcome
    print(f"run id:  {handle.run_id}")
    print(f"outcome: {outcome.status} (stop={outcome.stop}) {outcome.reason}".rstrip())
    print(f"answer:  {outcome.final_answer}")
    print(f"steps:   {len(handle.run.steps) if handle.run else 0}   (causaltrace show {handle.run_id[:12]})")
    return 0 if outcome.status == "success" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
