"""CodeAgent code: the code as a ``python_interpreter`` tool_call, its ``code_execution`` step and recorded
``tool`` call, and the calls the running code makes.

The code_execution ``executes`` its tool_call and ends with the print output, the result and whether it was the
final answer (or with the error that stopped it); the next llm_response ``observed`` it. Calls the code makes (a
tool, a managed agent, ``final_answer``) are tool_calls ``produced_by`` the code_execution, numbered in the code's
call order.

Context: smolagents' LocalPythonExecutor runs the code in a thread of its own without copying the context — the
patched ``local_python_executor.timeout`` (:func:`wrap_timeout`) runs that thread in a copy of the caller's context, so
calls made by the code stay in the run (and in its trace). A tool or managed agent that the code calls from a
thread it started itself (``concurrent.futures`` in the code) gets no context at all: it is attributed to the one
agent run whose running code can call that object (:func:`code_caller_of`, a registry of the tools and managed
agents of agents whose code is running).
"""

from __future__ import annotations

import contextvars
import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._patches import Wrapper
from causaltrace.instrumentation.smolagents._state import MAX_CONTENT, AgentRun, ToolRec, call_text
from causaltrace.schema import StepError

__all__ = [
    "begin_code_call",
    "code_caller_of",
    "fail_code_execution",
    "finish_code_execution",
    "from_code_thread",
    "start_code_execution",
    "wrap_timeout",
    "unregister_callees",
]

#: Tools and managed agents that running CodeAgent code can call, by object id. A call from a thread the code
#: started itself (no copied context) is attributed to the one agent run whose running code can call that object.
_CODE_CALLEES: dict[int, list[AgentRun]] = {}
_CALLEES_LOCK = threading.Lock()


def code_caller_of(obj: Any) -> AgentRun | None:
    """The agent run whose running code can call ``obj`` (None when there is none, or more than one)."""
    with _CALLEES_LOCK:
        runs = _CODE_CALLEES.get(id(obj))
        return runs[0] if runs and len(runs) == 1 else None


def _register_callees(run: AgentRun) -> None:
    objects = [*getattr(run.agent, "tools", {}).values(), *getattr(run.agent, "managed_agents", {}).values()]
    with _CALLEES_LOCK:
        for obj in objects:
            _CODE_CALLEES.setdefault(id(obj), []).append(run)
        run.callees = [id(obj) for obj in objects]


def unregister_callees(run: AgentRun) -> None:
    """The run's code no longer runs: calls of its tools / managed agents from context-less threads are not its."""
    with _CALLEES_LOCK:
        for key in run.callees:
            runs = _CODE_CALLEES.get(key)
            if runs and run in runs:
                runs.remove(run)
                if not runs:
                    del _CODE_CALLEES[key]
        run.callees = []


# ------------------------------------------------------------------------------------------ code executions


def start_code_execution(run: AgentRun, tc: Any, produced: list[tuple[str, str]]) -> None:
    """The model's code (a ``python_interpreter`` ToolCall): its tool_call step, then its code_execution step and
    recorded call, which stay open while the code runs."""
    act = run.act
    code = tc.arguments if isinstance(tc.arguments, str) else json.dumps(acc.jsonable(tc.arguments))
    content = code[:MAX_CONTENT]  # once, for both steps (text(), inline: a str)
    call_step = run.ctx.start_step("tool_call", agent=run.name, parent=run.turn, tool_name="python_interpreter",
                                   arguments={"code": code}, call_id=str(tc.id), content=content, depends_on=produced)
    if call_step is None:  # run.new_step, inline (both steps: every code action)
        raise RuntimeError("could not start a tool_call step")
    call_step.end()
    ordinal = run.ctx.reserve_ordinals(run.key, "tool", 1)
    act.code_exec = run.ctx.start_step("code_execution", agent=run.name, parent=run.turn, inputs={"code": code},
                                       call_id=str(tc.id), content=content, depends_on=[(call_step.step_id, "executes")])
    if act.code_exec is None:
        raise RuntimeError("could not start a code_execution step")
    _register_callees(run)
    act.code_call = run.ctx.begin_call(
        run.key, "tool", {"name": "python_interpreter", "arguments": {"code": code}},
        ordinal=ordinal[0] if ordinal else None, settings={"code_execution": True},
        step_id=act.code_exec.step_id,
    )


