"""CLI commands of the replay side: ``repair`` and ``pairs export`` (kept apart from cli.py's inspection commands),
and the few helpers both halves of the command share.

``--factory`` and ``--verify`` take ``module:function`` or ``path/to/file.py:function``; the current directory is
put on ``sys.path`` first (ARCHITECTURE "Shared contracts": Factory). ``--verify`` may also be ``text:ANSWER``
(the final answer must contain ANSWER).

Shared helpers (cli.py imports them from here, so the two halves never import each other in a circle):

* :class:`Parser` prints an argument error as ONE line (``causaltrace: error: … (see: causaltrace import --help)``)
  and exits 2, as every other user error does; ``--help`` output is argparse's own, unchanged.
* :func:`open_store` opens ``--db`` (or the default store), read-only for the inspection commands, so a store in a
  read-only directory can be read and nothing is ever migrated or written by them.
* :func:`write_output` creates the parent directories of ``-o FILE`` and turns an OSError into a one-line
  ``UserError``.

The demo's status line (:func:`live_status`) and the commands' consoles write to fixed files and redirect nothing:
a display proxy on ``sys.stdout`` and the replays' output capture wrapped each other and froze ``demo`` in a
terminal (issue 33; :mod:`causaltrace.replay.concurrency`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from causaltrace.exceptions import UserError
from causaltrace.report.terminal import UNSAFE, guarded, safe_text

__all__ = ["EXIT_NO_REPAIR", "EXIT_USER_ERROR", "Parser", "add_keep_server", "add_replay_commands", "live_status",
           "load_callable", "open_store", "write_output"]

EXIT_USER_ERROR = 2
#: ``repair``'s exit code when the search found no repair (0: one was found)
EXIT_NO_REPAIR = 1


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line errors (the usage block stays in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER_ERROR, f"causaltrace: error: {safe_text(message)} (see: {self.prog} --help)\n")


def open_store(args: argparse.Namespace, *, readonly: bool = False) -> Any:
    """The store of ``--db`` (default: ``$CAUSALTRACE_HOME/causaltrace.db``); ``readonly`` for commands that only
    read (they must work in a read-only directory and never migrate the file)."""
    from causaltrace.collector.store import Store

    return Store(getattr(args, "db", None), readonly=readonly)


def add_keep_server(parser: argparse.ArgumentParser) -> None:
    """``--keep-server`` on a command that takes ``--model``: by default the local model server (``--model local``,
    ~3 GB) stops when the command ends; this keeps it for the next command, until ``causaltrace local stop``."""
    parser.add_argument("--keep-server", action="store_true",
                        help="with --model local: leave the local model server running after the command "
                             "(stop it with: causaltrace local stop)")


def write_output(target: str, text: str) -> Path:
    """Write ``text`` to ``target``, creating its directory first; a UserError naming the file when it cannot."""
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {target!r}: {exc.strerror or exc}") from exc
    return path


def load_callable(spec: str, what: str) -> Any:
    """Resolve ``module:function`` or ``path/to/file.py:function`` to the object it names (a UserError if not)."""
    if spec.startswith("text:") and what == "--verify":
        return spec[len("text:") :]
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise UserError(f"{what} {spec!r} must look like module:function or path/to/file.py:function")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if module_part.endswith(".py") or "/" in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise UserError(f"{what}: no such file {module_part!r}")
        name = f"_causaltrace_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise UserError(f"{what}: cannot load {module_part!r}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.resolve().parent))
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_part)
        except ImportError as exc:
            raise UserError(f"{what}: cannot import {module_part!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UserError(f"{what}: {module_part!r} has no attribute {attr!r}") from None


def cmd_repair(args: argparse.Namespace) -> int:
    """Search for the earliest step whose minimal correction flips the run; store the diagnosis and repair pair."""
    from rich.console import Console
    from rich.markup import escape

    from causaltrace.cli.annotation import annotate_from_cli
    from causaltrace.collector.store import Store
    from causaltrace.replay.executor import has_recording
    from causaltrace.replay.repair import repair

    factory = load_callable(args.factory, "--factory")
    verify = load_callable(args.verify, "--verify")
    err = guarded(Console(file=sys.stderr, highlight=False))  # a fixed file: never the replays' routed stream
    with Store(args.db) as store:
        run = store.get_run(args.run_id)
        candidates = [int(i) for i in args.steps.split(",")] if args.steps else None

        def progress(step: Any, result: Any) -> None:
            # the outcome first, and never wrapped or cut: a log or a narrow terminal keeps it
            mark = "[green]flipped[/]" if result.flipped else f"[dim]{result.outcome.status}[/]"
            if result.error is not None:  # bad input or a replay that went wrong: marked, the search goes on
                mark += f" [yellow]({escape(result.error.type)})[/]"
            err.print(f"  {mark} · step #{step.index} {step.kind}: {escape(result.intervention.description)}",
                      soft_wrap=True)

        unit = "replays" if has_recording(run) else "predictions"  # a prediction counts as one replay
        bound = [f"{args.max_replays} {unit}" if args.max_replays else "", f"{args.max_seconds:g} s"
                 if args.max_seconds else "", f"{args.max_alternatives} after the corrections"
                 if args.max_alternatives else ""]
        err.print(f"[dim]repair budget: {' and '.join(b for b in bound if b) or 'unbounded'}; the framework's "
                  "output during replays is kept with each replay[/]", soft_wrap=True)
        result = asyncio.run(
            repair(run, factory, verify, candidates, args.k, model=args.model, store=store, on_replay=progress,
                   mutation_budget=args.budget, environment=not args.no_environment,
                   max_replays=args.max_replays or None, max_seconds=args.max_seconds or None,
                   max_alternatives=args.max_alternatives or None, concurrency=args.concurrency,
                   prune=not args.no_prune)
        )
        verdict = store.verdict(run.run_id)
    out = guarded(Console(file=sys.stdout, highlight=False))
    printed = sum(len(o.splitlines()) for a in result.attempts for o in a.outputs)
    if printed:
        err.print(f"[dim]the framework printed {printed} lines during the replays (kept in the diagnosis's "
                  "replay records)[/]", soft_wrap=True)
    tried = " and ".join(t for t in (f"{result.replays} replays" if result.replays or not result.predictions else "",
                                     f"{result.predictions} predictions" if result.predictions else "") if t)
    pruned = (f" · {len(result.pruned)} step{'s' if len(result.pruned) != 1 else ''} pruned by provenance "
              f"({', '.join(f'#{i}' for i in result.pruned)}: nothing they decided reaches the answer)"
              if result.pruned else "")
    if result.decisive is None and result.nondeterministic:  # issue 36 item 2: a flip that did not reproduce
        out.print(f"[yellow]nondeterministic run[/]: {escape(result.nondeterministic)}; nothing verified, no pair "
                  f"stored ({tried}, {result.seconds:.1f} s)", soft_wrap=True)
        return EXIT_NO_REPAIR
    if result.decisive is None:
        why = f"; the {result.budget_exhausted} budget ran out" if result.budget_exhausted else ""
        why += f" ({escape(result.hung)})" if result.hung else ""  # issue 36 item 3: what hung
        out.print(f"[yellow]no repair found[/] in {tried} ({result.seconds:.1f} s){why}{pruned}", soft_wrap=True)
        _verdict_line(out, run, verdict)
        annotate_from_cli(args, run, verdict)
        return EXIT_NO_REPAIR
    step = run.step(result.decisive.step_id)
    how = escape(result.decisive.best.intervention.description if result.decisive.best else "")
    if result.decisive.phase == "environment":
        out.print(f"[bold]tool / data fault at step #{step.index}[/] ({step.kind} of {escape(step.tool_name or '-')}): "
                  f"the run succeeds if the tool had returned otherwise ({how}); no agent's decision flipped it",
                  soft_wrap=True)
    elif getattr(result.diagnosis, "basis", None) == "alternative":  # a flip that shows no error (issue 32 item 5)
        out.print(f"[bold]the run succeeds if step #{step.index}[/] {step.kind} by [yellow]"
                  f"{escape(step.agent or '-')}[/] does this instead: {how}; nothing shows step #{step.index} was "
                  "wrong", soft_wrap=True)
    else:
        out.print(f"[bold]decisive step #{step.index}[/] {step.kind} by [yellow]{escape(step.agent or '-')}[/]: {how}",
                  soft_wrap=True)
    pair = "yes" if result.pair is not None else f"no ({result.pair_reason})"
    how = "predicted" if result.decisive.best and result.decisive.best.verified_by == "prediction" else "verified by replay"
    out.print(f"{how} · {tried} · {result.seconds:.1f} s{pruned} · pair stored: {pair}", soft_wrap=True)
    _verdict_line(out, run, verdict)
    annotate_from_cli(args, run, verdict)
    return 0


def _verdict_line(out: Any, run: Any, verdict: Any) -> None:
    """The run's verdict after the search (``Store.verdict``: what ``show``, ``diagnose`` and the report say), with
    its source (issue 33 item 7)."""
    from rich.markup import escape

    from causaltrace.attribution.stages.confidence import is_uncertain
    from causaltrace.collector.verdict_text import verdict_view

    if verdict is None:
        return
    view = verdict_view(run, verdict, uncertain=is_uncertain(verdict))
    out.print(f"the run's verdict: [bold]{escape(view.headline)}[/] [dim]({escape(view.source)})[/]", soft_wrap=True)


def cmd_pairs_export(args: argparse.Namespace) -> int:
    """Write the stored repair pairs as JSONL (TRL DPO or OpenAI preference format); with ``--check-template``, also
    report on stderr the pairs whose chosen and rejected render the same under that chat template (issue 33 item 8)."""
    from causaltrace.replay.pair_templates import check_rows, load_template
    from causaltrace.replay.pairs import export_pairs, pair_rows

    template = load_template(args.check_template) if args.check_template is not None else None
    with open_store(args, readonly=True) as store:
        pairs = store.repair_pairs(run_id=args.run)
    chosen = {"include_predicted": args.include_predicted, "include_alternatives": args.include_alternatives}
    check = check_rows(pair_rows(pairs, format="trl-dpo", **chosen), template) if template is not None else None
    text = export_pairs(pairs, format=args.format, **chosen)
    if args.output in (None, "-"):  # JSON escapes C0 itself; DEL, C1 and direction marks as \uXXXX: the same data
        sys.stdout.write(UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))
    else:
        write_output(args.output, text)
        print(f"wrote {text.count(chr(10))} pair(s) to {safe_text(args.output)}", file=sys.stderr)
    for line in check.lines() if check is not None else []:
        print(safe_text(line), file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo team of each framework: trace, diagnose, repair by replay, export the pair, write the report."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from causaltrace.config import causaltrace_home
    from causaltrace.demo import run_demo

    if args.db:
        os.environ["CAUSALTRACE_DB"] = args.db
    frameworks = ["autogen", "smolagents"] if args.framework == "both" else [args.framework]
    # fixed files: the consoles never write through the replays' routed streams, and the status line redirects
    # nothing (the two wrapping each other froze the demo in a terminal, issue 33)
    err = guarded(Console(file=sys.stderr, highlight=False))
    out = guarded(Console(file=sys.stdout, highlight=False))
    out_dir = Path(args.out) if args.out else causaltrace_home() / "demo"
    started = time.perf_counter()
    with live_status(err, "causaltrace demo") as update:

        def say(message: str) -> None:
            update(message)
            err.print(f"[dim]{escape(message)}[/]")

        results = run_demo(frameworks, model=args.model, out_dir=out_dir, say=say)
    # The table fits an 80-column terminal; the fixes, which are long, and the paths go on lines of their own,
    # never hard-wrapped (a path broken over two lines cannot be copied).
    table = Table(title="causaltrace demo", show_lines=False)
    for col in ("framework", "run", "outcome", "decisive step", "replays", "time"):
        table.add_column(col, no_wrap=True)
    for r in results:
        decisive = f"#{r.decisive_index} {r.decisive_kind} by {r.decisive_agent}" if r.decisive_index is not None else "-"
        table.add_row(r.framework, r.run_id[:8], r.status, decisive, str(r.replays), f"{r.seconds:.1f} s")
    out.print(table)
    for r in results:
        if r.repaired:
            out.print(f"[bold]{r.framework}[/] fix (verified by replay): {escape(f'{r.fix} → answer {r.repaired_answer}')}")
            if r.ranked_first_index is not None and r.ranked_first_index != r.decisive_index:
                out.print(f"   ranked first: #{r.ranked_first_index}; replay proved #{r.decisive_index}")
        else:
            out.print(f"[bold]{r.framework}[/]: no repair found (no proposed correction flipped the run)")
        out.print(f"   report:       {escape(str(r.report))}", soft_wrap=True)
        out.print(f"   repair pairs: {escape(str(r.pairs))}", soft_wrap=True)
        out.print(f"   inspect:      causaltrace show {r.run_id}", soft_wrap=True)
    from causaltrace.collector.store_sql import shown_target  # a URL's password is never printed

    store = shown_target(os.environ.get("CAUSALTRACE_DB") or str(causaltrace_home() / "causaltrace.db"))
    out.print(f"store: {escape(store)}  ·  list its runs: causaltrace runs", soft_wrap=True)
    out.print(f"total {time.perf_counter() - started:.1f} s")
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        out.print(f"spans exported over OTLP to {os.environ['OTEL_EXPORTER_OTLP_ENDPOINT']}")
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if hasattr(provider, "force_flush"):
            provider.force_flush()
    return 0 if all(r.repaired for r in results) else 1


@contextlib.contextmanager
def live_status(console: Any, text: str) -> Iterator[Callable[[str], None]]:
    """A transient spinner line on ``console`` (which must write to a fixed file) for the block; yields the function
    that changes its text. Nothing is redirected: ``sys.stdout`` / ``sys.stderr`` stay what they were. ASCII
    spinner frames when the console's encoding is not UTF; the text is cut, never wrapped, on a narrow terminal."""
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.text import Text

    def line(message: str) -> Text:
        return Text(message, no_wrap=True, overflow="ellipsis")

    spinner = Spinner("dots" if console.encoding.lower().startswith("utf") else "line", text=line(text))
    with Live(spinner, console=console, transient=True, redirect_stdout=False, redirect_stderr=False,
              refresh_per_second=10):
        yield lambda message: spinner.update(text=line(message))


