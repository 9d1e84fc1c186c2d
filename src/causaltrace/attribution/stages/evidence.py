"""Per-candidate evidence for the LLM stages (issue 20 item 7): what the deterministic stages found about a step, as
a compact block that ``recall``, ``adjudicate`` and ``refine`` show beside the ranking.

The ranking hands the model a score and one-line reasons; the evidence gives the STRUCTURE the ranking was built
from, so the model can check it against the steps instead of trusting a number. Per candidate step, from the
memoised ``provenance`` (:mod:`.provenance`) and ``loop_detect`` (:mod:`.loops`) stages:

* **values** (last: the budget cuts it first) — the origin chain of what the step used: each value with the step that first introduced it (``uses 22
  from step 4``; a value another step changed also names what that step changed it from), the numbers it derived
  by arithmetic, and the values it introduced itself;
* **changed** — a value the step changed relative to its source (a restatement that changes a tool's number, a
  unit / entity / target substitution, a copy slip, an unsupported argument, an ignored exclusion, an unverified
  approval: :meth:`Change.describe <causaltrace.attribution.stages.provenance.Change.describe>`);
* **responsibility** — the boundary "the author of an instruction, not its faithful executor": the step carries a
  value an earlier step changed (it executed faithfully; the author is responsible), or later steps carry the
  step's own change (it is the author);
* **reach** — whether what the step decided reaches the failing answer, and along which steps; or that nothing
  does;
* **no finding** (after the loop verdict) — the step has no finding (issue 32: blame rests on findings; a model's pick of such a step
  stays uncertain); **error** — an error the step introduced and nobody recovered (the finding's claim);
* **task** — the run's opening drifted to another task (:mod:`.drift`: its plan holds almost none of the task's
  words); **invented** — the first step that made its data up (:mod:`.fabrication`: simulated, hypothetical,
  placeholder data);
* **loop** — the loop detector's verdict: starts / repeats an action loop without progress, replies to or issues a
  re-issued instruction; and the repetitions it does NOT count, said so the model does not count them either: the
  same tool called again with different arguments (one call per item), the same speaker selected again
  (turn-taking), a final answer returning an earlier step.

Budgets: each step's block is at most ``per_step`` characters (default 360) and a whole section at most ``budget``
(default 1600; the local model's window is 8k tokens, and a Who&When trace must still fit beside it); steps are
rendered in the order the caller gives (best-ranked first), so the budget drops the least important. A step with
nothing to say gets no line. No model call: the two stages are computed (and memoised) for the ranking anyway, so
the evidence costs no call and leaves every stage's call count unchanged.

The stage ``evidence`` (deterministic, memoised) records, per step, the lines it can show (its artifact).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.drift import TaskDrift, TaskDriftStage
from causaltrace.attribution.stages.fabrication import Fabrication, FabricationStage
from causaltrace.attribution.stages.loops import Loop, LoopDetectStage, call_identity, is_answer_step
from causaltrace.attribution.stages.provenance import TASK, Provenance, ProvenanceStage
from causaltrace.attribution.stages.view import addressee, agent_of, candidate_steps
from causaltrace.schema import Run, Step

__all__ = ["BUDGET", "EVIDENCE_INTRO", "PER_STEP", "Evidence", "EvidenceStage", "build_evidence", "evidence_of", "rank_order"]

#: The line that introduces an evidence section in a prompt (one text for every stage).
EVIDENCE_INTRO = ("What the deterministic stages found about these steps (value origins, changed values, the "
                  "responsibility boundary — the author of a wrong value or instruction, not its faithful executor, "
                  "is responsible —, reach to the failure, loop verdicts; evidence to check against the steps, may "
                  "be wrong):")
#: The default character budget of one evidence section, and of one step's block in it.
BUDGET = 1600
PER_STEP = 360
#: value kinds worth naming in an origin chain, most telling first (entities and words come last: there are many)
_KIND_ORDER = {"number": 0, "quantity": 0, "unit": 1, "target": 2, "operator": 3, "entity": 4, "word": 5}
#: what the task gave that is worth naming (its entities and words are shared by every step)
_GIVEN_KINDS = frozenset({"number", "quantity", "unit"})
_MAX_ORIGINS = 4
_MAX_GAP = 12  # as the loop detector's default: a repetition further back is not compared


@dataclass
class Evidence:
    """Per step index, the evidence lines (``"changed: …"``, ``"values: …"``…), most telling first."""

    lines: dict[int, list[str]] = field(default_factory=dict)

    def of(self, index: int) -> list[str]:
        """The lines of one step (empty when the stages found nothing to say)."""
        return self.lines.get(index, [])

    def text(self, index: int, per_step: int = PER_STEP) -> str:
        """One step's lines joined on one line, at most ``per_step`` characters (cut at a whole line when it can)."""
        return _fit("; ".join(self.of(index)), per_step)

    def block(self, indices: Iterable[int], *, budget: int = BUDGET, per_step: int = PER_STEP) -> str:
        """``- step i: …`` lines for ``indices`` in the given order (duplicates and silent steps skipped), stopping
        before the line that would exceed ``budget`` characters; empty when no step has evidence."""
        out: list[str] = []
        used = 0
        for i in dict.fromkeys(indices):
            if not self.of(i):
                continue
            line = f"- step {i}: {self.text(i, per_step)}"
            if used + len(line) + 1 > budget:
                break
            out.append(line)
            used += len(line) + 1
        return "\n".join(out)

    def shown(self, indices: Iterable[int], *, budget: int = BUDGET, per_step: int = PER_STEP) -> list[int]:
        """The steps :meth:`block` renders for these arguments (what a stage's artifact records)."""
        block = self.block(indices, budget=budget, per_step=per_step)
        return [int(line.split(":", 1)[0].removeprefix("- step ")) for line in block.splitlines()]

    def to_json(self) -> dict[str, Any]:
        return {str(i): ls for i, ls in sorted(self.lines.items()) if ls}


