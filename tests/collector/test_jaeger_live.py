"""A run's spans sent to a real Jaeger (v1.76.0, built locally) over OTLP/HTTP and OTLP/gRPC, read back from
``/api/v3/traces``: one trace, every step with its kind and agent, parent/child intact, every dependency a link with
its kind. Then ``causaltrace pull`` gets the same run back from Jaeger's query API."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import causaltrace
from _jaeger import running_jaeger
from causaltrace import semconv
from causaltrace.collector import tool_spans
from causaltrace.collector.jaeger import pull_from_jaeger
from causaltrace.collector.otlp import runs_from_otlp
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.steps import Dep
from causaltrace.instrumentation.tracing import configure, reset_tracing

pytestmark = pytest.mark.jaeger


def _exporter(protocol: str, jaeger):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=jaeger.otlp_grpc_endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=jaeger.otlp_http_traces_url)


def _emit_team(ctx):
    task = ctx.add_step("task", agent="user", content="what is 2+3?")
    turn = ctx.start_step("agent_turn", agent="solver", depends_on=[Dep(task.step_id, "saw")])
    llm = ctx.start_step("llm_response", agent="solver", parent=turn, depends_on=[Dep(task.step_id, "saw")],
                         model="scripted")
    llm.end(content="call add(2, 3)", usage=(10, 4))
    call = ctx.add_step("tool_call", agent="solver", parent=turn, tool_name="add", arguments={"a": 2, "b": 3},
                        call_id="c0", depends_on=[Dep(llm.step_id, "produced_by")])
    res = ctx.start_step("tool_response", agent="solver", parent=turn, tool_name="add", call_id="c0",
                         depends_on=[Dep(call.step_id, "tool_result_of")])
    res.end(outputs={"result": "5", "is_error": False}, content="5")
    llm2 = ctx.start_step("llm_response", agent="solver", parent=turn,
                          depends_on=[Dep(res.step_id, "observed"), Dep(llm.step_id, "continues")], model="scripted")
    llm2.end(content="The answer is 5")
    msg = ctx.add_step("message", agent="solver", parent=turn, content="The answer is 5",
                       depends_on=[Dep(llm2.step_id, "produced_by")])
    turn.end()
    rturn = ctx.start_step("agent_turn", agent="reviewer", depends_on=[Dep(msg.step_id, "saw")])
    rllm = ctx.start_step("llm_response", agent="reviewer", parent=rturn, depends_on=[Dep(msg.step_id, "saw")])
    rllm.end(content="APPROVE", status="error", error=RuntimeError("reviewer crashed"))
    rturn.end(status="error", error="reviewer crashed")
    ctx.report_end(final_answer="The answer is 5")


def _fetch_trace(jaeger, trace_id: str, expected_spans: int, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        try:
            last = jaeger.get_json(f"/api/v3/traces/{trace_id}")
        except Exception:  # 404 until the trace is indexed
            last = {}
        spans = [s for rs in last.get("result", {}).get("resourceSpans", [])
                 for ss in rs.get("scopeSpans", []) for s in ss.get("spans", [])]
        if len(spans) >= expected_spans:
            return last
        time.sleep(0.3)
    raise AssertionError(f"Jaeger returned {last!r} for trace {trace_id}")


def _attr(span: dict, key: str):
    for a in span.get("attributes", []):
        if a["key"] == key:
            v = a["value"]
            return next(iter(v.values()))
    return None


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_run_spans_round_trip_through_jaeger(tmp_path, protocol):
    with running_jaeger(tmp_path) as jaeger:
        provider = TracerProvider(resource=Resource.create({"service.name": f"ct-test-{protocol}"}))
        processor = SimpleSpanProcessor(_exporter(protocol, jaeger))
        provider.add_span_processor(processor)
        configure(provider, TraceConfig(store=False))
        try:
            with causaltrace.run(task="what is 2+3?", verify="5", name=f"jaeger-{protocol}") as handle:
                _emit_team(current_run())
        finally:
            provider.shutdown()
            reset_tracing()
        run = handle.run
        pairs = tool_spans.call_result_pairs(run.steps)  # a tool call and its result are one span
        answer = _fetch_trace(jaeger, run.trace_id, expected_spans=len(run.steps) + 1 - len(pairs))
        spans = [s for rs in answer["result"]["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
        assert {s["traceId"].lower() for s in spans} == {run.trace_id}  # one trace
        by_step = {_attr(s, semconv.STEP_ID): s for s in spans if _attr(s, semconv.STEP_ID)}
        by_step.update({_attr(s, semconv.RESULT_ID): s for s in spans if _attr(s, semconv.RESULT_ID)})
        assert set(by_step) == {s.step_id for s in run.steps}
        span_id_of = {sid: s["spanId"] for sid, s in by_step.items()}
        root = next(s for s in spans if semconv.is_root_span_name(s["name"]))
        results = {result.step_id: result for result in pairs.values()}
        for step in run.steps:
            span = by_step[step.step_id]
            if step.step_id in results:
                assert _attr(span, semconv.RESULT_KIND) == step.kind
                continue
            assert _attr(span, semconv.STEP_KIND) == step.kind
            assert _attr(span, semconv.STEP_AGENT) == step.agent
            expected_parent = span_id_of[step.parent_step_id] if step.parent_step_id else root["spanId"]
            assert span.get("parentSpanId") == expected_parent
            links = {(link["spanId"], _attr(link, semconv.DEPENDENCY_KIND)) for link in span.get("links", [])}
            deps = step.depends_on + (pairs[step.step_id].depends_on if step.step_id in pairs else ())
            assert links == {(span_id_of[d.step_id], d.kind) for d in deps if span_id_of[d.step_id] != span["spanId"]}
        errors = [s for s in spans if s.get("status", {}).get("code") in (2, "STATUS_CODE_ERROR")]
        assert {_attr(s, semconv.STEP_KIND) for s in errors} == {"llm_response", "agent_turn"}
        # and the whole run comes back from Jaeger, as `causaltrace pull` gets it
        pulled = pull_from_jaeger(run.trace_id, jaeger.query_url)
        assert len(pulled) == 1
        back = pulled[0]
        assert [(s.index, s.kind, s.agent, s.status, s.depends_on) for s in back.steps] == [
            (s.index, s.kind, s.agent, s.status, s.depends_on) for s in run.steps
        ]
        assert back.outcome == run.outcome and back.task == run.task
        assert runs_from_otlp(answer["result"])[0].run_id == run.run_id


SCRIPT = """
import causaltrace
from causaltrace.instrumentation.tracing import configure, reset_tracing
from causaltrace.instrumentation.runs import current_run
with causaltrace.run(task="env export", verify="ok") as handle:
    ctx = current_run()
    ctx.add_step("message", agent="solo", content="ok")
    handle.report(final_answer="ok")
from opentelemetry import trace
trace.get_tracer_provider().shutdown()   # flush the batch exporter before exiting
print(handle.run.trace_id)
"""


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_standard_otel_env_vars_configure_export(tmp_path, protocol):
    """A user who only sets OTEL_EXPORTER_OTLP_ENDPOINT / _PROTOCOL and OTEL_SERVICE_NAME gets the run in Jaeger."""
    import os
    import subprocess
    import sys

    with running_jaeger(tmp_path) as jaeger:
        endpoint = jaeger.otlp_grpc_endpoint if protocol == "grpc" else jaeger.otlp_http_endpoint
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
               "OTEL_SERVICE_NAME": f"env-{protocol.replace('/', '-')}", "CAUSALTRACE_STORE": "false"}
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        trace_id = out.stdout.strip().splitlines()[-1]
        answer = _fetch_trace(jaeger, trace_id, expected_spans=2)
        services = {_attr(rs["resource"], "service.name") for rs in answer["result"]["resourceSpans"]}
        assert services == {env["OTEL_SERVICE_NAME"]}
