"""The fleet commands (issue 23 item 3): ``pull`` of many traces (``--jaeger URL --service S``, ``--phoenix URL
--project P``), ``diagnose --all``, ``stats`` and ``report --fleet``.

``pull``, ``diagnose`` and ``report`` keep their parsers in their own modules and hand over here when given the fleet
options; ``stats`` is defined here. Times (``--since``, ``--until``) are a duration back from now (``90m``, ``6h``,
``2d``, ``1h30m``) or an ISO date / datetime (naive = local time).
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from causaltrace.cli.arguments import int_at_least
from causaltrace.cli.common import console, store
from causaltrace.exceptions import UserError
from causaltrace.report.terminal import guarded, safe_text, write_json

__all__ = ["add_diagnose_all_arguments", "add_pull_fleet_arguments", "add_stats_command", "cmd_diagnose_all",
           "cmd_pull_many", "cmd_report_fleet", "cmd_stats", "parse_time"]

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
SINCE_HELP = "only runs started since then: a duration back from now (90m, 6h, 2d) or an ISO date/time"
DEFAULT_SERVICE_SINCE = "6h"


def parse_time(text: str, option: str = "--since") -> datetime:
    """``6h`` → six hours ago; ``2026-12-01`` / ``2026-12-01T20:00`` → that time (local unless it says its zone)."""
    raw = text.strip()
    match = _DURATION.match(raw.lower())
    if raw and match and any(match.groups()):
        days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
        return datetime.now(UTC) - timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a duration (90m, 6h, 2d) or an ISO date/time") from None
    return moment.astimezone(UTC)


def _since(args: argparse.Namespace) -> datetime | None:
    return parse_time(args.since) if getattr(args, "since", None) else None


# ------------------------------------------------------------------------------------------------------------ pull


def add_pull_fleet_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``pull`` that select many traces."""
    p.add_argument("--phoenix", metavar="URL", help="an Arize Phoenix base URL, e.g. http://localhost:6006 (with "
                   "--project): pull the project's traces through its REST API")
    p.add_argument("--project", metavar="P", help="the Phoenix project to pull")
    p.add_argument("--service", metavar="S", help="with --jaeger: pull every trace of this service in the time range")
    p.add_argument("--since", metavar="WHEN", default=None,
                   help=f"traces started since then: 90m, 6h, 2d or an ISO date/time (--service default: "
                        f"{DEFAULT_SERVICE_SINCE}; --phoenix default: all)")
    p.add_argument("--until", metavar="WHEN", default=None, help="traces started before then (default: now)")
    p.add_argument("--limit", type=int_at_least(1), default=None, metavar="N", help="at most N traces (the newest)")
    p.add_argument("--failed", action="store_true", help="only traces whose root span has status ERROR")


def _report_skipped(skipped: list[Any]) -> None:
    from causaltrace.collector.pulled import skipped_lines

    for line in skipped_lines(skipped):
        print(f"causaltrace: {safe_text(line)}", file=sys.stderr)


def cmd_pull_many(args: argparse.Namespace, save: Any) -> int:
    """``pull --phoenix URL --project P`` or ``pull --jaeger URL --service S``: store every matching trace's run,
    printing one run id per line; ``save(args, runs)`` stores a batch (the ``import`` rule: same run → unchanged).
    A hostile answer (a 5,000-digit integer, nesting deeper than the stack) is one line naming the server."""
    from causaltrace.collector.safe_input import reading

    with reading(f"the answer of {'Phoenix at ' + args.phoenix if args.phoenix else 'Jaeger at ' + args.jaeger}"):
        return _pull_many(args, save)


def _pull_many(args: argparse.Namespace, save: Any) -> int:
    until = parse_time(args.until, "--until") if args.until else None
    if args.phoenix:
        from causaltrace.collector.phoenix import pull_from_phoenix

        if not args.project:
            raise UserError("pull --phoenix needs --project P (the Phoenix project to pull)")
        pulled = pull_from_phoenix(args.phoenix, args.project, since=_since(args), until=until, failed=args.failed,
                                   limit=args.limit, timeout_s=args.timeout)
        save(args, pulled.runs)
        _report_skipped(pulled.skipped)
        return 0
    from causaltrace.collector.jaeger_fleet import pull_service

    since = parse_time(args.since or DEFAULT_SERVICE_SINCE)
    stored = 0
    skipped: list[Any] = []
    for window in pull_service(args.jaeger, args.service, since, until or datetime.now(UTC), failed=args.failed,
                               limit=args.limit, timeout_s=args.timeout):
        if window.pulled.runs:  # each window is stored before the next is asked: an interrupted pull keeps it
            save(args, window.pulled.runs)
            stored += len(window.pulled.runs)
        skipped.extend(window.pulled.skipped)
    _report_skipped(skipped)
    if not stored:
        what = "failed traces" if args.failed else "traces"
        raise UserError(f"no runs pulled: Jaeger at {args.jaeger} has no {what} of service {args.service!r} that "
                        "form a run in the time range" + (f" ({len(skipped)} skipped)" if skipped else ""))
    return 0


