"""The frameworks' own tests change no outcome under ``causaltrace.instrument()`` (issue 21, peer suites).

A fixed part of AutoGen AgentChat 0.7.5's and smolagents 1.26's own suites (the modules that drive agents, teams
and their monitoring) runs plain and instrumented in the cached venv of ``benchmarks/peer_suites.py``; any test id
whose outcome differs fails this test, with the ids. The venv is built by ``scripts/install_peer_suites.sh``
(``scripts/test.sh`` runs it); without it the test skips, and fails under CAUSALTRACE_STRICT=1. The full
three-mode table is ``python benchmarks/peer_suites.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from conftest import ROOT, require

pytestmark = pytest.mark.slow

#: the fixed subset: agent and team loops, nested teams (item 18), smolagents' agents and monitoring
SUBSET = {"autogen": ["tests/test_assistant_agent.py", "tests/test_group_chat_nested.py"],
          "smolagents": ["tests/test_agents.py", "tests/test_monitoring.py"]}


def _peer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peer_suites", ROOT / "benchmarks" / "peer_suites.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("suite", sorted(SUBSET))
def test_instrument_changes_no_outcome(suite: str) -> None:
    peer = _peer()
    version = peer.SDISTS[suite][1]
    ready = (peer.VENV / ".ready").is_file() and (peer.CACHE / f"{suite}-{version}" / "tests").is_dir()
    require(ready, "the peer-suite venv is not set up (run scripts/install_peer_suites.sh)")
    plain = peer.run_suite(suite, "plain", SUBSET[suite])["outcomes"]
    instrumented = peer.run_suite(suite, "instrumented", SUBSET[suite])["outcomes"]
    assert len(plain) > 20, f"{suite}: the subset ran only {len(plain)} tests"
    # tests that could not start ("error": on a machine without smolagents' cached test helpers their fixtures are
    # missing, benchmarks/peer_suites.py) are compared like the others but do not count as run
    ran = [o for o in plain.values() if o in ("passed", "failed")]
    assert len(ran) > 20 and ran.count("passed") > 0.8 * len(ran), f"{suite}: most of the subset fails plain"
    differ = sorted(t for t in set(plain) | set(instrumented) if plain.get(t) != instrumented.get(t))
    assert not differ, "\n".join(f"{t}: plain {plain.get(t)} -> instrumented {instrumented.get(t)}" for t in differ)


def test_subset_paths_exist_in_the_suites() -> None:
    """The subset names real modules of the extracted suites (a renamed module would silently run nothing)."""
    peer = _peer()
    for suite, paths in SUBSET.items():
        where = peer.CACHE / f"{suite}-{peer.SDISTS[suite][1]}"
        require(where.is_dir(), "the peer suites are not extracted (run scripts/install_peer_suites.sh)")
        assert all((where / p).is_file() for p in paths), (suite, [p for p in paths if not (where / p).is_file()])


def test_helpers_are_pinned_by_blob_id(tmp_path: Path) -> None:
    """A cached helper whose bytes differ from the tag's blob is refused, not copied into the suite."""
    peer = _peer()
    assert peer._blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git's id of the empty blob
    peer.HELPERS = tmp_path / "helpers"
    (peer.HELPERS / "tests").mkdir(parents=True)
    (peer.HELPERS / "tests" / "__init__.py").write_bytes(b"")
    (peer.HELPERS / "tests" / "conftest.py").write_text("altered\n")
    target = tmp_path / "suite"
    missing = peer.overlay_helpers(target)
    assert "tests/conftest.py" in missing and "tests/__init__.py" not in missing
    assert (target / "tests" / "__init__.py").is_file() and not (target / "tests" / "conftest.py").exists()
