"""Deterministic correction proposals that need no model (ARCHITECTURE decision 9).

For a candidate step, propose small edits and rank them by minimality so replay tries the smallest first:

* numbers ±1 and ±10% — in tool arguments, in code literals, in message text;
* comparison and boundary operators in code: ``<``/``<=``, ``>``/``>=``, ``==``/``!=`` (loop and termination
  conditions included);
* ``range(...)`` and slice ends ±1 (``range(1, n)`` → ``range(1, n + 1)``);
* swapped arguments of a tool call (two arguments of the same type);
* in message text, a number or capitalised entity replaced by a value seen earlier in the run;
* a handoff target / selected speaker replaced by another participant.

Each proposal is an :class:`~causaltrace.schema.Intervention` whose ``replacement`` has the shape ARCHITECTURE
"Shared contracts" fixes for the step's kind: new arguments (a dict) for a ``tool_call``, new code for a code-bearing
step, new text for a message / reasoning / llm_response, a new result for a ``tool_response``, a participant name for
a handoff or speaker selection. Proposals are deduplicated, ordered by minimality (highest first, ties in
generation order) and cut to ``limit``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from typing import Any

from causaltrace.replay.edits import code_of
from causaltrace.replay.minimality import minimality
from causaltrace.schema import Intervention, Run, Step

__all__ = ["code_of", "propose_mutations"]

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s[A-Z][a-zA-Z]+)*\b")
_OPERATOR_SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}


# ---------------------------------------------------------------------------------------------------- numbers


def _number_variants(value: int | float) -> list[int | float]:
    if isinstance(value, bool):
        return []
    out: list[int | float] = [value + 1, value - 1]
    tenth = value * 0.1
    if isinstance(value, int):
        step = max(1, round(abs(tenth)))
        out += [value + step, value - step]
    else:
        out += [round(value + tenth, 10), round(value - tenth, 10)]
    seen: list[int | float] = []
    for v in out:
        if v != value and v not in seen:
            seen.append(v)
    return seen


def _format_number(text: str, value: int | float) -> str:
    if "." in text and isinstance(value, float):
        return repr(value)
    return str(int(value)) if float(value).is_integer() else repr(value)


def _text_number_mutations(text: str, grounded: frozenset[str] = frozenset()) -> Iterator[tuple[str, str]]:
    for match in _NUMBER.finditer(text):
        raw = match.group(0)
        if raw in grounded:
            continue
        number: int | float = float(raw) if "." in raw else int(raw)
        for variant in _number_variants(number):
            new = text[: match.start()] + _format_number(raw, variant) + text[match.end() :]
            yield new, f"number {raw} → {_format_number(raw, variant)}"


# ------------------------------------------------------------------------------------------------------- code


def _code_mutations(code: str) -> Iterator[tuple[str, str]]:
    """Operator swaps, numeric literals ±1 / ±10%, range and slice ends ±1 — each applied alone."""
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(row: int, col: int) -> int:
        return offsets[row - 1] + col

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = []
    for tok in tokens:
        start, end = pos(*tok.start), pos(*tok.end)
        if tok.type == tokenize.OP and tok.string in _OPERATOR_SWAPS:
            new_op = _OPERATOR_SWAPS[tok.string]
            yield code[:start] + new_op + code[end:], f"operator {tok.string} → {new_op} (line {tok.start[0]})"
        elif tok.type == tokenize.NUMBER:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            for variant in _number_variants(value):
                text = _format_number(tok.string, variant)
                yield code[:start] + text + code[end:], f"literal {tok.string} → {text} (line {tok.start[0]})"
    yield from _boundary_mutations(code, pos)


def _boundary_mutations(code: str, pos: Any) -> Iterator[tuple[str, str]]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        target: ast.expr | None = None
        what = ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            target = node.args[1] if len(node.args) >= 2 else node.args[0]
            what = "range end"
        elif isinstance(node, ast.Slice) and node.upper is not None:
            target, what = node.upper, "slice end"
        if target is None or target.end_lineno is None or target.end_col_offset is None:
            continue
        start = pos(target.lineno, target.col_offset)
        end = pos(target.end_lineno, target.end_col_offset)
        segment = code[start:end]
        for delta in ("+ 1", "- 1"):
            new = f"{segment} {delta}"
            yield code[:start] + new + code[end:], f"{what} {segment} → {new} (line {target.lineno})"


# ------------------------------------------------------------------------------------------------- arguments


def _argument_mutations(
    arguments: dict[str, Any], grounded: frozenset[str] = frozenset()
) -> Iterator[tuple[dict[str, Any], str]]:
    for key, value in arguments.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and _num_text(value) not in grounded:
            for variant in _number_variants(value):
                yield {**arguments, key: variant}, f"argument {key}: {value} → {variant}"
        elif isinstance(value, str):
            for new, why in _text_number_mutations(value, grounded):
                yield {**arguments, key: new}, f"argument {key}: {why}"
            if key in ("code", "source", "script"):
                for new, why in _code_mutations(value):
                    yield {**arguments, key: new}, f"argument {key}: {why}"
    keys = list(arguments)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            va, vb = arguments[a], arguments[b]
            if type(va) is type(vb) and va != vb:
                yield {**arguments, a: vb, b: va}, f"swap arguments {a} ↔ {b}"


# ----------------------------------------------------------------------------------------------------- text


def _earlier_values(run: Run, step: Step) -> tuple[list[str], list[str]]:
    numbers: list[str] = []
    entities: list[str] = []
    for other in run.steps:
        if other.index >= step.index:
            break
        for m in _NUMBER.finditer(other.content or ""):
            if m.group(0) not in numbers:
                numbers.append(m.group(0))
        for m in _ENTITY.finditer(other.content or ""):
            if m.group(0) not in entities:
                entities.append(m.group(0))
    return numbers[-20:], entities[-20:]


def _text_mutations(text: str, run: Run, step: Step, grounded: frozenset[str]) -> Iterator[tuple[str, str]]:
    yield from _text_number_mutations(text, grounded)
    numbers, entities = _earlier_values(run, step)
    for match in _NUMBER.finditer(text):
        for value in numbers:
            if value != match.group(0):
                yield text[: match.start()] + value + text[match.end() :], f"{match.group(0)} → {value} (seen earlier)"
    for match in _ENTITY.finditer(text):
        for value in entities:
            if value != match.group(0):
                yield text[: match.start()] + value + text[match.end() :], f"{match.group(0)} → {value} (seen earlier)"


# -------------------------------------------------------------------------------------------------- proposals


def _num_text(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def grounded_numbers(run: Run, step: Step) -> frozenset[str]:
    """Numbers the step got from its sources: the task and the steps it depends on.

    Nudging such a number (±1, ±10%) in a message or a tool argument would make a correct step wrong so that a
    later fault is compensated — a spurious "repair" of a step that was right. Those mutations are not proposed
    (code literals are exempt: a boundary bug often IS a number copied from the task, used wrongly).
    """
    texts = [run.task or ""]
    by_id = {s.step_id: s for s in run.steps}
    for dep in step.depends_on:
        source = by_id.get(dep.step_id)
        if source is not None and (source.kind == "task" or source.metadata.get("user_input") is True):
            texts.append(source.content or "")
    return frozenset(m.group(0) for text in texts for m in _NUMBER.finditer(text))


def _raw_proposals(step: Step, run: Run) -> Iterator[tuple[Any, Any, str]]:
    """(original, replacement, description) for every applicable mutation of ``step``."""
    code = code_of(step)
    grounded = grounded_numbers(run, step)
    if step.kind in ("handoff", "speaker_selection"):
        key = "target" if step.kind == "handoff" else "selected"
        current = step.outputs.get(key)
        # the targets the framework allowed at that step (recorded by the adapter), then the run's other agents
        recorded = step.metadata.get("candidates")
        options = [str(a) for a in recorded] if isinstance(recorded, list) and recorded else list(run.agents)
        for agent in options:
            if agent != current and agent != step.agent:
                yield current, agent, f"{key} {current} → {agent}"
        return
    if step.kind == "tool_call" and step.arguments is not None and code is None:
        for new, why in _argument_mutations(step.arguments, grounded):
            yield step.arguments, new, why
        return
    if code is not None:
        for new, why in _code_mutations(code):
            yield code, new, why
        return
    if step.kind == "tool_response":
        result = step.outputs.get("result", step.content)
        text = result if isinstance(result, str) else str(result)
        for new, why in _text_number_mutations(text, grounded):
            yield text, new, why
        return
    if step.kind in ("message", "reasoning", "llm_response", "final_answer", "planning"):
        text = step.content or str(step.outputs.get("text") or "")
        for new, why in _text_mutations(text, run, step, grounded):
            yield text, new, why


def propose_mutations(step: Step, run: Run, *, limit: int = 30, measure: str = "positional") -> list[Intervention]:
    """Deterministic correction proposals for ``step``, most minimal first (at most ``limit``)."""
    seen: set[str] = set()
    scored: list[tuple[float, int, Intervention]] = []
    for order, (original, replacement, why) in enumerate(_raw_proposals(step, run)):
        key = repr(replacement)
        if key in seen or replacement == original:
            continue
        seen.add(key)
        score = minimality(original, replacement, kind="edit" if measure == "edit" else "positional")
        scored.append(
            (score, order, Intervention(step_id=step.step_id, replacement=replacement, description=why, source="mutation"))
        )
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [item[2] for item in scored[:limit]]
