"""A Run's step lookups (``step``, ``step_at``) are cached per Run; a copy with other steps answers from its own."""

from __future__ import annotations

from causaltrace.schema import Run, Step


def _run(content: str, n: int = 3) -> Run:
    return Run(run_id="r", steps=tuple(Step(step_id=f"r/{i}", run_id="r", index=i, kind="message", agent="a",
                                            content=f"{content}{i}") for i in range(n)))


def test_a_copy_with_other_steps_does_not_answer_from_the_originals():
    original = _run("old")
    assert original.step_at(2).content == "old2" and original.step("r/1").content == "old1"  # caches built
    copy = original.model_copy(update={"steps": _run("new").steps})
    assert copy.step_at(2).content == "new2" and copy.step("r/1").content == "new1"
    assert original.step_at(2).content == "old2"
    same = original.model_copy(update={"task": "t"})
    assert same.step_at(0) is original.step_at(0)


def test_step_at_is_a_lookup_by_index_not_by_position():
    run = Run(run_id="r", steps=(Step(step_id="r/5", run_id="r", index=5, kind="message", agent="a", content="x"),))
    assert run.step_at(5).step_id == "r/5"
    try:
        run.step_at(0)
    except KeyError:
        pass
    else:
        raise AssertionError("step_at(0) found a step that has index 5")
