"""The task-success specification C_success (EMFA §2.2 stage 1), a stage ``emfa`` and ``dcfa`` share (issue 18: a
stage-level module, so ``dcfa`` does not import ``emfa``).

``success_spec``: one call derives C_success from the query alone — the expected outcome (its form, not a guess of
its value) plus the explicit source, format, temporal and numerical constraints the query states. ``emfa`` checks
every step against it; ``dcfa`` scores its counterfactual simulations against it when there is no ground-truth
answer (SEEDS §7.2); ``graph``'s ``refine`` reads it when a method already computed it. Ablated: the task text is
the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.judge import output_model, short_text
from causaltrace.attribution.stages.prompting import SYSTEM_DECISIVE_ERROR, clip, problem, schema_tail, simple_messages

__all__ = ["SuccessSpec", "SuccessSpecStage"]


@dataclass
class SuccessSpec:
    """C_success: the expected outcome and its explicit constraints."""

    expected_outcome: str
    constraints: list[dict[str, str]] = field(default_factory=list)
    via: str = "llm"

    def text(self) -> str:
        lines = [f"Expected outcome: {self.expected_outcome}"]
        lines += [f"- {c['kind']} constraint: {c['text']}" for c in self.constraints]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"expected_outcome": self.expected_outcome, "constraints": self.constraints, "via": self.via}


_Constraint = output_model("Constraint", kind=Literal["source", "format", "temporal", "numerical", "other"],
                           text=short_text(300))
_Spec = output_model("SuccessSpec", expected_outcome=short_text(500), constraints=list[_Constraint])  # type: ignore[valid-type]


class SuccessSpecStage(Stage[SuccessSpec]):
    """``success_spec`` — EMFA §2.2 (stage 1): one call derives C_success from the query Q alone (the expected
    outcome plus explicit source, format, temporal and numerical constraints). Reused by ``dcfa`` as the target
    of its LCE when there is no ground-truth answer (SEEDS §7.2)."""

    stage_id: ClassVar[str] = "success_spec"
    uses_model: ClassVar[bool] = True

    async def run(self, ctx: DiagnosisContext) -> SuccessSpec:
        user = (f"The query: {problem(ctx)}\n\nWrite the TASK-SUCCESS SPECIFICATION of this query, from the query "
                "alone: what a correct final outcome is (its form, not a guess of its value), and every explicit "
                "constraint the query states on sources, format, time and numbers." + schema_tail(_Spec))
        answer: Any = await ctx.ask(self.stage_id, simple_messages(SYSTEM_DECISIVE_ERROR, user), _Spec)
        return SuccessSpec(clip(answer.expected_outcome, 500),
                           [{"kind": c.kind, "text": clip(c.text, 300)} for c in answer.constraints])

    def skipped(self, ctx: DiagnosisContext) -> SuccessSpec:
        return SuccessSpec(f"a correct answer to: {clip(problem(ctx), 400)}", via="the task text (ablated)")