def _fit(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    cut = text.rfind("; ", 0, n - 1)
    return text[:cut] + " …" if cut > n // 2 else text[: n - 1] + "…"


def _where(j: int, tasks: frozenset[int] = frozenset()) -> str:
    return "the task" if j == TASK or j in tasks else f"step {j}"


def _steps(indices: Sequence[int], n: int = 5) -> str:
    shown = ", ".join(str(i) for i in indices[:n])
    return shown + (", …" if len(indices) > n else "")


def _values_line(prov: Provenance, step: Step, tasks: frozenset[int]) -> str | None:
    """The origin chain of what ``step`` used, what it derived and what it introduced (its own tool's name, which
    every call of it holds, is no value of interest)."""
    i, own = step.index, f"target:{step.tool_name}" if step.tool_name else ""
    changed = {(c.index, f"{c.kind}:{c.after}"): c for c in prov.changes}
    # a value another step changed first, then what earlier steps (not the task) gave, by kind, latest first
    origins = sorted(((key, j) for key, j in prov.origins.get(i, {}).items()
                      if key.split(":", 1)[0] in _KIND_ORDER and key != own
                      and (key.split(":", 1)[0] in _GIVEN_KINDS or (j != TASK and j not in tasks))),
                     key=lambda kv: ((kv[1], kv[0]) not in changed, kv[1] == TASK or kv[1] in tasks,
                                     _KIND_ORDER[kv[0].split(":", 1)[0]], -kv[1]))
    parts: list[str] = []
    uses = []
    for key, j in origins[:_MAX_ORIGINS]:
        text = f"{key.split(':', 1)[1]} from {_where(j, tasks)}"
        c = changed.get((j, key))
        if c is not None:
            text += f" (which changed {_where(c.source, tasks)}'s {c.before!r})"
        uses.append(text)
    if uses:
        parts.append("uses " + ", ".join(uses) + (" …" if len(origins) > _MAX_ORIGINS else ""))
    for key, ops in list(prov.derived.get(i, {}).items())[:2]:
        parts.append(f"computes {key.split(':', 1)[1]} from "
                     + ", ".join(_where(j, tasks) for j in sorted(set(ops))))
    new = sorted(prov.introduced.get(i, []), key=lambda v: _KIND_ORDER.get(v.kind, 9))
    shown = [v.key for v in new if v.kind in _KIND_ORDER and v.kind != "word" and f"{v.kind}:{v.key}" not in prov.derived.get(i, {})
             and f"{v.kind}:{v.key}" != own]
    if shown:
        parts.append("introduces " + ", ".join(shown[:_MAX_ORIGINS]) + (" …" if len(shown) > _MAX_ORIGINS else ""))
    return "values: " + "; ".join(parts) if parts else None


def _responsibility_lines(prov: Provenance, i: int, tasks: frozenset[int]) -> list[str]:
    out = []
    own = {f"{c.kind}:{c.after}" for c in prov.changes_of(i)}
    carried = [c for c in prov.carriers.get(i, []) if f"{c.kind}:{c.after}" not in own]
    if carried:
        c = carried[0]
        out.append(f"responsibility: carries the {c.kind} {c.after!r} that step {c.index} introduced in place of "
                   f"{_where(c.source, tasks)}'s {c.before!r} — a faithful executor; the author, step {c.index}, is "
                   "responsible, not this step")
    carriers = sorted(k for k, cs in prov.carriers.items() if k != i and any(c.index == i for c in cs))
    if carriers:
        out.append(f"responsibility: its change is carried by step(s) {_steps(carriers)} — it is the author")
    return out


def _reach_line(prov: Provenance, i: int) -> str | None:
    if prov.anchor < 0 or i not in prov.step_ids:
        return None
    reach = prov.reaches(i)
    if reach <= 0:
        return "reach: nothing this step decided reaches the failing answer"
    chain = prov.chain(i)
    if len(chain) <= 1:
        return "reach: the failure shows at this step"
    weak = " (only through what later steps observed)" if reach < 0.25 else ""
    return f"reach: reaches the failure via steps {' → '.join(map(str, chain))} (reach {reach:.2f}){weak}"


def _loop_lines(loops: Sequence[Loop], i: int) -> list[str]:
    out = []
    for lp in loops:
        members = _steps(lp.members)
        if lp.kind == "action" and i in lp.members:
            if i == lp.start:
                out.append(f"loop: starts an action loop without progress — {lp.agent} repeats the same action at "
                           f"steps {members} ({lp.repeated_followups:.0%} of the repeats got no new information)")
            else:
                out.append(f"loop: repeats the action of step {lp.start} without progress (loop steps {members})")
        elif lp.kind == "instruction":
            if lp.replies and i == lp.replies[0]:
                out.append(f"loop: first reply to an instruction {lp.agent} re-issued to {lp.addressee} (steps "
                           f"{members}): it did not satisfy {lp.agent}, or the instruction was ambiguous")
            elif i in lp.replies:
                out.append(f"loop: a later reply in {lp.agent}'s re-issued instruction to {lp.addressee}")
            elif i in lp.members:
                out.append(f"loop: {lp.agent} issues this instruction to {lp.addressee} again (steps {members})")
    return out


def _not_loop_line(step: Step, earlier: Sequence[Step]) -> str | None:
    """The repetitions the loop detector does not count (module docstring), said for a step in no loop."""
    who = agent_of(step)
    if is_answer_step(step):
        return None  # a final answer returning a step is said by its values; nothing to add
    if step.kind == "speaker_selection":
        target = addressee(step)
        prev = next((s for s in reversed(earlier) if s.kind == "speaker_selection" and addressee(s) == target), None)
        if target and prev is not None:
            return (f"loop: none — selects {target} again as at step {prev.index}: turn-taking, not a repetition")
        return None
    ident = call_identity(step)
    if ident is None or not step.tool_name:
        return None
    same_tool = [s for s in earlier if s.tool_name == step.tool_name and agent_of(s) == who
                 and call_identity(s) is not None]
    if same_tool and all(call_identity(s) != ident for s in same_tool):
        return (f"loop: none — calls {step.tool_name} again (as at step {same_tool[-1].index}) with different "
                "arguments: one call per item, not a repetition")
    return None


def build_evidence(run: Run, provenance: Provenance | None, loops: Sequence[Loop],
                   drift: TaskDrift | None = None, fabrication: Fabrication | None = None,
                   findings: Sequence[dict[str, Any]] | None = None) -> Evidence:
    """The evidence lines of every attribution candidate of ``run`` (module docstring); ``findings``: the
    ``findings`` stage's artifact (issue 32 item 9: a step without a finding says so first; an unrecovered error's
    finding is shown; the other families already have their lines)."""
    prov = provenance if provenance is not None and provenance.anchor >= 0 else None
    steps = candidate_steps(run)
    in_loop = {i for lp in loops for i in (*lp.members, *lp.replies)}
    tasks = frozenset(s.index for s in run.steps if s.kind == "task")
    found: dict[int, list[dict[str, Any]]] = {}
    for f in findings or ():
        found.setdefault(int(f.get("index", -1)), []).append(f)
    out = Evidence()
    for pos, step in enumerate(steps):
        i = step.index
        lines: list[str] = [f"task: {drift.describe()}"] if drift is not None and drift.index == i else []
        if fabrication is not None and fabrication.index == i:
            lines.append(f"invented: {fabrication.describe()}")
        if prov is not None:
            lines += [f"changed: {c.describe()}" for c in prov.changes_of(i)[:2]]
            lines += _responsibility_lines(prov, i, tasks)
        # the findings the lines above do not already say (changes, loops, drift and invention have their own)
        lines += [f"error: {f.get('claim')}" for f in found.get(i, []) if f.get("family") == "unrecovered_error"][:1]
        lines += _loop_lines(loops, i)
        if i not in in_loop:
            window = [s for s in steps[max(0, pos - _MAX_GAP): pos] if i - s.index <= _MAX_GAP]
            line = _not_loop_line(step, window)
            if line is not None:
                lines.append(line)
        if findings is not None and i not in found:
            lines.append("no finding: nothing the run shows is wrong at this step")
        if prov is not None:
            lines += [x for x in (_reach_line(prov, i), _values_line(prov, step, tasks)) if x]
        if lines:
            out.lines[i] = lines
    return out


class EvidenceStage(Stage[Evidence]):
    """Stage ``evidence`` (deterministic, memoised; needs ``provenance``, ``loop_detect``, ``task_drift`` and
    ``fabrication``)."""

    stage_id: ClassVar[str] = "evidence"

    async def run(self, ctx: DiagnosisContext) -> Evidence:
        provenance = await ctx.run_stage(ProvenanceStage())
        loops = await ctx.run_stage(LoopDetectStage())
        drift = (await ctx.run_stage(TaskDriftStage())).drift
        fabrication = (await ctx.run_stage(FabricationStage())).fabrication
        # the findings stage's artifact (read, not imported: attribution.findings builds on these stages)
        findings = ctx.artifacts.get("findings")
        return build_evidence(ctx.run, provenance, loops, drift, fabrication,
                              findings if isinstance(findings, list) else None)

    def skipped(self, ctx: DiagnosisContext) -> Evidence:
        return Evidence()


async def evidence_of(ctx: DiagnosisContext) -> Evidence:
    """The diagnosis's evidence (the memoised ``evidence`` stage; empty when it is ablated)."""
    return await ctx.run_stage(EvidenceStage())


def rank_order(ranking: Sequence[Any], first: Iterable[int] = ()) -> list[int]:
    """Step indices in the order evidence is shown: ``first`` (e.g. a segment's ranked steps), then the ranking."""
    return list(dict.fromkeys([*first, *(c.index for c in ranking)]))

