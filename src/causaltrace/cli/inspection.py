"""The read-only inspection commands: ``runs``, ``show`` and ``report``.

They open the store read-only, so they work in a read-only directory and never migrate or write it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from causaltrace.cli.common import STATUS_STYLE, console, print_json, short, store
from causaltrace.exceptions import UserError

__all__ = ["add_inspection_commands", "add_report_command", "cmd_report", "cmd_runs", "cmd_show", "render_run"]


def add_inspection_commands(sub: Any) -> None:
    """Add ``runs`` and ``show`` to the ``causaltrace`` subcommands."""
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


def add_report_command(sub: Any) -> None:
    """Add ``report`` to the ``causaltrace`` subcommands (listed last in ``--help``)."""
    p = sub.add_parser("report", help="write a run's report as one self-contained HTML file")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    p.add_argument("--html", required=True, metavar="OUT", help="the HTML file to write")
    p.set_defaults(func=cmd_report)


def _is_replay_name(name: str | None) -> bool:
    """Runs produced by a replay are named "<original name> (replay)" (or "replay") by the playback adapters."""
    return bool(name) and (name == "replay" or str(name).endswith(" (replay)"))


def cmd_runs(args: argparse.Namespace) -> int:
    """List the runs in the store, newest first (read-only: a dead writer's run reads as ``incomplete``)."""
    with store(args, readonly=True) as db:
        rows = db.list_runs(failed=args.failed, limit=None if args.replays else args.limit)
    if not args.replays:  # the runs a replay produced are listed only on request
        rows = [r for r in rows if not _is_replay_name(r.get("name"))][: args.limit]
    if args.json:
        print_json(rows)
        return 0
    from rich.table import Table

    table = Table(title=f"{len(rows)} run(s)", show_lines=False)
    for col in ("run id", "status", "framework", "steps", "started", "task"):
        table.add_column(col, no_wrap=col != "task", overflow="fold" if col == "task" else "ellipsis")
    for row in rows:
        status = row["status"]
        table.add_row(
            row["run_id"],
            f"[{STATUS_STYLE.get(status, '')}]{status}[/]",
            row["framework"],
            str(row["steps"]),
            (row["started_at"] or "")[:19].replace("T", " "),
            short(row.get("task"), 60),
        )
    console().print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Show one run: its steps as a tree with kinds, agents, statuses and dependencies."""
    with store(args, readonly=True) as db:
        run = db.get_run(args.run_id)
    if args.json:
        data = run.model_dump(mode="json", exclude={"recording"})
        data["steps"] = [s.model_dump(mode="json") for s in run.steps]
        data["recorded_calls"] = len(run.recording.calls) if run.recording else 0
        print_json(data)
        return 0
    render_run(run, console(), max_chars=args.width)
    return 0


def _render_head(run: Any, out: Any) -> None:
    """The lines above the step tree: id, framework, status, size, name, task, answer, reason, label."""
    from rich.markup import escape

    status = run.outcome.status
    head = (
        f"[bold]run {run.run_id}[/] · {run.framework} · "
        f"[{STATUS_STYLE.get(status, '')}]{status}[/] · {len(run.steps)} steps"
    )
    if run.name:
        head += f" · {escape(run.name)}"
    out.print(head)
    if run.task:
        out.print(f"[dim]task:[/] {escape(short(run.task, 160))}")
    if run.outcome.final_answer is not None:
        out.print(f"[dim]final answer:[/] {escape(short(run.outcome.final_answer, 160))}")
    if run.outcome.reason:
        out.print(f"[dim]reason:[/] {escape(short(run.outcome.reason, 160))}")
    if run.annotations is not None and run.annotations.mistake_step is not None:
        out.print(
            f"[dim]labelled decisive error:[/] step {run.annotations.mistake_step} by {run.annotations.mistake_agent}"
        )


def _step_label(step: Any, index_of: dict[str, int], max_chars: int) -> str:
    """One node of the step tree: index, kind, agent, tool, status, dependencies, text and error."""
    from rich.markup import escape

    st = step.status
    label = f"[bold]#{step.index}[/] [cyan]{step.kind}[/] [yellow]{escape(step.agent or '-')}[/]"
    if step.tool_name:
        label += f" [magenta]{escape(step.tool_name)}[/]"
    if st != "unset":
        label += f" [{STATUS_STYLE[st]}]{st}[/]"
    if step.depends_on:
        deps = ", ".join(f"{d.kind}←#{index_of.get(d.step_id, '?')}" for d in step.depends_on)
        label += f" [dim]({escape(short(deps, 100))})[/]"
    text = step.content or (step.error.message if step.error else "")
    if text and step.kind != "agent_turn":
        label += f"\n  {escape(short(text, max_chars))}"
    if step.error is not None:
        label += f"\n  [red]{escape(step.error.type)}: {escape(short(step.error.message, max_chars))}[/]"
    return label


def render_run(run: Any, out: Any, *, max_chars: int) -> None:
    """Print ``run`` on the rich console ``out``: its head lines, then its steps as a tree of parent steps."""
    from rich.tree import Tree

    _render_head(run, out)
    index_of = {s.step_id: s.index for s in run.steps}
    tree = Tree("steps", guide_style="dim")
    nodes: dict[str, Any] = {}
    for step in run.steps:
        parent = nodes.get(step.parent_step_id) if step.parent_step_id else None
        nodes[step.step_id] = (parent or tree).add(_step_label(step, index_of, max_chars))
    out.print(tree)


def cmd_report(args: argparse.Namespace) -> int:
    """Write the self-contained HTML report of a stored run (its newest diagnosis and its repair pairs included)."""
    from causaltrace.report import write_report

    with store(args, readonly=True) as db:
        run = db.get_run(args.run_id)
        diagnosis = db.strongest_diagnosis(run.run_id)  # replay > prediction > heuristic, newest within a level
        pairs = db.repair_pairs(run_id=run.run_id)
    try:
        path = write_report(run, args.html, diagnosis=diagnosis, pairs=pairs)
    except OSError as exc:
        raise UserError(f"cannot write {args.html!r}: {exc.strerror or exc}") from exc
    if diagnosis is None:
        print(f"no diagnosis yet: run causaltrace diagnose {run.run_id}", file=sys.stderr)
    print(f"wrote {path}", file=sys.stderr)
    return 0
