"""``pull --jaeger URL --service S --since … [--failed] [--limit N]`` (issue 23 item 3) against a REAL Jaeger
(v1.76.0, tests/_jaeger.py): runs of one service sent over OTLP/HTTP as a fleet's collector forwards them, then
pulled back by walking the time range in windows (Jaeger's search has no page token: a full answer is split in
halves) — every run once, ``--failed`` by the root span's status, ``--limit`` the newest, a trace that forms no run
skipped with its reason, a second pull unchanged."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from _builders import RunBuilder
from _jaeger import running_jaeger
from _otlp_send import post_otlp, request_of
from causaltrace.cli import main
from causaltrace.collector.jaeger_fleet import pull_service
from causaltrace.collector.otlp import run_to_otlp
from causaltrace.collector.store import Store
from causaltrace.exceptions import UserError
from causaltrace.schema import Outcome

pytest.importorskip("opentelemetry.proto")
pytestmark = pytest.mark.jaeger
SERVICE = "nightly-agents"


def _run(i: int, t0: datetime):
    failed = i % 3 != 1
    return (RunBuilder(f"night-{i}", t0=t0).task(f"add {i} and 3").turn("solver")
            .tool_call("solver", "add", {"a": i, "b": 3}, call_id=f"c{i}")
            .tool_response("solver", i + 3 + failed, deps=[("call-1", "tool_result_of")]).end_turn()
            .build(outcome=Outcome(status="failure" if failed else "success"), framework="autogen", task=f"add {i}"))


def _http_trace(t0: datetime) -> dict:
    ns = str(int(t0.timestamp() * 1e9))
    span = {"traceId": "9" * 32, "spanId": "9" * 16, "name": "GET /health", "startTimeUnixNano": ns,
            "endTimeUnixNano": ns, "attributes": []}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def _wait_for_traces(jaeger, n: int, since: datetime, timeout: float = 30.0) -> None:
    start = since.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    end = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    deadline = time.monotonic() + timeout
    found = 0
    while time.monotonic() < deadline:
        try:
            answer = jaeger.get_json(f"/api/v3/traces?query.service_name={SERVICE}&query.start_time_min={start}"
                                     f"&query.start_time_max={end}&query.num_traces=100")
            found = len({s["traceId"] for rs in answer["result"]["resourceSpans"] for ss in rs["scopeSpans"]
                         for s in ss["spans"]})
        except Exception:  # 404 until the first trace is indexed
            found = 0
        if found >= n:
            return
        time.sleep(0.3)
    raise AssertionError(f"Jaeger indexed {found} of {n} traces")


def test_a_services_traces_are_pulled_window_by_window(tmp_path, capsys):
    now = datetime.now(UTC).replace(microsecond=0)
    runs = [_run(i, now - timedelta(minutes=50 - 7 * i)) for i in range(7)]  # 50 .. 8 minutes ago
    with running_jaeger(tmp_path) as jaeger:
        for run in runs:
            post_otlp(jaeger.otlp_http_traces_url, request_of(run_to_otlp(run)), {"service.name": SERVICE})
        post_otlp(jaeger.otlp_http_traces_url, request_of(_http_trace(now - timedelta(minutes=30))),
                  {"service.name": SERVICE})
        since, until = now - timedelta(hours=1), now + timedelta(minutes=1)
        _wait_for_traces(jaeger, len(runs) + 1, since)

        windows = list(pull_service(jaeger.query_url, SERVICE, since, until, page=3))
        assert len(windows) > 3  # full answers were split
        assert [w.start for w in windows] == sorted((w.start for w in windows), reverse=True)  # newest first
        pulled = sorted((r for w in windows for r in w.pulled.runs), key=lambda r: r.run_id)
        assert [r.run_id for r in pulled] == [r.run_id for r in runs]
        for back, sent in zip(pulled, runs, strict=True):
            assert back.outcome == sent.outcome and back.task == sent.task
            assert [(s.index, s.kind, s.agent, s.depends_on, s.arguments) for s in back.steps] == [
                (s.index, s.kind, s.agent, s.depends_on, s.arguments) for s in sent.steps]
        skipped = [s for w in windows for s in w.pulled.skipped]
        assert [s.trace_id for s in skipped] == ["9" * 32] and "OpenInference" in skipped[0].reason

        failed = [r.run_id for w in pull_service(jaeger.query_url, SERVICE, since, until, failed=True, page=3)
                  for r in w.pulled.runs]
        assert sorted(failed) == sorted(r.run_id for r in runs if r.outcome.status == "failure")
        newest = [r.run_id for w in pull_service(jaeger.query_url, SERVICE, since, until, limit=2, page=3)
                  for r in w.pulled.runs]
        assert sorted(newest) == ["night-5", "night-6"]

        argv = ["pull", "--jaeger", jaeger.query_url, "--service", SERVICE, "--since", "1h", "--failed"]
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert sorted(out.split()) == sorted(failed) and err == ""
        assert main(argv) == 0 and sorted(capsys.readouterr()[0].split()) == sorted(failed)  # again: unchanged
        with Store() as store:
            assert sorted(r["run_id"] for r in store.list_runs()) == sorted(failed)
        assert main(["pull", "--jaeger", jaeger.query_url, "--service", "no-such-service", "--since", "1h"]) == 2
        assert "no runs pulled" in capsys.readouterr()[1]


def test_bad_service_pulls_are_user_errors():
    now = datetime.now(UTC)
    with pytest.raises(UserError, match="service name is needed"):
        list(pull_service("http://127.0.0.1:9", " ", now - timedelta(hours=1), now))
    with pytest.raises(UserError, match="time range is empty"):
        list(pull_service("http://127.0.0.1:9", "s", now, now - timedelta(hours=1)))
    with pytest.raises(UserError, match="cannot reach Jaeger at http://127.0.0.1:9"):
        list(pull_service("http://127.0.0.1:9", "s", now - timedelta(hours=1), now, timeout_s=2))
