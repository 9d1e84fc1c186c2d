"""Recording fault-suite runs in a module-scoped test store: the environment a module fixture sets up and restores.

Module fixtures that record zoo cases once (``faults_runner.record``) need a store of their own (the per-test home of
conftest.py is function-scoped), no model from the environment, and the frameworks uninstrumented afterwards so the
next module starts clean. One context manager, so each fixture states only which cases it records.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def zoo_home(home: Path) -> Iterator[None]:
    """Record into ``home`` with no ``CAUSALTRACE_MODEL``; uninstrument and restore the environment afterwards."""
    from causaltrace.instrumentation.tracing import reset_tracing
    from causaltrace.testing.faults import runner as faults_runner

    previous = os.environ.get("CAUSALTRACE_HOME")
    os.environ["CAUSALTRACE_HOME"] = str(home)
    model = os.environ.pop("CAUSALTRACE_MODEL", None)
    faults_runner._INSTRUMENTED = False
    try:
        yield
    finally:
        from causaltrace.instrumentation.autogen import uninstrument_autogen
        from causaltrace.instrumentation.smolagents import uninstrument_smolagents

        uninstrument_smolagents()
        uninstrument_autogen()
        reset_tracing()
        faults_runner._INSTRUMENTED = False
        if previous is None:
            os.environ.pop("CAUSALTRACE_HOME", None)
        else:
            os.environ["CAUSALTRACE_HOME"] = previous
        if model is not None:
            os.environ["CAUSALTRACE_MODEL"] = model


def tuning_case(name: str):
    """The fault suite's TUNING-half case ``name`` (a held-out case of that name is never returned)."""
    from causaltrace.testing.faults import all_cases

    return next(c for c in all_cases() if c.name == name and not c.held_out)


async def tuning_runs_and_corrections(name: str, family: str, home: Path):
    """``(case, run, twin, finding, its corrections)`` of the tuning case ``name``: the failing run and its fixed twin
    recorded in ``home``, the run's finding of ``family`` and the corrections derived from it."""
    from causaltrace.replay.corrections import corrections_for, findings_of
    from causaltrace.testing.faults import runner as faults_runner

    case = tuning_case(name)
    with zoo_home(home):
        run = await faults_runner.record(case)
        twin = await faults_runner.record(case, twin=True)
    findings = findings_of(run)
    found = next(f for f in findings if f.family == family)
    return case, run, twin, found, [c for c in corrections_for(run.step(found.step_id), run, findings)
                                    if c.finding == found]
