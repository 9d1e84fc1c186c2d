"""``defa`` offline: call structure (SEEDS §8), the rule interpreter, segments + summaries, prompts, artifacts,
malformed answers, ablation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import causaltrace
from _method_fakes import fake, shown_steps
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.exceptions import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def hand1():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


def synthetic(tmp_path: Path, n: int, *, big: dict[int, int] | None = None):
    """An Algorithm-Generated-format log of n steps (A/B experts, a terminal after each code message)."""
    big = big or {}
    history = []
    for i in range(n):
        if i % 3 == 2:
            history.append({"name": "Computer_terminal", "role": "user", "content": f"exitcode: 0\nCode output: {i}"})
        else:
            who = "A_Expert" if i % 3 == 0 else "B_Expert"
            code = f"\n```python\nprint({i})\n```" if i % 3 == 1 else ""
            history.append({"name": who, "role": "user", "content": f"message {i} by {who}{code}" + " pad" * big.get(i, 0)})
    data = {"is_correct": False, "question": "An invented question?", "question_ID": "syn", "level": "1",
            "ground_truth": "an invented answer", "history": history, "mistake_agent": "B_Expert",
            "mistake_step": "1", "mistake_reason": "invented", "system_prompt": {}}
    path = tmp_path / "Algorithm-Generated" / f"{n}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return load_whowhen(path)


RULES = {"rules": [
    {"name": "code→terminal", "source": {"speaker": None, "content": None, "has_code": True},
     "target": {"speaker": "Computer_terminal", "content": None, "has_code": None}, "pairing": "next",
     "relation": "executes", "addressed": False, "max_gap": None},
    {"name": "instruction→reply", "source": {"speaker": r"Orchestrator \(-> .+\)", "content": None, "has_code": None},
     "target": {"speaker": None, "content": None, "has_code": None}, "pairing": "next", "relation": "saw",
     "addressed": True, "max_gap": None},
    {"name": "broken", "source": {"speaker": "([", "content": None, "has_code": None},
     "target": {"speaker": None, "content": None, "has_code": None}, "pairing": "all", "relation": "saw",
     "addressed": False, "max_gap": None},
]}

OVERRIDES = {
    "protocol_rules": RULES,
    "semantic_deps": {"edges": [{"source": 6, "target": 9, "explanation": "the blog's time reused"},
                                {"source": 9, "target": 3, "explanation": "backwards: dropped"}]},
    "recall": {"candidates": [{"step": 6, "action": "clicked a travel blog", "link": "the time is not official"},
                              {"step": 11, "action": "answered 11:00", "link": "the wrong answer"}]},
    "propagation": {"edges": [{"source": 6, "target": 11, "explanation": "the blog's time became the answer"}]},
    "adjudicate": {"step": 6, "category": "FM-2.3", "explanation": "used a blog instead of the official site"},
}


def test_defa_single_segment_call_structure_prompts_and_artifacts():
    f = fake(OVERRIDES)
    d = causaltrace.diagnose_sync(hand1(), "defa", f)
    assert not d.failed, d.failure_reason
    assert (d.decisive_step_index, d.agent, d.category, d.verified_by) == (6, "WebSurfer", "FM-2.3", "prediction")
    # one segment: rules + semantic + recall + propagation + adjudicate; nothing oversize, no summaries
    assert d.cost.calls_by_stage == {"protocol_rules": 1, "semantic_deps": 1, "recall": 1, "propagation": 1,
                                     "adjudicate": 1}
    by = {c.stage_id: c for c in f.calls}
    assert "'Orchestrator (-> WebSurfer)': 3 step(s)" in by["protocol_rules"].last
    assert "'lifo'" in by["protocol_rules"].last and "'fifo'" in by["protocol_rules"].last
    assert "- step 5 → step 6 (protocol:saw): instruction→reply" in by["semantic_deps"].last
    assert shown_steps(by["recall"].last) == list(range(13))
    assert "- step 6: clicked a travel blog — the time is not official" in by["propagation"].last
    assert by["adjudicate"].schema["properties"]["step"]["enum"] == [6, 11]  # t̂ ∈ V_f
    assert "9:30" not in "".join(c.last for c in f.calls)  # no ground truth unless with_answer
    art = d.artifacts
    rules = art["protocol_rules"]
    assert [r["name"] for r in rules["rules"]] == ["code→terminal", "instruction→reply"]
    assert rules["rejected"][0]["rule"]["name"] == "broken"
    assert [2, 3, "saw", "instruction→reply"] in rules["pairings"] and [8, 9, "saw", "instruction→reply"] in rules["pairings"]
    assert len(art["segments"]["segments"]) == 1 and art["summarise"] == {}
    assert art["semantic_deps"]["edges"][0]["source"] == 6 and art["semantic_deps"]["dropped"][0]["source"] == 9
    assert [c["step"] for c in art["recall"]["candidates"]] == [6, 11]
    assert art["propagation"]["V_f"] == [6, 11] and art["adjudicate"]["category"] == "FM-2.3"
    assert [c.index for c in d.candidates] == [6, 11]
    assert [e.index for e in d.evidence] == [6, 11]


def test_defa_segments_summaries_and_oversize_steps(tmp_path):
    run = synthetic(tmp_path, 40, big={4: 3000})  # step 4 ≈ 12k characters: oversize for a 16k window
    f = fake({"summarise": {"summary": "S"}, "protocol_rules": RULES}, context_window=16_000)
    d = causaltrace.diagnose_sync(run, "defa", f, max_segment_steps=10)
    assert not d.failed, d.failure_reason
    m = len(d.artifacts["segments"]["segments"])
    assert m >= 4
    calls = d.cost.calls_by_stage
    assert calls == {"normalise": 1, "protocol_rules": 1, "summarise": m, "semantic_deps": m, "recall": m,
                     "propagation": m, "adjudicate": 1}
    assert list(d.artifacts["normalise"]["compressed_steps"]) == ["4"]
    assert max(c.input_tokens for c in f.calls) <= 16_000
    # V_j: summaries of both earlier and later segments around the segment in full
    second = [c for c in f.calls if c.stage_id == "recall"][1]
    assert "Summaries of the earlier segments:\nSegment 0 (steps 0–" in second.last
    assert "Summaries of the later segments:" in second.last
    seg1 = d.artifacts["segments"]["segments"][1]
    assert shown_steps(second.last) == list(range(seg1["start"], seg1["end"] + 1))
    # code → terminal pairs stay in one segment (DeFA §3.4)
    for seg in d.artifacts["segments"]["segments"]:
        assert seg["start"] % 3 != 2


@pytest.mark.parametrize("stage", ["protocol_rules", "semantic_deps", "recall", "propagation", "adjudicate"])
def test_defa_malformed_answer_at_any_stage_is_a_failed_diagnosis(stage):
    f = fake({**OVERRIDES, stage: lambda info, gen: "Sorry, I cannot answer that."})
    d = causaltrace.diagnose_sync(hand1(), "defa", f)
    assert d.failed and stage in (d.failure_reason or "")


@pytest.mark.parametrize("stage", ["normalise", "summarise"])
def test_defa_malformed_answer_in_the_long_trace_stages(tmp_path, stage):
    run = synthetic(tmp_path, 40, big={4: 3000})
    f = fake({stage: lambda info, gen: "[unclosed"}, context_window=16_000)
    d = causaltrace.diagnose_sync(run, "defa", f, max_segment_steps=10)
    assert d.failed and stage in (d.failure_reason or "")


@pytest.mark.parametrize("stage", ["protocol_rules", "semantic_deps", "recall", "propagation", "adjudicate",
                                   "summarise", "normalise"])
def test_defa_ablate_removes_the_stage(tmp_path, stage):
    run = synthetic(tmp_path, 40, big={4: 3000})
    d = causaltrace.diagnose_sync(run, "defa", fake(context_window=16_000), max_segment_steps=10, ablate=[stage])
    assert not d.failed, d.failure_reason
    assert stage not in d.cost.calls_by_stage and d.artifacts[stage] == {"ablated": True}


def test_defa_needs_a_model():
    with pytest.raises(UserError, match="--model"):
        causaltrace.diagnose_sync(hand1(), "defa")
