"""``pull --phoenix URL --project P`` (issue 23 item 1) against a REAL Arize Phoenix (tests/_phoenix.py).

The failing example team traced by the real OpenInference AutoGen AgentChat instrumentor, the same team's GenAI-only
spans (autogen-core's own), and causaltrace's own spans of stored runs are sent to Phoenix over OTLP/HTTP (protobuf,
as an exporter sends them, each in its own project); pulling them back through Phoenix's REST API gives exactly the
Runs that importing the same spans from an OTLP/JSON file gives — what Phoenix changes on the way (the span kind
moved out of the attributes, JSON attributes parsed and flattened, times as ISO text) is undone. Then the pulled run
is diagnosed, the time / status / limit filters select traces by their root span, and bad input is one line.

Phoenix comes from scripts/install_phoenix.sh; without it these tests skip (fail under CAUSALTRACE_STRICT=1).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _builders import RunBuilder, capture_spans
from _otlp_send import post_otlp, request_of
from _phoenix import phoenix_python, running_phoenix
from causaltrace.collector.otlp import load_otlp_json, run_to_otlp
from causaltrace.collector.phoenix import pull_from_phoenix
from causaltrace.exceptions import InvalidInputError, UserError
from causaltrace.schema import Outcome
from conftest import require

pytest.importorskip("opentelemetry.exporter.otlp.proto.common")
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
PROJECT_KEY = "openinference.project.name"  # the resource attribute Phoenix files a span's project by


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    python = phoenix_python()
    require(python is not None, "Phoenix is not installed (run scripts/install_phoenix.sh)")
    with running_phoenix(python, tmp_path_factory.mktemp("phoenix")) as instance:
        yield instance


# ------------------------------------------------------------------------------------------------ sending spans


def send(phoenix, request, project: str) -> None:
    post_otlp(phoenix.otlp_http_traces_url, request, {PROJECT_KEY: project})


def send_json(phoenix, document: dict, project: str) -> None:
    send(phoenix, request_of(document), project)


def wait_for(phoenix, project: str, n_spans: int, timeout: float = 90.0) -> None:
    """Until Phoenix holds ``n_spans`` spans in ``project`` (it inserts in the background)."""
    deadline = time.monotonic() + timeout
    held = 0
    while time.monotonic() < deadline:
        try:
            held = len(phoenix.spans(project))
        except OSError:  # the project does not exist yet
            held = 0
        if held >= n_spans:
            return
        time.sleep(0.5)
    raise AssertionError(f"Phoenix holds {held} of the {n_spans} spans sent to {project!r}")


def team_spans(monkeypatch, *, openinference: bool):
    """The failing example team's spans: OpenInference's (real instrumentor) or autogen-core's own GenAI spans."""
    pytest.importorskip("autogen_agentchat")
    oi = pytest.importorskip("openinference.instrumentation.autogen_agentchat")
    from opentelemetry import trace

    from causaltrace.testing.openai_wire import arithmetic_team_endpoints

    example = importlib.import_module("autogen_team")
    provider, exporter = capture_spans()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    instrumentor = oi.AutogenAgentChatInstrumentor()
    if openinference:
        instrumentor.instrument(tracer_provider=provider)
    try:
        team = example.build_with(tuple(e.autogen_client() for e in arithmetic_team_endpoints(off_by_one=True)))
        exporter.clear()
        if openinference:
            asyncio.run(team.run(task=example.TASK))
        else:  # autogen-core starts a trace per message; the user's own span makes the run one trace
            with provider.get_tracer("user-app").start_as_current_span("nightly-batch.run"):
                asyncio.run(team.run(task=example.TASK))
    finally:
        if openinference:
            instrumentor.uninstrument()
    return exporter.get_finished_spans()


def n_spans(run) -> int:
    """How many spans a stored run exports (its root, and one per step but a tool call's result, which shares its
    call's span)."""
    return len(run_to_otlp(run)["resourceSpans"][0]["scopeSpans"][0]["spans"])


def native_run(run_id: str, *, failed: bool, t0: datetime):
    """A stored causaltrace run (a turn with a tool call and its result) with nested and dotted metadata."""
    outcome = Outcome(status="failure", reason="wrong sum") if failed else Outcome(status="success")
    return (RunBuilder(run_id, t0=t0).task("add 2 and 3").turn("solver")
            .llm("solver", "I will call add.", tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 3}}],
                 deps=[("task", "saw")])
            .tool_call("solver", "add", {"a": 2, "b": 3}, call_id="c1", deps=[("llm-1", "produced_by")])
            .tool_response("solver", 6 if failed else 5, deps=[("call-1", "tool_result_of")])
            .message("solver", f"the sum is {6 if failed else 5}", deps=[("llm-1", "produced_by")]).end_turn()
            .build(outcome=outcome, framework="autogen", task="add 2 and 3",
                   metadata={"batch": {"night": "2026-12-01", "hosts": ["a", "b"], "shards": [{"n": 1}]}}))


