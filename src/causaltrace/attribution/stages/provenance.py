"""Value provenance (issue 19 item 3, issue 20 item 4): where each value a step used came from, whether what a step
decided reaches the failing answer, and which steps CHANGED a value they were given.

One stage, ``provenance``, used by attribution (``graph``'s ranking and the LLM stages' evidence) and by repair
(pruning and ordering the steps it tries). No model; linear in the run (a bounded search for derived numbers).

Public API (what repair calls; ``run_or_view`` is a :class:`~causaltrace.schema.Run`)::

    from causaltrace.attribution.stages.provenance import build_provenance, reaches_answer

    prov = build_provenance(run)             # optionally graph=, anchor= (the failure anchor's step index)
    reach = reaches_answer(run)              # {step_id: score 0..1}; 0 = nothing the step decided reaches the
                                             # failing answer (a step repair may skip)
    steps.sort(key=prov.order_key)           # step ids: reaching and value-changing steps first, then earlier
    prov.changes_of(step_id)                 # the values a step changed relative to its source (Change list)
    prov.origin(step_id, "unit:lb")          # the step id that first introduced a value the step used

How it works:

1. **Values.** Each step's typed values (:mod:`.values`: numbers, units, entities, operators, target names,
   qualifier words) are read from its text, tool arguments and code.
2. **Availability order.** A value exists when the step that holds it exists: a tool result or code output when it
   ENDED, a call or message when it started (a code step that called a managed agent shows the agent's answer in
   its output, recorded before the agent's own steps). Imported logs without timestamps keep index order.
3. **Introduction.** A value's introducer is the first step, in that order, that holds it; the task's values and
   user input are *given* (introducer ``-1`` or the user step; a managed agent's task is its delegating call's). An
   ``llm_response`` that produced child steps introduces nothing (its children carry its content). A number that
   is an arithmetic result of numbers seen before (``a ± b``, ``a × b``, ``a ÷ b``, the sum or mean of one step's
   numbers) is *derived*: the step computed it, from its operands' introducers.
4. **Reach.** Backward from the failure anchor, latest first, a reached step reaches the introducers of the values
   it used (and a derived number's operands), its protocol producers (a result's call, a code output's code, a
   final answer's message) and the instructions it answered (handoffs, selections, delegations,
   ``X (-> Y)``) — 0.97 of its reach per such hop — and, more weakly (0.5 per hop), what an agent step merely
   observed or saw before deciding (``observed``, ``saw``, ``continues``: an agent's output depends on what it
   looked at even when no value is copied — a conversion whose result was ignored, a plan it followed). ``reach``
   is 1 for the anchor; 0 for a step no path reaches (a safe prune for repair; a low score, below 0.25, means only
   observation paths lead there).
5. **Changes (restatements and substitutions).** A value a step introduced is compared with its sources: a number
   that is not derived, stated in the same words as a different number of an earlier step (``price … 22`` after
   ``price: 21``), is a *restatement that changed a value*; a unit, weekday, month or qualifier that differs from
   one of the same group the task or an earlier step gave (``lb`` where the task said ``kg``) is a *substitution*
   (a unit written after a number is compared as that number's quantity only: "a 5 min read" on a page is another
   measurement, not the task's hours substituted);
   a number a digit away from a given one (``12.05`` for ``12.50``) is a *copy* slip; a call's number argument that
   no source gave and no arithmetic derives is *unsupported*; a handoff, selection or
   delegation whose target another candidate fits better by the sources' words is a *target substitution*
   (:mod:`.targets`), charged to the step that decided it (for a call made from code, the code); a number the step
   took from a source that labels it as what the task or an instruction excluded (``80 cancelled`` after
   "excluding cancelled orders") is an *ignored* instruction; an approval (``APPROVE``, "looks good") of the failing
   answer whose content lineage (the steps reached by values, requests and instructions alone) never used a value
   the task gave (its ``10%`` discount) is an *unverified* approval.
6. **Responsibility boundary** ("the author of an instruction, not its faithful executor"): a step that uses a
   changed value it did not introduce *carries* it (``carriers``): it executed faithfully what an earlier step
   (often another agent's instruction) got wrong, and the change is charged to the author.

The artifact lists the changes, the carriers, the reach scores and each candidate's introduced values.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.anchor import FailureAnchorStage, find_failure_anchor
from causaltrace.attribution.stages.dependencies import (
    PROTOCOL_KINDS,
    DependencyGraph,
    DependencyGraphStage,
    build_dependency_graph,
)
from causaltrace.attribution.stages.targets import called_names, grounded_alternative
from causaltrace.attribution.stages.values import AFTER_NUMBER, Value, number_key, values_in
from causaltrace.attribution.stages.view import (
    addressee,
    agents_of,
    base_agent,
    content_of,
    is_execution_output,
    is_user_input,
    speaker,
    view_steps,
)
from causaltrace.schema import Run, Step

__all__ = ["Change", "Provenance", "ProvenanceStage", "build_provenance", "reaches_answer"]

TASK = -1
INSTRUCTION_KINDS = frozenset({"handoff_from", "selected_by", "delegated_by"})
_DECAY = 0.97
_OBSERVED = 0.5
_OBSERVATION_KINDS = frozenset({"observed", "saw", "continues"})
_SUBSTITUTABLE = frozenset({"unit", "word"})
_LOGIC = frozenset({"comparison", "span", "mean"})
_APPROVAL = re.compile(r"\b(?:APPROVED?|approved|LGTM|looks good|looks correct|is correct)\b")
_REJECTION = re.compile(r"\b(?:REJECT(?:ED)?|not approved|incorrect|is wrong)\b", re.IGNORECASE)
_FENCE = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)
_MAX_POOL = 40


@dataclass(frozen=True)
class Change:
    """Step ``index`` states ``after`` where its source (step ``source``; ``-1`` the task) had ``before``."""

    index: int
    source: int
    kind: str
    before: str
    after: str
    how: str  # "restatement" | "substitution" | "copy" | "unsupported" | "ignored" | "unverified" | "unfounded" | "omitted"

    def describe(self) -> str:
        where = "the task" if self.source == TASK else f"step {self.source}"
        if self.how == "unverified":
            return (f"approves a result that never used the {self.kind} {self.before!r} the task gave (an incorrect "
                    "verification)")
        if self.how == "unsupported":
            return f"passes the number {self.after!r}, which no source gave and no arithmetic derives (unsupported)"
        if self.how == "unfounded":
            return (f"selects {self.after!r}, whose reply states the failing {self.before!r} from nothing it was given "
                    "(no source, no tool, no arithmetic): the choice of speaker decided the answer")
        if self.how == "omitted":
            return (f"states the answer {self.after!r} before any step used the task's {self.before!r} (the answer "
                    "leaves out an item the task named: a premature answer)")
        if self.how == "ignored":
            return (f"uses the value {self.after!r} labelled as what {where} excluded ({self.before!r}: an ignored "
                    "instruction)")
        verb = {"restatement": "restates", "substitution": "uses", "copy": "copies"}[self.how]
        return f"{verb} {self.kind} {self.after!r} where {where} had {self.before!r} ({self.how} changes a value)"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "source": self.source, "kind": self.kind, "before": self.before,
                "after": self.after, "how": self.how}


@dataclass
class Provenance:
    """Where each value came from, what reaches the failure, what was changed (module docstring)."""

    anchor: int
    step_ids: dict[int, str]
    position: dict[int, int]
    introduced: dict[int, list[Value]] = field(default_factory=dict)
    origins: dict[int, dict[str, int]] = field(default_factory=dict)
    derived: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    reach: dict[int, float] = field(default_factory=dict)
    via: dict[int, int] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    carriers: dict[int, list[Change]] = field(default_factory=dict)
    addressed_by: dict[int, int] = field(default_factory=dict)
    #: the answer's content lineage: the steps reached by values, requests and instructions only (no observation)
    lineage: set[int] = field(default_factory=set)

    @property
    def _index_of(self) -> dict[str, int]:
        return {sid: i for i, sid in self.step_ids.items()}

    def index(self, step: str | int) -> int | None:
        """A step's index from its id (or the index itself)."""
        return step if isinstance(step, int) else self._index_of.get(step)

    def reaches(self, step: str | int) -> float:
        """How strongly what the step decided reaches the failing answer (0 = never)."""
        i = self.index(step)
        return self.reach.get(i, 0.0) if i is not None else 0.0

    def changes_of(self, step: str | int) -> list[Change]:
        """The values the step changed relative to its sources (indexed once per state of ``changes``: a
        10,000-step run asks for every step)."""
        i = self.index(step)
        cached = self.__dict__.get("_changes_by_step")
        if cached is None or cached[0] != len(self.changes):
            by_step: dict[int, list[Change]] = defaultdict(list)
            for c in self.changes:
                by_step[c.index].append(c)
            cached = (len(self.changes), by_step)
            self.__dict__["_changes_by_step"] = cached
        return list(cached[1].get(i, [])) if i is not None else []

    def origin(self, step: str | int, value: str) -> str | None:
        """The id of the step that first introduced ``value`` (``"kind:key"``) that ``step`` used (None: the step
        introduced it, or the task gave it, or the step does not hold it)."""
        i = self.index(step)
        j = self.origins.get(i, {}).get(value) if i is not None else None
        return self.step_ids.get(j) if j is not None else None

    def chain(self, step: str | int) -> list[int]:
        """The steps from ``step`` to the anchor along which it reaches (``via``), as indices."""
        i = self.index(step)
        if i is None:
            return []
        out, seen = [i], {i}
        while out[-1] != self.anchor and out[-1] in self.via and self.via[out[-1]] not in seen:
            out.append(self.via[out[-1]])
            seen.add(out[-1])
        return out

    def order_key(self, step: str | int) -> tuple[int, float, int]:
        """Sort key for steps to try (repair) or inspect: reaching steps first, then value-changing ones, then the
        earlier step (availability order)."""
        i = self.index(step)
        if i is None:
            return (2, 0.0, 0)
        changed = 1.0 if any(c.index == i for c in self.changes) else 0.0
        return (0 if self.reach.get(i, 0.0) > 0 else 1, -changed, self.position.get(i, i))

    def to_json(self) -> dict[str, Any]:
        return {
            "anchor": self.anchor,
            "changes": [c.to_json() for c in self.changes],
            "carriers": {str(i): [c.index for c in cs] for i, cs in sorted(self.carriers.items())},
            "reach": {str(i): round(v, 3) for i, v in sorted(self.reach.items()) if v > 0},
            "introduced": {str(i): [v.kind + ":" + v.key for v in vs[:12]]
                           for i, vs in sorted(self.introduced.items()) if vs},
        }


