"""Importers: Who&When logs, OTLP/JSON (export and import, round trip), and pulling traces from Jaeger."""

from __future__ import annotations

import base64
import copy
import http.server
import json
import re
import shutil
import socket
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _builders import RunBuilder, capture_spans
from _http import serving
from causaltrace import semconv
from causaltrace.collector.jaeger import pull_from_jaeger, query_jaeger_traces
from causaltrace.collector.otlp import (
    datetime_to_nanos,
    derived_span_id,
    derived_trace_id,
    load_otlp_json,
    nanos_to_datetime,
    run_to_otlp,
    runs_from_otlp,
)
from causaltrace.collector.whowhen import iter_whowhen, load_whowhen, whowhen_run_from_data
from causaltrace.exceptions import InvalidInputError, UserError
from causaltrace.schema import (
    DEPENDENCY_KINDS,
    STEP_KINDS,
    Annotations,
    Dependency,
    Outcome,
    RecordedCall,
    Recording,
    Run,
    Step,
    StepError,
    TokenUsage,
    Verdict,
    action_signature,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "whowhen"


# ======================================================================================================= Who&When


def test_whowhen_algorithm_generated_mapping() -> None:
    run = load_whowhen(FIXTURES / "Algorithm-Generated" / "2.json")
    assert run.run_id == "whowhen-algo-2"
    assert run.framework == "whowhen"
    assert run.task == "How many prime numbers are there between 10 and 30? (invented question)"
    assert run.outcome == Outcome(status="failure", final_answer=None)
    assert run.started_at is None and run.trace_id is None and run.recording is None
    assert [s.index for s in run.steps] == [0, 1, 2, 3]
    assert [s.kind for s in run.steps] == ["message", "message", "tool_response", "message"]
    assert [s.agent for s in run.steps] == ["Math_Expert", "Python_Expert", "Computer_terminal", "Verification_Expert"]
    assert run.agents == ("Math_Expert", "Python_Expert", "Computer_terminal", "Verification_Expert")
    data = json.loads((FIXTURES / "Algorithm-Generated" / "2.json").read_text())
    for step, entry in zip(run.steps, data["history"], strict=True):
        assert step.content == entry["content"]
        typed = "tool" if entry["name"] == "Computer_terminal" else "agent"  # collector.speakers (issue 20)
        assert step.metadata == {"speaker": entry["name"], "role": entry["role"], "speaker_role": typed}
        assert step.run_id == run.run_id
        assert step.parent_step_id is None  # dependencies: derived at import (issue 32), below
        assert step.started_at is None and step.ended_at is None
        assert step.action_signature == action_signature(step.kind, None, entry["content"])
    first, code, terminal, last = run.steps
    assert first.outputs == {"text": first.content} and first.inputs == {}
    # the FIRST code block, language as written
    assert code.inputs == {
        "code": "primes = [n for n in range(10, 31) if all(n % d for d in range(2, n))]\nprint(len(primes))\n",
        "language": "python",
    }
    assert terminal.outputs == {"result": terminal.content, "is_error": False}
    assert terminal.inputs == {}
    assert last.outputs == {"text": "The count is 5. TERMINATE"}
    assert run.metadata == {"system_prompts": data["system_prompt"], "dependencies": "derived"}
    # the conversation's protocol, derived at import: each step saw the previous one, the code ran at step 2
    assert [[(d.step_id.rsplit("-", 1)[1], d.kind) for d in s.depends_on] for s in run.steps] == [
        [], [("s0", "saw")], [("s1", "executes"), ("s1", "saw")], [("s2", "saw")]]
    assert run.annotations == Annotations(
        mistake_agent="Python_Expert",
        mistake_step=1,
        mistake_reason=data["mistake_reason"],
        ground_truth="6",
        source="Who&When Algorithm-Generated 2.json",
        extra={
            "subset": "algo",
            "file_number": 2,
            "question_ID": "synthetic-algo-0002",
            "level": "1",
            "is_correct": False,
            "label_version": "synthetic-fixtures@1",
        },
    )
    assert len({s.step_id for s in run.steps}) == 4


def test_whowhen_hand_crafted_mapping() -> None:
    run = load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")
    assert run.run_id == "whowhen-hand-1"
    kinds = [(s.kind, s.agent, s.metadata["speaker"]) for s in run.steps]
    assert kinds == [
        ("task", "human", "human"),
        ("reasoning", "Orchestrator", "Orchestrator (thought)"),
        ("message", "Orchestrator", "Orchestrator (-> WebSurfer)"),
        ("message", "WebSurfer", "WebSurfer"),
        ("message", "Orchestrator", "Orchestrator (-> ComputerTerminal)"),
        ("tool_response", "ComputerTerminal", "ComputerTerminal"),
        ("message", "Orchestrator", "Orchestrator (-> Assistant)"),
        ("message", "Assistant", "Assistant"),
        ("message", "Orchestrator", "Orchestrator (termination condition)"),
    ]
    assert all(s.metadata["role"] == s.metadata["speaker"] for s in run.steps)
    task, thought, to_web = run.steps[:3]
    assert task.outputs == {} and task.inputs == {}
    assert thought.outputs == {"text": thought.content}
    assert to_web.action_signature == action_signature("message", "WebSurfer", to_web.content)
    assert run.steps[5].outputs == {"result": run.steps[5].content, "is_error": False}
    assert run.steps[6].inputs == {"code": "print('closed')\n", "language": "python"}
    assert run.steps[7].inputs == {"code": "print('Mondays: closed')\n", "language": "python"}
    assert run.agents == ("Orchestrator", "WebSurfer", "ComputerTerminal", "Assistant")
    assert run.metadata == {"dependencies": "derived"}
    # the speaker conventions are mapped to values and dependencies here, at import (issue 32 item 1)
    assert [s.outputs.get("target") for s in run.steps] == [
        None, None, "WebSurfer", None, "ComputerTerminal", None, "Assistant", None, None]
    deps = {(s.index, run.step(d.step_id).index, d.kind) for s in run.steps for d in s.depends_on}
    assert {(c, p, k) for c, p, k in deps if k != "saw"} == {(2, 1, "produced_by")}  # the thought → its instruction
    assert {(c, p) for c, p, k in deps if k == "saw"} == {(i, i - 1) for i in range(1, 9)}  # replies follow at once
    ann = run.annotations
    assert ann is not None
    assert (ann.mistake_agent, ann.mistake_step, ann.ground_truth) == ("WebSurfer", 3, "10:00-18:00")
    assert ann.source == "Who&When Hand-Crafted 1.json"
    assert ann.extra == {
        "subset": "hand",
        "file_number": 1,
        "question_ID": "synthetic-hand-0001",
        "level": 2,
        "is_corrected": False,
        "mistake_type": "wrong_reasoning",
        "label_version": "synthetic-fixtures@1",
    }


def test_whowhen_blank_question_and_extra_keys() -> None:
    run = load_whowhen(FIXTURES / "Algorithm-Generated" / "10.json")
    assert run.task == ""
    assert run.annotations is not None and run.annotations.ground_truth == ""
    assert run.annotations.extra["labels"] == "Factual_Error"
    assert run.steps[1].inputs == {"code": "curl -s https://example.invalid/archive | head\n", "language": "sh"}
    hand2 = load_whowhen(FIXTURES / "Hand-Crafted" / "2.json")
    assert "level" not in hand2.annotations.extra  # type: ignore[union-attr]
    assert hand2.annotations.extra["is_corrected"] is True  # type: ignore[union-attr]
    assert hand2.steps[0].kind == "task" and hand2.steps[0].content == ""


def test_iter_whowhen_order_and_subsets() -> None:
    assert [r.run_id for r in iter_whowhen(FIXTURES)] == [
        "whowhen-algo-2",
        "whowhen-algo-10",
        "whowhen-hand-1",
        "whowhen-hand-2",
    ]
    assert [r.run_id for r in iter_whowhen(FIXTURES, "algo")] == ["whowhen-algo-2", "whowhen-algo-10"]
    assert [r.run_id for r in iter_whowhen(FIXTURES, subset="hand")] == ["whowhen-hand-1", "whowhen-hand-2"]
    assert list(iter_whowhen(FIXTURES)) == [
        load_whowhen(FIXTURES / "Algorithm-Generated" / "2.json"),
        load_whowhen(FIXTURES / "Algorithm-Generated" / "10.json"),
        load_whowhen(FIXTURES / "Hand-Crafted" / "1.json"),
        load_whowhen(FIXTURES / "Hand-Crafted" / "2.json"),
    ]


def test_iter_whowhen_on_a_subset_folder() -> None:
    hand = list(iter_whowhen(FIXTURES / "Hand-Crafted"))
    assert [r.run_id for r in hand] == ["whowhen-hand-1", "whowhen-hand-2"]
    assert hand[0].annotations.extra["label_version"] == "synthetic-fixtures@1"  # type: ignore[union-attr]
    assert list(iter_whowhen(FIXTURES / "Hand-Crafted", "algo")) == []


def test_iter_whowhen_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="Hand-Crafted"):
        list(iter_whowhen(tmp_path, "hand"))
    with pytest.raises(InvalidInputError, match="subset"):
        list(iter_whowhen(FIXTURES, "both"))  # type: ignore[arg-type]


