"""A command that needs a framework extra which is not installed says which extra to install, in one line, exit 2
(issue 21: ``bench faults`` without the extras was "internal error: ModuleNotFoundError", exit 1).

The CLI runs as a real process whose ``sitecustomize`` puts a meta-path blocker in front of the import system: the
framework modules then fail to import exactly as when they are not installed (``ModuleNotFoundError`` with
``name`` set), while everything else of the environment stays.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

BLOCKER = '''
import sys


class _Missing:
    """Finds nothing for the blocked top-level modules: they import as if not installed."""

    blocked = set({blocked!r})

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Missing())
'''


def _cli(tmp_path: Path, blocked: set[str], *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(blocked)))
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{SRC}", "CAUSALTRACE_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "causaltrace.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


ALL = {"autogen_agentchat", "autogen_core", "autogen_ext", "smolagents"}


def test_the_blocker_makes_a_framework_missing(tmp_path):
    site = tmp_path / "site"
    _cli(tmp_path, {"smolagents"}, "--help")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{SRC}"}
    done = subprocess.run([sys.executable, "-c", "import smolagents"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "ModuleNotFoundError: No module named 'smolagents'" in done.stderr


@pytest.mark.parametrize(("blocked", "extra"), [(ALL, None), ({"smolagents"}, "smolagents"),
                                                 ({"autogen_agentchat", "autogen_core", "autogen_ext"}, "autogen")])
def test_bench_faults_without_the_extras_names_the_extra(tmp_path, blocked, extra):
    done = _cli(tmp_path, blocked, "bench", "faults", "--no-repair")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("causaltrace: error: "), done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    extras = {extra} if extra else {"smolagents", "autogen"}
    assert any(f"pip install 'causaltrace[{e}]'" in lines[0] for e in extras), lines[0]


@pytest.mark.parametrize(("framework", "blocked", "extra"), [("smolagents", {"smolagents"}, "smolagents"),
                                                              ("autogen", ALL - {"smolagents"}, "autogen")])
def test_demo_without_its_framework_names_the_extra(tmp_path, framework, blocked, extra):
    done = _cli(tmp_path, blocked, "demo", "--framework", framework, "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("causaltrace: error: ") and f"pip install 'causaltrace[{extra}]'" in lines[-1], \
        done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


def test_a_missing_module_that_is_no_extra_stays_an_internal_error(tmp_path):
    done = _cli(tmp_path, {"rich"}, "runs")
    assert done.returncode == 1 and "internal error: ModuleNotFoundError" in done.stderr
