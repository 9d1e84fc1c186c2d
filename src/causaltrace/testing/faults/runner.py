"""Run the fault-injection suite: record each planted failure, diagnose it with ``graph`` (no model), repair it
with deterministic mutations only, and score localisation and repair (issue 7 "Proof").

Per case:

1. record the failed run, instrumented and stored (``causaltrace.run``), with the planted factory;
2. ``diagnose(run, "graph", model=None)``: the ranked candidates (deterministic stages only);
3. ``repair(run, factory, verify, candidates=<every candidate step>, diagnosis=<graph's>)`` with no model, one
   search: the corrections the diagnosis's findings derive, earliest step first, then (none flipped) the mutation
   alternatives and the tool results, within their budget; the earliest flip with CRS = 1;
4. report ``{name, framework, true_step, found_step, repaired, replays, live_calls_before_intervention}``
   (localized = ``found_step == true_step``; ``true_step`` comes from the case's rule applied to the recorded run)
   and the repair's cost: ``repair_seconds`` and ``repair_ratio`` (÷ the recorded run's own wall time).

The suite runs offline: ``CAUSALTRACE_MODEL`` is ignored (removed from the worker's environment) and every model is
a reactive scripted one. Runs and replays go to the store of ``$CAUSALTRACE_HOME`` (the CLI uses a temporary one
unless ``--home`` is given). Cases run in ``jobs`` worker processes (each instruments both frameworks itself).

Scoring recorded runs again (``--from-store DIR``): the live runs are CPU heavy, the attribution under study is not.
Record once (``bench faults --no-repair --home DIR``), then ``bench faults --from-store DIR`` takes each case's run
from that store instead of running its team — the first stored run named after the case (its recording; replays
come later) — and scores it with the attribution code of the current checkout. A case with no stored run is an
error row, the suite goes on. Repair, if asked, replays the stored run with the case's factory as usual.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TextIO

from causaltrace.testing.faults.cases import FaultCase, mark_held_out

__all__ = ["CaseResult", "all_cases", "bench_faults_command", "record", "render_table", "run_case", "run_suite",
           "summarize"]


def all_cases(framework: str | None = None) -> list[FaultCase]:
    """Every fault case (optionally of one framework), smolagents first: the suite's cases, then the zoo's (issue
    20); then the zoo's cases written blind to the attribution (:mod:`.cases_zoo_blind`, smolagents then AutoGen),
    last so that no earlier case's mark moves, and after them issue 32's later zoo cases (:func:`.cases_zoo.zoo_pick_cases`).
    Each is marked ``held_out`` by the fixed rule of
    :func:`~.cases.mark_held_out` over the whole suite; after them come issue 32's fresh development teams
    (:mod:`.cases_fresh32`), all in the tuning half (``held_out=False``, set by each case outside that rule), and last
    the twelve cases of :mod:`.cases_blind32`, all held out (set by each case, outside that rule)."""
    from causaltrace.testing.faults.cases_autogen import autogen_cases
    from causaltrace.testing.faults.cases_blind32 import blind32_cases
    from causaltrace.testing.faults.cases_fresh32 import fresh32_cases
    from causaltrace.testing.faults.cases_smolagents import smolagents_cases
    from causaltrace.testing.faults.cases_zoo import zoo_autogen_cases, zoo_pick_cases, zoo_smolagents_cases
    from causaltrace.testing.faults.cases_zoo_blind import zoo_blind_autogen_cases, zoo_blind_smolagents_cases

    everything: list[FaultCase] = []
    if framework in (None, "smolagents"):
        everything += smolagents_cases() + zoo_smolagents_cases()
    if framework in (None, "autogen"):
        everything += autogen_cases() + zoo_autogen_cases()
    if framework in (None, "smolagents"):
        everything += zoo_blind_smolagents_cases()
    if framework in (None, "autogen"):
        everything += zoo_blind_autogen_cases()
    if framework in (None, "smolagents"):
        everything += zoo_pick_cases()
    if framework is not None:
        marks = {c.name: c.held_out for c in all_cases()}
        return ([replace(c, held_out=marks[c.name]) for c in everything] + fresh32_cases(framework)
                + blind32_cases(framework))
    return mark_held_out(everything) + fresh32_cases() + blind32_cases()


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
    held_out: bool = False
    #: per method (:data:`~.scoring.METHODS` and "random"): the diagnosis-only localisation scores
    localization: dict[str, dict[str, Any]] | None = None
    run_seconds: float = 0.0
    repair_seconds: float = 0.0
    #: with ``--twins``: graph's diagnosis of the fixed team with this run's outcome (:mod:`.twins`)
    twin: dict[str, Any] | None = None
    #: what repair's flip rests on (``correction`` / ``alternative``), the pair it made, its budget and the
    #: corrections it had not tried when the budget ran out (issue 32 item 5)
    found_basis: str | None = None
    pair: str | None = None
    budget_exhausted: str = ""
    corrections_untried: int = 0

    @property
    def repair_ratio(self) -> float | None:
        """Repair wall time ÷ the run's wall time (issue 32's repair cost target), None without both."""
        if self.run_seconds <= 0 or self.repair_seconds <= 0:
            return None
        return round(self.repair_seconds / self.run_seconds, 1)

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
            "fault": self.fault,
            "held_out": self.held_out,
            "localization": self.localization,
            "seconds": self.seconds,
            "run_seconds": self.run_seconds,
            "repair_seconds": self.repair_seconds,
            "repair_ratio": self.repair_ratio,
            "error": self.error,
            "found_basis": self.found_basis,
            "pair": self.pair,
            "budget_exhausted": self.budget_exhausted,
            "corrections_untried": self.corrections_untried,
            **({"twin": self.twin} if self.twin is not None else {}),
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


def _record_sync(case: FaultCase, factory: Callable[[], Any], name: str) -> Any:
    import causaltrace

    with causaltrace.run(task=case.task, verify=case.verify, name=name) as handle:
        try:
            factory().run(case.task)
        except Exception:
            pass
    return handle.run


async def record(case: FaultCase, *, twin: bool = False) -> Any:
    """Run the case's planted factory (``twin``: its fixed factory, stored as ``<name>~twin``,
    :mod:`.twins`) on its task, instrumented and stored; return the Run."""
    _instrument()
    factory = case.fixed_factory if twin and case.fixed_factory is not None else case.factory
    name = case.name + ("~twin" if twin else "")
    if case.framework == "smolagents":
        return await asyncio.to_thread(_record_sync, case, factory, name)
    import causaltrace

    async with causaltrace.run(task=case.task, verify=case.verify, name=name) as handle:
        try:
            await factory().run(task=case.task)
        except Exception:
            pass
    return handle.run


def stored_run(case: FaultCase, home: str, *, suffix: str = "") -> Any:
    """The run recorded for ``case`` in the store under ``home`` (a ``--home`` of an earlier ``bench faults``): the
    oldest run named after the case (its replays, stored later, carry the same name); ``suffix``: the run stored
    under the case's name plus it (its twin)."""
    from pathlib import Path

    from causaltrace.collector.store import Store
    from causaltrace.config import default_db_path

    store = Store(default_db_path({"CAUSALTRACE_HOME": str(Path(home))}), readonly=True)
    try:
        named = [r["run_id"] for r in store.list_runs() if r["name"] == case.name + suffix]
        if not named:
            raise LookupError(f"no run named {case.name + suffix!r} in the store under {home}")
        return store.get_run(named[-1])
    finally:
        store.close()


