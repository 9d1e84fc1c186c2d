"""RunContext.start_step's dependencies (its own loop, :meth:`RunContext.new_dependencies`' rules inline): each
(producer, kind) once, only on an earlier step of the run and of a known kind, in the given order, a Dep, a plain
tuple or a Dependency alike; a link to each producer's span; a result step's span joins the first dependency of
its result kind."""

from __future__ import annotations

import pytest

import causaltrace
from _builders import capture_spans
from causaltrace import semconv
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.steps import Dep
from causaltrace.instrumentation.tracing import configure, reset_tracing
from causaltrace.schema import Dependency


@pytest.fixture
def exporter():
    provider, exp = capture_spans()
    configure(provider, TraceConfig(store=False))
    yield exp
    reset_tracing()


def test_start_step_keeps_the_dependencies_new_dependencies_would(exporter):
    with causaltrace.run(task="t") as h:
        ctx = current_run()
        a = ctx.add_step("message", agent="a")
        b = ctx.add_step("message", agent="b")
        asked = [
            Dep(b.step_id, "saw"),
            (a.step_id, "saw"),
            Dependency(step_id=b.step_id, kind="saw"),  # a duplicate, as a Dependency
            Dep(a.step_id, "no_such_kind"),  # an unknown kind
            Dep("nope", "saw"),  # no such step
            (a.step_id, "observed"),
        ]
        expected, expected_links = ctx.new_dependencies(asked, ctx._next_index, ())
        c = ctx.start_step("llm_response", agent="c", depends_on=iter(asked))  # any iterable, read once
        later = ctx.start_step("message", agent="d", depends_on=[(f"{h.run_id}/99", "saw")])  # not earlier
        c.end()
        later.end()
    steps = {s.step_id: s for s in h.run.steps}
    got = steps[c.step_id].depends_on
    assert [(d.step_id, d.kind) for d in got] == [(b.step_id, "saw"), (a.step_id, "saw"), (a.step_id, "observed")]
    assert got == tuple(expected) and all(type(d) is Dependency for d in got)
    assert steps[later.step_id].depends_on == ()
    [span] = [s for s in exporter.get_finished_spans() if s.attributes.get(semconv.STEP_ID) == c.step_id]
    assert [link.context.span_id for link in span.links] == [ctx_link.span_id for ctx_link, _, _ in expected_links]
    assert len(span.links) == 3


def test_a_tool_response_joins_its_first_tool_result_of_call(exporter):
    with causaltrace.run(task="t") as h:
        ctx = current_run()
        llm = ctx.add_step("llm_response", agent="a")
        first = ctx.add_step("tool_call", agent="a", tool_name="f", call_id="c1", depends_on=[Dep(llm.step_id, "produced_by")])
        second = ctx.add_step("tool_call", agent="a", tool_name="g", call_id="c2", depends_on=[Dep(llm.step_id, "produced_by")])
        resp = ctx.start_step("tool_response", agent="a", tool_name="f", call_id="c1",
                              depends_on=[Dep("nope", "tool_result_of"), Dep(llm.step_id, "saw"),
                                          Dep(first.step_id, "tool_result_of"), Dep(second.step_id, "tool_result_of")])
        resp.end(outputs={"result": "1"})
    spans = {s.attributes.get(semconv.STEP_ID): s for s in exporter.get_finished_spans()}
    joined = [sid for sid, s in spans.items() if any(k.startswith(semconv.RESULT_PREFIX) for k in s.attributes)]
    assert joined == [first.step_id]  # the result is on its first call's span, not the second's, nor a span of its own
    assert resp.step_id not in spans and resp.step_id in {s.step_id for s in h.run.steps}
