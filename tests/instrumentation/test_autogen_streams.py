"""instrumentation.autogen._streams.scoped_stream: the scope's context variables and span are set around every
``__anext__`` of the wrapped generator — by the stream itself (no Scope call per item) or, when the span goes
through the context API, by entering the Scope — and restored between items and after the stream, however many
variables it sets."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

pytest.importorskip("autogen_agentchat")

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from causaltrace.instrumentation import scope as scope_module
from causaltrace.instrumentation.autogen._streams import StreamHooks, scoped_stream
from causaltrace.instrumentation.scope import Scope

VARS = [contextvars.ContextVar(f"test_stream_var_{i}", default=None) for i in range(4)]


@pytest.fixture(params=["context variable", "context API"])
def path(request, monkeypatch):
    if request.param == "context API":
        monkeypatch.setattr(scope_module, "_OTEL_CONTEXT", None)
    return request.param


@pytest.mark.parametrize("count", [0, 1, 2, 4])
@pytest.mark.parametrize("with_span", [True, False])
def test_each_item_is_produced_inside_the_scope_and_everything_is_restored_between(path, count, with_span):
    span = NonRecordingSpan(SpanContext(trace_id=7, span_id=7, is_remote=False)) if with_span else None
    values = tuple((VARS[i], f"v{i}") for i in range(count))
    seen: list[tuple[object, ...]] = []
    outside: list[tuple[object, ...]] = []
    ended: list[tuple[object, object, bool]] = []

    def snapshot() -> tuple[object, ...]:
        return (*(var.get() for var in VARS), trace.get_current_span())

    async def wrapped():
        for i in range(3):
            seen.append(snapshot())
            yield i

    def begin():
        return StreamHooks(scope=Scope(values, span), end=lambda r, e, c: ended.append((r, e, c)), result_type=int)

    async def consume():
        before = snapshot()
        items = []
        async for item in scoped_stream(begin, lambda: wrapped(), (), {}):
            outside.append(snapshot())
            items.append(item)
        return before, items, snapshot()

    before, items, after = asyncio.run(consume())
    inside = (*(f"v{i}" if i < count else None for i in range(4)), span if with_span else before[-1])
    assert items == [0, 1, 2]
    assert seen == [inside] * 3
    assert outside == [before] * 3 and after == before
    assert ended == [(2, None, False)]


def test_an_error_of_the_generator_restores_the_scope_and_reaches_the_end_hook(path):
    span = NonRecordingSpan(SpanContext(trace_id=8, span_id=8, is_remote=False))
    ended: list[tuple[object, object, bool]] = []

    async def wrapped():
        yield 1
        raise ValueError("boom")

    def begin():
        return StreamHooks(scope=Scope(((VARS[0], "x"), (VARS[1], "y"), (VARS[2], "z")), span),
                           end=lambda r, e, c: ended.append((r, e, c)))

    async def consume():
        got = []
        with pytest.raises(ValueError, match="boom"):
            async for item in scoped_stream(begin, lambda: wrapped(), (), {}):
                got.append(item)
        return got, tuple(var.get() for var in VARS), trace.get_current_span()

    got, values, current = asyncio.run(consume())
    assert got == [1] and values == (None,) * 4 and current is not span
    assert len(ended) == 1 and isinstance(ended[0][1], ValueError) and ended[0][2] is False


def test_a_stream_closed_early_is_closed_inside_its_scope(path):
    closed_inside: list[object] = []

    async def wrapped():
        try:
            yield 1
            yield 2
        finally:
            closed_inside.append(VARS[0].get())

    def begin():
        return StreamHooks(scope=Scope(((VARS[0], "x"),)), end=lambda r, e, c: closed_inside.append(c))

    async def consume():
        stream = scoped_stream(begin, lambda: wrapped(), (), {})
        assert await stream.__anext__() == 1
        await stream.aclose()
        return VARS[0].get()

    assert asyncio.run(consume()) is None
    assert closed_inside == ["x", True]