def test_whowhen_file_outside_a_subset_folder(tmp_path: Path) -> None:
    """The subset is detected from the format; no VERSION next to it means no label_version."""
    shutil.copy(FIXTURES / "Algorithm-Generated" / "2.json", tmp_path / "7.json")
    shutil.copy(FIXTURES / "Hand-Crafted" / "1.json", tmp_path / "8.json")
    algo, hand = load_whowhen(tmp_path / "7.json"), load_whowhen(tmp_path / "8.json")
    assert algo.run_id == "whowhen-algo-7" and hand.run_id == "whowhen-hand-8"
    assert hand.steps[0].kind == "task"
    assert "label_version" not in algo.annotations.extra  # type: ignore[union-attr]


def _write_broken(tmp_path: Path, subset_dir: str, fixture: str, mutate: Any) -> Path:
    data = json.loads((FIXTURES / subset_dir / fixture).read_text())
    mutate(data)
    folder = tmp_path / subset_dir
    folder.mkdir(exist_ok=True)
    path = folder / "5.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("subset_dir", "mutate", "field"),
    [
        ("Algorithm-Generated", lambda d: d.pop("history"), "'history'"),
        ("Algorithm-Generated", lambda d: d.update(history={"a": 1}), "'history'"),
        ("Algorithm-Generated", lambda d: d.update(mistake_step="two"), "'mistake_step'"),
        ("Algorithm-Generated", lambda d: d.update(mistake_step=True), "'mistake_step'"),
        ("Algorithm-Generated", lambda d: d.update(mistake_step="99"), "'mistake_step'"),
        ("Algorithm-Generated", lambda d: d.pop("mistake_step"), "'mistake_step'"),
        ("Algorithm-Generated", lambda d: d.pop("mistake_agent"), "'mistake_agent'"),
        ("Algorithm-Generated", lambda d: d["history"][2].pop("name"), r"'history\[2\]\.name'"),
        ("Algorithm-Generated", lambda d: d["history"][1].update(content=None), r"'history\[1\]\.content'"),
        ("Algorithm-Generated", lambda d: d.update(system_prompt="x"), "'system_prompt'"),
        ("Hand-Crafted", lambda d: d["history"][3].pop("role"), r"'history\[3\]\.role'"),
        ("Hand-Crafted", lambda d: d["history"].__setitem__(0, "text"), r"'history\[0\]'"),
        ("Hand-Crafted", lambda d: d.update(question=["q"]), "'question'"),
    ],
)
def test_whowhen_malformed_names_file_and_field(tmp_path: Path, subset_dir: str, mutate: Any, field: str) -> None:
    fixture = "2.json" if subset_dir == "Algorithm-Generated" else "1.json"
    path = _write_broken(tmp_path, subset_dir, fixture, mutate)
    with pytest.raises(InvalidInputError, match=rf"5\.json.*{field}"):
        load_whowhen(path)
    with pytest.raises(InvalidInputError, match=rf"5\.json.*{field}"):
        list(iter_whowhen(tmp_path, "algo" if subset_dir == "Algorithm-Generated" else "hand"))


@pytest.mark.parametrize("gone", ["mistake_agent", "mistake_step"])
def test_an_imported_log_with_one_label_is_asked_for_both_or_neither(tmp_path: Path, gone: str) -> None:
    data = json.loads((FIXTURES / "Algorithm-Generated" / "2.json").read_text())
    path = tmp_path / "Algorithm-Generated" / "5.json"
    data.pop(gone)
    with pytest.raises(InvalidInputError, match=rf"'{gone}' is missing: a labelled log gives both .* gives neither"):
        whowhen_run_from_data(data, path, require_labels=False)
    # a benchmark file needs both labels: no "neither" offered
    with pytest.raises(InvalidInputError, match=rf"'{gone}' is missing$"):
        whowhen_run_from_data(data, path)
    data.pop("mistake_step" if gone == "mistake_agent" else "mistake_agent")
    assert whowhen_run_from_data(data, path, require_labels=False).annotations is None


def test_whowhen_not_json(tmp_path: Path) -> None:
    (tmp_path / "Hand-Crafted").mkdir()
    bad = tmp_path / "Hand-Crafted" / "3.json"
    bad.write_text('{"history": [')
    with pytest.raises(InvalidInputError, match=r"3\.json: not valid JSON"):
        load_whowhen(bad)
    with pytest.raises(InvalidInputError, match=r"cannot read"):
        load_whowhen(tmp_path / "missing.json")
    bad.write_text("[1, 2]")
    with pytest.raises(InvalidInputError, match="expected a JSON object"):
        load_whowhen(bad)


# -------------------------------------------------------------------------------------------- the real data