def _addressed(steps: list[Step]) -> dict[int, int]:
    """Each addressee's first step after an instruction that addressed it (a selection, a handoff, ``X (-> Y)``)
    → that instruction: the executor answers the instruction even where no edge was recorded."""
    out: dict[int, int] = {}
    pending: dict[str, int] = {}
    for step in steps:
        who = base_agent(step.agent or speaker(step))
        if who in pending and not is_execution_output(step) and step.index != pending[who]:
            out[step.index] = pending.pop(who)
        target = addressee(step)
        if target:
            pending[base_agent(target)] = step.index
    return out


def _available_at(step: Step) -> datetime | None:
    return step.ended_at if step.kind in ("tool_response", "code_execution") else step.started_at


def _ordered(steps: list[Step]) -> list[Step]:
    """Steps in the order their content became available (module docstring, 2)."""
    times = [_available_at(s) for s in steps]
    if not steps or any(t is None for t in times):
        return list(steps)
    return [s for _, _, s in sorted(((t, s.index, s) for t, s in zip(times, steps, strict=True)),
                                    key=lambda x: (x[0], x[1]))]


def _step_values(step: Step, skip: frozenset[str]) -> list[Value]:
    code = ""
    for holder in (step.arguments or {}, step.inputs):
        if isinstance(holder.get("code"), str):
            code = str(holder["code"])
            break
    if not code and "```" in (step.content or ""):
        code = "\n".join(_FENCE.findall(step.content[:50_000]))
    targets: list[str] = []
    who = addressee(step)
    if who:
        targets.append(base_agent(who))
    if step.kind == "tool_call" and step.tool_name:
        targets.append(step.tool_name)
    arguments = step.arguments if step.kind == "tool_call" else None
    return values_in(content_of(step), code=code, arguments=arguments, targets=tuple(targets), skip=skip)