def add_replay_commands(sub: Any) -> None:
    """Add ``repair``, ``pairs`` and ``demo`` to the ``causaltrace`` subcommands."""
    from causaltrace.cli.annotation import add_annotate_argument
    from causaltrace.cli.arguments import int_at_least, seconds_or_unbounded
    from causaltrace.replay.repair import DEFAULT_MAX_ALTERNATIVES, DEFAULT_MAX_REPLAYS, DEFAULT_MAX_SECONDS

    d = sub.add_parser("demo", help="run the demo teams: trace, diagnose, repair by replay, report (offline)")
    d.add_argument("--framework", default="both", choices=["autogen", "smolagents", "both"],
                   help="the demo team(s) to run (default: both)")
    d.add_argument("--model", default=os.environ.get("CAUSALTRACE_MODEL"), help="litellm model for the LLM stages")
    d.add_argument("--out", help="directory for the report and pairs (default: $CAUSALTRACE_HOME/demo)")
    add_keep_server(d)
    d.set_defaults(func=cmd_demo)

    p = sub.add_parser("repair", help="find the earliest step whose minimal correction flips a failed run")
    p.add_argument("run_id", metavar="RUN_ID", help="a failed run (id or unique prefix) that has a recording")
    p.add_argument("--factory", required=True, help="module:function or file.py:function building a fresh team")
    p.add_argument("--verify", required=True, help="module:function or file.py:function judging the outcome, or "
                   "text:ANSWER (the final answer must contain ANSWER)")
    p.add_argument("-k", type=int_at_least(0), default=3, help="LLM proposals per step (with --model; default 3)")
    p.add_argument("--model", default=os.environ.get("CAUSALTRACE_MODEL"), help="litellm model for proposals")
    p.add_argument("--steps", help="comma-separated step indexes to try (default: the diagnosis's candidates)")
    p.add_argument("--budget", type=int_at_least(0), default=30, help="deterministic mutation proposals per step (default 30)")
    p.add_argument("--max-replays", type=int_at_least(0), default=DEFAULT_MAX_REPLAYS,
                   help=f"stop the search after this many replays (default {DEFAULT_MAX_REPLAYS}; 0 = no bound); "
                        "on a run without a recording each predicted outcome counts as one")
    p.add_argument("--max-seconds", type=seconds_or_unbounded, default=DEFAULT_MAX_SECONDS,
                   help=f"stop the search after this many seconds (default {DEFAULT_MAX_SECONDS:g}; 0 = no bound)")
    p.add_argument("--max-alternatives", type=int_at_least(0), default=DEFAULT_MAX_ALTERNATIVES,
                   help=f"after every correction failed, stop after this many replays of alternatives and tool "
                        f"results (default {DEFAULT_MAX_ALTERNATIVES}; 0 = no bound): their flips prove no error")
    p.add_argument("--concurrency", type=int_at_least(1), default=None, metavar="N",
                   help="replays of one step's proposals run at once (default min(4, CPU count)); the answer is "
                        "that of --concurrency 1")
    p.add_argument("--no-environment", action="store_true",
                   help="never edit tool results (by default they are tried last, as tool / data faults)")
    p.add_argument("--no-prune", action="store_true",
                   help="try every candidate step, each step's proposals in minimality order (by default provenance "
                        "skips the steps whose values never reach the failing answer and tries a step's suspicious "
                        "edits first)")
    add_annotate_argument(p)
    add_keep_server(p)
    p.set_defaults(func=cmd_repair)

    pairs = sub.add_parser("pairs", help="repair pairs")
    pairs_sub = pairs.add_subparsers(dest="pairs_command", metavar="COMMAND", required=True)
    e = pairs_sub.add_parser("export", help="export repair pairs as JSONL")
    e.add_argument("--format", default="trl-dpo", choices=["trl-dpo", "openai-dpo"],
                   help="trl-dpo (TRL's prompt / chosen / rejected rows) or openai-dpo (OpenAI's preference "
                        "fine-tuning); default trl-dpo")
    e.add_argument("--include-predicted", action="store_true", help="also pairs verified by prediction only")
    e.add_argument("--include-alternatives", action="store_true",
                   help="also pairs of a flip by an alternative (an edit no finding backs: it shows the run could "
                        "have gone otherwise, not that the rejected turn was wrong)")
    e.add_argument("--check-template", metavar="PATH",
                   help="render each pair's chosen and rejected with a chat template (a .jinja file, a "
                        "tokenizer_config.json, a .gguf, or 'smollm2' for the installed SmolLM2 GGUF) and report on "
                        "stderr the pairs that render the same (a template must render tool_calls and tool messages)")
    e.add_argument("--run", help="only the pairs of this run")
    e.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    e.set_defaults(func=cmd_pairs_export)
