"""The ``causaltrace`` command: inspect stored runs, import / export / pull traces.

Conventions (ARCHITECTURE "CLI conventions"): inspection commands print JSON to stdout with ``--json``; ``import``
prints one run id per line; ``export`` writes to stdout unless ``-o FILE`` (its directory is created). A user error
— a bad argument, a bad input file, any problem with the store — prints one line on stderr and exits with 2; an
internal error exits with 1 and points to ``--debug`` (which shows the traceback). The inspection commands (``runs``,
``show``, ``export``, ``report``, ``pairs export``) open the store read-only: they work in a read-only directory and
never migrate or write it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from causaltrace._cli_replay import EXIT_USER_ERROR, Parser, add_keep_server, open_store, write_output
from causaltrace.exceptions import CausaltraceError, UserError

__all__ = ["main"]

EXIT_INTERNAL_ERROR = 1
#: The pip extra that brings each optional top-level module a command may import (a missing one is a user error).
_EXTRA_OF = {"autogen_agentchat": "autogen", "autogen_core": "autogen", "autogen_ext": "autogen",
             "smolagents": "smolagents", "docker": "docker"}


# ---------------------------------------------------------------------------------------------------- helpers


def _store(args: argparse.Namespace, *, readonly: bool = False) -> Any:
    return open_store(args, readonly=readonly)


def _console(stream: TextIO | None = None) -> Any:
    from rich.console import Console

    out = stream or sys.stdout
    width = None if out.isatty() else 160  # rich's 80-column default for pipes cuts ids and step text
    return Console(file=out, highlight=False, soft_wrap=False, width=width)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


_STATUS_STYLE = {
    "success": "green",
    "failure": "red",
    "unknown": "yellow",
    "incomplete": "magenta",
    "running": "cyan",
    "ok": "green",
    "error": "bold red",
    "unset": "dim",
}


def _short(text: str | None, width: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# --------------------------------------------------------------------------------------------------- commands


def _is_replay_name(name: str | None) -> bool:
    """Runs produced by a replay are named "<original name> (replay)" (or "replay") by the playback adapters."""
    return bool(name) and (name == "replay" or str(name).endswith(" (replay)"))


def cmd_runs(args: argparse.Namespace) -> int:
    """List the runs in the store, newest first (read-only: a dead writer's run reads as ``incomplete``)."""
    with _store(args, readonly=True) as store:
        rows = store.list_runs(failed=args.failed, limit=None if args.replays else args.limit)
    if not args.replays:  # the runs a replay produced are listed only on request
        rows = [r for r in rows if not _is_replay_name(r.get("name"))][: args.limit]
    if args.json:
        _print_json(rows)
        return 0
    from rich.table import Table

    table = Table(title=f"{len(rows)} run(s)", show_lines=False)
    for col in ("run id", "status", "framework", "steps", "started", "task"):
        table.add_column(col, no_wrap=col != "task", overflow="fold" if col == "task" else "ellipsis")
    for row in rows:
        status = row["status"]
        table.add_row(
            row["run_id"],
            f"[{_STATUS_STYLE.get(status, '')}]{status}[/]",
            row["framework"],
            str(row["steps"]),
            (row["started_at"] or "")[:19].replace("T", " "),
            _short(row.get("task"), 60),
        )
    _console().print(table)
    return 0


def _step_json(step: Any) -> dict[str, Any]:
    data = step.model_dump(mode="json")
    return data


def cmd_show(args: argparse.Namespace) -> int:
    """Show one run: its steps as a tree with kinds, agents, statuses and dependencies."""
    with _store(args, readonly=True) as store:
        run = store.get_run(args.run_id)
    if args.json:
        data = run.model_dump(mode="json", exclude={"recording"})
        data["steps"] = [_step_json(s) for s in run.steps]
        data["recorded_calls"] = len(run.recording.calls) if run.recording else 0
        _print_json(data)
        return 0
    _render_run(run, _console(), max_chars=args.width)
    return 0


def _render_run(run: Any, console: Any, *, max_chars: int) -> None:
    from rich.markup import escape
    from rich.tree import Tree

    status = run.outcome.status
    head = (
        f"[bold]run {run.run_id}[/] · {run.framework} · "
        f"[{_STATUS_STYLE.get(status, '')}]{status}[/] · {len(run.steps)} steps"
    )
    if run.name:
        head += f" · {escape(run.name)}"
    console.print(head)
    if run.task:
        console.print(f"[dim]task:[/] {escape(_short(run.task, 160))}")
    if run.outcome.final_answer is not None:
        console.print(f"[dim]final answer:[/] {escape(_short(run.outcome.final_answer, 160))}")
    if run.outcome.reason:
        console.print(f"[dim]reason:[/] {escape(_short(run.outcome.reason, 160))}")
    if run.annotations is not None and run.annotations.mistake_step is not None:
        console.print(
            f"[dim]labelled decisive error:[/] step {run.annotations.mistake_step} by {run.annotations.mistake_agent}"
        )
    index_of = {s.step_id: s.index for s in run.steps}
    tree = Tree("steps", guide_style="dim")
    nodes: dict[str, Any] = {}
    for step in run.steps:
        st = step.status
        label = f"[bold]#{step.index}[/] [cyan]{step.kind}[/] [yellow]{escape(step.agent or '-')}[/]"
        if step.tool_name:
            label += f" [magenta]{escape(step.tool_name)}[/]"
        if st != "unset":
            label += f" [{_STATUS_STYLE[st]}]{st}[/]"
        if step.depends_on:
            deps = ", ".join(f"{d.kind}←#{index_of.get(d.step_id, '?')}" for d in step.depends_on)
            label += f" [dim]({escape(_short(deps, 100))})[/]"
        text = step.content or (step.error.message if step.error else "")
        if text and step.kind != "agent_turn":
            label += f"\n  {escape(_short(text, max_chars))}"
        if step.error is not None:
            label += f"\n  [red]{escape(step.error.type)}: {escape(_short(step.error.message, max_chars))}[/]"
        parent = nodes.get(step.parent_step_id) if step.parent_step_id else None
        nodes[step.step_id] = (parent or tree).add(label)
    console.print(tree)


def cmd_import(args: argparse.Namespace) -> int:
    """Import runs from files and print one run id per line (ids: see :func:`_save_imported`)."""
    runs: list[Any] = []
    for raw in args.paths:
        path = Path(raw)
        if not path.exists():
            raise UserError(f"no such file or directory: {raw!r}")
        runs.extend(_load(path, args.format))
    if not runs:
        raise UserError("no runs found in the given input")
    _save_imported(args, runs)
    return 0


def _save_imported(args: argparse.Namespace, runs: list[Any]) -> None:
    """Store imported runs and print their ids. A run keeps the id it carries (``causaltrace.run.id``; Who&When
    ids hold a digest of the log): the same run again changes nothing, a different run of a stored id is refused
    (exit 2) unless ``--replace``, which also drops the old run's diagnoses and repair pairs. Every run is checked
    before any is written, so a refused import stores nothing."""
    seen: set[str] = set()
    with _store(args) as store, store.transaction():
        for run in runs:
            if run.run_id in seen:
                raise UserError(f"the input holds run {run.run_id!r} twice")
            seen.add(run.run_id)
            store.import_run(run, replace=args.replace)
    for run in runs:
        sys.stdout.write(run.run_id + "\n")


def _load(path: Path, fmt: str) -> list[Any]:
    """The runs of one input path in one format; ``auto`` sniffs each file (OTLP/JSON spans, else a chat log)."""
    if fmt == "auto":
        from causaltrace.collector.chatlog import sniff_format

        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        return [run for f in files for run in _load(f, sniff_format(f))]
    if fmt == "chat":
        from causaltrace.collector.chatlog import load_chat

        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        return [run for f in files for run in load_chat(f)]
    if fmt == "whowhen":
        from causaltrace.collector.whowhen import iter_whowhen, load_whowhen

        if path.is_dir():
            return list(iter_whowhen(path, "all", content_id=True))
        return [load_whowhen(path, content_id=True)]
    from causaltrace.collector.otlp import load_otlp_json

    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    out: list[Any] = []
    for f in files:
        out.extend(load_otlp_json(f))
    return out


def cmd_pull(args: argparse.Namespace) -> int:
    """Pull a trace by id from a Jaeger query endpoint into the store."""
    from causaltrace.collector.jaeger import pull_from_jaeger

    runs = pull_from_jaeger(args.trace_id, args.jaeger, timeout_s=args.timeout)
    if not runs:
        raise UserError(f"trace {args.trace_id} in Jaeger at {args.jaeger} holds no causaltrace run")
    _save_imported(args, runs)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export a stored run as OTLP JSON (the full stored Run; ``--redact`` applies the payload policy)."""
    from causaltrace.collector.otlp import run_to_otlp

    with _store(args, readonly=True) as store:
        run = store.get_run(args.run_id)
    policy = None
    if args.redact:
        from functools import partial

        from causaltrace.config import TraceConfig
        from causaltrace.instrumentation import apply_payload_policy

        policy = partial(apply_payload_policy, config=TraceConfig.from_env())
    document = run_to_otlp(run, attribute_policy=policy)
    text = json.dumps(document, ensure_ascii=False) + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        write_output(args.output, text)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    """Diagnose a stored run, print the diagnosis and store it with the run."""
    from contextlib import nullcontext

    from causaltrace._cli_replay import load_callable
    from causaltrace.attribution.engine import diagnose_sync
    from causaltrace.replay.causalflow import verification_scope

    if (args.factory is None) != (args.verify is None):
        raise UserError("--factory and --verify go together (replay needs both)")
    scope: Any = nullcontext()
    if args.factory is not None:
        scope = verification_scope(load_callable(args.factory, "--factory"), load_callable(args.verify, "--verify"))
    with _store(args) as store:
        store.mark_incomplete()
        run = store.get_run(args.run_id)
        if run.outcome.status == "success" and not args.force:
            raise UserError(f"run {run.run_id} succeeded (its outcome is success): nothing to diagnose; "
                            "--force analyses it anyway")
        with scope:
            diagnosis = diagnose_sync(run, args.method, args.model, with_answer=args.with_answer,
                                      ablate=_csv(args.ablate), human_speakers=_csv(args.human_speakers) or None,
                                      min_confidence=args.min_confidence, force=args.force, store=False)
        store.save_diagnosis(diagnosis)
    if args.json:
        _print_json(diagnosis.model_dump(mode="json"))
        return 0
    _render_diagnosis(run, diagnosis, _console())
    return 0


def _csv(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for raw in values or () for v in raw.split(",") if v.strip()]


def _render_uncertain(d: Any, console: Any) -> bool:
    """Below the confidence threshold (or with no decisive step): say "uncertain" and show the top 3 with their
    evidence instead of one verdict (issue 20 item 6). False when the answer is confident enough."""
    from rich.markup import escape

    from causaltrace.attribution.stages.confidence import UNCERTAIN_BELOW

    low = d.confidence is not None and d.confidence < UNCERTAIN_BELOW and d.verified_by == "heuristic"
    if not (low or (d.decisive_step_index is None and d.candidates)):
        return False
    conf = f"confidence {d.confidence:.2f}" if d.confidence is not None else "no confidence"
    console.print(f"[bold yellow]uncertain[/] ({conf}): the evidence does not single out one step; the top 3:")
    for n, c in enumerate(d.candidates[:3], 1):
        console.print(f"  {n}. step {c.index} by [yellow]{escape(c.agent)}[/] (score {c.score:.3f}): "
                      f"{escape('; '.join(c.reasons))}")
    return True


def _render_diagnosis(run: Any, d: Any, console: Any) -> None:
    from rich.markup import escape

    head = f"[bold]diagnosis of run {run.run_id}[/] · method {d.method}"
    if d.model:
        head += f" · model {escape(d.model)}"
    head += f" · verified by [cyan]{d.verified_by}[/]"
    console.print(head)
    if d.failed:
        console.print(f"[bold red]failed:[/] {escape(d.failure_reason or 'no reason given')}")
    elif _render_uncertain(d, console):
        pass
    else:
        step = run.step_at(d.decisive_step_index) if d.decisive_step_index is not None else None
        where = f"step {d.decisive_step_index}" if step is not None else "no step"
        kind = f" ({step.kind})" if step is not None else ""
        console.print(f"[bold]decisive error:[/] {where}{kind} by [yellow]{escape(d.agent or '-')}[/]")
        if d.category:
            console.print(f"[bold]category:[/] {d.category} {escape(d.category_name or '')}")
        if step is not None:
            console.print(f"[dim]step text:[/] {escape(_short(step.content, 200))}")
        if d.explanation:
            console.print(f"[bold]why:[/] {escape(d.explanation)}")
        if d.evidence:
            path = " → ".join(f"#{e.index} {e.role}" for e in d.evidence)
            console.print(f"[bold]evidence path:[/] {path}")
        if d.candidates:
            from rich.table import Table

            table = Table(title="top candidates", show_lines=False)
            for col in ("rank", "step", "agent", "score", "reasons"):
                table.add_column(col, overflow="fold" if col == "reasons" else "ellipsis")
            for n, c in enumerate(d.candidates[:5], 1):
                table.add_row(str(n), str(c.index), escape(c.agent), f"{c.score:.3f}",
                              escape(_short("; ".join(c.reasons), 140)))
            console.print(table)
    cost = d.cost
    money = f" · ${cost.usd:.4f}" if cost.usd is not None else ""
    stages = ", ".join(f"{k}: {v}" for k, v in cost.calls_by_stage.items())
    console.print(
        f"[dim]cost: {cost.llm_calls} LLM call(s){f' ({stages})' if stages else ''}"
        f"{f', {cost.cached_calls} from cache' if cost.cached_calls else ''} · {cost.input_tokens} in / "
        f"{cost.output_tokens} out tokens · {cost.seconds:.2f} s{money}[/]"
    )


def _wide_console(stream: TextIO) -> Any:
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=False, width=None if stream.isatty() else 220)


def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark attribution methods on Who&When: a table on stdout (stderr with --json -) and optional JSON."""
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from causaltrace.attribution.bench import bench_whowhen, default_data_dir, render_table, select_runs

    methods = _csv(args.method)
    if not methods:
        raise UserError("--method needs at least one method name")
    data_dir = Path(args.data) if args.data else default_data_dir()
    runs = select_runs(data_dir, args.subset, limit=args.limit, order=args.order, split=args.split)
    err_console = _wide_console(sys.stderr)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True) as progress:
        task = progress.add_task("diagnosing", total=len(runs) * len(methods))

        def tick(method: str, run: Any, diagnosis: Any) -> None:
            progress.update(task, advance=1, description=f"{method} · {run.run_id}")

        report = asyncio.run(
            bench_whowhen(data_dir, methods, args.model, subset=args.subset, with_answer=args.with_answer,
                          concurrency=args.concurrency, ablate=_csv(args.ablate), progress=tick, runs=runs,
                          split=args.split, human_speakers=_csv(args.human_speakers) or None)
        )
    to_stdout = args.json == "-"
    render_table(report, err_console if to_stdout else _wide_console(sys.stdout))
    if args.json:
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        if to_stdout:
            sys.stdout.write(text)
        else:
            write_output(args.json, text)
            print(f"wrote {args.json}", file=sys.stderr)
    return 0