def finish_code_execution(run: AgentRun, out: Any) -> str | None:
    """The code ran to its end (``ActionOutput`` ``out``): end its step and call; returns the step's id (None when
    no code is running)."""
    act = run.act
    exec_step = act.code_exec
    if exec_step is None:
        return None
    logs = acc.code_logs(act.memory_step)
    exec_step.end(
        content=(logs + ("" if out.is_final_answer else f"\nOut: {out.output}"))[:MAX_CONTENT],
        outputs={"stdout": logs, "stderr": "", "exit_code": 0, "error": None,
                 "result": acc.jsonable(out.output), "is_final_answer": bool(out.is_final_answer)},
    )
    run.observe(exec_step.step_id)
    if act.code_call is not None:
        act.code_call.finish(acc.smol().CodeOutput(output=out.output, logs=logs,
                                                  is_final_answer=bool(out.is_final_answer)))
    act.code_exec, act.code_call = None, None
    return exec_step.step_id


def fail_code_execution(run: AgentRun, memory_step: Any, error: BaseException | None) -> None:
    """The action step ended while its code had not finished (an error stopped it): end its step and call."""
    act = run.act
    exec_step = act.code_exec
    if exec_step is None:
        return
    logs = acc.code_logs(memory_step) if memory_step is not None else ""
    message = str(error) if error is not None else "the code did not finish"
    exec_step.end(
        error=error if error is not None else StepError(type="Error", message=message),
        outputs={"stdout": logs, "stderr": message, "exit_code": 1, "error": message, "result": None},
    )
    run.observe(exec_step.step_id)
    if act.code_call is not None:
        act.code_call.finish(error=error)
    if error is not None:
        act.accounted.add(id(error))


# ------------------------------------------------------------------------------------ calls the code makes


def begin_code_call(run: AgentRun, name: str, arguments: dict[str, Any]) -> ToolRec | None:
    """A call the running code makes (a tool, a managed agent, final_answer): a tool_call ``produced_by`` the
    code_execution, numbered in the code's call order."""
    exec_step = run.act.code_exec
    if exec_step is None:
        return None
    ordinal = run.ctx.reserve_ordinals(run.key, "tool", 1)
    step = run.ctx.start_step("tool_call", agent=run.name, parent=run.turn, tool_name=name, arguments=arguments,
                              content=call_text(name, arguments)[:MAX_CONTENT],  # text(), inline: a str
                              depends_on=[(exec_step.step_id, "produced_by")])
    if step is None:  # run.new_step, inline (every call the code makes)
        raise RuntimeError("could not start a tool_call step")
    return ToolRec(step, ordinal[0] if ordinal else None, name, arguments, arguments, claimed=True)


def from_code_thread(hook: Wrapper, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """A tool / managed agent called in a thread that running code started itself (``concurrent.futures`` in the
    code): no context was copied there, so find the agent run whose running code can call this object."""
    caller = code_caller_of(instance)
    if caller is None or caller.closed:
        return wrapped(*args, **kwargs)
    with caller.entered(force=True):
        return hook(wrapped, instance, args, kwargs)


def wrap_timeout(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """LocalPythonExecutor runs each code snippet through ``timeout(seconds)(fn)()``, in a fresh thread: run it in a
    copy of the caller's context, so the code's tool calls belong to the run and its trace."""
    decorate = wrapped(*args, **kwargs)

    def propagate(fn: Callable[..., Any]) -> Callable[..., Any]:
        context = contextvars.copy_context()

        @functools.wraps(fn)
        def in_context(*a: Any, **k: Any) -> Any:
            return context.run(fn, *a, **k)

        return decorate(in_context)

    return propagate
