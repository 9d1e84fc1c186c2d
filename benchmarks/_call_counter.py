"""The benchmark teams run once under a tracing mode with everything synchronous, and a count of the Python calls
that ran (issue 35 items 1 and 3; ``bench_call_counts.py``, ``bench_stages.py`` and
``tests/benchmarks/test_call_budget.py`` share it).

Teams: those of ``bench_autogen_overhead.py`` and ``bench_smolagents_overhead.py``, built by those benchmarks' own
builders — the AutoGen example team on the scripted clients and on real OpenAI clients over the in-process scripted
endpoint, the smolagents example and parallel teams on ScriptedModel and on OpenAIServerModel over that endpoint.
Framework events are counted as those benchmarks count them, on an uninstrumented run.

Modes: ``ct-store-off`` / ``ct-store-on`` (causaltrace, ``TraceConfig(store=False / True)``) and ``openinference``
(the OpenInference instrumentor of the framework, for comparison). Every mode exports through a SimpleSpanProcessor
(the span is exported on the thread that ends it). With the store on, the collector's writer thread is NOT started:
each operation is written on the thread that hands it over (:func:`synchronous_store`), batched as the writer's
poll batches a short run (its begin row and steps with its end, written when somebody waits), so the store's work is
counted on the team's thread and the batches do not depend on timing.

Counting (:class:`CallCounter`): ``sys.setprofile`` on the team's thread and ``threading.setprofile`` on the threads
the team starts meanwhile (smolagents' parallel managed agents; each thread counts into its own table, so no count
is lost to a race); a ``call`` event is one Python function call, a generator or coroutine resumption included (what
the interpreter does to run it). ``c_call`` events — C functions (orjson, hashlib, sqlite3, dict methods) called
FROM a function — are counted apart, per calling function, and not budgeted: moving work into C is the kind of change
the budget should reward. Garbage collection is off during the counted run (a collection may run weakref callbacks at
any call), after a collection; warm-up runs first (imports, patches installed at a run's start, the store's schema).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import queue
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType, ModuleType
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent

TEAMS = (
    "autogen/scripted",
    "autogen/openai",
    "smolagents-example/scripted",
    "smolagents-example/openai",
    "smolagents-parallel/scripted",
    "smolagents-parallel/openai",
)
MODES = ("ct-store-off", "ct-store-on", "openinference")
#: The modules counted as causaltrace's work: ``causaltrace.*`` without ``causaltrace.testing`` (the scripted models
#: and endpoint stand for the user's model, not for tracing).
CAUSALTRACE = ("causaltrace", "causaltrace.")
NOT_CAUSALTRACE = ("causaltrace.testing",)
#: Package versions a budget is valid for (a different version of one of them changes the counts by itself).
PACKAGES = (
    "opentelemetry-sdk",
    "opentelemetry-api",
    "autogen-agentchat",
    "autogen-core",
    "autogen-ext",
    "smolagents",
    "openai",
    "httpx",
    "openinference-instrumentation",
    "openinference-instrumentation-autogen-agentchat",
    "openinference-instrumentation-smolagents",
    "openinference-semantic-conventions",
)


def _benchmark(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def versions() -> dict[str, str]:
    """The Python version (major.minor: a bug-fix release does not change what runs) and the versions of
    :data:`PACKAGES` installed here."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": ".".join(map(str, sys.version_info[:2]))}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


# -- the teams -----------------------------------------------------------------------------------------------------


@dataclass
class Team:
    """One benchmark team: ``run()`` runs it once (a run of its own: no ``causaltrace.run`` block, as the overhead
    benchmarks run it); ``events`` its framework events per run, counted as its overhead benchmark counts them."""

    name: str
    framework: str
    run: Callable[[], None]
    events: int


def _autogen_team(client: str) -> Team:
    from autogen_agentchat.messages import ToolCallExecutionEvent

    bench = _benchmark("bench_autogen_overhead")
    build = bench._team_factory(client)
    task = importlib.import_module("autogen_team").TASK
    seen: list[int] = []

    def run() -> None:
        team, model_calls = build()
        result = asyncio.run(team.run(task=task))
        tools = sum(len(m.content) for m in result.messages if isinstance(m, ToolCallExecutionEvent))
        seen.append(len(result.messages) + model_calls() + tools)

    run()  # uninstrumented: the events (and the imports, the clients' first use)
    return Team(f"autogen/{client}", "autogen", run, seen[0])


def _smolagents_team(scenario: str, client: str) -> Team:
    bench = _benchmark("bench_smolagents_overhead")
    example = bench._example()
    name = scenario + ("" if client == "scripted" else "/openai")
    build, task = bench._scenarios(example, client)[name]
    events = bench.count_events(build, task)["events"]
    agent = build()  # one agent for every run, as the overhead benchmark runs it

    def run() -> None:
        agent.run(task)

    return Team(f"smolagents-{scenario}/{client}", "smolagents", run, events)


