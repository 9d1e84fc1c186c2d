"""The live side every adapter uses: tracing set-up, the state of a running run, steps and recorded calls.

An adapter (AutoGen, smolagents) does four things through this module:

1. ``ctx, owned = attach_run(framework=..., task=...)`` when a top-level team/agent run starts: it joins the run a
   user opened with :func:`causaltrace.run`, or starts a run of its own (``owned=True``) that it makes current with
   ``with run_scope(ctx): ...`` around the framework call (so its root span is the parent of everything inside);
2. ``h = ctx.start_step(kind, agent=..., parent=..., depends_on=[(step_id, kind)…], …)`` when a step starts
   (the per-run ``index`` is assigned here), then ``h.end(status=…, outputs=…)`` when its outcome is known;
3. ``call = ctx.begin_call(agent_key, "llm"|"tool", request)`` before an LLM / tool call and
   ``call.finish(response)`` after it, to record it for replay (ARCHITECTURE "Recording");
4. ``ctx.report_end(final_answer=..., stop=..., error=...)`` when the framework run ends, and — if it owns the run —
   ``await ctx.finish()`` / ``ctx.finish_sync()`` to apply the verifier, end the root span and store the Run.

Every method here is safe to call from wrappers: our own failures are logged and swallowed (``never_raise``),
and steps may start and end on several threads (smolagents' parallel tool calls).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext
from pydantic import BaseModel

from causaltrace import semconv
from causaltrace.collector.live import RunCollector, ns_to_datetime
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._emitter import Emitter, StepSpan, never_raise
from causaltrace.instrumentation._export import resolve_provider
from causaltrace.schema import (
    DEPENDENCY_KINDS,
    STEP_KINDS,
    Dependency,
    Outcome,
    RecordedCall,
    Recording,
    Run,
    Step,
    StepError,
    TokenUsage,
    Verdict,
    action_signature,
    canonical_json,
    canonical_request,
    encode_response,
)

__all__ = [
    "CallHandle",
    "RunContext",
    "RunHandle",
    "Scope",
    "StepHandle",
    "Tracing",
    "attach_run",
    "configure",
    "current_run",
    "current_step",
    "get_tracing",
    "run",
    "verdict_of",
]

logger = logging.getLogger("causaltrace")

_CURRENT_RUN: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("causaltrace_run", default=None)
_CURRENT_STEP: contextvars.ContextVar[StepHandle | None] = contextvars.ContextVar("causaltrace_step", default=None)


class Scope:
    """Set context variables and (optionally) the current OTel span for one ``with`` block, then restore them.

    The instrumentation hot path enters a scope around every item a framework stream yields; one plain object with
    ``__enter__`` / ``__exit__`` costs a fraction of nested ``@contextmanager`` generators and ``trace.use_span``.
    """

    __slots__ = ("_otel_token", "_span", "_tokens", "_values")

    def __init__(self, values: tuple[tuple[contextvars.ContextVar[Any], Any], ...], span: Span | None = None) -> None:
        self._values = values
        self._span = span
        self._tokens: list[contextvars.Token[Any]] = []
        self._otel_token: object = None

    def __enter__(self) -> Scope:
        self._tokens = [var.set(value) for var, value in self._values]
        if self._span is not None:
            self._otel_token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._otel_token is not None:
            otel_context.detach(self._otel_token)  # type: ignore[arg-type]
            self._otel_token = None
        for (var, _), token in zip(reversed(self._values), reversed(self._tokens), strict=True):
            var.reset(token)


# ----------------------------------------------------------------------------------------------- tracing set-up


class Tracing:
    """The tracer, emitter, collector and config in force for this process."""

    def __init__(self, tracer_provider: trace.TracerProvider | None, config: TraceConfig) -> None:
        self.config = config
        self.provider = resolve_provider(tracer_provider, max_queue_size=config.max_queue_size)
        self.collector = RunCollector(config)
        self.provider.add_span_processor(self.collector)
        self.tracer = self.provider.get_tracer(semconv.INSTRUMENTATION_NAME)
        self.emitter = Emitter(self.tracer, config)

    def shutdown(self) -> None:
        """Flush the collector's pending writes and detach it (the SDK cannot remove a span processor)."""
        self.collector.flush()
        self.collector.closed = True


