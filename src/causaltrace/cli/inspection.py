"""The read-only inspection commands: ``runs``, ``show`` and ``report``.

They open the store read-only, so they work in a read-only directory and never migrate or write it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from causaltrace.cli.arguments import int_at_least
from causaltrace.cli.common import STATUS_STYLE, console, short, store
from causaltrace.cli.fleet import SINCE_HELP, cmd_report_fleet
from causaltrace.collector.span_links import LINK_HELP, Linker
from causaltrace.exceptions import UserError
from causaltrace.report.terminal import guarded, safe_text, write_json

__all__ = ["add_inspection_commands", "add_report_command", "cmd_report", "cmd_runs", "cmd_show", "render_run",
           "unique_prefixes"]


def add_inspection_commands(sub: Any) -> None:
    """Add ``runs`` and ``show`` to the ``causaltrace`` subcommands."""
    p = sub.add_parser("runs", help="list stored runs")
    p.add_argument("--failed", action="store_true", help="only runs whose outcome is a failure")
    p.add_argument("--limit", type=int_at_least(0), default=None, help="at most N runs")
    p.add_argument("--replays", action="store_true", help="also list the runs that replays produced")
    p.add_argument("--wide", action="store_true",
                   help="full ids, times and tasks (by default the table fits the terminal: ids cut to a unique "
                        "prefix, the task to one line)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", help="show a run's steps as a tree")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--width", type=int_at_least(1), default=None,
                   help="characters of step text to show (default: what fits the terminal's line, at most 120)")
    p.add_argument("--link", metavar="SPEC", default=None, help=LINK_HELP)
    p.set_defaults(func=cmd_show)


def add_report_command(sub: Any) -> None:
    """Add ``report`` to the ``causaltrace`` subcommands (listed last in ``--help``)."""
    p = sub.add_parser("report", help="write a run's report (or --fleet: the fleet page) as one self-contained "
                                      "HTML file")
    p.add_argument("run_id", metavar="RUN_ID", nargs="?", help="a run id or a unique prefix of one (or --fleet)")
    p.add_argument("--html", required=True, metavar="OUT", help="the HTML file to write")
    p.add_argument("--fleet", action="store_true",
                   help="the fleet page instead: failures by agent, step kind, error category and framework")
    p.add_argument("--since", metavar="WHEN", default=None, help="with --fleet: " + SINCE_HELP)
    p.set_defaults(func=cmd_report)


def _is_replay_name(name: str | None) -> bool:
    """Runs produced by a replay are named "<original name> (replay)" (or "replay") by the playback adapters."""
    return bool(name) and (name == "replay" or str(name).endswith(" (replay)"))


def cmd_runs(args: argparse.Namespace) -> int:
    """List the runs in the store, newest first (read-only: a dead writer's run reads as ``incomplete``).

    The table fits the terminal (80 columns included): each id is cut to its shortest unique prefix (8 characters
    at least; ``show`` and every command take it), the status is never cut, the task takes what is left on one
    line. ``--wide`` shows everything: full ids, seconds, the task folded over lines."""
    with store(args, readonly=True) as db:
        every = db.list_runs(failed=args.failed)
        rows = every if args.replays else [r for r in every if not _is_replay_name(r.get("name"))]
        rows = rows[: args.limit]
        for row in rows:  # each run's one verdict, with its source (issue 33 item 7)
            row["verdict"] = _verdict_of_row(db.verdict(row["run_id"]))
    if args.json:
        write_json(rows)
        return 0
    prefixes = {} if args.wide else unique_prefixes([r["run_id"] for r in every])
    out = guarded(console())
    table, needs = _runs_table(rows, prefixes, wide=args.wide, width=out.width)
    if args.wide and out.width < needs:  # --wide never cuts: lines longer than the terminal wrap in it
        out = guarded(console(width=needs))
        table, _ = _runs_table(rows, prefixes, wide=True, width=needs)
    out.print(table)
    return 0


_SEPARATORS = "-_.:/"
#: the verdict's level (``collector.verdict.verdict_level``) in the runs table's few characters
_LEVEL_WORD = {1: "correction", 2: "tool fault", 3: "finding", 4: "alternative", 5: "uncertain", 6: "failed"}


def _verdict_of_row(d: Any) -> dict[str, Any] | None:
    """A run's verdict in ``runs``: its step, agent, level and source (``runs --json``'s ``verdict``)."""
    from causaltrace.collector.verdict import VERDICT_LEVELS, verdict_level

    if d is None:
        return None
    level = verdict_level(d)[0]
    return {"decisive_step_index": d.decisive_step_index, "agent": d.agent, "level": level,
            "level_name": VERDICT_LEVELS.get(level), "method": d.method, "verified_by": d.verified_by,
            "basis": d.basis}


def _verdict_cell(v: dict[str, Any] | None) -> str:
    """``#6 solver · correction``, ``uncertain``, or empty (no diagnosis yet)."""
    if v is None:
        return ""
    word = _LEVEL_WORD.get(v["level"], "")
    if v["level"] >= 5 or v["decisive_step_index"] is None:
        return word
    return f"#{v['decisive_step_index']} {v['agent'] or '-'} · {word}"


