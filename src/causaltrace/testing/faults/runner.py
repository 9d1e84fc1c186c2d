"""Run the fault-injection suite: record each planted failure, diagnose it with ``graph`` (no model), repair it
with deterministic mutations only, and score localisation and repair (issue 7 "Proof").

Per case:

1. record the failed run, instrumented and stored (``causaltrace.run``), with the planted factory;
2. ``diagnose(run, "graph", model=None)``: the ranked candidates (deterministic stages only);
3. ``repair(run, factory, verify, candidates=<the diagnosis candidates>)`` with no model: mutation proposals,
   replayed, earliest step with CRS = 1; if none of them flips, the remaining candidate steps of the run (already
   exhausted steps are not replayed again — every replay here is deterministic);
4. report ``{name, framework, true_step, found_step, repaired, replays, live_calls_before_intervention}``
   (localized = ``found_step == true_step``; ``true_step`` comes from the case's rule applied to the recorded run).

The suite runs offline: ``CAUSALTRACE_MODEL`` is ignored (removed from the worker's environment) and every model is
a reactive scripted one. Runs and replays go to the store of ``$CAUSALTRACE_HOME`` (the CLI uses a temporary one
unless ``--home`` is given). Cases run in ``jobs`` worker processes (each instruments both frameworks itself).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO

from causaltrace.testing.faults.cases import FaultCase

__all__ = ["CaseResult", "all_cases", "bench_faults_command", "record", "render_table", "run_case", "run_suite",
           "summarize"]


def all_cases(framework: str | None = None) -> list[FaultCase]:
    """Every fault case (optionally of one framework), smolagents first."""
    out: list[FaultCase] = []
    if framework in (None, "smolagents"):
        from causaltrace.testing.faults.cases_smolagents import smolagents_cases

        out += smolagents_cases()
    if framework in (None, "autogen"):
        from causaltrace.testing.faults.cases_autogen import autogen_cases

        out += autogen_cases()
    return out


@dataclass
class CaseResult:
    """The outcome of one case (``as_json`` gives the benchmark row)."""

    name: str
    framework: str
    fault: str
    true_step: int | None
    found_step: int | None
    repaired: bool
    replays: int
    live_calls_before_intervention: int
    seconds: float = 0.0
    first_error_step: int | None = None
    found_in: str = ""
    error: str | None = None

    @property
    def localized(self) -> bool:
        return self.true_step is not None and self.found_step == self.true_step

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "framework": self.framework,
            "true_step": self.true_step,
            "found_step": self.found_step,
            "repaired": self.repaired,
            "replays": self.replays,
            "live_calls_before_intervention": self.live_calls_before_intervention,
        }


_INSTRUMENTED = False


def _instrument() -> None:
    global _INSTRUMENTED
    if _INSTRUMENTED:
        return
    from opentelemetry.sdk.trace import TracerProvider

    from causaltrace.config import TraceConfig

    provider, config = TracerProvider(), TraceConfig()  # spans stay in-process: the bench exports nothing
    try:
        from causaltrace.instrumentation.smolagents import instrument_smolagents

        instrument_smolagents(provider, config)
    except ImportError:  # pragma: no cover - the extra is missing
        pass
    try:
        from causaltrace.instrumentation.autogen import instrument_autogen

        instrument_autogen(provider, config)
    except ImportError:  # pragma: no cover
        pass
    _INSTRUMENTED = True


def _record_sync(case: FaultCase) -> Any:
    import causaltrace

    with causaltrace.run(task=case.task, verify=case.verify, name=case.name) as handle:
        try:
            case.factory().run(case.task)
        except Exception:
            pass
    return handle.run


async def record(case: FaultCase) -> Any:
    """Run the case's planted factory on its task, instrumented and stored; return the Run."""
    _instrument()
    if case.framework == "smolagents":
        return await asyncio.to_thread(_record_sync, case)
    import causaltrace

    async with causaltrace.run(task=case.task, verify=case.verify, name=case.name) as handle:
        try:
            await case.factory().run(task=case.task)
        except Exception:
            pass
    return handle.run


