"""``causaltrace run FACTORY --task T --verify V [--repair]``: trace one run of a team from the command line and
diagnose it if it fails — the CLI twin of :func:`causaltrace.watch`.

``FACTORY`` builds a fresh team or agent (``module:function`` or ``file.py:function``, as ``repair --factory``);
its ``run(task=T)`` is called inside ``causaltrace.run(task=T, verify=V)`` — awaited when it is a coroutine
(AutoGen), in a worker thread when it is not (smolagents) — with every installed framework instrumented. The run
is stored (``--db``); a failed run is diagnosed (``--method``, ``--model``) and the diagnosis stored, and with
``--repair`` the repair search replays the same factory to prove the decisive step.

Exit codes: 0 when the run succeeded, 3 when it failed (diagnosed), 2 for a user error, 1 for an internal one.
An exception the team raises is the run's failure (it is recorded and reported), not the command's.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
from typing import Any

from causaltrace._cli_replay import add_keep_server, load_callable
from causaltrace.cli.annotation import add_annotate_argument, annotate_from_cli
from causaltrace.cli.common import STATUS_STYLE, console, print_json, short, store
from causaltrace.exceptions import UserError

__all__ = ["EXIT_RUN_FAILED", "add_run_command", "cmd_run"]

#: the exit code of ``causaltrace run`` when the traced run failed
EXIT_RUN_FAILED = 3


def add_run_command(sub: Any) -> None:
    """Add ``run`` to the ``causaltrace`` subcommands."""
    p = sub.add_parser("run", help="trace one run of a team and diagnose it if it fails (the CLI twin of watch)",
                       description="Build a team with FACTORY, run it on --task under causaltrace.run(), store the "
                                   "run, and diagnose it (with --repair: prove the decisive step by replay) if it "
                                   "fails. Exit code 0: the run succeeded; 3: it failed; 2: a user error.")
    p.add_argument("factory", metavar="FACTORY",
                   help="module:function or file.py:function returning a fresh team or agent (its run(task=...) "
                        "is called)")
    p.add_argument("--task", required=True, help="the task given to the team")
    p.add_argument("--verify", required=True,
                   help="module:function or file.py:function judging the outcome, or text:ANSWER (the final answer "
                        "must contain ANSWER)")
    p.add_argument("--repair", action="store_true",
                   help="on failure, also search by replay (rebuilding the team with FACTORY) for the step whose "
                        "correction flips the run")
    p.add_argument("--name", default=None, help="the run's name (default: the factory's name)")
    p.add_argument("--method", default="graph", help="attribution method (default: graph)")
    p.add_argument("--model", default=None,
                   help="litellm model for the LLM stages, or 'local' (default: $CAUSALTRACE_MODEL)")
    p.add_argument("--json", action="store_true", help="print the run's outcome and diagnosis as JSON")
    add_annotate_argument(p)
    add_keep_server(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """Trace one run of the factory's team on the task; diagnose (and repair) it when it fails."""
    factory = load_callable(args.factory, "FACTORY")
    verify = load_callable(args.verify, "--verify")
    if not callable(factory):
        raise UserError(f"FACTORY {args.factory!r} is not callable")
    if args.db:  # the run's live writer resolves its store from the environment at the time of use
        os.environ["CAUSALTRACE_DB"] = args.db
    from causaltrace.instrumentation import instrument

    instrument()
    run, raised = asyncio.run(_traced(factory, args.task, verify, args.name or _name_of(factory)))
    if run is None:
        raise UserError("the run was not recorded (is tracing switched off by CAUSALTRACE_* settings?)")
    diagnosis = None
    if run.outcome.status == "failure":
        diagnosis = asyncio.run(_diagnose(args, run, factory, verify))
    if args.json:
        print_json({"run_id": run.run_id, "outcome": run.outcome.model_dump(mode="json"), "raised": raised,
                    "diagnosis": diagnosis.model_dump(mode="json") if diagnosis is not None else None})
    else:
        _render(run, diagnosis, raised)
    if diagnosis is not None:
        annotate_from_cli(args, run, diagnosis)
    return 0 if run.outcome.status == "success" else EXIT_RUN_FAILED


def _name_of(factory: Any) -> str:
    return str(getattr(factory, "__qualname__", None) or getattr(factory, "__name__", None) or "run")


def _is_coroutine_method(method: Any) -> bool:
    """``team.run`` is ``async def`` (AutoGen) — seen through the instrumentation's wrapt wrapper."""
    return inspect.iscoroutinefunction(method) or inspect.iscoroutinefunction(getattr(method, "__wrapped__", None))


async def _traced(factory: Any, task: str, verify: Any, name: str) -> tuple[Any, str | None]:
    """The run of ``factory()`` on ``task`` and, when the team raised, the exception in one line."""
    import causaltrace

    team = factory()
    method = getattr(team, "run", None)
    if not callable(method):
        raise UserError(f"FACTORY returned {type(team).__name__!r}, which has no run(task) method")
    if _is_coroutine_method(method):
        handle = causaltrace.run(task=task, verify=verify, name=name)
        try:
            async with handle:
                await method(task=task)
        except Exception as exc:  # the team's failure is the run's (its outcome records it): reported, not raised
            return handle.run, _one_line(exc)
        return handle.run, None

    def sync() -> tuple[Any, str | None]:
        handle = causaltrace.run(task=task, verify=verify, name=name)
        try:
            with handle:
                method(task=task)
        except Exception as exc:
            return handle.run, _one_line(exc)
        return handle.run, None

    return await asyncio.to_thread(sync)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {short(str(exc), 200)}"


async def _diagnose(args: argparse.Namespace, run: Any, factory: Any, verify: Any) -> Any:
    """Diagnose the failed run and store the diagnosis; with ``--repair`` the repair search's diagnosis (and pair)."""
    from causaltrace.attribution.engine import diagnose

    diagnosis = await diagnose(run, method=args.method, model=args.model, store=False)
    with store(args) as db:
        if args.repair and run.recording is not None:
            from causaltrace.replay.repair import repair

            result = await repair(run, factory, verify, diagnosis=diagnosis, model=args.model, store=db)
            return db.verdict(run.run_id) or result.diagnosis  # the run's one verdict (issue 33 item 7)
        if args.repair:
            print("causaltrace: the run has no recording, so it cannot be replayed; diagnosed without --repair",
                  file=sys.stderr)
        db.save_diagnosis(diagnosis)
        return db.verdict(run.run_id) or diagnosis


def _render(run: Any, diagnosis: Any, raised: str | None) -> None:
    from rich.markup import escape

    from causaltrace.cli.diagnose import render_diagnosis

    out = console()
    status = run.outcome.status
    out.print(f"[bold]run {run.run_id}[/] · {run.framework} · [{STATUS_STYLE.get(status, '')}]{status}[/] · "
              f"{len(run.steps)} steps")
    if run.outcome.final_answer is not None:
        out.print(f"[dim]final answer:[/] {escape(short(run.outcome.final_answer, 160))}")
    if run.outcome.reason:
        out.print(f"[dim]reason:[/] {escape(short(run.outcome.reason, 160))}")
    if raised:
        out.print(f"[dim]the team raised:[/] {escape(raised)}")
    if diagnosis is not None:
        render_diagnosis(run, diagnosis, out)
    out.print(f"[dim]inspect: causaltrace show {run.run_id} · report: causaltrace report {run.run_id} --html "
              "report.html[/]", soft_wrap=True)
