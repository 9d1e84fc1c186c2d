"""The AutoGen demo team: planner → tool-using solver → reviewer (RoundRobinGroupChat), with a planted fault.

The planted fault: the solver calls ``add(17, 26)`` instead of ``add(17, 25)`` — a tool argument off by one — then
multiplies the wrong sum; the reviewer re-checks only the arithmetic it is shown and approves, carrying the error
forward, so the verifier fails (129 instead of 126). A ±1 mutation of that tool_call's ``b`` argument repairs it.
Driven offline by the reactive scripted clients of :mod:`causaltrace.testing.autogen`.
"""

from __future__ import annotations

import re
from typing import Any

from causaltrace.schema import Outcome, Verdict

__all__ = ["EXPECTED", "FAULT", "TASK", "build", "build_fixed", "verify"]

TASK = "Compute (17 + 25) * 3. Report the answer as 'RESULT: <number>'."
EXPECTED = 126
FAULT = "the solver calls add(17, 26) instead of add(17, 25): a tool argument off by one, carried forward"


async def _add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _team(*, fail: bool) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.tools import FunctionTool

    from causaltrace.testing.autogen import planner_client, reviewer_client, solver_client

    tools = [FunctionTool(_add, name="add", description="Add two integers."),
             FunctionTool(_multiply, name="multiply", description="Multiply two integers.")]
    planner = AssistantAgent("planner", model_client=planner_client(),
                             system_message="You are the planner. Restate the numbers as a plan for the solver.")
    solver = AssistantAgent("solver", model_client=solver_client(off_by_one=fail), tools=tools, max_tool_iterations=5,
                            system_message="You are the solver. Use the tools; end with 'RESULT: n'.")
    reviewer = AssistantAgent("reviewer", model_client=reviewer_client(),
                              system_message="You are the reviewer. Say APPROVE if the arithmetic is right.")
    termination = TextMentionTermination("APPROVE") | MaxMessageTermination(12)
    return RoundRobinGroupChat([planner, solver, reviewer], name="team", termination_condition=termination)


def build() -> Any:
    """A fresh demo team WITH the planted fault (the factory replay rebuilds it with)."""
    return _team(fail=True)


def build_fixed() -> Any:
    """The same team without the fault."""
    return _team(fail=False)


def verify(outcome: Outcome) -> Verdict:
    """Success when the final answer reports ``RESULT: 126``."""
    found = re.search(r"RESULT:\s*(-?\d+)", outcome.final_answer or "")
    if found is None:
        return Verdict(passed=False, reason="the final answer reports no RESULT")
    value = int(found.group(1))
    if value != EXPECTED:
        return Verdict(passed=False, reason=f"RESULT {value} is wrong: (17 + 25) * 3 = {EXPECTED}")
    return Verdict(passed=True)
