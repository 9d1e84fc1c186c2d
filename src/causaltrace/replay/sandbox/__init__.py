"""Sandboxes for untrusted code during replay (ARCHITECTURE decision 7; issue 7 "Sandbox").

* :class:`SubprocessSandbox` — bubblewrap (else ``unshare``) + rlimits + per-run pids/memory/cpu cgroups;
* :class:`DockerSandbox` — a locked-down container per run (the ``docker`` extra);
* :class:`PythonWorkerSession` — a persistent sandboxed Python worker with call-backs to the parent (tools,
  managed agents, ``final_answer``), which backs the smolagents CodeAgent executor during replay;

The AutoGen ``CodeExecutor`` backed by ``Sandbox.run`` lives with the AutoGen wing
(:class:`causaltrace.instrumentation.autogen.SandboxCodeExecutor`). Both sandboxes implement :class:`causaltrace.protocols.Sandbox`; their workers implement
:class:`causaltrace.protocols.Worker`.
"""

from __future__ import annotations

from causaltrace.replay.sandbox.docker_sandbox import DockerSandbox, DockerWorker
from causaltrace.replay.sandbox.session import PYWORKER_SOURCE, PythonWorkerSession
from causaltrace.replay.sandbox.subprocess_sandbox import SubprocessSandbox, SubprocessWorker

__all__ = [
    "PYWORKER_SOURCE",
    "DockerSandbox",
    "DockerWorker",
    "PythonWorkerSession",
    "SubprocessSandbox",
    "SubprocessWorker",
]

