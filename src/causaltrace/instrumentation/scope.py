"""A scope: context variables (and optionally the current OTel span) set for one ``with`` block, then restored."""

from __future__ import annotations

import contextvars
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Span

__all__ = ["Scope"]


def _otel_context_var() -> contextvars.ContextVar[Context] | None:
    """The context variable OpenTelemetry's default runtime context keeps the current Context in (its private
    ``_RUNTIME_CONTEXT._current_context``: the one place it is read); None when another runtime context is
    configured (``OTEL_PYTHON_CONTEXT``) or the attribute is not there: the context API is used then."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    if type(runtime) is not ContextVarsRuntimeContext:
        return None
    var = getattr(runtime, "_current_context", None)
    return var if isinstance(var, contextvars.ContextVar) else None


#: Set and reset directly, as ``otel_context.attach`` / ``detach`` do through the runtime context (two Python calls
#: each, and two more to read the current Context): a scope is entered around every item a framework stream yields.
_OTEL_CONTEXT = _otel_context_var()
#: A context variable nobody reads: what :meth:`Scope.parts` gives as the first of a scope that sets none.
_NOTHING: contextvars.ContextVar[Any] = contextvars.ContextVar("causaltrace_scope_nothing", default=None)


class Scope:
    """Set context variables and (optionally) the current OTel span for one ``with`` block, then restore them.

    The instrumentation hot path enters a scope around every item a framework stream yields; one plain object with
    ``__enter__`` / ``__exit__`` costs a fraction of nested ``@contextmanager`` generators and ``trace.use_span``.
    The span is made current in the OTel Context current at each entry (``trace.set_span_in_context``), that
    Context made once per Context entered from (a stream's scope is entered from the same one item after item).
    """

    __slots__ = ("_made", "_otel_token", "_span", "_tokens", "_values")

    def __init__(self, values: tuple[tuple[contextvars.ContextVar[Any], Any], ...], span: Span | None = None) -> None:
        self._values = values
        self._span = span
        self._tokens: list[contextvars.Token[Any]] = []
        self._otel_token: Any = None
        #: (the Context entered from, it with the span set): replaced as one tuple (a scope may be entered on two
        #: threads).
        self._made: tuple[Context, Context] | None = None

    def parts(self) -> tuple[Any, ...] | None:
        """This scope for a caller that sets and resets it item after item with no call (an AutoGen stream:
        ``Scope.__enter__`` / ``__exit__`` are two calls per item and layer): ``(var0, value0, var1, value1, rest,
        span, otel_var)`` — its first two context variables and values (``var1`` None when it has one; a variable
        nobody reads when it has none) to keep in locals, any more (``rest``, a list of pairs) to set in a loop, all
        reset in the reverse order; its span to set in the OTel Context current at each item on OTel's context
        variable ``otel_var``, as :meth:`__enter__` does. None when the span goes through the context API here
        (another runtime context): enter the scope then."""
        var = _OTEL_CONTEXT
        if self._span is not None and var is None:
            return None
        values = self._values or ((_NOTHING, None),)
        (var0, value0), *rest = values
        var1 = value1 = None
        if rest:
            (var1, value1), *rest = rest
        return var0, value0, var1, value1, rest, self._span, var

    def __enter__(self) -> Scope:
        tokens = self._tokens = []
        for var, value in self._values:  # a loop, not a comprehension (nor map: measured slower for 1-3 variables)
            tokens.append(var.set(value))
        if self._span is not None:
            var = _OTEL_CONTEXT
            if var is None:
                self._otel_token = otel_context.attach(trace.set_span_in_context(self._span))
            else:
                current = var.get()
                made = self._made
                if made is None or made[0] is not current:
                    made = self._made = (current, trace.set_span_in_context(self._span, current))
                self._otel_token = var.set(made[1])
        return self

    def __exit__(self, *exc: object) -> None:
        token = self._otel_token
        if token is not None:
            self._otel_token = None
            if _OTEL_CONTEXT is None:
                otel_context.detach(token)
            else:
                try:
                    _OTEL_CONTEXT.reset(token)
                except Exception:  # a token of another Context: the API's detach logs it, as it would have
                    otel_context.detach(token)
        for (var, _), token in zip(reversed(self._values), reversed(self._tokens), strict=True):
            var.reset(token)
