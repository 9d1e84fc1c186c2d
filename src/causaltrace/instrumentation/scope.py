"""A scope: context variables (and optionally the current OTel span) set for one ``with`` block, then restored."""

from __future__ import annotations

import contextvars
from operator import itemgetter
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

__all__ = ["Scope"]

_SET = contextvars.ContextVar.set
_RESET = contextvars.ContextVar.reset
_FIRST = itemgetter(0)


class Scope:
    """Set context variables and (optionally) the current OTel span for one ``with`` block, then restore them.

    The instrumentation hot path enters a scope around every item a framework stream yields; one plain object with
    ``__enter__`` / ``__exit__`` costs a fraction of nested ``@contextmanager`` generators and ``trace.use_span``.
    """

    __slots__ = ("_otel_token", "_span", "_tokens", "_values")

    def __init__(self, values: tuple[tuple[contextvars.ContextVar[Any], Any], ...], span: Span | None = None) -> None:
        self._values = values
        self._span = span
        self._tokens: list[contextvars.Token[Any]] = []
        self._otel_token: object = None

    def __enter__(self) -> Scope:
        if self._values:  # the variables set in C: no Python loop per scope
            self._tokens = list(map(_SET, *zip(*self._values, strict=True)))
        if self._span is not None:
            self._otel_token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._otel_token is not None:
            otel_context.detach(self._otel_token)  # type: ignore[arg-type]
            self._otel_token = None
        if self._tokens:  # reset in the reverse order, in C
            any(map(_RESET, map(_FIRST, reversed(self._values)), reversed(self._tokens)))  # reset gives None: all
            self._tokens = []