# -------------------------------------------------------------------------------------------------- diagnose --all


def add_diagnose_all_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``diagnose`` for many runs."""
    p.add_argument("--all", dest="all_runs", action="store_true",
                   help="diagnose every stored run that is not a success and has no diagnosis of this method yet "
                        "(resumes where a stopped batch ended)")
    p.add_argument("--failed", action="store_true", help="with --all: only runs whose outcome is a failure")
    p.add_argument("--since", metavar="WHEN", default=None, help="with --all: " + SINCE_HELP)
    p.add_argument("--jobs", type=int_at_least(1), default=1, metavar="N",
                   help="with --all: diagnose in N processes (default 1)")
    p.add_argument("--redo", action="store_true", help="with --all: diagnose runs that already have a diagnosis too")


def _progress_bar() -> tuple[Any, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("diagnosing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=guarded(console(sys.stderr)), transient=False)
    return bar, bar.add_task("diagnose", total=None)


def _run_summary(diagnosis: Any) -> dict[str, Any]:
    """One run's line of ``diagnose --all --json``: its decisive step, or why there is none."""
    return {"run_id": diagnosis.run_id, "decisive_step_index": diagnosis.decisive_step_index,
            "decisive_step_id": diagnosis.decisive_step_id, "agent": diagnosis.agent, "category": diagnosis.category,
            "confidence": diagnosis.confidence, "failed": diagnosis.failed, "failure_reason": diagnosis.failure_reason}