def run_wall_seconds(run: Any) -> float:
    """The run's own wall time, from its recorded start to its end (the factory's build included: the suite builds
    the team inside the run marking) — the denominator of the repair ratio. Taken from the Run, not from the time
    this process took to get it: with ``--from-store`` that was the store read (a few ms), which inflated the ratio
    about tenfold. 0 when the run has no timestamps."""
    if run.started_at is None or run.ended_at is None:
        return 0.0
    return max(0.0, (run.ended_at - run.started_at).total_seconds())


async def run_case(case: FaultCase, *, sandbox: Any = None, repair_run: bool = True,
                   on_replay: Callable[[Any, Any], None] | None = None, from_store: str | None = None,
                   twins: bool = False) -> CaseResult:
    """Record one case (or take its run from the store under ``from_store``: module docstring), score the
    diagnosis-only localisation (:func:`~.scoring.localize`), with ``twins`` also its fixed twin with the failing
    outcome substituted (:mod:`.twins`), then (unless ``repair_run=False``) repair it guided by ``graph``'s
    ranking."""
    from causaltrace.testing.faults.scoring import localize

    started = time.perf_counter()
    result = CaseResult(name=case.name, framework=case.framework, fault=case.fault, true_step=None, found_step=None,
                        repaired=False, replays=0, live_calls_before_intervention=0, held_out=case.held_out)
    try:
        run = await record(case) if from_store is None else stored_run(case, from_store)
        result.run_seconds = round(run_wall_seconds(run) or time.perf_counter() - started, 3)
        result.true_step = case.true_step(run)
        errors = [s.index for s in run.steps if s.status == "error"]
        result.first_error_step = errors[0] if errors else None
        if run.outcome.status != "failure":
            raise RuntimeError(f"the planted run did not fail ({run.outcome.status}: {run.outcome.final_answer!r})")
        result.localization = await localize(run, result.true_step)
        if twins and case.fixed_factory is not None:
            from causaltrace.testing.faults.twins import TWIN_SUFFIX, score_twin

            twin = await record(case, twin=True) if from_store is None else stored_run(case, from_store,
                                                                                      suffix=TWIN_SUFFIX)
            result.twin = await score_twin(case, run, twin)
        if repair_run:
            repair_started = time.perf_counter()
            await _repair_case(case, run, result, sandbox, on_replay)
            result.repair_seconds = round(time.perf_counter() - repair_started, 3)
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        if os.environ.get("CAUSALTRACE_DEBUG"):
            traceback.print_exc()
    result.seconds = round(time.perf_counter() - started, 3)
    return result


