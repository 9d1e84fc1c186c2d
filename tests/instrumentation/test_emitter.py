"""The emitter and live runtime: one trace per run, step spans with links + attributes, payload policy, statuses,
and the rule that instrumentation never raises into user code."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

import causaltrace
from _builders import capture_spans
from causaltrace import semconv
from causaltrace.collector.otlp import runs_from_otlp
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import CountingBatchSpanProcessor, export_stats
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.steps import Dep
from causaltrace.instrumentation.tracing import configure, reset_tracing


@pytest.fixture
def exporter():
    provider, exp = capture_spans()
    configure(provider, TraceConfig(store=False))
    yield exp
    reset_tracing()


def _by_kind(spans):
    out = {}
    for s in spans:
        kind = s.attributes.get(semconv.STEP_KIND)
        if kind:
            out.setdefault(kind, []).append(s)
    return out


def _small_team(handle_ctx):
    ctx = handle_ctx
    task = ctx.add_step("task", agent="user", content="add 2 and 3", metadata={"user_input": True})
    turn = ctx.start_step("agent_turn", agent="solver", depends_on=[Dep(task.step_id, "saw")])
    with turn.activate():
        llm = ctx.start_step("llm_response", agent="solver", depends_on=[Dep(task.step_id, "saw")], model="scripted")
        llm.end(content="call add", usage=(12, 3), outputs={"text": "", "tool_calls": [{"name": "add"}]})
        call = ctx.add_step(
            "tool_call", agent="solver", tool_name="add", arguments={"a": 2, "b": 3}, call_id="c1",
            depends_on=[Dep(llm.step_id, "produced_by")],
        )
        resp = ctx.start_step("tool_response", agent="solver", tool_name="add", call_id="c1",
                              depends_on=[Dep(call.step_id, "tool_result_of")])
        resp.end(status="error", error=ValueError("boom"), outputs={"result": "boom", "is_error": True})
        final = ctx.start_step("final_answer", agent="solver", depends_on=[Dep(llm.step_id, "produced_by")])
        final.end(content="5", outputs={"text": "5"})
    turn.end()
    ctx.report_end(final_answer="5")


def test_one_trace_links_attributes_and_statuses(exporter):
    with causaltrace.run(task="add 2 and 3", verify="5", name="demo") as handle:
        _small_team(current_run())
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    roots = [s for s in spans if semconv.is_root_span_name(s.name)]
    assert len(roots) == 1 and roots[0].parent is None
    root = roots[0]
    assert root.attributes[semconv.RUN_STATUS] == "success"
    assert root.status.status_code is StatusCode.OK
    kinds = _by_kind(spans)
    # a tool call and its result are one span (issue 33 item 3)
    assert sorted(kinds) == ["agent_turn", "final_answer", "llm_response", "task", "tool_call"]
    turn = kinds["agent_turn"][0]
    llm = kinds["llm_response"][0]
    assert llm.parent.span_id == turn.context.span_id  # steps nest under their agent_turn
    assert kinds["task"][0].parent.span_id == root.context.span_id
    # dependencies: links with kinds AND attributes; the result's own dependency on its call is no self-link
    (call,) = kinds["tool_call"]
    assert [link.attributes[semconv.DEPENDENCY_KIND] for link in call.links] == ["produced_by"]
    assert call.attributes[semconv.RESULT_KIND] == "tool_response"
    assert list(call.attributes[semconv.RESULT_PREFIX + "depends_on.kinds"]) == ["tool_result_of"]
    assert list(call.attributes[semconv.RESULT_PREFIX + "depends_on.step_ids"]) == [call.attributes[semconv.STEP_ID]]
    assert call.attributes["input.value"] == '{"a":2,"b":3}' and call.attributes["output.value"] == '{"result":"boom","is_error":true}'
    assert call.start_time < call.attributes[semconv.RESULT_STARTED_AT] <= call.end_time
    # statuses and GenAI attributes: the result failed, so the span did
    assert call.status.status_code is StatusCode.ERROR and "boom" in call.status.description
    assert llm.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert llm.attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert call.attributes[semconv.GEN_AI_TOOL_NAME] == "add"
    assert call.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "c1"
    assert json.loads(call.attributes[semconv.STEP_ARGUMENTS]) == {"a": 2, "b": 3}
    # the Run the collector assembled
    run = handle.run
    assert run is not None and handle.outcome.status == "success"
    assert [s.kind for s in run.steps] == ["task", "agent_turn", "llm_response", "tool_call", "tool_response",
                                          "final_answer"]
    assert run.trace_id == f"{root.context.trace_id:032x}"
    assert run.steps[4].status == "error" and run.steps[4].error.type == "ValueError"
    graph = run.graph()
    assert graph.edges[run.steps[3].step_id, run.steps[4].step_id]["kind"] == "tool_result_of"
    assert all(s.started_at and s.ended_at for s in run.steps)
    assert run.steps[3].span_id == run.steps[4].span_id == f"{call.context.span_id:016x}"
    # the live spans import back as the run the collector assembled: the merged span splits into its two steps
    imported = runs_from_otlp(MessageToDict(encode_spans(exporter.get_finished_spans())))
    assert [s.model_dump() for s in imported[0].steps] == [s.model_dump() for s in run.steps]


def test_verifier_failure_marks_root_error(exporter):
    with causaltrace.run(task="t", verify=lambda o: causaltrace.Verdict(passed=False, reason="wrong total")) as h:
        h.report(final_answer="4")
    assert h.outcome.status == "failure" and h.outcome.reason == "wrong total"
    root = [s for s in exporter.get_finished_spans() if semconv.is_root_span_name(s.name)][0]
    assert root.status.status_code is StatusCode.ERROR and "wrong total" in root.status.description


async def test_async_run_and_async_verifier(exporter):
    async def verify(outcome):
        await asyncio.sleep(0)
        return outcome.final_answer == "42"

    async with causaltrace.run(task="t", verify=verify) as h:
        h.report(final_answer="42")
    assert h.outcome.status == "success"


def test_outcome_rules_without_verifier(exporter):
    with causaltrace.run(task="t") as h:
        h.report(final_answer="x")
    assert h.outcome.status == "unknown" and h.outcome.stop == "normal"
    with causaltrace.run(task="t") as h2:
        h2.report(final_answer=None, stop="limit")
    assert h2.outcome.status == "failure" and h2.outcome.stop == "limit"


def test_user_exception_passes_through_unchanged(exporter):
    class Mine(Exception):
        pass

    err = Mine("user problem")
    with pytest.raises(Mine) as info, causaltrace.run(task="t") as h:
        raise err
    assert info.value is err
    assert h.outcome.status == "failure" and h.outcome.stop == "error" and "user problem" in h.outcome.reason


def test_dependencies_must_point_backwards(exporter):
    with causaltrace.run(task="t") as h:
        ctx = current_run()
        a = ctx.start_step("message", agent="a")
        b = ctx.start_step("message", agent="b", depends_on=[Dep(a.step_id, "saw"), Dep("nope", "saw")])
        a.add_dependencies([Dep(b.step_id, "saw")])  # forward: dropped
        b.end()
        a.end()
    run = h.run
    assert [d.step_id for d in run.steps[1].depends_on] == [run.steps[0].step_id]
    assert run.steps[0].depends_on == ()


def test_a_misspelled_step_field_is_a_type_error_not_a_lost_step(exporter):
    with causaltrace.run(task="t") as h:
        ctx = current_run()
        step = ctx.start_step("llm_response", agent="a", model="m")
        with pytest.raises(TypeError, match="contnet"):
            step.update(contnet="x")
        with pytest.raises(TypeError, match="outptus"):
            step.end(outptus={"text": "x"})
        with pytest.raises(TypeError, match="modle"):
            ctx.start_step("message", agent="a", modle="m")
        with pytest.raises(TypeError, match="agnet"):
            ctx.add_step("message", agnet="a")
        assert not step.ended  # the failed calls changed nothing
        step.update(content="late")
        ended = step.end(outputs={"text": "late"}, usage=(3, 4))
    assert ended is not None and h.run.steps == (ended,)
    assert ended.content == "late" and ended.outputs == {"text": "late"} and ended.model == "m"
    assert (ended.usage.input_tokens, ended.usage.output_tokens) == (3, 4)


def test_dependencies_are_named_tuples_of_an_earlier_step(exporter):
    dep = Dep("r/0", "saw")
    assert (dep.step_id, dep.kind) == ("r/0", "saw") and dep == ("r/0", "saw")
    with causaltrace.run(task="t") as h:
        ctx = current_run()
        a = ctx.add_step("message", agent="a")
        b = ctx.start_step("llm_response", agent="b")
        b.end(depends_on=[Dep(a.step_id, "saw"), Dep(a.step_id, "saw"), Dep(a.step_id, "no_such_kind")])
    [dependency] = h.run.steps[1].depends_on  # duplicates and unknown kinds are dropped
    assert (dependency.step_id, dependency.kind) == (h.run.steps[0].step_id, "saw")


def test_an_error_inside_a_step_call_is_still_swallowed(exporter, caplog):
    with causaltrace.run(task="t") as h:
        ctx = current_run()
        step = ctx.start_step("message", agent="a")
        with caplog.at_level(logging.WARNING, logger="causaltrace"):
            assert step.end(status="not-a-status") is None  # our own failure: logged, the run continues
    assert "internal error" in caplog.text and h.outcome is not None


def test_payload_policy_truncates_hides_and_redacts():
    provider, exp = capture_spans()
    config = TraceConfig(
        store=False, max_attribute_chars=100, hide_inputs=True,
        redact=lambda key, value: value.replace("SECRET", "***") if isinstance(value, str) else value,
    )
    configure(provider, config)
    try:
        with causaltrace.run(task="t") as h:
            ctx = current_run()
            ctx.add_step("message", agent="a", content="SECRET " + "x" * 500, inputs={"code": "print(1)"})
        span = [s for s in exp.get_finished_spans() if s.attributes.get(semconv.STEP_KIND) == "message"][0]
        content = span.attributes[semconv.STEP_CONTENT]
        assert content.startswith("*** ") and "truncated 404 chars" in content  # 504 after redaction
        assert span.attributes[semconv.STEP_TRUNCATED] is True
        assert semconv.STEP_INPUTS not in span.attributes
        # the collector got the full step
        step = h.run.steps[0]
        assert len(step.content) == 507 and step.inputs == {"code": "print(1)"} and not step.truncated
    finally:
        reset_tracing()


class _BrokenExporter(SpanExporter):
    def export(self, spans):
        raise RuntimeError("exporter is down")

    def shutdown(self):
        raise RuntimeError("still down")


def test_broken_exporter_and_broken_internals_never_reach_user_code(monkeypatch, caplog):
    provider = TracerProvider()
    processor = CountingBatchSpanProcessor(_BrokenExporter(), max_queue_size=64)
    provider.add_span_processor(processor)
    configure(provider, TraceConfig(store=False))
    before = export_stats()
    try:
        # our own code path broken: the attribute mapping raises for every step
        def boom(step):
            raise RuntimeError("internal bug")

        monkeypatch.setattr(semconv, "step_attributes", boom)
        caplog.set_level(logging.WARNING, logger="causaltrace")
        with causaltrace.run(task="t", verify="ok") as h:
            ctx = current_run()
            step = ctx.start_step("message", agent="a", content="ok")
            step.end()
            ctx.start_step("not-a-kind", agent="a")  # a bug in an adapter: logged, returns None
            h.report(final_answer="ok")
        processor.force_flush()
        assert h.outcome.status == "success"
        assert len(h.run.steps) == 1  # the step still reached the collector
        assert "internal error" in caplog.text or "could not end the span" in caplog.text
        after = export_stats()
        assert after.failed > before.failed  # the broken exporter's losses are counted, not silent
    finally:
        processor.shutdown()
        reset_tracing()


def test_full_queue_drops_are_counted():
    class Slow(SpanExporter):
        def export(self, spans):
            import time

            time.sleep(0.2)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    processor = CountingBatchSpanProcessor(Slow(), max_queue_size=8)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    before = export_stats().dropped
    for _ in range(200):
        tracer.start_span("x").end()
    assert export_stats().dropped - before > 0
    processor.shutdown()


@pytest.mark.parametrize("fast", [True, False])
def test_the_batch_processor_exports_ours_and_drops_and_counts_the_rest(monkeypatch, fast):
    """CountingBatchSpanProcessor.on_end (its context read by index and the SDK's batch processor handed the span
    itself, both checked against the SDK; issue 35): a sampled span is exported, an unsampled one ignored, AutoGen's
    own spans (autogen-core, its runtime's 'autogen <runtime>') dropped and counted unless kept, a quiet trace's
    (a replay's) dropped and counted — the same with the SDK's own ways."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, TraceFlags

    from causaltrace.instrumentation import _export

    assert _export._CONTEXT_BY_INDEX and _export._EMIT_DIRECT
    monkeypatch.setattr(_export, "_CONTEXT_BY_INDEX", fast)
    monkeypatch.setattr(_export, "_EMIT_DIRECT", fast)

    class Keep(SpanExporter):
        def __init__(self):
            self.names = []

        def export(self, spans):
            self.names += [s.name for s in spans]
            return SpanExportResult.SUCCESS

    def span(name, scope="causaltrace", trace_id=7, sampled=True):
        flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        return ReadableSpan(name=name, context=SpanContext(trace_id, 9, False, flags),
                            instrumentation_scope=InstrumentationScope(scope))

    monkeypatch.setattr(_export, "_QUIET_TRACES", {99})
    for keep in (False, True):
        monkeypatch.setenv("CAUSALTRACE_AUTOGEN_SPANS", "keep" if keep else "")
        exporter, before = Keep(), export_stats()
        processor = CountingBatchSpanProcessor(exporter)
        for each in (span("ours"), span("unsampled", sampled=False), span("core", "autogen-core"),
                     span("runtime", "autogen SingleThreadedAgentRuntime"), span("replay", trace_id=99),
                     span("autogenesis", "autogenesis")):
            processor.on_end(each)
        processor.force_flush()
        after = export_stats()
        kept = ["ours", "core", "runtime", "autogenesis"] if keep else ["ours", "autogenesis"]
        assert exporter.names == kept
        assert after.framework_dropped - before.framework_dropped == (0 if keep else 2)
        assert after.unexported_dropped - before.unexported_dropped == 1
        assert after.queued - before.queued == len(kept)
        processor.shutdown()


def test_runs_are_written_to_the_store(causaltrace_home):
    from causaltrace.collector.store import Store

    provider = TracerProvider()
    configure(provider, TraceConfig.from_env())
    try:
        with causaltrace.run(task="add 2 and 3", verify="5") as handle:
            _small_team(current_run())
    finally:
        reset_tracing()
    db = causaltrace_home / "causaltrace.db"
    assert db.exists()
    with Store(db) as store:
        stored = store.get_run(handle.run_id)
        rows = store.list_runs()
    assert stored == handle.run
    assert rows[0]["run_id"] == handle.run_id and rows[0]["status"] == "success" and rows[0]["steps"] == 6


def test_step_spans_take_the_direct_sdk_path_and_respect_run_sampling():
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    provider, exp = capture_spans(sampler=ALWAYS_OFF)
    tracing = configure(provider, TraceConfig(store=False))
    try:
        assert tracing.emitter._sdk is not None  # a silent fallback would hide a broken accessor
        with causaltrace.run(task="t") as h:
            _small_team(current_run())
        assert exp.get_finished_spans() == ()  # the run was sampled out: no span at all
        assert len(h.run.steps) == 6  # ...but the collector still has every step
    finally:
        reset_tracing()


def test_the_sdk_shortcuts_are_in_force_and_export_what_the_sdk_calls_would(monkeypatch):
    """Step spans are made without the SDK's constructors' frames (SpanContext, ReadableSpan, the multi-processor's
    fan-out: checked once at import against the installed SDK; issue 35): in force here, and the spans and Steps
    are the ones the SDK calls give (the fallback when a check fails)."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan

    from causaltrace.instrumentation import _emitter
    from causaltrace.instrumentation import steps as steps_module

    assert _emitter._CONTEXT_BY_TUPLE and _emitter._READABLE_BY_FIELDS and _emitter._FAN_OUT_BY_FIELD
    assert _emitter._NON_RECORDING_BY_FIELD

    def export(shortcuts: bool):
        for flag in ("_CONTEXT_BY_TUPLE", "_READABLE_BY_FIELDS", "_FAN_OUT_BY_FIELD", "_NON_RECORDING_BY_FIELD"):
            monkeypatch.setattr(_emitter, flag, shortcuts)
        monkeypatch.setattr(steps_module, "_NON_RECORDING_BY_FIELD", shortcuts)
        provider, exp = capture_spans()
        configure(provider, TraceConfig(store=False))
        try:
            with causaltrace.run(task="add 2 and 3", verify="5", name="demo") as handle:
                _small_team(current_run())
        finally:
            reset_tracing()
        spans = exp.get_finished_spans()
        ids = {}  # random ids -> their order of appearance
        for span in spans:
            ids.setdefault(span.context.span_id, len(ids))
        shape = [
            (s.name, ids[s.context.span_id], s.parent is not None and ids.get(s.parent.span_id), s.kind,
             s.status.status_code, s.status.description, s.context.trace_flags, s.context.is_remote,
             s.context.trace_state,
             [(ids[link.context.span_id], link.attributes[semconv.DEPENDENCY_KIND]) for link in s.links],
             {k: v for k, v in s.attributes.items() if "_at" not in k and "id" not in k and k != semconv.RUN_METADATA},
             dict(s.resource.attributes), (s.instrumentation_scope.name, s.instrumentation_scope.version),
             [e.name for e in s.events], s.dropped_attributes, s.dropped_links)
            for s in spans
        ]
        hex_ids = {f"{span_id:016x}": order for span_id, order in ids.items()}
        steps = [(s.kind, hex_ids[s.span_id]) for s in handle.run.steps]  # a Step's span id is its span's
        return shape, steps

    assert export(True) == export(False)
    # a step span is made without StepSpan's __init__ (issue 35): every field is set
    import dataclasses

    provider, _ = capture_spans()
    tracing = configure(provider, TraceConfig(store=False))
    try:
        with causaltrace.run(task="t"):
            handle = current_run().start_step("message", agent="a", content="hi")
            span = handle.span
            assert {f.name: getattr(span, f.name) for f in dataclasses.fields(span)} == {
                "context": span.context, "parent": span.parent, "start_ns": span.start_ns, "attributes": span.attributes,
                "links": [], "current": None, "joins": None, "extras": None, "trace_id": span.context.trace_id,
                "span_id": span.context.span_id}
            for _ in range(2):  # made current as a NonRecordingSpan of its context (once)
                with handle.activate():
                    current = trace.get_current_span()
                    assert type(current) is NonRecordingSpan and current.get_span_context() is span.context
                    assert current is span.current and not current.is_recording()
            handle.end()
            ctx = current_run()  # a tool result's span shares its call's: made without __init__ too
            call = ctx.start_step("tool_call", agent="a", tool_name="add", call_id="c1", arguments={"a": 1})
            result = ctx.start_step("tool_response", agent="a", tool_name="add", call_id="c1",
                                    depends_on=[Dep(call.step_id, "tool_result_of")])
            span, of_call = result.span, call.span
            pair = tracing.emitter._pairs[call.step_id]  # the pair waiting for both: made without __init__ too
            assert {f.name: getattr(pair, f.name) for f in dataclasses.fields(pair)} == {
                "call_span": of_call, "call": None, "call_end": 0, "result_span": span, "result": None, "result_end": 0}
            assert {f.name: getattr(span, f.name) for f in dataclasses.fields(span)} == {
                "context": of_call.context, "parent": of_call.parent, "start_ns": span.start_ns,
                "attributes": span.attributes, "links": [], "current": None, "joins": call.step_id, "extras": None,
                "trace_id": of_call.trace_id, "span_id": of_call.span_id}
            result.end()
            call.end()
    finally:
        reset_tracing()


def test_the_root_span_takes_its_end_attributes_as_set_attributes_gives_them(monkeypatch):
    """The root's end attributes are written straight into the SDK span's attribute dict (checked at import; issue
    35: no second cleaning of its start attributes): the same attributes, values, value types and order as
    ``set_attributes``; a length limit on texts, another value type or an ended span go through ``set_attributes``."""
    from opentelemetry.sdk.trace import SpanLimits

    from causaltrace.instrumentation import _export

    assert _export._SETS_BY_DICT

    def root_attributes(direct: bool) -> list:
        monkeypatch.setattr(_export, "_SETS_BY_DICT", direct)
        provider, exp = capture_spans()
        configure(provider, TraceConfig(store=False))
        try:
            with causaltrace.run(task="add 2 and 3", verify="5", name="demo"):
                _small_team(current_run())
        finally:
            reset_tracing()
        (root,) = [s for s in exp.get_finished_spans() if s.parent is None]
        return [(k, "<id>" if "id" in k or k == semconv.RUN_METADATA else v, type(v))
                for k, v in root.attributes.items()]

    direct = root_attributes(True)
    assert direct == root_attributes(False)

    # the root starts without its attributes (given them at once) only where no one can tell: the SDK's samplers
    # that read none, span processors whose on_start does nothing
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler

    class Peek(SpanProcessor):
        def __init__(self):
            self.seen = []

        def on_start(self, span, parent_context=None):
            self.seen.append(dict(span.attributes))

    class Picky(Sampler):
        def __init__(self):
            self.seen = []

        def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                          trace_state=None):
            self.seen.append(dict(attributes or {}))
            return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links)

        def get_description(self):
            return "picky"

    monkeypatch.setattr(_export, "_SETS_BY_DICT", True)
    run_attrs = {semconv.RUN_ID: "r1", semconv.RUN_FRAMEWORK: "f"}
    provider, _ = capture_spans()
    assert _export.attributes_may_follow_start(provider.get_tracer("t"))
    assert _export.attributes_may_follow_start(TracerProvider(sampler=ParentBased(ALWAYS_ON)).get_tracer("t"))
    peek, picky = Peek(), Picky()
    provider.add_span_processor(peek)
    assert not _export.attributes_may_follow_start(provider.get_tracer("t"))
    assert not _export.attributes_may_follow_start(TracerProvider(sampler=picky).get_tracer("t"))
    for tracer in (provider.get_tracer("t"), TracerProvider(sampler=picky).get_tracer("t")):
        root = _export.start_span(tracer, "root", dict(run_attrs), 1)
        assert dict(root.attributes) == run_attrs
    assert peek.seen == [run_attrs] and picky.seen == [run_attrs]  # they saw the attributes as the span started
    assert (semconv.RUN_AGENTS, ("user", "solver"), tuple) in direct  # a list becomes a tuple, as the SDK makes it

    later = {"a": "a long text", "b": [1, 2], "c": {"k": "v"}, "d": ["x", "y"]}
    for limits in (SpanLimits(max_attribute_length=4), SpanLimits()):
        made = []
        for direct_write in (False, True):
            monkeypatch.setattr(_export, "_SETS_BY_DICT", direct_write)
            span = TracerProvider(span_limits=limits).get_tracer("t").start_span("s", attributes={"a": "x", "e": 1})
            _export.set_span_attributes(span, later)
            span.end()
            _export.set_span_attributes(span, {"f": "after the end"})  # ignored (with the SDK's warning)
            made.append((list(span.attributes.items()), span.dropped_attributes))
        assert made[0] == made[1]


def test_a_step_reaches_the_collector_and_the_exporters_as_two_siblings():
    from opentelemetry.sdk.trace import SpanProcessor

    class Raising(SpanProcessor):
        def on_end(self, span):
            raise RuntimeError("a processor that fails")

    provider, exp = capture_spans(before=[Raising()])
    tracing = configure(provider, TraceConfig(store=False))
    try:
        assert not isinstance(tracing.collector, SpanProcessor)  # the collector is not on the processor chain
        with causaltrace.run(task="t") as h:
            ctx = current_run()
            step = ctx.start_step("message", agent="a", content="hi")
            ended = step.end()
            assert ctx.steps() == [ended]  # handed over directly, when the step ended
        assert h.run.steps == (ended,)  # a failing processor before the exporter loses no step
    finally:
        reset_tracing()


def test_live_spans_follow_the_genai_conventions(span_capture):
    """Names, kinds and gen_ai.* of live spans: the workflow root, a CLIENT chat span naming its provider (from the
    client class the adapter passes, or the model id; unknown without either, and no class-name model), plan and
    invoke_agent spans, the turn's provider taken from its model calls, error.type on a failed tool."""
    from opentelemetry.trace import SpanKind

    provider, exporter = span_capture
    configure(provider, TraceConfig(store=False))
    try:
        with causaltrace.run(task="t", name="team") as handle:
            ctx = current_run()
            turn = ctx.start_step("agent_turn", agent="planner")
            ctx.add_step("planning", agent="planner", parent=turn, content="1. add")
            llm = ctx.start_step("llm_response", agent="planner", parent=turn, model="llama3.1:8b",
                                 metadata={"provider": "openai"})
            llm.end(content="ok", outputs={"finish_reason": "stop"})
            ctx.add_step("llm_response", agent="planner", parent=turn)  # a scripted client: no model id
            ctx.add_step("tool_call", agent="planner", parent=turn, tool_name="add", status="error",
                         error=ValueError("bad"))
            turn.end()
            handle.report(final_answer="ok")
    finally:
        reset_tracing()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_workflow team", "invoke_agent planner", "plan planner", "chat llama3.1:8b", "chat",
                          "execute_tool add"}
    root, chat, bare = spans["invoke_workflow team"], spans["chat llama3.1:8b"], spans["chat"]
    assert root.kind is SpanKind.INTERNAL and root.attributes[semconv.GEN_AI_WORKFLOW_NAME] == "team"
    assert root.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_workflow"
    assert chat.kind is bare.kind is SpanKind.CLIENT and spans["execute_tool add"].kind is SpanKind.INTERNAL
    assert chat.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"  # the client's API beats the model's family
    assert tuple(chat.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == ("stop",)
    assert bare.attributes[semconv.GEN_AI_PROVIDER_NAME] == "unknown" and semconv.GEN_AI_REQUEST_MODEL not in bare.attributes
    assert spans["plan planner"].attributes[semconv.GEN_AI_OPERATION_NAME] == "plan"
    assert spans["invoke_agent planner"].attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"  # from its calls
    assert spans["execute_tool add"].attributes[semconv.ERROR_TYPE] == "ValueError"
    assert {s.attributes[semconv.GEN_AI_CONVERSATION_ID] for s in spans.values()} == {handle.run_id}
