"""causaltrace.watch: every run of a watched agent is traced with the watch's verifier; a failed run is diagnosed in
the background, the diagnosis lands on the run's root span (ended with the run's real end time), or — past the bound
— in a linked `causaltrace.diagnosis` span of the same trace."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from pathlib import Path

import pytest

import causaltrace
from _builders import capture_spans
from causaltrace import semconv
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
from causaltrace.instrumentation.tracing import reset_tracing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import smolagents_agents as example


@pytest.fixture
def exporter():
    provider, exp = capture_spans()
    instrument_smolagents(provider, TraceConfig())
    yield exp
    uninstrument_smolagents()
    if importlib.util.find_spec("autogen_agentchat") is not None:  # watch() instruments every installed framework
        from causaltrace.instrumentation.autogen import uninstrument_autogen

        uninstrument_autogen()
    reset_tracing()


def _root(exp, trace_id):
    return [s for s in exp.get_finished_spans()
            if semconv.is_root_span_name(s.name) and f"{s.context.trace_id:032x}" == trace_id]


def test_failed_runs_are_diagnosed_in_the_background(exporter):
    seen = []
    agent = example.build_failing()
    watcher = causaltrace.watch(agent, verify=example.verify, on_diagnosis=lambda d, r: seen.append((d, r)))
    try:
        agent.run(example.TASK)  # no causaltrace.run() block: the watch supplies the verifier
        diagnoses = watcher.wait(timeout_s=60)
    finally:
        watcher.close()
    assert len(diagnoses) == 1 and len(seen) == 1
    diagnosis, run = seen[0]
    assert run.outcome.status == "failure" and diagnosis.run_id == run.run_id
    assert diagnosis.decisive_step_index is not None and not diagnosis.failed
    root = _root(exporter, run.trace_id)
    assert len(root) == 1  # ended once, after the diagnosis was put on it
    attrs = root[0].attributes
    assert attrs[semconv.DIAGNOSIS_STEP_INDEX] == diagnosis.decisive_step_index
    assert any(e.name == "causaltrace.diagnosis" for e in root[0].events)
    # ended with the run's real end time, not when the diagnosis finished
    assert root[0].end_time == int(run.ended_at.timestamp() * 1_000_000) * 1000
    with Store() as store:
        assert store.diagnoses(run.run_id)[-1].decisive_step_index == diagnosis.decisive_step_index


def test_successful_runs_are_not_diagnosed_and_the_next_run_is_not_blocked(exporter):
    agent = example.build()
    watcher = causaltrace.watch(agent, verify=example.verify)
    try:
        started = time.perf_counter()
        agent.run(example.TASK)
        agent.run(example.TASK)
        assert time.perf_counter() - started < 30
        assert watcher.wait(timeout_s=30) == []
    finally:
        watcher.close()
    roots = [s for s in exporter.get_finished_spans() if semconv.is_root_span_name(s.name)]
    assert len(roots) == 2 and all(s.attributes[semconv.RUN_STATUS] == "success" for s in roots)


def test_past_the_bound_the_diagnosis_is_a_linked_span(exporter, monkeypatch):
    from causaltrace.attribution import engine

    release = threading.Event()
    original = engine.diagnose

    async def slow_diagnose(run, *args, **kwargs):
        release.wait(10)
        return await original(run, *args, **kwargs)

    monkeypatch.setattr(engine, "diagnose", slow_diagnose)
    agent = example.build_failing()
    watcher = causaltrace.watch(agent, verify=example.verify, bound_s=0.2)
    try:
        agent.run(example.TASK)
        deadline = time.time() + 10
        while time.time() < deadline and not [s for s in exporter.get_finished_spans()
                                              if semconv.is_root_span_name(s.name)]:
            time.sleep(0.05)
        roots = [s for s in exporter.get_finished_spans() if semconv.is_root_span_name(s.name)]
        assert len(roots) == 1 and semconv.DIAGNOSIS_STEP_INDEX not in roots[0].attributes  # ended at the bound
        release.set()
        (diagnosis,) = watcher.wait(timeout_s=60)
    finally:
        release.set()
        watcher.close()
    spans = [s for s in exporter.get_finished_spans() if s.name == "causaltrace.diagnosis"]
    assert len(spans) == 1
    span = spans[0]
    assert span.context.trace_id == roots[0].context.trace_id and span.parent.span_id == roots[0].context.span_id
    assert span.attributes[semconv.DIAGNOSIS_STEP_INDEX] == diagnosis.decisive_step_index
    decisive = next(s for s in exporter.get_finished_spans()
                    if s.attributes.get(semconv.STEP_INDEX) == diagnosis.decisive_step_index
                    and s.context.trace_id == span.context.trace_id)
    assert [link.context.span_id for link in span.links] == [decisive.context.span_id]