async def _repair_case(case: FaultCase, run: Any, result: CaseResult, sandbox: Any,
                       on_replay: Callable[[Any, Any], None] | None) -> None:
    """Repair ``run`` with deterministic mutations, guided by ``graph``'s diagnosis (its findings give the
    corrections), over every candidate step of the run in ONE search: the corrections of all of them first, earliest
    step first, then — only if none flipped — their alternatives, then the tool results (issue 32 item 5). Two
    searches, the diagnosis's candidates and then the rest, tried the first group's alternatives before the second
    group's corrections, and probed the factory twice."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.replay.executor import default_sandbox
    from causaltrace.replay.repair import repair

    diagnosis = await diagnose(run, "graph", None, store=False)
    sandbox = sandbox or default_sandbox()
    ranked = {c.step_id for c in diagnosis.candidates}
    everything = [s.step_id for s in run.candidate_steps()]
    if not everything:
        return
    rep = await repair(run, case.factory, case.verify, candidates=everything, k=0, diagnosis=diagnosis,
                       sandbox=sandbox, on_replay=on_replay)
    result.replays += rep.replays
    result.live_calls_before_intervention += rep.live_calls_before_intervention
    result.budget_exhausted = rep.budget_exhausted
    result.corrections_untried = rep.corrections_untried
    if rep.repaired and rep.decisive is not None:
        result.repaired = True
        result.found_step = rep.decisive.index
        result.found_in = "diagnosis" if rep.decisive.step_id in ranked else "all"
        best = rep.decisive.best
        result.found_basis = best.intervention.basis if best is not None else None
        result.pair = "correction" if rep.pair is not None else (
            "alternative" if rep.alternative_pair is not None else None)


def _run_named(name: str, repair_run: bool = True, from_store: str | None = None, twins: bool = False) -> CaseResult:
    os.environ.pop("CAUSALTRACE_MODEL", None)
    case = next(c for c in all_cases() if c.name == name)
    return asyncio.run(run_case(case, repair_run=repair_run, from_store=from_store, twins=twins))


def run_suite(cases: Sequence[FaultCase] | None = None, *, jobs: int = 1, repair_run: bool = True,
              progress: Callable[[CaseResult, int, int], None] | None = None,
              from_store: str | None = None, twins: bool = False) -> dict[str, Any]:
    """Run the cases (all by default) and return the benchmark JSON (ARCHITECTURE "Benchmark JSON");
    ``repair_run=False`` scores localisation only (no replay); ``from_store`` scores the runs stored under that
    home instead of running the teams (module docstring); ``twins`` adds each case's fixed twin (:mod:`.twins`)."""
    cases = list(cases) if cases is not None else all_cases()
    results: list[CaseResult] = []
    if jobs <= 1:
        os.environ.pop("CAUSALTRACE_MODEL", None)
        for case in cases:
            res = asyncio.run(run_case(case, repair_run=repair_run, from_store=from_store, twins=twins))
            results.append(res)
            if progress:
                progress(res, len(results), len(cases))
    else:
        import multiprocessing

        names = [c.name for c in cases]
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            by_name: dict[str, CaseResult] = {}
            for res in pool.map(_run_named, names, [repair_run] * len(names), [from_store] * len(names),
                                [twins] * len(names)):
                by_name[res.name] = res
                if progress:
                    progress(res, len(by_name), len(names))
            results = [by_name[n] for n in names]
    return summarize(results, repair_run=repair_run)


def is_blind(name: str) -> bool:
    """A case of issue 32's blind split (written blind to the attribution, scored once at its freeze)."""
    return name.startswith("blind32-")


