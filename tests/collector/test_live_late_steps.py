"""The live collector and steps that end after their run finished (a framework closing a stream late): they are
counted, not kept in memory for a run that will never be assembled again (found by benchmarks/bench_chaos.py)."""

from __future__ import annotations

from causaltrace.collector.live import RunCollector
from causaltrace.config import TraceConfig
from causaltrace.schema import Step


def _step(run_id: str, index: int) -> Step:
    return Step(step_id=f"{run_id}/{index}", run_id=run_id, index=index, kind="message", agent="a", content="hi")


def test_a_late_step_of_a_finished_run_is_counted_and_not_kept():
    collector = RunCollector(TraceConfig(store=False))
    collector.begin_run("r1", framework="unknown")
    collector.accept(_step("r1", 0))
    run = collector.finish_run("r1")
    assert [s.index for s in run.steps] == [0]
    for i in range(1, 50):
        collector.accept(_step("r1", i))
    assert collector.steps_of("r1") == [] and collector.late_steps == 49
    assert "r1" not in collector._runs  # nothing retained for the finished run


def test_a_run_id_begun_again_takes_steps_again():
    collector = RunCollector(TraceConfig(store=False))
    collector.begin_run("r1", framework="unknown")
    collector.finish_run("r1")
    collector.begin_run("r1", framework="unknown")
    collector.accept(_step("r1", 0))
    assert [s.index for s in collector.finish_run("r1").steps] == [0] and collector.late_steps == 0


def test_a_run_without_a_begin_row_still_collects_its_steps():
    collector = RunCollector(TraceConfig(store=False))
    collector.accept(_step("r2", 0))
    collector.accept(_step("r2", 1))
    assert [s.index for s in collector.finish_run("r2").steps] == [0, 1]


def test_a_runs_end_assembles_the_run_its_steps_and_fields_validate_to():
    """finish_run builds the Run without validating each Step again (they were checked when made): the Run is the
    one pydantic builds from the same steps and fields — sorted, equal, the same JSON and fields set — and a step
    that breaks the run's graph fails the run's end with the error it always had."""
    import pytest
    from pydantic import ValidationError

    from causaltrace.exceptions import OrphanStepError
    from causaltrace.schema import Outcome, Run

    collector = RunCollector(TraceConfig(store=False))
    collector.begin_run("r1", framework="unknown")
    made = [_step("r1", i).model_copy(update={"parent_step_id": "r1/0" if i else None}) for i in (2, 0, 1)]
    for step in made:
        collector.accept(step)
    fields = {"framework": "autogen", "task": "t", "outcome": Outcome(status="success", stop="normal")}
    run = collector.finish_run("r1", **fields)
    expected = Run(run_id="r1", steps=tuple(made), **fields)
    assert run == expected and run.model_dump_json() == expected.model_dump_json()
    assert [s.index for s in run.steps] == [0, 1, 2] and run.model_fields_set == expected.model_fields_set
    collector.begin_run("r2", framework="unknown")
    collector.accept(_step("r2", 0).model_copy(update={"parent_step_id": "gone"}))
    with pytest.raises(OrphanStepError, match="gone"):
        collector.finish_run("r2")
    collector.begin_run("r3", framework="unknown")
    collector.accept(_step("other", 0))  # a step of another run under this one
    collector._runs["r3"] = collector._runs.pop("other")
    with pytest.raises(ValidationError, match="expected 'r3'"):
        collector.finish_run("r3")