_TRACING: Tracing | None = None
_TRACING_LOCK = threading.Lock()


def configure(tracer_provider: trace.TracerProvider | None = None, config: TraceConfig | None = None) -> Tracing:
    """Set (or replace) the tracer provider and config causaltrace emits with; returns the active set-up.

    Called by every ``instrument_*`` function; calling it again with the same arguments keeps the current set-up.
    """
    global _TRACING
    with _TRACING_LOCK:
        current = _TRACING
        if current is not None and (tracer_provider is None or tracer_provider is current.provider):
            if config is None or config == current.config:
                return current
        if current is not None:
            current.shutdown()
        _TRACING = Tracing(tracer_provider, config or TraceConfig.from_env())
        return _TRACING


def get_tracing() -> Tracing:
    """The active set-up, creating the default one (env config, OTLP from ``OTEL_*``) on first use."""
    return _TRACING if _TRACING is not None else configure()


def reset_tracing() -> None:
    """Forget the active set-up (tests)."""
    global _TRACING
    with _TRACING_LOCK:
        if _TRACING is not None:
            _TRACING.shutdown()
        _TRACING = None


def _now_ns() -> int:
    return time.time_ns() // 1000 * 1000  # microsecond precision: what a Step's datetime keeps


# ------------------------------------------------------------------------------------------------------- steps


_DEPENDENCY_KINDS = frozenset(DEPENDENCY_KINDS)
_STEP_KINDS = frozenset(STEP_KINDS)
_STEP_STATUSES = frozenset({"ok", "error", "unset"})


def _is_plain_json(value: Any, depth: int = 0) -> bool:
    """True when ``value`` is made of JSON types only (the common case, checked without a serialisation)."""
    cls = type(value)
    if cls is str or cls is int or cls is bool or value is None:
        return True
    if cls is float:
        return value == value  # NaN is not JSON
    if depth > 50:
        return False
    if cls is dict:
        for key, item in value.items():
            if type(key) is not str or not _is_plain_json(item, depth + 1):
                return False
        return True
    if cls is list:
        for item in value:
            if not _is_plain_json(item, depth + 1):
                return False
        return True
    return False


def _as_json(value: Any) -> Any:
    if _is_plain_json(value):
        return value
    return json.loads(canonical_json(value))  # tuples, pydantic models, datetimes… become JSON


_M = TypeVar("_M", bound=BaseModel)
_STEP_FIELDS = frozenset(Step.model_fields)


def _construct(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.model_construct`` for a complete, already-checked set of field values, without its per-field loop.

    ``values`` must hold every field of ``cls`` (pydantic's own ``model_construct`` spends most of its time filling
    defaults, which this hot path never needs).
    """
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    object.__setattr__(obj, "__pydantic_fields_set__", set(values))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def _build_step(data: dict[str, Any]) -> Step:
    """Build the frozen Step of an ended step without a full pydantic validation (the emit hot path).

    Every field comes from this module, which keeps the Step invariants itself: indexes and dependencies are assigned
    here (dependencies only to earlier steps), kinds were checked at start; payload dicts are made JSON-safe.
    """
    if data["status"] not in _STEP_STATUSES:
        raise ValueError(f"unknown step status {data['status']!r}")
    for key in ("inputs", "outputs", "metadata"):
        data[key] = _as_json(data[key])
    if data.get("arguments") is not None:
        data["arguments"] = _as_json(data["arguments"])
    for key in ("content", "agent"):
        if not isinstance(data[key], str):
            data[key] = "" if data[key] is None else str(data[key])
    data["truncated"] = False
    data.setdefault("action_signature", None)
    if data.keys() != _STEP_FIELDS:
        unknown = sorted(data.keys() - _STEP_FIELDS)
        missing = sorted(_STEP_FIELDS - data.keys())
        raise ValueError(f"step fields: unknown {unknown}, missing {missing}")
    return _construct(Step, data)


def _usage(input_tokens: int, output_tokens: int) -> TokenUsage:
    """A TokenUsage from an adapter's (input, output) token counts, built without a validation (the step hot path)."""
    return _construct(TokenUsage, {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens)})


