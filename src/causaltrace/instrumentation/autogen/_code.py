"""Code executions: ``CodeExecutorAgent.execute_code_block`` is a ``code_execution`` step (code, output, exit code)
that ``executes`` the step carrying the code (the delivered message holding every block, else the turn's last
llm_response); a CodeExecutionEvent whose execution no hook saw still becomes one.
"""

from __future__ import annotations

from typing import Any

from causaltrace.instrumentation._emitter import never_raise
from causaltrace.instrumentation.autogen._access import text_of
from causaltrace.instrumentation.autogen._patches import SWITCH
from causaltrace.instrumentation.autogen._state import TURN, Turn, activated, call_arg
from causaltrace.instrumentation.steps import StepHandle
from causaltrace.schema import StepError

__all__ = ["code_fallback", "wrap_execute_code"]


@never_raise(default=None)
def _begin_code(turn: Turn, blocks: Any) -> StepHandle | None:
    """Start a ``code_execution`` step for ``blocks``, linked to the step that carried their code."""
    if turn.state.closed:
        return None
    blocks = list(blocks or ())
    code = "\n\n".join(getattr(b, "code", str(b)) for b in blocks)
    language = getattr(blocks[0], "language", "") if blocks else ""
    carrier = None
    snippets = [getattr(b, "code", "").strip() for b in blocks if getattr(b, "code", "").strip()]
    for msg, sid in reversed(turn.delivered):
        if sid is not None and snippets and all(s in text_of(msg) for s in snippets):
            carrier = sid
            break
    if carrier is None:
        carrier = turn.last_llm
    return turn.state.track(
        turn.ctx.start_step(
            "code_execution",
            agent=turn.name,
            parent=turn.handle,
            depends_on=[(carrier, "executes")] if carrier else [],
            content=code,
            inputs={"code": code, "language": language},
        )
    )


@never_raise()
def _end_code(turn: Turn, handle: StepHandle | None, result: Any, error: BaseException | None = None) -> None:
    """End a ``code_execution`` step with the result's output and exit code (ERROR for a non-zero exit)."""
    if handle is None:
        return
    if error is not None:
        handle.end(error=error, outputs={"stdout": "", "stderr": "", "exit_code": None, "error": str(error)})
        return
    turn.code_results.append(result)
    exit_code = getattr(result, "exit_code", None)
    output = getattr(result, "output", "")
    output = output if isinstance(output, str) else str(output)
    failed = exit_code not in (0, None)
    error_text = f"exit code {exit_code}" if failed else None
    handle.end(
        status="error" if failed else "ok",
        error=StepError(type="CodeExecutionError", message=f"{error_text}: {output[:500]}") if failed else None,
        outputs={"stdout": output, "stderr": "", "exit_code": exit_code, "error": error_text},
    )
    turn.last_producer = handle.step_id
    turn.memo.observed.append(handle.step_id)


def code_fallback(turn: Turn, result: Any) -> None:
    """A CodeExecutionEvent whose execution no ``execute_code_block`` hook saw."""
    handle = _begin_code(turn, ())
    _end_code(turn, handle, result)


def wrap_execute_code(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``CodeExecutorAgent.execute_code_block``: a code_execution step (code, output, exit code)."""
    turn = TURN.get()
    if not SWITCH.on or turn is None or turn.agent is not instance:
        return wrapped(*args, **kwargs)
    return _execute_code(wrapped, turn, args, kwargs)


async def _execute_code(wrapped: Any, turn: Turn, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``execute_code_block``."""
    handle = _begin_code(turn, call_arg(args, kwargs, 0, "code_blocks", ()))
    try:
        with activated(handle):
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_code(turn, handle, None, exc)
        raise
    _end_code(turn, handle, result)
    return result
