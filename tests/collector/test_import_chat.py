"""`causaltrace import --format chat|auto` (issue 23 item 2): plain conversation logs in, labels optional.

The AutoGen TaskResult and the smolagents steps are dumped from REAL runs of the frameworks on the project's
scripted models; each imported run is then diagnosed with ``graph`` (no model) through the CLI.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from causaltrace.cli import main
from causaltrace.collector.chatlog import load_chat, sniff_format
from causaltrace.collector.chatlog_build import HAS_RECORDING_KEY, PROVENANCE_KEY, SOURCE_FORMAT_KEY
from causaltrace.collector.store import Store

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "whowhen"

OPENAI_LOG = [
    {"role": "system", "content": "You are a careful calculator."},
    {"role": "user", "content": "Compute (17 + 25) * 3."},
    {"role": "assistant", "name": "solver", "content": "I will add first.",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 17, "b": 26}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "43"},
    {"role": "assistant", "name": "solver", "content": None,
     "tool_calls": [{"id": "c2", "type": "function",
                     "function": {"name": "multiply", "arguments": '{"a": 43, "b": 3}'}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "129"},
    {"role": "assistant", "name": "solver", "content": "RESULT: 129"},
]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def import_and_diagnose(capsys, path: Path, fmt: str = "chat") -> tuple[str, dict]:
    code, out, err = run_cli(capsys, "import", str(path), "--format", fmt)
    assert code == 0, err
    (run_id,) = out.split()
    code, out, err = run_cli(capsys, "diagnose", run_id, "--method", "graph", "--json")
    assert code == 0, err
    diagnosis = json.loads(out)
    assert diagnosis["run_id"] == run_id and diagnosis["decisive_step_id"] and not diagnosis["failed"]
    return run_id, diagnosis


def stored_runs() -> list[str]:
    with Store() as store:
        return sorted(row["run_id"] for row in store.list_runs())


def test_openai_messages_json_import_maps_calls_and_results(tmp_path, capsys):
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"messages": OPENAI_LOG}))
    run_id, _ = import_and_diagnose(capsys, path)
    with Store() as store:
        run = store.get_run(run_id)
    kinds = [s.kind for s in run.steps]
    assert kinds == ["task", "message", "tool_call", "tool_response", "tool_call", "tool_response", "message"]
    assert run.task == "Compute (17 + 25) * 3." and run.agents == ("solver",)
    first_call, first_result = run.steps[2], run.steps[3]
    assert first_call.tool_name == "add" and first_call.arguments == {"a": 17, "b": 26} and first_call.call_id == "c1"
    assert [(d.step_id, d.kind) for d in first_call.depends_on] == [(run.steps[1].step_id, "produced_by")]
    assert [(d.step_id, d.kind) for d in first_result.depends_on] == [(first_call.step_id, "tool_result_of")]
    assert first_result.outputs == {"result": "43", "is_error": False} and first_result.agent == "solver"
    # no text in that message: nothing to be produced by; the conversation's protocol says it saw the result before
    # it (derived at import, as for a Who&When log: a log with tool calls is no live run)
    assert [(d.step_id, d.kind) for d in run.steps[4].depends_on] == [(first_result.step_id, "saw")]
    assert run.metadata["dependencies"] == "derived"
    from causaltrace.attribution.stages.dependencies import build_dependency_graph

    graph = build_dependency_graph(run)
    assert graph.source == "recovered" and (3, 4, "saw") in {(e.producer, e.consumer, e.kind) for e in graph.edges}
    assert run.metadata[PROVENANCE_KEY] == "chat" and run.metadata[SOURCE_FORMAT_KEY] == "openai"
    assert run.metadata[HAS_RECORDING_KEY] is False and run.recording is None
    assert run.metadata["system_prompts"] == ["You are a careful calculator."]
    assert run.annotations is None and run.outcome.final_answer == "RESULT: 129"
    # content-derived id: the same conversation, formatted otherwise, elsewhere, is the same run (idempotent)
    again = tmp_path / "other.json"
    again.write_text(json.dumps({"messages": OPENAI_LOG}, indent=2))
    code, out, _ = run_cli(capsys, "import", str(again), "--format", "auto")
    assert code == 0 and out.split() == [run_id]


def test_speakers_are_typed_and_a_named_terminal_is_a_tool_response(tmp_path):
    log = [
        {"role": "user", "content": "Run the script and report the count."},
        {"role": "assistant", "name": "coder", "content": "```python\nprint(len([1, 2]))\n```"},
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0 (execution succeeded)\nCode output: 2"},
        {"role": "assistant", "name": "coder", "content": "The count is 2."},
    ]
    path = tmp_path / "terminal.json"
    path.write_text(json.dumps(log))
    (run,) = load_chat(path)
    assert [s.kind for s in run.steps] == ["task", "message", "tool_response", "message"]
    assert [s.metadata["speaker_role"] for s in run.steps] == ["human", "agent", "tool", "agent"]
    assert run.steps[2].outputs == {"result": log[2]["content"], "is_error": False} and run.agents == ("coder",)


def test_jsonl_is_one_conversation_per_line(tmp_path):
    other = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = tmp_path / "logs.jsonl"
    path.write_text(json.dumps(OPENAI_LOG) + "\n\n" + json.dumps(other) + "\n")
    runs = load_chat(path)
    assert [len(r.steps) for r in runs] == [7, 2] and runs[0].run_id != runs[1].run_id
    assert runs[1].agents == ("assistant",) and runs[1].steps[0].kind == "task"


def test_whowhen_shaped_with_and_without_labels(tmp_path, capsys):
    labelled = FIXTURES / "Algorithm-Generated" / "2.json"
    data = json.loads(labelled.read_text())
    code, out, _ = run_cli(capsys, "import", str(labelled), "--format", "whowhen")
    whowhen_id = out.strip()
    # a labelled log gives the same run (id and annotation) through --format chat
    (run,) = load_chat(labelled)
    assert run.run_id == whowhen_id and run.annotations.mistake_agent == data["mistake_agent"]
    unlabelled = {k: v for k, v in data.items() if k not in ("mistake_step", "mistake_agent", "mistake_reason")}
    path = tmp_path / "2.json"
    path.write_text(json.dumps(unlabelled))
    run_id, diagnosis = import_and_diagnose(capsys, path, "auto")
    with Store() as store:
        run = store.get_run(run_id)
    assert run.annotations is None and len(run.steps) == len(data["history"]) and run_id != whowhen_id
    assert run.metadata["whowhen"]["subset"] == "algo"


@pytest.fixture
def autogen_task_result(tmp_path) -> Path:
    pytest.importorskip("autogen_agentchat")
    import asyncio

    sys.path.insert(0, str(ROOT / "examples"))
    example = importlib.import_module("autogen_team")
    result = asyncio.run(example.build_failing().run(task=example.TASK))
    path = tmp_path / "task_result.json"
    path.write_text(result.model_dump_json())
    return path


def test_autogen_task_result(autogen_task_result, capsys):
    assert sniff_format(autogen_task_result) == "chat"
    run_id, diagnosis = import_and_diagnose(capsys, autogen_task_result, "auto")
    with Store() as store:
        run = store.get_run(run_id)
    assert run.framework == "autogen" and run.agents == ("planner", "solver", "reviewer")
    calls = [s for s in run.steps if s.kind == "tool_call"]
    assert [(c.tool_name, c.arguments) for c in calls] == [("add", {"a": 17, "b": 26}), ("multiply", {"a": 43, "b": 3})]
    results = [s for s in run.steps if s.kind == "tool_response"]
    assert [r.depends_on[0].step_id for r in results] == [c.step_id for c in calls]
    assert run.outcome.reason.startswith("Text 'APPROVE'")
    top3 = [c["step_id"] for c in diagnosis["candidates"][:3]]
    assert calls[0].step_id in top3  # the planted add(17, 26)


@pytest.fixture
def smolagents_steps(tmp_path) -> Path:
    pytest.importorskip("smolagents")
    from smolagents import ToolCallingAgent

    from causaltrace.testing.smolagents import ScriptedModel, sum_of_powers_tool, tool_worker_policy

    agent = ToolCallingAgent(tools=[sum_of_powers_tool()], model=ScriptedModel(tool_worker_policy()), max_steps=4,
                             verbosity_level=0)
    agent.run("Compute the sum of the squares of these numbers: [1, 2, 4]")
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(agent.memory.get_full_steps(), default=str))
    return path


def test_smolagents_steps(smolagents_steps, capsys):
    run_id, _ = import_and_diagnose(capsys, smolagents_steps)
    with Store() as store:
        run = store.get_run(run_id)
    assert [s.kind for s in run.steps] == [
        "task", "llm_response", "tool_call", "tool_response", "llm_response", "final_answer"]
    call, result = run.steps[2], run.steps[3]
    assert call.tool_name == "sum_of_powers" and call.arguments == {"numbers": [1, 2, 4], "power": 2}
    assert result.content == "21" and result.depends_on[0].step_id == call.step_id
    assert run.outcome.final_answer == "21" and run.metadata[SOURCE_FORMAT_KEY] == "smolagents"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (json.dumps([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "1"}]),
         "no earlier tool call"),
        (json.dumps({"messages": [{"type": "TextMessage", "source": "user", "content": "add 2 and 3"},
                                  {"type": "ToolCallExecutionEvent", "source": "solver",
                                   "content": [{"call_id": "zz", "content": "5", "name": "add", "is_error": False}]}],
                     "stop_reason": None}), "no earlier tool call"),  # an AutoGen TaskResult: the same rule
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        ("", "empty"),
        ("  \n", "empty"),
        ("this is not json {", "not JSON or JSON lines"),
        (json.dumps({"hello": "world"}), "no conversation found"),
        (json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": "add"}]), "must be a list"),
    ],
)
def test_bad_logs_are_one_line_exit_2_and_store_nothing(tmp_path, capsys, content, needle):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(OPENAI_LOG))
    assert run_cli(capsys, "import", str(good), "--format", "chat")[0] == 0
    before = stored_runs()
    bad = tmp_path / "bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    for fmt in ("chat", "auto"):
        code, out, err = run_cli(capsys, "import", str(good), str(bad), "--format", fmt)
        assert code == 2 and out == "", err
        line = err.strip()
        assert "\n" not in line and needle in line and str(bad) in line
    assert stored_runs() == before
