"""``bench faults --from-store DIR`` (issue 20): the zoo's runs, recorded once with ``--home DIR``, are scored
again from that store without running the teams — the same localisation as the live run, a missing case an error
row (the suite goes on), a missing folder a user error."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from causaltrace.cli import main

CASES = "smol-unit-two,ag-misread-oslo"


def test_scores_the_stored_runs_as_the_live_ones(tmp_path, capsys):
    home, live, again = tmp_path / "zoo-runs", tmp_path / "live.json", tmp_path / "again.json"
    assert main(["bench", "faults", "--no-repair", "--case", CASES, "--home", str(home), "--json", str(live)]) == 0
    assert main(["bench", "faults", "--no-repair", "--case", CASES, "--from-store", str(home),
                 "--json", str(again)]) == 0
    first, second = json.loads(live.read_text()), json.loads(again.read_text())
    assert [r["name"] for r in second["cases"]] == ["smol-unit-two", "ag-misread-oslo"]
    assert second["errors"] == 0
    for a, b in zip(first["cases"], second["cases"], strict=True):
        assert b["true_step"] == a["true_step"] is not None
        assert b["localization"] == a["localization"]
    # a case the store never recorded is an error row; the other case is still scored
    missing = tmp_path / "missing.json"
    assert main(["bench", "faults", "--no-repair", "--case", "smol-unit-two,ag-unit-two", "--from-store", str(home),
                 "--json", str(missing)]) == 0
    rows = {r["name"]: r for r in json.loads(missing.read_text())["cases"]}
    assert "no run named 'ag-unit-two'" in rows["ag-unit-two"]["error"]
    assert rows["smol-unit-two"]["error"] is None and rows["smol-unit-two"]["localization"] is not None
    capsys.readouterr()
    assert main(["bench", "faults", "--no-repair", "--from-store", str(tmp_path / "nowhere")]) == 2
    assert "--from-store" in capsys.readouterr().err
