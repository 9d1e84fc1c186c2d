"""The no-model methods: the heuristics reproduce the published strict figures exactly on the real Who&When data
(checking the loader and the metric), and the deterministic `graph` method ranks every trace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import causaltrace
from causaltrace.attribution.bench import bench_whowhen
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.whowhen import load_whowhen

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_run.otlp.jsonl"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


@pytest.mark.parametrize(
    ("subset", "method", "agent", "step"),
    [
        ("algo", "first-agent-step", 49.21, 15.87),
        ("algo", "most-active-agent", 53.97, 19.05),
        ("hand", "first-agent-step", 31.03, 1.72),
        ("hand", "most-active-agent", 31.03, 1.72),
    ],
)
def test_heuristics_reproduce_the_published_figures(whowhen_dir, subset, method, agent, step):
    report = asyncio.run(bench_whowhen(whowhen_dir, [method], subset=subset))
    assert (report["agent_accuracy"], report["step_accuracy"]) == (agent, step)
    assert report["n"] == {"algo": 126, "hand": 58}[subset] and report["failed_diagnoses"] == 0
    assert report["calls_per_trace"] == 0 and report["coverage_at_k"] is None


def test_graph_ranks_every_whowhen_trace(whowhen_dir):
    report = asyncio.run(bench_whowhen(whowhen_dir, ["graph"], subset="all"))
    assert report["n"] == 184 and report["failed_diagnoses"] == 0 and report["calls_per_trace"] == 0
    for scope in (report, *report["by_subset"].values()):
        cov = scope["coverage_at_k"]
        assert cov["1"] <= cov["3"] <= cov["5"] <= cov["10"]
        assert cov["1"] == scope["step_accuracy"]
    # the deterministic stages beat the trivial baselines on Algorithm-Generated (figures in the issue note)
    assert report["by_subset"]["algo"]["step_accuracy"] > 19.05


def test_heuristic_definitions_on_synthetic_logs():
    hand = load_whowhen(FIXTURES / "Hand-Crafted" / "2.json")
    d = causaltrace.diagnose_sync(hand, "first-agent-step")  # skips the human; the thought is the orchestrator's
    assert (d.decisive_step_index, d.agent, d.verified_by) == (1, "Orchestrator", "heuristic")
    d = causaltrace.diagnose_sync(hand, "most-active-agent")  # terminals excluded, instructions count
    assert (d.decisive_step_index, d.agent) == (1, "Orchestrator")
    algo = load_whowhen(FIXTURES / "Algorithm-Generated" / "2.json")
    d = causaltrace.diagnose_sync(algo, "most-active-agent")  # Python_Expert 2 steps vs Planner_Expert 2: earlier wins
    assert (d.decisive_step_index, d.agent) == (0, "Planner_Expert")
    live = load_otlp_json(SAMPLE)[0]
    d = causaltrace.diagnose_sync(live, "first-agent-step")  # the user's task and containers are skipped
    assert (d.decisive_step_index, d.agent) == (3, "planner")


def test_graph_on_a_live_run_blames_the_planted_call_not_the_distractor():
    run = load_otlp_json(SAMPLE)[0]
    d = causaltrace.diagnose_sync(run)
    assert d.decisive_step_index == 6 and d.agent == "solver" and d.verified_by == "heuristic"
    assert d.category is None  # no evidence fixes a category: none is guessed
    distractor = next(c for c in d.candidates if c.index == 7)
    assert any("never reached the failure" in r for r in distractor.reasons)
    assert [e.role for e in d.evidence][0] == "introduced" and d.evidence[-1].index == 15


def test_graph_names_a_loop_and_a_system_error(tmp_path):
    loop = causaltrace.diagnose_sync(load_whowhen(FIXTURES / "Hand-Crafted" / "1.json"))
    assert (loop.decisive_step_index, loop.agent, loop.category) == (6, "WebSurfer", "FM-1.3")
    assert loop.category_name == "Step Repetition"
    assert loop.artifacts["loop_detect"][0]["kind"] == "instruction"
    data = {"is_correct": False, "question": "An invented question?", "question_ID": "syn", "level": "1",
            "ground_truth": "7", "mistake_agent": "Python_Expert", "mistake_step": "1", "mistake_reason": "invented",
            "system_prompt": {}, "history": [
                {"name": "Planner_Expert", "role": "assistant", "content": "Plan: load the invented table and count rows."},
                {"name": "Python_Expert", "role": "user", "content": "```python\nimport pandaz\nprint(7)\n```"},
                {"name": "Computer_terminal", "role": "user",
                 "content": "exitcode: 1 (execution failed)\nCode output: ModuleNotFoundError: No module named 'pandaz'"},
                {"name": "Verification_Expert", "role": "user",
                 "content": "The module pandaz is missing, so the row count cannot be computed; we report none."},
            ]}
    folder = tmp_path / "Algorithm-Generated"
    folder.mkdir()
    (folder / "9.json").write_text(json.dumps(data))
    run = load_whowhen(folder / "9.json")
    sys_err = causaltrace.diagnose_sync(run)
    assert (sys_err.decisive_step_index, sys_err.category) == (1, "SYS-ENVIRONMENT")
    assert [e.role for e in sys_err.evidence][:2] == ["introduced", "carried"]
