"""Tool and managed-agent calls: each is a ``tool_call`` step, a ``tool_response`` step and a recorded ``tool`` call.

A ToolCallingAgent's calls are announced by the ToolCalls in the run's stream (:func:`on_tool_call`, ordinals
reserved in the model's call order) and run by ``execute_tool_call``, which claims the announced step; calls from
running CodeAgent code come through ``Tool.__call__`` / ``MultiStepAgent.__call__`` (:func:`wrap_tool_call`,
:func:`wrap_agent_call`). The tool_call ends when the tool returns; its tool_response is ``tool_result_of`` it (ERROR
when the tool raised) and, for a managed agent, ``answer_of`` that agent's final_answer. A managed agent's run reads
the manager's call from ``INVOKER`` (an :class:`~._state.Invocation`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from causaltrace import semconv
from causaltrace.instrumentation._emitter import internal_error as emitter_error
from causaltrace.instrumentation._json_text import C_MAKE_ENCODER, one_shot_args
from causaltrace.instrumentation.calls import CallHandle
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._code import begin_code_call, from_code_thread, start_code_execution
from causaltrace.instrumentation.smolagents._model_calls import flush_llm
from causaltrace.instrumentation.smolagents._patches import ensure_patched
from causaltrace.instrumentation.smolagents._state import (
    CURRENT_RUN,
    IN_TOOL,
    INVOKER,
    MAX_CONTENT,
    AgentRun,
    Invocation,
    ToolRec,
    arg,
    call_text,
    guard,
    internal_error,
    text,
)

__all__ = [
    "wrap_agent_call",
    "claim_tool",
    "wrap_execute_tool_call",
    "on_tool_call",
    "on_tool_output",
    "patch_tool_classes",
    "run_tool",
    "wrap_tool_call",
]


def patch_tool_classes(agent: Any) -> None:
    """Wrap ``__call__`` on the class that defines it for each of the agent's tools (a user override included)."""
    for tool in list(getattr(agent, "tools", {}).values()):
        ensure_patched(type(tool), "__call__", wrap_tool_call)


# ----------------------------------------------------------------------------------------------------- hooks


def wrap_execute_tool_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """``ToolCallingAgent.execute_tool_call``: run the tool (or managed agent) of an announced tool_call step."""
    state = CURRENT_RUN.get()
    if state is None or state.agent is not instance:
        return wrapped(*args, **kwargs)
    n = len(args)  # arg(), inline
    name = args[0] if n > 0 else kwargs.get("tool_name")
    arguments = args[1] if n > 1 else kwargs.get("arguments")
    try:  # guard(claim_tool, …), inline: every tool call
        rec = claim_tool(state, str(name), arguments)
    except Exception:
        internal_error(claim_tool)
        rec = None
    if rec is None:
        return wrapped(*args, **kwargs)
    managed = name in (getattr(instance, "managed_agents", None) or {})
    return run_tool(state, rec, wrapped, args, kwargs, managed=managed)


def wrap_tool_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A tool called by the agent's running code (calls from a ToolCallingAgent pass: they are already steps)."""
    state = CURRENT_RUN.get()
    if state is None:
        return from_code_thread(wrap_tool_call, wrapped, instance, args, kwargs)
    if IN_TOOL.get() is not None or state.act.code_exec is None:
        return wrapped(*args, **kwargs)
    name = str(getattr(instance, "name", type(instance).__name__))
    rec = guard(begin_code_call, state, name, acc.call_arguments(instance, args, kwargs))
    if rec is None:
        return wrapped(*args, **kwargs)
    return run_tool(state, rec, wrapped, args, kwargs, managed=False)


