"""The frameworks' own test suites, run with causaltrace (issue 21, "The frameworks' own test suites").

Takes AutoGen AgentChat 0.7.5's and smolagents 1.26.0's ``tests/`` from their pinned sdists (FACTS.md "A real
Docker engine, and PostgreSQL": ``pip download --no-deps --no-binary DIST``), runs each suite in its own cached venv
(``~/.cache/causaltrace/peer-suites/venv``, with ``causaltrace[all,dev]`` from this tree and the suites' test
dependencies) in three modes, and diffs the outcome of every test id against the plain run:

* ``plain`` — the suite as its authors run it;
* ``instrumented`` — ``causaltrace.instrument()`` before the first test (a pytest plugin, ``-p``);
* ``wrapped`` — additionally every test's call inside ``causaltrace.run(task=<test id>)``.

Each mode writes to its own temporary ``CAUSALTRACE_HOME``; outcomes come from pytest's JUnit XML. Usage::

    python benchmarks/peer_suites.py [--suite autogen|smolagents] [--mode plain,instrumented,wrapped] [--json OUT]

Prints one table row per suite and mode (passed / failed / skipped / errors, seconds, tests whose outcome differs
from plain) and then the differing test ids. Setting up the venv the first time takes a few minutes (pip).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "causaltrace" / "peer-suites"
VENV = CACHE / "venv"
PY = VENV / "bin" / "python"
SDISTS = {"autogen": ("autogen-agentchat", "0.7.5", "autogen_agentchat"), "smolagents": ("smolagents", "1.26.0",
                                                                                       "smolagents")}
#: what the suites import beyond causaltrace[all,dev] (smolagents' ``test`` and ``vision`` extras, less torch, gradio,
#: mlx and the hosted sandboxes' clients, whose tests skip or fail alike in every mode)
TEST_DEPS = ["autogen-ext[docker,openai,anthropic,mcp]==0.7.5", "mcp>=1.11,<2", "pytest-mock", "pytest-asyncio",
             "pytest-timeout", "numpy", "pandas", "ipython", "pytest-datadir", "mcpadapt", "markdownify", "ddgs",
             "helium", "selenium", "python-dotenv", "websocket-client"]
#: FACTS.md: what the smolagents suite needs deselected here (no internet, no vision / docs extras).
#: ``tests/test_yield_support.py`` is in the sdist but not in the v1.26.0 tag: it imports ``YieldException``, which
#: 1.26.0's executor does not have, so it cannot collect against the version it ships with.
SMOL_ARGS = ["--continue-on-collection-errors", "--ignore", "tests/test_all_docs.py", "--ignore",
             "tests/test_vision_web_browser.py", "--ignore", "tests/test_yield_support.py", "--deselect",
             "tests/test_import.py::test_import_smolagents_without_extras", "-k",
             "not test_visit_webpage and not test_wikipedia_search"]
#: The smolagents sdist lacks the suite's package marker, conftest, fixtures, ``tests/utils`` and test image that
#: eight of its modules import. They are the framework's own files at the pinned tag (v1.26.0, commit
#: 12c1bc820eca50ace6f80a21d90426d41d74f845), pinned here by git blob id, and cached in ``HELPERS`` — never copied
#: into this tree. ``--smolagents-git DIR`` (a clone or mirror of the smolagents repository) fills the cache; without
#: it those eight modules do not collect and the rest of the suite still runs.
SMOL_TAG = "v1.26.0"
SMOL_HELPERS = {"tests/__init__.py": "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
                "tests/conftest.py": "cca27193aa58f4a0b81f08bd2198fb44155c1508",
                "tests/data/000000039769.png": "a3b5225fc3cef5c492cc109aebe883f24941a156",
                "tests/fixtures/agents.py": "61aeb220a598623ac5ce32e8c33609dcd70bee43",
                "tests/fixtures/tools.py": "acdcb4f14d2e6252fb2daf52c2b20d24835c7f68",
                "tests/utils/markers.py": "7efddcb89fd0ed5fce37be60118de9412e670835"}
HELPERS = CACHE / f"smolagents-{SMOL_TAG}-helpers"
MODES = ("plain", "instrumented", "wrapped")

PLUGIN = '''"""causaltrace in a peer suite: instrument() at configure; with MODE=wrapped, each test call in causaltrace.run."""
import os

import pytest

MODE = os.environ.get("CAUSALTRACE_PEER_MODE", "plain")


def pytest_configure(config):
    if MODE in ("instrumented", "wrapped"):
        import causaltrace

        causaltrace.instrument()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if MODE != "wrapped":
        yield
        return
    import causaltrace

    with causaltrace.run(task=item.nodeid):
        yield
'''


def _sh(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def _venv_stamp() -> str:
    """What the venv was built from: this tree's pyproject.toml and the test dependencies (a change rebuilds it)."""
    return hashlib.sha256((REPO / "pyproject.toml").read_bytes() + "\n".join(TEST_DEPS).encode()).hexdigest()


