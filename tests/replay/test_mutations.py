"""Deterministic correction proposals (ARCHITECTURE decision 9) and CausalFlow's minimality measures."""

from __future__ import annotations

import re

import pytest

from causaltrace.replay.minimality import edit_distance_minimality, positional_minimality
from causaltrace.replay.mutations import propose_mutations
from causaltrace.schema import Dependency, Run, Step


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


# ------------------------------------------------------------------ numbers and words users write (issue 19)


def test_numbers_are_found_where_a_reader_sees_them():
    from causaltrace.replay.text_values import numbers_in

    def raws(text):
        return [n.raw for n in numbers_in(text)]

    assert raws("The price is 21.") == ["21"]
    assert raws("Total (21) items, $12.50 each, 1,234 units, 12kg and 3 km.") == ["21", "12.50", "1,234", "12", "3"]
    assert raws("version v1.2, x2, the 3rd and 2nd place") == []
    assert raws("3,4 and -5 and 10-2") == ["3", "4", "-5", "10", "2"]
    assert [n.value for n in numbers_in("1,234.5 and 007")] == [1234.5, 7]


def test_numbers_are_written_back_in_their_own_shape():
    from causaltrace.replay.text_values import format_like

    assert format_like("12.50", 13.5) == "13.50"
    assert format_like("1,234", 1235) == "1,235"
    assert format_like("007", 8) == "008"
    assert format_like("21", 22) == "22"
    assert format_like("2.5", 2.75) == "2.75"


def test_sentence_final_number_in_a_message_is_proposed():
    msg = Step(step_id="r/1", run_id="r", index=1, kind="message", agent="solver", content="The price is 21.")
    assert "The price is 22." in [p.replacement for p in propose_mutations(msg, _run(msg))]


def test_copy_typo_in_a_tool_argument_is_fixed_by_the_value_the_task_gave_first():
    task = Step(step_id="r/0", run_id="r", index=0, kind="task", content="Three tickets at $12.50 each: the total?")
    call = Step(step_id="r/1", run_id="r", index=1, kind="tool_call", agent="solver", tool_name="multiply",
                arguments={"a": 3, "b": 12.05})
    run = Run(run_id="r", task=task.content, steps=(task, call), agents=("solver",))
    replacements = [p.replacement for p in propose_mutations(call, run)]
    assert {"a": 3, "b": 12.5} in replacements
    # the copy of the task's value is tried before any ±1 / ±10 % nudge of that argument
    first_b = next(r for r in replacements if r["a"] == 3 and r["b"] != 12.05)
    assert first_b == {"a": 3, "b": 12.5}


def test_a_number_inside_a_string_literal_of_code_is_proposed():
    task = Step(step_id="r/0", run_id="r", index=0, kind="task", content="Convert 10 km to miles")
    code = "r = helper(task='Convert 9 km to miles')\nfinal_answer(r)\n"
    step = Step(step_id="r/1", run_id="r", index=1, kind="tool_call", agent="manager", tool_name="python_interpreter",
                arguments={"code": code})
    run = Run(run_id="r", task=task.content, steps=(task, step), agents=("manager", "helper"))
    replacements = [p.replacement for p in propose_mutations(step, run)]
    assert code.replace("9 km", "10 km") in replacements
    for new in replacements:
        compile(new, "<proposal>", "exec")


def test_typed_words_are_swapped_for_same_type_words_the_run_used():
    task = Step(step_id="r/0", run_id="r", index=0, kind="task",
                content="Report the gross weight in kilograms of the Monday shipment from Paris.")
    plan = Step(step_id="r/1", run_id="r", index=1, kind="message", agent="planner",
                content="Look up the net weight in pounds of the Tuesday shipment from Rome.")
    run = Run(run_id="r", task=task.content, steps=(task, plan), agents=("planner", "solver"))
    replacements = [p.replacement for p in propose_mutations(plan, run, limit=100)]
    assert "Look up the gross weight in pounds of the Tuesday shipment from Rome." in replacements
    assert "Look up the net weight in kilograms of the Tuesday shipment from Rome." in replacements
    assert "Look up the net weight in pounds of the Monday shipment from Rome." in replacements
    assert "Look up the net weight in pounds of the Tuesday shipment from Paris." in replacements
    # never a word of another type (a weekday for a unit), never a word the run did not use
    assert not any("in Monday" in r or re.search(r"\bgrams\b", r) for r in replacements)


def test_framework_markers_role_names_and_stop_words_are_never_edited():
    task = Step(step_id="r/0", run_id="r", index=0, kind="task",
                content="What Will Have The Calculator say about Oslo on Friday? APPROVE it.")
    msg = Step(step_id="r/1", run_id="r", index=1, kind="message", agent="solver",
               content="Thought: The answer for Bergen on Monday is 41. Solver says TERMINATE")
    run = Run(run_id="r", task=task.content, steps=(task, msg), agents=("solver", "Calculator"))
    proposals = propose_mutations(msg, run, limit=200)
    replacements = [p.replacement for p in proposals]
    assert "Thought: The answer for Oslo on Monday is 41. Solver says TERMINATE" in replacements
    assert "Thought: The answer for Bergen on Friday is 41. Solver says TERMINATE" in replacements
    for new in replacements:
        assert new.startswith("Thought: The answer for ") and new.endswith(" Solver says TERMINATE"), new
        assert not re.search(r"\b(Will|Have|Calculator|APPROVE|What)\b", new), new


def test_a_number_copied_from_an_observation_is_swapped_for_another_entry_never_nudged():
    """Copying the wrong entry of a correct observation (Tuesday's 24 for Wednesday's 25) is the agent's decision:
    the other values the observation showed are proposed, a ±1 nudge of the copied value is not."""
    task = Step(step_id="r/0", run_id="r", index=0, kind="task", content="Wednesday's temperature in Fahrenheit?")
    forecast = Step(step_id="r/1", run_id="r", index=1, kind="tool_response", agent="solver", tool_name="forecast",
                    content="Monday 22, Tuesday 24, Wednesday 25", outputs={"result": "Monday 22, Tuesday 24, "
                                                                              "Wednesday 25", "is_error": False})
    llm = Step(step_id="r/2", run_id="r", index=2, kind="llm_response", agent="solver",
               depends_on=(Dependency(step_id="r/1", kind="observed"),))
    call = Step(step_id="r/3", run_id="r", index=3, kind="tool_call", agent="solver", tool_name="c_to_f",
                arguments={"c": 24}, depends_on=(Dependency(step_id="r/2", kind="produced_by"),))
    run = Run(run_id="r", task=task.content, steps=(task, forecast, llm, call), agents=("solver",))
    replacements = [p.replacement for p in propose_mutations(call, run)]
    assert {"c": 25} in replacements and {"c": 22} in replacements
    assert {"c": 23} not in replacements  # 24 came from the observation: never nudged
