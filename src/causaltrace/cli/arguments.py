"""Argument types with ranges for the command parsers: a value out of range is argparse's one-line error (exit 2),
not a run with a nonsensical setting (issue 36 item 6: ``runs --limit -1``, ``show --width -5``, ``pull --timeout
-1``, ``diagnose --min-confidence 2``, ``repair --concurrency 0`` and ``bench whowhen --limit -3`` were accepted).

The types are plain functions of the text (the replay half of the CLI, :mod:`causaltrace._cli_replay`, uses them
too); argparse names the option in its error line."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["fraction", "int_at_least", "seconds", "seconds_or_unbounded"]


def int_at_least(low: int) -> Callable[[str], int]:
    """An integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds: finite and above zero."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def seconds_or_unbounded(text: str) -> float:
    """A bound in seconds where 0 means no bound: finite and not negative."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (no bound) or more seconds, got {text}")
    return value


def fraction(text: str) -> float:
    """A number from 0 to 1 (a confidence)."""
    value = _finite(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value