def _blob_id(data: bytes) -> str:
    """Git's blob id of ``data`` (how the helpers are pinned to the tag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def fill_helpers(git_dir: Path) -> None:
    """Cache the smolagents suite's helper files from a smolagents git directory, each by its pinned blob id."""
    for rel, blob in SMOL_HELPERS.items():
        data = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", blob], check=True,
                              capture_output=True).stdout
        (HELPERS / rel).parent.mkdir(parents=True, exist_ok=True)
        (HELPERS / rel).write_bytes(data)


def overlay_helpers(target: Path) -> list[str]:
    """Put the cached helper files into the extracted smolagents suite; returns the ones not cached (or altered)."""
    missing = []
    for rel, blob in SMOL_HELPERS.items():
        cached = HELPERS / rel
        if not cached.is_file() or _blob_id(cached.read_bytes()) != blob:
            missing.append(rel)
            continue
        if not (target / rel).is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cached, target / rel)
    return missing


def setup(smolagents_git: Path | None = None) -> None:
    """The cached venv, the extracted sdists, the smolagents helpers and the plugin (each step skipped when done)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    ready = VENV / ".ready"
    if not ready.exists() or ready.read_text().strip() != _venv_stamp():
        if not PY.exists():
            _sh([sys.executable, "-m", "venv", str(VENV)])
        wheels = CACHE.parent / "wheels"  # the local model's wheel cache; on a cold machine it does not exist yet
        links = ["--find-links", str(wheels)] if wheels.is_dir() else []
        _sh([str(PY), "-m", "pip", "install", "-q", *links, f"{REPO}[all,dev]", *TEST_DEPS])
        ready.write_text(_venv_stamp() + "\n")
    sdists = CACHE / "sdists"
    for name, (dist, version, _) in SDISTS.items():
        target = CACHE / f"{name}-{version}"
        if (target / "tests").is_dir():
            continue
        # the sdist only (``--no-binary`` for the suite's own dist: its build backend may still come as a wheel)
        _sh([str(PY), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", dist, f"{dist}=={version}",
             "-d", str(sdists)])
        archive = next(p for p in sdists.iterdir() if p.name.replace("_", "-").startswith(f"{dist}-{version}"))
        with tarfile.open(archive) as tar, tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            tar.extractall(tmp, filter="data")
            (root,) = Path(tmp).iterdir()
            root.rename(target)
    if smolagents_git is not None:
        fill_helpers(smolagents_git)
    missing = overlay_helpers(CACHE / f"smolagents-{SDISTS['smolagents'][1]}")
    if missing:
        print(f"smolagents {SMOL_TAG} test helpers not cached ({len(missing)} files, e.g. {missing[0]}): the modules "
              "that import them do not collect; fill the cache with --smolagents-git DIR", file=sys.stderr)
    (CACHE / "plugin").mkdir(exist_ok=True)
    (CACHE / "plugin" / "causaltrace_peer_plugin.py").write_text(PLUGIN)


def run_suite(name: str, mode: str, tests: list[str] | None = None) -> dict[str, object]:
    """One suite in one mode: outcomes per test id (from JUnit XML) and the wall time.

    ``tests`` narrows the run to those pytest node ids or paths (relative to the suite's root); default: all.
    """
    dist, version, _ = SDISTS[name]
    where = CACHE / f"{name}-{version}"
    with tempfile.TemporaryDirectory(prefix=f"peer-{name}-{mode}-") as tmp:
        xml = Path(tmp) / "junit.xml"
        env = {**os.environ, "CAUSALTRACE_PEER_MODE": mode, "CAUSALTRACE_HOME": str(Path(tmp) / "home"),
               "PYTHONPATH": f"{CACHE / 'plugin'}{os.pathsep}{REPO / 'src'}", "OTEL_TRACES_EXPORTER": "none"}
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        cmd = [str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "causaltrace_peer_plugin",
               f"--junitxml={xml}", "--timeout", "120", *(tests or ["tests"]),
               *(SMOL_ARGS if name == "smolagents" else [])]
        started = time.perf_counter()
        subprocess.run(cmd, cwd=where, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        seconds = time.perf_counter() - started
        outcomes = _outcomes(xml) if xml.exists() else {}
    return {"suite": name, "mode": mode, "seconds": round(seconds, 1), "outcomes": outcomes}


def _outcomes(xml: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        out[test_id] = ("failed" if "failure" in tags else "error" if "error" in tags else
                        "skipped" if "skipped" in tags else "passed")
    return out


def table(results: list[dict[str, object]]) -> str:
    """The summary table and the test ids whose outcome differs from the plain run of the same suite."""
    plain = {r["suite"]: r["outcomes"] for r in results if r["mode"] == "plain"}
    lines = [f"{'suite':<11} {'mode':<13} {'tests':>5} {'passed':>6} {'failed':>6} {'skipped':>7} {'errors':>6} "
             f"{'seconds':>7} {'differ':>6}"]
    diffs: list[str] = []
    for r in results:
        outcomes: dict[str, str] = r["outcomes"]  # type: ignore[assignment]
        base: dict[str, str] = plain.get(r["suite"], outcomes)  # type: ignore[assignment]
        differ = sorted(t for t in set(base) | set(outcomes) if base.get(t) != outcomes.get(t))
        counts = {k: sum(1 for v in outcomes.values() if v == k) for k in ("passed", "failed", "skipped", "error")}
        lines.append(f"{r['suite']:<11} {r['mode']:<13} {len(outcomes):>5} {counts['passed']:>6} "
                     f"{counts['failed']:>6} {counts['skipped']:>7} {counts['error']:>6} {r['seconds']:>7} "
                     f"{len(differ):>6}")
        diffs += [f"  {r['suite']} {r['mode']}: {t}: plain {base.get(t)} -> {outcomes.get(t)}" for t in differ]
    return "\n".join(lines + (["", "outcomes that differ from plain:", *diffs] if diffs else []))


def main(argv: list[str] | None = None) -> int:
    """Set up, run the chosen suites in the chosen modes, print the table (and write JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=sorted(SDISTS), action="append", help="default: both")
    parser.add_argument("--mode", default=",".join(MODES), help="comma-separated, default: all three")
    parser.add_argument("--setup-only", action="store_true", help="build the venv and extract the suites, then stop")
    parser.add_argument("--json", metavar="OUT", help="write every outcome per test id as JSON")
    parser.add_argument("--smolagents-git", metavar="DIR", type=Path,
                        help=f"a smolagents git directory with tag {SMOL_TAG}: caches the suite's test helpers")
    args = parser.parse_args(argv)
    setup(args.smolagents_git)
    if args.setup_only:
        return 0
    modes = [m for m in args.mode.split(",") if m]
    if "plain" not in modes:
        modes.insert(0, "plain")
    results = [run_suite(s, m) for s in (args.suite or sorted(SDISTS)) for m in modes]
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
