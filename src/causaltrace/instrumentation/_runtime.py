"""Temporary re-exports of the names ``_runtime`` held before it was split (issue 18, item 6).

Run marking is in :mod:`causaltrace.instrumentation.runs`, step handles in ``steps``, recorded calls in ``calls``,
the tracing set-up in ``tracing``, scopes in ``scope``. Only for branches written against the old module; new code
imports from those modules. Remove once nothing imports ``_runtime``.
"""

from causaltrace.instrumentation.calls import CallHandle
from causaltrace.instrumentation.runs import (
    RunContext,
    RunHandle,
    attach_run,
    current_run,
    run,
    run_scope,
    set_watch_lookup,
    verdict_of,
)
from causaltrace.instrumentation.scope import Scope
from causaltrace.instrumentation.steps import StepHandle, current_step
from causaltrace.instrumentation.tracing import Tracing, configure, get_tracing, reset_tracing

__all__ = [
    "CallHandle",
    "RunContext",
    "RunHandle",
    "Scope",
    "StepHandle",
    "Tracing",
    "attach_run",
    "configure",
    "current_run",
    "current_step",
    "get_tracing",
    "reset_tracing",
    "run",
    "run_scope",
    "set_watch_lookup",
    "verdict_of",
]