def _vkey(v: Value) -> str:
    return f"{v.kind}:{v.key}"


def _derivation(x: float, pool: dict[float, int], exact: dict[float, int]) -> list[int] | None:
    """The introducers of two numbers of ``pool`` whose sum, difference, product or quotient is ``x`` (linear in the
    pool: each number's partner is looked up in ``exact``, the pool by rounded value)."""
    for a, i in pool.items():
        for b in (x - a, a - x, x + a, x / a if a else None, a / x if a and x else None, x * a):
            if b is None:
                continue
            j = exact.get(round(b, 6))
            if j is not None and (j != i or b == a):
                return [i, j]
    return None


def _group_derivation(x: float, groups: Iterable[tuple[int, list[float]]]) -> list[int] | None:
    for j, nums in groups:
        if len(nums) >= 2 and (abs(sum(nums) - x) < 1e-6 or round(sum(nums) / len(nums), 2) == round(x, 2)):
            return [j]
    return None


def _run_totals(pool: list[tuple[float, int]]) -> dict[float, list[int]]:
    """The sums and means of every run of consecutive numbers of ``pool`` (the order they were first seen), by
    rounded value → their introducers: a total or average over the items fetched one by one."""
    out: dict[float, list[int]] = {}
    for i in range(len(pool)):
        total = 0.0
        for j in range(i, len(pool)):
            total += pool[j][0]
            if j > i:
                owners = [owner for _, owner in pool[i:j + 1]]
                mean = total / (j - i + 1)
                out.setdefault(round(total, 6), owners)
                out.setdefault(round(mean, 6), owners)
                out.setdefault(round(mean, 2), owners)
    return out


