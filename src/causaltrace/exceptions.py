"""The one exception hierarchy of causaltrace.

Every error the library raises on purpose is a :class:`CausaltraceError`; each class says *when* it is raised and
keeps its text in ``.message``. Third-party exceptions are translated at the boundary with ``raise ... from exc``.
Instrumentation wrappers never raise any of these into user code (ARCHITECTURE decision 4). The CLI prints a
``UserError`` as one line and exits 2; any other error exits 1.

``StoreError`` is a ``UserError``: every way a store cannot be used (a path that is a directory or another
application's file, a newer schema version, corrupt pages, an unwritable directory, a lock held too long) is a fact
about the user's file or machine that the message names and the user can act on, not a bug of causaltrace.

```
CausaltraceError
├── UserError                     misuse or bad configuration: the user can fix it
│   ├── MissingExtraError         an optional dependency is not installed; names the pip extra
│   ├── RunNotFoundError          a run id (or prefix) is not in the store
│   ├── RunExistsError            an import would overwrite a stored run with other content (without --replace)
│   ├── InvalidInputError         malformed input (a trace file, a JSON body); names the field
│   └── StoreError                the SQLite store cannot be opened, migrated, read or written
├── InstrumentationError          raised only by explicit API calls (instrument/uninstrument), never from wrappers
├── TraceAssemblyError            spans or steps cannot form a valid Run
│   ├── CycleInTraceError         a dependency points forward or forms a cycle
│   └── OrphanStepError           a dependency or parent names a step the run does not have
├── AttributionError              a diagnosis cannot be computed
│   └── JudgeError                an LLM call of a judge failed (wraps litellm's exception)
│       └── JudgeOutputInvalid    the model's answer could not be parsed or validated
└── ReplayError                   a replay cannot be carried out
    ├── ReplayDivergence          a replayed request before the intervention differs from the recording
    ├── ReplayExhausted           the recording has no response left for a request that must be served
    └── SandboxError              the sandbox itself cannot start (code failures are CodeResults, not errors)
        ├── SandboxTimeout        the sandbox did not answer in time (also a TimeoutError)
        └── SandboxViolation      the sandbox refused or killed the code (limit, forbidden call)
```
"""

from __future__ import annotations

__all__ = [
    "AttributionError",
    "CausaltraceError",
    "CycleInTraceError",
    "InstrumentationError",
    "InvalidInputError",
    "JudgeError",
    "JudgeOutputInvalid",
    "MissingExtraError",
    "OrphanStepError",
    "ReplayDivergence",
    "ReplayError",
    "ReplayExhausted",
    "RunExistsError",
    "RunNotFoundError",
    "SandboxError",
    "SandboxTimeout",
    "SandboxViolation",
    "StoreError",
    "TraceAssemblyError",
    "UserError",
]


class CausaltraceError(Exception):
    """Base of every error causaltrace raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UserError(CausaltraceError):
    """Raised when the library is misused or misconfigured in a way the user can fix."""


class MissingExtraError(UserError, ImportError):
    """Raised when an optional dependency is missing; the message names the pip extra that brings it."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"this feature requires {package!r}; install it with: pip install 'causaltrace[{extra}]'")
        self.package = package
        self.extra = extra


class RunNotFoundError(UserError, KeyError):
    """Raised when a run id (or unique prefix) is not in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class RunExistsError(UserError):
    """Raised when an imported run has the id of a stored run with other content (and replacing was not asked)."""


class InvalidInputError(UserError, ValueError):
    """Raised when input (a trace file, a log, an API answer) is malformed; the message names the field."""


class InstrumentationError(CausaltraceError):
    """Raised by explicit instrumentation API calls only, never from inside a wrapper around user code."""


class TraceAssemblyError(CausaltraceError):
    """Raised when steps cannot be assembled into a valid Run."""


class CycleInTraceError(TraceAssemblyError):
    """Raised when a dependency does not point to an earlier step, so the graph would not be a DAG."""


class OrphanStepError(TraceAssemblyError):
    """Raised when a dependency or parent names a step that the run does not contain."""


class StoreError(UserError):
    """Raised when the SQLite store cannot be opened, migrated, read or written; the message names the file."""


class AttributionError(CausaltraceError):
    """Raised when a diagnosis cannot be computed at all (a method that merely fails returns a failed Diagnosis)."""


class JudgeError(AttributionError):
    """Raised when an LLM call made by a judge fails; wraps the litellm exception."""


class JudgeOutputInvalid(JudgeError):
    """Raised when a model's answer cannot be parsed or validated after the bounded repair attempts."""

    def __init__(self, message: str, body: str | None = None) -> None:
        super().__init__(message)
        self.body = body


class ReplayError(CausaltraceError):
    """Raised when a replay cannot be carried out."""


class ReplayDivergence(ReplayError):
    """Raised when a request before the intervened step differs from the recorded one; shows the first difference."""

    def __init__(self, message: str, *, agent_key: str = "", ordinal: int = -1, diff: str = "") -> None:
        super().__init__(message)
        self.agent_key = agent_key
        self.ordinal = ordinal
        self.diff = diff


class ReplayExhausted(ReplayError):
    """Raised when the recording holds no response for a request that must be served from it."""


class SandboxError(ReplayError):
    """Raised when the sandbox itself cannot start; what the code does is reported in a CodeResult instead."""


class SandboxTimeout(SandboxError, TimeoutError):
    """Raised when a sandboxed worker does not answer within its timeout."""


class SandboxViolation(SandboxError):
    """Raised when the sandbox refuses or kills code for breaking a limit or calling something forbidden."""
