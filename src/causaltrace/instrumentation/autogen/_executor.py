"""``SandboxCodeExecutor``: an AutoGen ``CodeExecutor`` whose code blocks run through ``Sandbox.run``.

ARCHITECTURE decision 7: during replay, AutoGen code executors are replaced by this one, so code steps re-execute
in the sandbox. It mirrors ``LocalCommandLineCodeExecutor``'s result: blocks run in order and stop at the first
failure; the output is each block's stderr then stdout; an unknown language gives exit code 1 and ``unknown
language …``; a timeout gives exit code 124 and ``Timeout``; a cancellation 125 and ``Cancelled`` (the sandboxed
run itself still ends at its own timeout). Python blocks (``python``, ``py``, ``python3``) run as the code;
shell blocks (``sh``, ``bash``, ``shell``) are written to ``script.sh`` and run with ``sh`` (``bash`` when asked
for and present). Each block gets a FRESH work dir seeded with ``files`` (unlike the local executor's shared
``work_dir``: ``Sandbox.run`` returns no files, so nothing a block writes reaches the next one).

Importing this module imports ``autogen_core`` (``MissingExtraError`` naming the ``autogen`` extra when absent);
``causaltrace.instrumentation.autogen`` imports it only when ``SandboxCodeExecutor`` is first used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from causaltrace.exceptions import MissingExtraError
from causaltrace.protocols import Sandbox, default_sandbox

try:
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("autogen-core", "autogen") from exc

__all__ = ["SandboxCodeExecutor"]

_PYTHON = {"python", "py", "python3"}
_SHELL = {"sh", "bash", "shell"}
_RUN_SCRIPT = (
    "import shutil, subprocess, sys\n"
    "shell = {shell!r} if shutil.which({shell!r}) else 'sh'\n"
    "sys.exit(subprocess.call([shell, 'script.sh']))\n"
)


class SandboxCodeExecutor(CodeExecutor):
    """Runs AutoGen code blocks in a causaltrace sandbox.

    Args:
        sandbox: any ``Sandbox``; default the registered default sandbox (:func:`causaltrace.protocols.default_sandbox`:
            replay's shared :class:`~causaltrace.replay.sandbox.SubprocessSandbox`), reached through the trunk, so the
            instrumentation never imports ``replay``.
        timeout_s: wall-clock limit per block.
        memory_mb: memory limit per block.
        files: files written into every block's work dir first.
    """

    SUPPORTED_LANGUAGES = sorted(_PYTHON | _SHELL)

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        *,
        timeout_s: float = 60.0,
        memory_mb: int = 512,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        self.sandbox = sandbox if sandbox is not None else default_sandbox()
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.files = dict(files or {})

    async def execute_code_blocks(
        self, code_blocks: list[CodeBlock], cancellation_token: CancellationToken
    ) -> CodeResult:
        """Run the blocks in order through ``sandbox.run``; stop at the first failure."""
        output = ""
        exit_code = 0
        for block in code_blocks:
            language = block.language.lower()
            if language in _PYTHON:
                code, files = block.code, self.files
            elif language in _SHELL:
                shell = "bash" if language == "bash" else "sh"
                code, files = _RUN_SCRIPT.format(shell=shell), {**self.files, "script.sh": block.code.encode()}
            else:
                exit_code = 1
                output += f"\nunknown language {language}"
                break
            task: asyncio.Future[Any] = asyncio.ensure_future(
                asyncio.to_thread(
                    self.sandbox.run, code, files=files, timeout_s=self.timeout_s, memory_mb=self.memory_mb
                )
            )
            cancellation_token.link_future(task)
            try:
                result = await task
            except asyncio.CancelledError:
                exit_code = 125
                output += "\nCancelled"
                break
            output += result.stderr + result.stdout
            if result.timed_out:
                exit_code = 124
                output += "\nTimeout"
                break
            exit_code = result.exit_code
            if exit_code != 0:
                break
        return CodeResult(exit_code=exit_code, output=output)

    async def start(self) -> None:
        """Nothing to start: every block gets a fresh sandbox."""

    async def stop(self) -> None:
        """Nothing to stop."""

    async def restart(self) -> None:
        """Nothing to restart."""
