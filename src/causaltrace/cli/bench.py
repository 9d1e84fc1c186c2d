"""``causaltrace bench``: the Who&When benchmark of the attribution methods and the fault-injection suite."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from causaltrace._cli_replay import EXIT_USER_ERROR, add_keep_server, write_output
from causaltrace.cli.arguments import int_at_least
from causaltrace.cli.common import csv_values, wide_console
from causaltrace.cli.diagnose import HUMAN_SPEAKERS_HELP
from causaltrace.exceptions import UserError
from causaltrace.report.terminal import safe_json, safe_text

__all__ = ["add_bench_commands", "cmd_bench", "cmd_bench_faults"]


def add_bench_commands(sub: Any) -> None:
    """Add ``bench whowhen`` and ``bench faults`` to the ``causaltrace`` subcommands (``bench`` alone: its help)."""
    p = sub.add_parser("bench", help="benchmark attribution methods")
    bench = p.add_subparsers(dest="bench_kind", metavar="BENCHMARK")
    _add_whowhen(bench)
    _add_faults(bench)
    p.set_defaults(func=_bench_help(p))


def _add_whowhen(bench: Any) -> None:
    b = bench.add_parser("whowhen", help="the Who&When benchmark (184 failed multi-agent logs)")
    b.add_argument("--method", required=True, action="append", metavar="M[,M2,…]",
                   help="method(s) to compare, comma-separated")
    b.add_argument("--model", default=None, help="litellm model, or 'local' (default: $CAUSALTRACE_MODEL)")
    b.add_argument("--subset", default="all", choices=["algo", "hand", "all"], help="default: all")
    b.add_argument("--split", default="all", choices=["dev", "test", "all"],
                   help="dev: even file numbers (tune here); test: odd file numbers (seen by earlier tuning); "
                        "default: all")
    answer = b.add_mutually_exclusive_group()
    answer.add_argument("--with-answer", dest="with_answer", action="store_true",
                        help="put the ground-truth answer in the prompts (the papers' setting)")
    answer.add_argument("--without-answer", dest="with_answer", action="store_false", help="the default")
    b.set_defaults(with_answer=False)
    b.add_argument("--limit", type=int_at_least(1), default=None, metavar="N", help="the first N traces (see --order)")
    b.add_argument("--order", default="file", choices=["file", "size"],
                   help="file: file-number order; size: smallest first (by characters)")
    b.add_argument("--concurrency", type=int_at_least(1), default=4, metavar="C", help="traces (and LLM calls) at a time")
    b.add_argument("--ablate", action="append", metavar="STAGE", help="switch a stage off (repeatable, or a,b)")
    b.add_argument("--human-speakers", action="append", metavar="NAMES", help=HUMAN_SPEAKERS_HELP)
    b.add_argument("--data", default=None, metavar="DIR", help="the Who&When folder (default: ../shared/data/whowhen)")
    b.add_argument("--json", default=None, metavar="OUT", help="write the results as JSON to OUT ('-' = stdout)")
    add_keep_server(b)
    b.set_defaults(func=cmd_bench)


def _add_faults(bench: Any) -> None:
    b = bench.add_parser("faults", help="the fault-injection suite: localise and repair planted errors offline")
    b.add_argument("--json", default=None, metavar="OUT", help="write the results as JSON to OUT ('-' = stdout)")
    b.add_argument("--framework", default=None, choices=["smolagents", "autogen"], help="default: both")
    b.add_argument("--case", action="append", metavar="NAME", help="run only these cases (repeatable, or a,b)")
    b.add_argument("--jobs", type=int_at_least(1), default=1, metavar="N", help="cases run in N processes (default 1)")
    b.add_argument("--no-repair", dest="repair", action="store_false",
                   help="score the diagnosis-only localisation, replay nothing")
    b.add_argument("--held-out", dest="held_out", action="store_true",
                   help="run only the cases held out of tuning (every second case of each type)")
    b.add_argument("--home", default=None, metavar="DIR",
                   help="store the runs and replays in DIR (default: a temporary store, removed afterwards)")
    b.add_argument("--from-store", dest="from_store", default=None, metavar="DIR",
                   help="score the runs an earlier --home DIR recorded instead of running the teams again")
    b.add_argument("--twins", action="store_true",
                   help="also record each case's fixed team and diagnose it with the failing run's outcome "
                        "substituted: the twin 'no finding at the top' rate and the confidence's AUROC")
    b.set_defaults(func=cmd_bench_faults)


def _bench_help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USER_ERROR

    return show


def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark attribution methods on Who&When: a table on stdout (stderr with --json -) and optional JSON."""
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from causaltrace.attribution.bench import bench_whowhen, default_data_dir, render_table, select_runs

    methods = csv_values(args.method)
    if not methods:
        raise UserError("--method needs at least one method name")
    data_dir = Path(args.data) if args.data else default_data_dir()
    runs = select_runs(data_dir, args.subset, limit=args.limit, order=args.order, split=args.split)
    err_console = wide_console(sys.stderr)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True) as progress:
        task = progress.add_task("diagnosing", total=len(runs) * len(methods))

        def tick(method: str, run: Any, diagnosis: Any) -> None:
            progress.update(task, advance=1, description=f"{method} · {run.run_id}")

        report = asyncio.run(
            bench_whowhen(data_dir, methods, args.model, subset=args.subset, with_answer=args.with_answer,
                          concurrency=args.concurrency, ablate=csv_values(args.ablate), progress=tick, runs=runs,
                          split=args.split, human_speakers=csv_values(args.human_speakers) or None)
        )
    to_stdout = args.json == "-"
    render_table(report, err_console if to_stdout else wide_console(sys.stdout))
    if to_stdout:  # the logs' texts reach the terminal: their control characters escaped (the same data)
        sys.stdout.write(safe_json(report) + "\n")
    elif args.json:
        write_output(args.json, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {safe_text(args.json)}", file=sys.stderr)
    return 0


def cmd_bench_faults(args: argparse.Namespace) -> int:
    """The fault-injection suite (issue 7 "Proof"): offline localisation and repair of planted errors."""
    from causaltrace.testing.faults.runner import bench_faults_command

    return bench_faults_command(args)
