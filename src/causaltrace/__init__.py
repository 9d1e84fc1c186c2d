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
from causaltrace.instrumentation._export import export_stats
from causaltrace.instrumentation._runtime import RunHandle, configure, current_run, run
from causaltrace.schema import (
    Annotations,
    CodeResult,
    Dependency,
    Diagnosis,
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

__version__ = "0.1.0"

__all__ = [
    "Annotations",
    "CausaltraceError",
    "CodeResult",
    "Dependency",
    "Diagnosis",
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
    "export_stats",
    "run",
]