def summarize(results: Sequence[CaseResult], *, repair_run: bool = True) -> dict[str, Any]:
    """The benchmark JSON: ``n``, ``localized_rate`` / ``repaired_rate`` (repair's replay-verified answer, rates
    0–100 with 2 decimals), ``mean_replays`` and ``cases`` (the suite's keys), then issue 20's: ``localization``
    (diagnosis-only top-1 / top-3 / ±1 per method on the ``held_out`` half and on the ``tuning`` half),
    ``by_type`` and ``by_framework`` (the same on each group's held-out half, with the group's repair rates),
    ``replays`` / ``seconds_per_case`` / ``repair_run_ratio`` (median and max)."""
    from causaltrace.testing.faults.scoring import aggregate, spread

    n = len(results)

    def rate(count: int, total: int = n) -> float:
        return round(100.0 * count / total, 2) if total else 0.0

    rows = [r.as_json() for r in results]

    def group(members: list[dict[str, Any]]) -> dict[str, Any]:
        held = [r for r in members if r["held_out"]]
        return {"n": len(members), "held_out": aggregate(held),
                "localized_rate": rate(sum(r["true_step"] is not None and r["found_step"] == r["true_step"]
                                           for r in members), len(members)),
                "repaired_rate": rate(sum(bool(r["repaired"]) for r in members), len(members))}

    ratios = [r.repair_seconds / r.run_seconds for r in results if r.repair_ratio is not None]
    report = {
        "n": n,
        "localized_rate": rate(sum(r.localized for r in results)),
        "repaired_rate": rate(sum(r.repaired for r in results)),
        "mean_replays": round(sum(r.replays for r in results) / n, 2) if n else 0.0,
        "cases": rows,
        "repair": repair_run,
        "held_out_rule": "every second case of each type, in suite order",
        # issue 32 item 8: the teams written blind (blind32-*) are their own split, not part of the zoo's halves
        "localization": {"held_out": aggregate(r for r in rows if r["held_out"] and not is_blind(r["name"])),
                         "tuning": aggregate(r for r in rows if not r["held_out"]),
                         **({"blind": aggregate(r for r in rows if is_blind(r["name"]))}
                            if any(is_blind(r["name"]) for r in rows) else {})},
        "by_type": {fault: group([r for r in rows if r["fault"] == fault])
                    for fault in sorted({r["fault"] for r in rows})},
        "by_framework": {fw: group([r for r in rows if r["framework"] == fw])
                         for fw in sorted({r["framework"] for r in rows})},
        "replays": spread([float(r.replays) for r in results]),
        "seconds_per_case": spread([r.seconds for r in results]),
        "repair_run_ratio": spread(ratios),
        "errors": sum(1 for r in results if r.error),
        # issue 32 item 5: what repair's flips rest on, the pairs exported by default, budgets that ran out
        "flips_by_basis": {b: sum(1 for r in results if r.found_basis == b) for b in ("correction", "alternative")},
        "pairs_by_basis": {b: sum(1 for r in results if r.pair == b) for b in ("correction", "alternative")},
        "localized_by_correction": sum(1 for r in results if r.localized and r.found_basis == "correction"),
        "budget_exhausted": sum(1 for r in results if r.budget_exhausted),
        "budget_exhausted_with_corrections_untried": sum(1 for r in results if r.budget_exhausted
                                                         and r.corrections_untried),
        "calibration": _graph_calibration([r for r in rows if r["held_out"]]),
    }
    if any(r.get("twin") for r in rows):
        from causaltrace.testing.faults.twins import summarize_twins

        report["twins"] = summarize_twins(rows)
    report_details[id(report)] = list(results)
    return report


