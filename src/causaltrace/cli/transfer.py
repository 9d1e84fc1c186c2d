"""Moving runs in and out of the store: ``import`` (files), ``pull`` (a Jaeger query endpoint) and ``export``
(OTLP/JSON).

``import`` and ``pull`` print one run id per line; ``export`` writes to stdout unless ``-o FILE`` (its directory
is created).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from causaltrace._cli_replay import write_output
from causaltrace.cli.arguments import seconds
from causaltrace.cli.common import store
from causaltrace.cli.fleet import add_pull_fleet_arguments, cmd_pull_many
from causaltrace.collector.safe_input import check_run_id, reading, refuse_special_file
from causaltrace.exceptions import InvalidInputError, TraceAssemblyError, UserError
from causaltrace.report.terminal import safe_text

__all__ = ["add_transfer_commands", "cmd_export", "cmd_import", "cmd_pull", "save_imported"]

_REPLACE_HELP = "overwrite a stored run of the same id whose content differs (drops its diagnoses and pairs)"


def add_transfer_commands(sub: Any) -> None:
    """Add ``import``, ``pull`` and ``export`` to the ``causaltrace`` subcommands."""
    p = sub.add_parser("import", help="import runs from files; prints one run id per line")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (read recursively) to import")
    p.add_argument("--format", required=True, choices=["whowhen", "otlp-json", "spans", "chat", "auto"],
                   help="input format: whowhen, otlp-json, spans (OTLP JSON, ClickHouse otel_traces rows, snake_case "
                        "span records, Phoenix's REST answers and spans dataframe as JSON), chat (OpenAI messages, "
                        "Who&When with or without labels, an AutoGen TaskResult, smolagents steps; JSON or JSON "
                        "lines) or auto (sniffs each file); a folder goes file by file")
    p.add_argument("--replace", action="store_true", help=_REPLACE_HELP)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("pull", help="pull traces from Jaeger (one by id, or a service's) or Phoenix (a project's)")
    p.add_argument("trace_id", metavar="TRACE_ID", nargs="?",
                   help="the trace id in Jaeger (up to 32 hex digits); without it, --service or --phoenix")
    p.add_argument("--jaeger", metavar="URL", help="Jaeger query base URL, e.g. http://localhost:16686")
    add_pull_fleet_arguments(p)
    p.add_argument("--timeout", type=seconds, default=10.0,
                   help="seconds to wait for each complete answer (default 10)")
    p.add_argument("--replace", action="store_true", help=_REPLACE_HELP)
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("export", help="export a stored run")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id or a unique prefix of one")
    p.add_argument("--format", default="otlp-json", choices=["otlp-json"], help="output format")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument("--redact", action="store_true", help="apply the payload policy (CAUSALTRACE_* env vars)")
    p.set_defaults(func=cmd_export)


def cmd_import(args: argparse.Namespace) -> int:
    """Import runs from files and print one run id per line (ids: see :func:`save_imported`).

    Files named one by one are all or nothing. A folder goes file by file (Who&When folders excepted, read as one
    benchmark): a file that is refused — malformed, no run in it, a run that clashes with a stored one — is one
    line on stderr and the others are stored; its span files are read together, so a trace spread over several
    files is one run; the last line says "N imported, M refused", and any refusal is exit 2."""
    paths = [Path(raw) for raw in args.paths]
    for raw, path in zip(args.paths, paths, strict=True):
        if not path.exists():
            raise UserError(f"no such file or directory: {raw!r}")
        refuse_special_file(path)  # a FIFO would wait for a writer forever, /dev/zero never ends
    if args.format == "whowhen" or not any(path.is_dir() for path in paths):
        if not save_imported(args, (run for path in paths for run in _read(path, args.format))):
            raise UserError("no runs found in the given input")
        return 0
    imported = refused = 0
    span_files = []
    for path in (f for p in paths for f in _files(p)):
        if _format_of(path, args.format) in ("otlp-json", "spans"):
            span_files.append(path)  # read together below: a trace may be spread over several files
            continue
        try:
            if not save_imported(args, _read(path, args.format)):
                raise UserError(f"{path}: no runs found")
        except UserError as exc:
            refused += 1
            _refused(exc.message)
            continue
        imported += 1
    read, failed = _import_span_files(args, span_files)
    imported, refused = imported + len(read - failed), refused + len(span_files) - len(read - failed)
    print(f"causaltrace: {imported} imported, {refused} refused", file=sys.stderr)
    return 2 if refused else 0


def _refused(message: str) -> None:
    print(f"causaltrace: error: {safe_text(message)}", file=sys.stderr)


def _format_of(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    from causaltrace.collector.chatlog import sniff_format

    try:
        return sniff_format(path)
    except UserError:
        return "chat"  # unreadable: refused with its reason by the file-by-file import


def _import_span_files(args: argparse.Namespace, paths: list[Path]) -> tuple[set[Path], set[Path]]:
    """A folder's span files (any shape), their spans grouped by trace across files, each trace stored as its run
    (a trace split over two files is one run, not two clashing halves). A file that cannot be read, and the files of
    a trace that forms no run or clashes with the store, are one line each. Returns the files read and those
    refused."""
    from causaltrace.collector.otlp import iter_runs_from_spans
    from causaltrace.collector.span_shapes import spans_of_file

    traces: dict[str, dict[str, Any]] = {}
    files_of: dict[str, list[Path]] = {}
    read: set[Path] = set()
    for path in paths:
        try:
            with reading(str(path)):
                spans = spans_of_file(path)
        except UserError as exc:
            _refused(exc.message)
            continue
        read.add(path)
        for span in spans:
            traces.setdefault(span.trace_id, {}).setdefault(span.span_id, span)
            if path not in files_of.setdefault(span.trace_id, []):
                files_of[span.trace_id].append(path)
    failed: set[Path] = set()
    for trace_id, spans in traces.items():
        files = ", ".join(str(f) for f in files_of[trace_id])
        try:
            with reading(files):
                save_imported(args, iter_runs_from_spans(spans.values()))
        except (UserError, TraceAssemblyError) as exc:
            _refused(f"{files}: trace {trace_id}: {exc.message}")
            failed.update(files_of[trace_id])
    return read, failed


def save_imported(args: argparse.Namespace, runs: Iterable[Any]) -> list[str]:
    """Store imported runs, print their ids and return them. A run keeps the id it carries
    (``causaltrace.run.id``; Who&When ids hold a digest of the log): the same run again changes nothing, a different
    run of a stored id is refused (exit 2) unless ``--replace``, which also drops the old run's diagnoses and repair
    pairs. All runs go in one transaction, so a refused import (or an input that fails half-way: ``runs`` may be
    read lazily, one trace at a time) stores nothing; only ids are kept, not the runs."""
    ids: dict[str, None] = {}
    with store(args) as db, db.transaction():
        for run in runs:
            check_run_id(run.run_id, f"run {run.run_id[:40]!r}" if isinstance(run.run_id, str) else "a run")
            if run.run_id in ids:
                raise UserError(f"the input holds run {run.run_id!r} twice")
            ids[run.run_id] = None
            db.import_run(run, replace=args.replace)
    for run_id in ids:
        sys.stdout.write(safe_text(run_id) + "\n")
    return list(ids)


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def _read(path: Path, fmt: str) -> Iterator[Any]:
    """:func:`_load` with what a hostile file makes a parser raise (a 5,000-digit integer, nesting deeper than the
    stack, text that is not Unicode) one line naming the file."""
    with reading(str(path)):
        yield from _load(path, fmt)


def _load(path: Path, fmt: str) -> Iterable[Any]:
    """The runs of one input path in one format; ``auto`` sniffs each file (OTLP/JSON spans, else a chat log)."""
    if fmt == "auto":
        from causaltrace.collector.chatlog import sniff_format

        return (run for f in _files(path) for run in _load(f, sniff_format(f)))
    if fmt == "chat":
        from causaltrace.collector.chatlog import load_chat

        return [run for f in _files(path) for run in load_chat(f)]
    if fmt == "spans":
        from causaltrace.collector.span_shapes import iter_span_runs

        return (run for f in _files(path) for run in _assembled(f, iter_span_runs))
    if fmt == "whowhen":
        from causaltrace.collector.whowhen import iter_whowhen, load_whowhen

        if path.is_dir():
            return list(iter_whowhen(path, "all", content_id=True))
        return [load_whowhen(path, content_id=True)]
    from causaltrace.collector.otlp import load_otlp_json

    return [run for f in _files(path) for run in _assembled(f, load_otlp_json)]


def _assembled(path: Path, load: Any) -> Iterator[Any]:
    """``load(path)``'s runs, with steps that do not form a run (the file's spans, not causaltrace) a user error,
    named."""
    try:
        yield from load(path)
    except TraceAssemblyError as exc:
        raise InvalidInputError(f"{path}: the spans do not form a run: {exc.message}") from exc


def cmd_pull(args: argparse.Namespace) -> int:
    """Pull a trace by id from a Jaeger query endpoint into the store (many traces: :mod:`causaltrace.cli.fleet`)."""
    from causaltrace.collector.jaeger import pull_from_jaeger

    if bool(args.jaeger) == bool(args.phoenix):
        raise UserError("pull needs one source: --jaeger URL (with TRACE_ID or --service S) or --phoenix URL")
    if args.phoenix or args.service:
        if args.trace_id:
            raise UserError("pull takes a TRACE_ID or a selection (--service / --phoenix), not both")
        return cmd_pull_many(args, save_imported)
    if not args.trace_id:
        raise UserError("pull --jaeger needs a TRACE_ID or --service S")
    try:
        with reading(f"the answer of Jaeger at {args.jaeger}"):
            runs = pull_from_jaeger(args.trace_id, args.jaeger, timeout_s=args.timeout)
    except TraceAssemblyError as exc:
        raise InvalidInputError(f"trace {args.trace_id} in Jaeger at {args.jaeger}: the spans do not form a run: "
                                f"{exc.message}") from exc
    if not runs:
        raise UserError(f"trace {args.trace_id} in Jaeger at {args.jaeger} holds no causaltrace run")
    save_imported(args, runs)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export a stored run as OTLP JSON (the full stored Run; ``--redact`` applies the payload policy)."""
    from causaltrace.collector.otlp import run_to_otlp

    with store(args, readonly=True) as db:
        run = db.get_run(args.run_id)
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
