"""Property tests of live Run assembly (STYLE.md F): spans arriving in any order give the same Run and graph;
roots are exactly the parentless steps; the dependency graph is always a DAG whose edges point forward."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from _builders import capture_spans
from causaltrace import semconv
from causaltrace.collector.live import RunCollector, ns_to_datetime
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.runs import run as mark_run
from causaltrace.instrumentation.steps import Dep
from causaltrace.instrumentation.tracing import configure, reset_tracing
from causaltrace.schema import DEPENDENCY_KINDS, STEP_KINDS
from causaltrace.semconv import RESULT_DEPENDENCY_BY_KIND

KINDS = [k for k in STEP_KINDS if k != "agent_turn"]


@st.composite
def run_shapes(draw):
    """A random run: for each step a kind, a parent among earlier agent_turns, and deps on earlier steps."""
    n = draw(st.integers(min_value=1, max_value=25))
    shape = []
    turns: list[int] = []
    for i in range(n):
        kind = draw(st.sampled_from(["agent_turn", *KINDS]))
        parent = draw(st.sampled_from([None, *turns])) if turns else None
        deps = draw(st.lists(st.tuples(st.integers(0, max(i - 1, 0)), st.sampled_from(DEPENDENCY_KINDS)),
                             max_size=3)) if i else []
        # a tool call's result shares the call's span (one span per tool call: tool_spans.call_result_pairs, tested
        # in tests/instrumentation/test_tool_spans.py); here every step keeps a span of its own
        result_of = RESULT_DEPENDENCY_BY_KIND.get(kind)
        deps = [(d, k) for d, k in deps if not (k == result_of and shape[d][0] == "tool_call")]
        shape.append((kind, parent, deps, draw(st.booleans())))
        if kind == "agent_turn":
            turns.append(i)
    return shape


def _emit(shape):
    """Emit a run of the given shape through the real runtime; returns (run, the finished spans)."""
    provider, exporter = capture_spans()
    configure(provider, TraceConfig(store=False))
    try:
        with mark_run(task="prop") as handle:
            ctx = current_run()
            handles = []
            for kind, parent, deps, fail in shape:
                h = ctx.start_step(
                    kind,
                    agent=f"a{len(handles) % 3}",
                    parent=handles[parent].step_id if parent is not None else None,
                    depends_on=[Dep(handles[d].step_id, k) for d, k in deps],
                    content=f"step {len(handles)}",
                )
                handles.append(h)
                if kind != "agent_turn":
                    h.end(status="error" if fail else "ok", error="bad" if fail else None)
            for h in reversed(handles):  # containers end last, in reverse order
                h.end()
        return handle.run, list(exporter.get_finished_spans())
    finally:
        reset_tracing()


@settings(max_examples=40, deadline=None)
@given(run_shapes(), st.randoms(use_true_random=False))
def test_any_span_order_gives_the_same_run(shape, rnd):
    run, spans = _emit(shape)
    step_spans = [s for s in spans if semconv.STEP_ID in (s.attributes or {})]
    assert len(step_spans) == len(shape)
    rnd.shuffle(step_spans)
    collector = RunCollector(TraceConfig(store=False))
    for span in step_spans:  # the exported spans alone: each Step rebuilt from its attributes, in shuffled order
        collector.accept(
            semconv.step_from_attributes(
                span.attributes,
                started_at=ns_to_datetime(span.start_time),
                ended_at=ns_to_datetime(span.end_time),
                span_id=f"{span.context.span_id:016x}",
            )
        )
    rebuilt = collector.finish_run(run.run_id, framework=run.framework, task=run.task, outcome=run.outcome)
    assert [s.model_dump(exclude={"span_id"}) for s in rebuilt.steps] == [
        s.model_dump(exclude={"span_id"}) for s in run.steps
    ]
    g = rebuilt.graph()
    assert nx.is_directed_acyclic_graph(g)
    index = {s.step_id: s.index for s in rebuilt.steps}
    assert all(index[u] < index[v] for u, v in g.edges)
    roots = {s.step_id for s in rebuilt.steps if s.parent_step_id is None}
    tree = rebuilt.parent_tree()
    assert roots == {n for n in tree.nodes if tree.in_degree(n) == 0}
    # parent/child of spans mirrors parent_step_id
    span_of = {s.attributes[semconv.STEP_ID]: s for s in step_spans}
    for step in rebuilt.steps:
        span = span_of[step.step_id]
        if step.parent_step_id:
            assert span.parent.span_id == span_of[step.parent_step_id].context.span_id