def test_whowhen_real_data(whowhen_dir: Path) -> None:
    runs = list(iter_whowhen(whowhen_dir))
    algo = [r for r in runs if r.run_id.startswith("whowhen-algo-")]
    hand = [r for r in runs if r.run_id.startswith("whowhen-hand-")]
    assert (len(algo), len(hand)) == (126, 58)
    assert runs == algo + hand
    assert [int(r.run_id.rsplit("-", 1)[1]) for r in algo] == sorted(
        int(p.stem) for p in (whowhen_dir / "Algorithm-Generated").glob("*.json")
    )
    version = (whowhen_dir / "VERSION").read_text().strip()
    for run in runs:
        subset_dir = "Algorithm-Generated" if run.run_id.startswith("whowhen-algo") else "Hand-Crafted"
        n = run.run_id.rsplit("-", 1)[1]
        data = json.loads((whowhen_dir / subset_dir / f"{n}.json").read_text(encoding="utf-8"))
        assert len(run.steps) == len(data["history"]), run.run_id
        assert [s.content for s in run.steps] == [e["content"] for e in data["history"]]
        assert all(s.started_at is None and s.parent_step_id is None for s in run.steps)
        assert all(d.step_id < s.step_id or run.step(d.step_id).index < s.index for s in run.steps
                   for d in s.depends_on) and run.metadata["dependencies"] == "derived"
        ann = run.annotations
        assert ann is not None
        assert ann.mistake_agent == data["mistake_agent"]
        assert ann.mistake_step == int(data["mistake_step"])
        assert ann.mistake_reason == data["mistake_reason"]
        assert ann.ground_truth == data["ground_truth"]
        assert ann.extra["question_ID"] == data["question_ID"]
        assert ann.extra["label_version"] == version
        flag = "is_correct" if subset_dir == "Algorithm-Generated" else "is_corrected"
        assert ann.extra[flag] == data[flag]
        assert run.task == data["question"]
        assert run.outcome.status == "failure" and run.outcome.final_answer is None
        if subset_dir == "Algorithm-Generated":
            assert run.metadata["system_prompts"] == data["system_prompt"]
            assert [s.metadata["speaker"] for s in run.steps] == [e["name"] for e in data["history"]]
        else:
            assert [s.metadata["speaker"] for s in run.steps] == [e["role"] for e in data["history"]]
            assert run.steps[0].kind == "task"
    kinds = Counter(s.kind for r in hand for s in r.steps)
    assert kinds["task"] == 58
    assert kinds["reasoning"] == sum(
        1 for r in hand for s in r.steps if s.metadata["speaker"] == "Orchestrator (thought)"
    )
    assert {s.agent for r in hand for s in r.steps} >= {"Orchestrator", "WebSurfer"}
    assert all(" (" not in s.agent for r in runs for s in r.steps)
    assert all(s.kind == "tool_response" for r in algo for s in r.steps if s.agent == "Computer_terminal")
    long = load_whowhen(whowhen_dir / "Hand-Crafted" / "30.json")
    assert len(long.steps) == 121
    # the real runs survive the OTLP round trip too
    for run in runs[:: max(1, len(runs) // 20)]:
        assert runs_from_otlp(json.loads(json.dumps(run_to_otlp(run)))) == [run]


# ========================================================================================================= OTLP

T0 = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def _t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rich_run(run_id: str = "run-rich", *, trace_id: str | None = "0af7651916cd43dd8448eb211c80319c") -> Run:
    """A run using every Step and Run field: containers, deps of many kinds, an error step, a recording…"""
    return (
        RunBuilder(run_id, t0=T0)
        .task("add 2 and 3", step_id="task", started_at=_t(0))
        .turn("solver", step_id="turn-1", started_at=_t(0.5), ended_at=_t(9), status="error",
              error=StepError(type="ToolError", message="the tool failed once"), span_id="b7ad6b7169203331")
        .llm("solver", "I will call add.", tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 3}}],
             deps=[("task", "saw")], inputs={"messages": [{"role": "user", "content": "add 2 and 3"}]},
             usage=TokenUsage(input_tokens=120, output_tokens=17), model="gpt-4o-mini", started_at=_t(1),
             ended_at=_t(1.25), status="ok")
        .tool_call("solver", "add", {"a": 2, "b": 3.5, "nested": {"list": [1, None, True, "x"]}},
                   deps=[("llm-1", "produced_by")], content='add({"a": 2, "b": 3})', call_id="call_abc",
                   started_at=_t(1.3), ended_at=_t(1.4), status="error",
                   error=StepError(type="ValueError", message="b must be an integer"),
                   action_signature="tool_call|add|{...}")
        .tool_response("solver", "ValueError: b must be an integer", is_error=True, deps=[("call-1", "tool_result_of")],
                       started_at=_t(1.4), ended_at=_t(1.4), status="error",
                       error=StepError(type="ValueError", message="b must be an integer"))
        .step("llm_response", "solver", deps=[("llm-1", "continues"), ("resp-1", "observed"), ("llm-1", "retry_of")],
              content="```python\nprint(2 + 3)\n```", started_at=_t(2), ended_at=_t(3), truncated=True,
              metadata={"attempt": 2, "tags": ["retry"], "unicode": "naïve ✓"})
        .step("code_execution", "solver", deps=[("llm-2", "executes")], inputs={"code": "print(2 + 3)"},
              outputs={"stdout": "5\n", "stderr": "", "exit_code": 0, "error": None}, started_at=_t(3),
              ended_at=_t(3.000001))
        .final_answer("solver", "5", step_id="final", deps=[("code-1", "answer_of")], started_at=_t(4))
        .end_turn()
        .message("", "", step_id="orphan-ish", index=9, outputs={}, started_at=None)
        .recorded("llm", {"messages": [{"role": "user", "content": "add 2 and 3"}], "temperature": 0.0},
                  agent_key="team/solver", step_id="llm-1", request_hash="ab" * 32,
                  response={"content": "I will call add.", "score": 0.1},
                  settings={"model": "gpt-4o-mini", "temperature": 0})
        .recorded("tool", {"name": "add"}, agent_key="team/solver", request_hash="cd" * 32,
                  response={"type": "x.Y", "pickle_b64": "AAAA"}, response_type="x.Y", live_only=True,
                  error=StepError(type="ValueError", message="b"))
        .build(
            trace_id=trace_id,
            framework="autogen",
            name="rich demo",
            task="add 2 and 3",
            agents=("solver", "reviewer"),
            ended_at=_t(10).astimezone(timezone(timedelta(hours=2))),
            outcome=Outcome(status="failure", final_answer="5", stop="normal",
                            verdict=Verdict(passed=False, reason="expected 6")),
            metadata={"writer_pid": 1234, "host": "example", "ratio": 0.25, "nested": {"a": [1, 2]}},
            annotations=Annotations(mistake_agent="solver", mistake_step=3, mistake_reason="wrong b",
                                    source="synthetic", extra={"k": [1]}),
        )
    )


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def _roundtrip(run: Run) -> list[Run]:
    return runs_from_otlp(json.loads(json.dumps(run_to_otlp(run))))


def test_otlp_export_shape() -> None:
    run = rich_run()
    request = run_to_otlp(run)
    (resource_spans,) = request["resourceSpans"]
    assert resource_spans["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "causaltrace"}}
    ]
    (scope_spans,) = resource_spans["scopeSpans"]
    assert scope_spans["scope"] == {"name": "causaltrace"}
    root, *step_spans = scope_spans["spans"]
    assert root["name"] == semconv.root_span_name(run.name) and "parentSpanId" not in root
    assert root["traceId"] == run.trace_id
    assert re.fullmatch(r"[0-9a-f]{16}", root["spanId"])
    assert root["startTimeUnixNano"] == str(datetime_to_nanos(T0)) == "1741064767123456000"
    assert root["status"] == {"code": 2, "message": "expected 6"}
    root_attrs = _attrs(root)
    assert root_attrs[semconv.RUN_ID] == {"stringValue": run.run_id}
    assert root_attrs[semconv.RUN_AGENTS] == {
        "arrayValue": {"values": [{"stringValue": "solver"}, {"stringValue": "reviewer"}]}
    }
    assert semconv.RUN_ANNOTATIONS in root_attrs and semconv.RUN_RECORDING not in root_attrs
    (event,) = root["events"]  # the Recording: the root's event, chunked as a live run's (issue 33 item 4)
    assert event["name"] == semconv.RECORDING_EVENT and event["timeUnixNano"] == root["endTimeUnixNano"]
    assert semconv.RECORDING_CHUNKS in _attrs(event)
    assert len(step_spans) == len(run.steps) - 1  # the tool call and its result are one span
    by_step = {_attrs(s)[semconv.STEP_ID]["stringValue"]: s for s in step_spans}
    assert "resp-1" not in by_step and _attrs(by_step["call-1"])[semconv.RESULT_ID] == {"stringValue": "resp-1"}
    turn, llm1, call = by_step["turn-1"], by_step["llm-1"], by_step["call-1"]
    assert turn["spanId"] == "b7ad6b7169203331"  # the step's own span id
    assert turn["parentSpanId"] == root["spanId"]
    assert llm1["spanId"] == derived_span_id(run.run_id, "llm-1")
    assert llm1["parentSpanId"] == turn["spanId"]
    assert llm1["name"] == "chat gpt-4o-mini" and call["name"] == "execute_tool add"  # the GenAI names
    assert llm1["kind"] == 3 and call["kind"] == turn["kind"] == root["kind"] == 1  # CLIENT model calls
    assert _attrs(llm1)[semconv.STEP_INDEX] == {"intValue": "2"}
    assert _attrs(llm1)[semconv.GEN_AI_USAGE_INPUT_TOKENS] == {"intValue": "120"}
    assert llm1["status"] == {"code": 1}
    assert call["status"] == {"code": 2, "message": "b must be an integer"}
    assert call["links"] == [
        {
            "traceId": run.trace_id,
            "spanId": llm1["spanId"],
            "attributes": [
                {"key": semconv.DEPENDENCY_KIND, "value": {"stringValue": "produced_by"}},
                {"key": semconv.DEPENDENCY_STEP_ID, "value": {"stringValue": "llm-1"}},
            ],
        }
    ]
    # the call's span ends with its result, and shows the result as its output
    assert call["startTimeUnixNano"] == str(datetime_to_nanos(_t(1.3)))
    assert call["endTimeUnixNano"] == str(datetime_to_nanos(_t(1.4)))
    call_attrs = _attrs(call)
    assert call_attrs[semconv.STEP_ENDED_AT] == {"intValue": str(datetime_to_nanos(_t(1.4)))}
    assert call_attrs[semconv.RESULT_KIND] == {"stringValue": "tool_response"}
    assert call_attrs["output.value"] == {"stringValue": "ValueError: b must be an integer"}
    assert call_attrs["input.value"]["stringValue"].startswith('{"a":2')
    assert call_attrs[semconv.RESULT_PREFIX + "depends_on.kinds"] == {
        "arrayValue": {"values": [{"stringValue": "tool_result_of"}]}}
    assert len(by_step["llm-2"]["links"]) == 3
    assert {link["spanId"] for link in by_step["llm-2"]["links"]} == {llm1["spanId"], call["spanId"]}
    assert "status" not in by_step["code-1"]
    assert by_step["final"]["endTimeUnixNano"] == "0"
    assert by_step["orphan-ish"]["startTimeUnixNano"] == "0" and "links" not in by_step["orphan-ish"]
    json.dumps(request)  # plain JSON