# ------------------------------------------------------------------------------------------------------ the tests


def untimed(run):
    """The run with its steps' source times left out (Phoenix answers them rounded to the microsecond)."""
    return run.model_copy(update={"steps": tuple(
        s.model_copy(update={"source": s.source.model_copy(update={"start_time": None, "end_time": None})})
        for s in run.steps)})


@pytest.mark.parametrize("openinference", [True, False], ids=["openinference", "genai"])
def test_a_foreign_trace_pulled_from_phoenix_is_the_trace_imported_from_a_file(phoenix, monkeypatch, tmp_path,
                                                                               openinference):
    spans = team_spans(monkeypatch, openinference=openinference)
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(MessageToDict(encode_spans(spans))) + "\n")
    from_file = load_otlp_json(path)
    project = "oi-team" if openinference else "genai-team"
    send(phoenix, encode_spans(spans), project)
    wait_for(phoenix, project, len(spans))

    pulled = pull_from_phoenix(phoenix.url, project)
    assert [untimed(r) for r in pulled.runs] == [untimed(r) for r in from_file] and pulled.skipped == []
    for got, sent in zip(pulled.runs[0].steps, from_file[0].steps, strict=True):  # Phoenix keeps microseconds
        assert abs(got.source.start_time - sent.source.start_time) <= timedelta(microseconds=1)
        assert abs(got.source.end_time - sent.source.end_time) <= timedelta(microseconds=1)
    assert pulled.traces_read == 1 and pulled.spans_read == len(spans)
    (run,) = pulled.runs
    assert run.metadata["causaltrace.provenance"] == ("openinference" if openinference else "genai")
    assert run.agents == ("planner", "solver", "reviewer")
    calls = [s for s in run.steps if s.kind == "tool_call"]
    assert [c.tool_name for c in calls] == ["add", "multiply"]
    if openinference:  # autogen-core's GenAI spans leave the (opt-in) arguments out
        assert [c.arguments for c in calls] == [{"a": 17, "b": 26}, {"a": 43, "b": 3}]
    # pulling again gives the same run ids (storing them again changes nothing)
    assert [r.run_id for r in pull_from_phoenix(phoenix.url, project).runs] == [run.run_id]


def test_pulled_openinference_run_is_diagnosed_with_the_planted_step_in_the_top_4(phoenix, monkeypatch):
    from causaltrace.attribution.engine import diagnose_sync

    spans = team_spans(monkeypatch, openinference=True)
    send(phoenix, encode_spans(spans), "oi-diagnose")
    wait_for(phoenix, "oi-diagnose", len(spans))
    (run,) = pull_from_phoenix(phoenix.url, "oi-diagnose").runs
    planted = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "add")
    diagnosis = diagnose_sync(run, "graph", store=False)
    # 4th, as in the imported file and causaltrace's own run (test_import_foreign.py): the final answer ranks too
    assert planted.step_id in [c.step_id for c in diagnosis.candidates[:4]]


def test_native_runs_come_back_equal_and_the_root_span_filters_pick_traces(phoenix):
    now = datetime.now(UTC).replace(microsecond=0)
    old = native_run("night-old-failed", failed=True, t0=now - timedelta(hours=3))
    ok = native_run("night-ok", failed=False, t0=now - timedelta(minutes=30))
    new = native_run("night-new-failed", failed=True, t0=now - timedelta(minutes=10))
    for run in (old, ok, new):
        send_json(phoenix, run_to_otlp(run), "nightly")
    wait_for(phoenix, "nightly", 3 * n_spans(old))

    everything = pull_from_phoenix(phoenix.url, "nightly")
    assert everything.runs == [old, ok, new]  # oldest first; nested metadata folded back exactly
    assert [r.run_id for r in pull_from_phoenix(phoenix.url, "nightly", failed=True).runs] == [old.run_id, new.run_id]
    assert [r.run_id for r in pull_from_phoenix(phoenix.url, "nightly", limit=2).runs] == [ok.run_id, new.run_id]
    recent = pull_from_phoenix(phoenix.url, "nightly", since=now - timedelta(hours=1), failed=True)
    assert [r.run_id for r in recent.runs] == [new.run_id]
    with pytest.raises(InvalidInputError, match="holds no failed traces in the time range"):
        pull_from_phoenix(phoenix.url, "nightly", since=now + timedelta(hours=1), failed=True)


