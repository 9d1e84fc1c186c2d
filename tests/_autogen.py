"""Test helper for the AutoGen tests: the example team, AutoGen traced in memory, the snapshot shape of a run and a
plain code executor.

    from _autogen import SubprocessExecutor, example, shape, traced_in_memory, traced_and_stored

    @pytest.fixture
    def traced(monkeypatch):
        yield from traced_in_memory(monkeypatch)   # .exporter, .runs (every finished Run), .provider

Import it after the test module's own check that autogen-agentchat is installed (this module imports autogen_core).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from autogen_core.code_executor import CodeExecutor, CodeResult
from opentelemetry.sdk.trace import TracerProvider

from _builders import capture_spans
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
from causaltrace.instrumentation.tracing import get_tracing, reset_tracing
from causaltrace.schema import Run

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))
example: ModuleType = importlib.import_module("autogen_team")  # examples/autogen_team.py


def traced_in_memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """AutoGen instrumented onto an in-memory exporter (store off); ``runs`` collects every finished Run. A fixture's
    body: ``yield from traced_in_memory(monkeypatch)``."""
    provider, exporter = capture_spans()
    instrument_autogen(provider, TraceConfig(store=False))
    collector = get_tracing().collector
    runs: list[Run] = []
    finish = collector.finish_run

    def capture(run_id: str, **fields: Any) -> Run:
        run = finish(run_id, **fields)
        runs.append(run)
        return run

    monkeypatch.setattr(collector, "finish_run", capture)
    yield SimpleNamespace(exporter=exporter, runs=runs, provider=provider)
    uninstrument_autogen()
    reset_tracing()


def traced_and_stored() -> Iterator[None]:
    """AutoGen traced and STORED (the per-test CAUSALTRACE_HOME of conftest.py), spans kept in memory, as replay
    needs. A fixture's body: ``yield from traced_and_stored()``."""
    instrument_autogen(TracerProvider(), TraceConfig())
    yield
    uninstrument_autogen()
    reset_tracing()


def shape(run: Run, *, status: bool = True) -> list[str]:
    """The run's snapshot, one line per step: ``<index> <kind> <agent> <^parent-kind#parent-index>
    [<dep-kind>:<producer index>…] <status>`` (without the status: ``status=False``, for imported traces that
    record none)."""
    by_id = {s.step_id: s for s in run.steps}
    lines = []
    for s in run.steps:
        parent = by_id.get(s.parent_step_id)
        where = f"^{parent.kind}#{parent.index}" if parent else "^root"
        deps = " ".join(f"{d.kind}:{by_id[d.step_id].index}" for d in s.depends_on)
        lines.append(f"{s.index} {s.kind} {s.agent} {where} [{deps}]" + (f" {s.status}" if status else ""))
    return lines


class SubprocessExecutor(CodeExecutor):
    """A tiny code executor: each Python block in a fresh unsandboxed ``python -c`` subprocess. (Importing
    autogen_ext's LocalCommandLineCodeExecutor raises when the ``docker`` package is installed without
    ``asyncio_atexit``, as in causaltrace's ``[all]`` install.)"""

    async def execute_code_blocks(self, code_blocks: Any, cancellation_token: Any) -> CodeResult:
        outputs, exit_code = [], 0
        for block in code_blocks:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", block.code, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await proc.communicate()
            outputs.append(out.decode())
            exit_code = proc.returncode
            if exit_code:
                break
        return CodeResult(exit_code=exit_code, output="".join(outputs))

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def restart(self) -> None:
        return None


async def record_failing(factory: Any = None) -> Run:
    """A failing run of the example team (``example.build_failing`` unless ``factory``), traced and stored with
    ``causaltrace.instrument()`` — the repair tests' starting point (their fixture uninstruments)."""
    import causaltrace

    causaltrace.instrument()
    async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        await (factory or example.build_failing)().run(task=example.TASK)
    assert handle.run.outcome.status == "failure"
    return handle.run


def add_call(run: Run) -> Any:
    """The planted step of the example team: the solver's ``add`` tool call."""
    return next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "add")