def _graph_calibration(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``graph``'s calibration (accuracy per confidence quartile, ECE) on ``rows``' diagnosis-only answers."""
    from causaltrace.attribution.stages.confidence import calibration

    graph = [((r.get("localization") or {}).get("graph") or {}) for r in rows]
    return calibration([(g.get("confidence"), bool(g.get("top1"))) for g in graph])


#: the full CaseResults behind a report (for the table), keyed by ``id(report)``; not part of the JSON
report_details: dict[int, list[CaseResult]] = {}


def render_table(report: dict[str, Any], stream: TextIO = sys.stdout) -> None:
    """A plain-text table of the cases (``graph``'s diagnosis-only rank, repair's answer), the held-out
    localisation per type and method, and the summary line."""
    details = {r.name: r for r in report_details.get(id(report), [])}
    head = f"{'case':<26} {'framework':<10} {'fault':<22} {'ho':>2} {'true':>5} {'graph':>5} {'rank':>4} " \
           f"{'found':>5} {'loc':>4} {'rep':>4} {'replays':>7} {'live<':>5} {'sec':>6}"
    print(head, file=stream)
    print("-" * len(head), file=stream)
    for row in report["cases"]:
        d = details.get(row["name"])
        graph = (row.get("localization") or {}).get("graph") or {}
        localized = row["found_step"] is not None and row["found_step"] == row["true_step"]
        print(f"{row['name']:<26} {row['framework']:<10} {row.get('fault', ''):<22} "
              f"{'*' if row.get('held_out') else '':>2} {_cell(row['true_step']):>5} {_cell(graph.get('first')):>5} "
              f"{_cell(graph.get('rank')):>4} {_cell(row['found_step']):>5} {'yes' if localized else 'no':>4} "
              f"{'yes' if row['repaired'] else 'no':>4} {row['replays']:>7} "
              f"{row['live_calls_before_intervention']:>5} {(f'{d.seconds:.1f}' if d else ''):>6}", file=stream)
        if row.get("error"):
            print(f"    error: {row['error']}", file=stream)
    _render_localization(report, stream)
    print(f"n={report['n']}  localized {report['localized_rate']:.2f}%  repaired {report['repaired_rate']:.2f}%  "
          f"mean replays {report['mean_replays']:.2f}  (* = held out of tuning; graph/rank: the diagnosis alone)",
          file=stream)


def _render_localization(report: dict[str, Any], stream: TextIO) -> None:
    from causaltrace.testing.faults.scoring import METHODS

    methods = (*METHODS, "random")
    print("", file=stream)
    print("held-out localisation, top-1 / top-3 / ±1 (%), diagnosis only:", file=stream)
    print(f"{'group':<24} {'n':>3} " + " ".join(f"{m:>21}" for m in methods), file=stream)

    def line(label: str, agg: dict[str, Any]) -> None:
        cells = " ".join(f"{agg[m]['top1']:>6.1f} {agg[m]['top3']:>6.1f} {agg[m]['near']:>6.1f}  " for m in methods)
        print(f"{label:<24} {agg['n']:>3} {cells}", file=stream)

    for fault, group in report.get("by_type", {}).items():
        line(fault, group["held_out"])
    for framework, group in report.get("by_framework", {}).items():
        line(framework, group["held_out"])
    line("ALL (held out)", report["localization"]["held_out"])
    line("ALL (tuning half)", report["localization"]["tuning"])
    if "blind" in report["localization"]:
        line("BLIND (blind32-*)", report["localization"]["blind"])


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _require_frameworks(frameworks: set[str]) -> None:
    """Import the frameworks the chosen cases run on, before any case: without one, every case would only be
    "missed" (each run fails inside, and instrumentation skips a missing framework), so name its extra instead."""
    import importlib

    from causaltrace.exceptions import MissingExtraError

    modules = {"smolagents": ("smolagents",), "autogen": ("autogen_agentchat", "autogen_ext")}
    for framework in sorted(frameworks):
        for module in modules[framework]:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                raise MissingExtraError(exc.name or module, framework) from exc


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
    if getattr(args, "held_out", False):
        cases = [c for c in cases if c.held_out]
    if args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    _require_frameworks({c.framework for c in cases})
    from_store = getattr(args, "from_store", None)
    if from_store is not None and not Path(from_store).is_dir():
        raise UserError(f"--from-store {from_store!r} is not a folder (the --home of an earlier bench faults)")
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="causaltrace-faults-"))
    home.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("CAUSALTRACE_HOME")
    os.environ["CAUSALTRACE_HOME"] = str(home)

    def progress(result: CaseResult, done: int, total: int) -> None:
        graph = (result.localization or {}).get("graph") or {}
        status = "localized" if result.localized else ("repaired" if result.repaired else "missed")
        status += f", graph ranks it #{_cell(graph.get('rank'))}"
        extra = f" — {result.error}" if result.error else ""
        if result.twin is not None:
            twin = result.twin
            extra += (f"; twin: {'finding ' + ','.join(twin['families']) if twin['finding_at_top'] else 'no finding'}"
                      f" at #{_cell(twin['first'])}, confidence {twin['confidence']}")
        print(f"[{done}/{total}] {result.name}: true #{_cell(result.true_step)}, found #{_cell(result.found_step)}, "
              f"{status}, {result.replays} replays, {result.seconds:.1f} s{extra}", file=sys.stderr, flush=True)

    try:
        report = run_suite(cases, jobs=args.jobs, repair_run=getattr(args, "repair", True), progress=progress,
                           from_store=str(Path(from_store).resolve()) if from_store is not None else None,
                           twins=getattr(args, "twins", False))
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