def _small(key: str) -> bool:
    """A single-digit integer: too common in text to be a restated value."""
    return key.lstrip("-").isdigit() and len(key.lstrip("-")) == 1


def _is_copy_slip(before: str, after: str) -> bool:
    """``after`` is ``before`` with two digits swapped or one digit changed (not merely a different magnitude)."""
    a, b = (x.replace(".", "").replace(",", "").lstrip("-") for x in (before, after))
    if len(a) != len(b) or len(a) < 3 or a == b:
        return False
    diff = [k for k in range(len(a)) if a[k] != b[k]]
    return len(diff) == 1 or (len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])


class _Builder:
    """One pass over the run in availability order (module docstring, 1–3 and 5)."""

    def __init__(self, run: Run, graph: DependencyGraph, anchor: int) -> None:
        self.run, self.graph, self.anchor = run, graph, anchor
        steps = view_steps(run)
        self.steps = _ordered(steps)
        self.by_index = {s.index: s for s in steps}
        names = {n.lower() for n in agents_of(run)} | {(s.tool_name or "").lower() for s in steps}
        names |= {base_agent(speaker(s)).lower() for s in steps}
        self.skip = frozenset(n for n in names if n)
        self.agent_list = [n for n in agents_of(run) if n]
        self.agent_names = {n.lower() for n in self.agent_list}
        self.producers = {d.step_id for s in run.steps for d in s.depends_on if d.kind == "produced_by"}
        self.prov = Provenance(anchor=anchor, step_ids={s.index: s.step_id for s in steps},
                               position={s.index: p for p, s in enumerate(self.steps)})
        self.first: dict[str, int] = {}
        self.first_value: dict[str, Value] = {}
        self.holders: dict[str, list[int]] = defaultdict(list)
        self.numbers: dict[float, int] = {}
        self.step_numbers: dict[int, list[float]] = {}
        self.values: dict[int, list[Value]] = {}
        self.exclusions: dict[str, tuple[int, Value]] = {}
        self.prov.addressed_by = _addressed(self.steps)
        self.user_steps: list[int] = [s.index for s in steps if is_user_input(s) and s.kind != "task"][:3]
        self.user_steps += [s.index for s in steps if s.kind == "task"][:1]
        first_task = next((s for s in steps if s.kind == "task"), None)
        self.task_text = run.task or (content_of(first_task) if first_task is not None else "")

    def given(self) -> None:
        self.values[TASK] = values_in(self.run.task or "", skip=self.skip)
        for v in self.values[TASK]:
            self._see(v, TASK)
            if v.group == "exclusion":
                self.exclusions.setdefault(v.tag, (TASK, v))

    def _see(self, v: Value, owner: int) -> None:
        k = _vkey(v)
        if k not in self.first:
            self.first[k] = owner
            self.first_value[k] = v
            if v.kind == "number":
                self.numbers.setdefault(float(v.key), owner)
                if len(self.numbers) > _MAX_POOL:
                    del self.numbers[next(iter(self.numbers))]
        self.holders[k].append(owner)

    def _owner(self, step: Step) -> int:
        """Who a step's new values are charged to: a managed agent's task is its delegating call's."""
        if step.kind == "task":
            for e in self.graph.incoming(step.index):
                if e.kind == "delegated_by":
                    return e.producer
        return step.index

    def walk(self) -> None:
        for step in self.steps:
            k = step.index
            vals = _step_values(step, self.skip)
            self.values[k] = vals
            shadowed = step.step_id in self.producers
            owner = self._owner(step)
            origins: dict[str, int] = {}
            new: list[Value] = []
            for v in vals:
                key = _vkey(v)
                if key in self.first:
                    if self.first[key] != k:
                        origins[key] = self.first[key]
                elif not shadowed:
                    new.append(v)
            if not is_execution_output(step):
                self._derive(k, new)
                self._computed_by_code(step, new)
            self.prov.origins[k] = origins
            if not is_user_input(step) or owner != k:
                self.prov.introduced[k] = new
            for v in new:
                self._see(v, owner if owner != k else k)
            for v in vals:
                if _vkey(v) in origins:
                    self.holders[_vkey(v)].append(k)
            nums = [float(v.key) for v in vals if v.kind == "number"]
            if nums:
                self.step_numbers[k] = nums[:50]
            if not shadowed and not is_user_input(step) and not is_execution_output(step):
                self._changes(step, new)
                self._route(step)
                self._excluded(step, vals, origins)
            for v in vals:
                if v.group == "exclusion":
                    self.exclusions.setdefault(v.tag, (k, v))

    def _excluded(self, step: Step, vals: list[Value], origins: dict[str, int]) -> None:
        """A number the step took from a source where its label is what an instruction excluded (``excluding
        cancelled orders``; ``80 cancelled``): the instruction was ignored."""
        if not self.exclusions:
            return
        sources: list[int] | None = None
        for v in vals:
            key = _vkey(v)
            if v.kind != "number" or key not in origins:
                continue
            if sources is None:
                sources = self._sources(step.index)
            # the label the number has where the step took it from (its latest source holding it), else where it
            # first appeared: one amount can be "60 cancelled" in one account and a sum of 60 in another
            tag = next((u.tag for j in sources for u in self.values.get(j, []) if _vkey(u) == key and u.tag),
                       self.first_value[key].tag)
            if tag and tag in self.exclusions:
                j, rule = self.exclusions[tag]
                self.prov.changes.append(Change(step.index, j, "word", rule.key, v.key, "ignored"))
                return

    def _route(self, step: Step) -> None:
        """A routing step whose target another candidate fits better (:mod:`.targets`), charged to the step that
        decided it (a call made from code: the code)."""
        owner = step.index
        if step.kind in ("handoff", "speaker_selection"):
            chosen = addressee(step)
        elif step.kind == "tool_call" and step.tool_name and (
                step.tool_name.lower() in self.agent_names or step.tool_name.startswith("transfer_to_")):
            chosen = step.tool_name.removeprefix("transfer_to_")
            for j in self.graph.producers(owner, ("produced_by",)):
                if self.by_index[j].kind == "code_execution":
                    owner = next(iter(self.graph.producers(j, ("executes",))), owner)
        else:
            return
        if not chosen:
            return
        listed = step.metadata.get("candidates")
        candidates = [str(c) for c in listed] if isinstance(listed, list) else [*self.agent_list]
        code = str((self.by_index[owner].arguments or {}).get("code") or "") if owner in self.by_index else ""
        candidates += called_names(code, chosen)
        texts = [(j, self.run.task or "" if j == TASK else content_of(self.by_index[j]))
                 for j in self._sources(owner) if j != owner and (j == TASK or j in self.by_index)]
        found = grounded_alternative(chosen, candidates, texts)
        if found is not None:
            change = Change(owner, found[1], "target", found[0], chosen, "substitution")
            if change not in self.prov.changes:
                self.prov.changes.append(change)

    def _computed_by_code(self, step: Step, new: list[Value]) -> None:
        """A call that running code made (``produced_by`` a code execution): its new numbers are the code's
        results (``avg = (30 + 24 + 15) / 2`` then ``final_answer(f'AVG: {avg}')``), derived from the code step — never
        a restatement or an unsupported number of the call itself."""
        if step.kind != "tool_call":
            return
        runs = [j for j in self.graph.producers(step.index, ("produced_by",))
                if j in self.by_index and self.by_index[j].kind == "code_execution"]
        authors = [a for j in runs for a in self.graph.producers(j, ("executes",))] or runs
        if not authors:
            return
        derived = self.prov.derived.setdefault(step.index, {})
        for v in new:
            if v.kind == "number":
                derived.setdefault(_vkey(v), authors[:1])

    def _derive(self, k: int, new: list[Value]) -> None:
        numbers = [v for v in new if v.kind == "number"][:_MAX_POOL]
        if not numbers:
            return
        pool = dict(self.numbers)
        exact = {round(a, 6): i for a, i in pool.items()}
        groups = [(j, self.step_numbers[j]) for j in self.graph.producers(k) if j in self.step_numbers][:4]
        runs: dict[float, list[int]] | None = None
        for v in numbers:
            x = float(v.key)
            ops = _derivation(x, pool, exact) or _group_derivation(x, groups)
            if ops is None:
                if runs is None:
                    runs = _run_totals(list(pool.items())[-16:])
                ops = runs.get(round(x, 6)) or runs.get(round(x, 2))
            if ops is not None:
                self.prov.derived.setdefault(k, {})[_vkey(v)] = ops

    def _sources(self, k: int) -> list[int]:
        """What a step restates or follows: the task, and its producers up to two edges back (latest first)."""
        near: list[int] = []
        frontier = [k]
        for _ in range(2):
            frontier = [j for i in frontier for j in (*self.graph.producers(i), *self._instruction(i))
                        if j != k and j not in near]
            near.extend(dict.fromkeys(frontier))
        near.sort(key=lambda j: -self.prov.position.get(j, -1))
        return [*near, *self.user_steps, TASK]

    def _instruction(self, i: int) -> tuple[int, ...]:
        j = self.prov.addressed_by.get(i)
        return (j,) if j is not None else ()

    def _changes(self, step: Step, new: list[Value]) -> None:
        k = step.index
        derived = self.prov.derived.get(k, {})
        held = {_vkey(v) for v in self.values.get(k, [])}
        candidates = [v for v in new[:_MAX_POOL] if (v.kind == "number" and _vkey(v) not in derived) or (
            v.kind in _SUBSTITUTABLE or v.kind == "quantity" or (v.kind == "entity" and v.group in ("weekday",
                                                                                                   "month"))
            or v.group in _LOGIC)]
        for v in candidates:
            if v.group == "mean":
                self._mean_slip(step, v)
        candidates = [v for v in candidates if v.group != "mean"]
        if not candidates:
            return
        kinds = {v.kind for v in candidates}
        pool = [(j, u) for j in self._sources(k) for u in self.values.get(j, [])[:400]
                if u.kind in kinds and _vkey(u) not in held]
        arguments = {number_key(str(a)) for a in (step.arguments or {}).values()
                     if isinstance(a, (int, float)) and not isinstance(a, bool)} if step.kind == "tool_call" else set()
        given = {TASK, *self.user_steps, *self._instruction(k)}
        given_pool = [(j, u) for j, u in pool if j in given]
        for v in candidates:
            if v.kind == "unit" and v.tag == AFTER_NUMBER:
                continue
            # a bare unit or date word is compared with what the step was GIVEN (the task, the user, its
            # instruction): against any page it read, "m" after "mi" or "May" after "June" is prose
            bare = v.kind == "unit" or v.kind == "entity"
            change = (self._restated(k, v, pool) if v.kind == "number"
                      else self._substituted(k, v, given_pool if bare else pool))
            if change is None and v.kind == "number" and v.key in arguments:
                change = Change(k, TASK, "number", "", v.key, "unsupported")
            if change is not None and not any((c.index, c.kind, c.before, c.after) == (
                    k, change.kind, change.before, change.after) for c in self.prov.changes[-8:]):
                self.prov.changes.append(change)

    @staticmethod
    def _restated(k: int, v: Value, pool: list[tuple[int, Value]]) -> Change | None:
        """A number of the step's sources stated in the same words as ``v`` but different (the latest source
        first), else a given number ``v`` is a copy slip of (module docstring, 5)."""
        slip: Change | None = None
        for j, u in pool:
            if u.kind != "number":
                continue
            shared = len(u.context & v.context)
            if shared >= 2 and shared * 2 >= min(len(u.context), len(v.context)) and not _small(v.key):
                return Change(k, j, "number", u.key, v.key, "restatement")
            if slip is None and _is_copy_slip(u.raw, v.raw):
                slip = Change(k, j, "number", u.key, v.key, "copy")
        return slip

    def _mean_slip(self, step: Step, v: Value) -> None:
        """``(a + b + c) / 2`` where a mean is meant (the step or the task says average / mean / avg)."""
        terms, divisor = v.key.removeprefix("mean of ").split(" / ")
        said = f"{content_of(step)} {(step.arguments or {}).get('code', '')} {self.task_text}".lower()
        if terms != divisor and any(w in said for w in ("average", "mean", "avg")):
            self.prov.changes.append(Change(step.index, step.index, "operator", f"/ {terms}", f"/ {divisor}",
                                            "substitution"))

    @staticmethod
    def _substituted(k: int, v: Value, pool: list[tuple[int, Value]]) -> Change | None:
        """A value of the step's sources of the same group as ``v`` (a quantity or comparison: the same number; a
        span: the same start or end) but different."""
        for j, u in pool:
            if u.kind != v.kind or u.group != v.group or u.key == v.key:
                continue
            if v.kind == "quantity":
                (n_u, unit_u), (n_v, unit_v) = u.key.split(" ", 1), v.key.split(" ", 1)
                if n_u == n_v:
                    return Change(k, j, "unit", unit_u, unit_v, "substitution")
            elif v.group == "comparison":
                if u.key.split(" ", 1)[1] == v.key.split(" ", 1)[1]:
                    return Change(k, j, "operator", u.key, v.key, "substitution")
            elif v.group == "span":
                (a_u, b_u), (a_v, b_v) = u.key.split(".."), v.key.split("..")
                if a_u == a_v or b_u == b_v:
                    return Change(k, j, "operator", u.key, v.key, "substitution")
            else:
                return Change(k, j, v.kind, u.key, v.key, "substitution")
        return None


