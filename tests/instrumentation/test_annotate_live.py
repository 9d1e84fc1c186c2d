"""The verdict reaches the trace (issue 33 item 5), read back from a real Jaeger and a real Arize Phoenix.

The flagship AutoGen example's failing team runs once under ``causaltrace run`` (a fresh process exporting over
OTLP/HTTP, the run stored in a temporary home); then ``run`` itself, ``diagnose``, ``repair`` and ``watch`` — each
in a fresh process with the backend configured, so ``--annotate`` is on by default — put the run's verdict into its
trace: a span
``decisive: #N {kind} by {agent}``, child of the run's root span, linked to the decisive step's span, carrying the
verdict, its basis, confidence and evidence; with Phoenix also a span annotation on the decisive step. Jaeger is read
through ``/api/v3/traces/{id}``, Phoenix through its REST API and once in headless Chromium. A backend that does not
answer is one warning line and exit 0; an uncertain verdict is annotated as uncertain.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from _jaeger import running_jaeger
from _phoenix import phoenix_python, running_phoenix
from causaltrace.collector.store import Store
from causaltrace.config import BackendSettings
from conftest import require

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "autogen_team.py"
sys.path.insert(0, str(ROOT / "examples"))
import autogen_team  # noqa: E402

FACTORY = f"{EXAMPLE}:build_failing"
VERIFY = f"{EXAMPLE}:verify"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "CAUSALTRACE_", "PHOENIX_"))}
    src = str(ROOT / "src")
    env.update({"CAUSALTRACE_HOME": str(home), "PYTHONPATH": src + os.pathsep + env.get("PYTHONPATH", ""),
                "OTEL_SERVICE_NAME": "ct-annotate", "OTEL_BSP_SCHEDULE_DELAY": "100", **extra})
    return env


def _cli(env: dict[str, str], *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "causaltrace.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _record(home: Path, **backend: str) -> Any:
    """One run of the failing team, traced to the backend and stored; the stored Run."""
    env = _env(home, **backend)
    proc = _cli(env, "run", FACTORY, "--task", autogen_team.TASK, "--verify", VERIFY)
    assert proc.returncode == 3, proc.stderr  # the run failed (and was diagnosed)
    with Store(home / "causaltrace.db", readonly=True) as db:
        (row,) = db.list_runs()
        return db.get_run(row["run_id"])


def _root_and_spans(trace: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spans = [s for rs in trace["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    return root, spans


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for a in span.get("attributes", []):
        v = a["value"]
        if "arrayValue" in v:
            out[a["key"]] = [next(iter(x.values())) for x in v["arrayValue"].get("values", [])]
        else:
            out[a["key"]] = next(iter(v.values()), None)
    return out


def _annotations(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(("decisive:", "uncertain"))]


def _jaeger_trace(jaeger, trace_id: str, ready, timeout: float = 30.0) -> dict[str, Any]:
    """The trace once ``ready(spans)`` holds (Jaeger ingests asynchronously)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = jaeger.get_json(f"/api/v3/traces/{trace_id}")["result"]
            if ready(_root_and_spans(last)[1]):
                return last
        except (OSError, KeyError, ValueError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"Jaeger's trace never got ready: {last}")


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory):
    with running_jaeger(tmp_path_factory.mktemp("jaeger")) as instance:
        yield instance


def test_diagnose_and_repair_annotate_the_trace_in_jaeger(jaeger, tmp_path):
    home = tmp_path / "home"
    backend = {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http_endpoint}
    run = _record(home, **backend)
    env = _env(home, **backend)
    diagnosed = _cli(env, "diagnose", run.run_id)
    assert diagnosed.returncode == 0, diagnosed.stderr
    assert f"causaltrace: annotated trace {run.trace_id}: span " in diagnosed.stderr
    repaired = _cli(env, "repair", run.run_id, "--factory", FACTORY, "--verify", VERIFY)
    assert repaired.returncode == 0, repaired.stderr + repaired.stdout
    assert "the run's verdict: decisive error: #6 tool_call by solver" in repaired.stdout
    assert "annotated trace" in repaired.stderr

    # run, diagnose and repair each annotated it; repair's is the replay-verified one
    trace = _jaeger_trace(jaeger, run.trace_id, lambda spans: len(_annotations(spans)) >= 3)
    root, spans = _root_and_spans(trace)
    decisive = run.step_at(6)
    (span,) = [s for s in spans if s["name"] == "decisive: #6 tool_call by solver"
               and _attrs(s)["causaltrace.diagnosis.verified_by"] == "replay"]
    assert span["parentSpanId"] == root["spanId"]  # a child of the run's root span
    assert [link["spanId"] for link in span.get("links", [])] == [decisive.span_id]  # linked to the decisive step
    attrs = _attrs(span)
    assert attrs["causaltrace.verdict.headline"] == "decisive error: #6 tool_call by solver"
    assert attrs["causaltrace.diagnosis.step.index"] in (6, "6")
    assert attrs["causaltrace.verdict.basis"] in ("correction", "not recorded")
    assert float(attrs["causaltrace.verdict.confidence"]) > 0.5
    assert attrs["causaltrace.verdict.span_id"] == decisive.span_id
    assert attrs["causaltrace.verdict.uncertain"] in (False, "false")
    assert "replay" in attrs["causaltrace.verdict.source"]
    # the annotation keeps the trace's duration: it is timed at the run's end
    assert int(span["endTimeUnixNano"]) <= int(root["endTimeUnixNano"]) + 1_000_000


