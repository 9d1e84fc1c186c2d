"""Deterministic correction proposals that need no model (ARCHITECTURE decision 9).

For a candidate step, propose small edits and rank them by minimality so replay tries the smallest first:

* numbers anywhere a reader sees one (sentence-final, in parentheses, with units, currency or thousands
  separators: :mod:`causaltrace.replay.text_values`) — in message text, in tool arguments (numbers and numbers
  inside string arguments), in code literals and inside code's string literals (``helper(task='... 9 ...')``):
  a value seen earlier in the run that looks like it first (a copy typo: ``12.05`` where the task says ``12.50``),
  then ±1 and ±10 %, then the other values seen earlier;
* typed words: a unit, weekday, month, qualifier (net / gross), operator word or capitalised name replaced by a
  word of the same type that the task or an earlier step used; framework markers, role names and stop words are
  never edited (``Thought:``, ``TERMINATE``, ``The``);
* comparison and boundary operators in code: ``<``/``<=``, ``>``/``>=``, ``==``/``!=`` (loop and termination
  conditions included);
* ``range(...)`` and slice ends ±1 (``range(1, n)`` → ``range(1, n + 1)``);
* swapped arguments of a tool call (two arguments of the same type);
* a handoff target / selected speaker replaced by another participant;
* a tool result's numbers ±1 / ±10 % (an environment edit: repair tries those only in its last phase).

Numbers a step copied from its sources (the task, the user's input it depends on) are not nudged in messages and
tool arguments: that would make a correct step wrong to compensate a later fault.

Each proposal is an :class:`~causaltrace.schema.Intervention` whose ``replacement`` has the shape ARCHITECTURE
"Shared contracts" fixes for the step's kind: new arguments (a dict) for a ``tool_call``, new code for a code-bearing
step, new text for a message / reasoning / llm_response, a new result for a ``tool_response``, a participant name for
a handoff or speaker selection. Proposals are deduplicated, ordered by minimality (highest first, ties in
generation order) and cut to ``limit``.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from causaltrace.replay.edits import code_of
from causaltrace.replay.minimality import minimality
from causaltrace.replay.text_values import (
    WordMatch,
    close_first,
    format_like,
    number_variants,
    numbers_in,
    typed_words_in,
    word_replacements,
)
from causaltrace.schema import Intervention, Run, Step

__all__ = ["EarlierValues", "code_of", "earlier_values", "grounded_numbers", "propose_mutations"]

_OPERATOR_SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
#: How many distinct values seen earlier in the run a number or word may be replaced by (the most recent ones).
_EARLIER_LIMIT = 20


# ---------------------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class EarlierValues:
    """What the run said before a step (the task, the user's input, earlier messages and tool results): the numbers
    as written and the typed words, most recent first. A correction may put one of them in the step's place."""

    numbers: tuple[str, ...] = ()
    words: tuple[WordMatch, ...] = ()


def earlier_values(run: Run, step: Step) -> EarlierValues:
    """The numbers and typed words of the task and of every step before ``step`` (content, arguments, results)."""
    texts = [run.task or ""]
    for other in run.steps:
        if other.index >= step.index:
            break
        texts.append(other.content or "")
        if other.arguments:
            texts.append(json.dumps(other.arguments, ensure_ascii=False, default=str))
        result = other.outputs.get("result")
        if result is not None and not isinstance(result, str):
            texts.append(json.dumps(result, ensure_ascii=False, default=str))
    numbers: dict[str, None] = {}
    words: dict[str, WordMatch] = {}
    for text in reversed(texts):
        for n in numbers_in(text):
            numbers.setdefault(n.raw, None)
        for w in typed_words_in(text, run.agents):
            words.setdefault(w.text.lower(), w)
    return EarlierValues(tuple(list(numbers)[:_EARLIER_LIMIT]), tuple(list(words.values())[: 3 * _EARLIER_LIMIT]))


def _number_options(raw: str, value: int | float, earlier: EarlierValues, *, nudge: bool = True
                    ) -> Iterator[tuple[str, str]]:
    """(new text, why) for one number: copies of a value seen earlier that look like ``raw`` (a copy typo), then
    ±1 / ±10 % (unless ``nudge`` is False), then the other values seen earlier.

    A number the step copied from its sources is not nudged (that would compensate an error elsewhere) but may
    still be swapped for ANOTHER value its sources showed: copying the wrong entry of a correct observation (the
    Tuesday temperature for Wednesday's) is the agent's own decision."""
    seen = [v for v in earlier.numbers if v != raw and _same_number(v, value) is False]
    close, rest = close_first(raw, seen)
    for v in close:
        yield v, f"{raw} → {v} (seen earlier)"
    for variant in number_variants(value) if nudge else ():
        text = format_like(raw, variant)
        yield text, f"{raw} → {text}"
    for v in rest:
        yield v, f"{raw} → {v} (seen earlier)"


def _same_number(raw: str, value: int | float) -> bool:
    try:
        return float(raw.replace(",", "")) == float(value)
    except ValueError:
        return False


def _text_mutations(text: str, earlier: EarlierValues, grounded: frozenset[str], agents: tuple[str, ...]
                    ) -> Iterator[tuple[str, str]]:
    """One number or one typed word of ``text`` changed (numbers the step got from its sources are not nudged,
    only swapped for another value seen earlier)."""
    for n in numbers_in(text):
        for new, why in _number_options(n.raw, n.value, earlier, nudge=n.raw not in grounded):
            yield text[: n.start] + new + text[n.end :], f"number {why}"
    for w in typed_words_in(text, agents):
        for new in word_replacements(w, earlier.words):
            yield text[: w.start] + new + text[w.end :], f"{w.kind} {w.text} → {new} (seen earlier)"


# ------------------------------------------------------------------------------------------------------- code


def _code_mutations(code: str, earlier: EarlierValues = EarlierValues(), agents: tuple[str, ...] = ()
                    ) -> Iterator[tuple[str, str]]:
    """Each applied alone, in the order logic bugs are most often found: comparison and boundary operators, range
    and slice ends ±1, then numeric literals (a value seen earlier that looks like a copy of it, ±1 / ±10 %), then
    numbers and typed words inside string literals (a task for a managed agent: ``helper(task='... 9 ...')``).

    Proposals of equal minimality are replayed in this order, so a data list copied into the code (``[250, 100,
    40]``) cannot crowd the one operator out of the step's proposal budget."""
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
    literals: list[tuple[str, str]] = []
    strings: list[tuple[str, str]] = []
    for tok in tokens:
        start, end = pos(*tok.start), pos(*tok.end)
        line = tok.start[0]
        if tok.type == tokenize.OP and tok.string in _OPERATOR_SWAPS:
            new_op = _OPERATOR_SWAPS[tok.string]
            yield code[:start] + new_op + code[end:], f"operator {tok.string} → {new_op} (line {line})"
        elif tok.type == tokenize.NUMBER:
            literals += [(code[:start] + text + code[end:], f"literal {why} (line {line})")
                         for text, why in _literal_options(tok.string, earlier)]
        elif tok.type == tokenize.STRING:
            strings += [(code[:start] + new_token + code[end:], f"string literal: {why} (line {line})")
                        for new_token, why in _string_literal_options(tok.string, earlier, agents)]
    yield from _boundary_mutations(code, pos)
    yield from literals
    yield from strings


def _literal_options(raw: str, earlier: EarlierValues) -> Iterator[tuple[str, str]]:
    """(new literal, why) for a numeric code literal: a value seen earlier that looks like a copy of it (a typo),
    then ±1 / ±10 %. Other values seen earlier are not offered: a literal equal to a value the run showed is data
    the code copied, and one far from every seen value is a constant, not a copy."""
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    seen = [v.replace(",", "") for v in earlier.numbers]
    close, _ = close_first(raw, [v for v in seen if v != raw and not _same_number(v, value)])
    for v in close:
        yield v, f"{raw} → {v} (seen earlier)"
    for variant in number_variants(value):
        text = format_like(raw, variant)
        yield text, f"{raw} → {text}"


_TRIPLE_QUOTES = ("'" * 3, '"' * 3)


def _string_literal_options(token: str, earlier: EarlierValues, agents: tuple[str, ...]
                            ) -> Iterator[tuple[str, str]]:
    """(new token, why): one number or typed word inside a string literal's text changed; an edit that would end
    or escape the literal is dropped."""
    i = 0
    while i < len(token) and token[i] not in "'\"":
        i += 1
    quote = token[i : i + 3] if token[i : i + 3] in _TRIPLE_QUOTES else token[i : i + 1]
    body_start, body_end = i + len(quote), len(token) - len(quote)
    if body_end <= body_start:
        return
    body = token[body_start:body_end]
    for new_body, why in _text_mutations(body, earlier, frozenset(), agents):
        if quote[0] in new_body or "\\" in new_body:
            continue
        yield token[:body_start] + new_body + token[body_end:], why


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
    arguments: dict[str, Any], earlier: EarlierValues, grounded: frozenset[str], agents: tuple[str, ...]
) -> Iterator[tuple[dict[str, Any], str]]:
    """One argument changed: a number (a value seen earlier that looks like it — a copy typo —, ±1 / ±10 %, another
    value seen earlier), a number or typed word inside a string argument, code inside a code argument; or two
    arguments of the same type swapped. Numbers the step got from its sources are kept."""
    for key, value in arguments.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for new_value, why in _numeric_argument_options(value, earlier, grounded):
                yield {**arguments, key: new_value}, f"argument {key}: {why}"
        elif isinstance(value, str) and key in ("code", "source", "script"):
            for new, why in _code_mutations(value, earlier, agents):
                yield {**arguments, key: new}, f"argument {key}: {why}"
        elif isinstance(value, str):
            for new, why in _text_mutations(value, earlier, grounded, agents):
                yield {**arguments, key: new}, f"argument {key}: {why}"
    keys = list(arguments)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            va, vb = arguments[a], arguments[b]
            if type(va) is type(vb) and va != vb:
                yield {**arguments, a: vb, b: va}, f"swap arguments {a} ↔ {b}"