def team(name: str) -> Team:
    """The team ``name`` (one of :data:`TEAMS`), built and calibrated uninstrumented."""
    kind, client = name.split("/")
    if kind == "autogen":
        return _autogen_team(client)
    return _smolagents_team(kind.removeprefix("smolagents-"), client)


# -- the modes -----------------------------------------------------------------------------------------------------


class _Drained(Exception):
    """The inline writer found its queue empty (ends the collector's write loop on the submitting thread)."""


class _InlineQueue(queue.Queue):  # type: ignore[type-arg]
    """The collector's operation queue, written through on the thread that submits: an operation someone waits on
    (a run's end, a flush; a begin row only when waited on: :meth:`wake`) runs the collector's own write loop until
    the queue is empty; a begin row and the steps wait for it, as the background writer's poll gathers a short run
    into its end's transaction."""

    def __init__(self, collector: Any) -> None:
        super().__init__()
        self.collector = collector
        self.writing = False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        op, _, done = item
        if done is not None and op != "begin":
            self.wake()

    def wake(self) -> None:
        if self.writing or self.empty():
            return
        self.writing = True
        try:
            self.collector._write_loop()
        except _Drained:
            pass
        finally:
            self.writing = False

    def sleep(self, poll_s: float, idle_polls: int) -> None:
        """The writer's wait for work (``OpQueue.sleep``): none here — the loop ends when the queue is empty."""
        if self.empty():
            raise _Drained


def synchronous_store(collector: Any) -> None:
    """Make ``collector`` (a ``collector.live.RunCollector``) write on the submitting thread (module docstring).

    Uses the collector's own write loop, so what is measured is what the writer does; fails loudly if the writer's
    shape changed (then this function must follow it)."""
    needed = ("_queue", "_write_loop", "_ensure_writer", "linger_s", "_writer", "_gather")
    missing = [name for name in needed if not hasattr(collector, name)]
    if missing:
        raise RuntimeError(f"the collector's writer changed (no {', '.join(missing)}): update synchronous_store()")
    if collector._writer is not None:
        raise RuntimeError("the collector's writer thread already runs: make it synchronous before the first run")
    collector._ensure_writer = lambda: None  # no thread: flush() returns at once, the queue writes through
    collector.linger_s = 0.0
    collector._queue = _InlineQueue(collector)


@contextmanager
def mode(name: str, framework: str) -> Iterator[Any]:
    """Instrument ``framework`` for mode ``name`` (:data:`MODES`, or ``baseline``: nothing) onto a fresh provider
    exporting through a SimpleSpanProcessor; yields the span counter; undone (and the store flushed) afterwards."""
    overhead = _benchmark("_overhead_stats")
    exporter = overhead.CountingExporter()
    provider = overhead.counting_provider(exporter)
    if name == "baseline":
        yield exporter
        return
    if name == "openinference":
        if framework == "autogen":
            from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor as Instrumentor
        else:
            from openinference.instrumentation.smolagents import SmolagentsInstrumentor as Instrumentor
        instrumentor = Instrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            yield exporter
        finally:
            instrumentor.uninstrument()
        return
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.tracing import get_tracing, reset_tracing

    if framework == "autogen":
        from causaltrace.instrumentation.autogen import instrument_autogen as instrument
        from causaltrace.instrumentation.autogen import uninstrument_autogen as uninstrument
    else:
        from causaltrace.instrumentation.smolagents import instrument_smolagents as instrument
        from causaltrace.instrumentation.smolagents import uninstrument_smolagents as uninstrument
    instrument(provider, TraceConfig(store=name == "ct-store-on"))
    synchronous_store(get_tracing().collector)
    try:
        yield exporter
    finally:
        uninstrument()
        reset_tracing()


# -- counting ------------------------------------------------------------------------------------------------------


@dataclass
class _ThreadCounts:
    calls: dict[CodeType, int] = field(default_factory=dict)
    c_calls: dict[CodeType, int] = field(default_factory=dict)
    modules: dict[CodeType, str] = field(default_factory=dict)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            n = self.calls.get(code)
            if n is None:
                self.modules[code] = frame.f_globals.get("__name__") or ""
                self.calls[code] = 1
            else:
                self.calls[code] = n + 1
        elif event == "c_call":
            code = frame.f_code
            if code not in self.modules:
                self.modules[code] = frame.f_globals.get("__name__") or ""
            self.c_calls[code] = self.c_calls.get(code, 0) + 1


#: A function: (module, qualified name).
Function = tuple[str, str]


@dataclass
class Counts:
    """Calls per function (module, qualified name) of one counted run, all counted threads together."""

    calls: dict[Function, int]
    c_calls: dict[Function, int]
    threads: int

    def total(self, prefixes: tuple[str, ...], *, exclude: tuple[str, ...] = (), c: bool = False) -> int:
        """Calls of functions whose module is one of ``prefixes`` (``"x"`` or ``"x."``), not under ``exclude``;
        ``c``: the C calls made FROM those functions instead."""
        table = self.c_calls if c else self.calls
        return sum(n for (module, _), n in table.items() if in_modules(module, prefixes, exclude))


