"""Diagnose many stored runs at once, in parallel processes (issue 23 item 3: ``causaltrace diagnose --all
[--failed] [--since …] --jobs N``).

Usage::

    from causaltrace.attribution.fleet import diagnose_all, runs_to_diagnose

    with Store(target) as store:
        todo = runs_to_diagnose(store, method="graph", failed_only=True, since=since)
    result = diagnose_all(target, todo, method="graph", jobs=2, progress=lambda done, total, d: ...)
    result.diagnosed, result.errors

Which runs (:func:`runs_to_diagnose`): every stored run that is not a success (``failed_only``: outcome ``failure``
only; as ``diagnose`` does, a success is never diagnosed here), not produced by a replay, started at or after
``since``, and without a diagnosis of this ``method`` yet — so a run that was stopped half-way **resumes**: what was
done is stored, only the rest is diagnosed (``redo=True`` diagnoses every selected run again).
:func:`select_runs` also names the runs it leaves out as already diagnosed (``diagnose --all --json``'s
``skipped``).

How (:func:`diagnose_all`): ``jobs=1`` diagnoses in this process; ``jobs=N`` diagnoses in this process and N-1
worker processes (``spawn``: no inherited locks or connections). A worker's start-up (a fresh interpreter importing
causaltrace and the method, opening the store) takes seconds on a loaded machine, so this process does not wait for
it: it diagnoses runs itself, one at a time, and hands chunks of a few runs (by id) to each worker only once that
worker has said it is ready — a batch smaller than the start-up is done here alone, and a worker that never starts
costs nothing but its process. Each worker opens the store read-only once and diagnoses with
:func:`causaltrace.attribution.engine.diagnose` (``store=False``); the diagnoses come back as JSON to this process,
which is the only writer and stores each as it arrives — an interruption loses only the runs in flight. ``progress(done, total, diagnosis)`` is called after each. A run that cannot be diagnosed at all (an error
that is not the method's own failure, which the engine already turns into a failed Diagnosis) is counted in
``errors`` with its one-line reason and stores nothing; the others go on. A user error (an unknown method, a model
the method needs and does not have) stops the whole batch at its first run.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.collector.fleet_stats import is_replay_name
from causaltrace.collector.store import Store
from causaltrace.collector.store_sql import CorruptRecordError
from causaltrace.exceptions import CausaltraceError, UserError
from causaltrace.schema import Diagnosis

__all__ = ["FleetDiagnosis", "Selection", "diagnose_all", "runs_to_diagnose", "select_runs"]

Progress = Callable[[int, int, Diagnosis | None], None]
_CHUNK = 8


@dataclass
class FleetDiagnosis:
    """What a batch did: diagnoses stored, runs that could not be diagnosed, and the wall time."""

    diagnosed: int = 0
    failed_diagnoses: int = 0
    #: of the diagnosed runs, how many the worker processes did (the rest: this process)
    by_workers: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def runs_per_second(self) -> float:
        return (self.diagnosed + len(self.errors)) / self.seconds if self.seconds else 0.0


def _started(raw: Any) -> datetime | None:
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Selection:
    """The runs a batch picked: ``todo`` (oldest first) and ``done``, the selected runs left out because they
    already have a diagnosis of the method (what a resumed batch skips; ``redo=True`` leaves none out)."""

    todo: list[str]
    done: list[str]


def select_runs(store: Store, *, method: str = "graph", failed_only: bool = False,
                since: datetime | None = None, redo: bool = False, limit: int | None = None) -> Selection:
    """The stored runs a batch should diagnose and those it skips as already diagnosed (module docstring)."""
    if since is not None and since.tzinfo is None:
        since = since.astimezone(UTC)
    store.mark_incomplete()
    todo: list[str] = []
    done: list[str] = []
    for row in store.list_runs(failed=failed_only):
        if row["status"] in ("success", "running") or is_replay_name(row.get("name")):
            continue
        started = _started(row.get("started_at"))
        if since is not None and (started is None or started < since):
            continue
        if not redo and any(d.method == method and not d.failed for d in _diagnoses(store, row["run_id"])):
            done.append(row["run_id"])
            continue
        todo.append(row["run_id"])
    todo.reverse()
    done.reverse()
    return Selection(todo[:limit] if limit is not None else todo, done)


def _diagnoses(store: Store, run_id: str) -> list[Diagnosis]:
    """The run's stored diagnoses; none when one of them is damaged (the run is diagnosed again)."""
    try:
        return store.diagnoses(run_id)
    except CorruptRecordError:
        return []


def runs_to_diagnose(store: Store, *, method: str = "graph", failed_only: bool = False,
                     since: datetime | None = None, redo: bool = False, limit: int | None = None) -> list[str]:
    """The ids of the stored runs a batch should diagnose, oldest first (module docstring)."""
    return select_runs(store, method=method, failed_only=failed_only, since=since, redo=redo, limit=limit).todo


