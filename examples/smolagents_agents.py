"""A smolagents manager CodeAgent with a managed ToolCallingAgent, traced by causaltrace.

The manager reads "from A to B" off the task, writes code that lists those integers and asks the managed
``math_agent`` for the sum of their squares; ``math_agent`` calls the ``sum_of_powers`` tool with the numbers it was
given and reports the result; the manager answers with that number.

* ``build()`` — the working team (answer 91); ``build_failing()`` — the same team whose manager writes
  ``range(1, 6)`` instead of ``range(1, 6 + 1)``: an off-by-one boundary bug that drops 6 and makes the answer 55.
  A range-end mutation of the manager's code repairs it.
* ``build_parallel()`` — a manager ToolCallingAgent that delegates to TWO managed agents in one response
  (``squares_agent`` and ``cubes_agent``; smolagents runs them in parallel threads) and adds their reports
  (``TASK_PARALLEL``, answer 191).
* ``TASK`` / ``verify`` — the task and the verifier (the final answer must be 91).

Offline by default: every agent is driven by a reactive scripted model (``causaltrace.testing.smolagents``). With
``--model NAME`` or ``CAUSALTRACE_MODEL`` set, every agent uses that litellm model instead (``LiteLLMModel``).

Run it::

    python examples/smolagents_agents.py            # prints the run id and the outcome (success)
    python examples/smolagents_agents.py --fail     # the planted off-by-one: outcome failure
    causaltrace show <run id>

As a factory: ``--factory examples/smolagents_agents.py:build`` (or ``:build_failing``, ``:build_parallel``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import causaltrace
from causaltrace.schema import Outcome, Verdict

TASK = "What is the sum of the squares of the integers from 1 to 6?"
ANSWER = 91
TASK_PARALLEL = (
    "What is the sum of the squares of the integers from 1 to 6 plus the sum of the cubes of the integers from 1 to 4?"
)
ANSWER_PARALLEL = 191

__all__ = [
    "ANSWER",
    "ANSWER_PARALLEL",
    "TASK",
    "TASK_PARALLEL",
    "build",
    "build_failing",
    "build_parallel",
    "main",
    "verify",
    "verify_parallel",
]


def _number_check(expected: int, outcome: Outcome) -> Verdict:
    answer = (outcome.final_answer or "").strip()
    try:
        value = float(answer)
    except ValueError:
        return Verdict(passed=False, reason=f"the final answer {answer!r} is not a number (expected {expected})")
    if value == expected:
        return Verdict(passed=True)
    return Verdict(passed=False, reason=f"the final answer is {answer}, expected {expected}")


def verify(outcome: Outcome) -> Verdict:
    """The final answer must be the number 91 (1 + 4 + 9 + 16 + 25 + 36)."""
    return _number_check(ANSWER, outcome)


def verify_parallel(outcome: Outcome) -> Verdict:
    """The final answer must be 191 (91 + 100)."""
    return _number_check(ANSWER_PARALLEL, outcome)


def _live_model(model: str | None = None) -> Any:
    name = model or os.environ.get("CAUSALTRACE_MODEL")
    if not name:
        return None
    from smolagents import LiteLLMModel

    return LiteLLMModel(model_id=name, temperature=0)


def _model(policy: Any, model: str | None, factory: Any = None) -> Any:
    if factory is not None:
        return factory(policy)
    live = _live_model(model)
    if live is not None:
        return live
    from causaltrace.testing.smolagents import ScriptedModel

    return ScriptedModel(policy)


def _math_agent(name: str = "math_agent", *, model: str | None = None, factory: Any = None) -> Any:
    from smolagents import LogLevel, ToolCallingAgent

    from causaltrace.testing.smolagents import sum_of_powers_tool, tool_worker_policy

    return ToolCallingAgent(
        tools=[sum_of_powers_tool()],
        model=_model(tool_worker_policy(), model, factory),
        name=name,
        description="Adds up the squares (or cubes) of a list of integers with the sum_of_powers tool.",
        max_steps=4,
        verbosity_level=LogLevel.OFF,
    )


def _manager(*, off_by_one: bool, model: str | None = None, factory: Any = None) -> Any:
    from smolagents import CodeAgent, LogLevel

    from causaltrace.testing.smolagents import code_manager_policy

    return CodeAgent(
        tools=[],
        model=_model(code_manager_policy(off_by_one=off_by_one), model, factory),
        managed_agents=[_math_agent(model=model, factory=factory)],
        name="manager",
        max_steps=5,
        verbosity_level=LogLevel.OFF,
    )


def build(model_factory: Any = None) -> Any:
    """A fresh manager CodeAgent with its managed ToolCallingAgent ``math_agent`` (answers 91).

    ``model_factory(policy)`` makes each agent's model from its scripted policy instead of a ScriptedModel — e.g. a
    real OpenAIServerModel on a scripted endpoint (``causaltrace.testing.openai_wire``), as the overhead benchmark
    drives it."""
    return _manager(off_by_one=False, factory=model_factory)


def build_failing() -> Any:
    """The same team with the planted fault: the manager's code uses ``range(1, 6)`` (answers 55)."""
    return _manager(off_by_one=True)


def build_parallel(model_factory: Any = None) -> Any:
    """A manager ToolCallingAgent delegating to two managed agents in parallel (answers ``TASK_PARALLEL``: 191);
    ``model_factory`` as for :func:`build`."""
    return _parallel_manager(factory=model_factory)


def _parallel_manager(model: str | None = None, factory: Any = None) -> Any:
    from smolagents import LogLevel, ToolCallingAgent

    from causaltrace.testing.smolagents import parallel_manager_policy

    return ToolCallingAgent(
        tools=[],
        model=_model(parallel_manager_policy(), model, factory),
        managed_agents=[
            _math_agent("squares_agent", model=model, factory=factory),
            _math_agent("cubes_agent", model=model, factory=factory),
        ],
        name="manager",
        max_steps=4,
        max_tool_threads=2,
        verbosity_level=LogLevel.OFF,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fail", action="store_true", help="run the team with the planted off-by-one bug")
    parser.add_argument("--parallel", action="store_true", help="run the two-managed-agents team instead")
    parser.add_argument("--model", help="a litellm model name (default: $CAUSALTRACE_MODEL, else scripted models)")
    args = parser.parse_args(argv)

    from causaltrace.instrumentation.smolagents import instrument_smolagents

    instrument_smolagents()
    if args.parallel:
        agent, task, check = _parallel_manager(args.model), TASK_PARALLEL, verify_parallel
    else:
        agent, task, check = _manager(off_by_one=args.fail, model=args.model), TASK, verify
    with causaltrace.run(task=task, verify=check, name="smolagents-example") as handle:
        agent.run(task)
    outcome = handle.outcome
    assert outcome is not None
    print(f"run {handle.run_id}")
    print(f"outcome {outcome.status}: final answer {outcome.final_answer!r}" + (f" ({outcome.reason})" if outcome.reason else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
