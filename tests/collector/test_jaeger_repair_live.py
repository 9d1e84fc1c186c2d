"""One trace per user run in a real Jaeger, and a run collected only through Jaeger repaired (issue 22 items 3, 4).

A fresh process exports to Jaeger over OTLP/HTTP with causaltrace's own provider (``OTEL_EXPORTER_OTLP_ENDPOINT``)
and NO store (``CAUSALTRACE_STORE=false``): two runs of the scripted AutoGen team (one good, one with the planted
fault), then ``pull`` of the failing one from Jaeger and ``repair`` of the pulled run — which replays it from the
Recording its root span carried, with no model (zero live calls before the intervention), and flips it. Jaeger's
search list then holds exactly the two user runs: no replay trace, no factory ``create_agent`` trace, no AutoGen
``publish / process / ack`` trace, and inside each run's trace only causaltrace's spans.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _jaeger import running_jaeger
from causaltrace import semconv
from causaltrace.collector.jaeger import query_jaeger_traces

pytestmark = pytest.mark.jaeger

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SCRIPT = r"""
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[2])
import autogen_team as example
import causaltrace
from opentelemetry import trace
from causaltrace.collector.jaeger import pull_from_jaeger
from causaltrace.instrumentation.autogen import instrument_autogen
from causaltrace.replay.repair import repair
from causaltrace.replay.sandbox import SubprocessSandbox

QUERY = sys.argv[1]


def pulled_run(run):
    deadline = time.monotonic() + 30
    while True:
        try:
            (back,) = pull_from_jaeger(run.trace_id, QUERY)
            if len(back.steps) == len(run.steps) and back.recording is not None:
                return back
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.3)


async def main():
    instrument_autogen()
    async with causaltrace.run(task=example.TASK, verify=example.verify, name="good") as good:
        await example.build().run(task=example.TASK)
    async with causaltrace.run(task=example.TASK, verify=example.verify, name="faulty") as bad:
        await example.build_failing().run(task=example.TASK)
    trace.get_tracer_provider().force_flush()
    run = pulled_run(bad.run)
    result = await repair(run, example.build_failing, example.verify, store=False, sandbox=SubprocessSandbox())
    trace.get_tracer_provider().force_flush()
    print(json.dumps({
        "good": good.run.trace_id, "faulty": bad.run.trace_id, "status": run.outcome.status,
        "recorded": len(bad.run.recording.calls), "pulled_recorded": len(run.recording.calls),
        "repaired": result.repaired, "replays": len(result.attempts),
        "live_before": result.live_calls_before_intervention,
        "decisive": [run.step(result.decisive.step_id).kind, run.step(result.decisive.step_id).tool_name]
        if result.decisive is not None else None,
    }))
    trace.get_tracer_provider().shutdown()


asyncio.run(main())
"""


def _spans(answer: dict) -> list[dict]:
    return [s for rs in answer.get("result", {}).get("resourceSpans", [])
            for ss in rs.get("scopeSpans", []) for s in ss.get("spans", [])]


def _scopes(answer: dict) -> set[str]:
    return {ss.get("scope", {}).get("name", "") for rs in answer.get("result", {}).get("resourceSpans", [])
            for ss in rs.get("scopeSpans", [])}


def test_two_runs_and_a_repair_are_two_traces_and_the_pulled_run_repairs(tmp_path):
    pytest.importorskip("autogen_agentchat")
    with running_jaeger(tmp_path) as jaeger:
        service = "ct-quiet"
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint,
            "OTEL_SERVICE_NAME": service,
            "CAUSALTRACE_STORE": "false",
        }
        env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        start = datetime.now(UTC) - timedelta(minutes=1)
        proc = subprocess.run([sys.executable, "-c", SCRIPT, jaeger.query_url, str(EXAMPLES)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        facts = json.loads(proc.stdout.strip().splitlines()[-1])
        # item 4: the run came back from Jaeger with its recording, and repair replayed it with no model
        assert facts["status"] == "failure" and facts["recorded"] == facts["pulled_recorded"] > 0
        assert facts["repaired"] and facts["live_before"] == 0 and facts["decisive"] == ["tool_call", "add"]
        # item 3: Jaeger's search list is the two user runs, nothing else
        answer = query_jaeger_traces(jaeger.query_url, service, start, datetime.now(UTC) + timedelta(minutes=1),
                                     limit=1000)
        spans = _spans(answer)
        traces = {s["traceId"].lower() for s in spans}
        per_run = {name: sum(1 for s in spans if s["traceId"].lower() == facts[name]) for name in ("good", "faulty")}
        print(f"replays tried: {facts['replays']}; traces in Jaeger: {len(traces)}; spans: {len(spans)}; "
              f"spans per user run: {per_run}")
        assert traces == {facts["good"], facts["faulty"]}
        assert _scopes(answer) == {semconv.INSTRUMENTATION_NAME}  # no AutoGen runtime / duplicate agent spans
        roots = [s for s in spans if semconv.is_root_span_name(s["name"])]
        assert sorted(s["name"] for s in roots) == ["invoke_workflow faulty", "invoke_workflow good"]
