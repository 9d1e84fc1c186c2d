"""``diagnose --all`` as a library (issue 23 item 3): many stored runs diagnosed in parallel processes, each
diagnosis the one that run gets alone, stored as it arrives, and a stopped batch resumes where it ended.

The runs are real failed multi-agent logs (the six smallest Algorithm-Generated Who&When files), imported as
``causaltrace import --format whowhen`` stores them; the method is ``graph`` without a model (deterministic).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from _builders import RunBuilder
from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.fleet import diagnose_all, runs_to_diagnose
from causaltrace.collector.store import Store
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.exceptions import UserError
from causaltrace.schema import Outcome

SMALLEST = ("47", "93", "21", "102", "12", "38")


def _verdict(d):
    return d.decisive_step_id, d.agent, d.category, [c.step_id for c in d.candidates]


@pytest.fixture
def stored(whowhen_dir):
    """Six failed Who&When runs, a success, and a failed run a replay produced, in the test's default store."""
    runs = [load_whowhen(whowhen_dir / "Algorithm-Generated" / f"{n}.json", content_id=True) for n in SMALLEST]
    ok = RunBuilder("fine").task("add 2 and 3").message("solver", "5").build(outcome=Outcome(status="success"))
    replay = (RunBuilder("replayed").task("add 2 and 3").message("solver", "6")
              .build(outcome=Outcome(status="failure"), name="nightly (replay)"))
    with Store() as store:
        for run in [*runs, ok, replay]:
            store.import_run(run)
    return [r.run_id for r in runs]


def test_a_batch_stores_what_each_run_gets_alone_and_a_stopped_batch_resumes(stored):
    with Store() as store:
        todo = runs_to_diagnose(store)
    assert sorted(todo) == sorted(stored)  # the success and the replay's run are left out

    def stop_after_three(done, total, diagnosis):
        assert total == len(todo) and diagnosis is not None
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        diagnose_all(None, todo, progress=stop_after_three)
    with Store() as store:
        left = runs_to_diagnose(store)
        assert len(left) == 3 and set(left) < set(todo)  # the three done are stored, the rest is still to do
    result = diagnose_all(None, left)
    assert result.diagnosed == 3 and result.errors == [] and result.runs_per_second > 0
    with Store() as store:
        assert runs_to_diagnose(store) == []
        for run_id in stored:
            (diagnosis,) = store.diagnoses(run_id)
            alone = diagnose_sync(store.get_run(run_id), "graph", store=False)
            assert _verdict(diagnosis) == _verdict(alone) and diagnosis.decisive_step_id is not None


def test_two_processes_give_the_diagnoses_one_gives(stored):
    one = diagnose_all(None, stored, jobs=1)
    two = diagnose_all(None, stored, jobs=2)
    assert one.diagnosed == two.diagnosed == len(stored)
    with Store() as store:
        for run_id in stored:
            first, second = store.diagnoses(run_id)
            assert _verdict(first) == _verdict(second)
        assert runs_to_diagnose(store) == [] and len(runs_to_diagnose(store, redo=True)) == len(stored)


def test_workers_take_runs_once_they_are_ready_and_give_the_same_diagnoses(monkeypatch):
    """``jobs=2``: this process diagnoses while its worker starts, then the worker takes chunks. This process is
    slowed down here (the worker, a fresh interpreter, is not), so the worker's share is sure to be more than
    nothing; every diagnosis is the one the run gets alone."""
    import causaltrace.attribution.fleet as fleet

    runs = [RunBuilder(f"r{i:02d}").task(f"add {i} and 3").turn("solver").message("solver", str(i + 4)).end_turn()
            .build(outcome=Outcome(status="failure")) for i in range(40)]
    with Store() as store:
        for run in runs:
            store.import_run(run)
    here = fleet._diagnose_here

    def slow_here(run_id):
        time.sleep(0.25)
        return here(run_id)

    monkeypatch.setattr(fleet, "_diagnose_here", slow_here)
    result = diagnose_all(None, [r.run_id for r in runs], jobs=2)
    assert result.diagnosed == len(runs) and result.errors == [] and 0 < result.by_workers < len(runs)
    with Store() as store:
        for run in runs:
            (stored,) = store.diagnoses(run.run_id)
            assert _verdict(stored) == _verdict(diagnose_sync(run, "graph", store=False))


def test_the_selection_by_outcome_time_and_method(tmp_path):
    now = datetime.now(UTC)
    def run(run_id, status, hours_ago):
        return (RunBuilder(run_id, t0=now - timedelta(hours=hours_ago)).task("t").message("a", "x")
                .build(outcome=Outcome(status=status)))

    with Store() as store:
        for r in (run("old-fail", "failure", 30), run("new-fail", "failure", 1), run("new-unknown", "unknown", 2),
                  run("new-ok", "success", 1)):
            store.import_run(r)
        assert runs_to_diagnose(store) == ["old-fail", "new-unknown", "new-fail"]  # oldest first
        assert runs_to_diagnose(store, failed_only=True) == ["old-fail", "new-fail"]
        assert runs_to_diagnose(store, since=now - timedelta(hours=6)) == ["new-unknown", "new-fail"]
        assert runs_to_diagnose(store, limit=1) == ["old-fail"]
        store.save_diagnosis(diagnose_sync(store.get_run("new-fail"), "graph", store=False))
        assert runs_to_diagnose(store, failed_only=True) == ["old-fail"]
        assert runs_to_diagnose(store, failed_only=True, method="all-at-once") == ["old-fail", "new-fail"]


def test_bad_batch_arguments_are_user_errors(stored):
    with pytest.raises(UserError, match="--jobs must be at least 1"):
        diagnose_all(None, stored, jobs=0)
    with pytest.raises(UserError, match="unknown|no such|method"):
        diagnose_all(None, stored[:1], method="no-such-method")