def _error_of(error: BaseException | StepError | str | None) -> StepError | None:
    if error is None:
        return None
    if isinstance(error, StepError):
        return error
    if isinstance(error, BaseException):
        return StepError(type=type(error).__name__, message=str(error))
    return StepError(type="Error", message=str(error))


class StepHandle:
    """A step that has started and not yet ended. Fields may be updated until :meth:`end`."""

    def __init__(self, ctx: RunContext, fields: dict[str, Any], span: StepSpan | None, start_ns: int) -> None:
        self.ctx = ctx
        self._fields = fields
        self.span = span
        self._start_ns = start_ns
        self.step: Step | None = None

    @property
    def step_id(self) -> str:
        return self._fields["step_id"]

    @property
    def index(self) -> int:
        return self._fields["index"]

    @property
    def kind(self) -> str:
        return self._fields["kind"]

    @property
    def agent(self) -> str:
        return self._fields["agent"]

    @property
    def ended(self) -> bool:
        return self.step is not None

    @never_raise()
    def update(self, **fields: Any) -> None:
        """Set step fields known only later (content, outputs, usage…); ``depends_on`` entries are appended."""
        self._update(fields)

    def _update(self, fields: dict[str, Any]) -> None:
        deps = fields.pop("depends_on", None)
        if deps:
            self._add_dependencies(deps)
        if "usage" in fields and isinstance(fields["usage"], tuple):
            fields["usage"] = _usage(*fields["usage"])
        self._fields.update(fields)

    @never_raise()
    def add_dependencies(self, deps: Iterable[tuple[str, str] | Dependency]) -> None:
        """Add dependencies (producer step id, kind); duplicates and unknown or later producers are ignored."""
        self._add_dependencies(deps)

    def _add_dependencies(self, deps: Iterable[tuple[str, str] | Dependency]) -> None:
        new = self.ctx._dependencies(deps, consumer_index=self.index, existing=self._fields["depends_on"])
        if not new:
            return
        self._fields["depends_on"] = self._fields["depends_on"] + tuple(new)
        self.ctx.tracing.emitter.add_links(self.span, self.ctx._links(new))

    @never_raise()
    def end(
        self,
        *,
        status: str = "ok",
        error: BaseException | StepError | str | None = None,
        **fields: Any,
    ) -> Step | None:
        """End the step: its status is known now (``error`` implies status ``error``). Idempotent."""
        if self.step is not None:
            return self.step
        if fields:
            self._update(fields)
        step_error = _error_of(error)
        if step_error is not None:
            status = "error"
        elif status == "error":
            step_error = StepError(type="Error", message=str(self._fields.get("content", ""))[:500])
        end_ns = max(_now_ns(), self._start_ns)
        data = dict(self._fields)
        span_ctx = self.span.get_span_context() if self.span is not None else None
        span_id = f"{span_ctx.span_id:016x}" if span_ctx is not None and span_ctx.is_valid else None
        data.update(status=status, error=step_error, ended_at=ns_to_datetime(end_ns), span_id=span_id)
        if data.get("action_signature") is None and data["kind"] not in ("agent_turn", "task"):
            target = data.get("tool_name") or data["outputs"].get("target") or data["outputs"].get("selected")
            payload = data.get("arguments") if data.get("arguments") is not None else data.get("content", "")
            data["action_signature"] = action_signature(data["kind"], target, payload)
        step = _build_step(data)
        self.step = step
        tracing = self.ctx.tracing
        tracing.emitter.end_step_span(self.span, step, end_time_ns=end_ns, collector=tracing.collector)
        return step

    def activate(self, *also: tuple[contextvars.ContextVar[Any], Any]) -> Scope:
        """A scope making this step's span (and this step) current, so the framework's own spans and nested steps
        nest here; ``also`` are more (context variable, value) pairs the caller sets in the same scope."""
        return Scope(((_CURRENT_STEP, self), *also), self.span.as_current() if self.span is not None else None)


def current_step() -> StepHandle | None:
    """The step made current with :meth:`StepHandle.activate` in this context, if any."""
    return _CURRENT_STEP.get()


# ---------------------------------------------------------------------------------------------- recorded calls