WATCH = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import autogen_team as example
import causaltrace
from opentelemetry import trace


async def main():
    team = example.build_failing()
    watcher = causaltrace.watch(team, verify=example.verify, factory=example.build_failing, repair=True)
    await team.run(task=example.TASK)
    (diagnosis,) = watcher.wait(timeout_s=240)
    trace.get_tracer_provider().force_flush()
    print(json.dumps({"run_id": diagnosis.run_id}))


asyncio.run(main())
"""


def test_watch_annotates_a_failed_runs_trace(jaeger, tmp_path):
    home = tmp_path / "home"
    env = _env(home, OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_http_endpoint)
    proc = subprocess.run([sys.executable, "-c", WATCH, str(ROOT / "examples")], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout.strip().splitlines()[-1])["run_id"]
    with Store(home / "causaltrace.db", readonly=True) as db:
        run = db.get_run(run_id)
    root, spans = _root_and_spans(_jaeger_trace(jaeger, run.trace_id, lambda spans: bool(_annotations(spans))))
    (span,) = _annotations(spans)
    assert span["name"] == "decisive: #6 tool_call by solver" and span["parentSpanId"] == root["spanId"]
    assert [link["spanId"] for link in span["links"]] == [run.step_at(6).span_id]


def test_an_uncertain_verdict_is_annotated_as_uncertain(jaeger, tmp_path):
    from causaltrace.instrumentation.annotate import annotate_verdict

    home = tmp_path / "home"
    run = _record(home, OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_http_endpoint)
    with Store(home / "causaltrace.db", readonly=True) as db:
        stored = db.verdict(run.run_id)
    unsure = stored.model_copy(update={"basis": "none", "confidence": 0.2, "verified_by": "heuristic",
                                       "findings": ()})
    done = annotate_verdict(run, unsure, BackendSettings(otlp_endpoint=jaeger.otlp_http_endpoint))
    assert done.warning is None, done.problems
    trace = _jaeger_trace(jaeger, run.trace_id, lambda spans: any(s["spanId"] == done.span_id for s in spans))
    root, spans = _root_and_spans(trace)
    (span,) = [s for s in spans if s["spanId"] == done.span_id]
    assert span["name"].startswith("uncertain") and "decisive" not in span["name"]
    attrs = _attrs(span)
    assert attrs["causaltrace.verdict.uncertain"] in (True, "true")
    assert attrs["causaltrace.verdict.headline"] == "uncertain: no step shows evidence of an error"
    assert len(attrs["causaltrace.verdict.top"]) == 3
    assert span["parentSpanId"] == root["spanId"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_backend_that_does_not_answer_is_one_warning_line_and_exit_0(jaeger, tmp_path):
    home = tmp_path / "home"
    run = _record(home, OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_http_endpoint)
    dead = f"http://127.0.0.1:{_closed_port()}"
    env = _env(home, OTEL_EXPORTER_OTLP_ENDPOINT=dead, OTEL_EXPORTER_OTLP_TIMEOUT="2", CAUSALTRACE_PHOENIX_URL=dead)
    started = time.monotonic()
    proc = _cli(env, "diagnose", run.run_id)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("causaltrace: warning: could not annotate the trace"), warnings
    assert time.monotonic() - started < 60
    # switched off, nothing is tried and nothing is said
    quiet = _cli(env, "diagnose", run.run_id, "--no-annotate")
    assert quiet.returncode == 0 and not quiet.stderr.strip(), quiet.stderr


# ------------------------------------------------------------------------------------------------------- Phoenix


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    python = phoenix_python()
    require(python is not None, "Phoenix is not installed (run scripts/install_phoenix.sh)")
    with running_phoenix(python, tmp_path_factory.mktemp("phoenix")) as instance:
        yield instance


def _until(fetch, ok, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        try:
            value = fetch()
            if ok(value):
                return value
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"never satisfied: {value}")


def test_repair_annotates_the_trace_and_the_decisive_span_in_phoenix(phoenix, tmp_path):
    home = tmp_path / "home"
    project = "ct-annotate"
    backend = {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url, "CAUSALTRACE_PROJECT": project,
               "CAUSALTRACE_PHOENIX_URL": phoenix.url}
    run = _record(home, **backend)
    env = _env(home, **backend)
    repaired = _cli(env, "repair", run.run_id, "--factory", FACTORY, "--verify", VERIFY)
    assert repaired.returncode == 0, repaired.stderr + repaired.stdout
    decisive = run.step_at(6)
    assert f"(Phoenix annotation on span {decisive.span_id})" in repaired.stderr, repaired.stderr

    spans = _until(lambda: phoenix.spans(project),
                   lambda got: any(s["attributes"].get("causaltrace.diagnosis.verified_by") == "replay"
                                   for s in got if s["name"].startswith("decisive:")))
    ours = [s for s in spans if s["context"]["trace_id"] == run.trace_id]
    root = next(s for s in ours if s["parent_id"] is None)
    # `run` annotated the trace with its diagnosis too; the replay-verified verdict's span is repair's
    (span,) = [s for s in ours if s["name"].startswith("decisive:")
               and s["attributes"].get("causaltrace.diagnosis.verified_by") == "replay"]
    assert span["name"] == "decisive: #6 tool_call by solver"
    assert span["span_kind"] == "EVALUATOR" and span["parent_id"] == root["context"]["span_id"]
    assert span["attributes"]["causaltrace.verdict.span_id"] == decisive.span_id
    assert "decisive error: #6 tool_call by solver" in span["attributes"]["output.value"]

    query = urllib.parse.urlencode({"span_ids": decisive.span_id})
    notes = _until(lambda: phoenix.get_json(f"/v1/projects/{project}/span_annotations?{query}")["data"],
                   lambda got: bool(got))
    (note,) = [n for n in notes if n["name"] == "causaltrace verdict"]
    assert note["span_id"] == decisive.span_id and note["annotator_kind"] == "CODE"
    assert note["result"]["label"] == "decisive error" and note["result"]["score"] > 0.5
    assert "replay" in note["result"]["explanation"]
    assert note["metadata"]["decisive_step_index"] == 6

    _phoenix_ui_shows_it(phoenix, project, run.trace_id, tmp_path)


def _phoenix_ui_shows_it(phoenix, project: str, trace_id: str, tmp_path: Path) -> None:
    """Once in headless Chromium: Phoenix's own trace page lists the ``decisive: …`` span (screenshot kept)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _report_browser import Chromium, chromium_available

    require(chromium_available(), "chromium is not installed (apt-get install chromium)")
    edges = phoenix.graphql("{ projects { edges { node { id name } } } }")["data"]["projects"]["edges"]
    project_id = next(e["node"]["id"] for e in edges if e["node"]["name"] == project)
    with Chromium(timeout=120) as browser:
        browser.open(f"{phoenix.url}/projects/{project_id}/traces/{trace_id}", width=1600, height=1000)
        text = _until(lambda: browser.evaluate("document.body.innerText"),
                      lambda got: "decisive: #6 tool_call by solver" in (got or ""), timeout=60)
        assert "decisive: #6 tool_call by solver" in text
        # open the span: Phoenix shows its output (the verdict, its source and evidence)
        browser.evaluate("(function () { var hit = Array.from(document.querySelectorAll('span, div')).filter("
                         "el => el.children.length === 0 && el.textContent.trim() === 'decisive: #6 tool_call by "
                         "solver'); if (hit.length) { hit[0].click(); } })()")
        shown = _until(lambda: browser.evaluate("document.body.innerText"),
                       lambda got: "replay-verified correction" in (got or ""), timeout=30)
        assert "decisive error: #6 tool_call by solver" in shown
        shot = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
        import base64

        (tmp_path / "phoenix-trace.png").write_bytes(base64.b64decode(shot))
