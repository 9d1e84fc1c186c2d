"""The correction of a plan or delegation about another task (family ``task_drift``; issue 32 item 5).

The run's opening — a plan, a manager's first message or delegation — follows the context of the task (an error it
mentions in passing, a figure that "checks out") instead of what the task asks for. The correction restates that
opening for the task's own request, derived from the finding and the task, never from the case:

1. **The request's entities in place of the foreign ones**: an entity the opening names from the task's context
   (``Madrid``), replaced by the request's entity of the same kind (``Valencia``). Two entities are of one kind
   when the task writes them with the same noun (``the Madrid warehouse`` / ``the Valencia warehouse``); an entity
   with no counterpart (a ``KeyError`` the request has no kind for) is left alone. Entities are capitalised words
   and codes that are not a sentence's first word; numbers are not paired (a context's average and a request's
   threshold are different quantities).
2. **The opening restated as the request**: the opening's text replaced by the request itself (the task's
   sentences that ask for something, :func:`~causaltrace.attribution.stages.drift.task_request`) — always possible,
   tried after the entity swap.

Each takes the opening's place in the shape it has: a message's text, a delegation's one string argument, the text of
the model reply a wrapped plan came from (a smolagents planning step wraps what the model wrote).
"""

from __future__ import annotations

import re

from causaltrace.replay.correct_approval import in_shape
from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["drift_corrections", "entity_kinds", "entity_pairs", "wrapping_reply"]

#: an entity: a capitalised word or a code with a digit or a hyphen (``Valencia``, ``C-204``, ``KeyError``)
_ENTITY = re.compile(r"(?<![\w'-])([A-Z][A-Za-z]+|[A-Z][A-Z0-9]*-?\d[\w-]*)(?![\w'-])")
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+|\n\s*)$")
#: a neighbour that can name a kind: a plain lower-case word (not ``'store_id'``, not a number)
_WORD = re.compile(r"[a-z]{3,}")
#: neighbours that tell nothing of an entity's kind
_NO_KIND = frozenset("the and for with from that this our its last next was were has have had".split())


def entity_kinds(text: str) -> dict[str, set[str]]:
    """``{entity: the lower-case words next to it}`` — its kind — for each entity of ``text`` that does not open a
    sentence (a capitalised first word is no entity)."""
    out: dict[str, set[str]] = {}
    for m in _ENTITY.finditer(text):
        if _SENTENCE_START.search(text[:m.start()]):
            continue
        before = text[:m.start()].split()[-1:]
        after = text[m.end():].split()[:1]
        out.setdefault(m.group(1), set()).update(w.rstrip(".,;:") for w in before + after if _WORD.fullmatch(
            w.rstrip(".,;:")))
    return out


def entity_pairs(task: str, request: str, opening: str) -> list[tuple[str, str]]:
    """``(foreign, requested)``: each entity the opening names from the task's context and not from its request,
    with the request's entity of the same kind (the same neighbouring noun in the task) that the opening lacks; one
    counterpart each, else none."""
    context = task.replace(request, " ") if request in task else task
    in_context, in_request = entity_kinds(context), entity_kinds(request)
    said = set(_ENTITY.findall(opening))
    pairs = []
    for foreign, kind in in_context.items():
        if foreign not in said or foreign in in_request:
            continue
        fits = [e for e, k in in_request.items() if e not in said and (k & kind) - _NO_KIND]
        if len(fits) == 1:
            pairs.append((foreign, fits[0]))
    return pairs


def _swap(text: str, pairs: list[tuple[str, str]]) -> str:
    for foreign, requested in pairs:
        text = re.sub(rf"(?<![\w-]){re.escape(foreign)}(?![\w-])", requested, text)
    return text


def wrapping_reply(step: Step, run: Run) -> Step | None:
    """The model reply whose text ``step``'s text wraps (a smolagents plan: "Here are the facts I know and the plan
    …" around what the model wrote), else None. A correction of such a step edits the reply's own text: the replay
    and the repair pair then hold what the model would have written, not the wrapper."""
    from causaltrace.replay.turns import producing_llm

    llm = producing_llm(run, step)
    said = str(llm.outputs.get("text") or "") if llm is not None and llm is not step else ""
    content = step.content or ""
    return llm if said and said != content and said in content else None


def drift_corrections(step: Step, run: Run, f: Finding) -> list[Intervention]:
    """The opening restated for the task's request (module docstring): the entity swap, then the request itself;
    none for a step whose shape holds no plan (code, a route)."""
    from causaltrace.attribution.stages.drift import task_request

    task = run.task or ""
    request = task_request(task)
    kind = replacement_kind(step)
    if not request.strip() or kind not in ("text", "arguments"):
        return []
    reply = wrapping_reply(step, run) if kind == "text" else None
    target, original = (reply, str(reply.outputs.get("text"))) if reply is not None else (step, original_value(step,
                                                                                                               kind))
    text = original if isinstance(original, str) else " ".join(
        v for v in (original or {}).values() if isinstance(v, str))
    pairs = entity_pairs(task, request, text)
    found = [(_swap(text, pairs), "; ".join(f"entity {a} → {b}" for a, b in pairs))] if pairs else []
    found.append((request, "opening restated as the task's request"))
    shaped = [(in_shape(kind, original, value), what) for value, what in found]
    return [Intervention(step_id=target.step_id, replacement=value, source="mutation", basis="correction", finding=f,
                         description=what) for value, what in shaped if value is not None and value != original]