def unique_prefixes(ids: list[str], *, shortest: int = 8) -> dict[str, str]:
    """Each id's shortest prefix (``shortest`` characters at least) that no other id starts with — as git
    abbreviates commits — carried on to the end of the word it cuts in an id made of words (``whowhen-algo-10``,
    not ``whowhen-algo-1``, which reads as another run). An id that prefixes another id stays whole."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, run_id in enumerate(ordered):
        need = shortest
        for other in (ordered[i - 1] if i else "", ordered[i + 1] if i + 1 < len(ordered) else ""):
            common = next((k for k, (x, y) in enumerate(zip(run_id, other, strict=False)) if x != y),
                          min(len(run_id), len(other)))
            need = max(need, common + 1)
        end = need
        if need < len(run_id) and run_id[need - 1] not in _SEPARATORS and any(c in _SEPARATORS for c in run_id[:need]):
            # cut inside a word of a worded id: finish the word
            end = next((k for k in range(need, len(run_id)) if run_id[k] in _SEPARATORS), len(run_id))
        out[run_id] = run_id[:end]
    return out


def _started(value: str | None, *, wide: bool) -> str:
    """``2026-12-02 07:34:43`` with ``--wide``; else ``12-02 07:34`` this year, ``2025-12-02`` before."""
    text = (value or "")[:19].replace("T", " ")
    if wide or len(text) < 16:
        return text
    from datetime import UTC, datetime

    return text[5:16] if text[:4] == str(datetime.now(UTC).year) else text[:10]


#: the narrowest the task column gets (a terminal narrower than the other columns plus this cuts the table)
_TASK_MIN = 12


def _runs_table(rows: list[dict[str, Any]], prefixes: dict[str, str], *, wide: bool, width: int) -> tuple[Any, int]:
    """The table of ``runs`` for a ``width``-column console, and the width it needs: every column but the task at
    its content's width (the framework at most 12 unless wide), the task on one line in what is left (folded over
    lines when wide)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    cells = [
        [row["run_id"] if wide else prefixes.get(row["run_id"], row["run_id"]), row["status"], row["framework"] or "",
         str(row["steps"]), _started(row["started_at"], wide=wide), _verdict_cell(row.get("verdict")),
         " ".join((row.get("task") or "").split())]
        for row in rows
    ]
    heads = ["run id", "status", "framework", "steps", "started", "verdict", "task"]
    widths = [max([len(heads[k]), *(len(c[k]) for c in cells)]) for k in range(6)]
    if not wide:
        widths[2] = min(widths[2], 12)  # the framework may be cut ("openinferen…"), never the id or the status
        widths[5] = min(widths[5], 26)
    gap = 3 if wide else 2  # a border and padding between two columns
    needs = sum(widths) + gap * 6 + (4 if wide else 0) + _TASK_MIN
    dropped: list[int] = []
    for k in (4, 2, 5, 3):  # too narrow for everything: drop started, then framework, then verdict, then steps
        if wide or needs <= width:
            break
        dropped.append(k)
        needs -= widths[k] + gap
    task_width = max(_TASK_MIN, width - needs + _TASK_MIN)
    table = Table(title=f"{len(rows)} run(s)", show_lines=False, box=box.ROUNDED if wide else box.SIMPLE_HEAD,
                  show_edge=wide, pad_edge=wide, padding=(0, 1) if wide else (0, 1, 0, 0))
    keep = [k for k in range(7) if k not in dropped]
    for k in keep:
        table.add_column(heads[k], no_wrap=k != 6 or not wide, width=widths[k] if k < 6 else task_width,
                         overflow="fold" if k == 6 and wide else "ellipsis", justify="right" if k == 3 else "left")
    for c in cells:
        c[1] = f"[{STATUS_STYLE.get(c[1], '')}]{c[1]}[/]"
        c[0], c[2], c[5] = escape(c[0]), escape(c[2]), escape(c[5])
        c[6] = escape(c[6] if wide else short(c[6], task_width))
        table.add_row(*(c[k] for k in keep))
    return table, needs


