"""One trace per user run, nothing else by default (issue 22 item 3): replays and the factory builds behind them
are stored, not exported (``CAUSALTRACE_EXPORT_REPLAYS=true`` exports replays again), and causaltrace's own span
processor drops AutoGen's runtime plumbing and duplicate agent spans (``CAUSALTRACE_AUTOGEN_SPANS=keep`` keeps
them), counting what it drops."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

import causaltrace
from _builders import capture_spans
from causaltrace import semconv
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import CountingBatchSpanProcessor, export_stats, unexported
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.tracing import configure, reset_tracing

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _small_run(name: str = "r") -> causaltrace.RunHandle:
    with causaltrace.run(task="t", verify="ok", name=name) as handle:
        ctx = current_run()
        ctx.add_step("task", agent="user", content="t")
        ctx.add_step("message", agent="solo", content="ok")
        handle.report(final_answer="ok")
    return handle


@pytest.mark.parametrize("sampler", [None, ALWAYS_ON])
def test_runs_inside_unexported_are_stored_not_exported(sampler):
    provider, exporter = capture_spans(sampler=sampler)
    configure(provider, TraceConfig(store=False))
    try:
        with unexported():
            quiet = _small_run("quiet")
            framework = provider.get_tracer("some.framework").start_span("framework work")  # a framework's span
            framework.end()
        loud = _small_run("loud")
    finally:
        reset_tracing()
    assert quiet.outcome.status == "success" and len(quiet.run.steps) == 2  # the run itself is whole
    names = [s.name for s in exporter.get_finished_spans()]
    assert "invoke_workflow quiet" not in names and "invoke_workflow loud" in names
    if sampler is None:  # ParentBased (the SDK default): the framework span under the quiet context is not recorded
        assert "framework work" not in names
    ours = [s for s in exporter.get_finished_spans() if s.instrumentation_scope.name == semconv.INSTRUMENTATION_NAME]
    assert len(ours) == 3 and {s.context.trace_id for s in ours} == {int(loud.run.trace_id, 16)}  # any sampler


def test_causaltraces_processor_drops_autogen_plumbing_and_quiet_traces(monkeypatch):
    def traced(keep: bool) -> list[str]:
        if keep:
            monkeypatch.setenv("CAUSALTRACE_AUTOGEN_SPANS", "keep")
        else:
            monkeypatch.delenv("CAUSALTRACE_AUTOGEN_SPANS", raising=False)
        exporter = InMemorySpanExporter()
        provider, _ = capture_spans(sampler=ALWAYS_ON, before=[CountingBatchSpanProcessor(exporter)])
        for scope, name in (("autogen SingleThreadedAgentRuntime", "autogen publish group_topic"),
                            ("autogen-core", "invoke_agent solver"), ("causaltrace", "chat gpt-4o"),
                            ("openai.instrumentation", "ChatCompletion")):
            provider.get_tracer(scope).start_span(name).end()
        with unexported():  # another sampler recorded it anyway: causaltrace's processor drops it
            provider.get_tracer("causaltrace").start_span("inside a replay").end()
        provider.force_flush()
        provider.shutdown()
        return sorted(s.name for s in exporter.get_finished_spans())

    before = export_stats()
    assert traced(keep=False) == ["ChatCompletion", "chat gpt-4o"]
    after = export_stats()
    assert after.framework_dropped - before.framework_dropped == 2
    assert after.unexported_dropped - before.unexported_dropped == 1
    assert traced(keep=True) == ["ChatCompletion", "autogen publish group_topic", "chat gpt-4o", "invoke_agent solver"]


@pytest.mark.parametrize("export_replays", [False, True])
async def test_a_replay_and_its_factory_build_are_not_exported_unless_asked(monkeypatch, export_replays):
    pytest.importorskip("autogen_agentchat")
    sys.path.insert(0, str(EXAMPLES))
    import autogen_team as example
    from opentelemetry import trace

    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
    from causaltrace.replay.executor import replay
    from causaltrace.replay.turns import producing_llm
    from causaltrace.schema import Intervention

    if export_replays:
        monkeypatch.setenv("CAUSALTRACE_EXPORT_REPLAYS", "true")
    provider, exporter = capture_spans()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # AutoGen's own spans go to the global provider
    instrument_autogen(provider, TraceConfig())
    try:
        async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
            await example.build_failing().run(task=example.TASK)
        run = handle.run
        call = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "add")
        exporter.clear()
        result = await replay(run, example.build_failing,
                              Intervention(step_id=producing_llm(run, call).step_id,
                                           replacement=[{"name": "add", "arguments": {"a": 17, "b": 25}}]),
                              example.verify)
    finally:
        uninstrument_autogen()
        reset_tracing()
    assert result.flipped and result.run is not None and result.run.steps  # stored and whole
    spans = exporter.get_finished_spans()
    if not export_replays:
        assert spans == ()  # no replay trace, no create_agent span from the factory build
    else:
        ours = {s.context.trace_id for s in spans if s.instrumentation_scope.name == semconv.INSTRUMENTATION_NAME}
        assert ours == {int(result.run.trace_id, 16)}  # the replay is its own trace, marked by its name
        assert any(s.name == "invoke_workflow replay" or s.name.endswith("(replay)") for s in spans)
        assert not any(s.name.startswith("create_agent") for s in spans)  # the factory build stays unexported