def test_otlp_roundtrip_rich_run() -> None:
    run = rich_run()
    (back,) = _roundtrip(run)
    assert back == run
    assert back.model_dump() == run.model_dump()
    assert back.step("call-1").error == StepError(type="ValueError", message="b must be an integer")
    assert back.step("final").ended_at is None and back.step("final").started_at == _t(4)
    assert back.step("llm-1").started_at.tzinfo is not None  # type: ignore[union-attr]
    assert back.step("turn-1").span_id == "b7ad6b7169203331" and back.step("llm-1").span_id is None


def test_otlp_roundtrip_without_ids_and_minimal_run() -> None:
    run = rich_run(trace_id=None)
    request = run_to_otlp(run)
    assert _spans(request)[0]["traceId"] == derived_trace_id(run.run_id)
    assert runs_from_otlp(request) == [run]
    empty = Run(run_id="empty")
    assert _roundtrip(empty) == [empty]
    assert _spans(run_to_otlp(empty))[0]["startTimeUnixNano"] == "0"


def test_nanos_are_exact() -> None:
    dt = datetime(2262, 1, 1, 0, 0, 0, 999999, tzinfo=UTC)
    assert nanos_to_datetime(datetime_to_nanos(dt)) == dt
    assert datetime_to_nanos(datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC)) == 1000
    assert nanos_to_datetime(1_741_064_767_123_456_789) == T0  # sub-microsecond dropped, no float rounding
    assert nanos_to_datetime(0) is None and datetime_to_nanos(None) == 0
    naive = datetime(2025, 1, 1, 12)
    assert nanos_to_datetime(datetime_to_nanos(naive)) == naive.replace(tzinfo=UTC)


def test_otlp_lines_two_runs_and_split_trace(tmp_path: Path) -> None:
    run_a, run_b = rich_run("run-a", trace_id=None), rich_run("run-b", trace_id="1" * 32)
    req_a, req_b = run_to_otlp(run_a), run_to_otlp(run_b)
    # the Collector's file exporter may spread one trace over several lines (batches)
    spans_a = _spans(req_a)
    first = copy.deepcopy(req_a)
    first["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans_a[:4]
    second = copy.deepcopy(req_a)
    second["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans_a[4:]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in (first, req_b, second)) + "\n\n")
    assert load_otlp_json(path) == [run_a, run_b]
    assert load_otlp_json(str(path)) == [run_a, run_b]
    assert load_otlp_json(path.read_text()) == [run_a, run_b]
    assert load_otlp_json(path.read_bytes()) == [run_a, run_b]
    # pretty-printed single document, and two concatenated pretty-printed documents
    assert load_otlp_json(json.dumps(req_a, indent=2)) == [run_a]
    assert load_otlp_json(json.dumps(req_a, indent=2) + "\n" + json.dumps(req_b, indent=1)) == [run_a, run_b]
    assert runs_from_otlp([req_a, req_b]) == [run_a, run_b]
    assert load_otlp_json("") == []


def test_otlp_jaeger_wrapped() -> None:
    run = rich_run()
    answer = {"result": run_to_otlp(run)}
    assert runs_from_otlp(answer) == [run]
    assert load_otlp_json(json.dumps(answer)) == [run]
    # a streamed answer: several {"result": ...} chunks
    spans = _spans(run_to_otlp(run))
    chunks = []
    for part in (spans[:3], spans[3:]):
        req = run_to_otlp(run)
        req["resourceSpans"][0]["scopeSpans"][0]["spans"] = part
        chunks.append(json.dumps({"result": req}))
    assert load_otlp_json("".join(chunks)) == [run]
    assert load_otlp_json("\n".join(chunks)) == [run]


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _grpc_gateway(node: Any, key: str | None = None) -> Any:
    """snake_case keys, base64 ids, JSON-number ints, enum names: what a protobuf/gRPC-gateway JSON looks like."""
    if isinstance(node, dict):
        return {_camel_to_snake(k) if k != "key" else k: _grpc_gateway(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_grpc_gateway(v) for v in node]
    if key in ("traceId", "spanId", "parentSpanId") and isinstance(node, str):
        return base64.b64encode(bytes.fromhex(node)).decode()
    if key in ("intValue", "startTimeUnixNano", "endTimeUnixNano") and isinstance(node, str):
        return int(node)
    if key == "kind" and isinstance(node, int):
        return ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"][node]
    if key == "code" and isinstance(node, int):
        return ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"][node]
    return node


def test_otlp_snake_case_base64_variant() -> None:
    run = rich_run()
    variant = _grpc_gateway(run_to_otlp(run))
    spans = variant["resource_spans"][0]["scope_spans"][0]["spans"]
    assert "trace_id" in spans[0] and spans[0]["trace_id"].endswith("==")
    assert isinstance(spans[1]["start_time_unix_nano"], int)
    assert runs_from_otlp(variant) == [run]
    assert runs_from_otlp({"result": variant}) == [run]


def test_otlp_truncated_attributes_flag_the_step() -> None:
    run = rich_run()
    request = run_to_otlp(run)
    marker = semconv.TRUNCATION_MARKER.format(n=1234)
    cut_inputs = None
    for span in _spans(request):
        for attr in span["attributes"]:
            value = attr["value"].get("stringValue")
            if attr["key"] == semconv.STEP_CONTENT and value == "add 2 and 3":
                attr["value"]["stringValue"] = "add 2" + marker
            if attr["key"] == semconv.STEP_INPUTS and value and "messages" in value:
                assert json.loads(value) == run.step("llm-1").inputs
                cut_inputs = attr["value"]["stringValue"] = value[:20] + marker
    (back,) = runs_from_otlp(request)
    assert back.step("task").truncated is True
    assert back.step("task").content == "add 2" + marker
    assert back.step("llm-1").truncated is True
    assert back.step("llm-1").inputs == {"_truncated_json": cut_inputs}
    assert back.step("call-1").truncated is False


def test_otlp_bad_json_line_names_the_line() -> None:
    good = json.dumps(run_to_otlp(rich_run()))
    with pytest.raises(InvalidInputError, match=r"^line 2: not valid JSON"):
        load_otlp_json(good + '\n{"resourceSpans": [\n' + good + "\n")
    with pytest.raises(InvalidInputError, match=r"line 3: not valid JSON"):
        load_otlp_json(good + "\n\n" + good[:-10] + "\n")


def test_otlp_bad_json_in_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(run_to_otlp(rich_run())) + "\nnot json\n")
    with pytest.raises(InvalidInputError, match=r"t\.jsonl: line 2: not valid JSON"):
        load_otlp_json(path)
    with pytest.raises(InvalidInputError, match="cannot read"):
        load_otlp_json(tmp_path / "absent.jsonl")


def _drop_attr(request: dict[str, Any], step_id: str, key: str) -> dict[str, Any]:
    for span in _spans(request):
        attrs = _attrs(span)
        if attrs.get(semconv.STEP_ID) == {"stringValue": step_id}:
            span["attributes"] = [a for a in span["attributes"] if a["key"] != key]
    return request


def test_otlp_missing_step_index_names_the_attribute() -> None:
    request = _drop_attr(run_to_otlp(rich_run()), "call-1", semconv.STEP_INDEX)
    text = json.dumps(run_to_otlp(Run(run_id="other"))) + "\n" + json.dumps(request)
    with pytest.raises(
        InvalidInputError, match=r"line 2: span [0-9a-f]{16} \('execute_tool add'\).*causaltrace\.step\.index"
    ):
        load_otlp_json(text)
    with pytest.raises(InvalidInputError, match="causaltrace.step.index"):
        runs_from_otlp(request)


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda r: r.update(resourceSpans="x"), "'resourceSpans' must be a list"),
        (lambda r: _spans(r)[1].update(spanId="xyz"), "spanId 'xyz' is neither 16 hex digits nor base64"),
        (lambda r: _spans(r)[1].pop("traceId"), "traceId is missing"),
        (lambda r: _spans(r)[1].update(startTimeUnixNano="soon"), "startTimeUnixNano must be an integer"),
        (lambda r: _spans(r)[1]["attributes"].append({"value": {}}), r"attributes\[\d+\] must be an object"),
        (lambda r: _spans(r)[1]["attributes"][0].update(value={"weird": 1}), "no known value type"),
        (lambda r: _spans(r)[2]["attributes"][0].update(value={"intValue": "1.5"}), "intValue must be an integer"),
        (lambda r: _spans(r)[0]["attributes"].pop(0), "causaltrace.run.id"),
        (lambda r: r.clear() or r.update(spans=[]), "'resourceSpans' is missing"),
    ],
)
def test_otlp_malformed_fields(mutate: Any, pattern: str) -> None:
    request = run_to_otlp(rich_run())
    request["resourceSpans"][0]["scopeSpans"][0]["spans"].sort(key=lambda s: not semconv.is_root_span_name(s["name"]))
    mutate(request)
    with pytest.raises(InvalidInputError, match=pattern):
        runs_from_otlp(request)


