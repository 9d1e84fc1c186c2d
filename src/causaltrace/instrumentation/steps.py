"""Step handles: a step that has started and not yet ended, and how its frozen Step is built when it ends.

``h = ctx.start_step(kind, …)`` (:class:`~causaltrace.instrumentation.runs.RunContext`) gives a :class:`StepHandle`;
fields known later are set with :meth:`StepHandle.update`; :meth:`StepHandle.end` builds the Step (without a full
pydantic validation: this module and the run keep the Step invariants themselves) and hands it over as two siblings:
the full Step to the collector, directly, and its span to the emitter (for the exporters, under the payload
policy). Steps may start and end on several threads (smolagents' parallel tool calls).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterable, Mapping
from datetime import timedelta
from time import time_ns
from typing import Any, NamedTuple, Protocol, TypeVar

from opentelemetry.trace import NonRecordingSpan, SpanContext
from pydantic import BaseModel

from causaltrace.instrumentation._emitter import _NON_RECORDING_BY_FIELD, StepSpan, internal_error, never_raise
from causaltrace.instrumentation.scope import Scope
from causaltrace.instrumentation.tracing import EPOCH, Tracing
from causaltrace.recording import canonical_json
from causaltrace.schema import (
    Dependency,
    DependencyKind,
    Step,
    StepError,
    StepStatus,
    TokenUsage,
    action_signature,
    utf8_safe,
)

__all__ = [
    "CURRENT_STEP",
    "KEEP",
    "Dep",
    "StepHandle",
    "StepOwner",
    "as_json",
    "build_step",
    "construct",
    "current_step",
    "error_of",
    "usage_of",
]

#: The step made current with :meth:`StepHandle.activate` (or a run scope with a step), if any.
CURRENT_STEP: contextvars.ContextVar[StepHandle | None] = contextvars.ContextVar("causaltrace_step", default=None)

_STEP_STATUSES = frozenset({"ok", "error", "unset"})


class Dep(NamedTuple):
    """A dependency as an adapter states it: the producer step's id and the kind (ARCHITECTURE "Dependency kinds").

    ``ctx.start_step(…, depends_on=[Dep(llm.step_id, "produced_by")])``; the run turns it into a stored
    :class:`~causaltrace.schema.Dependency` once it checked that the producer is an earlier step of the run.
    """

    step_id: str
    kind: DependencyKind


class _Keep:
    """The type of :data:`KEEP`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "KEEP"


#: "Leave this field as it is": the default of every field keyword of :meth:`StepHandle.update` / ``end``.
KEEP = _Keep()
#: The fields :meth:`StepHandle.update` / ``end`` may set, in their keyword order.
_LATE_FIELDS = ("content", "inputs", "outputs", "model", "tool_name", "arguments", "call_id", "usage", "metadata")


class StepOwner(Protocol):
    """What a step handle needs of its run (a :class:`~causaltrace.instrumentation.runs.RunContext`)."""

    run_id: str
    tracing: Tracing

    def dependencies_of(
        self, deps: Iterable[Dep | Dependency], *, consumer_index: int, existing: tuple[Dependency, ...]
    ) -> list[Dependency]: ...

    def links_of(self, deps: Iterable[Dependency]) -> list[tuple[SpanContext, str, str]]: ...

    def new_dependencies(
        self, deps: Iterable[Dep | Dependency], consumer_index: int, existing: tuple[Dependency, ...]
    ) -> tuple[list[Dependency], list[tuple[SpanContext, str, str]]]: ...


def _is_plain_json(value: Any) -> bool:
    """True when ``value`` is made of JSON types only (the common case, checked without a serialisation): dicts with
    text keys, lists, texts, integers, booleans, None and floats other than NaN, nested at most 51 containers deep.
    One call per payload: the containers are walked from a stack of their own, scalars checked in their container's
    loop (this runs on every payload of every step; a recursive call per container was ~4 Python calls per framework
    event, issue 35; a plain loop is faster here than gathering the types in C with ``set(map(type, ...))``,
    measured on real payloads of 2-6 keys)."""
    cls = type(value)
    if cls is not dict and cls is not list:
        if cls is str or cls is int or cls is bool or value is None:
            return True
        return cls is float and value == value  # NaN is not JSON
    pending: list[tuple[Any, int]] = [(value, 0)]
    pop, push = pending.pop, pending.append
    while pending:
        node, depth = pop()
        if type(node) is dict:
            for key, item in node.items():
                if type(key) is not str:
                    return False
                cls = type(item)
                if cls is str or cls is int or cls is bool or item is None:
                    continue
                if cls is float:
                    if item != item:  # NaN is not JSON
                        return False
                elif (cls is not dict and cls is not list) or depth >= 50:
                    return False
                else:
                    push((item, depth + 1))
            continue
        for item in node:
            cls = type(item)
            if cls is str or cls is int or cls is bool or item is None:
                continue
            if cls is float:
                if item != item:
                    return False
            elif (cls is not dict and cls is not list) or depth >= 50:
                return False
            else:
                push((item, depth + 1))
    return True


