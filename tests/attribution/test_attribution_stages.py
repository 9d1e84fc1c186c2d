"""The shared deterministic stages: protocol rules and pairing modes, dependency graphs (recovered and explicit),
failure anchor, error signals, loops, backward relevance, segmentation and compression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import causaltrace
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.attribution.stages import (
    CONVERSATION_RULES,
    ProtocolRule,
    StepMatch,
    backward_relevance,
    build_dependency_graph,
    categorise_error,
    compress_text,
    detect_error_signals,
    detect_loops,
    find_failure_anchor,
    fit_texts,
    interpret_rules,
    plan_segments,
    step_line,
)
from causaltrace.attribution.stages.segment import ELISION
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.schema import Outcome, Run, Step
from causaltrace.testing.judges import FunctionJudge

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_run.otlp.jsonl"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def fixture(subset: str, n: int) -> Run:
    return load_whowhen(FIXTURES / {"algo": "Algorithm-Generated", "hand": "Hand-Crafted"}[subset] / f"{n}.json")


def chars4(text: str) -> int:
    return -(-len(text) // 4)


def make_run(speakers: list[str]) -> Run:
    """Messages as an importer maps them: ``"X (-> Y)"`` is X's message addressed to Y (``outputs["target"]``)."""
    steps = [Step(step_id=f"s{i}", run_id="r", index=i, kind="message", agent=who.split(" (")[0], content=f"{who} {i}",
                  outputs={"target": who.split("(-> ", 1)[1].rstrip(")")} if "(-> " in who else {},
                  metadata={"speaker": who}) for i, who in enumerate(speakers)]
    return Run(run_id="r", steps=tuple(steps), outcome=Outcome(status="failure"))


# ------------------------------------------------------------------------------------------------ dependencies


@pytest.mark.parametrize(
    ("pairing", "expected"),
    [
        ("next", [(0, 2), (1, 2), (3, 4)]),
        ("all", [(0, 2), (1, 2), (0, 4), (1, 4), (3, 4)]),
        ("fifo", [(0, 2), (1, 4)]),
        ("lifo", [(1, 2), (3, 4)]),
    ],
)
def test_pairing_modes(pairing, expected):
    run = make_run(["Req", "Req", "Res", "Req", "Res"])
    rule = ProtocolRule(name="r", source=StepMatch(agent="Req"), target=StepMatch(agent="Res"), pairing=pairing,
                        kind="tool_result_of")
    edges = interpret_rules(run.steps, [rule])
    assert sorted((e.producer, e.consumer) for e in edges) == sorted(expected)
    assert all(e.kind == "tool_result_of" and e.rule == "r" for e in edges)


def test_addressed_rules_and_gaps():
    run = make_run(["Boss (-> A)", "B", "A", "Boss (-> B)", "C", "C", "B"])
    rule = ProtocolRule(name="instr", source=StepMatch(instruction=True), target=StepMatch(), addressed=True)
    assert [(e.producer, e.consumer) for e in interpret_rules(run.steps, [rule])] == [(0, 2), (3, 6)]
    by_label = ProtocolRule(name="instr", source=StepMatch(speaker=r".+ \(-> .+\)"), target=StepMatch(),
                            addressed=True)  # a DeFA-induced rule may match the log's labels; the addressee is a value
    assert interpret_rules(run.steps, [by_label]) == interpret_rules(run.steps, [rule])
    gap = ProtocolRule(name="instr", source=StepMatch(instruction=True), target=StepMatch(), addressed=True,
                       max_gap=2)
    assert [(e.producer, e.consumer) for e in interpret_rules(run.steps, [gap])] == [(0, 2)]


def test_rules_round_trip_as_json():
    for rule in CONVERSATION_RULES:
        assert ProtocolRule.from_json(json.loads(json.dumps(rule.to_json()))) == rule
    with pytest.raises(ValueError):
        ProtocolRule(name="bad", source=StepMatch(), target=StepMatch(), kind="caused")


def test_recovered_protocol_relations_on_whowhen_logs():
    g = build_dependency_graph(fixture("algo", 2))
    assert g.source == "recovered"
    special = {(e.producer, e.consumer, e.kind, e.rule) for e in g.edges if e.rule != "previous message"}
    assert special == {(1, 2, "executes", "code→execution"), (3, 4, "executes", "code→execution")}
    assert {(e.producer, e.consumer) for e in g.edges if e.rule == "previous message"} == {(i, i + 1) for i in range(6)}
    h = build_dependency_graph(fixture("hand", 2))
    special = {(e.producer, e.consumer, e.rule) for e in h.edges if e.rule != "previous message"}
    assert special == {(1, 2, "thought→instruction"), (2, 3, "instruction→reply"), (3, 5, "code→execution"),
                       (4, 5, "instruction→reply")}
    assert h.ancestors(7) == set(range(7)) and h.producers(5, ["executes"]) == [3]
    assert h.to_json()["rules"][0]["name"] == "code→execution"


