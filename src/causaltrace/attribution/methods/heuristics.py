"""Deterministic heuristics that need no model (issue 5): trivial baselines that check the loader and the metric.

* ``first-agent-step``: the first step that is not user input, not a tool / terminal output (typed by the
  importer: a Who&When terminal is a ``tool_response``) and not an instruction (a step that addresses an agent, as
  an importer maps an orchestrator's ``X (-> Y)``); its agent is ``Step.agent`` (issue 32: no speaker names read).
* ``most-active-agent``: the agent (users and terminals excluded) with the most steps, ties to the one that spoke
  first, at its first step.

On live runs the same definitions apply to the run's view (``agent_turn`` containers are skipped; ``task`` and
user-input steps count as the user; an llm_response that produced child steps is not a step of its own here, its
children are). Strict Who&When figures (agent % / step %): Algorithm-Generated 49.21 / 15.87 and 53.97 / 19.05;
Hand-Crafted 31.03 / 1.72 for both.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from causaltrace.attribution.context import Conclusion, DiagnosisContext, Method, MethodFailed
from causaltrace.attribution.stages.view import agent_of, is_instruction, is_terminal, is_user_input, split_producers
from causaltrace.schema import Candidate, Run, Step

__all__ = ["FirstAgentStep", "MostActiveAgent"]


def _steps(run: Run) -> list[Step]:
    producers = split_producers(run)
    return [s for s in run.steps if s.kind != "agent_turn" and s.step_id not in producers]


def _agent(step: Step) -> str:
    return agent_of(step)


class FirstAgentStep(Method):
    """``first-agent-step`` (module docstring)."""

    name: ClassVar[str] = "first-agent-step"

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        for step in _steps(ctx.run):
            if is_user_input(step) or is_terminal(step) or (is_instruction(step) and step.kind == "message"):
                continue
            agent = _agent(step)
            return Conclusion(
                step_index=step.index,
                agent=agent,
                explanation=f"heuristic: the first step by an agent ({agent}, step {step.index})",
                candidates=[Candidate(step_id=step.step_id, index=step.index, agent=agent, score=1.0,
                                      reasons=("first agent step",))],
                verified_by="heuristic",
            )
        raise MethodFailed("first-agent-step: the run has no step by an agent")


class MostActiveAgent(Method):
    """``most-active-agent`` (module docstring)."""

    name: ClassVar[str] = "most-active-agent"

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        counts: Counter[str] = Counter()
        first: dict[str, Step] = {}
        for step in _steps(ctx.run):
            if is_user_input(step) or is_terminal(step):
                continue
            agent = _agent(step)
            counts[agent] += 1
            first.setdefault(agent, step)
        if not counts:
            raise MethodFailed("most-active-agent: the run has no step by an agent")
        best = max(counts, key=lambda a: (counts[a], -first[a].index))
        step = first[best]
        return Conclusion(
            step_index=step.index,
            agent=best,
            explanation=f"heuristic: {best} has the most steps ({counts[best]}); its first step is {step.index}",
            candidates=[Candidate(step_id=step.step_id, index=step.index, agent=best, score=1.0,
                                  reasons=(f"{counts[best]} steps",))],
            verified_by="heuristic",
        )
