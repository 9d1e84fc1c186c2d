"""Sandboxes for untrusted code during replay (ARCHITECTURE decision 7; issue 7 "Sandbox").

* :class:`SubprocessSandbox` — bubblewrap (else ``unshare``) + rlimits + per-run pids/memory/cpu cgroups;
* :class:`DockerSandbox` — a locked-down container per run (the ``docker`` extra);
* :class:`PythonWorkerSession` — a persistent sandboxed Python worker with call-backs to the parent (tools,
  managed agents, ``final_answer``), which backs the smolagents CodeAgent executor during replay;
* ``SandboxCodeExecutor`` — an AutoGen ``CodeExecutor`` backed by ``Sandbox.run`` (imports AutoGen on first use).

Both sandboxes implement :class:`causaltrace.protocols.Sandbox`; their workers implement
:class:`causaltrace.protocols.Worker`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from causaltrace.replay.sandbox.docker_sandbox import DockerSandbox, DockerWorker
from causaltrace.replay.sandbox.session import PYWORKER_SOURCE, PythonWorkerSession
from causaltrace.replay.sandbox.subprocess_sandbox import SubprocessSandbox, SubprocessWorker

if TYPE_CHECKING:
    from causaltrace.replay.sandbox.autogen_executor import SandboxCodeExecutor

__all__ = [
    "PYWORKER_SOURCE",
    "DockerSandbox",
    "DockerWorker",
    "PythonWorkerSession",
    "SandboxCodeExecutor",
    "SubprocessSandbox",
    "SubprocessWorker",
]


def __getattr__(name: str) -> Any:
    if name == "SandboxCodeExecutor":  # imports autogen_core: only on first use
        from causaltrace.replay.sandbox.autogen_executor import SandboxCodeExecutor

        return SandboxCodeExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
