"""SandboxCodeExecutor: AutoGen code blocks run in the causaltrace sandbox (issue 7, ARCHITECTURE decision 7)."""

from __future__ import annotations

import sys

import pytest
from autogen_agentchat.agents import ApprovalRequest, ApprovalResponse, CodeExecutorAgent
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock, CodeExecutor

from causaltrace.replay.sandbox import SubprocessSandbox

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def executor():
    from causaltrace.instrumentation.autogen import SandboxCodeExecutor

    return SandboxCodeExecutor(SubprocessSandbox(), timeout_s=10, memory_mb=256, files={"data.txt": b"21"})


def test_is_lazily_imported() -> None:
    import subprocess

    code = "import causaltrace.replay.sandbox as s, sys; print('autogen_core' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


async def test_python_and_shell_blocks(executor) -> None:
    assert isinstance(executor, CodeExecutor)
    blocks = [
        CodeBlock(code="print(int(open('data.txt').read()) * 2)", language="python"),
        CodeBlock(code="echo shell says $(cat data.txt); id -u", language="sh"),
        CodeBlock(code="import sys; print('warn', file=sys.stderr)", language="py"),
    ]
    result = await executor.execute_code_blocks(blocks, CancellationToken())
    assert result.exit_code == 0
    assert result.output == "42\nshell says 21\n65534\nwarn\n"


async def test_stops_at_the_first_failure(executor) -> None:
    blocks = [
        CodeBlock(code="print('first')", language="python"),
        CodeBlock(code="raise SystemExit(4)", language="python"),
        CodeBlock(code="print('never')", language="python"),
    ]
    result = await executor.execute_code_blocks(blocks, CancellationToken())
    assert result.exit_code == 4
    assert result.output == "first\n"


async def test_unknown_language_and_timeout(executor) -> None:
    unknown = await executor.execute_code_blocks([CodeBlock(code="x", language="cobol")], CancellationToken())
    assert (unknown.exit_code, unknown.output) == (1, "\nunknown language cobol")
    from causaltrace.instrumentation.autogen import SandboxCodeExecutor

    quick = SandboxCodeExecutor(SubprocessSandbox(), timeout_s=1, memory_mb=256)
    timed = await quick.execute_code_blocks(
        [CodeBlock(code="while True: pass", language="python")], CancellationToken()
    )
    assert timed.exit_code == 124 and timed.output.endswith("\nTimeout")


async def test_without_a_sandbox_it_runs_in_the_registered_default_sandbox() -> None:
    from causaltrace.instrumentation.autogen import SandboxCodeExecutor
    from causaltrace.protocols import default_sandbox

    executor = SandboxCodeExecutor(timeout_s=10, memory_mb=256)
    assert executor.sandbox is default_sandbox() and isinstance(executor.sandbox, SubprocessSandbox)
    result = await executor.execute_code_blocks(
        [CodeBlock(code="print(6 * 7)", language="python")], CancellationToken()
    )
    assert (result.exit_code, result.output) == (0, "42\n")


async def test_with_a_real_code_executor_agent(executor) -> None:
    def approve(request: ApprovalRequest) -> ApprovalResponse:
        return ApprovalResponse(approved=True, reason="runs in the causaltrace sandbox")

    agent = CodeExecutorAgent("executor", code_executor=executor, approval_func=approve)
    message = TextMessage(content="Run this:\n```python\nimport os\nprint(6 * 7, os.getuid())\n```\n", source="user")
    response = await agent.on_messages([message], CancellationToken())
    assert response.chat_message.content.strip() == "42 65534"