def in_modules(module: str, prefixes: tuple[str, ...], exclude: tuple[str, ...] = ()) -> bool:
    """Whether ``module`` is one of ``prefixes`` (a name, or a name ending in ``.`` for its submodules) and not
    one of ``exclude`` or under it."""
    if any(module == e or module.startswith(e + ".") for e in exclude):
        return False
    return any(module.startswith(p) if p.endswith(".") else module == p for p in prefixes)


class ThreadProfiler:
    """A profile function on this thread and on every thread started while it runs, each thread with its own table
    (``table()`` makes one; its ``profile`` method is the thread's profile function)."""

    def __init__(self, table: Callable[[], Any]) -> None:
        self.table = table
        self.tables: list[Any] = []

    def _new_thread(self, frame: FrameType, event: str, arg: Any) -> None:
        table = self.table()
        self.tables.append(table)  # list.append is atomic
        sys.setprofile(table.profile)
        table.profile(frame, event, arg)

    @contextmanager
    def counting(self) -> Iterator[None]:
        table = self.table()
        self.tables.append(table)
        threading.setprofile(self._new_thread)
        sys.setprofile(table.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]


class CallCounter(ThreadProfiler):
    """Counts calls on this thread and on the threads started while it counts (module docstring)."""

    def __init__(self) -> None:
        super().__init__(_ThreadCounts)

    def counts(self) -> Counts:
        calls: dict[Function, int] = {}
        c_calls: dict[Function, int] = {}
        for table in self.tables:
            for source, target in ((table.calls, calls), (table.c_calls, c_calls)):
                for code, n in source.items():
                    key = (table.modules[code], code.co_qualname)
                    target[key] = target.get(key, 0) + n
        return Counts(calls, c_calls, len(self.tables))


@contextmanager
def quiet_gc() -> Iterator[None]:
    """A collection first, then no garbage collection while the block runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass
class Measured:
    """One team under one mode: the counted run's calls, its exported spans and (``memory``) peak traced bytes."""

    team: str
    mode: str
    events: int
    counts: Counts
    spans: int
    peak_bytes: int | None = None


def measure(the_team: Team, mode_name: str, *, warmup: int = 2, memory: bool = False) -> Measured:
    """Run ``the_team`` ``warmup`` times and once counted under ``mode_name``; with ``memory`` one more run under
    tracemalloc (its peak above the bytes traced before it)."""
    with mode(mode_name, the_team.framework) as exporter:
        for _ in range(warmup):
            the_team.run()
        before, stored = exporter.spans, _stored_runs(mode_name)
        counter = CallCounter()
        with quiet_gc(), counter.counting():
            the_team.run()
        spans = exporter.spans - before
        if mode_name == "ct-store-on" and _stored_runs(mode_name) != stored + 1:  # written, and counted, by now
            raise RuntimeError("the counted run was not stored on the team's thread: update synchronous_store()")
        peak = None
        if memory:
            with quiet_gc():
                tracemalloc.start()
                try:
                    start, _ = tracemalloc.get_traced_memory()
                    tracemalloc.reset_peak()
                    the_team.run()
                    peak = tracemalloc.get_traced_memory()[1] - start
                finally:
                    tracemalloc.stop()
    return Measured(the_team.name, mode_name, the_team.events, counter.counts(), spans, peak)


def _stored_runs(mode_name: str) -> int:
    """With the store on: how many runs the store holds (checked around the counted run), after making sure the
    active collector started no writer thread (the counts would miss its work); else 0. (Another collector's writer
    — left by an earlier traced run of this process — writes nothing of this run and is not counted.)"""
    if mode_name != "ct-store-on":
        return 0
    from causaltrace.collector.store import Store
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.tracing import get_tracing

    if get_tracing().collector._writer is not None:
        raise RuntimeError("the collector's writer thread runs: the store's work is not counted (synchronous_store)")

    store = Store(TraceConfig.from_env().resolved_db_path())
    try:
        return len(store.list_runs())
    finally:
        store.close()


@contextmanager
def temporary_home() -> Iterator[Path]:
    """A temporary CAUSALTRACE_HOME (the store of ``ct-store-on``), no OTLP endpoint, causaltrace's log quiet."""
    import logging
    import tempfile

    saved = {k: os.environ.get(k) for k in ("CAUSALTRACE_HOME", "OTEL_EXPORTER_OTLP_ENDPOINT")}
    logging.getLogger("causaltrace").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAUSALTRACE_HOME"] = home
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        try:
            yield Path(home)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def examples_on_path() -> None:
    """The example modules importable by name (``autogen_team``), as the overhead benchmarks need."""
    if str(ROOT / "examples") not in sys.path:
        sys.path.insert(0, str(ROOT / "examples"))