def _numeric_argument_options(value: int | float, earlier: EarlierValues, grounded: frozenset[str]
                              ) -> Iterator[tuple[int | float, str]]:
    raw = _num_text(value)
    for text, why in _number_options(raw, value, earlier, nudge=raw not in grounded):
        plain = text.replace(",", "")
        try:
            new: int | float = float(plain) if ("." in plain or isinstance(value, float)) else int(plain)
        except ValueError:
            continue
        if new != value:
            yield new, why


# -------------------------------------------------------------------------------------------------- proposals


def _num_text(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


#: The dependency kinds through which a step (or the model call that wrote it) received what it knows.
_SOURCE_KINDS = ("saw", "observed", "delegated_by", "tool_result_of", "answer_of")


def grounded_numbers(run: Run, step: Step) -> frozenset[str]:
    """Numbers the step got from its sources: the task, and what it (or the model call that wrote it) saw and
    observed — the user's input, tool results, other agents' messages, a delegated task.

    Nudging such a number (±1, ±10%) in a message or a tool argument would make a faithful copy wrong so that an
    error elsewhere is compensated — a spurious "repair" of a step that was right, and a faithful executor blamed
    for its instruction (issue 19): a message restating a tool's 22 as 22 is not the agent's error even when 22 is
    wrong; one restating 21 as 22 is. The earlier step that introduced a wrong value is tried on its own, earlier.
    Those mutations are not proposed (code literals are exempt: a boundary bug often IS a number copied from the
    task, used wrongly).
    """
    texts = [run.task or ""]
    by_id = {s.step_id: s for s in run.steps}
    sources: list[Step] = []
    for dep in step.depends_on:
        source = by_id.get(dep.step_id)
        if source is None:
            continue
        if source.kind == "task" or source.metadata.get("user_input") is True or dep.kind in _SOURCE_KINDS:
            sources.append(source)
        if dep.kind == "produced_by" and source.kind == "llm_response":
            sources += [by_id[d.step_id] for d in source.depends_on if d.kind in _SOURCE_KINDS and d.step_id in by_id]
    for source in sources:
        texts.append(source.content or "")
        result = source.outputs.get("result")
        if result is not None and not isinstance(result, str):
            texts.append(json.dumps(result, ensure_ascii=False, default=str))
    found: set[str] = set()
    for text in texts:
        for n in numbers_in(text):
            found.update({n.raw, _num_text(n.value)})
    return frozenset(found)


def _target_proposals(step: Step, run: Run) -> Iterator[tuple[Any, Any, str]]:
    key = "target" if step.kind == "handoff" else "selected"
    current = step.outputs.get(key)
    # the targets the framework allowed at that step (recorded by the adapter), then the run's other agents
    recorded = step.metadata.get("candidates")
    options = [str(a) for a in recorded] if isinstance(recorded, list) and recorded else list(run.agents)
    for agent in options:
        if agent != current and agent != step.agent:
            yield current, agent, f"{key} {current} → {agent}"


def _result_proposals(step: Step, grounded: frozenset[str]) -> Iterator[tuple[Any, Any, str]]:
    result = step.outputs.get("result", step.content)
    text = result if isinstance(result, str) else str(result)
    for n in numbers_in(text):
        if n.raw in grounded:
            continue
        for variant in number_variants(n.value):
            new = format_like(n.raw, variant)
            yield text, text[: n.start] + new + text[n.end :], f"number {n.raw} → {new}"


def _summarises_tool_results(run: Run, step: Step) -> bool:
    """A message the framework wrote from tool results (AutoGen's ``ToolCallSummaryMessage``): the model that
    "produced" it only called tools, so its text is the environment's output — there is no text of the model's
    to correct (the adapter refuses such an edit)."""
    if step.kind != "message":
        return False
    known = {s.step_id: s for s in run.steps}
    producers = [known[i] for i in step.deps_of_kind("produced_by") if i in known]
    return any(p.kind == "llm_response" and p.outputs.get("tool_calls") and not p.outputs.get("text")
               for p in producers)


def _raw_proposals(step: Step, run: Run) -> Iterator[tuple[Any, Any, str]]:
    """(original, replacement, description) for every applicable mutation of ``step``."""
    if step.kind in ("handoff", "speaker_selection"):
        yield from _target_proposals(step, run)
        return
    code = code_of(step)
    grounded = grounded_numbers(run, step)
    agents = tuple(run.agents)
    if step.kind == "tool_response":
        yield from _result_proposals(step, grounded)
        return
    earlier = earlier_values(run, step)
    if step.kind == "tool_call" and step.arguments is not None and code is None:
        for new, why in _argument_mutations(step.arguments, earlier, grounded, agents):
            yield step.arguments, new, why
    elif code is not None:
        for new, why in _code_mutations(code, earlier, agents):
            yield code, new, why
    elif step.kind in ("message", "reasoning", "llm_response", "final_answer", "planning"):
        if _summarises_tool_results(run, step):
            return
        text = step.content or str(step.outputs.get("text") or "")
        for new, why in _text_mutations(text, earlier, grounded, agents):
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