def test_explicit_dependencies_of_a_live_run_are_used_as_recorded():
    run = load_otlp_json(SAMPLE)[0]
    g = build_dependency_graph(run)
    assert g.source == "explicit" and all(e.rule == "explicit" for e in g.edges)
    assert (6, 8, "tool_result_of") in {(e.producer, e.consumer, e.kind) for e in g.edges}
    assert len(g.edges) == sum(len(s.depends_on) for s in run.steps)


# ------------------------------------------------------------------------------------------ anchor and signals


def test_failure_anchor_rules():
    assert find_failure_anchor(fixture("hand", 1)).index == 12
    algo1 = find_failure_anchor(fixture("algo", 1))  # the trailing bare TERMINATE is skipped
    assert (algo1.index, algo1.rule) == (3, "latest substantive step")
    live = find_failure_anchor(load_otlp_json(SAMPLE)[0])
    assert (live.index, live.rule, live.symptom) == (15, "final answer", "final answer does not contain '55'")


def test_failure_anchor_skips_a_repeated_standard_reply():
    """A code executor's "no code to execute", sent each time it has nothing to run, says nothing about the answer:
    the anchor is the answer before it (Who&When dev algo-46 / 52 / 102 anchored on that reply before)."""
    boilerplate = "There is no code from the last 1 message for me to execute. Let other participants continue."
    texts = ["Task: how many vampires live in the village? Plan: analyse the statements.",
             "Analysis: every resident told the truth, so all are humans and zero are vampires.",
             boilerplate, "I agree with the analysis: the number of vampires is confirmed to be zero.", boilerplate,
             "TERMINATE"]
    steps = tuple(Step(step_id=f"s{i}", run_id="r", index=i, kind="tool_response" if t == boilerplate else "message",
                       agent="Computer_terminal" if t == boilerplate else f"expert{i % 2}", content=t)
                  for i, t in enumerate(texts))
    anchor = find_failure_anchor(Run(run_id="r", steps=steps, outcome=Outcome(status="failure")))
    assert (anchor.index, anchor.rule) == (3, "latest substantive step")
    once = Run(run_id="r", steps=steps[:3] + steps[5:], outcome=Outcome(status="failure"))  # said once: it counts
    assert find_failure_anchor(once).index == 2


def test_error_signals_name_the_introducer_and_recovery():
    run = fixture("algo", 2)
    [sig] = detect_error_signals(run, build_dependency_graph(run))
    assert (sig.index, sig.introduced_by, sig.source, sig.recovered, sig.category) == (2, 1, "text", True, None)
    assert "NameError" in sig.message
    live = load_otlp_json(SAMPLE)[0]
    [tool] = detect_error_signals(live, build_dependency_graph(live))
    assert (tool.index, tool.introduced_by, tool.source, tool.category) == (9, 7, "status", "SYS-TIMEOUT")


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("HTTP 429 Too Many Requests", "SYS-RATE-LIMIT"),
        ("403 Forbidden", "SYS-AUTH"),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'x.csv'", "SYS-NOT-FOUND"),
        ("503 Service Unavailable", "SYS-SERVICE"),
        ("the request timed out after 30 s", "SYS-TIMEOUT"),
        ("MemoryError", "SYS-RESOURCE"),
        ("ModuleNotFoundError: No module named 'pandas'", "SYS-ENVIRONMENT"),
        ("TypeError: search() got an unexpected keyword argument 'q'", "SYS-TOOL-DEFINITION"),
        ("NameError: name 'x' is not defined", None),
    ],
)
def test_error_categories(text, category):
    assert categorise_error(text) == category


def test_loops_action_and_instruction():
    loops = detect_loops(fixture("hand", 1))
    by_kind = {lp.kind: lp for lp in loops}
    assert by_kind["action"].members == [6, 9] and by_kind["action"].agent == "WebSurfer"
    instr = by_kind["instruction"]
    assert (instr.members, instr.addressee, instr.replies) == ([2, 5, 8], "WebSurfer", [3, 6, 9])
    assert detect_loops(fixture("algo", 1)) == []
    assert detect_loops(load_otlp_json(SAMPLE)[0]) == []  # an llm_response and its message are one action


def test_backward_relevance_follows_information_to_its_introducer():
    run = fixture("algo", 1)
    g = build_dependency_graph(run)
    anchor = find_failure_anchor(run)
    rel = backward_relevance(run, g, anchor.index)
    # "165" came out of the terminal (step 2), whose output is the code's (step 1) responsibility
    assert rel.scores[2] > 0 and rel.scores[1] > 0 and "165" in rel.carried[2]
    assert rel.path(1) == [1, 2, 3]
    assert rel.to_json()["anchor"] == 3