async def run_case(case: FaultCase, *, sandbox: Any = None,
                   on_replay: Callable[[Any, Any], None] | None = None) -> CaseResult:
    """Record, diagnose (graph, no model) and repair one case."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.replay.executor import default_sandbox
    from causaltrace.replay.repair import repair

    started = time.perf_counter()
    result = CaseResult(name=case.name, framework=case.framework, fault=case.fault, true_step=None, found_step=None,
                        repaired=False, replays=0, live_calls_before_intervention=0)
    try:
        run = await record(case)
        result.true_step = case.true_step(run)
        errors = [s.index for s in run.steps if s.status == "error"]
        result.first_error_step = errors[0] if errors else None
        if run.outcome.status != "failure":
            raise RuntimeError(f"the planted run did not fail ({run.outcome.status}: {run.outcome.final_answer!r})")
        diagnosis = await diagnose(run, "graph", None)
        sandbox = sandbox or default_sandbox()
        first = [c.step_id for c in diagnosis.candidates]
        allowed = {s.step_id for s in run.candidate_steps()}
        first = [c for c in first if c in allowed]
        attempts = []
        if first:
            attempts.append(("diagnosis", await repair(run, case.factory, case.verify, candidates=first, k=0,
                                                       diagnosis=diagnosis, sandbox=sandbox, on_replay=on_replay)))
        if not attempts or not attempts[-1][1].repaired:
            rest = [s.step_id for s in run.candidate_steps() if s.step_id not in set(first)]
            if rest:
                attempts.append(("all", await repair(run, case.factory, case.verify, candidates=rest, k=0,
                                                     diagnosis=diagnosis, sandbox=sandbox, on_replay=on_replay)))
        for where, rep in attempts:
            result.replays += rep.replays
            result.live_calls_before_intervention += rep.live_calls_before_intervention
            if rep.repaired and rep.decisive is not None:
                result.repaired = True
                result.found_step = rep.decisive.index
                result.found_in = where
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        if os.environ.get("CAUSALTRACE_DEBUG"):
            traceback.print_exc()
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def _run_named(name: str) -> CaseResult:
    os.environ.pop("CAUSALTRACE_MODEL", None)
    case = next(c for c in all_cases() if c.name == name)
    return asyncio.run(run_case(case))


def run_suite(cases: Sequence[FaultCase] | None = None, *, jobs: int = 1,
              progress: Callable[[CaseResult, int, int], None] | None = None) -> dict[str, Any]:
    """Run the cases (all by default) and return the benchmark JSON (ARCHITECTURE "Benchmark JSON")."""
    cases = list(cases) if cases is not None else all_cases()
    results: list[CaseResult] = []
    if jobs <= 1:
        os.environ.pop("CAUSALTRACE_MODEL", None)
        for case in cases:
            res = asyncio.run(run_case(case))
            results.append(res)
            if progress:
                progress(res, len(results), len(cases))
    else:
        import multiprocessing

        names = [c.name for c in cases]
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            by_name: dict[str, CaseResult] = {}
            for res in pool.map(_run_named, names):
                by_name[res.name] = res
                if progress:
                    progress(res, len(by_name), len(names))
            results = [by_name[n] for n in names]
    return summarize(results)


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    """``{"n", "localized_rate", "repaired_rate", "mean_replays", "cases"}``: rates 0–100 with 2 decimals."""
    n = len(results)

    def rate(count: int) -> float:
        return round(100.0 * count / n, 2) if n else 0.0

    report = {
        "n": n,
        "localized_rate": rate(sum(r.localized for r in results)),
        "repaired_rate": rate(sum(r.repaired for r in results)),
        "mean_replays": round(sum(r.replays for r in results) / n, 2) if n else 0.0,
        "cases": [r.as_json() for r in results],
    }
    report_details[id(report)] = list(results)
    return report


#: the full CaseResults behind a report (for the table), keyed by ``id(report)``; not part of the JSON
report_details: dict[int, list[CaseResult]] = {}


def render_table(report: dict[str, Any], stream: TextIO = sys.stdout) -> None:
    """A plain-text table of the cases and the summary line."""
    details = {r.name: r for r in report_details.get(id(report), [])}
    head = f"{'case':<28} {'framework':<10} {'fault':<20} {'true':>5} {'found':>5} {'loc':>4} {'rep':>4} " \
           f"{'replays':>7} {'live<':>5} {'sec':>6}"
    print(head, file=stream)
    print("-" * len(head), file=stream)
    for row in report["cases"]:
        d = details.get(row["name"])
        localized = row["found_step"] is not None and row["found_step"] == row["true_step"]
        print(f"{row['name']:<28} {row['framework']:<10} {(d.fault if d else ''):<20} "
              f"{_cell(row['true_step']):>5} {_cell(row['found_step']):>5} {'yes' if localized else 'no':>4} "
              f"{'yes' if row['repaired'] else 'no':>4} {row['replays']:>7} "
              f"{row['live_calls_before_intervention']:>5} {(f'{d.seconds:.1f}' if d else ''):>6}", file=stream)
        if d is not None and d.error:
            print(f"    error: {d.error}", file=stream)
    print(f"n={report['n']}  localized {report['localized_rate']:.2f}%  repaired {report['repaired_rate']:.2f}%  "
          f"mean replays {report['mean_replays']:.2f}", file=stream)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def bench_faults_command(args: Any) -> int:
    """``causaltrace bench faults``: progress on stderr, the table on stdout (stderr with ``--json -``), JSON."""
    import json
    import shutil
    import tempfile
    from pathlib import Path

    from causaltrace.exceptions import UserError

    cases = all_cases(args.framework)
    wanted = [n for item in (args.case or []) for n in item.split(",") if n]
    if wanted:
        unknown = sorted(set(wanted) - {c.name for c in cases})
        if unknown:
            raise UserError(f"no fault case named {', '.join(unknown)}; cases: {', '.join(c.name for c in cases)}")
        cases = [c for c in cases if c.name in wanted]
    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="causaltrace-faults-"))
    home.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("CAUSALTRACE_HOME")
    os.environ["CAUSALTRACE_HOME"] = str(home)

    def progress(result: CaseResult, done: int, total: int) -> None:
        status = "localized" if result.localized else ("repaired" if result.repaired else "missed")
        extra = f" — {result.error}" if result.error else ""
        print(f"[{done}/{total}] {result.name}: true #{_cell(result.true_step)}, found #{_cell(result.found_step)}, "
              f"{status}, {result.replays} replays, {result.seconds:.1f} s{extra}", file=sys.stderr, flush=True)

    try:
        report = run_suite(cases, jobs=args.jobs, progress=progress)
    finally:
        if previous is None:
            os.environ.pop("CAUSALTRACE_HOME", None)
        else:
            os.environ["CAUSALTRACE_HOME"] = previous
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)
    to_stdout = args.json == "-"
    render_table(report, sys.stderr if to_stdout else sys.stdout)
    if args.json:
        text = json.dumps(report, indent=2) + "\n"
        if to_stdout:
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text, encoding="utf-8")
            print(f"wrote {args.json}", file=sys.stderr)
    return 0
