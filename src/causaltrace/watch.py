"""On failure, automatically: ``causaltrace.watch(team_or_agent, verify=...)`` (issue 8; ARCHITECTURE decision 5).

Every run of a watched team / agent is traced with the watch's verifier. When its outcome is a failure (an
exception, the verifier says no, a step / message limit reached without an answer) the diagnosis — and, when a
factory is given and ``repair=True``, the repair by replay — runs right after, in a background worker, so the next
run is neither blocked nor slowed. Results are stored, logged, passed to ``on_diagnosis``, and put on the run's
root span (an event plus ``causaltrace.diagnosis.*`` attributes) so they show in Jaeger:

* the root span stays open until the diagnosis is done or ``bound_s`` passes (default 30 s), then ends with the
  run's REAL end time;
* past the bound, the diagnosis is emitted later as a ``causaltrace.diagnosis`` span in the same trace, linked to
  the decisive step's span;
* with a backend configured (``annotate``), the run's verdict is annotated into its trace as ``diagnose`` does it
  (:mod:`causaltrace.instrumentation.annotate`).

Usage::

    watcher = causaltrace.watch(team, verify="42", on_diagnosis=print)
    await team.run(task="What is 17 + 25?")   # a failure is diagnosed in the background
    watcher.wait()                            # (only needed before the process exits)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry.trace import Link, SpanContext, TraceFlags

from causaltrace import semconv
from causaltrace.instrumentation.runs import RunContext, set_watch_lookup
from causaltrace.protocols import RunStore
from causaltrace.schema import Diagnosis, Run

__all__ = ["Watch", "watch"]

logger = logging.getLogger("causaltrace")

_WATCHES: weakref.WeakKeyDictionary[Any, Watch] = weakref.WeakKeyDictionary()
_BY_ID: dict[int, Watch] = {}  # objects that cannot be weakly referenced


def _run_store(ctx: RunContext) -> AbstractContextManager[RunStore | None]:
    """The store the run's set-up writes to, opened for one diagnosis (None when the set-up stores nothing): the
    diagnosis, and a repair's diagnosis and pair, go where the run went."""
    if not ctx.tracing.config.store:
        return nullcontext(None)
    from causaltrace.collector.store import Store

    return Store(ctx.tracing.config.resolved_db_path())


def _lookup(source: Any) -> Watch | None:
    try:
        return _WATCHES.get(source)
    except TypeError:
        return _BY_ID.get(id(source))