def cmd_bench_faults(args: argparse.Namespace) -> int:
    """The fault-injection suite (issue 7 "Proof"): offline localisation and repair of planted errors."""
    from causaltrace.testing.faults.runner import bench_faults_command

    return bench_faults_command(args)


def cmd_local_status(args: argparse.Namespace) -> int:
    """Show the local model server of this ``$CAUSALTRACE_HOME`` (``--model local``), if one is running."""
    from causaltrace.attribution.local_model import server_status
    from causaltrace.config import causaltrace_home

    status = server_status()
    if args.json:
        _print_json(status)
        return 0
    if status is None:
        print(f"no local model server is running for {causaltrace_home()}")
        return 0
    rss = f", {status['rss_mb']} MB RSS" if status["rss_mb"] is not None else ""
    how = "kept (--keep-server)" if status["kept"] else ("in use by a command" if status["in_use"] else "idle")
    print(f"local model server: pid {status['pid']}, {status['api_base']}{rss}, {how}; "
          "stop it with: causaltrace local stop")
    return 0


def cmd_local_stop(args: argparse.Namespace) -> int:
    """Stop the local model server of this ``$CAUSALTRACE_HOME`` (by its pid)."""
    from causaltrace.attribution.local_model import server_info, stop_server
    from causaltrace.config import causaltrace_home

    server = server_info()
    if server is None or not stop_server():
        print(f"no local model server is running for {causaltrace_home()}")
        return 0
    print(f"stopped the local model server (pid {server.pid})")
    return 0