def test_otlp_jaeger_error_answer() -> None:
    with pytest.raises(InvalidInputError, match="No traces found"):
        runs_from_otlp({"error": {"httpCode": 404, "message": "No traces found"}})


def test_otlp_unrelated_spans_ignored() -> None:
    run = rich_run()
    request = run_to_otlp(run)
    trace_id = run.trace_id
    root_id = _spans(request)[0]["spanId"]
    autogen_span = {
        "traceId": trace_id,
        "spanId": "00f067aa0ba902b7",
        "parentSpanId": root_id,
        "name": "autogen publish group_topic",
        "kind": 4,
        "startTimeUnixNano": "1741064767123456000",
        "endTimeUnixNano": "1741064768123456000",
        "attributes": [
            {"key": "messaging.operation", "value": {"stringValue": "publish"}},
            {"key": "gen_ai.agent.name", "value": {"stringValue": "solver"}},
            {"key": "score", "value": {"doubleValue": 0.5}},
            {"key": "blob", "value": {"bytesValue": "AAEC"}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}]}}},
        ],
    }
    other_trace = {
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "shop"}}]},
        "scopeSpans": [
            {
                "scope": {"name": "opentelemetry.instrumentation.requests"},
                "spans": [{"traceId": "2" * 32, "spanId": "3" * 16, "name": "GET", "attributes": []}],
            }
        ],
    }
    request["resourceSpans"][0]["scopeSpans"].append({"scope": {"name": "autogen-core"}, "spans": [autogen_span]})
    request["resourceSpans"].insert(0, other_trace)
    assert runs_from_otlp(request) == [run]


def test_otlp_steps_without_root_span() -> None:
    run = rich_run(trace_id=None)
    request = run_to_otlp(run)
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[:] = [s for s in spans if not semconv.is_root_span_name(s["name"])]
    (back,) = runs_from_otlp(request)
    assert back.run_id == run.run_id and back.framework == "unknown"
    assert back.trace_id is None and back.task is None and back.recording is None
    assert back.steps == run.steps


def test_otlp_legacy_span_names_still_import() -> None:
    """Traces written before the GenAI names (root ``causaltrace.run``, ``llm_response solver``, every span
    INTERNAL, ``invoke_workflow`` on the task step) read back to the same run: importers go by attributes."""
    run = rich_run()
    request = run_to_otlp(run)
    for span in _spans(request):
        attrs = _attrs(span)
        span["kind"] = 1
        if semconv.is_root_span_name(span["name"]):
            span["name"] = semconv.LEGACY_ROOT_SPAN_NAME
            continue
        kind = attrs[semconv.STEP_KIND]["stringValue"]
        agent = attrs.get(semconv.STEP_AGENT, {}).get("stringValue", "")
        tool = attrs.get(semconv.GEN_AI_TOOL_NAME, {}).get("stringValue")
        span["name"] = f"{kind} {tool or agent}".strip()
        span["attributes"] = [a for a in span["attributes"] if not a["key"].startswith("gen_ai.")
                              or a["key"] in (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
                                              semconv.GEN_AI_REQUEST_MODEL, semconv.GEN_AI_TOOL_NAME,
                                              semconv.GEN_AI_TOOL_CALL_ID, semconv.GEN_AI_AGENT_NAME)]
        if kind == "task":
            span["attributes"].append({"key": semconv.GEN_AI_OPERATION_NAME, "value": {"stringValue": "invoke_workflow"}})
    assert runs_from_otlp(request) == [run]
    # the sample trace in examples/ was written with the old names
    (sample,) = load_otlp_json(Path(__file__).parents[2] / "examples" / "sample_run.otlp.jsonl")
    assert len(sample.steps) == 16 and sample.name == "sample: sum 1..10"