@dataclass
class CallHandle:
    """A recorded LLM or tool call in flight; :meth:`finish` stores its response."""

    ctx: RunContext
    agent_key: str
    kind: str
    ordinal: int
    request: Any
    request_hash: str
    start_order: int
    settings: dict[str, Any] = field(default_factory=dict)
    step_id: str | None = None
    call: RecordedCall | None = None

    @never_raise()
    def finish(self, response: Any = None, *, error: BaseException | None = None, step_id: str | None = None) -> None:
        """Record the response (or the error) of this call. A response that cannot be encoded is ``live_only``."""
        if self.call is not None:
            return
        live_only = False
        try:
            encoded, response_type = encode_response(response)
        except TypeError as exc:
            logger.info("causaltrace: call %s/%s#%d not recordable: %s", self.agent_key, self.kind, self.ordinal, exc)
            encoded, response_type, live_only = None, None, True
        # Built without a pydantic validation (the hot path; JsonValue checks walk every node in Python): the
        # request is canonical JSON, the response was just encoded, the settings are made JSON-safe here.
        self.call = _construct(
            RecordedCall,
            {
                "run_id": self.ctx.run_id,
                "step_id": step_id or self.step_id,
                "agent_key": self.agent_key,
                "kind": self.kind,
                "ordinal": self.ordinal,
                "request": self.request,
                "request_hash": self.request_hash,
                "response": encoded,
                "response_type": response_type,
                "settings": _as_json(self.settings),
                "start_order": self.start_order,
                "finish_order": self.ctx._next_finish(),
                "live_only": live_only,
                "error": _error_of(error),
            },
        )
        self.ctx._add_call(self.call)


# ------------------------------------------------------------------------------------------------------ runs