def test_a_trace_whose_root_span_never_reached_phoenix_is_pulled_but_not_as_failed(phoenix):
    """Spans whose parent is not in Phoenix (the root was sent elsewhere, or lost): Phoenix's root-span search never
    names the trace, its trace list does — so a plain pull imports it as a file of the same spans does, and
    ``failed`` (which reads the root's status) leaves it out."""
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    whole = native_run("rooted", failed=True, t0=t0)
    cut = run_to_otlp(native_run("rootless", failed=True, t0=t0 + timedelta(minutes=1)))
    spans = cut["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[:] = [s for s in spans if any(a["key"] == "causaltrace.step.kind" for a in s["attributes"])]
    send_json(phoenix, run_to_otlp(whole), "rootless")
    send_json(phoenix, cut, "rootless")
    wait_for(phoenix, "rootless", 2 * n_spans(whole) - 1)
    (from_file,) = load_otlp_json(json.dumps(cut))
    assert from_file.task is None  # the task and outcome were on the root span
    assert pull_from_phoenix(phoenix.url, "rootless").runs == [whole, from_file]
    assert pull_from_phoenix(phoenix.url, "rootless", failed=True).runs == [whole]
    assert pull_from_phoenix(phoenix.url, "rootless", limit=1).runs == [from_file]


def http_only(digit: str) -> dict:
    """A trace of two plain HTTP spans (no convention causaltrace reads); Phoenix keeps a span id only once."""
    spans = [{"traceId": digit * 32, "spanId": digit * 15 + str(i), "name": "GET /health",
              **({"parentSpanId": digit * 15 + "1"} if i == 2 else {}),
              "startTimeUnixNano": str(time.time_ns()), "endTimeUnixNano": str(time.time_ns()), "attributes": []}
             for i in (1, 2)]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def test_a_trace_that_forms_no_run_is_skipped_with_its_reason(phoenix):
    good = native_run("mixed-good", failed=True, t0=datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5))
    send_json(phoenix, run_to_otlp(good), "mixed")
    send_json(phoenix, http_only("7"), "mixed")
    wait_for(phoenix, "mixed", n_spans(good) + 2)
    pulled = pull_from_phoenix(phoenix.url, "mixed")
    assert pulled.runs == [good]
    assert [s.trace_id for s in pulled.skipped] == ["7" * 32]
    assert "read 2 spans in 1 trace" in pulled.skipped[0].reason and "OpenInference" in pulled.skipped[0].reason
    send_json(phoenix, http_only("8"), "http-only")  # another trace id: a trace lives in one project
    wait_for(phoenix, "http-only", 2)
    with pytest.raises(InvalidInputError, match=r"Phoenix project 'http-only'.*read 2 spans in 1 trace"):
        pull_from_phoenix(phoenix.url, "http-only")


def test_bad_phoenix_input_is_one_line(phoenix):
    with pytest.raises(UserError, match=r"^project 'no-such-project' not found in Phoenix at http") as err:
        pull_from_phoenix(phoenix.url, "no-such-project")
    assert "\n" not in err.value.message
    with pytest.raises(UserError, match=r"^cannot reach Phoenix at http://127\.0\.0\.1:9: "):
        pull_from_phoenix("http://127.0.0.1:9", "p", timeout_s=2)
    with pytest.raises(UserError, match="invalid Phoenix URL"):
        pull_from_phoenix("phoenix.example", "p")
    with pytest.raises(UserError, match="project name is needed"):
        pull_from_phoenix(phoenix.url, " ")


def test_pull_phoenix_on_the_command_line_stores_each_run_once(phoenix, capsys):
    from causaltrace.cli import main
    from causaltrace.collector.store import Store

    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
    runs = [native_run(f"cli-{i}", failed=i != 1, t0=t0 + timedelta(minutes=i)) for i in range(3)]
    for run in runs:
        send_json(phoenix, run_to_otlp(run), "cli")
    wait_for(phoenix, "cli", 3 * n_spans(runs[0]))
    argv = ["pull", "--phoenix", phoenix.url, "--project", "cli", "--failed", "--since", "1h"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["cli-0", "cli-2"] and err == ""
    assert main(argv) == 0 and capsys.readouterr()[0].split() == ["cli-0", "cli-2"]  # again: unchanged
    with Store() as store:
        assert [r["run_id"] for r in store.list_runs()] == ["cli-2", "cli-0"]
        assert store.get_run("cli-0") == runs[0]
    assert main(["pull", "--phoenix", phoenix.url, "--project", "nope"]) == 2
    assert capsys.readouterr()[1] == f"causaltrace: error: project 'nope' not found in Phoenix at {phoenix.url}\n"
