"""One wrapped stream for the three AutoGen async generators the adapter wraps: ``create_stream`` (a model call,
:mod:`._model_calls`), ``run_stream`` (a team or agent run, :mod:`._runs`) and ``on_messages_stream`` (an agent
turn, :mod:`._turns`).

Each is wrapped alike, so the generator protocol lives here once: the wrapper's ``begin`` runs when the stream is
first iterated (as the framework's own generator body would), each ``__anext__`` runs inside the wrapper's scope,
every item passes on unchanged, and the wrapper's ``end`` runs exactly once however the stream ends — exhausted,
raised (the exception passes through unchanged) or closed early by the consumer (``aclose``, a ``break``; the
wrapped generator is closed first, so its own clean-up still runs).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import set_span_in_context

from causaltrace.instrumentation.scope import Scope

__all__ = ["StreamHooks", "scoped_stream"]


@dataclass(eq=False)
class StreamHooks:
    """What one wrapped stream does around the framework's generator.

    ``scope`` is entered around every ``__anext__`` (and around the early close when ``close_in_scope``): one
    :class:`~causaltrace.instrumentation.scope.Scope` built when the stream begins, whose context variables (and
    span) the stream sets and resets itself item after item (:meth:`Scope.parts`: no call per item);
    ``observe`` sees every item before it is passed on; the last item that is a ``result_type`` is the stream's
    result; ``end(result, error, closed)`` runs once at the end (it may be a coroutine function), ``closed`` being
    True when the consumer stopped before the stream was exhausted.
    """

    scope: Scope
    end: Callable[[Any, BaseException | None, bool], Awaitable[None] | None]
    observe: Callable[[Any], None] | None = None
    result_type: type | None = None
    close_in_scope: bool = True


async def scoped_stream(
    begin: Callable[[], StreamHooks | None], wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AsyncGenerator[Any, None]:
    """``wrapped(*args, **kwargs)``'s items, under the hooks ``begin()`` gives (none: the items pass straight
    through). The scope is set and reset per item as :meth:`Scope.parts` says (no call per item)."""
    hooks = begin()
    agen = wrapped(*args, **kwargs)
    if hooks is None:
        async for item in agen:
            yield item
        return
    result = None
    error: BaseException | None = None
    exhausted = False
    scope, result_type, observe = hooks.scope, hooks.result_type, hooks.observe
    parts = scope.parts() if type(scope) is Scope else None
    if parts is not None:
        var0, value0, var1, value1, rest, span, otel_var = parts
        made: tuple[Any, Any] | None = None  # (the Context entered from, it with the span set)
    try:
        while True:
            if parts is None:
                scope.__enter__()
            else:
                token0 = var0.set(value0)
                if var1 is not None:
                    token1 = var1.set(value1)
                if rest:
                    tokens = []
                    for var, value in rest:
                        tokens.append(var.set(value))
                if span is not None:
                    current = otel_var.get()
                    if made is None or made[0] is not current:
                        made = (current, set_span_in_context(span, current))
                    otel_token = otel_var.set(made[1])
            try:
                item = await agen.__anext__()
            except StopAsyncIteration:
                exhausted = True
                break
            except BaseException as exc:
                error = exc
                raise
            finally:
                if parts is None:
                    scope.__exit__(None, None, None)
                else:
                    if span is not None:
                        try:
                            otel_var.reset(otel_token)
                        except Exception:  # a token of another Context: the API's detach logs it, as Scope does
                            otel_context.detach(otel_token)
                    if rest:
                        i = len(rest)
                        while i:
                            i -= 1
                            rest[i][0].reset(tokens[i])
                    if var1 is not None:
                        var1.reset(token1)
                    var0.reset(token0)
            if result_type is not None and isinstance(item, result_type):
                result = item
            if observe is not None:
                observe(item)
            yield item
    finally:
        closed = error is None and not exhausted
        try:
            if closed:
                if hooks.close_in_scope:
                    with scope:
                        await agen.aclose()
                else:
                    await agen.aclose()
        finally:
            ended = hooks.end(result, error, closed)
            if ended is not None:
                await ended
