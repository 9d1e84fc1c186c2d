"""What fails most across many stored runs (issue 23 item 3: ``causaltrace stats [--since …] [--json]`` and the
report's fleet page).

Usage::

    from causaltrace.collector.fleet_stats import fleet_stats

    with Store() as store:
        stats = fleet_stats(store, since=datetime.now(UTC) - timedelta(hours=12))
    stats.by_agent[0]          # Bucket(key="solver", count=412, share=0.82, examples=("run-a", "run-b", "run-c"))
    stats.to_json()            # the same as plain JSON (``stats --json``)

Which runs: every stored run except the runs replays produced (named ``… (replay)``), started at or after ``since``
when given (a run without a start time is kept only without ``since``). Each counts as ``failed`` when its outcome is
a failure, ``diagnosed`` when it has a diagnosis that names a decisive step, and is then counted once in each
grouping, by its strongest diagnosis (the one ``show`` and ``report`` use: replay > prediction > heuristic):

* **by agent** — the diagnosis's agent; an environment fault (a tool's output, no agent to blame) is
  ``(environment)``; none named is ``(unknown)``;
* **by decisive step kind** — the kind of the decisive step in the stored run (``tool_call``, ``message``…);
* **by error category** — ``FM-1.1 Disobey task specification`` …, or ``(none)``;
* **by framework** — the run's framework (``autogen``, ``smolagents``, ``unknown`` for imported logs).

Shares are of the diagnosed runs; buckets are sorted by count (then key); each lists up to three example run ids
(the newest first). Runs whose strongest diagnosis failed or named no decisive step (below its confidence
threshold) count as ``diagnosis_failed``; failed runs without any diagnosis as
``undiagnosed`` — ``causaltrace diagnose --all`` fills them in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from causaltrace.collector.store_sql import CorruptRecordError
from causaltrace.schema import ERROR_CATEGORIES, Diagnosis, Run

__all__ = ["GROUPS", "Bucket", "FleetStats", "StatsStore", "fleet_stats", "is_replay_name"]

#: the groupings, in the order the table and the page show them: (attribute of FleetStats, heading)
GROUPS = (("by_agent", "agent"), ("by_step_kind", "decisive step kind"), ("by_category", "error category"),
          ("by_framework", "framework"))
EXAMPLES = 3


class StatsStore(Protocol):
    """What :func:`fleet_stats` reads of a store (:class:`~causaltrace.collector.store.Store` has it)."""

    def list_runs(self, *, failed: bool = False, limit: int | None = None) -> list[dict[str, Any]]: ...
    def strongest_diagnosis(self, run_id: str) -> Diagnosis | None: ...
    def get_run(self, run_id: str) -> Run: ...


@dataclass(frozen=True)
class Bucket:
    """One value of a grouping: how many diagnosed runs have it, their share, and example run ids."""

    key: str
    count: int
    share: float
    examples: tuple[str, ...]


@dataclass
class FleetStats:
    """The aggregate of the stored diagnoses (module docstring)."""

    since: datetime | None
    runs: int = 0
    failed: int = 0
    diagnosed: int = 0
    diagnosis_failed: int = 0
    undiagnosed: int = 0
    by_agent: list[Bucket] = field(default_factory=list)
    by_step_kind: list[Bucket] = field(default_factory=list)
    by_category: list[Bucket] = field(default_factory=list)
    by_framework: list[Bucket] = field(default_factory=list)
    #: Runs left out because a stored record of theirs is damaged: (run id, why) — each said in one line by the CLI.
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (``stats --json``): buckets as objects, ``since`` as ISO text."""
        out = asdict(self)
        out["since"] = self.since.isoformat() if self.since else None
        for name, _ in GROUPS:
            out[name] = [{**b, "examples": list(b["examples"])} for b in out[name]]
        out["unreadable"] = [{"run_id": run_id, "error": why} for run_id, why in self.unreadable]
        return out


def is_replay_name(name: str | None) -> bool:
    """Runs produced by a replay are named "<original name> (replay)" (or "replay") by the playback adapters."""
    return bool(name) and (name == "replay" or str(name).endswith(" (replay)"))


def _started(row: Mapping[str, Any]) -> datetime | None:
    raw = row.get("started_at")
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _buckets(keys: Iterable[tuple[str, str]], total: int) -> list[Bucket]:
    """Buckets of ``(key, run_id)`` pairs, most frequent first."""
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for key, run_id in keys:
        counts[key] += 1
        listed = examples.setdefault(key, [])
        if len(listed) < EXAMPLES:
            listed.append(run_id)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [Bucket(key, n, round(n / total, 4) if total else 0.0, tuple(examples[key])) for key, n in ranked]


def _agent_of(d: Diagnosis) -> str:
    if d.fault_source == "environment":
        return "(environment)"
    return d.agent or "(unknown)"


def _category_of(d: Diagnosis) -> str:
    return f"{d.category} {ERROR_CATEGORIES[d.category]}" if d.category else "(none)"


def _step_kind(store: StatsStore, d: Diagnosis) -> str:
    run = store.get_run(d.run_id)
    step = next((s for s in run.steps if s.step_id == d.decisive_step_id), None)
    return step.kind if step is not None else "(unknown)"


def fleet_stats(store: StatsStore, *, since: datetime | None = None) -> FleetStats:
    """The aggregate of the stored diagnoses of runs started at or after ``since`` (module docstring)."""
    if since is not None and since.tzinfo is None:
        since = since.astimezone(UTC)
    stats = FleetStats(since=since)
    rows: list[tuple[Mapping[str, Any], Diagnosis, str]] = []
    for row in store.list_runs():  # newest first: the examples are the newest runs
        if is_replay_name(row.get("name")):
            continue
        started = _started(row)
        if since is not None and (started is None or started < since):
            continue
        try:  # a damaged record leaves its run out, counted, instead of refusing the whole store
            best = store.strongest_diagnosis(str(row["run_id"]))
            kind = _step_kind(store, best) if best is not None and not best.failed and best.decisive_step_id else ""
        except CorruptRecordError as exc:
            stats.unreadable.append((str(row["run_id"]), exc.message))
            continue
        stats.runs += 1
        stats.failed += row.get("status") == "failure"
        if best is not None and kind:
            rows.append((row, best, kind))
        elif best is not None:
            stats.diagnosis_failed += 1
        elif row.get("status") == "failure":
            stats.undiagnosed += 1
    stats.diagnosed = total = len(rows)
    stats.by_agent = _buckets(((_agent_of(d), d.run_id) for _, d, _ in rows), total)
    stats.by_step_kind = _buckets(((kind, d.run_id) for _, d, kind in rows), total)
    stats.by_category = _buckets(((_category_of(d), d.run_id) for _, d, _ in rows), total)
    stats.by_framework = _buckets(((str(row.get("framework") or "unknown"), d.run_id) for row, d, _ in rows), total)
    return stats
