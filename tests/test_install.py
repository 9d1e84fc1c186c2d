"""A light, honest install (issue 33 item 6).

* ``import causaltrace`` in a fresh interpreter loads none of the optional heavy packages — litellm (the ``llm``
  extra), the OpenAI client, the frameworks, the Docker SDK, the PostgreSQL driver, llama.cpp, jinja2, pandas —
  even though this test's environment has all of them installed.
* Without litellm (the base install) the demo still runs, and a model stage says in one line which extra to
  install (a real process whose imports of litellm fail as when it is not installed: test_missing_extras.py's
  blocker).
* Every lower bound pyproject.toml declares holds: the venv scripts/install_lower_bounds.sh builds with each of
  them pinned (base dependencies and runtime extras) has exactly those versions, imports causaltrace and the
  extras' packages, and traces both example teams with this checkout's sources.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

from conftest import require

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
LOWER_VENV = Path(os.environ.get("CAUSALTRACE_LOWER_BOUNDS_VENV",
                                 Path.home() / ".cache" / "causaltrace" / "lower-bounds" / "venv"))
#: top-level modules ``import causaltrace`` must not load (imported where they are used)
HEAVY = ("litellm", "openai", "autogen", "autogen_agentchat", "autogen_core", "autogen_ext", "smolagents", "docker",
         "psycopg", "llama_cpp", "jinja2", "pandas")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "CAUSALTRACE_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)}


def _run(python: Path | str, *argv: str, home: Path) -> str:
    done = subprocess.run([str(python), *argv], env=_env(home), cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_import_causaltrace_loads_no_optional_heavy_package(tmp_path):
    installed = [name for name in HEAVY if _run(sys.executable, "-c", f"import importlib.util as u; "
                                                f"print(u.find_spec({name!r}) is not None)", home=tmp_path).strip()
                 == "True"]
    assert {"litellm", "openai", "smolagents", "autogen_agentchat"} <= set(installed)  # the check can fail here
    loaded = json.loads(_run(sys.executable, "-c", "import json, sys, causaltrace; print(json.dumps(sorted(sys.modules)))",
                             home=tmp_path))
    heavy = sorted({m for m in loaded if m.split(".")[0] in HEAVY or m.startswith("autogen")})
    assert heavy == []


def test_every_declared_lower_bound_imports_and_traces_both_example_teams(tmp_path):
    python = LOWER_VENV / "bin" / "python"
    require(python.exists(), f"the lower-bound venv {LOWER_VENV} is not installed (bash scripts/install_lower_bounds.sh)")
    bounds = json.loads(_run(sys.executable, "scripts/lower_bounds.py", "--json", home=tmp_path))
    versions = json.loads(_run(python, "-c", "import importlib.metadata as m, json, sys; "
                                             "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))",
                               *bounds, home=tmp_path))
    stale = {name: (versions[name], bound) for name, bound in bounds.items() if Version(versions[name]) != Version(bound)}
    assert not stale, f"the lower-bound venv does not hold the declared bounds (rebuild it: bash " \
                      f"scripts/install_lower_bounds.sh): {stale}"
    _run(python, "-c", "import causaltrace, litellm, docker, psycopg, smolagents, autogen_agentchat, autogen_ext."
                       "models.openai", home=tmp_path)
    for example in ("examples/autogen_team.py", "examples/smolagents_agents.py"):
        _run(python, example, home=tmp_path)
    runs = json.loads(_run(python, "-m", "causaltrace.cli", "runs", "--json", home=tmp_path))
    assert sorted(r["framework"] for r in runs) == ["autogen", "smolagents"]
    assert all(r["status"] == "success" and r["steps"] > 5 for r in runs)


def test_without_litellm_the_demo_runs_and_a_model_stage_names_the_llm_extra(tmp_path, monkeypatch):
    from test_missing_extras import _cli

    blocked = {"litellm"}
    demo = _cli(tmp_path, blocked, "demo", "--framework", "smolagents", "--out", str(tmp_path / "out"))
    assert demo.returncode == 0, demo.stderr[-2000:]
    run_id = _cli(tmp_path, blocked, "import", str(ROOT / "examples" / "sample_run.otlp.jsonl"), "--format",
                  "otlp-json").stdout.strip()
    monkeypatch.setenv("CAUSALTRACE_ALLOW_MODEL_REQUESTS", "1")  # litellm cannot load, so no request can be made;
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")  # and none would reach a server
    done = _cli(tmp_path, blocked, "diagnose", run_id, "--model", "openai/gpt-4o-mini")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "causaltrace: error: this feature requires 'litellm'; install it with: pip install 'causaltrace[llm]'"]