def _reach(prov: Provenance, graph: DependencyGraph, order: list[int], outputs: set[int],
           verdicts: frozenset[int] = frozenset()) -> None:
    """Backward reach from the anchor (module docstring, 4); ``outputs`` are the execution outputs (they depend on
    their call only). An observed or seen ``verdicts`` step (an approval) is followed as a request, not as a mere
    observation: the step after it acted on it (an answer is released because it was approved) — for reach only,
    not for the content lineage (an approval carries no value into the answer)."""
    reach = prov.reach
    reach[prov.anchor] = 1.0
    prov.lineage.add(prov.anchor)
    for k in reversed(order):
        r = reach.get(k, 0.0)
        if r <= 0:
            continue
        sources: set[int] = set(prov.origins.get(k, {}).values())
        for ops in prov.derived.get(k, {}).values():
            sources.update(ops)
        seen: set[int] = set()
        gates: set[int] = set()
        if k in prov.addressed_by:
            sources.add(prov.addressed_by[k])
        for e in graph.incoming(k):
            if e.kind in PROTOCOL_KINDS or e.kind in INSTRUCTION_KINDS or e.rule == "instruction→reply":
                sources.add(e.producer)
            elif e.kind in _OBSERVATION_KINDS and k not in outputs:
                (gates if e.producer in verdicts else seen).add(e.producer)
        if k in prov.lineage:
            prov.lineage.update(j for j in sources if j != TASK)
        for j, hop in [*((j, _DECAY) for j in sources | gates), *((j, _OBSERVED) for j in seen - sources)]:
            if j == k or j == TASK:
                continue
            if r * hop > reach.get(j, 0.0):
                reach[j] = r * hop
                prov.via[j] = k


