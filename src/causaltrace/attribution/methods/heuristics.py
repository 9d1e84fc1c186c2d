"""Deterministic heuristics that need no model (issue 5): trivial baselines that check the loader and the metric.

* ``first-agent-step``: the first step whose speaker is not the human / user, not a code-execution terminal
  (``Computer_terminal``, ``ComputerTerminal``) and not an orchestrator instruction (``Orchestrator (-> X)``); the
  agent is the speaker's base name (text before ``" ("``).
* ``most-active-agent``: the agent (base name; human / user and terminals excluded) with the most steps, ties to
  the one that spoke first, at its first step.

On live runs the same definitions apply to the run's view (``agent_turn`` containers are skipped; ``task`` and
user-input steps count as the user; an llm_response that produced child steps is not a step of its own here, its
children are). Strict Who&When figures (agent % / step %): Algorithm-Generated 49.21 / 15.87 and 53.97 / 19.05;
Hand-Crafted 31.03 / 1.72 for both.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from causaltrace.attribution.context import Conclusion, DiagnosisContext, Method, MethodFailed
from causaltrace.attribution.stages.view import base_agent, is_instruction, is_terminal, is_user_input, speaker
from causaltrace.schema import Candidate, Run, Step

__all__ = ["FirstAgentStep", "MostActiveAgent"]


def _steps(run: Run) -> list[Step]:
    producers = {d.step_id for s in run.steps for d in s.depends_on if d.kind == "produced_by"}
    return [s for s in run.steps if s.kind != "agent_turn" and s.step_id not in producers]


def _agent(step: Step) -> str:
    return base_agent(speaker(step)) or step.agent


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