def cmd_show(args: argparse.Namespace) -> int:
    """Show one run: its steps as a tree with kinds, agents, statuses and dependencies."""
    with store(args, readonly=True) as db:
        run = db.get_run(args.run_id)
        diagnosis = db.verdict(run.run_id)  # the run's one verdict (issue 32 item 7)
    linker = Linker.parse(args.link) if args.link else None
    if args.json:
        data = run.model_dump(mode="json", exclude={"recording"})
        data["steps"] = [s.model_dump(mode="json") for s in run.steps]
        if linker is not None:
            for step, out in zip(run.steps, data["steps"], strict=True):
                out["link"] = linker.link(step.source)
        data["recorded_calls"] = len(run.recording.calls) if run.recording else 0
        data["diagnosis"] = diagnosis.model_dump(mode="json") if diagnosis is not None else None
        write_json(data)
        return 0
    render_run(run, console(), max_chars=args.width, diagnosis=diagnosis)
    _print_sources(run, linker)
    return 0


def _print_sources(run: Any, linker: Linker | None) -> None:
    """An imported run's steps with the spans they came from (issue 34 item 3), and their links with --link."""
    rows = [s for s in run.steps if s.source is not None and s.source.span_id]
    if not rows:
        return
    print(f"source spans (trace {rows[0].source.trace_id}):")
    for step in rows:
        link = linker.link(step.source) if linker is not None else None
        kind = f" {step.source.span_kind}" if step.source.span_kind else ""
        print(f"  #{step.index:<4} {step.kind:<15} span {step.source.span_id}{kind}" + (f"  {link}" if link else ""))


def _diagnosis_line(run: Any, d: Any) -> str:
    """One line under ``show``'s head: the run's strongest diagnosis, or how to get one."""
    from rich.markup import escape

    from causaltrace.attribution.stages.confidence import is_uncertain

    if d is None:
        return f"[dim]diagnosis: none yet — causaltrace diagnose {run.run_id[:8]}[/]"
    from causaltrace.collector.verdict_text import verdict_view

    how = f"[dim]verdict ({escape(verdict_view(run, d, uncertain=is_uncertain(d)).source)}):[/]"
    if d.failed:
        return f"{how} [red]failed[/] — {escape(short(d.failure_reason or 'no reason given', 120))}"
    conf = f" · confidence {d.confidence:.2f}" if d.confidence is not None else ""
    if is_uncertain(d):
        top = ", ".join(f"#{c.index} {escape(c.agent)}" for c in d.candidates[:3]) or "no candidate"
        return f"{how} [yellow]uncertain[/]{conf} — top 3: {top}"
    who = "the environment (a tool / data fault)" if d.fault_source == "environment" else escape(d.agent or "-")
    category = f" · {d.category}" if d.category else ""
    return f"{how} [bold red]decisive error at #{d.decisive_step_index}[/] by [yellow]{who}[/]{category}{conf}"