def _is_approval(text: str) -> bool:
    """An approving verdict (``APPROVE``, "looks good") that rejects nothing."""
    return bool(_APPROVAL.search(text)) and not _REJECTION.search(text)


def _approvals(builder: _Builder, prov: Provenance) -> None:
    """An approval of the failing answer that never used a value the task gave (module docstring, 5): the
    verification that should have caught it (MAST's incorrect verification)."""
    used = {_vkey(v) for i in prov.lineage if i in builder.by_index and not is_user_input(builder.by_index[i])
            for v in builder.values.get(i, [])}
    given = [v for v in builder.values.get(TASK) or builder.values.get(next(iter(builder.user_steps[-1:]), TASK), [])
             if (v.kind == "number" and not _small(v.key)) or v.kind == "word"]
    unused = [v for v in given if _vkey(v) not in used]
    if not unused:
        return
    for step in builder.steps:
        i = step.index
        if (i in prov.lineage or prov.reach.get(i, 0.0) >= 0.25) and not is_user_input(step) and (
                not is_execution_output(step)) and step.step_id not in builder.producers:
            if _is_approval(content_of(step)):
                prov.changes.append(Change(i, TASK, unused[0].kind, unused[0].key, "approved", "unverified"))
                return


def _unfounded_choices(builder: _Builder, prov: Provenance) -> None:
    """A routing step (a speaker selection, a handoff) with alternatives whose chosen agent then states the failing
    answer's number from NOTHING it was given — its reply takes no value from any source, calls no tool, and the
    number is not derived (a guess): the reply was predictable from the choice, so the earliest step whose
    correction flips the outcome is the choice (CausalFlow's earliest decisive step), not the guess it led to."""
    answer = {_vkey(v) for v in builder.values.get(prov.anchor, []) if v.kind == "number" and not _small(v.key)}
    if not answer:
        return
    turns: dict[int, list[Step]] = defaultdict(list)
    for step in builder.steps:
        j = prov.addressed_by.get(step.index)
        if j is not None:
            turns[j].append(step)
    for j, first in turns.items():
        router = builder.by_index.get(j)
        if router is None or router.kind not in ("speaker_selection", "handoff"):
            continue
        listed = router.metadata.get("candidates")
        if len(listed if isinstance(listed, list) else builder.agent_list) < 2:
            continue
        agent = base_agent(first[0].agent or speaker(first[0]))
        reply: list[Step] = []  # the chosen agent's turn: its steps from its first reply on, until another speaks
        for s in builder.steps[prov.position[first[0].index]:prov.position[first[0].index] + 50]:
            if base_agent(s.agent or speaker(s)) != agent or s.index > prov.anchor or (
                    reply and s.kind in ("tool_call", "tool_response")):
                break
            reply.append(s)
        own = {s.index for s in reply}
        stated = {_vkey(v) for s in reply for v in prov.introduced.get(s.index, [])} & answer
        if not stated or any(s.kind in ("tool_call", "tool_response") or prov.derived.get(s.index)
                             or set(prov.origins.get(s.index, {}).values()) - own for s in reply):
            continue
        change = Change(j, j, "target", sorted(stated)[0].split(":", 1)[1], addressee(router) or agent, "unfounded")
        prov.changes.append(change)


