"""The whole-run passes of value provenance (:mod:`.provenance`'s docstring, 5 and 6), run after the walk and reach:
changes no single value comparison sees, because they depend on the failing answer and on what the run as a whole
did or left out —

* an *unverified* approval: a step approving the failing answer whose content lineage never used a value the task
  gave (MAST's incorrect verification);
* an *unfounded* choice: a speaker selection or handoff whose chosen agent states the answer's number from nothing
  it was given (the choice, not the guess it led to, is the earliest decisive step);
* an *omitted* item: the answer's number stated before any step used an item the task enumerates (a premature
  answer);
* the *source* of an unsupported number: the task's only number no step uses (:func:`unused_task_numbers`);
* and the responsibility boundary: the steps that merely *carry* a value another step changed.

Split from :mod:`.provenance`: each pass reads the walk's state (:class:`~.provenance_walk.ProvenanceWalk`) and the
reach and appends to the record; none feeds the walk back.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace

from causaltrace.attribution.stages.provenance_changes import is_small
from causaltrace.attribution.stages.provenance_record import TASK, Change, Provenance, value_key
from causaltrace.attribution.stages.provenance_walk import ProvenanceWalk
from causaltrace.attribution.stages.view import (
    addressee,
    agent_of,
    content_of,
    is_execution_output,
    is_user_input,
)
from causaltrace.schema import Step

__all__ = ["fetched_not_applied", "is_approval", "mark_carriers", "omitted_items", "task_items", "unfounded_choices", "unverified_approvals"]

_APPROVAL = re.compile(r"\b(?:APPROVED?|approved|LGTM|looks good|looks correct|is correct)\b")
_REJECTION = re.compile(r"\b(?:REJECT(?:ED)?|not approved|incorrect|is wrong)\b", re.IGNORECASE)


def is_approval(text: str) -> bool:
    """An approving verdict (``APPROVE``, "looks good") that rejects nothing."""
    return bool(_APPROVAL.search(text)) and not _REJECTION.search(text)


def unverified_approvals(walk: ProvenanceWalk, prov: Provenance) -> None:
    """An approval of the failing answer that never used a value the task gave (:mod:`.provenance`'s docstring, 5): the
    verification that should have caught it (MAST's incorrect verification)."""
    used = {value_key(v) for i in prov.lineage if i in walk.by_index and not is_user_input(walk.by_index[i])
            for v in walk.values.get(i, [])}
    used |= {walk.factor_of[round(float(k.split(":", 1)[1]), 6)] for k in list(used) if k.startswith("number:")
             and round(float(k.split(":", 1)[1]), 6) in walk.factor_of}  # × 0.9 used the 10 % discount
    task_values = walk.values.get(TASK) or walk.values.get(next(iter(walk.user_steps[-1:]), TASK), [])
    # a bound ("at most 200 USD") is met by staying within it, not by using its number
    bounds = {v.key.split(" ", 1)[1] for v in task_values if v.group == "comparison" and " " in v.key}
    given = [v for v in task_values if v.kind == "number" and not is_small(v.key) and v.key not in bounds]  # a qualifier ("excluding holidays") is honoured by
    # what a result leaves out, not by its word: a reviewer's approval is not unchecked for not repeating it
    unused = [v for v in given if value_key(v) not in used]
    if not unused:
        return
    for step in walk.steps:
        i = step.index
        if (i in prov.lineage or prov.reach.get(i, 0.0) >= 0.25) and not is_user_input(step) and (
                not is_execution_output(step)) and step.step_id not in walk.producers:
            if is_approval(content_of(step)):
                prov.changes.append(Change(i, TASK, unused[0].kind, unused[0].key, "approved", "unverified"))
                return


def unfounded_choices(walk: ProvenanceWalk, prov: Provenance) -> None:
    """A routing step (a speaker selection, a handoff) with alternatives whose chosen agent then states the failing
    answer's number from NOTHING it was given — its reply takes no number from any source, calls no tool, and the
    number is not derived (a guess): the reply was predictable from the choice, so the earliest step whose
    correction flips the outcome is the choice (CausalFlow's earliest decisive step), not the guess it led to."""
    answer = {value_key(v) for v in walk.values.get(prov.anchor, []) if v.kind == "number" and not is_small(v.key)}
    if not answer:
        return
    turns: dict[int, list[Step]] = defaultdict(list)
    for step in walk.steps:
        j = prov.addressed_by.get(step.index)
        if j is not None:
            turns[j].append(step)
    for j, first in turns.items():
        router = walk.by_index.get(j)
        if router is None or router.kind not in ("speaker_selection", "handoff"):
            continue
        listed = router.metadata.get("candidates")
        if len(listed if isinstance(listed, list) else walk.agent_list) < 2:
            continue
        agent = agent_of(first[0])
        reply: list[Step] = []  # the chosen agent's turn: its steps from its first reply on, until another speaks
        for s in walk.steps[prov.position[first[0].index]:prov.position[first[0].index] + 50]:
            if agent_of(s) != agent or s.index > prov.anchor or (
                    reply and s.kind in ("tool_call", "tool_response")):
                break
            reply.append(s)
        own = {s.index for s in reply}
        stated = {value_key(v) for s in reply for v in prov.introduced.get(s.index, [])} & answer
        # a number it was given would found the answer; the task's unit or the region's name it repeats does not
        if not stated or any(s.kind in ("tool_call", "tool_response") or prov.derived.get(s.index)
                             or {i for key, i in prov.origins.get(s.index, {}).items()
                                 if key.startswith(("number:", "quantity:"))} - own for s in reply):
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


def omitted_items(walk: ProvenanceWalk, prov: Provenance) -> None:
    """The step that first states the failing answer's number while an item the task enumerates was never used by
    any step before it (:mod:`.provenance`'s docstring, 5): the answer was given before the work was done (premature
    termination). Charged to the first agent step holding the number (its introducer, or the first decision that
    took it from a tool's result)."""
    items = task_items(walk.task_text)
    answer = [value_key(v) for v in walk.values.get(prov.anchor, []) if v.kind == "number" and not is_small(v.key)]
    if not items or not answer:
        return
    if (early := _ended_early(walk, items)) is not None:
        prov.changes.append(Change(early[0], TASK, "word", early[1], answer[0].split(":", 1)[1], "omitted"))
        return
    worked: list[str] = []
    for step in walk.steps:
        if prov.position[step.index] > prov.position.get(prov.anchor, 10**9):
            break
        if is_user_input(step):
            continue
        held = {value_key(v) for v in walk.values.get(step.index, [])}
        if (answer[0] in held and not is_execution_output(step) and step.step_id not in walk.producers):
            missing = [it for it in items if not any(_mentions(t, it) for t in worked)]
            if missing and len(missing) < len(items):
                prov.changes.append(Change(step.index, TASK, "word", missing[0], answer[0].split(":", 1)[1],
                                           "omitted"))
            return
        text = content_of(step)
        worked.append(f"{text} {step.arguments}" if step.arguments else text)


#: the steps by which an agent ends its work: its report, a hand-back, a final answer
_ENDS = ("message", "final_answer", "handoff")


def _ended_early(walk: ProvenanceWalk, items: list[str]) -> tuple[int, str] | None:
    """An agent that works through the task's items one call each (``refund_item(item="lamp")``, then ``"bulb"``)
    and ends its work — its report, a hand-back, a final answer — with an item never passed to any call of the run:
    the step that ended it, and the first item left out (issue 32: an early hand-back or termination). The item a
    result merely lists is not handled; nothing is charged when the calls took the items together or none."""
    calls = [s for s in walk.steps if s.kind == "tool_call" and s.arguments and not _is_ending(s)]
    named = {s.index: [it for it in items if any(_mentions(str(a), it) for a in s.arguments.values())] for s in calls}
    # a call for one item; a delegation naming them all ("find the stock at Leeds, York and Hull") handles none
    passed = {it: [s for s in calls if named[s.index] == [it]] for it in items}
    handled = [it for it in items if passed[it]]
    missing = [it for it in items if not passed[it]]
    if len(handled) < 2 or not missing:
        return None
    last = max(s.index for it in handled for s in passed[it])
    agent = walk.by_index[last].agent
    if len({s.tool_name for it in handled for s in passed[it]}) != 1:
        return None  # one tool per item: the work of one kind the missing item also needed
    for step in walk.steps:
        if step.index > last and step.agent == agent and step.step_id not in walk.producers and (
                step.kind in _ENDS or _is_ending(step)):
            return step.index, missing[0]
    return None


def _is_ending(step: Step) -> bool:
    name = step.tool_name or ""
    return step.kind == "tool_call" and (name == "final_answer" or name.startswith("transfer_to_"))


_EXCLUDES = re.compile(r"\b(?:excluding|except(?:\s+for)?|without|not\s+counting|other\s+than)\s+([^.;:()]{3,80})",
                       re.IGNORECASE)


def fetched_not_applied(walk: ProvenanceWalk, prov: Provenance) -> None:
    """The task excludes something ("excluding weekends and public holidays"), a tool was called for it
    (``public_holidays``), but the code that computed the answer never mentions it: the instruction was ignored —
    the data fetched for it was not applied. Charged to that code (the last code step in the answer's lineage after
    the fetch); the exclusion is the evidence. Every word of the excluded phrase counts (its coordinated list)."""
    if prov.anchor < 0:
        return
    for m in _EXCLUDES.finditer(walk.task_text[:5000]):
        stems = [w.lower()[:5] for w in re.findall(r"[A-Za-z]{5,}", m.group(1))[:6]]
        fetch = next((s for s in walk.steps if s.kind == "tool_call" and s.index < prov.anchor
                      and any(st in (s.tool_name or "").lower() for st in stems)), None)
        if fetch is None:
            continue
        named = [st for st in stems if st in (fetch.tool_name or "").lower()]  # the words the fetch was for
        code = [s for s in walk.steps if fetch.index < s.index < prov.anchor and s.index in prov.lineage
                and s.kind == "tool_call" and (s.arguments or {}).get("code")
                and "final_answer(" not in str(s.arguments.get("code"))]  # returning the answer computes nothing
        if code and not any(st in str(code[-1].arguments.get("code")).lower() for st in named):
            prov.changes.append(Change(code[-1].index, TASK, "word", f"excluding {m.group(1).strip()}",
                                       fetch.tool_name or named[0], "ignored", detail="fetched, then not applied"))
            return


def unused_task_numbers(walk: ProvenanceWalk, prov: Provenance) -> None:
    """A call's unsupported number (nothing gave it, no arithmetic derives it) where the task gives exactly ONE number
    that no step of the run takes from the task ("Buy 7 boxes", then ``multiply(12, 8)``): that number is what the call's
    number was to be, so the change records it as its source (the finding's evidence, repair's correction). Two or
    more unused numbers, or none, leave the change without a source."""
    if not any(c.how == "unsupported" and not c.before for c in prov.changes):
        return
    task_steps = {s.index for s in walk.steps if s.kind == "task"}
    stated = walk.values.get(TASK) or [v for i in sorted(task_steps)[:1] for v in walk.values.get(i, [])]
    given = {v.key: v.raw for v in stated if v.kind == "number"}
    if not given:
        return
    # used: an agent's step took the number from the task (its origin); a tool's result holding it uses nothing
    results = {s.index for s in walk.steps if is_execution_output(s) or s.kind == "tool_response"}
    used = {key.partition(":")[2] for i, origins in prov.origins.items() if i not in task_steps and i not in results
            for key, source in origins.items() if (source == TASK or source in task_steps) and key.startswith("number:")}
    unused = [k for k in given if k not in used]
    if len(unused) != 1:
        return
    prov.changes[:] = [replace(c, before=given[unused[0]], detail="the task's only number no step uses")
                       if c.how == "unsupported" and not c.before else c for c in prov.changes]


def mark_carriers(prov: Provenance) -> None:
    """Steps that use a value another step changed (the responsibility boundary)."""
    changed = {(c.index, f"{c.kind}:{c.after}"): c for c in prov.changes}
    for k, origins in prov.origins.items():
        for key, j in origins.items():
            c = changed.get((j, key))
            if c is not None and j != k:
                prov.carriers.setdefault(k, []).append(c)
