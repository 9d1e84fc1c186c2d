"""Generic conventions for imported logs (issue 20 item 5): one typing module (``collector.speakers``) used by the
Who&When importer and by attribution — tool speakers by role, name pattern and content shape (the Who&When names
one case), system text as context, and who is a human that cannot be at fault as an option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.stages.view import candidate_steps, is_terminal, is_user_input, view_steps
from causaltrace.cli import main
from causaltrace.collector.speakers import classify_speaker, looks_like_tool_output, mark_human_speakers
from causaltrace.collector.whowhen import whowhen_run_from_data


@pytest.mark.parametrize(("name", "role", "contents", "expected"), [
    ("Computer_terminal", "user", [], "tool"),  # the Who&When names are one case of the patterns
    ("ComputerTerminal", None, [], "tool"),
    ("Tool", None, [], "tool"),
    ("code_executor", None, [], "tool"),
    ("Environment", None, [], "tool"),
    ("lookup", "tool", [], "tool"),
    ("runner", "function", [], "tool"),
    ("kernel", "ipython", [], "tool"),
    ("policy", "system", [], "system"),
    ("Python_Expert", "assistant", ["Here is my plan."], "agent"),
    ("JSON_Expert", "assistant", ["A task that mentions exitcode: 1 and a Traceback"], "agent"),
    ("box", None, ["exitcode: 1 (execution failed)\nCode output: boom"], "tool"),
    ("box", None, ['{"temperature": 21, "unit": "C"}', "[1, 2, 3]"], "tool"),
    ("box", None, ['{"temperature": 21}', "I think it is warm."], "agent"),
])
def test_speakers_are_typed_by_role_name_and_content_shape(name, role, contents, expected):
    assert classify_speaker(name, role, contents) == expected


def test_content_shape_reads_the_start_of_a_message():
    assert looks_like_tool_output("Traceback (most recent call last):\n  File ...")
    assert not looks_like_tool_output("I saw this: Traceback (most recent call last): ...")
    assert not looks_like_tool_output("{not json}") and not looks_like_tool_output("")


def log(tool_name: str, tool_role: str | None, user_name: str = "user") -> dict:
    """An Algorithm-Generated-shaped log: a simulated user gives a wrong number, the coder computes with it, a tool
    runs the code, the coder answers."""
    tool_entry = {"name": tool_name, "content": "exitcode: 0 (execution succeeded)\nCode output: 46"}
    if tool_role:
        tool_entry["role"] = tool_role
    return {
        "question": "A box holds 12 apples. How many apples are in 4 boxes?",
        "history": [
            {"name": "Planner", "role": "assistant", "content": "Ask the customer how many boxes they bought."},
            {"name": user_name, "role": "user", "content": "I bought 4 boxes of 11.5 apples."},
            {"name": "Coder", "role": "assistant", "content": "```python\nprint(4 * 11.5)\n```"},
            tool_entry,
            {"name": "Coder", "role": "assistant", "content": "There are 46 apples. TERMINATE"},
        ],
        "mistake_agent": user_name, "mistake_step": "1", "ground_truth": "48",
    }


@pytest.mark.parametrize(("tool_name", "tool_role"), [("Tool", None), ("exec", "tool"), ("Computer_terminal", None)])
def test_a_tool_speaker_is_a_tool_however_it_is_named(tool_name, tool_role, tmp_path):
    run = whowhen_run_from_data(log(tool_name, tool_role), tmp_path / "Algorithm-Generated" / "1.json")
    step = run.step_at(3)
    assert step.kind == "tool_response" and step.metadata["speaker_role"] == "tool" and is_terminal(step)
    diagnosis = diagnose_sync(run, "graph")
    assert diagnosis.decisive_step_index != 3 and diagnosis.agent != tool_name


def test_a_simulated_user_can_be_blamed_unless_named_human(tmp_path):
    run = whowhen_run_from_data(log("Tool", None), tmp_path / "Algorithm-Generated" / "1.json")
    default = mark_human_speakers(run)  # no task step: nobody is a human by default
    assert not is_user_input(default.step_at(1)) and 1 in {s.index for s in candidate_steps(default)}
    named = mark_human_speakers(run, ["user"])
    assert is_user_input(named.step_at(1)) and 1 not in {s.index for s in candidate_steps(named)}
    assert diagnose_sync(run, "graph", human_speakers=["user"]).decisive_step_index != 1
    candidates = {c.index for c in diagnose_sync(run, "graph").candidates}
    assert 1 in candidates


def test_the_hand_crafted_task_giver_stays_the_human(tmp_path):
    data = {"question": "q", "history": [
        {"role": "human", "content": "What is 2 + 2?"},
        {"role": "Assistant", "content": "It is 5."}], "mistake_agent": "Assistant", "mistake_step": "1"}
    run = whowhen_run_from_data(data, tmp_path / "Hand-Crafted" / "2.json")
    assert run.steps[0].kind == "task" and run.steps[0].metadata["speaker_role"] == "human"
    assert [s.index for s in candidate_steps(mark_human_speakers(run))] == [1]


def test_system_text_is_context_never_a_candidate(tmp_path):
    data = log("Tool", None)
    policy = "Policy: " + " ".join(["apples boxes customer answer numbers"] * 40)
    data["history"].insert(0, {"name": "system", "role": "system", "content": policy})
    run = whowhen_run_from_data(data, tmp_path / "Algorithm-Generated" / "3.json")
    assert run.steps[0].metadata["speaker_role"] == "system"
    assert 0 not in {s.index for s in candidate_steps(run)} and 0 not in {s.index for s in view_steps(run)}
    diagnosis = diagnose_sync(run, "graph")
    assert 0 not in {c.index for c in diagnosis.candidates}


def test_diagnose_cli_takes_human_speakers(tmp_path, capsys):
    path = tmp_path / "Algorithm-Generated" / "7.json"
    path.parent.mkdir()
    path.write_text(json.dumps(log("Tool", None)))
    assert main(["import", "--format", "whowhen", str(path)]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["diagnose", run_id, "--human-speakers", "user", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decisive_step_index"] != 1 and 1 not in {c["index"] for c in out["candidates"]}
    assert Path(path).exists()
