"""``pairs export --include-alternatives`` (issue 32 item 5): a pair of an alternative's flip is kept in the store and
exported only on request. The real AutoGen team of the ordering tests, repaired twice: once with corrections (the
analyst's 22 put back to the clerk's 21: a correction's pair) and once with corrections off (every edit an
alternative: an alternative's pair).
"""

from __future__ import annotations

import json

from causaltrace.cli import main
from causaltrace.collector.store import Store
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair
from test_repair_order import _record, _uninstrument, build, verify  # noqa: F401  (the fixture is autouse there)


async def test_alternatives_are_exported_only_with_the_flag(tmp_path, capsys):
    corrected, alternative = await _record(), await _record()
    with Store() as store:
        store.save_run(corrected)
        store.save_run(alternative)
    first = await repair(corrected, build, verify, k=0, sandbox=default_sandbox())
    second = await repair(alternative, build, verify, k=0, sandbox=default_sandbox(), corrections=False)
    assert first.pair is not None and first.pair.basis == "correction"
    assert second.pair is None and second.alternative_pair is not None

    def export(*flags: str) -> list[dict]:
        target = tmp_path / "pairs.jsonl"
        assert main(["pairs", "export", *flags, "-o", str(target)]) == 0
        return [json.loads(line) for line in target.read_text().splitlines()]

    default = export()
    assert [(r["metadata"]["run_id"], r["metadata"]["basis"]) for r in default] == [(corrected.run_id, "correction")]
    both = export("--include-alternatives")
    assert sorted((r["metadata"]["run_id"], r["metadata"]["basis"]) for r in both) == sorted(
        [(corrected.run_id, "correction"), (alternative.run_id, "alternative")])
    assert "wrote 2 pair(s)" in capsys.readouterr().err


def test_the_flag_has_a_help_line(capsys):
    try:
        main(["pairs", "export", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert "--include-alternatives" in out and "an alternative" in out and "--check-template" in out
