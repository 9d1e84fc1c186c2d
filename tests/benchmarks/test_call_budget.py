"""The call budget (issue 35 item 3): causaltrace's Python calls per framework event, for every benchmark team with
the store off and on, stay within 10 % of ``benchmarks/call_budget.json``.

The count is load-independent and deterministic (``benchmarks/_call_counter.py``: one run after two warm-ups, a
SimpleSpanProcessor, the store written on the team's thread, garbage collection off), so CI keeps it where timings
would be noise. A lower count is welcome: ``benchmarks/update_budget.py`` rewrites the file to lock it in; a raised
budget is named in its commit.

When the installed versions (Python major.minor, OpenTelemetry, the frameworks, openai, httpx, OpenInference) differ
from the file's, the counts differ by themselves and the test SKIPS, naming the versions. That skip calls
``pytest.skip`` directly, not ``conftest.require``: a different version is a fact of this machine, not a missing
part, so ``CAUSALTRACE_STRICT=1`` (which turns ``require`` skips into failures) leaves it a skip — it must not fail
CI on a dependency upgrade; the upgrade's commit reruns ``update_budget.py``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
MARGIN = 1.10


def _module(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


BUDGET = json.loads((BENCHMARKS / "call_budget.json").read_text())
CT_MODES = ("ct-store-off", "ct-store-on")


@pytest.fixture(scope="module")
def counted() -> dict[str, Any]:
    """Every budgeted team counted once, in a FRESH interpreter (``bench_call_counts.py --json -``): the count must
    not see what earlier tests of this process left behind (a store writer thread of a traced run, a configured
    tracing), which made it fail after test_reliability / test_golden_spans in one process."""
    counter = _module("_call_counter")
    installed = counter.versions()
    differ = {k: (v, installed.get(k)) for k, v in BUDGET["versions"].items() if installed.get(k) != v}
    if differ:
        pytest.skip(  # a machine fact, exempt from CAUSALTRACE_STRICT (module docstring)
            "the call budget was counted on other versions ("
            + ", ".join(f"{k} {budget} here {now}" for k, (budget, now) in differ.items())
            + "): rerun benchmarks/update_budget.py"
        )
    command = [sys.executable, str(BENCHMARKS / "bench_call_counts.py"), "--no-memory", "--json", "-"]
    for team in sorted(BUDGET["budget"]):
        command += ["--team", team]
    for mode in CT_MODES:
        command += ["--mode", mode]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert done.returncode == 0, f"bench_call_counts.py failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)["teams"]


@pytest.mark.parametrize("team", sorted(BUDGET["budget"]))
def test_causaltrace_calls_per_event_stay_within_the_budget(team: str, counted: dict[str, Any]) -> None:
    measured = counted[team]
    over = []
    for mode in CT_MODES:
        budget, now = BUDGET["budget"][team][mode], measured[mode]
        assert measured["events"] == budget["events"], "the team's framework events changed: not the same run"
        if now["calls_per_event"] > budget["calls_per_event"] * MARGIN:
            over.append(
                f"{mode}: {now['calls_per_event']} causaltrace calls per event, budget {budget['calls_per_event']} "
                f"(+{100 * (now['calls_per_event'] / budget['calls_per_event'] - 1):.1f} %, {now['calls']} calls per run)"
            )
    assert not over, f"{team} exceeds benchmarks/call_budget.json by more than 10 %:\n" + "\n".join(over)
