"""One span for a tool call and its result (issue 33 item 3): which steps share a span, and its attributes.

The step model keeps a ``tool_call`` and its ``tool_response`` (or a smolagents CodeAgent's ``code_execution`` of
its ``python_interpreter`` call) as two steps; the exported span is one — it starts with the call, ends with the
result, and carries the call's attributes (``semconv.step_attributes``) with the result's under
``causaltrace.result.*`` (``semconv.RESULT_PREFIX``) and the two inner times. Both steps' ``span_id`` is that span.
The live emitter (:mod:`causaltrace.instrumentation._emitter`) and the export of stored runs
(:mod:`causaltrace.collector.otlp`) pair steps by :func:`call_result_pairs` and write
:func:`merged_step_attributes`; the importer splits a span back with :func:`split_merged_attributes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from causaltrace.schema import Step
from causaltrace.semconv import (
    GEN_AI_REQUEST_MODEL,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    OI_OUTPUT_MIME_TYPE,
    OI_OUTPUT_VALUE,
    RESULT_DEPENDENCY_BY_KIND,
    RESULT_ID,
    RESULT_PREFIX,
    RESULT_SPAN_ID,
    RESULT_STARTED_AT,
    RUN_ID,
    STEP_ENDED_AT,
    step_attributes,
)

__all__ = ["call_result_pairs", "merged_step_attributes", "split_merged_attributes"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)

#: The GenAI attributes of a step that :func:`step_from_attributes` reads back: a result keeps them under its prefix.
_RESULT_GENAI_KEYS = frozenset({
    GEN_AI_REQUEST_MODEL, GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_OUTPUT_TOKENS, GEN_AI_TOOL_NAME, GEN_AI_TOOL_CALL_ID,
})
_STEP_PREFIX = "causaltrace.step."
#: On a merged span these show the result, not the call: left out of the call's attributes on import.
_MERGED_OUTPUT_KEYS = frozenset({OI_OUTPUT_VALUE, OI_OUTPUT_MIME_TYPE})
_DEPENDS_PREFIX = "causaltrace.depends_on."
_SOURCE_PREFIX = "causaltrace.source."  # an imported step's origin (Step.source)


def call_result_pairs(steps: Iterable[Step]) -> dict[str, Step]:
    """The tool calls whose result shares their span: call step id → result step.

    A ``tool_response`` that is ``tool_result_of`` a ``tool_call``, or a ``code_execution`` that ``executes`` one
    (a smolagents CodeAgent's code), is that call's result; each call has at most one (the first, in step order),
    each result one call (its first such dependency on a call not yet taken). The live emitter and the export of
    stored runs pair by this one rule, so the exported span is the same either way."""
    calls: set[str] = set()
    pairs: dict[str, Step] = {}
    for step in steps:
        if step.kind == "tool_call":
            calls.add(step.step_id)
            continue
        dep_kind = RESULT_DEPENDENCY_BY_KIND.get(step.kind)
        if dep_kind is None:
            continue
        for dep in step.depends_on:
            if dep.kind == dep_kind and dep.step_id in calls and dep.step_id not in pairs:
                pairs[dep.step_id] = step
                break
    return pairs


def _nanos(value: datetime | None) -> int:
    """Integer nanoseconds since the epoch, exact to the microsecond (a naive datetime is UTC); None → 0."""
    if value is None:
        return 0
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return ((value - _EPOCH) // _ONE_MICROSECOND) * 1000


def _datetime(nanos: Any) -> datetime | None:
    nanos = int(nanos or 0)
    return None if nanos == 0 else _EPOCH + timedelta(microseconds=nanos // 1000)


#: A step attribute's name on its call's span when the step is a result (None: not carried), as
#: :func:`_result_name` says; filled as names are met (a step has a few dozen possible attributes).
_RESULT_NAMES: dict[str, str | None] = {}


def _result_name(key: str) -> str | None:
    """The name a result step's attribute ``key`` takes on its call's span: ``causaltrace.step.X`` as
    ``causaltrace.result.X``, ``causaltrace.depends_on.*`` / ``.source.*`` under the result's prefix, the GenAI
    fields the importer reads as ``causaltrace.result.gen_ai.*``; None for the rest (the call's span has its own)."""
    if key.startswith(_STEP_PREFIX):
        name: str | None = RESULT_PREFIX + key[len(_STEP_PREFIX):]
    elif key.startswith(_DEPENDS_PREFIX) or key.startswith(_SOURCE_PREFIX):
        name = RESULT_PREFIX + key[len("causaltrace."):]
    elif key in _RESULT_GENAI_KEYS:
        name = RESULT_PREFIX + key
    else:
        name = None
    if len(_RESULT_NAMES) < 1024:
        _RESULT_NAMES[key] = name
    return name


def merged_step_attributes(call: Step, result: Step, *, cut_at: int | None = None) -> dict[str, Any]:
    """The attributes of the one span of a tool call and its result (:func:`call_result_pairs`): the call's own
    (:func:`step_attributes`), when it ended, and the result's under ``causaltrace.result.*`` with when it started.
    The span starts with the call and ends with the result; the result's own span id is written only where it
    differs from the call's (a stored run whose steps had two spans). ``cut_at``: as :func:`step_attributes`."""
    attrs = step_attributes(call, cut_at=cut_at)
    ended, started = call.ended_at, result.started_at  # _nanos, inline for the aware datetimes a live step has
    attrs[STEP_ENDED_AT] = _nanos(ended) if ended is None or ended.tzinfo is None else (
        (ended - _EPOCH) // _ONE_MICROSECOND * 1000)
    names = _RESULT_NAMES
    for key, value in step_attributes(result, cut_at=cut_at).items():
        name = names[key] if key in names else _result_name(key)
        if name is not None:
            attrs[name] = value
    attrs[RESULT_STARTED_AT] = _nanos(started) if started is None or started.tzinfo is None else (
        (started - _EPOCH) // _ONE_MICROSECOND * 1000)
    if result.span_id != call.span_id:
        attrs[RESULT_SPAN_ID] = result.span_id or ""
    return attrs


def split_merged_attributes(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A merged span's attributes as (the call's, the result's), each as :func:`step_from_attributes` reads them
    (times under :data:`STEP_ENDED_AT` / :data:`RESULT_STARTED_AT`, the result's own span id under
    :data:`RESULT_SPAN_ID` when there); None for a span of one step."""
    if RESULT_ID not in attrs:
        return None
    call: dict[str, Any] = {}
    result: dict[str, Any] = {RUN_ID: attrs.get(RUN_ID)}
    for key, value in attrs.items():
        if not key.startswith(RESULT_PREFIX):
            if key not in _MERGED_OUTPUT_KEYS:  # the result's text, shown as the span's output
                call[key] = value
            continue
        rest = key[len(RESULT_PREFIX):]
        if rest.startswith("gen_ai."):
            result[rest] = value
        elif rest.startswith(("depends_on.", "source.")):
            result["causaltrace." + rest] = value
        elif key in (RESULT_STARTED_AT, RESULT_SPAN_ID):
            result[key] = value
        else:
            result[_STEP_PREFIX + rest] = value
    return call, result
