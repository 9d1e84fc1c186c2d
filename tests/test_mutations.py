"""Deterministic correction proposals (ARCHITECTURE decision 9) and CausalFlow's minimality measures."""

from __future__ import annotations

import pytest

from causaltrace.replay.minimality import edit_distance_minimality, positional_minimality
from causaltrace.replay.mutations import propose_mutations
from causaltrace.schema import Run, Step


def _run(*steps: Step, agents=("planner", "solver", "reviewer")) -> Run:
    task = Step(step_id="r/0", run_id="r", index=0, kind="task", content="Sum the numbers 1 to 10 for Alice Smith")
    return Run(run_id="r", steps=(task, *steps), agents=agents)


def test_positional_minimality_is_causalflow_eq2():
    assert positional_minimality("a b c", "a b c") == 1.0
    assert positional_minimality("", "") == 1.0 and positional_minimality("", "x") == 0.0
    # 2 of 3 tokens equal, same length: 2/3
    assert positional_minimality("add 1 10", "add 1 11") == pytest.approx(2 / 3)
    # lengths 2 and 3: m=2, L=3 -> (2/3) * (1 - 0.5 * 1/3)
    assert positional_minimality("a b", "a b c") == pytest.approx((2 / 3) * (1 - 0.5 / 3))
    assert edit_distance_minimality("a b c d", "a x c d") == pytest.approx(0.75)
    assert edit_distance_minimality("a b c d", "a b c d e") == pytest.approx(0.8)


def test_tool_argument_proposals_include_off_by_one_fix_and_swaps():
    call = Step(step_id="r/1", run_id="r", index=1, kind="tool_call", tool_name="add_range",
                arguments={"start": 1, "stop": 10})
    proposals = propose_mutations(call, _run(call), limit=50)
    replacements = [p.replacement for p in proposals]
    assert {"start": 1, "stop": 11} in replacements
    assert {"start": 10, "stop": 1} in replacements  # swapped
    assert all(p.source == "mutation" and p.step_id == "r/1" for p in proposals)
    assert len({repr(r) for r in replacements}) == len(replacements)


def test_code_boundary_and_operator_proposals():
    code = "total = 0\nfor i in range(1, n):\n    if i < limit:\n        total += i\nfinal_answer(total)\n"
    step = Step(step_id="r/1", run_id="r", index=1, kind="code_execution", inputs={"code": code})
    replacements = [p.replacement for p in propose_mutations(step, _run(step), limit=100)]
    assert code.replace("range(1, n)", "range(1, n + 1)") in replacements
    assert code.replace("i < limit", "i <= limit") in replacements
    assert code.replace("total = 0", "total = 1") in replacements
    for new in replacements:
        compile(new, "<proposal>", "exec")  # every proposal is still valid Python


def test_message_text_uses_values_seen_earlier_and_handoff_targets():
    msg = Step(step_id="r/1", run_id="r", index=1, kind="message", agent="planner",
               content="Sum the numbers 1 to 9 for Bob")
    replacements = [p.replacement for p in propose_mutations(msg, _run(msg), limit=200)]
    assert "Sum the numbers 1 to 10 for Bob" in replacements  # 9 -> 10 (also seen earlier)
    assert any("Alice Smith" in r for r in replacements)
    handoff = Step(step_id="r/1", run_id="r", index=1, kind="handoff", agent="planner", outputs={"target": "solver"})
    # never to itself; the targets the adapter recorded as allowed come first
    assert [p.replacement for p in propose_mutations(handoff, _run(handoff))] == ["reviewer"]
    allowed = handoff.model_copy(update={"metadata": {"candidates": ["billing", "solver", "planner"]}})
    assert [p.replacement for p in propose_mutations(allowed, _run(allowed))] == ["billing"]


def test_ranked_by_minimality_and_limited():
    call = Step(step_id="r/1", run_id="r", index=1, kind="tool_call", tool_name="f",
                arguments={"a": 1, "b": 2, "c": 3})
    proposals = propose_mutations(call, _run(call), limit=4)
    assert len(proposals) == 4
    scores = [positional_minimality(call.arguments, p.replacement) for p in proposals]
    assert scores == sorted(scores, reverse=True)