def _render_head(run: Any, out: Any) -> None:
    """The lines above the step tree: id, framework, status, size, name, task, answer, reason, label."""
    from rich.markup import escape

    status = run.outcome.status
    head = (
        f"[bold]run {escape(run.run_id)}[/] · {escape(run.framework)} · "
        f"[{STATUS_STYLE.get(status, '')}]{status}[/] · {len(run.steps)} steps"
    )
    out.print(head)
    if run.name:
        out.print(f"[dim]name:[/] {escape(short(run.name, 160))}")
    if run.task:
        out.print(f"[dim]task:[/] {escape(short(run.task, 160))}")
    if run.outcome.final_answer is not None:
        out.print(f"[dim]final answer:[/] {escape(short(run.outcome.final_answer, 160))}")
    if run.outcome.reason:
        out.print(f"[dim]reason:[/] {escape(short(run.outcome.reason, 160))}")
    if run.annotations is not None and run.annotations.mistake_step is not None:
        out.print(
            f"[dim]labelled decisive error:[/] step {run.annotations.mistake_step} by "
            f"{escape(str(run.annotations.mistake_agent))}"
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


def render_run(run: Any, out: Any, *, max_chars: int | None = None, diagnosis: Any = None) -> None:
    """Print ``run`` on the rich console ``out``: its head lines, then its steps as a tree of parent steps.

    A step's text is cut to ``max_chars``; by default to what fits its line of the tree (at most 120), so an
    80-column terminal shows one line of text per step instead of wrapping it under the tree's guides. With a
    ``diagnosis`` (``show`` passes the run's strongest, or None) a line under the head says what it found and its
    decisive step is marked in the tree."""
    from rich.tree import Tree

    out = guarded(out)  # stored text: no control character reaches the terminal
    _render_head(run, out)
    out.print(_diagnosis_line(run, diagnosis))
    decisive = None if diagnosis is None or diagnosis.failed else diagnosis.decisive_step_index
    mark = "◀ decisive"
    if decisive is not None:
        from causaltrace.attribution.stages.confidence import is_uncertain

        mark = "◀ top candidate (uncertain)" if is_uncertain(diagnosis) else mark
    index_of = {s.step_id: s.index for s in run.steps}
    tree = Tree("steps", guide_style="dim")
    nodes: dict[str, Any] = {}
    depth: dict[str, int] = {}
    for step in run.steps:
        parent = nodes.get(step.parent_step_id) if step.parent_step_id else None
        depth[step.step_id] = depth.get(step.parent_step_id, 0) + 1 if parent is not None else 1
        fits = max(20, out.width - 4 * depth[step.step_id] - 2)  # 4 columns of guide per level, 2 of indent
        width = max_chars if max_chars is not None else min(120, fits)
        label = _step_label(step, index_of, width)
        if step.index == decisive:
            first, nl, rest = label.partition("\n")
            label = f"{first}  [bold red]{mark}[/]{nl}{rest}"
        nodes[step.step_id] = (parent or tree).add(label)
    out.print(tree)


def cmd_report(args: argparse.Namespace) -> int:
    """Write the self-contained HTML report of a stored run (its newest diagnosis and its repair pairs included)."""
    from causaltrace.report import write_report

    if args.fleet == bool(args.run_id):
        raise UserError("report takes a RUN_ID or --fleet, not both" if args.run_id else "report needs a RUN_ID or --fleet")
    if args.fleet:
        return cmd_report_fleet(args)
    with store(args, readonly=True) as db:
        run = db.get_run(args.run_id)
        diagnosis = db.verdict(run.run_id)  # the run's one verdict (issue 32 item 7)
        pairs = db.repair_pairs(run_id=run.run_id)
    try:
        path = write_report(run, args.html, diagnosis=diagnosis, pairs=pairs)
    except OSError as exc:
        raise UserError(f"cannot write {args.html!r}: {exc.strerror or exc}") from exc
    if diagnosis is None:
        print(f"no diagnosis yet: run causaltrace diagnose {safe_text(run.run_id)}", file=sys.stderr)
    print(f"wrote {safe_text(path)}", file=sys.stderr)
    return 0