class Watch:
    """The watch of one team / agent; see :func:`watch`."""

    def __init__(
        self,
        target: Any,
        *,
        verify: Any,
        factory: Callable[[], Any] | None,
        diagnose: bool,
        repair: bool,
        model: str | None,
        method: str,
        on_diagnosis: Callable[[Diagnosis, Run], Any] | None,
        bound_s: float,
        annotate: bool | None = None,
    ) -> None:
        self.annotate = annotate
        self.target_type = type(target).__name__
        self.verify = verify
        self.factory = factory
        self.diagnose = diagnose
        self.repair = repair
        self.model = model
        self.method = method
        self.on_diagnosis = on_diagnosis
        self.bound_s = bound_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="causaltrace-watch")
        self._futures: list[Future[Any]] = []
        self._lock = threading.Lock()
        self.diagnoses: list[Diagnosis] = []

    # called by the runtime when a run of the watched object has finished (its Run is assembled and stored)
    def run_finished(self, ctx: RunContext) -> None:
        run = ctx.run
        if run is None:
            return
        if not self.diagnose or run.outcome.status != "failure":
            self._end_root(ctx)
            return
        done = threading.Event()
        future = self._pool.submit(self._diagnose, ctx, run, done)
        with self._lock:
            self._futures.append(future)
        timer = threading.Timer(self.bound_s, self._past_bound, args=(ctx, done))
        timer.daemon = True
        timer.start()

    def _diagnose(self, ctx: RunContext, run: Run, done: threading.Event) -> Diagnosis | None:
        diagnosis: Diagnosis | None = None
        try:
            from causaltrace.attribution.engine import diagnose as diagnose_async

            diagnosis = asyncio.run(diagnose_async(run, method=self.method, model=self.model, store=False))
            with _run_store(ctx) as store:
                if self.repair and self.factory is not None and run.recording is not None:
                    from causaltrace.replay.repair import repair

                    kept: RunStore | bool = store if store is not None else False
                    result = asyncio.run(repair(run, self.factory, self.verify, diagnosis=diagnosis, store=kept))
                    diagnosis = result.diagnosis
                elif store is not None:
                    store.save_diagnosis(diagnosis)
                verdict = store.verdict(run.run_id) if store is not None else None
            self.diagnoses.append(diagnosis)
            logger.info(
                "causaltrace: run %s failed; decisive step #%s by %s (%s)",
                run.run_id, diagnosis.decisive_step_index, diagnosis.agent, diagnosis.verified_by,
            )
            if self.on_diagnosis is not None:
                self.on_diagnosis(diagnosis, run)
            self._annotate(run, verdict or diagnosis)
        except Exception:
            logger.warning("causaltrace: diagnosing run %s failed", run.run_id, exc_info=True)
        finally:
            with self._lock:
                first = not done.is_set()
                done.set()
            if first:
                self._annotate_root(ctx, diagnosis)
                self._end_root(ctx)
            elif diagnosis is not None:
                self._diagnosis_span(ctx, diagnosis)
        return diagnosis

    def _annotate(self, run: Run, verdict: Diagnosis) -> None:
        """The run's verdict into its trace in the user's backend (issue 33 item 5), when ``annotate`` asks or, by
        default, when one is configured; a failure is one warning line in the log."""
        from causaltrace.instrumentation.annotate import annotate_verdict, backend_configured

        if self.annotate is False or (self.annotate is None and not backend_configured()):
            return
        from causaltrace.attribution.stages.confidence import is_uncertain

        done = annotate_verdict(run, verdict, uncertain=is_uncertain(verdict))
        if done.warning is not None:
            logger.warning("causaltrace: run %s: %s", run.run_id, done.warning)

    def _past_bound(self, ctx: RunContext, done: threading.Event) -> None:
        with self._lock:
            if done.is_set():
                return
            done.set()
        logger.info("causaltrace: diagnosis of run %s exceeds %.0f s; ending its root span", ctx.run_id, self.bound_s)
        self._end_root(ctx)

    @staticmethod
    def _annotate_root(ctx: RunContext, diagnosis: Diagnosis | None) -> None:
        span = ctx.root_span
        if span is None or diagnosis is None or not span.is_recording():
            return
        from causaltrace.instrumentation.annotate import diagnosis_attributes

        attrs = diagnosis_attributes(diagnosis)
        span.set_attributes(attrs)
        span.add_event("causaltrace.diagnosis", {**attrs, "causaltrace.diagnosis.explanation": diagnosis.explanation[:4000]})

    @staticmethod
    def _end_root(ctx: RunContext) -> None:
        span = ctx.root_span
        if span is not None and ctx.keep_root_open and span.is_recording():
            span.end(end_time=ctx.end_ns)

    @staticmethod
    def _diagnosis_span(ctx: RunContext, diagnosis: Diagnosis) -> None:
        """Past the bound: the diagnosis as its own span in the run's trace, linked to the decisive step's span."""
        run = ctx.run
        root = ctx.root_span
        if run is None or root is None:
            return
        links = []
        if diagnosis.decisive_step_id:
            step = run.step(diagnosis.decisive_step_id)
            root_ctx = root.get_span_context()
            if step.span_id and root_ctx.is_valid:
                target = SpanContext(root_ctx.trace_id, int(step.span_id, 16), False, TraceFlags(TraceFlags.SAMPLED))
                links.append(Link(target, {semconv.DEPENDENCY_KIND: "diagnosis"}))
        from opentelemetry import trace

        from causaltrace.instrumentation.annotate import diagnosis_attributes

        span = ctx.tracing.tracer.start_span(
            "causaltrace.diagnosis",
            context=trace.set_span_in_context(root),
            links=links,
            attributes=diagnosis_attributes(diagnosis),
        )
        span.end()

    def wait(self, timeout_s: float | None = None) -> list[Diagnosis]:
        """Wait for the background diagnoses started so far; returns every diagnosis this watch produced."""
        with self._lock:
            futures = list(self._futures)
        for future in futures:
            future.result(timeout=timeout_s)
        return list(self.diagnoses)

    def close(self) -> None:
        """Stop watching (pending diagnoses still finish)."""
        unwatch_target = [k for k, v in list(_WATCHES.items()) if v is self]
        for key in unwatch_target:
            _WATCHES.pop(key, None)
        for key, value in list(_BY_ID.items()):
            if value is self:
                _BY_ID.pop(key, None)
        self._pool.shutdown(wait=True)


def watch(
    team_or_agent: Any,
    verify: Any = None,
    factory: Callable[[], Any] | None = None,
    diagnose: bool = True,
    repair: bool = False,
    model: str | None = None,
    on_diagnosis: Callable[[Diagnosis, Run], Any] | None = None,
    *,
    method: str = "graph",
    bound_s: float = 30.0,
    annotate: bool | None = None,
) -> Watch:
    """Trace every run of ``team_or_agent``; diagnose (and repair) failed runs in the background.

    Instruments the installed frameworks if that was not done yet. ``verify`` is the verifier of every run (a
    callable on the Outcome or an expected answer); ``factory`` is the zero-argument build function repair replays
    with (``repair=True``); ``model`` a litellm model for the LLM stages (without one, the deterministic stages run).
    ``annotate`` puts each failed run's verdict into its trace (a ``decisive: #N …`` span, a Phoenix span
    annotation: :mod:`causaltrace.instrumentation.annotate`) — by default when an OTLP endpoint or
    ``CAUSALTRACE_PHOENIX_URL`` is configured.
    """
    from causaltrace.instrumentation import instrument

    instrument()
    set_watch_lookup(_lookup)
    w = Watch(
        team_or_agent,
        verify=verify,
        factory=factory,
        diagnose=diagnose,
        repair=repair,
        model=model,
        method=method,
        on_diagnosis=on_diagnosis,
        bound_s=bound_s,
        annotate=annotate,
    )
    try:
        _WATCHES[team_or_agent] = w
    except TypeError:
        _BY_ID[id(team_or_agent)] = w
    return w