def _batch_json(args: argparse.Namespace, selection: Any, result: Any, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The machine-readable summary ``diagnose --all --json`` prints (README "Fleets")."""
    errors = [{"run_id": run_id, "decisive_step_index": None, "decisive_step_id": None, "agent": None,
               "category": None, "confidence": None, "failed": True, "failure_reason": None, "error": error}
              for run_id, error in (result.errors if result is not None else ())]
    return {"method": args.method, "jobs": args.jobs, "selected": len(selection.todo),
            "diagnosed": result.diagnosed if result is not None else 0,
            "by_workers": result.by_workers if result is not None else 0, "skipped": len(selection.done),
            "failed": (result.failed_diagnoses + len(result.errors)) if result is not None else 0,
            "errors": len(errors), "seconds": round(result.seconds, 3) if result is not None else 0.0,
            "runs_per_second": round(result.runs_per_second, 3) if result is not None else 0.0,
            "runs": runs + errors}


def _check_batch_options(args: argparse.Namespace) -> None:
    """The options of one run that mean nothing for a batch are one-line errors, not silently ignored."""
    if args.factory or args.verify:
        raise UserError("diagnose --all does not replay: --factory / --verify take one run (diagnose RUN_ID)")
    if args.force:  # a batch never diagnoses successes: their diagnoses would count as failures in `stats`
        raise UserError("diagnose --all diagnoses failed and unknown-outcome runs only: --force (analyse a "
                        "successful run) takes one run (diagnose RUN_ID --force)")
    if args.jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {args.jobs}")


def cmd_diagnose_all(args: argparse.Namespace) -> int:
    """Diagnose many stored runs (``causaltrace.attribution.fleet``), with a progress bar on stderr; prints the run
    ids diagnosed, one per line (``--json``: one summary object with each run's decisive step), and a summary line
    on stderr."""
    from causaltrace.attribution.fleet import diagnose_all, select_runs
    from causaltrace.cli.common import csv_values

    _check_batch_options(args)
    with store(args) as db:
        selection = select_runs(db, method=args.method, failed_only=args.failed, since=_since(args), redo=args.redo)
    if not selection.todo:
        print("causaltrace: nothing to diagnose (every selected run has a diagnosis of this method; --redo "
              "diagnoses them again)", file=sys.stderr)
        if args.json:
            write_json(_batch_json(args, selection, None, []))
        return 0
    bar, task = _progress_bar()
    runs: list[dict[str, Any]] = []

    def tick(done: int, total: int, diagnosis: Any) -> None:
        bar.update(task, completed=done, total=total)
        if diagnosis is not None:
            runs.append(_run_summary(diagnosis))

    with bar:
        result = diagnose_all(args.db, selection.todo, method=args.method, model=args.model, jobs=args.jobs,
                              progress=tick, with_answer=args.with_answer, ablate=csv_values(args.ablate),
                              human_speakers=csv_values(args.human_speakers) or None,
                              min_confidence=args.min_confidence)
    if args.json:
        write_json(_batch_json(args, selection, result, runs))
    else:
        for run in runs:
            sys.stdout.write(safe_text(run["run_id"]) + "\n")
    for run_id, error in result.errors:
        print(f"causaltrace: could not diagnose {safe_text(run_id)}: {safe_text(error)}", file=sys.stderr)
    print(f"causaltrace: diagnosed {result.diagnosed} run{'s' if result.diagnosed != 1 else ''} in "
          f"{result.seconds:.1f} s ({result.runs_per_second:.1f} runs/s, {args.jobs} job{'s' if args.jobs != 1 else ''})"
          + (f"; {len(selection.done)} already diagnosed" if selection.done else "")
          + (f"; {result.failed_diagnoses} failed diagnoses" if result.failed_diagnoses else "")
          + (f"; {len(result.errors)} errors" if result.errors else ""), file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------------------------- stats


def add_stats_command(sub: Any) -> None:
    """Add ``stats`` to the ``causaltrace`` subcommands."""
    p = sub.add_parser("stats", help="what fails most across the stored runs: failures by agent, decisive step "
                                     "kind, error category and framework")
    p.add_argument("--since", metavar="WHEN", default=None, help=SINCE_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the aggregate of the stored diagnoses (``causaltrace.collector.fleet_stats``) as tables or JSON."""
    from rich.markup import escape
    from rich.table import Table

    from causaltrace.collector.fleet_stats import GROUPS, fleet_stats

    with store(args, readonly=True) as db:
        stats = fleet_stats(db, since=_since(args))
    _report_unreadable(stats)
    if args.json:
        write_json(stats.to_json())
        return 0
    out = guarded(console())
    out.print(f"{stats.runs} runs, {stats.failed} failed, {stats.diagnosed} diagnosed"
              + (f", {stats.diagnosis_failed} diagnoses failed or uncertain" if stats.diagnosis_failed else "")
              + (f", {stats.undiagnosed} failed runs not yet diagnosed (causaltrace diagnose --all)"
                 if stats.undiagnosed else ""))
    for name, heading in GROUPS:
        table = Table(title=f"failures by {heading}", title_justify="left", show_edge=False)
        for column, justify in ((heading, "left"), ("runs", "right"), ("share", "right"), ("examples", "left")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for bucket in getattr(stats, name):
            table.add_row(escape(bucket.key), str(bucket.count), f"{bucket.share:.0%}", escape(" ".join(bucket.examples)))
        out.print(table)
    return 0


def _report_unreadable(stats: Any) -> None:
    """One line per run a fleet aggregate left out because a stored record of it is damaged (``--json`` counts
    them in ``unreadable``)."""
    for run_id, why in stats.unreadable:
        print(f"causaltrace: skipped run {safe_text(run_id)}: {safe_text(why)}", file=sys.stderr)


# ------------------------------------------------------------------------------------------------- report --fleet


def cmd_report_fleet(args: argparse.Namespace) -> int:
    """Write the fleet page (``causaltrace.report.fleet``) of the stored diagnoses, and beside it the report of each
    run it links to (``<run id>.html``), with each linked run's verdict and its source (issue 33 item 7)."""
    from pathlib import Path

    from causaltrace.collector.fleet_stats import fleet_stats
    from causaltrace.collector.verdict_text import verdict_view
    from causaltrace.report import write_report
    from causaltrace.report.fleet import example_run_ids, report_file_name, write_fleet_report

    folder = Path(args.html).parent
    verdicts: dict[str, tuple[str, str]] = {}
    written = 0
    with store(args, readonly=True) as db:
        stats = fleet_stats(db, since=_since(args))
        try:
            for run_id in example_run_ids(stats):
                run, verdict = db.get_run(run_id), db.verdict(run_id)
                if verdict is not None:
                    view = verdict_view(run, verdict)
                    verdicts[run_id] = (view.headline, view.source)
                write_report(run, folder / report_file_name(run_id), diagnosis=verdict,
                             pairs=db.repair_pairs(run_id=run_id))
                written += 1
            path = write_fleet_report(stats, args.html, verdicts=verdicts)
        except OSError as exc:
            raise UserError(f"cannot write {args.html!r}: {exc.strerror or exc}") from exc
    _report_unreadable(stats)
    print(f"wrote {safe_text(path)} and {written} run report{'s' if written != 1 else ''} beside it", file=sys.stderr)
    return 0
