"""Run marking: the state of a live run, ``causaltrace.run()`` and its handle, and how adapters join or start runs.

An adapter (AutoGen, smolagents) does four things through this module:

1. ``ctx, owned = attach_run(framework=..., task=...)`` when a top-level team/agent run starts: it joins the run a
   user opened with :func:`run`, or starts a run of its own (``owned=True``) that it makes current with
   ``with run_scope(ctx): ...`` around the framework call (so its root span is the parent of everything inside);
2. ``h = ctx.start_step(kind, agent=..., parent=..., depends_on=[Dep(step_id, kind)…], …)`` when a step starts
   (the per-run ``index`` is assigned here; a dependency is a ``Dep`` or a plain ``(step_id, kind)`` tuple, which
   the adapters' hooks write: a NamedTuple's constructor is a Python call), then ``h.end(status=…, outputs=…)`` when its outcome is known
   (:mod:`causaltrace.instrumentation.steps`);
3. ``call = ctx.begin_call(agent_key, "llm"|"tool", request)`` before an LLM / tool call and
   ``call.finish(response)`` after it, to record it for replay (:mod:`causaltrace.instrumentation.calls`);
4. ``ctx.report_end(final_answer=..., stop=..., error=...)`` when the framework run ends, and — if it owns the run —
   ``await ctx.finish()`` / ``ctx.finish_sync()`` to apply the verifier, end the root span and store the Run.

Every method here is safe to call from wrappers: our own failures are logged and swallowed (``never_raise``),
and steps may start and end on several threads (smolagents' parallel tool calls). ``causaltrace.run``,
``causaltrace.RunHandle`` and ``causaltrace.current_run`` are this module's :func:`run`, :class:`RunHandle` and
:func:`current_run`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import timedelta
from time import time_ns
from typing import Any

from opentelemetry.trace import Span, SpanContext

from causaltrace import semconv
from causaltrace.collector.handoff import Done
from causaltrace.collector.live import ns_to_datetime
from causaltrace.instrumentation._emitter import internal_error, never_raise
from causaltrace.instrumentation.calls import CallHandle, CallLog
from causaltrace.instrumentation.roster import ROSTER_KEY
from causaltrace.instrumentation.scope import Scope
from causaltrace.instrumentation.steps import CURRENT_STEP, Dep, StepHandle, usage_of
from causaltrace.instrumentation.tracing import EPOCH, Tracing, get_tracing, now_ns
from causaltrace.schema import (
    DEPENDENCY_KINDS,
    STEP_KINDS,
    Dependency,
    Outcome,
    Recording,
    Run,
    Step,
    StepError,
    TokenUsage,
    Verdict,
    utf8_safe,
)

__all__ = [
    "CURRENT_RUN",
    "RunContext",
    "RunHandle",
    "attach_run",
    "current_run",
    "run",
    "run_scope",
    "set_watch_lookup",
    "verdict_of",
]

logger = logging.getLogger("causaltrace")

_CURRENT_RUN: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("causaltrace_run", default=None)
#: The live run of this context (what :func:`current_run` reads): the adapters' hooks read it directly, one call
#: less on every wrapped framework call.
CURRENT_RUN = _CURRENT_RUN
_DEPENDENCY_KINDS = frozenset(DEPENDENCY_KINDS)
_STEP_KINDS = frozenset(STEP_KINDS)
_RESULT_DEPENDENCY_BY_KIND = semconv.RESULT_DEPENDENCY_BY_KIND
#: What :meth:`RunContext.new_dependencies` builds a Dependency with (``steps.construct``'s work, inline).
_new_object = object.__new__
_set_attr = object.__setattr__
_DEPENDENCY_FIELDS: set[str] = set(Dependency.model_fields)


#: How long the end of a run waits for its store write; how long its start waits for its begin row (the crash record
#: of a process killed right after its first steps; the first run of a process also pays the store's opening).
_FINISH_WAIT_S = 10.0
_BEGIN_WAIT_S = 2.0


def _safe_text(text: Any) -> Any:
    """A run's task, name or agent as valid UTF-8 (the store keeps them in columns; :func:`utf8_safe`)."""
    return utf8_safe(text) if isinstance(text, str) and not text.isascii() else text