def test_otlp_genai_conventions_on_export() -> None:
    """The GenAI attributes: the root is the workflow, a model call names its provider (from the model id here),
    a tool call its tool type, every operation the conversation (the run), a failed step its error.type."""
    run = rich_run()
    spans = _spans(run_to_otlp(run))
    root = next(s for s in spans if semconv.is_root_span_name(s["name"]))
    root_attrs = _attrs(root)
    assert root_attrs[semconv.GEN_AI_OPERATION_NAME] == {"stringValue": "invoke_workflow"}
    assert root_attrs[semconv.GEN_AI_CONVERSATION_ID] == {"stringValue": run.run_id}
    by_step = {_attrs(s)[semconv.STEP_ID]["stringValue"]: _attrs(s) for s in spans if s is not root}
    llm, call, turn, task = by_step["llm-1"], by_step["call-1"], by_step["turn-1"], by_step["task"]
    assert llm[semconv.GEN_AI_PROVIDER_NAME] == {"stringValue": "openai"}  # gpt-4o-mini
    assert llm[semconv.GEN_AI_OPERATION_NAME] == {"stringValue": "chat"}
    assert call[semconv.GEN_AI_OPERATION_NAME] == {"stringValue": "execute_tool"}
    assert call[semconv.GEN_AI_TOOL_TYPE] == {"stringValue": "function"}
    assert call[semconv.ERROR_TYPE] == {"stringValue": "ValueError"}
    assert turn[semconv.GEN_AI_OPERATION_NAME] == {"stringValue": "invoke_agent"}
    assert all(a[semconv.GEN_AI_CONVERSATION_ID] == {"stringValue": run.run_id} for a in (llm, call, turn))
    assert semconv.GEN_AI_OPERATION_NAME not in task  # the workflow is the root, not the task step
    anonymous = by_step["llm-2"]  # no model id: the provider is not guessed
    assert anonymous[semconv.GEN_AI_PROVIDER_NAME] == {"stringValue": "unknown"}


@pytest.mark.parametrize(
    ("model", "client", "provider"),
    [
        ("gpt-4o-mini", None, "openai"),
        ("anthropic/claude-3-5-sonnet", None, "anthropic"),
        ("claude-3-haiku", None, "anthropic"),
        ("llama3.1:8b", None, "ollama"),
        ("gemini-2.0-flash", None, "gcp.gemini"),
        ("qwen2.5-0.5b-instruct", "autogen_ext.models.openai.OpenAIChatCompletionClient", "openai"),
        (None, "autogen_ext.models.ollama.OllamaChatCompletionClient", "ollama"),
        ("gpt-4o", "smolagents.models.AzureOpenAIServerModel", "azure.ai.openai"),
        ("FnClient", None, "unknown"),
        (None, None, "unknown"),
    ],
)
def test_provider_name_from_client_or_model(model: str | None, client: str | None, provider: str) -> None:
    assert semconv.provider_name(model, client) == provider


def test_otlp_root_span_found_by_run_id_and_times_from_span() -> None:
    """Without the name, the span carrying causaltrace.run.id (and no step attribute) is the root."""
    run = rich_run()
    request = run_to_otlp(run)
    root = _spans(request)[0]
    root["name"] = "team run"
    root["attributes"] = [
        a for a in root["attributes"] if a["key"] not in (semconv.RUN_STARTED_AT, semconv.RUN_ENDED_AT)
    ]
    (back,) = runs_from_otlp(request)
    assert back.task == run.task and back.recording == run.recording
    assert back.started_at == run.started_at and back.ended_at == run.ended_at


def test_otlp_dependencies_from_links_only() -> None:
    run = rich_run()
    request = run_to_otlp(run)
    for span in _spans(request):
        span["attributes"] = [
            a for a in span["attributes"] if a["key"] not in (semconv.DEPENDS_ON_STEP_IDS, semconv.DEPENDS_ON_KINDS)
        ]
    assert runs_from_otlp(copy.deepcopy(request)) == [run]
    # and without the step id on the link: resolved through the linked span
    for span in _spans(request):
        for link in span.get("links", []):
            link["attributes"] = [a for a in link["attributes"] if a["key"] == semconv.DEPENDENCY_KIND]
    assert runs_from_otlp(copy.deepcopy(request)) == [run]
    _spans(request)[3]["links"][0]["spanId"] = "4" * 16
    with pytest.raises(InvalidInputError, match="points to no step"):
        runs_from_otlp(request)


def test_otlp_status_from_span_when_attribute_missing() -> None:
    run = rich_run()
    request = run_to_otlp(run)
    for step_id in ("call-1", "llm-1"):
        request = _drop_attr(request, step_id, semconv.STEP_STATUS)
    request = _drop_attr(request, "call-1", semconv.STEP_ERROR_TYPE)
    (back,) = runs_from_otlp(request)
    assert back.step("llm-1").status == "ok"
    assert back.step("call-1").status == "error"
    assert back.step("call-1").error == StepError(type="error", message="b must be an integer")


def test_otlp_list_attributes_as_json_text() -> None:
    """Backends that store Jaeger's own model turn arrays into JSON strings."""
    run = rich_run()
    request = run_to_otlp(run)
    for span in _spans(request):
        for attr in span["attributes"]:
            if "arrayValue" in attr["value"]:
                values = [v["stringValue"] for v in attr["value"]["arrayValue"]["values"]]
                attr["value"] = {"stringValue": json.dumps(values)}
    assert runs_from_otlp(request) == [run]


def test_otlp_duplicate_spans_read_once() -> None:
    run = rich_run()
    request = run_to_otlp(run)
    assert runs_from_otlp([request, copy.deepcopy(request)]) == [run]


def test_otlp_export_rejects_bad_ids() -> None:
    run = rich_run()
    bad_trace = run.model_copy(update={"trace_id": "xyz"})
    with pytest.raises(InvalidInputError, match="trace_id"):
        run_to_otlp(bad_trace)
    steps = list(run.steps)
    steps[2] = steps[2].model_copy(update={"span_id": "b7ad6b7169203331"})
    with pytest.raises(InvalidInputError, match="span id"):
        run_to_otlp(run.model_copy(update={"steps": tuple(steps)}))


def test_otlp_cycle_in_imported_trace() -> None:
    from causaltrace.exceptions import CycleInTraceError

    request = run_to_otlp(rich_run())
    for span in _spans(request):
        attrs = _attrs(span)
        if attrs.get(semconv.STEP_ID) == {"stringValue": "llm-1"}:
            for a in span["attributes"]:
                if a["key"] == semconv.DEPENDS_ON_STEP_IDS:
                    a["value"] = {"arrayValue": {"values": [{"stringValue": "final"}]}}
    with pytest.raises(CycleInTraceError, match="llm-1"):
        runs_from_otlp(request)


