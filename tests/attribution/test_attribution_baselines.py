"""The Who&When baselines on synthetic logs: the prompts actually sent, call structure, malformed answers."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import causaltrace
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.exceptions import UserError
from causaltrace.testing.judges import FunctionJudge

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def algo(n: int = 1):
    return load_whowhen(FIXTURES / "Algorithm-Generated" / f"{n}.json")


def synthetic(tmp_path: Path, n: int, *, big: dict[int, int] | None = None):
    """A Who&When-format Algorithm-Generated log of n steps (agents A/B/C in turn), loaded by the real importer."""
    big = big or {}
    history = [{"name": "ABC"[i % 3] + "_Expert", "role": "user",
                "content": f"message {i} from agent {'ABC'[i % 3]}" + (" filler" * big.get(i, 0))} for i in range(n)]
    data = {"is_correct": False, "question": "An invented question?", "question_ID": "syn", "level": "1",
            "ground_truth": "an invented answer", "history": history, "mistake_agent": "B_Expert",
            "mistake_step": "1", "mistake_reason": "invented", "system_prompt": {}}
    path = tmp_path / "Algorithm-Generated" / f"{n}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return load_whowhen(path)


def diagnose(run, method, model, **kw):
    return causaltrace.diagnose_sync(run, method, model, **kw)


# ------------------------------------------------------------------------------------------------ all-at-once


def test_all_at_once_prompt_without_and_with_the_answer():
    run = algo(1)
    fake = FunctionJudge(lambda m, i: {"agent_name": "Python_Expert", "step_number": 1, "reason": "drops 80"})
    d = diagnose(run, "all-at-once", fake)
    assert (d.decisive_step_index, d.agent, d.verified_by, d.failed) == (1, "Python_Expert", "prediction", False)
    assert d.cost.calls_by_stage == {"judge": 1} and d.cost.llm_calls == 1 and d.model == fake.name
    prompt = fake.calls[0].last
    assert fake.calls[0].stage_id == "judge" and fake.calls[0].messages[0]["role"] == "system"
    assert "The problem: What is the total of the invented invoice amounts 120, 45 and 80?" in prompt
    assert "245" not in prompt and "correct answer" not in prompt
    # one entry per line, `speaker: content`, no step numbers
    assert "\nPython_Expert: I will sum the amounts:" in prompt and "Computer_terminal: exitcode: 0" in prompt
    assert "Step 1 -" not in prompt
    assert "step number is 2" in prompt or "is step 2" in prompt  # the worked 0-based example
    schema = fake.calls[0].schema
    assert schema["properties"]["step_number"]["maximum"] == 4
    assert schema["properties"]["agent_name"]["enum"] == ["Planner_Expert", "Python_Expert", "Computer_terminal",
                                                          "Verification_Expert"]
    d2 = diagnose(run, "all-at-once", fake, with_answer=True)
    assert "The correct answer to the problem is: 245\n" in fake.calls[1].last
    assert d2.artifacts["settings"]["with_answer"] is True and d2.artifacts["judge"]["step"] == 1


def test_all_at_once_accepts_the_benchmark_text_format():
    fake = FunctionJudge(lambda m, i: "Agent Name: Python_Expert\nStep Number: 1\nReason for Mistake: drops 80.")
    d = diagnose(algo(1), "all-at-once", fake)
    assert (d.decisive_step_index, d.agent) == (1, "Python_Expert") and d.explanation == "drops 80."


@pytest.mark.parametrize(
    ("replies", "calls", "failed"),
    [
        (["complete garbage, no json"], 3, True),
        (['```json\n{"agent_name": "Python_Expert", "step_number": 3, "reason": "r"}\n```'], 1, False),
        (['{"agent_name": "Python_Expert", "step_number": 3, "reason": "trunc'], 1, False),
        (['{"agent_name": "Python_Expert", "step_number": 99, "reason": "r"}',
          '{"agent_name": "Python_Expert", "step_number": 3, "reason": "r"}'], 2, False),
        (['{"agent_name": "Python_Expert", "step_number": 99, "reason": "r"}'], 3, True),
        (['{"agent_name": "Invented_Agent", "step_number": 3, "reason": "r"}'], 3, True),
    ],
    ids=["garbage", "fenced", "truncated", "out-of-range-then-fixed", "out-of-range", "unknown-agent"],
)
def test_malformed_answers_are_repaired_or_fail_the_diagnosis(replies, calls, failed):
    it = iter(replies)
    last = [replies[-1]]

    def answer(messages, info):
        last[0] = next(it, last[0])
        return last[0]

    fake = FunctionJudge(answer)
    d = diagnose(algo(1), "all-at-once", fake)
    assert len(fake.calls) == calls and d.cost.calls_by_stage == {"judge": calls}
    assert d.failed is failed
    if failed:
        assert d.decisive_step_index is None and d.agent is None and d.candidates == ()
        assert "JudgeOutputInvalid" in d.failure_reason and d.artifacts["failure"]["body"]
    else:
        assert d.decisive_step_index == 3


def test_a_method_that_needs_a_model_names_the_option():
    with pytest.raises(UserError, match="--model"):
        diagnose(algo(1), "all-at-once", None)


def test_with_answer_needs_a_ground_truth(tmp_path):
    run = algo(1)
    bare = run.model_copy(update={"annotations": None})
    with pytest.raises(UserError, match="ground-truth"):
        diagnose(bare, "all-at-once", FunctionJudge(lambda m, i: "{}"), with_answer=True)


def test_an_oversize_log_is_compressed_to_fit_the_window(tmp_path):
    run = synthetic(tmp_path, 6, big={2: 4000})  # step 2 ≈ 28k characters ≈ 7k tokens
    fake = FunctionJudge(lambda m, i: {"agent_name": "B_Expert", "step_number": 1, "reason": "r"},
                         context_window=3000)
    d = diagnose(run, "all-at-once", fake)
    assert not d.failed and all(c.input_tokens <= 3000 for c in fake.calls)
    compressed = d.artifacts["judge"]["compressed_steps"]
    assert list(compressed) == ["2"] and compressed["2"]["tokens_after"] < compressed["2"]["tokens_before"]
    assert "characters elided" in fake.calls[0].last and "message 5 from agent C" in fake.calls[0].last


# ----------------------------------------------------------------------------------------------- step-by-step


@pytest.mark.parametrize("flag_at", [0, 3, 6])
def test_step_by_step_calls_until_the_first_yes(tmp_path, flag_at):
    run = synthetic(tmp_path, 7)
    fake = FunctionJudge(lambda m, i: {"error": "Yes" if f"step {flag_at}," in i.last else "No", "reason": "why"})
    d = diagnose(run, "step-by-step", fake)
    assert d.cost.calls_by_stage == {"step_check": flag_at + 1} and len(fake.calls) == flag_at + 1
    assert d.decisive_step_index == flag_at and d.agent == "ABC"[flag_at % 3] + "_Expert"
    for k, call in enumerate(fake.calls):  # the prefix grows one numbered step per call
        assert f"Step {k} - {'ABC'[k % 3]}_Expert: message {k}" in call.last
        assert f"Step {k + 1} -" not in call.last
        assert f"The most recent step is step {k}, by '{'ABC'[k % 3]}_Expert'." in call.last
        assert "overly critical" in call.last and "invented answer" not in call.last
    assert d.artifacts["step_check"]["flagged"] == flag_at


def test_step_by_step_with_answer_and_text_format(tmp_path):
    run = synthetic(tmp_path, 4)
    fake = FunctionJudge(lambda m, i: "1. Yes.\n2. Reason: wrong" if i.number == 2 else "1. No.\n2. Reason: fine")
    d = diagnose(run, "step-by-step", fake, with_answer=True)
    assert d.decisive_step_index == 2 and "The correct answer to the problem is: an invented answer" in fake.calls[0].last


def test_step_by_step_without_any_yes_is_a_failed_diagnosis(tmp_path):
    run = synthetic(tmp_path, 5)
    replies = ["1. No", "nonsense", "nonsense", "nonsense", "1. No", "1. No", "1. No"]
    fake = FunctionJudge(lambda m, i: replies[i.number] if i.number < len(replies) else "1. No")
    d = diagnose(run, "step-by-step", fake)
    assert d.failed and "no step was flagged" in d.failure_reason and "1 answer(s) could not be parsed" in d.failure_reason
    checked = d.artifacts["step_check"]["checked"]
    assert [c["verdict"] for c in checked] == ["No", None, "No", "No", "No"]
    assert d.cost.calls_by_stage == {"step_check": 7}  # one unparsed step: 1 + 2 repairs


# ---------------------------------------------------------------------------------------------- binary-search


@pytest.mark.parametrize("n", [2, 5, 7, 8, 13, 16])
@pytest.mark.parametrize("pattern", ["upper", "lower", "alternate"])
def test_binary_search_halves_log2_n_times(tmp_path, n, pattern):
    run = synthetic(tmp_path, n)

    def answer(messages, info):
        half = pattern if pattern != "alternate" else ("upper" if info.number % 2 == 0 else "lower")
        return {"half": half, "reason": "because"}

    fake = FunctionJudge(answer)
    d = diagnose(run, "binary-search", fake)
    calls = d.cost.calls_by_stage["halve"]
    assert math.floor(math.log2(n)) <= calls <= math.ceil(math.log2(n))
    if pattern == "upper":
        assert d.decisive_step_index == 0
    if pattern == "lower":
        assert d.decisive_step_index == n - 1
    first = fake.calls[0].last
    mid = (n - 1) // 2
    assert f"from step 0 to step {n - 1}:" in first
    assert f"upper half (from step 0 to step {mid})" in first and f"lower half (from step {mid + 1} to step {n - 1})" in first
    assert "Step 0 -" not in first and "A_Expert: message 0" in first
    ranges = d.artifacts["halve"]["ranges"]
    assert len(ranges) == calls and d.artifacts["halve"]["result"] == d.decisive_step_index


def test_binary_search_segment_shows_only_its_range(tmp_path):
    run = synthetic(tmp_path, 8)
    fake = FunctionJudge(lambda m, i: "I'd say the lower half." if i.number == 0 else "upper half")
    d = diagnose(run, "binary-search", fake)
    assert d.decisive_step_index == 4
    second = fake.calls[1].last
    assert "message 3 " not in second and "message 4 from" in second and "message 7 from" in second


def test_binary_search_garbage_fails_unless_random_is_asked_for(tmp_path):
    run = synthetic(tmp_path, 8)
    fake = FunctionJudge(lambda m, i: "hmm, hard to say")
    d = diagnose(run, "binary-search", fake)
    assert d.failed and "JudgeOutputInvalid" in d.failure_reason
    a = diagnose(run, "binary-search", FunctionJudge(lambda m, i: "hmm", name="r1"), on_ambiguous="random", seed=7)
    b = diagnose(run, "binary-search", FunctionJudge(lambda m, i: "hmm", name="r2"), on_ambiguous="random", seed=7)
    assert not a.failed and a.decisive_step_index == b.decisive_step_index
    assert all("random" in r["reason"] for r in a.artifacts["halve"]["ranges"])
    with pytest.raises(UserError, match="on_ambiguous"):
        diagnose(run, "binary-search", fake, on_ambiguous="coin")


def test_no_prompt_contains_an_unfilled_placeholder(tmp_path):
    run = synthetic(tmp_path, 4)
    fake = FunctionJudge(lambda m, i: {"error": "No", "reason": "r"} if i.stage_id == "step_check" else
                         {"half": "upper", "reason": "r"} if i.stage_id == "halve" else
                         {"agent_name": "A_Expert", "step_number": 0, "reason": "r"})
    for method in ("all-at-once", "step-by-step", "binary-search"):
        diagnose(run, method, fake, with_answer=True)
    for call in fake.calls:
        assert not re.search(r"\{[a-z_]+\}", call.prompt), call.prompt