def new_run_id() -> str:
    """A fresh run id: 32 hex digits from ``os.urandom`` (never ``uuid.uuid4``, which test suites patch)."""
    return os.urandom(16).hex()


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
        self.run_id = run_id or new_run_id()
        self.framework = framework
        self.task = _safe_text(task)
        self.name = _safe_text(name)
        self.verify = verify
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.agents: list[str] = []
        #: What each agent can do (:mod:`.roster`), stored with the run for the diagnosis, never exported.
        self.roster: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._next_index = 0
        self._spans: dict[str, SpanContext] = {}  # span contexts only: ended spans are not kept alive
        self._indexes: dict[str, int] = {}
        #: Steps started and maybe not ended yet (ended ones pruned now and then), and what adapters asked to run at
        #: the run's end (:meth:`at_end`): a run closes whatever the framework left open (issue 21 item 16).
        self._open: list[StepHandle] = []
        self._at_end: list[Callable[[], Any]] = []
        #: Per adapter (its framework name), what it keeps about this run (the AutoGen wing's RunState): on the
        #: run, so its hooks find it without a lookup table of their own; it goes with the run.
        self.adapters: dict[str, Any] = {}
        #: The LLM and tool calls recorded in this run (:meth:`begin_call`).
        self.calls = CallLog(self.run_id)
        self.start_ns = now_ns()
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
            semconv.run_attributes(run_id=self.run_id, framework=framework, task=self.task, name=self.name),
            start_time_ns=self.start_ns,
        )
        ctx = self.root_span.get_span_context() if self.root_span is not None else None
        self.trace_id = f"{ctx.trace_id:032x}" if ctx is not None and ctx.is_valid else None
        if ctx is not None and ctx.is_valid:  # where a later annotation of the run's verdict hangs its span
            self.metadata[semconv.RUN_ROOT_SPAN_ID] = f"{ctx.span_id:016x}"
        #: Set once the run's begin row is committed (the crash record; ``causaltrace.run()`` waits for it, bounded).
        self.begun: Done | None = tracing.collector.begin_run(
            self.run_id,
            framework=framework,
            task=self.task,
            name=self.name,
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
            self.task = _safe_text(task)
        if self.root_span is not None and self.root_span.is_recording():
            attrs = semconv.run_attributes(run_id=self.run_id, framework=self.framework, task=self.task, name=self.name)
            self.root_span.set_attributes(
                {k: v for k, v in attrs.items() if k in (semconv.RUN_FRAMEWORK, semconv.RUN_TASK)}
            )

    @never_raise()
    def add_agent(self, name: str) -> None:
        """Note a participant's name (kept in ``Run.agents`` in first-seen order)."""
        with self._lock:
            name = _safe_text(name)
            if name and name not in self.agents:
                self.agents.append(name)

    @never_raise()
    def add_roster(self, roster: Mapping[str, Mapping[str, Any]]) -> None:
        """Note what agents can do (:mod:`causaltrace.instrumentation.roster`); the first entry of a name stays."""
        with self._lock:
            for name, entry in roster.items():
                self.roster.setdefault(name, dict(entry))

    # -- steps ---------------------------------------------------------------------------------------------------

    def dependencies_of(
        self, deps: Iterable[Dep | Dependency], *, consumer_index: int, existing: tuple[Dependency, ...]
    ) -> list[Dependency]:
        """The new Dependencies of the step at ``consumer_index``: each (producer, kind) once, only on an earlier
        step of this run and of a known kind (the rest is dropped and logged)."""
        return self.new_dependencies(deps, consumer_index, existing)[0]

    def new_dependencies(
        self, deps: Iterable[Dep | tuple[str, str] | Dependency], consumer_index: int, existing: tuple[Dependency, ...]
    ) -> tuple[list[Dependency], list[tuple[SpanContext, str, str]]]:
        """:meth:`dependencies_of` and the :meth:`links_of` of what it returns, in one pass (every step with
        dependencies asks for both)."""
        seen = {(d.step_id, d.kind) for d in existing} if existing else set()
        out: list[Dependency] = []
        links: list[tuple[SpanContext, str, str]] = []
        indexes, spans = self._indexes, self._spans
        for dep in deps:
            step_id, kind = (dep.step_id, dep.kind) if isinstance(dep, Dependency) else dep
            producer_index = indexes.get(step_id)
            if producer_index is None or producer_index >= consumer_index:
                logger.debug("causaltrace: dependency on %s (%s) dropped: not an earlier step", step_id, kind)
                continue
            if (step_id, kind) in seen:
                continue
            seen.add((step_id, kind))
            if kind not in _DEPENDENCY_KINDS:
                logger.warning("causaltrace: unknown dependency kind %r dropped", kind)
                continue
            # steps.construct(Dependency, …), inline: one Python call less per dependency
            made = _new_object(Dependency)
            _set_attr(made, "__dict__", {"step_id": step_id, "kind": kind})
            _set_attr(made, "__pydantic_fields_set__", _DEPENDENCY_FIELDS)
            _set_attr(made, "__pydantic_extra__", None)
            _set_attr(made, "__pydantic_private__", None)
            out.append(made)
            span_ctx = spans.get(step_id)
            if span_ctx is not None:
                links.append((span_ctx, kind, step_id))
        return out, links

    def links_of(self, deps: Iterable[Dependency]) -> list[tuple[SpanContext, str, str]]:
        """(producer span context, kind, producer id) of each dependency whose producer has a span."""
        out = []
        for dep in deps:
            span_ctx = self._spans.get(dep.step_id)
            if span_ctx is not None:
                out.append((span_ctx, dep.kind, dep.step_id))
        return out

    def start_step(
        self, kind: str, *, agent: str = "", parent: str | StepHandle | None = None,
        depends_on: Iterable[Dep | tuple[str, str] | Dependency] = (), content: str = "",
        inputs: Mapping[str, Any] | None = None, outputs: Mapping[str, Any] | None = None, model: str | None = None,
        tool_name: str | None = None, arguments: Mapping[str, Any] | None = None, call_id: str | None = None,
        usage: TokenUsage | tuple[int, int] | None = None, metadata: Mapping[str, Any] | None = None,
    ) -> StepHandle | None:
        """Start a step; its index is the next in this run. ``parent`` defaults to the current step, if any."""
        try:
            if parent is None:
                cur = CURRENT_STEP.get()
                parent = cur if cur is not None and cur.ctx is self else None
            parent_id = parent.step_id if isinstance(parent, StepHandle) else parent
            if isinstance(usage, tuple):
                usage = usage_of(*usage)
            start_ns = time_ns() // 1000 * 1000  # tracing.now_ns, inline (one call less per step)
            deps, links, joins = [], [], None  # joins: a result's span is its first call's of the result kind
            with self._lock:
                index = self._next_index
                self._next_index += 1
                step_id = f"{self.run_id}/{index}"
                indexes, spans = self._indexes, self._spans
                indexes[step_id] = index
                if parent_id is not None and parent_id not in indexes:
                    parent_id = None
                if depends_on:  # new_dependencies(depends_on, index, ()), inline: one call less per step with any
                    seen: set[tuple[str, str]] = set()
                    result_of = _RESULT_DEPENDENCY_BY_KIND[kind] if kind in _RESULT_DEPENDENCY_BY_KIND else None
                for dep in depends_on:
                    producer, dep_kind = (dep.step_id, dep.kind) if isinstance(dep, Dependency) else dep
                    producer_index = indexes.get(producer)
                    if producer_index is None or producer_index >= index:
                        logger.debug("causaltrace: dependency on %s (%s) dropped: not an earlier step", producer, dep_kind)
                        continue
                    if (producer, dep_kind) in seen:
                        continue
                    seen.add((producer, dep_kind))
                    if dep_kind not in _DEPENDENCY_KINDS:
                        logger.warning("causaltrace: unknown dependency kind %r dropped", dep_kind)
                        continue
                    made = _new_object(Dependency)  # steps.construct(Dependency, …), inline
                    _set_attr(made, "__dict__", {"step_id": producer, "kind": dep_kind})
                    _set_attr(made, "__pydantic_fields_set__", _DEPENDENCY_FIELDS)
                    _set_attr(made, "__pydantic_extra__", None)
                    _set_attr(made, "__pydantic_private__", None)
                    deps.append(made)
                    if joins is None and dep_kind == result_of:
                        joins = producer
                    span_ctx = spans.get(producer)
                    if span_ctx is not None:
                        links.append((span_ctx, dep_kind, producer))
                parent_span: Span | SpanContext | None = spans.get(parent_id) if parent_id else self.root_span
                if agent and agent not in self.agents:  # _safe_text, inline
                    self.agents.append(utf8_safe(agent) if isinstance(agent, str) and not agent.isascii() else agent)
            fields: dict[str, Any] = {
                "step_id": step_id, "run_id": self.run_id, "index": index, "kind": kind, "agent": agent,
                "parent_step_id": parent_id, "depends_on": tuple(deps), "content": content,
                "inputs": dict(inputs) if inputs else {}, "outputs": dict(outputs) if outputs else {}, "model": model,
                "tool_name": tool_name, "arguments": dict(arguments) if arguments is not None else None,
                "call_id": call_id, "usage": usage, "metadata": dict(metadata) if metadata else {},
                "started_at": EPOCH + timedelta(microseconds=start_ns // 1000),  # ns_to_datetime, inline
            }
            if kind not in _STEP_KINDS:
                raise ValueError(f"unknown step kind {kind!r}")
            span = self.tracing.emitter.start_step_span(
                {semconv.STEP_ID: step_id, semconv.STEP_KIND: kind, semconv.STEP_INDEX: index, semconv.RUN_ID: self.run_id},
                parent=parent_span if parent_span is not None else self.root_span,
                links=links, start_time_ns=start_ns, joins=joins,
            )
            handle = StepHandle(self, fields, span, start_ns)
            with self._lock:
                if span is not None:
                    spans[step_id] = span.context
                if len(self._open) > 256:
                    self._open = [h for h in self._open if not h.ended]
                self._open.append(handle)
            return handle
        except Exception:
            internal_error("RunContext.start_step")
            return None

    @never_raise()
    def set_root_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Span-only attributes for the run's root span (an adapter's team id and participants…); nothing when the
        root does not record (a replay, an unsampled run)."""
        root = self.root_span
        if root is not None and root.is_recording() and attributes:
            root.set_attributes(dict(attributes))

    def at_end(self, close: Callable[[], Any]) -> None:
        """Run ``close`` when this run ends, before its Run is assembled (an adapter ends a turn the framework left
        open with its own rules); whatever is still open after that ends as cancelled."""
        try:  # never_raise's work in the body (every agent turn asks): no wrapper frame
            with self._lock:
                self._at_end.append(close)
        except Exception:
            internal_error("RunContext.at_end")

    def _close_open(self) -> None:
        """End what is still open at the run's end: adapters' closers first, then every open step, children first."""
        with self._lock:
            closers, self._at_end = self._at_end, []
        for close in reversed(closers):
            try:
                close()
            except Exception:
                logger.warning("causaltrace: closing an open step of run %s failed", self.run_id, exc_info=True)
        with self._lock:
            still_open, self._open = [h for h in self._open if not h.ended], []
        for handle in sorted(still_open, key=lambda h: h.index, reverse=True):
            handle.end(error=StepError(type="Cancelled", message="the run ended before this step finished"))

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

    def reserve_ordinals(self, agent_key: str, kind: str, count: int) -> list[int] | None:
        """Reserve ``count`` consecutive ordinals (tool calls numbered in the model's response order); None when
        that failed."""
        try:  # never_raise's work in the body (every tool call): no wrapper frame
            return self.calls.reserve_ordinals(agent_key, kind, count)
        except Exception:
            internal_error("RunContext.reserve_ordinals")
            return None

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
        try:
            if not self.tracing.config.record:
                return None
            return self.calls.begin(
                agent_key, kind, request, ordinal=ordinal, settings=settings, step_id=step_id, call_id_pattern=call_id_pattern
            )
        except Exception:
            internal_error("RunContext.begin_call")
            return None

    def recording(self) -> Recording:
        """The calls recorded so far, in start order."""
        return self.calls.recording()

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
        self.end_ns = now_ns()

    async def finish(self) -> Run | None:
        """Apply the verifier (sync or async), end the root span, store and return the Run."""
        verdict = await _safe_verdict(self.verify, self._pre_outcome())
        # the store write is awaited ON the event loop, bounded: the writer completes a future of the loop when the
        # run is written, so a locked store never stalls the user's coroutines and no executor thread carries the wait
        stored = Done() if self.run is None and self.tracing.config.store else None
        run = self._complete(verdict, stored=stored)
        if stored is not None and self.run is not None:  # (not when the end failed before it was handed over)
            await self.tracing.collector.wait_stored(stored, self.run_id, _FINISH_WAIT_S)
        return run

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
    def _complete(self, verdict: Verdict | None, *, stored: Done | None = None) -> Run | None:
        """End the run: its outcome, root span and Run, handed to the collector — which waits for the store write up
        to ``_FINISH_WAIT_S``, unless ``stored`` is given (it is set when the write is done; the caller awaits it)."""
        if self.run is not None:
            return self.run
        self._close_open()
        stop = self.stop or ("error" if self.error is not None else "normal")
        self.outcome = Outcome.decide(final_answer=self.final_answer, stop=stop, verdict=verdict, reason=self.reason)  # type: ignore[arg-type]
        end_ns = self.end_ns or now_ns()
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
            # the roster goes to the store only: the root span's attributes below are built from self.metadata
            "metadata": {**self.metadata, ROSTER_KEY: self.roster} if self.roster else self.metadata,
            "recording": recording,
        }
        error = None
        if self.outcome.status == "failure":
            error = self.outcome.reason or "run failed"
        self.tracing.emitter.flush_pending(self.run_id)
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
                cut_at=self.tracing.emitter.cut_at(),
            ),
            error=error,
            final_answer=self.outcome.final_answer,
            end_time_ns=None if self.keep_root_open else end_ns,
            recording=recording,
        )
        self.run = self.tracing.collector.finish_run(self.run_id, wait_s=_FINISH_WAIT_S, done=stored, **fields)
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


def _takes_text(verify: Any) -> bool:
    """Whether a verifier's first parameter is annotated ``str``: it is then given the final answer (``""`` when
    there is none) instead of the Outcome, so ``def check(answer: str) -> bool`` means what it says."""
    try:
        params = list(inspect.signature(verify).parameters.values())
    except (TypeError, ValueError):  # a builtin or a callable without a signature: given the Outcome
        return False
    if not params or params[0].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        return False
    annotation = params[0].annotation
    return annotation is str or annotation in ("str", "builtins.str")  # a string under postponed annotations


async def verdict_of(verify: Any, outcome: Outcome) -> Verdict:
    """Apply a verifier (ARCHITECTURE "Verifier"): a callable returning Verdict / bool (sync or async), or a str
    meaning "the final answer contains this text" (whitespace- and case-normalised). A callable whose first
    parameter is annotated ``str`` receives the final answer; any other callable receives the Outcome."""
    if isinstance(verify, str):
        answer = outcome.final_answer or ""
        passed = _normalise_text(verify) in _normalise_text(answer)
        reason = "" if passed else f"final answer does not contain {verify!r}"
        return Verdict(passed=passed, reason=reason)
    if not callable(verify):
        raise TypeError(f"verify must be a callable or a str, not {type(verify).__name__}")
    result = verify(outcome.final_answer or "") if _takes_text(verify) else verify(outcome)
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
        return Scope(((_CURRENT_RUN, ctx), (CURRENT_STEP, step), *also), span)
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
        self.run_id: str = new_run_id()

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
        try:
            self._open()
        except Exception:  # run marking never raises into user code: the block runs untraced
            logger.warning("causaltrace: starting run %s failed; the block runs untraced", self.run_id, exc_info=True)
            self.ctx = None
        return self

    def _open(self) -> None:
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

    @never_raise(default=False)
    def _before_exit(self, exc: BaseException | None) -> bool:
        """Leave the run's scope and report how the block ended; False when there is no run to finish."""
        if self.ctx is None:
            return False
        self._scope.__exit__(None, None, None)
        if exc is not None and self.ctx.error is None:
            stop = "limit" if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)) else "error"
            self.ctx.report_end(final_answer=self.ctx.final_answer, stop=stop, error=exc)
        elif self.ctx.end_ns is None:
            self.ctx.report_end(final_answer=self.ctx.final_answer, stop=self.ctx.stop or "normal")
        return True

    def __enter__(self) -> RunHandle:
        self._enter()
        if self.ctx is not None and self.ctx.begun is not None and self.ctx.tracing.config.store:
            self.ctx.begun.wait(_BEGIN_WAIT_S)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._before_exit(exc) and self.ctx is not None:
            self.ctx.finish_sync()

    async def __aenter__(self) -> RunHandle:
        self._enter()
        if self.ctx is not None and self.ctx.begun is not None and self.ctx.tracing.config.store:
            try:  # on the event loop, never blocking it (item 9 of issue 21): the writer completes a future of it
                await self.ctx.begun.wait_async(_BEGIN_WAIT_S)
            except Exception:
                logger.debug("causaltrace: waiting for the begin row of %s failed", self.run_id, exc_info=True)
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if not self._before_exit(exc) or self.ctx is None:
            return
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