def wrap_agent_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A managed agent called by the manager's running code (the ToolCallingAgent path goes through
    ``execute_tool_call``, which has already announced the call)."""
    state = CURRENT_RUN.get()
    if state is None:
        return from_code_thread(wrap_agent_call, wrapped, instance, args, kwargs)
    if IN_TOOL.get() is not None or state.act.code_exec is None:
        return wrapped(*args, **kwargs)
    arguments = {"task": acc.jsonable(arg(args, kwargs, 0, "task"))}
    arguments.update({str(k): acc.jsonable(v) for k, v in kwargs.items() if k != "task"})
    rec = guard(begin_code_call, state, acc.agent_name(instance), arguments)
    if rec is None:
        return wrapped(*args, **kwargs)
    return run_tool(state, rec, wrapped, args, kwargs, managed=True)


# ------------------------------------------------------------------------------------- announced tool calls


def on_tool_call(run: AgentRun, tc: Any) -> None:
    """A ToolCall in the run's stream: the model's call of a tool (or, in a CodeAgent, its code)."""
    if run.act.pending_message is not None:  # flush_llm's own test, first: no call on every item
        flush_llm(run)
    with run.lock:
        if tc.id:
            run.known_ids.append(str(tc.id))
    llm = run.act.llm  # run.produced_by_llm(), inline (every tool call)
    produced = [(llm.step.step_id, "produced_by")] if llm is not None else []
    if run.code_agent and tc.name == "python_interpreter":
        start_code_execution(run, tc, produced)
        return
    arguments = acc.tool_arguments_from_call(tc.arguments)
    try:  # run.ctx.reserve_ordinals, inline (every tool call)
        ordinal: list[int] | None = run.ctx.calls.reserve_ordinals(run.key, "tool", 1)
    except Exception:
        emitter_error("RunContext.reserve_ordinals")
        ordinal = None
    step = run.ctx.start_step(  # run.new_step, inline (every tool call)
        "tool_call", agent=run.name, parent=run.turn, tool_name=str(tc.name), arguments=arguments, call_id=str(tc.id),
        content=call_text(tc.name, arguments)[:MAX_CONTENT], depends_on=produced)
    if step is None:
        raise RuntimeError("could not start a tool_call step")
    with run.lock:
        run.act.tools.append(ToolRec(step, ordinal[0] if ordinal else None, str(tc.name), tc.arguments, arguments,
                                     str(tc.id)))


def on_tool_output(run: AgentRun, out: Any) -> None:
    """A ToolOutput in the run's stream, for a call that bypassed ``execute_tool_call`` (a subclass of the agent
    overrode it): the tool_response is answered from the output."""
    call_id = str(out.id)
    with run.lock:
        for rec in run.act.tools:  # a loop, not next(generator): no frame per resumption
            if rec.call_id == call_id and not rec.claimed:
                rec.claimed = True
                break
        else:
            return
    _tool_done(run, rec, None, None, result=out.output, error=None)


def claim_tool(run: AgentRun, name: str, arguments: Any) -> ToolRec:
    """The tool_call step (from the model's response) that this ``execute_tool_call`` runs."""
    with run.lock:  # the same arguments object first, else equal arguments (loops: no function per test)
        for rec in run.act.tools:
            if not rec.claimed and rec.name == name and rec.raw_arguments is arguments:
                rec.claimed = True
                return rec
        for rec in run.act.tools:
            if not rec.claimed and rec.name == name and (rec.raw_arguments or {}) == (arguments or {}):
                rec.claimed = True
                return rec
    # Not announced by a ToolCall (an agent subclass calling tools itself): a tool_call step of its own.
    args = acc.tool_arguments_from_call(arguments)
    ordinal = run.ctx.reserve_ordinals(run.key, "tool", 1)
    step = run.new_step("tool_call", tool_name=name, arguments=args, content=call_text(name, args)[:MAX_CONTENT],
                        depends_on=run.produced_by_llm())
    return ToolRec(step, ordinal[0] if ordinal else None, name, arguments, args, claimed=True)


# ----------------------------------------------------------------------------------------- running a call


def run_tool(run: AgentRun, rec: ToolRec, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             *, managed: bool) -> Any:
    """Run a tool (or managed agent) call, ``wrapped(*args, **kwargs)``, recording it and its response; the user's
    exception passes through."""
    try:  # guard(_tool_start, …), inline: every tool call
        call, invocation = _tool_start(run, rec, managed)
    except Exception:
        internal_error(_tool_start)
        call, invocation = None, None
    tokens = (IN_TOOL.set(run), INVOKER.set(invocation))
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(_tool_done, run, rec, call, invocation, result=None, error=exc)
        raise
    finally:
        IN_TOOL.reset(tokens[0])
        INVOKER.reset(tokens[1])
    try:  # guard(_tool_done, …), inline
        _tool_done(run, rec, call, invocation, result=result, error=None)
    except Exception:
        internal_error(_tool_done)
    return result


def _tool_start(run: AgentRun, rec: ToolRec, managed: bool) -> tuple[CallHandle | None, Invocation | None]:
    rec.step.set_span_attributes(tool_description(run.agent, rec.name))
    call = None
    if run.ctx.tracing.config.record:  # run.ctx.begin_call, inline (every tool call): a failure leaves it unrecorded
        pattern = run.pattern()
        try:
            call = run.ctx.calls.begin(
                run.key, "tool", {"name": rec.name, "arguments": rec.arguments}, ordinal=rec.ordinal,
                settings={"managed_agent": True} if managed else None, step_id=rec.step.step_id,
                call_id_pattern=pattern,
            )
        except Exception:
            emitter_error("RunContext.begin_call")
    return call, Invocation(rec.step, run, rec.name) if managed else None


def _tool_done(run: AgentRun, rec: ToolRec, call: CallHandle | None, invocation: Invocation | None, *, result: Any,
               error: BaseException | None) -> None:
    rec.step.end()
    deps = [(rec.step.step_id, "tool_result_of")]
    if invocation is not None and invocation.answer_step_id:
        deps.append((invocation.answer_step_id, "answer_of"))
    step = run.ctx.start_step(  # run.new_step, inline (every tool call)
        "tool_response", agent=run.name, parent=run.turn, tool_name=rec.name, call_id=rec.call_id, depends_on=deps)
    if step is None:
        raise RuntimeError("could not start a tool_response step")
    if error is not None:
        message = f"{type(error).__name__}: {error}"
        step.end(error=error, content=message[:MAX_CONTENT], outputs={"result": message, "is_error": True})
        run.act.accounted.add(id(error))
    else:
        if type(result) is str:  # a tool's usual answer: text() and jsonable() of it, inline
            step.end(content=result[:MAX_CONTENT], outputs={"result": result, "is_error": False})
        elif type(result) in _PLAIN_SCALARS:  # a number (or None): the same, inline (text() of None is "")
            step.end(content="" if result is None else str(result)[:MAX_CONTENT],
                     outputs={"result": result, "is_error": False})
        else:
            step.end(content=text(result), outputs={"result": acc.jsonable(result), "is_error": False})
    with run.lock:  # run.observe, inline
        run.observed.append(step.step_id)
    if rec.name == "final_answer":
        run.act.final_tool_response = step.step_id
    if call is not None:
        if error is not None:
            call.finish(error=error)
        else:
            call.finish(result)


#: ``json.dumps(…, ensure_ascii=False, default=str)``'s encoder, made once (dumps builds one per call with these
#: arguments).
_INPUTS_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
#: The types besides str that :func:`acc.jsonable` returns as they are (its ``_SCALARS``).
_PLAIN_SCALARS = frozenset({int, float, bool, type(None)})
_INPUTS_JSON_ARGS = one_shot_args(_INPUTS_JSON)


def tool_description(agent: Any, name: str) -> dict[str, Any]:
    """``tool.description`` / ``gen_ai.tool.description`` of the agent's tool or managed agent called ``name``, and
    its input schema as ``tool.parameters`` (as OpenInference's smolagents instrumentor writes it; the arguments
    are the span's ``input.value``)."""
    tool = (getattr(agent, "tools", None) or {}).get(name) or (getattr(agent, "managed_agents", None) or {}).get(name)
    out: dict[str, Any] = {}
    description = getattr(tool, "description", None)
    if isinstance(description, str) and description:
        out[semconv.OI_TOOL_DESCRIPTION] = out[semconv.GEN_AI_TOOL_DESCRIPTION] = description
    inputs = getattr(tool, "inputs", None)
    if isinstance(inputs, dict):
        out[semconv.OI_TOOL_PARAMETERS] = (  # _INPUTS_JSON.encode's C work straight (.._json_text)
            "".join(C_MAKE_ENCODER({}, *_INPUTS_JSON_ARGS)(inputs, 0)) if _INPUTS_JSON_ARGS is not None
            else _INPUTS_JSON.encode(inputs))
    return out