def _sdk_export(run: Run, *, cut_outcome: bool = False) -> tuple[list[Any], Any]:
    """Emit ``run`` the way a live emitter does (OTel SDK spans, random ids, nanosecond clock) and encode it with
    the OTLP exporter's protobuf encoder; returns (finished spans, protobuf request)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.trace import Link, Status, StatusCode, set_span_in_context

    provider, exporter = capture_spans()
    tracer = provider.get_tracer(semconv.INSTRUMENTATION_NAME)
    root_attrs = semconv.run_attributes(
        run_id=run.run_id, framework=run.framework, task=run.task, agents=run.agents, outcome=run.outcome
    )
    if cut_outcome:
        text = root_attrs[semconv.RUN_OUTCOME]
        root_attrs[semconv.RUN_OUTCOME] = text[:30] + semconv.TRUNCATION_MARKER.format(n=len(text) - 30)
    root = tracer.start_span(semconv.root_span_name(run.name), attributes=root_attrs)
    spans: dict[str, Any] = {}
    for step in run.steps:
        parent = spans[step.parent_step_id] if step.parent_step_id else root
        links = [
            Link(
                spans[d.step_id].get_span_context(),
                {semconv.DEPENDENCY_KIND: d.kind, semconv.DEPENDENCY_STEP_ID: d.step_id},
            )
            for d in step.depends_on
        ]
        span = tracer.start_span(
            semconv.span_name(step),
            context=set_span_in_context(parent),
            links=links,
            attributes=semconv.step_attributes(step),
        )
        if step.status == "error":
            span.set_status(Status(StatusCode.ERROR, "x"))
        elif step.status == "ok":
            span.set_status(Status(StatusCode.OK))
        spans[step.step_id] = span
    for span in reversed(list(spans.values())):
        span.end()
    root.end()
    finished = list(exporter.get_finished_spans())
    return finished, encode_spans(finished)


@pytest.mark.parametrize("snake_case", [False, True])
def test_otlp_from_sdk_protobuf_json(snake_case: bool) -> None:
    """Spans from the OTel SDK, encoded by the OTLP exporter and printed by protobuf's JSON printer (base64 ids,
    enum names, camelCase or proto field names): the importer rebuilds the run with the live ids and times."""
    from google.protobuf.json_format import MessageToJson

    run = rich_run("live-run", trace_id=None)
    plain_steps = tuple(s.model_copy(update={"started_at": None, "ended_at": None, "span_id": None}) for s in run.steps)
    run = Run.model_validate({**run.model_dump(), "steps": [s.model_dump() for s in plain_steps]})
    finished, request = _sdk_export(run)
    text = MessageToJson(request, preserving_proto_field_name=snake_case)
    assert ("trace_id" in text) is snake_case
    (back,) = load_otlp_json(text)
    trace_id = f"{finished[0].context.trace_id:032x}"
    assert back.trace_id == trace_id
    assert back.task == run.task and back.outcome == run.outcome and back.framework == run.framework
    by_id = {s.attributes.get(semconv.STEP_ID): s for s in finished}
    for step in back.steps:
        sdk_span = by_id[step.step_id]
        assert step.span_id == f"{sdk_span.context.span_id:016x}"
        assert step.started_at == nanos_to_datetime(sdk_span.start_time)
        assert step.ended_at == nanos_to_datetime(sdk_span.end_time)
        assert step.model_copy(update={"started_at": None, "ended_at": None, "span_id": None}) == run.step(step.step_id)
    root = by_id[None]
    assert back.started_at == nanos_to_datetime(root.start_time)  # no run.started_at attribute: the span's time


def test_otlp_truncated_root_attribute_is_dropped_not_fatal() -> None:
    from google.protobuf.json_format import MessageToDict

    run = rich_run("live-run-2", trace_id=None)
    _, request = _sdk_export(run, cut_outcome=True)
    (back,) = runs_from_otlp(MessageToDict(request))
    assert back.outcome == Outcome(status="failure")
    assert back.metadata == {"causaltrace.truncated_attributes": [semconv.RUN_OUTCOME]}
    assert [s.step_id for s in back.steps] == [s.step_id for s in run.steps]


# ------------------------------------------------------------------------------------------ property tests

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_NONEMPTY = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=8,
)
_JSON_OBJ = st.dictionaries(_TEXT, _JSON, max_size=3)
_TZ = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))])
_AWARE = st.builds(
    lambda dt, tz: dt.replace(tzinfo=UTC).astimezone(tz),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)),
    _TZ,
)
_HEX16 = st.text("0123456789abcdef", min_size=16, max_size=16).filter(lambda s: s.strip("0") != "")


@st.composite
def runs(draw: st.DrawFn) -> Run:
    run_id = draw(_NONEMPTY)
    n = draw(st.integers(0, 10))
    step_ids = draw(st.lists(_NONEMPTY, min_size=n, max_size=n, unique=True))
    span_ids = draw(st.lists(_HEX16, min_size=n, max_size=n, unique=True))
    indexes = sorted(draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True)))
    steps: list[Step] = []
    for i, (step_id, index) in enumerate(zip(step_ids, indexes, strict=True)):
        earlier = steps[:i]
        turns = [s.step_id for s in earlier if s.kind == "agent_turn"]
        parent = draw(st.sampled_from([None, *turns]))
        deps: tuple[Dependency, ...] = ()
        if earlier:
            deps = tuple(
                draw(
                    st.lists(
                        st.builds(
                            Dependency,
                            step_id=st.sampled_from([s.step_id for s in earlier]),
                            kind=st.sampled_from(DEPENDENCY_KINDS),
                        ),
                        max_size=4,
                    )
                )
            )
        status = draw(st.sampled_from(["ok", "error", "unset"]))
        error = None
        if status == "error" or draw(st.booleans()):
            error = StepError(type=draw(_NONEMPTY), message=draw(_TEXT))
        steps.append(
            Step(
                step_id=step_id,
                run_id=run_id,
                index=index,
                kind=draw(st.sampled_from(STEP_KINDS)),
                agent=draw(_TEXT),
                parent_step_id=parent,
                depends_on=deps,
                content=draw(_TEXT),
                inputs=draw(_JSON_OBJ),
                outputs=draw(_JSON_OBJ),
                usage=draw(
                    st.none()
                    | st.builds(TokenUsage, input_tokens=st.integers(0, 10**9), output_tokens=st.integers(0, 10**9))
                ),
                model=draw(st.none() | _NONEMPTY),
                tool_name=draw(st.none() | _NONEMPTY),
                arguments=draw(st.none() | _JSON_OBJ),
                call_id=draw(st.none() | _NONEMPTY),
                started_at=draw(st.none() | _AWARE),
                ended_at=draw(st.none() | _AWARE),
                status=status,
                error=error,
                action_signature=draw(st.none() | _NONEMPTY),
                truncated=draw(st.booleans()),
                span_id=draw(st.none() | st.just(span_ids[i])),
                metadata=draw(_JSON_OBJ),
            )
        )
    annotations = draw(
        st.none()
        | st.builds(
            Annotations,
            mistake_agent=st.none() | _TEXT,
            mistake_step=st.none() | st.integers(0, 100),
            mistake_reason=st.none() | _TEXT,
            ground_truth=st.none() | _TEXT,
            source=st.none() | _TEXT,
            extra=_JSON_OBJ,
        )
    )
    recording = draw(
        st.none()
        | st.builds(
            lambda calls: Recording(run_id=run_id, calls=tuple(calls)),
            st.lists(
                st.builds(
                    RecordedCall,
                    run_id=st.just(run_id),
                    step_id=st.none() | _TEXT,
                    agent_key=_NONEMPTY,
                    kind=st.sampled_from(["llm", "tool"]),
                    ordinal=st.integers(0, 5),
                    request=_JSON,
                    request_hash=_HEX16,
                    response=_JSON,
                    start_order=st.integers(0, 5),
                    finish_order=st.none() | st.integers(0, 5),
                    live_only=st.booleans(),
                ),
                max_size=2,
            ),
        )
    )
    outcome = draw(
        st.builds(
            Outcome,
            status=st.sampled_from(["success", "failure", "unknown", "incomplete"]),
            final_answer=st.none() | _TEXT,
            stop=st.none() | st.sampled_from(["normal", "limit", "error"]),
            verdict=st.none() | st.builds(Verdict, passed=st.booleans(), reason=_TEXT),
            reason=_TEXT,
        )
    )
    return Run(
        run_id=run_id,
        trace_id=draw(
            st.none() | st.text("0123456789abcdef", min_size=32, max_size=32).filter(lambda s: s.strip("0") != "")
        ),
        framework=draw(_TEXT),
        name=draw(st.none() | _NONEMPTY),
        task=draw(st.none() | _TEXT),
        agents=tuple(draw(st.lists(_TEXT, max_size=3))),
        steps=tuple(steps),
        started_at=draw(st.none() | _AWARE | st.datetimes()),
        ended_at=draw(st.none() | _AWARE),
        outcome=outcome,
        metadata=draw(_JSON_OBJ),
        annotations=annotations,
        recording=recording,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs(), data=st.data())
def test_otlp_roundtrip_property(run: Run, data: st.DataObject) -> None:
    request = json.loads(json.dumps(run_to_otlp(run)))
    assert runs_from_otlp(request) == [run]
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    shuffled = data.draw(st.permutations(spans))
    request["resourceSpans"][0]["scopeSpans"][0]["spans"] = shuffled
    for span in shuffled:  # links keep their order inside a span; attributes may come in any order
        span["attributes"] = data.draw(st.permutations(span["attributes"]))
    assert runs_from_otlp(request) == [run]


# ======================================================================================================= Jaeger


class _FakeJaeger(http.server.BaseHTTPRequestHandler):
    traces: dict[str, str] = {}
    queries: list[dict[str, list[str]]] = []
    search_answer: str = ""

    def do_GET(self) -> None:
        parsed = urllib.parse.urlparse(self.path)
        if parsed.path == "/api/v3/traces":
            query = urllib.parse.parse_qs(parsed.query)
            type(self).queries.append(query)
            if query.get("query.service_name") == ["causaltrace"]:
                self._send(200, type(self).search_answer)
            else:
                self._send(404, '{"error":{"httpCode":404,"message":"No traces found"}}\n')
            return
        match = re.fullmatch(r"/api/v3/traces/([0-9a-f]+)", parsed.path)
        if match and match.group(1) in self.traces:
            self._send(200, self.traces[match.group(1)])
        elif match:
            self._send(404, '{"error":{"httpCode":404,"message":"No traces found"}}\n')
        else:
            self._send(404, "404 page not found\n")

    def _send(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_jaeger() -> Iterator[str]:
    try:
        with serving(_FakeJaeger) as url:
            yield url
    finally:
        _FakeJaeger.traces = {}
        _FakeJaeger.queries = []


def test_pull_from_jaeger(fake_jaeger: str) -> None:
    run = rich_run()
    other = rich_run("run-2", trace_id="5" * 32)
    assert run.trace_id is not None
    _FakeJaeger.traces = {
        run.trace_id: json.dumps({"result": run_to_otlp(run)}),
        # a streamed answer in the gRPC-gateway style (base64 ids, snake_case), two chunks
        other.trace_id: "".join(  # type: ignore[dict-item]
            json.dumps({"result": _grpc_gateway(part)}) + "\n" for part in _split_request(run_to_otlp(other))
        ),
        "9" * 32: json.dumps({"result": {"resourceSpans": []}}),
        "8" * 32: "this is not json",
    }
    assert pull_from_jaeger(run.trace_id, fake_jaeger) == [run]
    assert pull_from_jaeger(run.trace_id.upper(), fake_jaeger + "/", timeout_s=5) == [run]
    assert pull_from_jaeger("5" * 32, fake_jaeger) == [other]
    with pytest.raises(InvalidInputError, match="holds no causaltrace run"):
        pull_from_jaeger("9" * 32, fake_jaeger)
    with pytest.raises(InvalidInputError, match="invalid JSON"):
        pull_from_jaeger("8" * 32, fake_jaeger)


def _split_request(request: dict[str, Any]) -> list[dict[str, Any]]:
    spans = _spans(request)
    parts = []
    for chunk in (spans[:2], spans[2:]):
        part = copy.deepcopy(request)
        part["resourceSpans"][0]["scopeSpans"][0]["spans"] = chunk
        parts.append(part)
    return parts


def test_pull_from_jaeger_not_found(fake_jaeger: str) -> None:
    with pytest.raises(UserError) as info:
        pull_from_jaeger("ab" * 16, fake_jaeger)
    assert str(info.value) == f"trace {'ab' * 16} not found in Jaeger at {fake_jaeger}"
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="invalid trace id"):
        pull_from_jaeger("not-a-trace", fake_jaeger)
    with pytest.raises(UserError, match="invalid Jaeger URL"):
        pull_from_jaeger("ab" * 16, "localhost:16686")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pull_from_jaeger_connection_refused() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(UserError) as info:
        pull_from_jaeger("ab" * 16, url, timeout_s=2)
    message = str(info.value)
    assert message.startswith(f"cannot reach Jaeger at {url}: ")
    assert "refused" in message.lower() and "\n" not in message
    with pytest.raises(UserError, match="cannot reach Jaeger"):
        query_jaeger_traces(url, "causaltrace", T0, _t(60))


def test_query_jaeger_traces(fake_jaeger: str) -> None:
    run_a, run_b = rich_run("a", trace_id=None), rich_run("b", trace_id=None)
    _FakeJaeger.search_answer = (
        json.dumps({"result": run_to_otlp(run_a)}) + "\n" + json.dumps({"result": run_to_otlp(run_b)})
    )
    answer = query_jaeger_traces(fake_jaeger, "causaltrace", T0, _t(60).astimezone(timezone(timedelta(hours=3))))
    assert runs_from_otlp(answer) == [run_a, run_b]
    (query,) = _FakeJaeger.queries
    assert query["query.start_time_min"] == ["2025-03-04T05:06:07.123456Z"]
    assert query["query.start_time_max"] == ["2025-03-04T05:07:07.123456Z"]
    assert query["query.num_traces"] == ["100"]
    assert query_jaeger_traces(fake_jaeger, "nobody", "2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z") == {
        "result": {"resourceSpans": []}
    }


@pytest.mark.jaeger
def test_real_jaeger_roundtrip(tmp_path: Path) -> None:
    """Send an exported run to a real Jaeger over OTLP/HTTP (JSON) and pull it back: the same Run."""
    from _jaeger import running_jaeger  # tests/ is on sys.path (rootdir conftest, prepend import mode)

    now = datetime.now(UTC).replace(microsecond=123456)
    base = rich_run("jaeger-run", trace_id=None)
    shift = now - T0
    steps = tuple(
        s.model_copy(
            update={
                "started_at": (s.started_at or T0) + shift,
                "ended_at": (s.ended_at or s.started_at or T0) + shift,
            }
        )
        for s in base.steps
    )
    run = base.model_copy(update={"steps": steps, "started_at": now, "ended_at": now + timedelta(seconds=10)})
    run = Run.model_validate(run.model_dump())
    with running_jaeger(tmp_path) as jaeger:
        request = urllib.request.Request(
            jaeger.otlp_http_traces_url,
            data=json.dumps(run_to_otlp(run)).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        trace_id = derived_trace_id(run.run_id)
        deadline = time.monotonic() + 20
        while True:
            try:
                pulled = pull_from_jaeger(trace_id, jaeger.query_url)
                break
            except UserError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert pulled == [run]
        answer = query_jaeger_traces(
            jaeger.query_url, "causaltrace", now - timedelta(minutes=1), now + timedelta(minutes=1)
        )
        assert runs_from_otlp(answer) == [run]
        empty = query_jaeger_traces(jaeger.query_url, "no-such-service", now - timedelta(minutes=1), now)
        assert empty == {"result": {"resourceSpans": []}}
        with pytest.raises(UserError, match=f"trace {'ab' * 16} not found in Jaeger at"):
            pull_from_jaeger("ab" * 16, jaeger.query_url)


def test_content_ids_follow_the_log_not_its_file(tmp_path: Path) -> None:
    source = FIXTURES / "Algorithm-Generated" / "2.json"
    plain = load_whowhen(source)
    keyed = load_whowhen(source, content_id=True)
    assert plain.run_id == "whowhen-algo-2" and re.fullmatch(r"whowhen-algo-2-[0-9a-f]{12}", keyed.run_id)
    assert keyed.steps[0].step_id == f"{keyed.run_id}-s0"
    # Reformatted (indentation, key order) under the same subset folder: the same id.
    moved = tmp_path / "Algorithm-Generated"
    moved.mkdir()
    data = json.loads(source.read_text())
    (moved / "2.json").write_text(json.dumps(dict(reversed(list(data.items()))), indent=4))
    shutil.copy(FIXTURES / "VERSION", tmp_path / "VERSION")
    assert load_whowhen(moved / "2.json", content_id=True).run_id == keyed.run_id
    # One changed character in the history: another id.
    data["history"][0]["content"] += "!"
    (moved / "2.json").write_text(json.dumps(data))
    changed = load_whowhen(moved / "2.json", content_id=True).run_id
    assert changed != keyed.run_id and changed.startswith("whowhen-algo-2-")
    assert [r.run_id for r in iter_whowhen(tmp_path, "algo", content_id=True)] == [changed]
