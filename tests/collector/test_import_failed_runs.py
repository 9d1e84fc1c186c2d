"""Failed runs import (issue 34 item 4): an OpenInference AGENT span that ended in ERROR and its child LLM span —
the two spans of a smolagents run that failed — come in through the real CLI as steps marked as they were (status,
error text from the status message or the exception event), and the run is diagnosed; a span that cannot be read is
one line naming the file and the span, exit 2, and the store keeps what it held.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from causaltrace.collector.store import Store
from test_import_bad_input import imported, run_cli

TRACE = "ab" * 16
AGENT, LLM = "a1" * 8, "b2" * 8
MESSAGE = "AgentMaxStepsError: Reached max steps."


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
            for k, v in values.items()]


def agent_span(*, status: dict[str, Any], events: list[dict[str, Any]] | None = None,
               end: int = 9_000) -> dict[str, Any]:
    """smolagents' CodeAgent.run span as OpenInference's instrumentor writes it."""
    return {"traceId": TRACE, "spanId": AGENT, "name": "CodeAgent.run", "kind": 1,
            "startTimeUnixNano": "1000", "endTimeUnixNano": str(end), "status": status, "events": events or [],
            "attributes": attributes({"openinference.span.kind": "AGENT", "input.value": "What is 6 times 7?"})}


def llm_span(**extra: Any) -> dict[str, Any]:
    values = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
              "llm.input_messages.0.message.role": "user",
              "llm.input_messages.0.message.content": "What is 6 times 7?",
              "llm.output_messages.0.message.role": "assistant",
              "llm.output_messages.0.message.content": "Thought: multiply.\nCode:\n```py\nprint(6*7)\n```",
              "llm.token_count.prompt": 12, "llm.token_count.completion": 9, **extra}
    return {"traceId": TRACE, "spanId": LLM, "parentSpanId": AGENT, "name": "OpenAIServerModel.generate",
            "startTimeUnixNano": "2000", "endTimeUnixNano": "3000", "attributes": attributes(values),
            "status": {"code": 1}}


def write(path: Path, *spans: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}) + "\n")
    return path


EXCEPTION = {"name": "exception", "timeUnixNano": "8000",
             "attributes": attributes({"exception.type": "AgentExecutionError",
                                       "exception.message": "Code execution failed at line 'print(x)'",
                                       "exception.stacktrace": "Traceback ..."})}


@pytest.mark.parametrize(("status", "events", "error_type", "error_text"), [
    pytest.param({"code": 2, "message": MESSAGE}, [], "SpanError", MESSAGE, id="error-with-message"),
    pytest.param({"code": 2}, [], "SpanError", "", id="error-without-message"),
    pytest.param({"code": "STATUS_CODE_ERROR"}, [EXCEPTION], "AgentExecutionError",
                 "Code execution failed at line 'print(x)'", id="error-with-exception-event"),
    pytest.param({"code": 2, "message": MESSAGE}, [EXCEPTION], "AgentExecutionError", MESSAGE,
                 id="status-message-before-the-event's"),
    pytest.param({}, [EXCEPTION], "AgentExecutionError", "Code execution failed at line 'print(x)'",
                 id="unset-with-exception-event"),
])
def test_an_agent_span_in_error_and_its_llm_span_import_as_a_failed_step(tmp_path, capsys, status, events,
                                                                       error_type, error_text):
    run = imported(capsys, write(tmp_path / "failed.json", agent_span(status=status, events=events), llm_span()))
    turn, llm = (next(s for s in run.steps if s.kind == kind) for kind in ("agent_turn", "llm_response"))
    assert (turn.status, turn.error.type, turn.error.message) == ("error", error_type, error_text)
    assert llm.status == "ok" and llm.error is None and llm.parent_step_id == turn.step_id
    assert run.task == "What is 6 times 7?"
    code, out, err = run_cli(capsys, "diagnose", run.run_id, "--method", "graph", "--json")
    assert code == 0, err
    assert json.loads(out)["run_id"] == run.run_id


def test_an_ok_span_with_an_exception_event_stays_ok(tmp_path, capsys):
    """An exception recorded on a span whose status says OK was handled: the step is as the span was."""
    run = imported(capsys, write(tmp_path / "handled.json", agent_span(status={"code": 1}, events=[EXCEPTION]),
                                 llm_span()))
    assert all(s.status == "ok" and s.error is None for s in run.steps)


def test_a_cut_trace_imports_what_arrived(tmp_path, capsys):
    """The agent span never arrived (cut off with its process), and the model call it made ended in ERROR with
    only an exception event: the LLM step is there, marked as it was, under no agent turn."""
    failed = llm_span()
    failed["status"] = {"code": 2}
    failed["events"] = [EXCEPTION]
    failed["endTimeUnixNano"] = "0"  # never ended
    run = imported(capsys, write(tmp_path / "cut.json", failed))
    (llm,) = [s for s in run.steps if s.kind == "llm_response"]
    assert (llm.status, llm.error.type, llm.parent_step_id) == ("error", "AgentExecutionError", None)


def test_an_unreadable_span_is_one_line_naming_the_file_and_the_span_and_nothing_is_lost(tmp_path, capsys):
    good = write(tmp_path / "good.json", agent_span(status={"code": 2, "message": MESSAGE}), llm_span())
    code, out, err = run_cli(capsys, "import", str(good), "--format", "auto")
    assert code == 0, err
    with Store() as store:
        before = [store.get_run(r["run_id"]) for r in store.list_runs()]
    bad = write(tmp_path / "bad.json", agent_span(status={"code": 2}),
                llm_span(**{"llm.token_count.prompt": "a dozen"}))
    code, out, err = run_cli(capsys, "import", str(bad), "--format", "otlp-json")
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1, err
    assert str(bad) in err and LLM in err and "OpenAIServerModel.generate" in err and "internal error" not in err
    with Store() as store:
        assert [store.get_run(r["run_id"]) for r in store.list_runs()] == before
