"""The walk of value provenance (:mod:`.provenance`'s docstring, 1–3 and 5): one pass over the run's steps in the
order their content became available, reading each step's typed values, charging each new value to its introducer
(the task's and the user's are *given*), marking numbers derived from earlier ones, and asking the comparisons of
:mod:`.provenance_changes` whether a value the step introduced changed one of its sources — plus the checks that
need the walk's state: a number an instruction excluded (*ignored*), a routing target another candidate fits better
(*target substitution*), a call's number no source gave (*unsupported*).

Split from :mod:`.provenance`: this is the one stateful part (what was seen first, by whom, which steps hold what);
the record it fills is :mod:`.provenance_record`, the passes after it (:mod:`.provenance_reach`,
:mod:`.provenance_passes`) read its state through :class:`ProvenanceWalk`'s attributes.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import datetime

from causaltrace.attribution.stages.capabilities import capability_words
from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.drift import task_request
from causaltrace.attribution.stages.provenance_changes import (
    case_slip,
    floor_slip,
    is_copy_slip,
    mean_slip,
    percent_sign_slip,
    restated,
    rounds_to,
    sort_slip,
    substituted,
)
from causaltrace.attribution.stages.provenance_derive import (
    capped_total,
    derivation,
    group_derivation,
    priced_total,
    run_totals,
    scaled_derivation,
)
from causaltrace.attribution.stages.provenance_record import TASK, Change, Provenance, value_key
from causaltrace.attribution.stages.targets import (
    called_names,
    capable_alternative,
    grounded_alternative,
    names_decide,
)
from causaltrace.attribution.stages.values import AFTER_NUMBER, Value, argument_names, number_key, stem, values_in
from causaltrace.attribution.stages.view import (
    addressee,
    agent_of,
    agents_of,
    content_of,
    is_execution_output,
    is_user_input,
    split_producers,
    view_steps,
)
from causaltrace.schema import Run, Step

__all__ = ["ProvenanceWalk"]

_SUBSTITUTABLE = frozenset({"unit", "word"})
_LOGIC = frozenset({"comparison", "span", "mean"})
_FENCE = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)
_MAX_POOL = 40
#: a count the task gives: a whole number and its noun ("stay 3 nights", "for 4 people"), not an operand ("* 3.")
#: a rate per a round quantity ("7.5 litres per 100 km", "12 deaths per 1,000 people"): its quotient (0.075) is an
#: operand of the amount it gives (561 km use 42.075 litres)
_PER_N = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)\s*[A-Za-z%€$£]{0,12}\s+per\s+(10|100|1,?000|10,?000|100,?000)\s+[A-Za-z]")
_QUANTITY = re.compile(r"(?<![\w.,:/-])(\d{1,3}(?:,\d{3})*|\d{1,6})\s+(?!(?:and|or|to|of|the|an?|in|on|at|by|for|from|with)\b)[A-Za-z]{3,}")
_INCLUDES = re.compile(r"\b(?:incl\.?|including|inclusive\s+of|with)\s+(?:\d+(?:\.\d+)?\s?%\s+)?([A-Za-z]{3,})",
                       re.IGNORECASE)
_COUNT = re.compile(r"(?<![\w.,:/-])(\d{1,3})\s+(?!(?:and|or|to|of|the|an?|in|on|at|by|for|from|with)\b)[A-Za-z]{3,}")


def _structured(step: Step) -> dict[str, object] | None:
    """The fields of a message that IS a JSON object (a structured output: ``{"sku": "PX-210", "quantity": 21}``):
    values passed on as a call passes its arguments."""
    text = content_of(step).strip() if step.kind == "message" else ""
    if not (text.startswith("{") and text.endswith("}")) or len(text) > 4000:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _addressed(steps: list[Step]) -> dict[int, int]:
    """Each addressee's first step after an instruction that addressed it (a selection, a handoff, ``X (-> Y)``)
    → that instruction: the executor answers the instruction even where no edge was recorded."""
    out: dict[int, int] = {}
    pending: dict[str, int] = {}
    for step in steps:
        who = agent_of(step)
        if who in pending and not is_execution_output(step) and step.index != pending[who]:
            out[step.index] = pending.pop(who)
        target = addressee(step)
        if target:
            pending[target] = step.index
    return out


def _available_at(step: Step) -> datetime | None:
    return step.ended_at if step.kind in ("tool_response", "code_execution") else step.started_at


def _ordered(steps: list[Step]) -> list[Step]:
    """Steps in the order their content became available (:mod:`.provenance`'s docstring, 2)."""
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
        targets.append(who)
    if step.kind == "tool_call" and step.tool_name:
        targets.append(step.tool_name)
    arguments = step.arguments if step.kind == "tool_call" else None
    return values_in(content_of(step), code=code, arguments=arguments, targets=tuple(targets), skip=skip)


#: a call's setting — how long to wait, how often to retry, how many results a page holds — is the caller's choice,
#: not data a source should have given: such a number is never *unsupported* (issue 32, tuning twin ag-job-timeout,
#: whose ``wait_for_job(timeout=10)`` was blamed in the run that succeeded)
_SETTING = re.compile(r"(?i)timeout|retr(?:y|ies)|attempts|delay|interval|wait|poll|page|limit|top_?k|max_|min_|batch")


class ProvenanceWalk:
    """One pass over the run in availability order (:mod:`.provenance`'s docstring, 1–3 and 5): :meth:`given`, then
    :meth:`walk` fill ``prov``; the passes after it read ``steps`` (availability order), ``by_index``, ``values``
    (each step's values; ``TASK``: the task's), ``user_steps``, ``producers`` (ids of steps that produced others),
    ``agent_list`` and ``task_text``."""

    def __init__(self, run: Run, graph: DependencyGraph, anchor: int) -> None:
        self.run, self.graph, self.anchor = run, graph, anchor
        steps = view_steps(run)
        self.steps = _ordered(steps)
        self.by_index = {s.index: s for s in steps}
        names = {n.lower() for n in agents_of(run)} | {(s.tool_name or "").lower() for s in steps}
        names |= {agent_of(s).lower() for s in steps}
        self.skip = frozenset(n for n in names if n)
        self.agent_list = [n for n in agents_of(run) if n]
        self.agent_names = {n.lower() for n in self.agent_list}
        self.capabilities = capability_words(run)
        self.producers = split_producers(run)
        self.prov = Provenance(anchor=anchor, step_ids={s.index: s.step_id for s in steps},
                               position={s.index: p for p, s in enumerate(self.steps)})
        self.first: dict[str, int] = {}
        self.first_value: dict[str, Value] = {}
        self._counts: list[float] | None = None
        self._quantities: list[float] | None = None  # what the task counts (:meth:`_task_counts`)
        self.holders: dict[str, list[int]] = defaultdict(list)
        self.numbers: dict[float, int] = {}
        #: the quotients of the rates per a round quantity seen (:data:`_PER_N`) → the step that gave the rate
        self.rates: dict[float, int] = {}
        #: the caps stated so far ("reimbursed up to 40.00 EUR per meal": <= 40): a total may count each item capped
        self.caps: list[float] = []
        #: the factors of the percentages seen (``10%``: 0.1, 0.9, 1.1) → the step that gave the percentage
        self.factors: dict[float, int] = {}
        #: a factor → the key of the percentage's number (``number:10``): a step using 0.9 used the task's 10 %
        self.factor_of: dict[float, str] = {}
        self.step_numbers: dict[int, list[float]] = {}
        self.values: dict[int, list[Value]] = {}
        self.exclusions: dict[str, tuple[int, Value]] = {}
        self.prov.addressed_by = _addressed(self.steps)
        self.user_steps: list[int] = [s.index for s in steps if is_user_input(s) and s.kind != "task"][:3]
        self.user_steps += [s.index for s in steps if s.kind == "task"][:1]
        first_task = next((s for s in steps if s.kind == "task"), None)
        self.task_text = run.task or (content_of(first_task) if first_task is not None else "")
        #: every name any call of the run passes (a task's name some call uses was not substituted)
        self.called_names = frozenset().union(*(argument_names(s.arguments, self.skip) for s in steps
                                                 if s.kind == "tool_call"))

    def given(self) -> None:
        self.values[TASK] = values_in(self.run.task or "", skip=self.skip)
        self._see_rates(self.run.task or "", TASK)
        for v in self.values[TASK]:
            self._see(v, TASK)
            if v.group == "exclusion":
                self.exclusions.setdefault(v.tag, (TASK, v))

    def _see(self, v: Value, owner: int) -> None:
        k = value_key(v)
        if k not in self.first:
            self.first[k] = owner
            self.first_value[k] = v
            if v.kind == "number":
                self._pool(float(v.key), owner)
            elif v.kind == "operator" and v.key.startswith("<= ") and len(self.caps) < 8:
                self.caps.append(float(v.key[3:]))
            elif v.kind == "percent":  # 10 % gives the factors 0.1, 0.9 and 1.1 (a discount, a surcharge)
                p = float(v.key) / 100
                for factor in (p, 1 - p, 1 + p):
                    if factor > 0:
                        self.factors.setdefault(round(factor, 6), owner)
                        self.factor_of.setdefault(round(factor, 6), f"number:{v.key}")
        self.holders[k].append(owner)

    def _see_rates(self, text: str, owner: int) -> None:
        if " per " in text:
            for m in _PER_N.finditer(text[:5000]):
                rate = round(float(m.group(1)) / float(m.group(2).replace(",", "")), 6)
                if rate:
                    self.rates.setdefault(rate, owner)

    def _pool(self, number: float, owner: int) -> None:
        self.numbers.setdefault(number, owner)
        if len(self.numbers) > _MAX_POOL:
            del self.numbers[next(iter(self.numbers))]

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
                key = value_key(v)
                if key in self.first:
                    if self.first[key] != k:
                        origins[key] = self.first[key]
                elif not shadowed:
                    new.append(v)
            self._see_rates(content_of(step), owner)
            if not is_execution_output(step):
                self._derive(k, new)
                self._computed_by_code(step, new)
            self.prov.origins[k] = origins
            if not is_user_input(step) or owner != k:
                self.prov.introduced[k] = new
            for v in new:
                self._see(v, owner if owner != k else k)
            for v in vals:
                if value_key(v) in origins:
                    self.holders[value_key(v)].append(k)
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

    def _identifier_slip(self, k: int, v: Value) -> Change | None:
        """A record's code or date nothing gave that is a copy slip of one seen before (``A-521`` for the task's
        ``A-512``; ``2026-04-06`` for the CRM's ``2026-04-09``): a digit changed or two swapped, the same letters.
        Codes name records, so any earlier one is the related source — but only a slip links them (another order's
        code is another order)."""
        if v.group == "time" or sum(u.kind == "identifier" and u.group == v.group for u in self.values.get(k, [])) > 2:
            return None  # a step stating many codes or dates is data (a table, a sample dataset), not one copied
        digits = v.key.replace("-", "")
        for key, u in self.first_value.items():
            if u.kind == "identifier" and u.group == v.group and u.key != v.key and is_copy_slip(
                    u.key.replace("-", ""), digits, shortest=3):
                return Change(k, self.first[key], "identifier", u.key, v.key, "copy")
        return None

    @staticmethod
    def _rounded_rate(v: Value, pool: list[tuple[int, Value]]) -> tuple[int, str] | None:
        """A rate or factor (below 10, four or more decimals) a computation uses rounded to two decimals or fewer
        (``1846.20 * 0.92`` after "rate USD/EUR: 0.9187"): the result drifts by the rounding — a changed value,
        though a report may round it (that is no computation)."""
        stated = v.key.split(".", 1)[1] if "." in v.key else ""
        if len(stated) > 2:
            return None
        for j, u in pool:
            if u.kind == "number" and "." in u.key and len(u.key.split(".", 1)[1]) >= 4 and abs(float(u.key)) < 10 \
                    and rounds_to(u.key, v.key if "." in v.key else v.key + ".0"):
                return j, u.key
        return None

    def _unit_at_origin(self, k: int, v: Value) -> Change | None:
        """A quantity whose number came from a step that stated it in another unit of the same dimension (a tool's
        "561 km by road" relayed as "561 miles"): the unit substituted, however far back that step is — the number's
        own source is the related comparison."""
        number, unit = v.key.split(" ", 1)
        j = self.first.get(f"number:{number}")
        if j is None or j == k:
            return None
        for u in self.values.get(j, []):
            if u.kind == "quantity" and u.group == v.group:
                n_u, unit_u = u.key.split(" ", 1)
                if n_u == number and unit_u != unit:
                    return Change(k, j, "unit", unit_u, unit, "substitution")
        return None

    def _excluded(self, step: Step, vals: list[Value], origins: dict[str, int]) -> None:
        """A number the step took from a source where its label is what an instruction excluded (``excluding
        cancelled orders``; ``80 cancelled``): the instruction was ignored."""
        if not self.exclusions:
            return
        sources: list[int] | None = None
        for v in vals:
            key = value_key(v)
            if v.kind != "number" or key not in origins:
                continue
            if sources is None:
                sources = self._sources(step.index)
            # the label the number has where the step took it from (its latest source holding it), else where it
            # first appeared: one amount can be "60 cancelled" in one account and a sum of 60 in another
            tag = next((u.tag for j in sources for u in self.values.get(j, []) if value_key(u) == key and u.tag),
                       self.first_value[key].tag)
            if not (tag and tag in self.exclusions):
                tag = self._included(key, v.raw, sources)
            if tag and tag in self.exclusions:
                j, rule = self.exclusions[tag]
                self.prov.changes.append(Change(step.index, j, "word", rule.key, v.key, "ignored"))
                return

    def _included(self, key: str, raw: str, sources: list[int]) -> str | None:
        """The excluded thing a source says the number includes ("123.00 EUR per licence incl. 23% VAT" for a task
        "excluding VAT"): the stem of the word after "incl." / "including" / "inclusive of" within the number's
        clause, when an instruction excluded it."""
        for j in sources:
            if j not in self.by_index or not any(value_key(u) == key for u in self.values.get(j, [])):
                continue
            text = content_of(self.by_index[j])
            at = text.find(raw)
            if at < 0:
                continue
            clause = re.split(r"[;(),\n]", text[at + len(raw):at + len(raw) + 60], maxsplit=1)[0]
            m = _INCLUDES.search(clause)
            if m and stem(m.group(1)) in self.exclusions:
                return stem(m.group(1))
        return None

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
        # the task routes by what it asks for, not by the context beside it ("support has answered that ticket")
        # the reply that made the call names its target: it is the choice, not a source that decided it
        making = set(self.graph.producers(owner, ("produced_by",))) if step.kind == "tool_call" else set()
        texts = [(j, task_request(self.run.task or "") if j == TASK else self._routing_text(j))
                 for j in self._sources(owner) if j != owner and j not in making
                 and (j == TASK or j in self.by_index)]
        # an agent that already had its turn at the work is no alternative to a later route: that route is the
        # request's next part (a fare found by fare_agent, then fx_agent for the rate; a fix by tech_agent, then
        # billing_agent for the credit) — the first route, and the agent it named, are not what this one replaces
        acted = self._acted_before(owner)
        # a step that lists its candidates (a selector's) chooses among them; else among the roster too: the agent
        # that should have been called may never have run (a manager's flight_agent, named by the request's
        # "flight", beside the hotel_agent it called)
        pool = candidates if isinstance(listed, list) else [*candidates, *(c for c in self.capabilities
                                                                          if c not in candidates)]
        found = grounded_alternative(chosen, [c for c in pool if c == chosen or c not in acted], texts)
        change = None
        if found is not None and (self._routed_to_later(found[0], owner) or names_decide([chosen], texts)):
            # the agent the request names gets the work later, or the request names the chosen agent too ("the
            # flight ... and 3 nights at the hotel": flights_agent first): one part of it routed at a time
            return
        if found is not None:
            change = Change(owner, found[1], "target", found[0], chosen, "substitution")
        elif self.capabilities:
            change = self._unfit(owner, chosen, pool, texts)
        if change is not None and change not in self.prov.changes:
            self.prov.changes.append(change)

    def _routed(self, source: str, target: str, before: int) -> bool:
        """Whether agent ``source`` routed to agent ``target`` (a hand-off, a selection, a ``transfer_to_`` call)
        before step ``before``."""
        for s in self.run.steps[:before]:
            if s.agent != source:
                continue
            if s.kind in ("handoff", "speaker_selection") and addressee(s) == target:
                return True
            if s.kind == "tool_call" and (s.tool_name or "").removeprefix("transfer_to_") == target:
                return True
        return False

    def _routed_to_later(self, target: str, after: int) -> bool:
        """Whether any step after ``after`` routes to agent ``target`` (a hand-off, a selection, a ``transfer_to_``
        call)."""
        for s in self.run.steps[after + 1:]:
            if s.kind in ("handoff", "speaker_selection") and addressee(s) == target:
                return True
            if s.kind == "tool_call" and (s.tool_name or "").removeprefix("transfer_to_") == target:
                return True
        return False

    def _acted_before(self, owner: int) -> set[str]:
        """The agents that acted (a model reply, a message, a call) before step ``owner``: each had its turn at the
        work, so a later route elsewhere is the next part of it, not a substitute for them."""
        return {s.agent for s in self.run.steps if s.index < owner and s.kind in ("llm_response", "message", "tool_call")}

    def _unfit(self, owner: int, chosen: str, candidates: list[str], texts: list[tuple[int, str]]) -> Change | None:
        """When no source names any candidate (:func:`.targets.names_decide`), the nearest request among the routing
        step's sources (the task, or a task delegated to this agent) compared with what each candidate can do
        (:func:`.targets.capable_alternative`); neither the agent deciding the route nor one that already acted is
        an alternative."""
        if names_decide([chosen, *candidates], texts):
            return None
        acted = self._acted_before(owner)
        deciding = self.by_index[owner].agent if owner in self.by_index else None
        if chosen in acted and deciding and self._routed(chosen, deciding, owner):
            return None  # a hand-back to the agent that handed the work over (a Swarm's usual return): no choice
        others = [c for c in candidates if c != deciding and c not in acted]
        for j, text in texts:
            if j == TASK or self.by_index[j].kind == "task":
                fit = capable_alternative(chosen, others, text, self.capabilities)
                if fit is None or self._routed_to_later(fit[0], owner):
                    # the fitting agent gets the work later: a request of several parts ("fix the router and apply
                    # the credit") routed one part at a time, this route the first (clean-ag-router-short)
                    return None
                return Change(owner, j, "target", fit[0], chosen, "unfit", detail=", ".join(fit[1]))
        return None

    def _routing_text(self, j: int) -> str:
        """What source step ``j`` says for routing: the task's request when it is the task (its context is not an
        instruction), else its content."""
        step = self.by_index[j]
        return task_request(content_of(step)) if step.kind == "task" else content_of(step)

    def _computed_by_code(self, step: Step, new: list[Value]) -> None:
        """A call that running code made, or the output the run printed (``produced_by`` a code execution): its new
        numbers are the code's results (``avg = (30 + 24 + 15) / 2`` then ``final_answer(f'AVG: {avg}')``; an
        executor's ``total km: 376.1`` of ``round(total_miles * 1.609344, 1)``), derived from the code step — never
        a restatement or an unsupported number of the step itself (the code, not its output, holds any error)."""
        if step.kind == "code_execution":
            return
        runs = [j for j in self.graph.producers(step.index, ("produced_by",))
                if j in self.by_index and self.by_index[j].kind == "code_execution"]
        authors = [a for j in runs for a in self.graph.producers(j, ("executes",))] or runs
        if not authors:
            return
        derived = self.prov.derived.setdefault(step.index, {})
        for v in new:
            if v.kind == "number":
                derived.setdefault(value_key(v), authors[:1])

    def _derive(self, k: int, new: list[Value]) -> None:
        numbers = [v for v in new if v.kind == "number"][:_MAX_POOL]
        if not numbers:
            return
        pool = dict(self.numbers)
        exact = {**self.rates, **{round(a, 6): i for a, i in pool.items()}}
        groups = [(j, self.step_numbers[j]) for j in self.graph.producers(k) if j in self.step_numbers][:4]
        runs: dict[float, list[int]] | None = None
        for v in numbers:
            x = float(v.key)
            factor = self.factors.get(round(x, 6))
            ops = [factor] if factor is not None else derivation(x, pool, exact)
            if ops is None or len(set(ops)) == 1:
                # a number used twice (``a + a``, ``a × a``) explains less than a total of the items fetched one by
                # one: 48 after 9, 24 and 15 is their sum, not 24 doubled (issue 32, tuning twin ag-unit-three)
                if runs is None:
                    runs = run_totals(list(pool.items())[-16:])
                ops = group_derivation(x, groups) or runs.get(round(x, 6)) or runs.get(round(x, 2)) or ops
                if ops is None:
                    ops = scaled_derivation(x, pool, exact, self._task_counts())
                if ops is None:
                    ops = priced_total(x, self._task_quantities(), exact)
                if ops is None and self.caps:
                    ops = capped_total(x, list(pool.items())[-16:], self.caps)
            if ops is not None:
                self.prov.derived.setdefault(k, {})[value_key(v)] = ops

    def _summed(self, v: Value) -> bool:
        """A mean's divisor that is a total the run's numbers give — of one unit's quantities (3 + 2 + 5 kg for the
        average price per kilogram of three purchases: a weighted mean, divided by its weights' sum) or of a run of
        numbers fetched one by one — is no mean slip."""
        divisor = round(float(v.key.rsplit(" / ", 1)[1]), 6)
        by_unit: dict[str, float] = defaultdict(float)
        for q in self.first_value.values():  # the quantities seen so far, each once: "3 kg", "2 kg", "5 kg"
            if q.kind == "quantity":
                amount, unit = q.key.split(" ", 1)
                by_unit[unit] += float(amount)
        return (any(round(total, 6) == divisor for total in by_unit.values())
                or divisor in run_totals(list(self.numbers.items())[-16:]))

    def _task_quantities(self) -> list[float]:
        """How many of each thing the task orders: its whole numbers followed by their noun ("250 business cards",
        "40 posters")."""
        if self._quantities is None:
            self._quantities = list(dict.fromkeys(float(m.group(1).replace(",", "")) for m in
                                                  _QUANTITY.finditer(self.task_text[:5000])))
        return self._quantities

    def _task_counts(self) -> list[float]:
        """What the task counts: its whole numbers 2-100 followed by their noun ("stay 2 nights", "3 people")."""
        if self._counts is None:
            self._counts = list(dict.fromkeys(float(m.group(1)) for m in _COUNT.finditer(self.task_text[:5000])
                                              if 2 <= int(m.group(1)) <= 100))
        return self._counts

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

    def _substituted_name(self, k: int, v: Value, given: list[tuple[int, Value]]) -> Change | None:
        """A call passes a name nothing gave (``get_weather(city="Paris")``) where what it was given names exactly one
        name no call of the run ever passes (the task's "Lyon"): the task's name substituted. A second name the task
        gives, or the task's name passed by any call ("Lyon, France"; a later call), is no evidence."""
        unused = {u.key: (j, u) for j, u in given
                  if u.kind == "entity" and u.group == "name" and u.key not in self.called_names}
        if len(unused) != 1:
            return None
        j, u = next(iter(unused.values()))
        return Change(k, j, "entity", u.raw, v.raw, "substitution")

    def _changes(self, step: Step, new: list[Value]) -> None:
        k = step.index
        derived = self.prov.derived.get(k, {})
        held = {value_key(v) for v in self.values.get(k, [])}
        passed = argument_names(step.arguments, self.skip) if step.kind == "tool_call" else frozenset()
        candidates = [v for v in new[:_MAX_POOL] if (v.kind == "number" and value_key(v) not in derived) or (
            v.kind in _SUBSTITUTABLE or v.kind in ("quantity", "identifier") or (v.kind == "entity" and v.group in ("weekday",
                                                                                                   "month"))
            or v.group in _LOGIC or (v.kind == "entity" and v.key in passed))]
        for v in candidates:
            if v.group == "mean" and not self._summed(v) and (slip := mean_slip(step, v, self.task_text)) is not None:
                self.prov.changes.append(slip)
        if "100" in (text := str((step.arguments or {}).get("code") or content_of(step))) or "*" in text:
            if (sign := percent_sign_slip(step, self.task_text)) is not None:
                self.prov.changes.append(sign)
        if "sorted(" in text and (order := sort_slip(step, self.task_text)) is not None:
            self.prov.changes.append(order)
        if "==" in text or "!=" in text:
            results = [(s.index, content_of(s)) for s in self.steps if s.index < k and s.kind in (
                "tool_response", "code_execution")][-20:]
            if (case := case_slip(step, results)) is not None:
                self.prov.changes.append(case)
        if "//" in text or "floor" in text or "int(" in text:
            # what asked for the count: the task, or any plan or message before the code (a plan's "a partly filled
            # box is still a box" lies further back than the code's own sources)
            asked = [(TASK, self.task_text), *((s.index, content_of(s)) for s in self.steps
                                               if s.index < k and s.kind in ("task", "message", "planning"))]
            if (floor := floor_slip(step, asked)) is not None:
                self.prov.changes.append(floor)
        candidates = [v for v in candidates if v.group != "mean"]
        if not candidates:
            return
        kinds = {v.kind for v in candidates}
        pool = [(j, u) for j in self._sources(k) for u in self.values.get(j, [])[:400]
                if u.kind in kinds and value_key(u) not in held]
        fields = step.arguments if step.kind == "tool_call" else _structured(step)
        arguments = {number_key(str(a)) for name, a in (fields or {}).items()
                     if isinstance(a, (int, float)) and not isinstance(a, bool) and not _SETTING.search(str(name))}
        given = {TASK, *self.user_steps, *self._instruction(k)}
        given_pool = [(j, u) for j, u in pool if j in given]
        computes = step.kind == "tool_call" and any(op in text for op in ("*", "/"))
        for v in candidates:
            if v.kind == "unit" and v.tag == AFTER_NUMBER:
                continue
            if computes and v.kind == "number" and (cut := self._rounded_rate(v, pool)) is not None:
                self.prov.changes.append(Change(k, cut[0], "number", cut[1], v.key, "copy",
                                                detail="a rate rounded before it is used"))
                continue
            # a bare unit or date word is compared with what the step was GIVEN (the task, the user, its
            # instruction): against any page it read, "m" after "mi" or "May" after "June" is prose
            bare = v.kind == "unit" or v.kind == "entity"
            change = (self._identifier_slip(k, v) if v.kind == "identifier"
                      else restated(k, v, pool) if v.kind == "number"
                      else self._substituted_name(k, v, given_pool) if v.group == "name"
                      else substituted(k, v, given_pool if bare else pool))
            if change is None and v.kind == "quantity":
                change = self._unit_at_origin(k, v)
            if change is None and v.kind == "number" and v.key in arguments:
                # a call's number no source gave: a copy slip of a source's two-digit number when one is a digit
                # away (``add(17, 26)`` after "17 + 25"), else unsupported (issue 32: a finding with its source)
                slip = next(((j, u) for j, u in pool if u.kind == "number"
                             and is_copy_slip(u.raw, v.raw, shortest=2)), (None, None))
                change = (Change(k, slip[0], "number", slip[1].key, v.key, "copy") if slip[1] is not None
                          else Change(k, TASK, "number", "", v.key, "unsupported"))
            if change is not None and not any((c.index, c.kind, c.before, c.after) == (
                    k, change.kind, change.before, change.after) for c in self.prov.changes[-8:]):
                self.prov.changes.append(change)