class RunContext:
    """The state of one live run: its root span, step counter, open steps, recording and end report."""

    def __init__(
        self,
        *,
        tracing: Tracing,
        framework: str = "unknown",
        task: str | None = None,
        name: str | None = None,
        verify: Any = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.tracing = tracing
        self.run_id = run_id or uuid.uuid4().hex
        self.framework = framework
        self.task = task
        self.name = name
        self.verify = verify
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.agents: list[str] = []
        self._lock = threading.RLock()
        self._next_index = 0
        self._spans: dict[str, SpanContext] = {}  # span contexts only: ended spans are not kept alive
        self._indexes: dict[str, int] = {}
        self._ordinals: dict[tuple[str, str], int] = {}
        self._start_order = 0
        self._finish_order = 0
        self._calls: list[RecordedCall] = []
        self.start_ns = _now_ns()
        self.end_ns: int | None = None
        self.final_answer: str | None = None
        self.stop: str | None = None
        self.error: BaseException | str | None = None
        self.reason = ""
        self.outcome: Outcome | None = None
        self.run: Run | None = None
        #: The ``causaltrace.watch`` this run belongs to, if any (it diagnoses the run after it finishes).
        self.watch: Any = None
        #: Leave the root span open after the run (the watch ends it once the diagnosis is on it; decision 5).
        self.keep_root_open = False
        self.root_span: Span | None = tracing.emitter.start_root(
            semconv.run_attributes(run_id=self.run_id, framework=framework, task=task, name=name),
            start_time_ns=self.start_ns,
        )
        ctx = self.root_span.get_span_context() if self.root_span is not None else None
        self.trace_id = f"{ctx.trace_id:032x}" if ctx is not None and ctx.is_valid else None
        tracing.collector.begin_run(
            self.run_id,
            framework=framework,
            task=task,
            name=name,
            trace_id=self.trace_id,
            started_at=ns_to_datetime(self.start_ns),
        )

    # -- identity ------------------------------------------------------------------------------------------------

    @never_raise()
    def set_framework(self, framework: str, task: str | None = None) -> None:
        """Called by the adapter that joins a user-opened run: names the framework and (if unset) the task."""
        if self.framework == "unknown":
            self.framework = framework
        if self.task is None and task is not None:
            self.task = task
        if self.root_span is not None and self.root_span.is_recording():
            attrs = semconv.run_attributes(run_id=self.run_id, framework=self.framework, task=self.task, name=self.name)
            self.root_span.set_attributes(
                {k: v for k, v in attrs.items() if k in (semconv.RUN_FRAMEWORK, semconv.RUN_TASK)}
            )

    @never_raise()
    def add_agent(self, name: str) -> None:
        """Note a participant's name (kept in ``Run.agents`` in first-seen order)."""
        with self._lock:
            if name and name not in self.agents:
                self.agents.append(name)

    # -- steps ---------------------------------------------------------------------------------------------------

    def _dependencies(
        self, deps: Iterable[tuple[str, str] | Dependency], *, consumer_index: int, existing: tuple[Dependency, ...]
    ) -> list[Dependency]:
        seen = {(d.step_id, d.kind) for d in existing}
        out: list[Dependency] = []
        for dep in deps:
            step_id, kind = (dep.step_id, dep.kind) if isinstance(dep, Dependency) else dep
            producer_index = self._indexes.get(step_id)
            if producer_index is None or producer_index >= consumer_index or (step_id, kind) in seen:
                if producer_index is None or producer_index >= consumer_index:
                    logger.debug("causaltrace: dependency on %s (%s) dropped: not an earlier step", step_id, kind)
                continue
            seen.add((step_id, kind))
            if kind not in _DEPENDENCY_KINDS:
                logger.warning("causaltrace: unknown dependency kind %r dropped", kind)
                continue
            out.append(_construct(Dependency, {"step_id": step_id, "kind": kind}))
        return out

    def _links(self, deps: Iterable[Dependency]) -> list[tuple[SpanContext, str, str]]:
        out = []
        for dep in deps:
            span_ctx = self._spans.get(dep.step_id)
            if span_ctx is not None:
                out.append((span_ctx, dep.kind, dep.step_id))
        return out

    @never_raise()
    def start_step(
        self,
        kind: str,
        *,
        agent: str = "",
        parent: str | StepHandle | None = None,
        depends_on: Iterable[tuple[str, str] | Dependency] = (),
        content: str = "",
        inputs: Mapping[str, Any] | None = None,
        outputs: Mapping[str, Any] | None = None,
        model: str | None = None,
        tool_name: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        usage: TokenUsage | tuple[int, int] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> StepHandle | None:
        """Start a step; its index is the next in this run. ``parent`` defaults to the current step, if any."""
        if parent is None:
            cur = _CURRENT_STEP.get()
            parent = cur if cur is not None and cur.ctx is self else None
        parent_id = parent.step_id if isinstance(parent, StepHandle) else parent
        if isinstance(usage, tuple):
            usage = _usage(*usage)
        start_ns = _now_ns()
        with self._lock:
            index = self._next_index
            self._next_index += 1
            step_id = f"{self.run_id}/{index}"
            self._indexes[step_id] = index
            if parent_id is not None and parent_id not in self._indexes:
                parent_id = None
            if depends_on:
                deps = self._dependencies(depends_on, consumer_index=index, existing=())
                links = self._links(deps)
            else:
                deps, links = [], []
            parent_span: Span | SpanContext | None = self._spans.get(parent_id) if parent_id else self.root_span
            if agent and agent not in self.agents:
                self.agents.append(agent)
        fields: dict[str, Any] = {
            "step_id": step_id,
            "run_id": self.run_id,
            "index": index,
            "kind": kind,
            "agent": agent,
            "parent_step_id": parent_id,
            "depends_on": tuple(deps),
            "content": content,
            "inputs": dict(inputs or {}),
            "outputs": dict(outputs or {}),
            "model": model,
            "tool_name": tool_name,
            "arguments": dict(arguments) if arguments is not None else None,
            "call_id": call_id,
            "usage": usage,
            "metadata": dict(metadata or {}),
            "started_at": ns_to_datetime(start_ns),
        }
        if kind not in _STEP_KINDS:
            raise ValueError(f"unknown step kind {kind!r}")
        target = tool_name or agent
        span = self.tracing.emitter.start_step_span(
            f"{kind} {target}" if target else kind,
            {semconv.STEP_ID: step_id, semconv.STEP_KIND: kind, semconv.STEP_INDEX: index, semconv.RUN_ID: self.run_id},
            parent=parent_span if parent_span is not None else self.root_span,
            links=links,
            start_time_ns=start_ns,
        )
        if span is not None:
            with self._lock:
                self._spans[step_id] = span.get_span_context()
        return StepHandle(self, fields, span, start_ns)

    def add_step(self, kind: str, *, status: str = "ok", error: Any = None, **fields: Any) -> StepHandle | None:
        """Start and end a step at once (a message, a selection…); returns its (ended) handle."""
        handle = self.start_step(kind, **fields)
        if handle is not None:
            handle.end(status=status, error=error)
        return handle

    def steps(self) -> list[Step]:
        """The steps that have ended so far, in index order."""
        return self.tracing.collector.steps_of(self.run_id)

    # -- recording -----------------------------------------------------------------------------------------------

    @never_raise()
    def reserve_ordinals(self, agent_key: str, kind: str, count: int) -> list[int]:
        """Reserve ``count`` consecutive ordinals (tool calls numbered in the model's response order)."""
        with self._lock:
            first = self._ordinals.get((agent_key, kind), 0)
            self._ordinals[(agent_key, kind)] = first + count
        return list(range(first, first + count))

    @never_raise()
    def begin_call(
        self,
        agent_key: str,
        kind: str,
        request: Any,
        *,
        ordinal: int | None = None,
        settings: Mapping[str, Any] | None = None,
        step_id: str | None = None,
        call_id_pattern: re.Pattern[str] | None = None,
    ) -> CallHandle | None:
        """Start recording a call; hashes the request NOW, before the framework mutates it.

        Returns None when recording is off (``TraceConfig.record=False``).
        """
        if not self.tracing.config.record:
            return None
        if kind not in ("llm", "tool"):
            raise ValueError(f"unknown recorded call kind {kind!r}")
        canonical, digest = canonical_request(request, call_id_pattern=call_id_pattern)
        with self._lock:
            if ordinal is None:
                ordinal = self._ordinals.get((agent_key, kind), 0)
                self._ordinals[(agent_key, kind)] = ordinal + 1
            start_order = self._start_order
            self._start_order += 1
        return CallHandle(
            ctx=self,
            agent_key=agent_key,
            kind=kind,
            ordinal=ordinal,
            request=canonical,
            request_hash=digest,
            start_order=start_order,
            settings=dict(settings or {}),
            step_id=step_id,
        )

    def _next_finish(self) -> int:
        with self._lock:
            value = self._finish_order
            self._finish_order += 1
            return value

    def _add_call(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)

    def recording(self) -> Recording:
        """The calls recorded so far, in start order."""
        with self._lock:
            return Recording(run_id=self.run_id, calls=tuple(sorted(self._calls, key=lambda c: c.start_order)))

    # -- the end ---------------------------------------------------------------------------------------------------

    @never_raise()
    def report_end(
        self,
        *,
        final_answer: str | None = None,
        stop: str = "normal",
        error: BaseException | str | None = None,
        reason: str = "",
    ) -> None:
        """The adapter's run-end signal: what the framework run ended with. The last report wins."""
        self.final_answer = final_answer if final_answer is not None else self.final_answer
        self.stop = "error" if error is not None else stop
        self.error = error
        self.reason = reason or (f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error or ""))
        self.end_ns = _now_ns()

    async def finish(self) -> Run | None:
        """Apply the verifier (sync or async), end the root span, store and return the Run."""
        verdict = await _safe_verdict(self.verify, self._pre_outcome())
        return self._complete(verdict)

    def finish_sync(self) -> Run | None:
        """:meth:`finish` for sync code (an async verifier runs on a private event loop)."""
        outcome = self._pre_outcome()
        verdict: Verdict | None
        if self.verify is None:
            verdict = None
        else:
            verdict = _run_coroutine_sync(_safe_verdict(self.verify, outcome))
        return self._complete(verdict)

    def _pre_outcome(self) -> Outcome:
        stop = self.stop or ("error" if self.error is not None else "normal")
        return Outcome(status="unknown", final_answer=self.final_answer, stop=stop, reason=self.reason)  # type: ignore[arg-type]

    @never_raise()
    def _complete(self, verdict: Verdict | None) -> Run | None:
        if self.run is not None:
            return self.run
        stop = self.stop or ("error" if self.error is not None else "normal")
        self.outcome = Outcome.decide(final_answer=self.final_answer, stop=stop, verdict=verdict, reason=self.reason)  # type: ignore[arg-type]
        end_ns = self.end_ns or _now_ns()
        recording = self.recording() if self.tracing.config.record else None
        fields: dict[str, Any] = {
            "trace_id": self.trace_id,
            "framework": self.framework,
            "name": self.name,
            "task": self.task,
            "agents": tuple(self.agents),
            "started_at": ns_to_datetime(self.start_ns),
            "ended_at": ns_to_datetime(end_ns),
            "outcome": self.outcome,
            "metadata": self.metadata,
            "recording": recording,
        }
        error = None
        if self.outcome.status == "failure":
            error = self.outcome.reason or "run failed"
        self.tracing.emitter.end_root(
            self.root_span,
            semconv.run_attributes(
                run_id=self.run_id,
                framework=self.framework,
                name=self.name,
                task=self.task,
                agents=tuple(self.agents),
                outcome=self.outcome,
                metadata=self.metadata,
            ),
            error=error,
            end_time_ns=None if self.keep_root_open else end_ns,
        )
        self.run = self.tracing.collector.finish_run(self.run_id, **fields)
        if self.watch is not None:
            try:
                self.watch.run_finished(self)
            except Exception:
                logger.warning("causaltrace: the watch of run %s failed", self.run_id, exc_info=True)
        return self.run


async def _safe_verdict(verify: Any, outcome: Outcome) -> Verdict | None:
    if verify is None:
        return None
    try:
        return await verdict_of(verify, outcome)
    except Exception as exc:
        logger.warning("causaltrace: the verifier raised %s: %s", type(exc).__name__, exc)
        return Verdict(passed=False, reason=f"verifier raised {type(exc).__name__}: {exc}")


def _normalise_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


async def verdict_of(verify: Any, outcome: Outcome) -> Verdict:
    """Apply a verifier (ARCHITECTURE "Verifier"): a callable returning Verdict / bool (sync or async), or a str
    meaning "the final answer contains this text" (whitespace- and case-normalised)."""
    if isinstance(verify, str):
        answer = outcome.final_answer or ""
        passed = _normalise_text(verify) in _normalise_text(answer)
        reason = "" if passed else f"final answer does not contain {verify!r}"
        return Verdict(passed=passed, reason=reason)
    if not callable(verify):
        raise TypeError(f"verify must be a callable or a str, not {type(verify).__name__}")
    result = verify(outcome)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, Verdict):
        return result
    if isinstance(result, bool):
        return Verdict(passed=result, reason="" if result else "verifier returned False")
    raise TypeError(f"a verifier must return a Verdict or a bool, not {type(result).__name__}")


