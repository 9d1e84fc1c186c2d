"""The smolagents demo team: a manager CodeAgent with a managed ToolCallingAgent, and a planted decisive error.

The manager reads "from 1 to 6" off the task, writes code that lists the integers and asks ``math_agent`` for the
sum of their squares. The planted fault: the manager's code uses ``range(1, 6)`` — an off-by-one boundary bug that
drops 6 — so the managed agent faithfully sums the wrong list and the answer is 55 instead of 91. A recovered
failure is no part of it; the decisive step is the manager's code. A boundary mutation (``6 → 7``) repairs it.
Driven offline by the reactive scripted models of :mod:`causaltrace.testing.smolagents`.
"""

from __future__ import annotations

from typing import Any

from causaltrace.schema import Outcome, Verdict

__all__ = ["ANSWER", "FAULT", "TASK", "build", "build_fixed", "verify"]

TASK = "What is the sum of the squares of the integers from 1 to 6?"
ANSWER = 91
FAULT = "the manager's code lists the integers with range(1, 6), dropping 6 (an off-by-one boundary bug)"


def _team(*, off_by_one: bool) -> Any:
    from smolagents import CodeAgent, LogLevel, ToolCallingAgent

    from causaltrace.testing.smolagents import (
        ScriptedModel,
        code_manager_policy,
        sum_of_powers_tool,
        tool_worker_policy,
    )

    worker = ToolCallingAgent(
        tools=[sum_of_powers_tool()],
        model=ScriptedModel(tool_worker_policy()),
        name="math_agent",
        description="Adds up the squares (or cubes) of a list of integers with the sum_of_powers tool.",
        max_steps=4,
        verbosity_level=LogLevel.OFF,
    )
    return CodeAgent(
        tools=[],
        model=ScriptedModel(code_manager_policy(off_by_one=off_by_one)),
        managed_agents=[worker],
        name="manager",
        max_steps=5,
        verbosity_level=LogLevel.OFF,
    )


def build() -> Any:
    """A fresh demo team WITH the planted fault (the factory replay rebuilds it with)."""
    return _team(off_by_one=True)


def build_fixed() -> Any:
    """The same team without the fault (answers 91)."""
    return _team(off_by_one=False)


def verify(outcome: Outcome) -> Verdict:
    """The final answer must be 91 (1 + 4 + 9 + 16 + 25 + 36)."""
    answer = (outcome.final_answer or "").strip()
    if answer == str(ANSWER):
        return Verdict(passed=True)
    return Verdict(passed=False, reason=f"the final answer is {answer or 'empty'}, expected {ANSWER}")


def run_once() -> Any:
    """Run the faulty team once (instrumented by the caller); returns the agent's answer."""
    return build().run(TASK)
