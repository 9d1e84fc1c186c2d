"""instrumentation.scope.Scope: context variables and the current OTel span for one block, then restored — the
same Context as ``otel_context.attach(trace.set_span_in_context(span))`` would make, set directly on OTel's
context variable, with the API path kept for another runtime context."""

from __future__ import annotations

import contextvars
import logging

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from causaltrace.instrumentation import scope as scope_module
from causaltrace.instrumentation.scope import Scope

VAR: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_scope_var", default=None)


def _span(n: int) -> NonRecordingSpan:
    return NonRecordingSpan(SpanContext(trace_id=n, span_id=n, is_remote=False))


@pytest.fixture(params=["context variable", "context API"])
def path(request, monkeypatch):
    if request.param == "context API":
        monkeypatch.setattr(scope_module, "_OTEL_CONTEXT", None)
    else:
        assert scope_module._OTEL_CONTEXT is not None  # the default runtime context is OTel's contextvars one
    return request.param


def test_the_span_and_the_variables_are_current_inside_and_restored_after(path):
    span = _span(1)
    before = otel_context.get_current()
    scope = Scope(((VAR, "inside"),), span)
    for _ in range(3):  # a stream's scope is entered again for every item
        with scope:
            assert trace.get_current_span() is span
            assert VAR.get() == "inside"
            assert otel_context.get_current() == trace.set_span_in_context(span, before)
        assert otel_context.get_current() is before
        assert VAR.get() is None


def test_the_span_is_set_in_the_context_current_at_each_entry(path):
    span = _span(2)
    scope = Scope((), span)
    with scope:
        pass
    token = otel_context.attach(otel_context.set_value("k", "v"))
    try:
        with scope:  # entered from another Context: its values stay, the span is set in it
            assert otel_context.get_value("k") == "v"
            assert trace.get_current_span() is span
    finally:
        otel_context.detach(token)
    with scope:
        assert otel_context.get_value("k") is None
        assert trace.get_current_span() is span


def test_a_scope_without_a_span_leaves_the_otel_context_alone(path):
    before = otel_context.get_current()
    with Scope(((VAR, "x"),)):
        assert otel_context.get_current() is before
        assert VAR.get() == "x"


def test_an_exit_in_another_context_is_logged_as_the_context_api_logs_it(path, caplog):
    scope = Scope((), _span(3))
    entered = contextvars.copy_context()
    entered.run(scope.__enter__)
    with caplog.at_level(logging.ERROR, logger="opentelemetry.context"):
        scope.__exit__(None, None, None)  # here, not in the Context it was entered in: never raised
    assert "Failed to detach context" in caplog.text