def as_json(value: Any) -> Any:
    """``value`` as JSON data: returned as is when it already is, else converted (tuples, models, datetimes…)."""
    if _is_plain_json(value):
        return value
    return json.loads(canonical_json(value))


_M = TypeVar("_M", bound=BaseModel)
_STEP_FIELDS = frozenset(Step.model_fields)


#: Per frozen model class: the one fields-set object every instance built with all its fields shares (pydantic
#: never changes a frozen model's set in place; a copy gets its own) — a set less per Step, Dependency, TokenUsage
#: and RecordedCall for the garbage collector to track.
_FIELDS_SETS: dict[type, set[str]] = {}
#: A Step's (every Step built by :func:`build_step` has all its fields) and how it is set without a call.
_STEP_FIELDS_SET = _FIELDS_SETS[Step] = set(Step.model_fields)
_USAGE_FIELDS_SET = _FIELDS_SETS[TokenUsage] = set(TokenUsage.model_fields)
_new_object = object.__new__
_set_attr = object.__setattr__


def construct(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.model_construct`` for a complete, already-checked set of field values, without its per-field loop.

    ``values`` must hold every field of ``cls`` (pydantic's own ``model_construct`` spends most of its time filling
    defaults, which this hot path never needs).
    """
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    fields_set = _FIELDS_SETS.get(cls)
    if fields_set is None or len(values) != len(fields_set):
        fields_set = set(values)
        if cls.model_config.get("frozen") and fields_set == cls.__pydantic_fields__.keys():
            _FIELDS_SETS[cls] = fields_set
    object.__setattr__(obj, "__pydantic_fields_set__", fields_set)
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def build_step(data: dict[str, Any]) -> Step:
    """Build the frozen Step of an ended step without a full pydantic validation (the emit hot path).

    Every field comes from this package, which keeps the Step invariants itself: indexes and dependencies are
    assigned by the run (dependencies only to earlier steps), kinds were checked at start; payload dicts are made
    JSON-safe here.
    """
    if data["status"] not in _STEP_STATUSES:
        raise ValueError(f"unknown step status {data['status']!r}")
    for key in ("inputs", "outputs", "metadata", "arguments"):  # every key is there (a KeyError otherwise)
        value = data[key]
        if value and not _is_plain_json(value):  # as_json, inline; an empty one (or None) is JSON as it is
            data[key] = json.loads(canonical_json(value))
    if type(data["content"]) is not str or type(data["agent"]) is not str:
        for key in ("content", "agent"):
            if not isinstance(data[key], str):
                data[key] = "" if data[key] is None else str(data[key])
    for key in ("agent", "model", "tool_name", "call_id"):  # names the store keeps in columns: valid UTF-8 only
        value = data[key]
        if value is not None and not value.isascii():
            data[key] = utf8_safe(value)
    data["truncated"] = False
    data.setdefault("action_signature", None)
    data.setdefault("source", None)  # a live step was not read from another instrumentor's span
    if data.keys() != _STEP_FIELDS:
        unknown = sorted(data.keys() - _STEP_FIELDS)
        missing = sorted(_STEP_FIELDS - data.keys())
        raise ValueError(f"step fields: unknown {unknown}, missing {missing}")
    step = _new_object(Step)  # construct(Step, data), inline: every field is there (checked just above)
    _set_attr(step, "__dict__", data)
    _set_attr(step, "__pydantic_fields_set__", _STEP_FIELDS_SET)
    _set_attr(step, "__pydantic_extra__", None)
    _set_attr(step, "__pydantic_private__", None)
    return step


def usage_of(input_tokens: int, output_tokens: int) -> TokenUsage:
    """A TokenUsage from an adapter's (input, output) token counts, built without a validation (the step hot path)."""
    usage = _new_object(TokenUsage)  # construct(TokenUsage, …), inline (one call less per model call)
    _set_attr(usage, "__dict__", {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens)})
    _set_attr(usage, "__pydantic_fields_set__", _USAGE_FIELDS_SET)
    _set_attr(usage, "__pydantic_extra__", None)
    _set_attr(usage, "__pydantic_private__", None)
    return usage