_ARTICLE_ITEM = r"(?:an?|the|one)\s+([A-Za-z][\w-]*)"
_CODE_ITEM = r"([A-Z][\w-]*)"
_LISTS = tuple(re.compile(rf"{item}(?:\s*,\s*{item})*\s*,?\s+and\s+{item}") for item in (_ARTICLE_ITEM, _CODE_ITEM))


def task_items(task: str) -> list[str]:
    """The items a task enumerates — ``a widget, a gadget and a gizmo``, ``accounts K4 and K5``, ``Paris, Rome and
    Oslo`` — lowercased, in order (an article list, else a list of capitalised names or codes)."""
    for pattern, item in zip(_LISTS, (_ARTICLE_ITEM, _CODE_ITEM), strict=True):
        for m in pattern.finditer(task[:5000]):
            found = [w.lower() for w in re.findall(item, m.group(0)) if w.lower() not in ("and", "the")]
            if len(found) >= 2:
                return found
    return []


def _mentions(text: str, item: str) -> bool:
    stem_ = item[:-1] if len(item) > 4 and item.endswith("s") else item
    return re.search(rf"\b{re.escape(stem_)}", text, re.IGNORECASE) is not None


def _omitted_items(builder: _Builder, prov: Provenance) -> None:
    """The step that first states the failing answer's number while an item the task enumerates was never used by
    any step before it (module docstring, 5): the answer was given before the work was done (premature
    termination). Charged to the first agent step holding the number (its introducer, or the first decision that
    took it from a tool's result)."""
    items = task_items(builder.task_text)
    answer = [_vkey(v) for v in builder.values.get(prov.anchor, []) if v.kind == "number" and not _small(v.key)]
    if not items or not answer:
        return
    worked: list[str] = []
    for step in builder.steps:
        if prov.position[step.index] > prov.position.get(prov.anchor, 10**9):
            break
        if is_user_input(step):
            continue
        held = {_vkey(v) for v in builder.values.get(step.index, [])}
        if (answer[0] in held and not is_execution_output(step) and step.step_id not in builder.producers):
            missing = [it for it in items if not any(_mentions(t, it) for t in worked)]
            if missing and len(missing) < len(items):
                prov.changes.append(Change(step.index, TASK, "word", missing[0], answer[0].split(":", 1)[1],
                                           "omitted"))
            return
        text = content_of(step)
        worked.append(f"{text} {step.arguments}" if step.arguments else text)


