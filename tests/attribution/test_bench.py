"""`causaltrace bench whowhen`: the Benchmark JSON of ARCHITECTURE (keys, 2 decimals), selection by --limit /
--order, several methods side by side, cost by stage, failed diagnoses, resumability through the cache."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from causaltrace.attribution.bench import bench_whowhen, select_runs, split_of, wilson_interval
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.cli import main
from causaltrace.testing.judges import FunctionJudge, register_function_model

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"
ONE_METHOD_KEYS = [
    "method", "model", "with_answer", "subset", "split", "split_note", "label_version", "n", "agent_accuracy",
    "step_accuracy", "agent_step_accuracy", "hits", "ci95", "agent_accuracy_official", "step_accuracy_official", "step_within_1", "step_within_3",
    "coverage_at_k", "by_length", "by_subset", "calls_per_trace", "calls_by_stage", "input_tokens_per_trace",
    "output_tokens_per_trace", "seconds_per_trace", "failed_diagnoses", "calibration", "uncertain_share",
    "certain_hits", "certain_step_accuracy",
]
PERCENT_KEYS = ["agent_accuracy", "step_accuracy", "agent_step_accuracy", "agent_accuracy_official",
                "step_accuracy_official", "step_within_1", "step_within_3"]


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def labelled(messages, info):
    """A fake model for all-at-once: the first step of Python_Expert, else WebSurfer, else the first agent."""
    agents = info.schema["properties"]["agent_name"]["enum"]
    agent = next((a for a in ("Python_Expert", "WebSurfer") if a in agents), agents[0])
    conversation = messages[1]["content"].split("This is the conversation:\n\n", 1)[1].split("\n\nFrom this")[0]
    speakers = [line.split(":", 1)[0].split(" (")[0] for line in conversation.split("\n")
                if re.match(r"^[A-Za-z_]+( \(.*\))?: ", line)]
    return {"agent_name": agent, "step_number": speakers.index(agent), "reason": "fake"}


def two_decimals(value):
    return value is None or (isinstance(value, float) and 0 <= value <= 100 and round(value, 2) == value)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -------------------------------------------------------------------------------------------------- selection


def test_limit_takes_traces_in_file_number_order_and_size_order_the_smallest():
    names = [r.run_id for r in select_runs(DATA, "all")]
    assert names == ["whowhen-algo-1", "whowhen-hand-1", "whowhen-algo-2", "whowhen-hand-2", "whowhen-algo-3"]
    assert [r.run_id for r in select_runs(DATA, "all", limit=3)] == names[:3]
    assert [r.run_id for r in select_runs(DATA, "hand", limit=1)] == ["whowhen-hand-1"]
    by_size = select_runs(DATA, "all", order="size")
    sizes = [sum(len(s.content) for s in r.steps) for r in by_size]
    assert sizes == sorted(sizes) and by_size[0].run_id == "whowhen-algo-3"
    assert [r.run_id for r in select_runs(DATA, "algo", limit=2, order="size")] == ["whowhen-algo-3",
                                                                                    "whowhen-algo-1"]


# ------------------------------------------------------------------------------------------------------- JSON


def test_one_method_json_has_exactly_the_architecture_keys():
    report = asyncio.run(bench_whowhen(DATA, ["graph"]))
    assert list(report) == ONE_METHOD_KEYS
    assert report["method"] == "graph" and report["model"] is None and report["with_answer"] is False
    assert report["subset"] == "all" and report["label_version"] == "synthetic-attribution@1" and report["n"] == 5
    assert report["split"] == "all" and list(report["hits"]) == ["agent", "step", "agent_step"]
    assert list(report["ci95"]) == ["agent", "step"] and all(two_decimals(v) for v in report["ci95"]["agent"])
    assert all(two_decimals(report[k]) for k in PERCENT_KEYS)
    assert list(report["coverage_at_k"]) == ["1", "3", "5", "10"]
    assert all(two_decimals(v) for v in report["coverage_at_k"].values())
    assert list(report["by_length"]) == ["1-10", "11-20", "21-40", "41-80", "81+"]
    assert report["by_length"]["1-10"]["n"] == 4 and report["by_length"]["11-20"]["n"] == 1
    assert report["by_length"]["81+"] == {"n": 0, "agent_accuracy": None, "step_accuracy": None,
                                          "agent_step_accuracy": None}
    assert set(report["by_subset"]) == {"algo", "hand"}
    for key, sub in report["by_subset"].items():
        assert list(sub) == [k for k in ONE_METHOD_KEYS if k != "by_subset"]
        assert sub["subset"] == key and sub["n"] == {"algo": 3, "hand": 2}[key]
    assert report["calls_per_trace"] == 0 and report["calls_by_stage"] == {} and report["failed_diagnoses"] == 0
    # issue 32 item 2: beside the top candidate's accuracy, the uncertain share and the others' accuracy
    certain = report["certain_hits"]
    assert 0 <= certain["step"] <= certain["n"] <= report["n"]
    assert report["uncertain_share"] == round(100.0 * (report["n"] - certain["n"]) / report["n"], 2)
    only_algo = asyncio.run(bench_whowhen(DATA, ["graph"], subset="algo"))
    assert "by_subset" not in only_algo and only_algo["n"] == 3


def test_several_methods_side_by_side_with_cost_by_stage():
    fake = FunctionJudge(labelled)
    # graph's LLM stages (issue 6) are ablated: this fake only speaks the all-at-once format
    report = asyncio.run(bench_whowhen(DATA, ["all-at-once", "first-agent-step", "graph"], fake,
                                       ablate=["recall", "adjudicate"]))
    assert list(report) == ["all-at-once", "first-agent-step", "graph"]
    aao = report["all-at-once"]
    assert aao["model"] == fake.name and aao["calls_per_trace"] == 1.0 and aao["calls_by_stage"] == {"judge": 1.0}
    assert aao["input_tokens_per_trace"] > 0 and aao["output_tokens_per_trace"] > 0
    assert aao["coverage_at_k"] is None and aao["failed_diagnoses"] == 0
    # the labels: algo 1 (Python_Expert, 1), algo 2 (Python_Expert, 3), algo 3 (Research_Expert, 1),
    # hand 1 (WebSurfer, 6), hand 2 (Assistant, 3) — the fake finds the first two agents, never the steps after them
    assert aao["agent_accuracy"] == 60.0 and aao["step_accuracy"] == 20.0 and aao["agent_step_accuracy"] == 20.0
    assert report["first-agent-step"]["model"] is None and report["graph"]["coverage_at_k"] is not None
    assert all(two_decimals(aao[k]) for k in PERCENT_KEYS)


def test_official_substring_metric_differs_from_the_strict_one(tmp_path):
    folder = tmp_path / "Algorithm-Generated"
    folder.mkdir()
    history = [{"name": f"A{i % 2}_Expert", "role": "user", "content": f"entry {i}"} for i in range(13)]
    for n, label in ((1, "1"), (2, "3")):
        (folder / f"{n}.json").write_text(json.dumps({
            "is_correct": False, "question": "q", "question_ID": "x", "level": "1", "ground_truth": "g",
            "history": history, "mistake_agent": "A1", "mistake_step": label, "mistake_reason": "r",
            "system_prompt": {}}))
    fake = FunctionJudge(lambda m, i: {"agent_name": "A1_Expert", "step_number": 12, "reason": "r"})
    report = asyncio.run(bench_whowhen(tmp_path, ["all-at-once"], fake, subset="algo"))
    # gold "1" is a substring of "12" and "A1" of "A1_Expert": the legacy rule accepts, the strict one does not
    assert (report["step_accuracy"], report["step_accuracy_official"]) == (0.0, 50.0)
    assert (report["agent_accuracy"], report["agent_accuracy_official"]) == (0.0, 100.0)
    assert report["step_within_1"] == 0.0 and report["step_within_3"] == 0.0


def test_failed_diagnoses_are_counted_and_scored_wrong():
    fake = FunctionJudge(lambda m, i: "no idea")
    report = asyncio.run(bench_whowhen(DATA, ["all-at-once"], fake, subset="algo"))
    assert report["failed_diagnoses"] == 3 and report["agent_accuracy"] == 0.0
    assert report["calls_by_stage"] == {"judge": 3.0}  # each trace: 1 call + 2 repairs


def test_rerun_is_resumed_from_the_cache():
    fake = FunctionJudge(labelled)
    first = asyncio.run(bench_whowhen(DATA, ["all-at-once"], fake))
    assert len(fake.calls) == 5
    second = asyncio.run(bench_whowhen(DATA, ["all-at-once"], fake))
    assert len(fake.calls) == 5  # nothing new was asked
    assert second["agent_accuracy"] == first["agent_accuracy"] and second["calls_per_trace"] == 1.0


def test_bench_refuses_a_method_that_needs_a_model_before_running():
    from causaltrace.exceptions import UserError

    with pytest.raises(UserError, match="--model"):
        asyncio.run(bench_whowhen(DATA, ["graph", "step-by-step"]))


def test_with_answer_reaches_the_prompts():
    fake = FunctionJudge(labelled)
    report = asyncio.run(bench_whowhen(DATA, ["all-at-once"], fake, subset="hand", with_answer=True))
    assert report["with_answer"] is True
    assert any("The correct answer to the problem is: 9:30" in c.last for c in fake.calls)


# -------------------------------------------------------------------------------------------------------- CLI


def test_cli_bench_json_to_stdout_and_table_to_stderr(capsys):
    code, out, err = run_cli(capsys, "bench", "whowhen", "--method", "first-agent-step,graph", "--data", str(DATA),
                             "--json", "-")
    assert code == 0
    report = json.loads(out)
    assert list(report) == ["first-agent-step", "graph"] and report["graph"]["n"] == 5
    assert "first-agent-step" in err and "cov@1/3/5/10" in err


def test_cli_bench_writes_a_file_with_limit_order_and_subset(capsys, tmp_path):
    out_file = tmp_path / "bench.json"
    code, out, err = run_cli(capsys, "bench", "whowhen", "--method", "most-active-agent", "--data", str(DATA),
                             "--subset", "algo", "--limit", "2", "--order", "size", "--json", str(out_file))
    assert code == 0 and "most-active-agent" in out and f"wrote {out_file}" in err
    report = json.loads(out_file.read_text())
    assert report["n"] == 2 and report["subset"] == "algo" and "by_subset" not in report
    assert re.search(r'"agent_accuracy": \d+\.\d{1,2},', out_file.read_text())


def test_cli_bench_with_a_registered_function_model(capsys):
    fake = FunctionJudge(labelled, name="benchfake")
    register_function_model("benchfake", fake)
    code, out, _ = run_cli(capsys, "bench", "whowhen", "--method", "all-at-once", "--model", "function:benchfake",
                           "--data", str(DATA), "--with-answer", "--json", "-")
    assert code == 0 and json.loads(out)["calls_by_stage"] == {"judge": 1.0} and len(fake.calls) == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--method", "step-by-step"], "--model"),
        (["--method", "nope"], "unknown attribution method 'nope'"),
        (["--method", "graph", "--data", "/nonexistent/whowhen"], "--data"),
        (["--method", "all-at-once", "--model", "gpt-4o-mini"], "CAUSALTRACE_ALLOW_MODEL_REQUESTS=0"),
    ],
)
def test_cli_bench_user_errors(capsys, argv, message):
    code, _, err = run_cli(capsys, "bench", "whowhen", *argv) if "--data" in argv else run_cli(
        capsys, "bench", "whowhen", *argv, "--data", str(DATA))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_ablating_a_stage_removes_it_from_calls_by_stage():
    from typing import Any, ClassVar

    from causaltrace.attribution import Conclusion, DiagnosisContext, Method
    from causaltrace.attribution.judge import output_model
    from causaltrace.protocols import register_method

    Ok = output_model("Ok", ok=bool)

    class TwoStages(Method):
        name: ClassVar[str] = "two-stages"
        needs_model: ClassVar[bool] = True
        stage_ids: ClassVar[tuple[str, ...]] = ("first", "second", "offline")
        llm_stage_ids: ClassVar[tuple[str, ...]] = ("first", "second")

        async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
            for sid in ("first", "second"):
                if ctx.enabled(sid):
                    answer: Any = await ctx.ask(sid, [{"role": "user", "content": f"{sid}?"}], Ok)
                    ctx.record(sid, {"ok": answer.ok})
            return Conclusion(step_index=0)

    register_method("two-stages", TwoStages)
    fake = FunctionJudge(lambda m, i: {"ok": True})
    full = asyncio.run(bench_whowhen(DATA, ["two-stages"], fake, subset="hand"))
    assert full["calls_by_stage"] == {"first": 1.0, "second": 1.0} and full["calls_per_trace"] == 2.0
    ablated = asyncio.run(bench_whowhen(DATA, ["two-stages"], fake, subset="hand", ablate=["second"]))
    assert ablated["calls_by_stage"] == {"first": 1.0} and ablated["calls_per_trace"] == 1.0
    from causaltrace.exceptions import UserError

    with pytest.raises(UserError, match="'nope'"):
        asyncio.run(bench_whowhen(DATA, ["two-stages"], fake, ablate=["nope"]))


# ----------------------------------------------------------------------------------- held-out split (issue 20)


def test_the_split_rule_on_the_real_data(whowhen_dir):
    every = select_runs(whowhen_dir, "all")
    dev, test = select_runs(whowhen_dir, "all", split="dev"), select_runs(whowhen_dir, "all", split="test")
    dev_ids, test_ids = {r.run_id for r in dev}, {r.run_id for r in test}
    assert dev_ids.isdisjoint(test_ids) and dev_ids | test_ids == {r.run_id for r in every} and len(every) == 184
    # the rule read off the file names themselves: odd numbers are the TEST half, in both subsets
    for subset, folder in (("algo", "Algorithm-Generated"), ("hand", "Hand-Crafted")):
        numbers = [int(p.stem) for p in (whowhen_dir / folder).glob("*.json")]
        odd = sorted(n for n in numbers if n % 2 == 1)
        even = sorted(n for n in numbers if n % 2 == 0)
        assert sorted(r.annotations.extra["file_number"] for r in test
                      if r.annotations.extra["subset"] == subset) == odd
        assert all(split_of(r) == "test" for r in test) and all(split_of(r) == "dev" for r in dev)
        assert sorted(r.annotations.extra["file_number"] for r in dev
                      if r.annotations.extra["subset"] == subset) == even
        assert odd and even
    assert len(test) == 92 and len(dev) == 92  # 63 + 29 each
    assert [r.run_id for r in select_runs(whowhen_dir, "hand", split="test", limit=2)] == ["whowhen-hand-1",
                                                                                          "whowhen-hand-3"]


def test_dev_and_test_hits_add_up_to_all_with_wilson_intervals(whowhen_dir):
    reports = {s: asyncio.run(bench_whowhen(whowhen_dir, ["most-active-agent"], split=s))
               for s in ("dev", "test", "all")}
    for split, report in reports.items():
        assert report["split"] == split and report["n"] == {"dev": 92, "test": 92, "all": 184}[split]
        assert [report["by_subset"][k]["n"] for k in ("algo", "hand")] == (
            [126, 58] if split == "all" else [63, 29])
        for key in ("agent", "step"):
            hits, n = report["hits"][key], report["n"]
            assert report[f"{key}_accuracy"] == round(100 * hits / n, 2)
            low, high = report["ci95"][key]
            assert 0 <= low < report[f"{key}_accuracy"] < high <= 100
    assert "seen by earlier tuning" in reports["test"]["split_note"]
    assert "seen by earlier tuning" not in reports["dev"]["split_note"]
    for key in ("agent", "step", "agent_step"):
        assert reports["dev"]["hits"][key] + reports["test"]["hits"][key] == reports["all"]["hits"][key]
    for sub in ("algo", "hand"):
        assert (reports["dev"]["by_subset"][sub]["hits"]["step"] + reports["test"]["by_subset"][sub]["hits"]["step"]
                == reports["all"]["by_subset"][sub]["hits"]["step"])


@pytest.mark.parametrize(("hits", "n", "expected"), [
    (5, 10, (23.66, 76.34)), (0, 10, (0.0, 27.75)), (10, 10, (72.25, 100.0)), (42, 184, (17.35, 29.41)),
])
def test_wilson_interval_matches_the_published_formula(hits, n, expected):
    low, high = wilson_interval(hits, n)
    assert (round(100 * low, 2), round(100 * high, 2)) == expected
    assert wilson_interval(0, 0) is None


def test_cli_bench_split_selects_the_half_and_labels_it(capsys):
    code, out, err = run_cli(capsys, "bench", "whowhen", "--method", "first-agent-step", "--data", str(DATA),
                             "--split", "test", "--json", "-")
    report = json.loads(out)
    assert code == 0 and report["split"] == "test" and report["n"] == 3  # algo 1, 3 and hand 1 (odd numbers)
    assert "split test" in err and "seen by earlier tuning" in err
    assert re.search(r"first-agent-step · all: agent \d/3 = [\d.]+ % \[[\d.]+, [\d.]+\]", err)
    code, out, err = run_cli(capsys, "bench", "whowhen", "--method", "first-agent-step", "--data", str(DATA),
                             "--split", "dev", "--json", "-")
    assert code == 0 and json.loads(out)["n"] == 2 and "seen by earlier tuning" not in err