def error_of(error: BaseException | StepError | str | None) -> StepError | None:
    """The StepError of an exception, a message or a StepError (None for None)."""
    if error is None:
        return None
    if isinstance(error, StepError):
        return error
    if isinstance(error, BaseException):
        return StepError(type=type(error).__name__, message=str(error))
    return StepError(type="Error", message=str(error))


class StepHandle:
    """A step that has started and not yet ended. Fields may be updated until :meth:`end`."""

    def __init__(self, ctx: StepOwner, fields: dict[str, Any], span: StepSpan | None, start_ns: int) -> None:
        self.ctx = ctx
        self._fields = fields
        self.span = span
        self._start_ns = start_ns
        self.step: Step | None = None
        #: Whether :meth:`end` ran (a plain attribute: the adapters ask on every event).
        self.ended = False
        #: After the end: the dependencies added since (:meth:`_add_dependencies`), the Step's before them.
        self._late_deps: tuple[Dependency, ...] = ()
        # fixed when the step starts (never updated): plain attributes, read by the adapters on every event
        self.step_id: str = fields["step_id"]
        self.index: int = fields["index"]
        self.kind: str = fields["kind"]
        self.agent: str = fields["agent"]

    @never_raise()
    def update(
        self,
        *,
        content: str | None | _Keep = KEEP,
        inputs: Mapping[str, Any] | _Keep = KEEP,
        outputs: Mapping[str, Any] | _Keep = KEEP,
        model: str | None | _Keep = KEEP,
        tool_name: str | None | _Keep = KEEP,
        arguments: Mapping[str, Any] | None | _Keep = KEEP,
        call_id: str | None | _Keep = KEEP,
        usage: TokenUsage | tuple[int, int] | None | _Keep = KEEP,
        metadata: Mapping[str, Any] | _Keep = KEEP,
        depends_on: Iterable[Dep | Dependency] = (),
    ) -> None:
        """Set step fields known only later (content, outputs, usage…); ``depends_on`` entries are appended.

        A field left out keeps its value; a misspelled name is a ``TypeError`` (never a silently lost step).
        """
        self._set(depends_on, (content, inputs, outputs, model, tool_name, arguments, call_id, usage, metadata))

    def _set(self, depends_on: Iterable[Dep | Dependency], values: tuple[Any, ...]) -> None:
        if self.step is not None:
            return  # ended: its fields are the Step's now (a late update never reached the Step anyway)
        if depends_on:
            self._add_dependencies(depends_on)
        fields = self._fields
        for name, value in zip(_LATE_FIELDS, values, strict=True):
            if value is not KEEP:
                fields[name] = usage_of(*value) if name == "usage" and isinstance(value, tuple) else value

    @never_raise()
    def add_dependencies(self, deps: Iterable[Dep | Dependency]) -> None:
        """Add dependencies (producer step id, kind); duplicates and unknown or later producers are ignored."""
        self._add_dependencies(deps)

    def _add_dependencies(self, deps: Iterable[Dep | Dependency]) -> None:
        # after the end the fields are the Step's (frozen): later dependencies are kept apart, for the links of a
        # span still waiting to be written (a tool call's, until its result ends)
        existing = self._fields["depends_on"] if self.step is None else self._late_deps
        new, links = self.ctx.new_dependencies(deps, self.index, existing)
        if not new:
            return
        if self.step is None:
            self._fields["depends_on"] = existing + tuple(new)
        else:
            self._late_deps = existing + tuple(new)
        self.ctx.tracing.emitter.add_links(self.span, links)

    def end(
        self,
        *,
        status: StepStatus = "ok",
        error: BaseException | StepError | str | None = None,
        content: str | None | _Keep = KEEP,
        inputs: Mapping[str, Any] | _Keep = KEEP,
        outputs: Mapping[str, Any] | _Keep = KEEP,
        model: str | None | _Keep = KEEP,
        tool_name: str | None | _Keep = KEEP,
        arguments: Mapping[str, Any] | None | _Keep = KEEP,
        call_id: str | None | _Keep = KEEP,
        usage: TokenUsage | tuple[int, int] | None | _Keep = KEEP,
        metadata: Mapping[str, Any] | _Keep = KEEP,
        depends_on: Iterable[Dep | Dependency] = (),
    ) -> Step | None:
        """End the step: its status is known now (``error`` implies status ``error``); the other keywords are as
        :meth:`update`'s. Idempotent: a second call returns the Step of the first."""
        try:
            if self.step is not None:
                return self.step
            data = self._fields  # becomes the Step's own fields (no copy: the handle takes no update after this)
            if depends_on:
                self._add_dependencies(depends_on)
            # _set's loop, inline (one call less per step)
            for name, value in zip(
                _LATE_FIELDS, (content, inputs, outputs, model, tool_name, arguments, call_id, usage, metadata),
                strict=True,
            ):
                if value is not KEEP:
                    data[name] = usage_of(*value) if name == "usage" and isinstance(value, tuple) else value
            step_error = error_of(error) if error is not None else None
            if step_error is not None:
                status = "error"
            elif status == "error":
                step_error = StepError(type="Error", message=str(data.get("content", ""))[:500])
            end_ns = time_ns() // 1000 * 1000  # tracing.now_ns, inline
            if end_ns < self._start_ns:
                end_ns = self._start_ns
            span_id = f"{self.span.span_id:016x}" if self.span is not None else None  # a step span: valid
            data.update(status=status, error=step_error, ended_at=EPOCH + timedelta(microseconds=end_ns // 1000),
                        span_id=span_id)  # ns_to_datetime, inline
            if data["kind"] not in ("agent_turn", "task"):  # (a handle's fields never hold an action_signature)
                outputs = data["outputs"]
                target = data["tool_name"] or outputs.get("target") or outputs.get("selected")
                payload = data["arguments"] if data["arguments"] is not None else data["content"]
                data["action_signature"] = action_signature(data["kind"], target, payload)
            step = build_step(data)
            self._late_deps = step.depends_on
            self.step = step
            self.ended = True
            tracing = self.ctx.tracing
            # two siblings: the full Step to the collector, its span (under the payload policy) to the exporters
            tracing.collector.accept(step)
            span, emitter = self.span, tracing.emitter
            if span is None or span.joins is not None or data["kind"] == "tool_call" or emitter._sdk is None:
                emitter.export_step(span, step, end_time_ns=end_ns)  # a tool call's half, or nothing to write
            else:
                try:  # export_step's own path for a span of one step, inline (one frame less per step)
                    emitter._write(span, step, None, (), end_ns)
                except Exception:
                    internal_error("Emitter.export_step")
            return step
        except Exception:
            internal_error("StepHandle.end")
            return None

    def set_span_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Attributes for this step's span only, read from the framework (OpenInference messages with their real
        tool-call ids, tool schemas, a tool's description…): exported under the payload policy and the content
        switches, never stored in the Step. Later calls add to earlier ones."""
        try:
            span = self.span
            if span is None or not attributes:
                return
            if span.extras is None:
                span.extras = dict(attributes)  # the first (usually the only) call: a copy, no update call
            else:
                span.extras.update(attributes)
        except Exception:
            internal_error("StepHandle.set_span_attributes")
            return None

    def activate(self, *also: tuple[contextvars.ContextVar[Any], Any]) -> Scope:
        """A scope making this step's span (and this step) current, so the framework's own spans and nested steps
        nest here; ``also`` are more (context variable, value) pairs the caller sets in the same scope."""
        span = self.span
        if span is None:
            return Scope(((CURRENT_STEP, self), *also), None)
        current = span.current
        if current is None:  # StepSpan.as_current, inline (one frame less per step activated)
            if _NON_RECORDING_BY_FIELD:
                current = span.current = _new_object(NonRecordingSpan)
                current._context = span.context
            else:
                current = span.as_current()
        return Scope(((CURRENT_STEP, self), *also), current)


def current_step() -> StepHandle | None:
    """The step made current with :meth:`StepHandle.activate` in this context, if any."""
    return CURRENT_STEP.get()
