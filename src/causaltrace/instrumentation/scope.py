"""A scope: context variables (and optionally the current OTel span) set for one ``with`` block, then restored."""

from __future__ import annotations

import contextvars
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

__all__ = ["Scope"]


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
        tokens = self._tokens = []
        for var, value in self._values:  # a loop, not a comprehension (nor map: measured slower for 1-3 variables)
            tokens.append(var.set(value))
        if self._span is not None:
            self._otel_token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._otel_token is not None:
            otel_context.detach(self._otel_token)  # type: ignore[arg-type]
            self._otel_token = None
        for (var, _), token in zip(reversed(self._values), reversed(self._tokens), strict=True):
            var.reset(token)
