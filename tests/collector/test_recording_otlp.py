"""The Recording travels on a live run's root span, as its ``causaltrace.run.recording`` event (collector.recording_otlp,
issue 22 item 4, issue 33 item 4): a run rebuilt from
the live OTLP stream has its recorded calls back; the payload policy governs it (hidden payloads, redaction, the
switch, the size ceiling: not exported, and the run says why); chunks that do not add up are marked, not fatal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import causaltrace
from causaltrace import semconv
from causaltrace.collector.otlp import runs_from_otlp
from causaltrace.collector.recording_otlp import (
    ENCODING,
    OMITTED_METADATA_KEY,
    RecordingExport,
    recording_attributes,
    recording_from_attributes,
)
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.tracing import configure, reset_tracing

SECRET = "sk-live-123"


def _recorded_run(n_calls: int = 3, text: str = "x") -> None:
    """A run with ``n_calls`` recorded LLM calls and their steps (what an adapter records)."""
    ctx = current_run()
    ctx.add_step("task", agent="user", content="add 2 and 3")
    for i in range(n_calls):
        call = ctx.begin_call("solver", "llm", {"messages": [{"role": "user", "content": f"{text} {i} {SECRET}"}]},
                              settings={"model": "gpt-4o-mini"})
        step = ctx.start_step("llm_response", agent="solver", model="gpt-4o-mini")
        step.end(content=f"answer {i}")
        call.finish({"content": f"answer {i}", "usage": [3, 1]}, step_id=step.step_id)
    ctx.report_end(final_answer="5")


def _live(span_capture, config: TraceConfig, **kw: Any):
    """Run :func:`_recorded_run` live into an in-memory exporter; (stored Run, the run read back from its OTLP)."""
    provider, exporter = span_capture
    configure(provider, config)
    try:
        with causaltrace.run(task="add 2 and 3", verify="5") as handle:
            _recorded_run(**kw)
    finally:
        reset_tracing()
    request = MessageToDict(encode_spans(exporter.get_finished_spans()))
    (back,) = runs_from_otlp(json.loads(json.dumps(request)))
    root = next(s for s in exporter.get_finished_spans() if semconv.is_root_span_name(s.name))
    events = [e for e in root.events if e.name == semconv.RECORDING_EVENT]
    assert len(events) <= 1 and semconv.RECORDING_CHUNKS not in (root.attributes or {})  # an event, not tags
    return handle.run, back, {**(root.attributes or {}), **(dict(events[0].attributes) if events else {})}


def test_live_run_carries_its_recording(span_capture):
    run, back, root = _live(span_capture, TraceConfig(store=False, max_attribute_chars=100))
    assert run.recording is not None and len(run.recording.calls) == 3
    assert back.recording == run.recording  # 3 -> 3 recorded calls, from the live stream alone
    assert root[semconv.RECORDING_ENCODING] == ENCODING
    chunks = root[semconv.RECORDING_CHUNKS]
    assert len(chunks) > 3 and all(len(c) <= 100 for c in chunks)  # chunked to the attribute limit
    assert semconv.RUN_RECORDING not in root  # never one long (cut) attribute


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (TraceConfig(store=False, hide_inputs=True), "hidden inputs"),
        (TraceConfig(store=False, hide_outputs=True), "hidden outputs"),
        (TraceConfig(store=False, redact=lambda key, value: None if key == semconv.RUN_RECORDING else value),
         "redacted"),
    ],
)
def test_hidden_or_dropped_recording_is_not_exported_and_the_run_says_so(span_capture, config, reason):
    run, back, root = _live(span_capture, config)
    assert run.recording is not None and len(run.recording.calls) == 3  # still stored
    assert semconv.RECORDING_CHUNKS not in root and root[semconv.RECORDING_OMITTED] == reason
    assert SECRET not in json.dumps(root, default=str)
    assert back.recording is None and back.metadata[OMITTED_METADATA_KEY] == reason


def test_redaction_applies_to_the_recording(span_capture):
    def redact(key: str, value: Any) -> Any:
        return value.replace(SECRET, "[key]") if isinstance(value, str) else value

    run, back, root = _live(span_capture, TraceConfig(store=False, redact=redact))
    assert SECRET in run.recording.model_dump_json()  # the store keeps it whole
    assert back.recording is not None and len(back.recording.calls) == 3
    assert SECRET not in back.recording.model_dump_json() and "[key]" in back.recording.model_dump_json()


def test_switch_and_ceiling(span_capture, monkeypatch):
    monkeypatch.setenv("CAUSALTRACE_EXPORT_RECORDING", "false")
    _, back, root = _live(span_capture, TraceConfig(store=False))
    assert root[semconv.RECORDING_OMITTED] == "disabled" and back.recording is None
    monkeypatch.delenv("CAUSALTRACE_EXPORT_RECORDING")
    monkeypatch.setenv("CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES", "2000")
    span_capture[1].clear()
    run, back, root = _live(span_capture, TraceConfig(store=False), n_calls=20, text="y" * 50)
    size = len(run.recording.model_dump_json().encode())
    assert root[semconv.RECORDING_OMITTED] == f"too large: {size} bytes > 2000"
    assert back.recording is None and back.metadata[OMITTED_METADATA_KEY].startswith("too large")


def test_damaged_chunks_are_marked_not_fatal(span_capture):
    run, _, root = _live(span_capture, TraceConfig(store=False, max_attribute_chars=64))
    attrs = dict(root)
    chunks = list(attrs[semconv.RECORDING_CHUNKS])
    assert recording_from_attributes(attrs) == (run.recording, None)
    attrs[semconv.RECORDING_CHUNKS] = json.dumps(chunks)  # a backend that keeps arrays as JSON text
    assert recording_from_attributes(attrs) == (run.recording, None)
    attrs[semconv.RECORDING_CHUNKS] = chunks[:-1]  # a part lost on the way
    recording, why = recording_from_attributes(attrs)
    assert recording is None and why.startswith("damaged: ")
    attrs[semconv.RECORDING_CHUNKS] = [chunks[0].replace("a", "b", 1), *chunks[1:]]
    assert recording_from_attributes(attrs)[1] in ("damaged: the sha256 digest does not match",
                                                   f"damaged: {sum(map(len, chunks))} characters arrived, "
                                                   f"{sum(map(len, chunks))} were sent")


def test_the_store_writes_the_recorded_calls_from_the_json_the_export_made(span_capture, causaltrace_home):
    """Each recorded call's JSON is made once (issue 35 item 2): the export keeps it beside the Recording and the
    store's writer takes it for the call's row; the stored rows are that JSON, the run reads back equal."""
    import gc

    from causaltrace.collector.recording_otlp import take_call_texts
    from causaltrace.collector.store import Store

    run, _, _ = _live(span_capture, TraceConfig(store=False))  # no store: the export's JSON stays for the run
    assert take_call_texts(run.recording) == tuple(call.model_dump_json() for call in run.recording.calls)
    assert take_call_texts(run.recording) is None  # taken once
    span_capture[1].clear()
    run, _, _ = _live(span_capture, TraceConfig(store=True))
    assert take_call_texts(run.recording) is None  # the store's writer took it
    with Store() as store:
        assert store.get_run(run.run_id) == run
        rows = store._connection().execute(
            "SELECT data, chunks FROM recordings WHERE run_id = ? ORDER BY seq", (run.run_id,)).fetchall()
    assert rows == [(call.model_dump_json(), None) for call in run.recording.calls]
    span_capture[1].clear()
    run, _, _ = _live(span_capture, TraceConfig(store=False))
    recording_id = id(run.recording)
    del run
    gc.collect()
    from causaltrace.collector import recording_otlp

    assert all(key[1] != recording_id for key in recording_otlp._kept)  # kept only while the Recording lives


def test_the_store_keeps_as_chunks_the_literals_the_export_wrote(span_capture, causaltrace_home, monkeypatch):
    """A recording with a long text (issue 35 "Bad input"): the export measures it by writing the text's JSON
    literal, which the store's writer takes as the text's chunk instead of writing it again — kept only when a store
    is on; the run reads back equal, its long text a chunk."""
    from causaltrace.collector.recording_otlp import take_literals
    from causaltrace.collector.store import Store

    monkeypatch.setenv("CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES", "100000")  # measured, not sent
    text = 'é"\\n' * 20_000  # 100 K characters, long enough to be written apart
    run, _, root = _live(span_capture, TraceConfig(store=False), n_calls=2, text=text)
    assert root[semconv.RECORDING_OMITTED] == f"too large: {len(run.recording.model_dump_json().encode())} bytes > 100000"
    assert take_literals(run.recording) is None  # no store: nothing kept
    span_capture[1].clear()
    run, _, root = _live(span_capture, TraceConfig(store=True), n_calls=2, text=text)
    assert root[semconv.RECORDING_OMITTED].startswith("too large")
    assert take_literals(run.recording) is None  # the store's writer took them
    with Store() as store:
        assert store.get_run(run.run_id) == run
        chunks = store._connection().execute("SELECT data FROM recording_chunks").fetchall()
    assert any(json.loads(data).startswith(text) for (data,) in chunks)


def test_recording_attributes_bad_input():
    from causaltrace.schema import Recording

    assert recording_attributes(None, settings=RecordingExport(), chunk_chars=64) == {}
    empty = Recording(run_id="r", calls=())
    attrs = recording_attributes(empty, settings=RecordingExport(), chunk_chars=64)
    assert recording_from_attributes(attrs) == (empty, None)
    assert RecordingExport.from_env({"CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES": "lots"}).max_bytes == 2 * 1024 * 1024
    assert not RecordingExport.from_env({"CAUSALTRACE_EXPORT_RECORDING": "off"}).enabled


def test_a_trace_carrying_the_recording_as_root_attributes_still_imports(span_capture):
    """Traces written before the Recording moved to an event (its chunks among the root's attributes) import with
    their Recording."""
    run, _, root = _live(span_capture, TraceConfig(store=False, max_attribute_chars=100))
    request = MessageToDict(encode_spans(span_capture[1].get_finished_spans()))
    for span in request["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for event in span.pop("events", []):  # the old shape: the event's attributes were the root's own
            span["attributes"] += event["attributes"]
    (back,) = runs_from_otlp(json.loads(json.dumps(request)))
    assert back.recording == run.recording and len(back.recording.calls) == 3