# ------------------------------------------------------------------------------------------ the worker side

_worker: dict[str, Any] = {}
Result = tuple[str, Diagnosis | str | None, str | None]  # (run id, the diagnosis or its JSON, error)


def _init_worker(target: str | None, method: str, model: Any, options: Mapping[str, Any],
                 ready: Any = None) -> None:
    """Open the store read-only once per process and keep the method's settings; a worker then says it is ready
    on ``ready`` (a queue), so it is handed runs only once it can take them."""
    _worker.update(store=Store(target, readonly=True), method=method,
                   model=model, options=dict(options))
    if ready is not None:
        ready.put(os.getpid())


def _diagnose_here(run_id: str) -> tuple[str, Diagnosis | None, str | None]:
    """``(run_id, diagnosis, error)`` for one run, in whichever process calls it."""
    try:
        run = _worker["store"].get_run(run_id)
        diagnosis = diagnose_sync(run, _worker["method"], _worker["model"], store=False, **_worker["options"])
    except CorruptRecordError as exc:  # one damaged run is skipped and counted, never the end of the batch
        return run_id, None, exc.message
    except UserError:
        raise
    except CausaltraceError as exc:
        return run_id, None, f"{type(exc).__name__}: {exc.message}"
    return run_id, diagnosis, None


def _diagnose_chunk(run_ids: Sequence[str]) -> list[Result]:
    """A worker's answer for a few runs: each diagnosis as JSON (what crosses the process boundary)."""
    out: list[Result] = []
    for run_id in run_ids:
        _, diagnosis, error = _diagnose_here(run_id)
        out.append((run_id, diagnosis.model_dump_json() if diagnosis is not None else None, error))
    return out


def _shared_results(todo: deque[str], pool: Any, ready: Any, workers: int) -> Iterator[Result]:
    """This process diagnoses one run at a time while the workers start, and hands chunks of ``_CHUNK`` runs to the
    workers that said they are ready (two in flight each); when the runs are handed out, it waits for the rest."""
    in_flight: list[Any] = []
    n_ready = 0
    while todo or in_flight:
        while n_ready < workers and not ready.empty():
            ready.get()
            n_ready += 1
        for answer in [a for a in in_flight if a.ready()]:
            in_flight.remove(answer)
            yield from answer.get()
        while todo and len(in_flight) < 2 * n_ready:
            chunk = [todo.popleft() for _ in range(min(_CHUNK, len(todo)))]
            in_flight.append(pool.apply_async(_diagnose_chunk, (chunk,)))
        if todo:
            yield _diagnose_here(todo.popleft())
        elif in_flight:
            in_flight[0].wait(0.05)


def _results(target: str | None, run_ids: Sequence[str], jobs: int, method: str, model: Any,
             options: Mapping[str, Any]) -> Iterator[Result]:
    """Every run's result, in the order they finish (module docstring: this process and ``jobs - 1`` workers)."""
    _init_worker(target, method, model, options)
    try:
        workers = min(jobs - 1, (len(run_ids) - 1) // _CHUNK)
        if workers < 1:
            yield from map(_diagnose_here, run_ids)
            return
        context = multiprocessing.get_context("spawn")
        ready = context.SimpleQueue()
        with context.Pool(workers, initializer=_init_worker,
                          initargs=(target, method, model, dict(options), ready)) as pool:
            yield from _shared_results(deque(run_ids), pool, ready, workers)
    finally:
        _worker.pop("store").close()


def diagnose_all(target: str | None, run_ids: Iterable[str], *, method: str = "graph", model: Any = None,
                 jobs: int = 1, progress: Progress | None = None, **options: Any) -> FleetDiagnosis:
    """Diagnose ``run_ids`` of the store at ``target`` (None: the default store) with ``jobs`` processes and store
    each diagnosis (module docstring). ``options`` go to :func:`~causaltrace.attribution.engine.diagnose`
    (``with_answer``, ``ablate``, ``human_speakers``, ``min_confidence``, the method's own)."""
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {jobs}")
    if model is not None and not isinstance(model, str):
        raise UserError("diagnose --all takes a model by name (a litellm model or 'local')")
    ids = list(run_ids)
    result = FleetDiagnosis()
    started = time.perf_counter()
    with Store(target) as store:
        for done, (run_id, data, error) in enumerate(_results(target, ids, jobs, method, model, options), start=1):
            diagnosis = Diagnosis.model_validate_json(data) if isinstance(data, str) else data
            if diagnosis is not None:
                store.save_diagnosis(diagnosis)
                result.diagnosed += 1
                result.by_workers += isinstance(data, str)
                result.failed_diagnoses += diagnosis.failed
            else:
                result.errors.append((run_id, error or "unknown error"))
            if progress is not None:
                progress(done, len(ids), diagnosis)
    result.seconds = time.perf_counter() - started
    return result