def _release_local_server(args: argparse.Namespace) -> None:
    """The end of a command: stop the local model server it used unless ``--keep-server`` (local_model.py), and
    say in one line when one is left running. Nothing happens when the command never touched the local model."""
    if "causaltrace.attribution.local_model" not in sys.modules:
        return
    from causaltrace.attribution.local_model import release_server

    try:
        server, why = release_server(keep=bool(getattr(args, "keep_server", False)))
    except OSError as exc:  # the state directory went away or became unwritable: say so, never mask the exit code
        print(f"causaltrace: could not release the local model server: {exc}", file=sys.stderr)
        return
    if server is not None:
        reason = "kept by --keep-server" if why == "kept" else "still in use by another command"
        print(f"causaltrace: the local model server is still running (pid {server.pid}, {reason}); "
              "stop it with: causaltrace local stop", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    """Write the self-contained HTML report of a stored run (its newest diagnosis and its repair pairs included)."""
    from causaltrace.report import write_report

    with _store(args, readonly=True) as store:
        run = store.get_run(args.run_id)
        diagnosis = store.strongest_diagnosis(run.run_id)  # replay > prediction > heuristic, newest within a level
        pairs = store.repair_pairs(run_id=run.run_id)
    try:
        path = write_report(run, args.html, diagnosis=diagnosis, pairs=pairs)
    except OSError as exc:
        raise UserError(f"cannot write {args.html!r}: {exc.strerror or exc}") from exc
    if diagnosis is None:
        print(f"no diagnosis yet: run causaltrace diagnose {run.run_id}", file=sys.stderr)
    print(f"wrote {path}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``causaltrace`` command."""
    parser = Parser(
        prog="causaltrace",
        description="Trace LLM multi-agent runs, find the decisive error of a failed run, and prove it by replay.",
    )
    parser.add_argument("--db", help="the store: a file path or a postgresql:// URL (default: $CAUSALTRACE_DB, "
                        "else $CAUSALTRACE_HOME/causaltrace.db)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("runs", help="list stored runs")
    p.add_argument("--failed", action="store_true", help="only runs whose outcome is a failure")
    p.add_argument("--limit", type=int, default=None, help="at most N runs")
    p.add_argument("--replays", action="store_true", help="also list the runs that replays produced")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", help="show a run's steps as a tree")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--width", type=int, default=120, help="characters of step text to show (default 120)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("import", help="import runs from files; prints one run id per line")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", required=True, choices=["whowhen", "otlp-json", "chat", "auto"],
                   help="input format: whowhen, otlp-json, chat (OpenAI messages, Who&When with or without labels, "
                        "an AutoGen TaskResult, smolagents steps; JSON or JSON lines) or auto (sniffs each file)")
    p.add_argument("--replace", action="store_true",
                   help="overwrite a stored run of the same id whose content differs (drops its diagnoses and pairs)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("pull", help="pull a trace by id from a Jaeger query endpoint")
    p.add_argument("trace_id", metavar="TRACE_ID")
    p.add_argument("--jaeger", required=True, metavar="URL", help="Jaeger query base URL, e.g. http://localhost:16686")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    p.add_argument("--replace", action="store_true",
                   help="overwrite a stored run of the same id whose content differs (drops its diagnoses and pairs)")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("export", help="export a stored run")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--format", default="otlp-json", choices=["otlp-json"], help="output format")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument("--redact", action="store_true", help="apply the payload policy (CAUSALTRACE_* env vars)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("diagnose", help="find the decisive error of a stored run (and store the diagnosis)")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    p.add_argument("--method", default="graph", help="attribution method (default: graph)")
    p.add_argument("--model", default=None,
                   help="litellm model for the LLM stages, or 'local' (default: $CAUSALTRACE_MODEL)")
    p.add_argument("--with-answer", action="store_true", help="put the ground-truth answer in the prompts")
    p.add_argument("--ablate", action="append", metavar="STAGE", help="switch a stage off (repeatable, or a,b)")
    p.add_argument("--json", action="store_true", help="print the Diagnosis as JSON")
    p.add_argument("--force", action="store_true", help="diagnose a run whose outcome is success anyway")
    p.add_argument("--min-confidence", type=float, default=None, metavar="C",
                   help="below this confidence (0-1) name no decisive step, only the ranked candidates")
    p.add_argument("--human-speakers", action="append", metavar="NAMES",
                   help="speakers who count as humans that cannot be at fault, comma-separated (default: the task "
                        "giver only, so a simulated user can be blamed)")
    p.add_argument("--factory", help="module:function or file.py:function: verify candidates by replay")
    p.add_argument("--verify", help="module:function, file.py:function or text:ANSWER: the verifier for replay")
    add_keep_server(p)
    p.set_defaults(func=cmd_diagnose)

    p = sub.add_parser("bench", help="benchmark attribution methods")
    bench = p.add_subparsers(dest="bench_kind", metavar="BENCHMARK")
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
    b.add_argument("--limit", type=int, default=None, metavar="N", help="the first N traces (see --order)")
    b.add_argument("--order", default="file", choices=["file", "size"],
                   help="file: file-number order; size: smallest first (by characters)")
    b.add_argument("--concurrency", type=int, default=4, metavar="C", help="traces (and LLM calls) at a time")
    b.add_argument("--ablate", action="append", metavar="STAGE", help="switch a stage off (repeatable, or a,b)")
    b.add_argument("--human-speakers", action="append", metavar="NAMES",
                   help="speakers who count as humans that cannot be at fault, comma-separated (default: the task "
                        "giver only, so a simulated user can be blamed)")
    b.add_argument("--data", default=None, metavar="DIR", help="the Who&When folder (default: ../shared/data/whowhen)")
    b.add_argument("--json", default=None, metavar="OUT", help="write the results as JSON to OUT ('-' = stdout)")
    add_keep_server(b)
    b.set_defaults(func=cmd_bench)
    b = bench.add_parser("faults", help="the fault-injection suite: localise and repair planted errors offline")
    b.add_argument("--json", default=None, metavar="OUT", help="write the results as JSON to OUT ('-' = stdout)")
    b.add_argument("--framework", default=None, choices=["smolagents", "autogen"], help="default: both")
    b.add_argument("--case", action="append", metavar="NAME", help="run only these cases (repeatable, or a,b)")
    b.add_argument("--jobs", type=int, default=1, metavar="N", help="cases run in N processes (default 1)")
    b.add_argument("--no-repair", dest="repair", action="store_false",
                   help="score the diagnosis-only localisation, replay nothing")
    b.add_argument("--held-out", dest="held_out", action="store_true",
                   help="run only the cases held out of tuning (every second case of each type)")
    b.add_argument("--home", default=None, metavar="DIR",
                   help="store the runs and replays in DIR (default: a temporary store, removed afterwards)")
    b.set_defaults(func=cmd_bench_faults)
    p.set_defaults(func=_bench_help(p))
    from causaltrace._cli_replay import add_replay_commands

    add_replay_commands(sub)

    p = sub.add_parser("local", help="the local model server that --model local starts: status, stop")
    local = p.add_subparsers(dest="local_command", metavar="ACTION", required=True)
    a = local.add_parser("status", help="show the server of this $CAUSALTRACE_HOME (pid, address, memory)")
    a.add_argument("--json", action="store_true", help="print JSON (null when none is running)")
    a.set_defaults(func=cmd_local_status)
    a = local.add_parser("stop", help="stop the server of this $CAUSALTRACE_HOME (by its pid)")
    a.set_defaults(func=cmd_local_stop)

    p = sub.add_parser("report", help="write a run's report as one self-contained HTML file")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    p.add_argument("--html", required=True, metavar="OUT", help="the HTML file to write")
    p.set_defaults(func=cmd_report)
    return parser


def _bench_help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USER_ERROR

    return show


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``causaltrace`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USER_ERROR
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return _run(func, args)
    finally:
        _release_local_server(args)


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run one command, turning its errors into the exit codes of the module docstring."""
    try:
        return func(args)
    except UserError as exc:
        print(f"causaltrace: error: {exc.message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except CausaltraceError as exc:
        if args.debug:
            raise
        print(f"causaltrace: error: {exc.message} (run with --debug for details)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    except KeyboardInterrupt:
        print("causaltrace: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        extra = _EXTRA_OF.get((exc.name or "").split(".")[0]) if isinstance(exc, ModuleNotFoundError) else None
        if extra is not None:  # a framework extra is not installed: a user error naming the extra
            print(f"causaltrace: error: this command needs {exc.name!r}; install it with: "  # type: ignore[attr-defined]
                  f"pip install 'causaltrace[{extra}]'", file=sys.stderr)
            return EXIT_USER_ERROR
        if args.debug:
            raise
        print(f"causaltrace: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
