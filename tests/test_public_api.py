"""The public API: a curated ``__all__`` (httpx's exported-members test) and a light ``import causaltrace``."""

from __future__ import annotations

import json
import subprocess
import sys

import causaltrace

HEAVY = ("litellm", "autogen_agentchat", "autogen_core", "autogen_ext", "smolagents", "docker", "llama_cpp", "torch")


def test_exported_members_are_exactly_all():
    exported = {name for name in dir(causaltrace) if not name.startswith("_")} - {"annotations"}  # __future__
    modules = {name for name in exported if type(getattr(causaltrace, name)).__name__ == "module"}
    assert exported - modules == set(causaltrace.__all__) - {"__version__"}
    for name in causaltrace.__all__:
        assert getattr(causaltrace, name) is not None, name


def test_run_marking_reports_the_package_as_its_home():
    for obj in (causaltrace.run, causaltrace.RunHandle, causaltrace.configure, causaltrace.export_stats):
        assert obj.__module__ == "causaltrace", obj
    assert repr(causaltrace.RunHandle) == "<class 'causaltrace.RunHandle'>"
    handle = causaltrace.run(task="t")
    assert repr(handle).startswith("<causaltrace.RunHandle object at ")
    assert "_runtime" not in repr(handle) + repr(causaltrace.configure) + repr(causaltrace.export_stats)


def test_import_is_light():
    """``import causaltrace`` loads no framework, litellm, docker or llama_cpp (how long it takes is measured by
    ``benchmarks/bench_import.py``, not asserted here: a timing depends on the machine's load)."""
    code = "import sys; import causaltrace; import json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    modules = json.loads(out.stdout)
    assert "causaltrace" in modules
    loaded_heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert loaded_heavy == []


def test_exception_tree():
    from causaltrace import exceptions as e

    assert issubclass(e.MissingExtraError, e.UserError) and issubclass(e.MissingExtraError, ImportError)
    assert issubclass(e.ReplayDivergence, e.ReplayError) and issubclass(e.SandboxTimeout, TimeoutError)
    assert issubclass(e.JudgeOutputInvalid, e.JudgeError) and issubclass(e.JudgeError, e.AttributionError)
    err = e.MissingExtraError("smolagents", "smolagents")
    assert "pip install 'causaltrace[smolagents]'" in err.message
