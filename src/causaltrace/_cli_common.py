"""What both halves of the ``causaltrace`` command share (cli.py and _cli_replay.py): the argument parser class,
opening the store, and writing an output file.

* :class:`Parser` prints an argument error as ONE line (``causaltrace: error: … (see: causaltrace import --help)``)
  and exits 2, as every other user error does; ``--help`` output is argparse's own, unchanged.
* :func:`open_store` opens ``--db`` (or the default store) read-only for the inspection commands, so a store in a
  read-only directory can be read and nothing is ever migrated or written by them.
* :func:`write_output` creates the parent directories of ``-o FILE`` and turns an OSError into a one-line
  ``UserError``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from causaltrace.exceptions import UserError

__all__ = ["EXIT_USER_ERROR", "Parser", "open_store", "write_output"]

EXIT_USER_ERROR = 2


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line errors (the usage block stays in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER_ERROR, f"causaltrace: error: {message} (see: {self.prog} --help)\n")


def open_store(args: argparse.Namespace, *, readonly: bool = False) -> Any:
    """The store of ``--db`` (default: ``$CAUSALTRACE_HOME/causaltrace.db``); ``readonly`` for commands that only
    read (they must work in a read-only directory and never migrate the file)."""
    from causaltrace.collector.store import Store

    return Store(getattr(args, "db", None), readonly=readonly)


def write_output(target: str, text: str) -> Path:
    """Write ``text`` to ``target``, creating its directory first; a UserError naming the file when it cannot."""
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {target!r}: {exc.strerror or exc}") from exc
    return path
