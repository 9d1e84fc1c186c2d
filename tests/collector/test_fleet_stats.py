"""``stats`` as a library (issue 23 item 3): the stored diagnoses aggregated — failures by agent, decisive step kind,
error category and framework, with counts, shares of the diagnosed runs and example run ids; each run counted once,
by its strongest diagnosis; replays' runs left out; ``since`` by the run's start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from _builders import RunBuilder
from causaltrace.collector.fleet_stats import Bucket, fleet_stats
from causaltrace.collector.store import Store
from causaltrace.schema import Diagnosis, Outcome

NOW = datetime.now(UTC).replace(microsecond=0)


def _run(run_id, *, hours_ago=1, framework="autogen", status="failure", name=None):
    return (RunBuilder(run_id, t0=NOW - timedelta(hours=hours_ago)).task("add 2 and 3").turn("solver")
            .tool_call("solver", "add", {"a": 2, "b": 4}).tool_response("solver", 6).end_turn()
            .message("reviewer", "looks right").build(outcome=Outcome(status=status), framework=framework, name=name))


def _diagnosis(run_id, step_id, agent, *, category=None, verified_by="heuristic", fault_source="agent", failed=False):
    return Diagnosis(run_id=run_id, method="graph", decisive_step_id=None if failed else step_id, agent=agent,
                     category=category, verified_by=verified_by, fault_source=fault_source, failed=failed,
                     created_at=NOW)


def _fleet(store):
    runs = [_run("a1"), _run("a2", hours_ago=2), _run("a3", hours_ago=3, framework="smolagents"),
            _run("env", hours_ago=4), _run("old", hours_ago=48), _run("none-yet", hours_ago=5),
            _run("gave-up", hours_ago=6), _run("ok", status="success"),
            _run("a1-replay", name="nightly (replay)")]
    for run in runs:
        store.import_run(run)
    for d in (
        _diagnosis("a1", "message-1", "reviewer", category="FM-3.2"),  # the strongest is the replay below
        _diagnosis("a1", "call-1", "solver", category="FM-1.1", verified_by="replay"),
        _diagnosis("a2", "call-1", "solver", category="FM-1.1"),
        _diagnosis("a3", "message-1", "reviewer", category="FM-3.2"),
        _diagnosis("env", "resp-1", None, fault_source="environment"),
        _diagnosis("old", "call-1", "solver", category="FM-1.1"),
        _diagnosis("gave-up", None, None, failed=True),
        _diagnosis("a1-replay", "call-1", "solver"),
    ):
        store.save_diagnosis(d)


def test_failures_are_counted_once_per_run_by_the_strongest_diagnosis():
    with Store() as store:
        _fleet(store)
        stats = fleet_stats(store)
    assert (stats.runs, stats.failed, stats.diagnosed, stats.diagnosis_failed, stats.undiagnosed) == (8, 7, 5, 1, 1)
    assert stats.by_agent == [Bucket("solver", 3, 0.6, ("a1", "a2", "old")), Bucket("(environment)", 1, 0.2, ("env",)),
                              Bucket("reviewer", 1, 0.2, ("a3",))]
    assert stats.by_step_kind == [Bucket("tool_call", 3, 0.6, ("a1", "a2", "old")),
                                  Bucket("message", 1, 0.2, ("a3",)), Bucket("tool_response", 1, 0.2, ("env",))]
    assert [(b.key, b.count) for b in stats.by_category] == [
        ("FM-1.1 Disobey Task Specification", 3), ("(none)", 1), ("FM-3.2 No or Incorrect Verification", 1)]
    assert [(b.key, b.count) for b in stats.by_framework] == [("autogen", 4), ("smolagents", 1)]


def test_since_keeps_the_runs_started_since_then_and_json_is_plain():
    with Store() as store:
        _fleet(store)
        stats = fleet_stats(store, since=NOW - timedelta(hours=12))
    assert stats.runs == 7 and stats.diagnosed == 4  # "old" (48 h ago) is out
    assert stats.by_agent[0] == Bucket("solver", 2, 0.5, ("a1", "a2"))
    as_json = stats.to_json()
    assert as_json["since"] == (NOW - timedelta(hours=12)).isoformat()
    assert as_json["by_agent"][0] == {"key": "solver", "count": 2, "share": 0.5, "examples": ["a1", "a2"]}


def test_an_empty_store_has_empty_stats():
    with Store() as store:
        stats = fleet_stats(store)
    assert stats.runs == stats.diagnosed == 0 and stats.by_agent == [] and stats.to_json()["by_framework"] == []
