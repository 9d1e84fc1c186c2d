"""One rule for diagnoses (issue 19 item 5): a successful run is not diagnosed unless forced; an unknown /
incomplete outcome is diagnosed and says which failure anchor it assumed; Python ``diagnose`` stores its Diagnosis
like the CLI (``store=False`` opts out); the diagnosis a run shows is its strongest one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.cli import main
from causaltrace.collector.store import Store
from causaltrace.schema import Diagnosis, Outcome, Run, Step


def make_run(status: str, run_id: str = "rule-run") -> Run:
    steps = (
        Step(step_id=f"{run_id}-0", run_id=run_id, index=0, kind="task", agent="user", content="What is 17 + 25?"),
        Step(step_id=f"{run_id}-1", run_id=run_id, index=1, kind="message", agent="solver",
             content="17 + 25 is 41."),
        Step(step_id=f"{run_id}-2", run_id=run_id, index=2, kind="final_answer", agent="solver", content="41"),
    )
    return Run(run_id=run_id, framework="test", task="What is 17 + 25?", steps=steps,
               outcome=Outcome(status=status, final_answer="41"))  # type: ignore[arg-type]


def test_a_successful_run_is_not_diagnosed_unless_forced():
    d = diagnose_sync(make_run("success"), "graph", store=False)
    assert d.failed and "succeeded" in (d.failure_reason or "") and d.decisive_step_index is None
    forced = diagnose_sync(make_run("success"), "graph", force=True, store=False)
    assert not forced.failed and forced.decisive_step_index is not None


def test_an_unknown_outcome_is_diagnosed_and_says_what_it_assumed():
    d = diagnose_sync(make_run("unknown"), "graph", store=False)
    assert not d.failed and d.decisive_step_index is not None
    assert "outcome is unknown" in d.explanation and d.artifacts["assumed_failure"]["outcome"] == "unknown"
    assert "assumed_failure" not in diagnose_sync(make_run("failure"), "graph", store=False).artifacts


def test_python_diagnose_stores_like_the_cli_unless_told_not_to(capsys):
    run = make_run("failure")
    with Store() as store:
        store.save_run(run)
    diagnose_sync(run, "graph")
    diagnose_sync(run, "graph", store=False)
    with Store() as store:
        assert len(store.diagnoses(run.run_id)) == 1
    diagnose_sync(make_run("failure", "not-stored"), "graph")  # a run the store does not hold: nothing saved
    with Store() as store:
        assert store.diagnoses("not-stored") == []


def test_the_cli_refuses_a_successful_run_in_one_line(capsys):
    with Store() as store:
        store.save_run(make_run("success", "ok-run"))
    assert main(["diagnose", "ok-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "succeeded" in err and "--force" in err
    assert main(["diagnose", "ok-run", "--force", "--json"]) == 0


def test_the_verdict_is_the_one_diagnosis_a_run_shows():
    """Issue 32 item 7: a replay-verified correction, then a tool / data fault, a finding-backed ranking (a model's
    before the heuristic), a replay-verified alternative, uncertain; newest within a level."""
    run = make_run("failure", "strong-run")
    now = datetime.now(UTC)

    def d(verified_by: str, minutes: int, basis: str | None, failed: bool = False, step: int = 1,
          fault: str | None = None, confidence: float | None = None) -> Diagnosis:
        return Diagnosis(run_id=run.run_id, method="graph", verified_by=verified_by, failed=failed,  # type: ignore[arg-type]
                         decisive_step_index=None if failed else step, created_at=now + timedelta(minutes=minutes),
                         basis=basis, fault_source=fault, confidence=confidence)  # type: ignore[arg-type]

    with Store() as store:
        store.save_run(run)
        assert store.verdict(run.run_id) is None
        store.save_diagnosis(d("heuristic", 0, "none", step=3))
        assert store.verdict(run.run_id).basis == "none"  # type: ignore[union-attr]
        store.save_diagnosis(d("replay", 1, "alternative", step=2))
        assert store.verdict(run.run_id).basis == "alternative"  # type: ignore[union-attr]
        store.save_diagnosis(d("heuristic", 2, "finding", step=4))
        store.save_diagnosis(d("replay", 3, None, failed=True))
        best = store.verdict(run.run_id)
        assert best is not None and best.basis == "finding" and best.decisive_step_index == 4  # over an alternative
        store.save_diagnosis(d("prediction", 4, "finding", step=5))
        store.save_diagnosis(d("heuristic", 5, "finding", step=6))  # a newer heuristic does not beat the model's
        assert store.verdict(run.run_id).decisive_step_index == 5  # type: ignore[union-attr]
        store.save_diagnosis(d("replay", 6, "alternative", step=7, fault="environment"))
        assert store.verdict(run.run_id).fault_source == "environment"  # type: ignore[union-attr]
        store.save_diagnosis(d("replay", 7, "correction", step=1))
        assert store.verdict(run.run_id).decisive_step_index == 1  # type: ignore[union-attr]
        store.save_diagnosis(d("replay", 8, "correction", step=2))  # newest within the level
        assert store.verdict(run.run_id).decisive_step_index == 2  # type: ignore[union-attr]
        assert store.strongest_diagnosis(run.run_id) == store.verdict(run.run_id)
        assert len(store.diagnoses(run.run_id)) == 9  # all are kept


def test_a_diagnosis_stored_before_findings_keeps_a_conservative_place():
    """basis None (an older store): a replay is an alternative (the old search did not tell), a confident ranking a
    finding, a low one uncertain."""
    from causaltrace.collector.verdict import verdict_level

    old = Diagnosis(run_id="r", method="graph", decisive_step_index=1, verified_by="replay")
    assert verdict_level(old)[0] == 4
    assert verdict_level(old.model_copy(update={"verified_by": "heuristic", "confidence": 0.9}))[0] == 3
    assert verdict_level(old.model_copy(update={"verified_by": "heuristic", "confidence": 0.2}))[0] == 5
