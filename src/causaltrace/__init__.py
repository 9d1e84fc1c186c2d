"""causaltrace: trace live LLM multi-agent runs as typed, linked OpenTelemetry step spans, find the decisive error
of a failed run, and prove it by replay.

Usage:
    >>> import causaltrace
    >>> with causaltrace.run(task="add 2 and 3", verify="5") as handle:
    ...     handle.report(final_answer="5")   # an instrumented framework reports this itself
    >>> handle.outcome.status
    'success'

Importing this package is light: no framework, litellm, docker or llama_cpp is imported until it is used.
"""

from __future__ import annotations

from typing import Any as _Any

from causaltrace import replay  # the package, callable as replay(...) — see causaltrace/replay/__init__.py
from causaltrace.attribution.engine import diagnose, diagnose_sync
from causaltrace.config import TraceConfig
from causaltrace.exceptions import (
    CausaltraceError,
    InvalidInputError,
    MissingExtraError,
    ReplayDivergence,
    ReplayError,
    RunNotFoundError,
    SandboxError,
    UserError,
)
from causaltrace.instrumentation import export_stats, instrument, uninstrument
from causaltrace.instrumentation.runs import RunHandle, current_run, run
from causaltrace.instrumentation.tracing import configure
from causaltrace.replay import causalflow as _causalflow  # noqa: F401  (registers `causalflow` + the graph hook)
from causaltrace.replay.executor import replay_sync
from causaltrace.replay.repair import RepairResult, repair, repair_sync
from causaltrace.schema import (
    Annotations,
    CodeResult,
    Dependency,
    Diagnosis,
    Finding,
    Intervention,
    Outcome,
    RecordedCall,
    Recording,
    RepairPair,
    ReplayResult,
    Run,
    Step,
    StepError,
    TokenUsage,
    Verdict,
)
from causaltrace.watch import Watch, watch

__version__ = "0.1.0"

# Run marking and the tracing set-up report the package as their home, as httpx does for its public names: their
# reprs, docs and tracebacks name ``causaltrace.run``, not the module that implements them.
for _public in (RunHandle, configure, current_run, export_stats, run):
    _public.__module__ = "causaltrace"
del _public


def instrument_smolagents(tracer_provider: _Any = None, config: TraceConfig | None = None) -> None:
    """Instrument smolagents (``pip install 'causaltrace[smolagents]'``); see ``causaltrace.instrumentation.smolagents``."""
    from causaltrace.instrumentation.smolagents import instrument_smolagents as _instrument

    _instrument(tracer_provider=tracer_provider, config=config)


def uninstrument_smolagents() -> None:
    """Undo :func:`instrument_smolagents`."""
    from causaltrace.instrumentation.smolagents import uninstrument_smolagents as _uninstrument

    _uninstrument()


def instrument_autogen(tracer_provider: _Any = None, config: TraceConfig | None = None) -> None:
    """Instrument AutoGen AgentChat (``pip install 'causaltrace[autogen]'``); see
    ``causaltrace.instrumentation.autogen``."""
    from causaltrace.instrumentation.autogen import instrument_autogen as _instrument

    _instrument(tracer_provider=tracer_provider, config=config)


def uninstrument_autogen() -> None:
    """Undo :func:`instrument_autogen`."""
    from causaltrace.instrumentation.autogen import uninstrument_autogen as _uninstrument

    _uninstrument()

__all__ = [
    "Annotations",
    "CausaltraceError",
    "CodeResult",
    "Dependency",
    "Diagnosis",
    "Finding",
    "Intervention",
    "InvalidInputError",
    "MissingExtraError",
    "Outcome",
    "RecordedCall",
    "Recording",
    "RepairPair",
    "ReplayDivergence",
    "ReplayError",
    "ReplayResult",
    "Run",
    "RunHandle",
    "RunNotFoundError",
    "SandboxError",
    "Step",
    "StepError",
    "TokenUsage",
    "TraceConfig",
    "UserError",
    "Verdict",
    "__version__",
    "configure",
    "current_run",
    "diagnose",
    "diagnose_sync",
    "replay",
    "replay_sync",
    "repair",
    "repair_sync",
    "watch",
    "Watch",
    "RepairResult",
    "export_stats",
    "instrument",
    "instrument_autogen",
    "instrument_smolagents",
    "run",
    "uninstrument",
    "uninstrument_autogen",
    "uninstrument_smolagents",
]