def _run_coroutine_sync(coro: Awaitable[Any]) -> Any:
    """Run a coroutine from sync code, even when this thread already has a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    result: list[Any] = []

    def target() -> None:
        result.append(asyncio.run(coro))  # type: ignore[arg-type]

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join()
    return result[0] if result else None


def current_run() -> RunContext | None:
    """The live run of this context (a ``causaltrace.run()`` block, or an adapter-owned run), if any."""
    return _CURRENT_RUN.get()


#: Set by ``causaltrace.watch``: maps the team / agent object a run starts on to its watch (or None).
_WATCH_LOOKUP: Callable[[Any], Any] | None = None


def set_watch_lookup(lookup: Callable[[Any], Any] | None) -> None:
    """Install the function that finds the watch of a team / agent object (``causaltrace.watch`` does)."""
    global _WATCH_LOOKUP
    _WATCH_LOOKUP = lookup


def attach_run(
    *, framework: str, task: str | None = None, name: str | None = None, source: Any = None
) -> tuple[RunContext, bool]:
    """Join the current run, or start one. Returns ``(ctx, owned)``; an owned run must be finished by the caller.

    ``source`` is the team / agent object the framework run started on: when it is watched
    (:func:`causaltrace.watch`), the new run gets the watch's verifier and its after-run diagnosis. The caller makes
    an owned run current with :func:`run_scope`.
    """
    ctx = _CURRENT_RUN.get()
    if ctx is not None:
        ctx.set_framework(framework, task)
        return ctx, False
    watch = None
    if source is not None and _WATCH_LOOKUP is not None:
        try:
            watch = _WATCH_LOOKUP(source)
        except Exception:
            logger.warning("causaltrace: watch lookup failed", exc_info=True)
    ctx = RunContext(
        tracing=get_tracing(),
        framework=framework,
        task=task,
        name=name,
        verify=getattr(watch, "verify", None),
    )
    ctx.watch = watch
    ctx.keep_root_open = bool(watch is not None and getattr(watch, "diagnose", False))
    return ctx, True


def run_scope(ctx: RunContext, *also: tuple[contextvars.ContextVar[Any], Any], step: StepHandle | None = None) -> Scope:
    """A scope making ``ctx`` the current run and its root span the current span (or, with ``step``, that step and
    its span); ``also`` are more (context variable, value) pairs the caller sets in the same scope."""
    if step is not None:
        span = step.span.as_current() if step.span is not None else None
        return Scope(((_CURRENT_RUN, ctx), (_CURRENT_STEP, step), *also), span)
    return Scope(((_CURRENT_RUN, ctx), *also), ctx.root_span)


# --------------------------------------------------------------------------------------------- run marking


class RunHandle:
    """What ``causaltrace.run()`` yields: ``run_id`` at once; ``run`` (the Run) and ``outcome`` after exit."""

    def __init__(self, *, task: str | None, verify: Any, name: str | None, metadata: Mapping[str, Any] | None) -> None:
        self._task = task
        self._verify = verify
        self._name = name
        self._metadata = dict(metadata or {})
        self.ctx: RunContext | None = None
        self._scope: Any = None
        self.run_id: str = uuid.uuid4().hex

    @property
    def run(self) -> Run | None:
        """The finished Run (None while the block is running)."""
        return self.ctx.run if self.ctx is not None else None

    @property
    def outcome(self) -> Outcome | None:
        """The run's Outcome (None while the block is running)."""
        return self.ctx.outcome if self.ctx is not None else None

    def report(self, *, final_answer: str | None = None, stop: str = "normal") -> None:
        """For code that no adapter instruments: report the final answer of this run yourself."""
        if self.ctx is not None:
            self.ctx.report_end(final_answer=final_answer, stop=stop)

    def _enter(self) -> RunHandle:
        self.ctx = RunContext(
            tracing=get_tracing(),
            task=self._task,
            name=self._name,
            verify=self._verify,
            run_id=self.run_id,
            metadata=self._metadata,
        )
        self._scope = run_scope(self.ctx)
        self._scope.__enter__()
        return self

    def _before_exit(self, exc: BaseException | None) -> None:
        assert self.ctx is not None
        self._scope.__exit__(None, None, None)
        if exc is not None and self.ctx.error is None:
            stop = "limit" if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)) else "error"
            self.ctx.report_end(final_answer=self.ctx.final_answer, stop=stop, error=exc)
        elif self.ctx.end_ns is None:
            self.ctx.report_end(final_answer=self.ctx.final_answer, stop=self.ctx.stop or "normal")

    def __enter__(self) -> RunHandle:
        return self._enter()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._before_exit(exc)
        assert self.ctx is not None
        self.ctx.finish_sync()

    async def __aenter__(self) -> RunHandle:
        return self._enter()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._before_exit(exc)
        assert self.ctx is not None
        try:
            await self.ctx.finish()
        except Exception:
            logger.warning("causaltrace: finishing run %s failed", self.run_id, exc_info=True)


def run(
    task: str | None = None,
    verify: Callable[[Outcome], Any] | str | None = None,
    name: str | None = None,
    *,
    metadata: Mapping[str, Any] | None = None,
) -> RunHandle:
    """Mark a run: everything the instrumented frameworks do inside the block is ONE run (one trace).

    Works as ``with`` (smolagents is sync) and ``async with`` (AutoGen is async). ``verify`` decides success: a
    callable ``(Outcome) -> Verdict | bool`` (sync or async) or a str the final answer must contain. The user's
    exceptions pass through unchanged.

    Example:
        >>> import causaltrace
        >>> with causaltrace.run(task="add 2 and 3", verify="5") as handle:
        ...     handle.report(final_answer="5")
        >>> handle.outcome.status
        'success'
    """
    return RunHandle(task=task, verify=verify, name=name, metadata=metadata)
