"""The framework-neutral playback core (``causaltrace.replay.playback``) and the neutral half of an intervention
(``causaltrace.replay.edits``), on hand-built recordings: matching, divergences, ordinals, release order, counts,
and step → CallEdit resolution — without any framework."""

from __future__ import annotations

import asyncio

import pytest

from causaltrace.exceptions import ReplayDivergence, ReplayError, UserError
from causaltrace.protocols import CallEdit, PlaybackCore
from causaltrace.recording import canonicalize_request, request_hash
from causaltrace.replay.edits import original_value, replacement_kind, resolve_edit
from causaltrace.replay.playback import Playback, calls_with_nested_calls, first_difference
from causaltrace.schema import Dependency, Intervention, Outcome, RecordedCall, Recording, Run, Step, StepError


def _req(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def _call(key: str, kind: str, ordinal: int, text: str, start: int, finish: int | None = None, **kw) -> RecordedCall:
    canonical = canonicalize_request(_req(text))
    return RecordedCall(run_id="r", agent_key=key, kind=kind, ordinal=ordinal, request=_req(text),
                        request_hash=request_hash(canonical), start_order=start,
                        finish_order=start if finish is None else finish, **kw)


def _ask(core: Playback, key: str, kind: str, ordinal: int, text: str):
    canonical = canonicalize_request(_req(text))
    return core.decide(key, kind, ordinal, request_hash(canonical), canonical, "model call")


def _run(*calls: RecordedCall, steps: tuple[Step, ...] = ()) -> Run:
    return Run(run_id="r", framework="test", steps=steps, recording=Recording(run_id="r", calls=calls),
               outcome=Outcome(status="failure"))


def _step(i: int, kind: str, *deps: tuple[int, str], **kw) -> Step:
    return Step(step_id=f"r/{i}", run_id="r", index=i, kind=kind,
                depends_on=[Dependency(step_id=f"r/{d}", kind=k) for d, k in deps], **kw)


# ------------------------------------------------------------------------------------------------- matching


def test_a_pure_playback_serves_matching_calls_and_stops_at_the_first_divergence():
    core = Playback(_run(_call("t/a", "llm", 0, "hello", 0), _call("t/a", "llm", 1, "again", 1)))
    assert isinstance(core, PlaybackCore)
    first = _ask(core, "t/a", "llm", 0, "hello")
    assert (first.action, first.call.ordinal) == ("serve", 0)
    with pytest.raises(ReplayDivergence) as caught:
        _ask(core, "t/a", "llm", 1, "agian")
    message = caught.value.message
    assert message.startswith("replay diverged at t/a llm #1 (model call) (a pure playback: every call must match)")
    assert ".messages[0].content (character 2)" in message and "'again'" in message and "'agian'" in message
    with pytest.raises(ReplayDivergence) as again:  # every later call raises the FIRST divergence
        _ask(core, "t/a", "llm", 0, "hello")
    assert again.value.message == message
    with pytest.raises(ReplayDivergence, match="no such call.*recorded agent keys: \\['t/a'\\]"):
        Playback(core.run).decide("t/b", "llm", 0, "h", {}, "model call")


def test_with_an_edit_the_target_intervenes_and_later_calls_serve_or_go_live():
    before, target, after = _call("a", "llm", 0, "x", 0), _call("a", "llm", 1, "y", 1), _call("a", "llm", 2, "z", 2)
    run = _run(before, target, after)
    core = Playback(run, CallEdit(target, "response", "new"))
    with pytest.raises(ReplayDivergence, match="before the intervened call \\(a llm #1\\)"):
        _ask(Playback(run, CallEdit(target, "response", "new")), "a", "llm", 0, "changed")
    assert _ask(core, "a", "llm", 0, "x").action == "serve"
    assert _ask(core, "a", "llm", 1, "y").action == "intervene" and core.applied
    assert _ask(core, "a", "llm", 2, "other").action == "live"  # after the edit: a different request runs live
    assert _ask(core, "a", "llm", 3, "more").action == "live"  # ... as does a call the recording does not have
    other = Playback(run, CallEdit(target, "response", "new"))
    _ask(other, "a", "llm", 0, "x")
    with pytest.raises(ReplayDivergence, match="at the intervened call"):
        _ask(other, "a", "llm", 1, "not y")


def test_unrecordable_cancelled_and_nesting_calls_are_live_live_and_rerun():
    tool = _call("t/a", "tool", 0, "agent tool", 0, finish=3)
    nested = _call("t/a/inner", "llm", 0, "inside", 1, finish=2)
    run = _run(tool, nested, _call("t/b", "llm", 0, "lost", 4, live_only=True),
               _call("t/c", "tool", 0, "stopped", 5, error=StepError(type="CancelledError", message="")))
    assert calls_with_nested_calls(run.recording) == {("t/a", "tool", 0)}
    core = Playback(run)
    assert _ask(core, "t/a", "tool", 0, "agent tool").action == "rerun"
    assert _ask(core, "t/a/inner", "llm", 0, "inside").action == "serve"
    assert _ask(core, "t/b", "llm", 0, "lost").action == "live"
    assert _ask(core, "t/c", "tool", 0, "stopped").action == "live"


def test_two_playbacks_share_nothing():
    run = _run(_call("a", "llm", 0, "x", 0))
    one, two = Playback(run), Playback(run)
    with pytest.raises(ReplayDivergence):
        _ask(one, "a", "llm", 0, "y")
    assert _ask(two, "a", "llm", 0, "x").action == "serve"  # the other replay's divergence is not this one's
    assert one.next_ordinal("a", "llm") == 0 and two.next_ordinal("a", "llm") == 0


def test_first_difference_names_the_path_and_both_sides():
    assert first_difference({"a": [1, 2]}, {"a": [1, 3]}) == (".a[1]", "2", "3")
    assert first_difference({"a": 1}, {"b": 1}) == (".a", "1", "<absent>")
    assert first_difference([1], [1, 2]) == (" (length)", "1 items", "2 items")


# ------------------------------------------------------------------------------------------------- ordinals


def test_tool_ordinals_follow_the_response_order_and_are_claimed_by_id_then_arguments_then_name():
    core = Playback(_run(_call("a", "llm", 0, "x", 0)))
    core.reserve("a", [("id1", "add", {"a": 1}), ("id2", "add", {"a": 2}), (None, "mul", {"b": 3})])
    assert core.claim("a", "add", {"a": 9}, "id2") == (1, {"a": 2})  # by call id: the response's own arguments
    assert core.claim("a", "mul", {"b": 3}) == (2, {"b": 3})  # by name and arguments
    assert core.claim("a", "add", {"a": 7}) == (0, {"a": 1})  # by name
    assert core.claim("a", "add", {"a": 5}) == (3, {"a": 5})  # announced by no response: the next ordinal
    assert core.claim("b", "add", {}) == (0, {})  # ordinals are per agent key


def test_reserve_keeps_or_replaces_the_unclaimed_reservations():
    core = Playback(_run(_call("a", "llm", 0, "x", 0)))
    core.reserve("a", [(None, "add", {"a": 1})])
    core.reserve("a", [(None, "add", {"a": 2})])  # AutoGen: the unclaimed reservation stays
    assert core.claim("a", "add", {"a": 1}) == (0, {"a": 1})
    fresh = Playback(core.run)
    fresh.reserve("a", [(None, "add", {"a": 1})], replace=True)
    fresh.reserve("a", [(None, "add", {"a": 2})], replace=True)  # smolagents: a new response replaces them
    assert fresh.claim("a", "add", {"a": 1}) == (1, {"a": 2})


async def test_a_served_call_waits_for_the_calls_that_finished_before_it():
    early, late = _call("a", "tool", 0, "b", 0, finish=5), _call("a", "tool", 1, "c", 1, finish=3)
    core = Playback(_run(early, late))
    order = []

    async def serve(rec, delay):
        await asyncio.sleep(delay)
        await core.wait_turn(rec)
        order.append(rec.ordinal)
        core.release(rec)

    await asyncio.gather(serve(early, 0), serve(late, 0.01))
    assert order == [1, 0]  # released in the recorded finish order, not the order the calls came


# ------------------------------------------------------------------------------------------ counts, finish


def test_stats_and_finish_report_what_happened():
    target = _call("a", "llm", 0, "x", 0)
    core = Playback(_run(target), CallEdit(target, "response", "new"), intervention=Intervention(step_id="r/1",
                                                                                                 replacement="new"))
    core.count("live", llm=True)
    core.count("serve")
    core.count_code_run()
    stats = core.stats()
    assert stats == {"of": "r", "intervention": "r/1", "served": 1, "live": 1, "live_before_intervention": 1,
                     "deterministic": False, "divergence": "the replay never reached the intervened call (a llm #0)",
                     "applied": False, "code_executions": 1}
    with pytest.raises(ReplayError, match="produced no run"):
        Playback(core.run).finish(None)
    with pytest.raises(ReplayDivergence, match="never reached"):
        core.finish(core.run.model_copy(update={"metadata": {"replay": stats}}))


def test_bind_checks_the_transform_once_and_edited_response_applies_it():
    target = _call("a", "llm", 0, "x", 0, response="old text")
    core = Playback(_run(target), CallEdit(target, "response", "new"))

    def broken(response):
        raise ReplayError("the recorded response has no such tool call")

    with pytest.raises(UserError, match="no such tool call"):
        core.bind(broken)
    core.bind(lambda response: response.replace("old", "new"))
    assert core.edited_response(target) == "new text"


# ------------------------------------------------------------------------------------------- resolve_edit


def _edit_run() -> Run:
    llm = _call("t/a", "llm", 0, "ask", 0, response="calling add", step_id="r/1")
    tool = _call("t/a", "tool", 0, "add", 1, response="3", step_id="r/2")
    code_llm = _call("t/m", "llm", 0, "code", 2, response="<code>final_answer(6)</code>", step_id="r/6")
    code_call = _call("t/m", "tool", 0, "code call", 3, response=None, step_id="r/9")
    steps = (
        _step(0, "task", content="add 1 and 2"),
        _step(1, "llm_response", content="calling add"),
        _step(2, "tool_call", (1, "produced_by"), tool_name="add", arguments={"a": 1, "b": 2}, call_id="c1"),
        _step(3, "tool_response", (2, "tool_result_of"), outputs={"result": 3}, content="3"),
        _step(4, "message", (1, "produced_by"), content="the sum is 3"),
        _step(5, "final_answer", (4, "answer_of"), content="3"),
        _step(6, "llm_response", content="<code>final_answer(6)</code>"),
        _step(7, "tool_call", (6, "produced_by"), tool_name="python_interpreter",
              arguments={"code": "final_answer(6)"}),
        _step(8, "code_execution", (7, "executes"), inputs={"code": "x = add(1, 2)\nfinal_answer(6)"}),
        _step(9, "tool_call", (8, "produced_by"), tool_name="add", arguments={"a": 1}),
        _step(10, "final_answer", (8, "produced_by"), content="6"),
        _step(11, "agent_turn", content="a turn"),
        _step(12, "reasoning", (1, "produced_by"), content="I think"),
    )
    return _run(llm, tool, code_llm, code_call, steps=steps)


@pytest.mark.parametrize(
    ("step", "replacement", "expected"),
    [
        ("r/1", "new text", ("r/1", "response", "whole", "new text", None)),
        ("r/2", {"a": 2, "b": 2}, ("r/1", "response", "tool_arguments", {"a": 2, "b": 2}, None)),
        ("r/2", '{"a": 5}', ("r/1", "response", "tool_arguments", {"a": 5}, None)),
        ("r/3", 4, ("r/2", "result", "whole", 4, None)),
        ("r/4", "the sum is 4", ("r/1", "response", "text", "the sum is 4", "the sum is 3")),
        ("r/5", "4", ("r/1", "response", "text", "4", "3")),
        ("r/7", "final_answer(7)", ("r/6", "response", "code", "final_answer(7)", None)),
        ("r/8", {"code": "print(1)"}, ("r/6", "response", "code", "print(1)", None)),
        ("r/9", {"a": 3}, ("r/9", "arguments", "whole", {"a": 3}, None)),
        ("r/10", 7, ("r/6", "response", "code", "x = add(1, 2)\nfinal_answer(7)", None)),
        ("r/12", "I know", ("r/1", "response", "thought", "I know", "I think")),
    ],
)
def test_resolve_edit_finds_the_recorded_call_slot_and_part(step, replacement, expected):
    run = _edit_run()
    edit = resolve_edit(run, run.recording, Intervention(step_id=step, replacement=replacement))
    assert (edit.call.step_id, edit.slot, edit.part, edit.value, edit.old) == expected
    assert edit.step is not None and edit.step.step_id == step


@pytest.mark.parametrize(
    ("step", "replacement", "kinds", "error"),
    [
        ("r/11", "x", None, "'agent_turn' step"),
        ("r/4", "x", ("llm_response",), "'message' step when replaying test \\(supported: llm_response\\)"),
        ("r/2", [1], None, "arguments as a dict"),
        ("r/2", "not json", None, "arguments as a JSON object"),
        ("r/4", 5, None, "new text as a str"),
        ("r/8", 5, None, "new code as a str"),
        ("r/3", "x", None, None),
        ("nope", "x", None, "not a step of run r"),
    ],
)
def test_resolve_edit_refuses_what_cannot_be_edited(step, replacement, kinds, error):
    run = _edit_run()
    intervention = Intervention(step_id=step, replacement=replacement)
    if error is None:
        assert resolve_edit(run, run.recording, intervention, edit_kinds=kinds, framework="test") is not None
        return
    with pytest.raises(UserError, match=error):
        resolve_edit(run, run.recording, intervention, edit_kinds=kinds, framework="test")


def test_a_step_no_recorded_model_produced_is_a_user_error():
    run = _edit_run()
    orphan = run.model_copy(update={"steps": (*run.steps, _step(13, "message", content="hi"))})
    with pytest.raises(UserError, match="message step r/13: no model produced it"):
        resolve_edit(orphan, orphan.recording, Intervention(step_id="r/13", replacement="x"))
    assert resolve_edit(run, run.recording, None) is None


def test_replacement_kind_and_original_value_agree_with_the_edit_table():
    steps = {s.step_id: s for s in _edit_run().steps}
    assert [replacement_kind(steps[f"r/{i}"]) for i in (2, 3, 4, 7, 8)] == ["arguments", "result", "text", "code",
                                                                          "code"]
    assert original_value(steps["r/2"]) == {"a": 1, "b": 2} and original_value(steps["r/3"]) == 3
    assert original_value(steps["r/7"]) == "final_answer(6)" and original_value(steps["r/4"]) == "the sum is 3"
