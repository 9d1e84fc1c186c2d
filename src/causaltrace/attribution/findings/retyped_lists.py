"""Family ``omission`` (MAST FM-3.1), inside a list: code or a call that retypes a tool's list and leaves an element
out (issue 32 item 1: "a source collection is a tool result that is a list or table; an item not carried forward is
omitted").

A result (a tool's answer or code's output) holds a list — ``[12, 15, 9, 20]``, ``["Oslo", "Lima", "Kyiv"]`` — and
a later step that read it writes a list literal of its own whose items all come from that list, in its order, but
not all of them (``readings = [12, 15, 20]``): the step carried the collection forward by hand and dropped an item.
Every value it wrote is faithfully copied, so no comparison of values sees the error; the missing item does.

Not evidence: a written list of fewer than two items or fewer than half of the source's (a pick, not a copy); a
task that asks for a subset ("above", "at least", "only", "except", "top" …: the agent may have filtered by eye);
a source list of fewer than three items. The evidence is the source list (``source``, with the items in the
written list's own style, so repair's correction puts the dropped item back by substitution), the written list
(``changed``) and the first missing item (``omitted_item``).
"""

from __future__ import annotations

import re

from causaltrace.attribution.findings._common import change_strength, evidence, finding
from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.drift import task_request
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.values import number_key
from causaltrace.attribution.stages.view import content_of
from causaltrace.schema import Finding, Run, Step

__all__ = ["detect_retyped_omissions", "list_literals"]

_LIST = re.compile(r"\[([^\[\]]{1,4000})\]")
_ITEM = re.compile(r"""\s*(-?\d+(?:\.\d+)?|'[^'\n]{1,200}'|"[^"\n]{1,200}")\s*""")
_RESULT_KINDS = ("tool_response", "code_execution")
#: steps that never retype a list of their own: results, the reply that produced a call (the call is blamed),
#: the task and the answer
_SKIPPED = (*_RESULT_KINDS, "llm_response", "task", "final_answer")
#: a request for a subset: the agent may have picked the items by eye, on purpose
_SUBSET = re.compile(r"\b(above|below|over|under|at least|at most|more than|less than|fewer than|only|except|"
                     r"excluding|without|other than|top|first|last|highest|lowest|largest|smallest|filter\w*)\b",
                     re.IGNORECASE)
_MIN_SOURCE = 3
#: how many dependency hops back a retyped list's source may lie
_DEPTH = 6


def list_literals(text: str) -> list[tuple[str, list[str]]]:
    """``(literal as written, its items)`` for every flat list literal of numbers or quoted strings in ``text``."""
    out = []
    for m in _LIST.finditer(text[:50_000]):
        parts = m.group(1).split(",")
        if parts and not parts[-1].strip():  # a trailing comma
            parts = parts[:-1]
        items = [_ITEM.fullmatch(p) for p in parts]
        if len(items) >= 2 and all(items):
            out.append((m.group(0), [i.group(1).strip("'\"") for i in items if i]))
    return out


_RECORDS = re.compile(r"\[\s*(\{[^\[\]]{1,8000}\})\s*\]")
_RECORD = re.compile(r"\{([^{}]{1,1000})\}")
_FIELD = re.compile(r"""['"](\w{1,40})['"]\s*:\s*(-?\d+(?:\.\d+)?)""")


def record_columns(text: str) -> list[list[str]]:
    """The number columns of every list of records in ``text`` (``[{'id': 'RT-301', 'amount': 24.9}, ...]``, a
    tool's table as JSON or Python): for each field every record holds, its values in order."""
    out = []
    for m in _RECORDS.finditer(text[:50_000]):
        rows = [dict(_FIELD.findall(r.group(1))) for r in _RECORD.finditer(m.group(1))]
        if len(rows) >= 2:
            out += [[row[key] for row in rows] for key in rows[0] if all(key in row for row in rows)]
    return out


def _norm(item: str) -> str:
    """An item as compared: a number by its value (``24.90`` is ``24.9``), a string as written."""
    return number_key(item) or item if item[:1].isdigit() or item[:1] == "-" else item


def _subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def _as_written(literal: str, source: list[str], written: list[str]) -> str:
    """The source's items in the written list's style (quotes and separator), so a correction substitutes it."""
    quote = "'" if "'" in literal else '"' if '"' in literal else ""
    separator = ", " if ", " in literal else ","
    return "[" + separator.join(f"{quote}{item}{quote}" for item in source) + "]"


def _near_ancestors(graph: DependencyGraph, index: int) -> set[int]:
    """The steps ``index`` depended on within :data:`_DEPTH` hops: a list is retyped from a result the step (or the
    reply, code or message before it) read, and a bounded walk keeps a 10,000-step run linear."""
    seen: set[int] = set()
    frontier = [index]
    for _ in range(_DEPTH):
        frontier = [p for i in frontier for p in graph.producers(i) if p not in seen]
        seen.update(frontier)
        if not frontier or len(seen) > 400:
            break
    return seen


def _retyped(step: Step, graph: DependencyGraph | None, run: Run) -> tuple[int, str, str, str] | None:
    """``(source index, source list, written list, first missing item)`` for the step's first retyped list."""
    written = list_literals(content_of(step))
    if not written:
        return None
    near = _near_ancestors(graph, step.index) if graph is not None and graph.edges else set(
        range(max(0, step.index - _DEPTH * 4), step.index))
    sources = sorted((s for s in (run.step_at(i) for i in near) if s.kind in _RESULT_KINDS), key=lambda s: s.index)
    for literal, raw_items in written:
        items = [_norm(x) for x in raw_items]
        for source in reversed(sources):
            text = content_of(source)
            for full in [full for _, full in list_literals(text)] + record_columns(text):
                full = [_norm(x) for x in full]
                if len(full) < _MIN_SOURCE or len(items) >= len(full) or 2 * len(items) < len(full):
                    continue
                if len(set(items)) == len(items) and _subsequence(items, full):
                    missing = [x for x in full if x not in items]
                    return source.index, _as_written(literal, full, items), literal, missing[0]
    return None


def detect_retyped_omissions(run: Run, prov: Provenance, graph: DependencyGraph | None) -> list[Finding]:
    """One finding per step that retyped a result's list without one of its items (module docstring)."""
    if _SUBSET.search(task_request(run.task or "")):
        return []
    out = []
    for step in run.steps:
        if step.kind in _SKIPPED:
            continue
        found = _retyped(step, graph, run)
        if found is None:
            continue
        source, full, literal, missing = found
        claim = (f"step {step.index} retypes step {source}'s list as {literal[:80]} and leaves out {missing!r} "
                 f"(an item of the collection not carried forward: an omission)")
        items = [evidence(run, source, "source", full), evidence(run, step.index, "changed", literal),
                 evidence(run, source, "omitted_item", missing)]
        out.append(finding(run, "omission", step.index, claim, items, strength=change_strength(prov, step.index)))
    return out
