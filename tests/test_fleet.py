"""The fleet commands end to end (issue 23 item 3): ``import`` many failed logs, ``diagnose --all --jobs 2`` (a
progress bar on stderr, the ids on stdout, resumable), ``stats`` (table and ``--json``), ``report --fleet --html``;
bad arguments are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from causaltrace.cli import main
from causaltrace.collector.store import Store

SMALLEST = ("47", "93", "21", "102", "12", "38")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def imported(whowhen_dir, capsys):
    files = [str(whowhen_dir / "Algorithm-Generated" / f"{n}.json") for n in SMALLEST]
    code, out, err = run_cli(capsys, "import", *files, "--format", "whowhen")
    assert code == 0, err
    return out.split()


def test_diagnose_all_then_stats_and_the_fleet_page(imported, capsys, tmp_path):
    code, out, err = run_cli(capsys, "diagnose", "--all", "--failed", "--jobs", "2")
    assert code == 0, err
    assert sorted(out.split()) == sorted(imported)
    assert f"diagnosed {len(imported)} runs" in err and "2 jobs" in err and "runs/s" in err
    code, out, err = run_cli(capsys, "diagnose", "--all")  # resumes: nothing left
    assert code == 0 and out == "" and "nothing to diagnose" in err

    code, out, err = run_cli(capsys, "stats", "--json")
    assert code == 0, err
    stats = json.loads(out)
    assert stats["runs"] == stats["failed"] == stats["diagnosed"] == len(imported) and stats["undiagnosed"] == 0
    for group in ("by_agent", "by_step_kind", "by_category", "by_framework"):
        assert sum(b["count"] for b in stats[group]) == len(imported)
        assert abs(sum(b["share"] for b in stats[group]) - 1.0) < 1e-3
        assert all(set(b["examples"]) <= set(imported) for b in stats[group])
    code, out, err = run_cli(capsys, "stats")
    assert code == 0 and "failures by agent" in out and stats["by_agent"][0]["key"] in out

    page = tmp_path / "fleet.html"
    code, out, err = run_cli(capsys, "report", "--fleet", "--html", str(page))  # Who&When logs carry no start time: no --since
    assert code == 0 and f"wrote {page}" in err
    html = page.read_text(encoding="utf-8")
    assert "Failures by agent" in html and stats["by_agent"][0]["examples"][0] in html


def test_diagnose_all_json_summarises_the_batch(imported, capsys):
    first, *rest = imported
    code, out, err = run_cli(capsys, "diagnose", first, "--json")  # diagnosed alone first: the batch skips it
    assert code == 0, err
    code, out, err = run_cli(capsys, "diagnose", "--all", "--json")
    assert code == 0, err
    summary = json.loads(out)  # stdout is the one JSON object, the progress and the summary line are on stderr
    assert summary["method"] == "graph" and summary["jobs"] == 1
    assert (summary["selected"], summary["diagnosed"], summary["skipped"]) == (len(rest), len(rest), 1)
    assert summary["failed"] == summary["errors"] == 0 and summary["runs_per_second"] > 0
    assert sorted(r["run_id"] for r in summary["runs"]) == sorted(rest)
    with Store() as store:
        for run in summary["runs"]:
            (stored,) = store.diagnoses(run["run_id"])
            assert run["decisive_step_index"] == stored.decisive_step_index is not None
            assert (run["decisive_step_id"], run["agent"], run["category"]) == (
                stored.decisive_step_id, stored.agent, stored.category)
            assert run["failed"] is False and run["failure_reason"] is None
    code, out, err = run_cli(capsys, "diagnose", "--all", "--json")  # resumed: all skipped, still one JSON object
    assert code == 0 and "nothing to diagnose" in err
    again = json.loads(out)
    assert (again["selected"], again["diagnosed"], again["skipped"], again["runs"]) == (0, 0, len(imported), [])


@pytest.mark.parametrize("argv, message", [
    (("diagnose", "--all", "--force"), "--force (analyse a successful run) takes one run"),
    (("diagnose",), "diagnose needs a RUN_ID or --all"),
    (("diagnose", "abcd1234", "--all"), "a RUN_ID or --all, not both"),
    (("diagnose", "--all", "--since", "yesterday-ish"), "--since 'yesterday-ish': expected a duration"),
    (("report", "--html", "x.html"), "report needs a RUN_ID or --fleet"),
    (("stats", "--since", "6 hours"), "expected a duration (90m, 6h, 2d)"),
    (("pull", "--jaeger", "http://127.0.0.1:9"), "pull --jaeger needs a TRACE_ID or --service S"),
    (("pull", "--phoenix", "http://127.0.0.1:9"), "pull --phoenix needs --project P"),
    (("pull", "abc", "--phoenix", "http://127.0.0.1:9", "--project", "p"), "not both"),
    (("pull", "--service", "s"), "pull needs one source"),
    (("pull", "--phoenix", "http://127.0.0.1:9", "--project", "p", "--timeout", "2"),
     "cannot reach Phoenix at http://127.0.0.1:9"),
    (("pull", "--jaeger", "http://127.0.0.1:9", "--service", "s", "--timeout", "2"),
     "cannot reach Jaeger at http://127.0.0.1:9"),
])
def test_bad_fleet_arguments_are_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err