def _carriers(prov: Provenance) -> None:
    """Steps that use a value another step changed (the responsibility boundary)."""
    changed = {(c.index, f"{c.kind}:{c.after}"): c for c in prov.changes}
    for k, origins in prov.origins.items():
        for key, j in origins.items():
            c = changed.get((j, key))
            if c is not None and j != k:
                prov.carriers.setdefault(k, []).append(c)


def build_provenance(run: Run, graph: DependencyGraph | None = None, anchor: int | None = None) -> Provenance:
    """The run's value provenance (module docstring); ``graph`` and ``anchor`` default to the stages' own."""
    graph = graph if graph is not None else build_dependency_graph(run)
    if anchor is None:
        anchor = find_failure_anchor(run).index
    builder = _Builder(run, graph, anchor)
    builder.given()
    builder.walk()
    prov = builder.prov
    order = [s.index for s in builder.steps if s.index <= anchor or prov.position[s.index] <= prov.position.get(
        anchor, len(builder.steps))]
    verdicts = frozenset(s.index for s in builder.steps if not is_user_input(s) and _is_approval(content_of(s)))
    _reach(prov, graph, order, {s.index for s in builder.steps if is_execution_output(s)}, verdicts)
    _approvals(builder, prov)
    _unfounded_choices(builder, prov)
    _omitted_items(builder, prov)
    _carriers(prov)
    return prov


def reaches_answer(run: Run, *, graph: DependencyGraph | None = None, anchor: int | None = None) -> dict[str, float]:
    """``{step_id: reach}`` for every step of the run's view: how strongly what the step decided reaches the failing
    answer, 0 when nothing does (a step repair may skip). See :func:`build_provenance`."""
    prov = build_provenance(run, graph, anchor)
    return {sid: prov.reach.get(i, 0.0) for i, sid in prov.step_ids.items()}


class ProvenanceStage(Stage[Provenance]):
    """Stage ``provenance`` (deterministic; needs ``dependency_graph`` and ``failure_anchor``)."""

    stage_id: ClassVar[str] = "provenance"

    async def run(self, ctx: DiagnosisContext) -> Provenance:
        graph = await ctx.run_stage(DependencyGraphStage())
        anchor = await ctx.run_stage(FailureAnchorStage())
        return build_provenance(ctx.run, graph, anchor.index)

    def skipped(self, ctx: DiagnosisContext) -> Provenance:
        return Provenance(anchor=-1, step_ids={}, position={})