def test_words_of_a_step_that_quotes_the_task_carry_less_relevance():
    # the first agent quotes the task and a plan; a later analyst states the decisive count; both share words with
    # the failing answer, but the quoting step's words are mostly the prompt it was given
    task = "How many stops are between South Station and Windsor Gardens on the Franklin line?"
    steps = [Step(step_id="s0", run_id="r", index=0, kind="message", agent="Planner",
                  content=f"# Task {task} # Plan verify stations carefully, count stops accurately"),
             Step(step_id="s1", run_id="r", index=1, kind="message", agent="Analyst",
                  content="Counting stations carefully: there are 12 stops between them."),
             Step(step_id="s2", run_id="r", index=2, kind="message", agent="Checker",
                  content="Verified carefully: 12 stops between the stations, counted accurately.")]
    run = Run(run_id="r", task=task, steps=tuple(steps), outcome=Outcome(status="failure"))
    g = build_dependency_graph(run)
    quoted = backward_relevance(run, g, 2)
    plain = backward_relevance(run, g, 2, task_restatement=1.0)
    assert quoted.scores[1] == 1.0 and quoted.scores[0] < plain.scores[0] / plain.scores[1]


# ----------------------------------------------------------------------------------- segmentation, compression


def test_compress_text_keeps_head_and_tail():
    text = "HEAD " + "x" * 10_000 + " TAIL"
    out = compress_text(text, 200, chars4)
    assert chars4(out) <= 200 and out.startswith("HEAD") and out.endswith("TAIL") and "characters elided" in out
    assert compress_text("short", 200, chars4) == "short"


def test_plan_segments_respects_the_budget_and_keeps_pairs_together():
    steps = [Step(step_id=f"s{i}", run_id="r", index=i, kind="message", agent="a", content="y" * 360)
             for i in range(10)]
    plan = plan_segments(steps, budget_tokens=300, count=chars4)
    assert [s.steps for s in plan.segments] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert all(s.tokens <= 300 for s in plan.segments) and not plan.compressed
    kept = plan_segments(steps, budget_tokens=300, count=chars4, keep_together=[(2, 3)])
    assert [s.steps for s in kept.segments][:2] == [[0, 1], [2, 3, 4]]
    huge = [*steps[:2], Step(step_id="big", run_id="r", index=2, kind="message", agent="a", content="z" * 5000)]
    squeezed = plan_segments(huge, budget_tokens=300, count=chars4)
    assert list(squeezed.compressed) == [2] and squeezed.compressed[2][1] <= 150
    assert all(s.tokens <= 300 for s in squeezed.segments)
    assert squeezed.to_json()["compressed_steps"]["2"]["tokens_before"] > 1000


def test_fit_texts_compresses_the_longest_steps_only():
    steps = [Step(step_id=f"s{i}", run_id="r", index=i, kind="message", agent="a",
                  content=("w" * 8000) if i == 3 else "small") for i in range(6)]
    texts, compressed = fit_texts(steps, budget_tokens=800, count=chars4, render=step_line, overhead_tokens=100)
    assert list(compressed) == [3] and sum(chars4(step_line(s, texts[s.index])) for s in steps) <= 700
    assert texts[0] == "small" and ELISION.split("{")[0].strip() in texts[3]
    with pytest.raises(causaltrace.CausaltraceError, match="does not fit"):
        fit_texts(steps, budget_tokens=60, count=chars4, render=step_line)


def test_longest_whowhen_trace_segments_within_a_16k_window(whowhen_dir):
    """Hand-Crafted/30.json (121 steps, two ~88k-character steps) under a 16k-token window (characters / 4)."""
    run = load_whowhen(whowhen_dir / "Hand-Crafted" / "30.json")
    budget = 16_000 // 4  # SEEDS §7.4: a segment ≤ 25% of the window
    plan = plan_segments([s for s in run.steps], budget_tokens=budget, count=chars4)
    assert {24, 28} <= set(plan.compressed)
    assert all(s.tokens <= budget for s in plan.segments)
    covered = [i for s in plan.segments for i in s.steps]
    assert covered == [s.index for s in run.steps]
    # the whole-trace baseline fits the same window after compression, and no call exceeds it
    fake = FunctionJudge(lambda m, i: {"agent_name": "WebSurfer", "step_number": 24, "reason": "r"},
                         context_window=16_000)
    d = causaltrace.diagnose_sync(run, "all-at-once", fake)
    assert not d.failed and all(c.input_tokens <= 16_000 for c in fake.calls)
    assert {"24", "28"} <= set(d.artifacts["judge"]["compressed_steps"])
