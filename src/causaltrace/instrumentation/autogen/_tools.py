"""Tool calls: a ToolCallRequestEvent's FunctionCalls become ``tool_call`` steps (ordinals reserved in the model's
order), each execution (``AssistantAgent._execute_tool_call``, private; FACTS.md) a recorded call (kind ``tool``) and
a ``tool_response`` (``tool_result_of``; ERROR when ``is_error``; ``answer_of`` what a nested AgentTool / TeamTool
run answered). A result no hook saw (a custom agent's tools) is taken from the ToolCallExecutionEvent.
"""

from __future__ import annotations

from typing import Any

from causaltrace import semconv
from causaltrace.instrumentation._emitter import internal_error, never_raise
from causaltrace.instrumentation.autogen._access import parse_arguments, tool_request
from causaltrace.instrumentation.autogen._patches import SWITCH
from causaltrace.instrumentation.autogen._state import TURN, PendingCall, Turn, activated, step_id_of
from causaltrace.schema import StepError

__all__ = ["start_tool_calls", "tool_result_fallback", "wrap_execute_tool_call"]


def start_tool_calls(turn: Turn, calls: list[Any]) -> None:
    """A ToolCallRequestEvent: one tool_call step per FunctionCall, ordinals reserved in the model's order."""
    ordinals = turn.ctx.reserve_ordinals(turn.key, "tool", len(calls)) or [None] * len(calls)
    deps = [(turn.last_llm, "produced_by")] if turn.last_llm else []
    for call, ordinal in zip(calls, ordinals, strict=False):
        name = getattr(call, "name", "?")
        raw = getattr(call, "arguments", "")
        arguments = parse_arguments(raw)
        handle = turn.ctx.start_step(
            "tool_call",
            agent=turn.name,
            parent=turn.handle,
            depends_on=deps,
            content=f"{name}({raw})",
            tool_name=name,
            arguments=arguments,
            call_id=getattr(call, "id", None),
        )
        if handle is not None:
            state = turn.state
            if len(state.open) > 256:  # state.track, inline (every tool call)
                state.open = [h for h in state.open if not h.ended]
            state.open.append(handle)
            handle.set_span_attributes(tool_description(turn.agent, name))
        turn.calls.append(PendingCall(call, handle, ordinal, arguments))


def tool_description(agent: Any, name: str) -> dict[str, Any]:
    """``tool.description`` / ``gen_ai.tool.description`` of the agent's tool (or handoff) called ``name``: its
    workbenches' tools first, then its handoff tools (workbenches_of, tools_of and handoff_tools_of, inline: loops,
    no list built, every tool call)."""
    workbenches = getattr(agent, "_workbench", None)
    for wb in workbenches if isinstance(workbenches, (list, tuple)) else ():
        tools = getattr(wb, "_tools", None)
        for tool in tools if isinstance(tools, (list, tuple)) else ():
            if getattr(tool, "name", None) == name and getattr(tool, "description", None):
                return {semconv.OI_TOOL_DESCRIPTION: str(tool.description),
                        semconv.GEN_AI_TOOL_DESCRIPTION: str(tool.description)}
    handoffs = getattr(agent, "_handoff_tools", None)
    for tool in handoffs if isinstance(handoffs, list) else ():
        if getattr(tool, "name", None) == name and getattr(tool, "description", None):
            return {semconv.OI_TOOL_DESCRIPTION: str(tool.description),
                    semconv.GEN_AI_TOOL_DESCRIPTION: str(tool.description)}
    return {}


def _claim(turn: Turn, call: Any, call_id: str | None = None, name: str | None = None) -> PendingCall | None:
    """The turn's pending call for this FunctionCall (the same object, else the same id and name), or None."""
    for pending in turn.calls:
        if not pending.done and pending.call is call:
            return pending
    call_id = call_id if call_id is not None else getattr(call, "id", None)
    name = name if name is not None else getattr(call, "name", None)
    for pending in turn.calls:  # ids may repeat within a run: only calls of this turn still in flight match
        if (
            not pending.done
            and getattr(pending.call, "id", None) == call_id
            and getattr(pending.call, "name", name) == name
        ):
            return pending
    return None


def _begin_tool(turn: Turn, call: Any) -> tuple[PendingCall, Any] | None:
    """Start the recorded call of a tool execution; None when the call is not one of the turn's."""
    try:  # never_raise's work in the body: no wrapper frame per call
        if turn.state.closed:
            return None
        pending = _claim(turn, call)
        if pending is None:
            return None
        record = None
        if turn.ctx.tracing.config.record:  # turn.ctx.begin_call, inline (every tool call): a failure leaves the
            request = tool_request(getattr(call, "name", "?"), pending.arguments)  # call unrecorded
            step_id = step_id_of(pending.handle)
            try:
                record = turn.ctx.calls.begin(turn.key, "tool", request, ordinal=pending.ordinal, settings=None,
                                              step_id=step_id, call_id_pattern=None)
            except Exception:
                internal_error("RunContext.begin_call")
        return pending, record
    except Exception:
        internal_error("_begin_tool")
        return None


def _finish_tool(turn: Turn, pending: PendingCall, record: Any, result: Any) -> None:
    """A tool's result: its recorded call finished, its ``tool_call`` ended, a ``tool_response`` step added."""
    try:  # never_raise's work in the body: no wrapper frame per call
        if pending.done or turn.state.closed:
            return
        pending.done = True
        if record is not None:
            record.finish(result)
        if pending.handle is not None:
            pending.handle.end(status="ok")
        content = getattr(result, "content", result)
        content = content if isinstance(content, str) else str(content)
        is_error = bool(getattr(result, "is_error", False))
        deps: list[tuple[str, str]] = []
        if pending.handle is not None:
            deps.append((pending.handle.step_id, "tool_result_of"))
            answer = turn.state.answers.pop(pending.handle.step_id, None)
            if answer:
                deps.append((answer, "answer_of"))
        step = turn.ctx.add_step(
            "tool_response",
            agent=turn.name,
            parent=turn.handle,
            depends_on=deps,
            content=content,
            tool_name=getattr(pending.call, "name", None),
            call_id=getattr(pending.call, "id", None),
            outputs={"result": content, "is_error": is_error},
            status="error" if is_error else "ok",
            error=StepError(type="ToolError", message=content) if is_error else None,
        )
        if step is not None:
            turn.memo.observed.append(step.step_id)
    except Exception:
        internal_error("_finish_tool")


@never_raise()
def _fail_tool(turn: Turn, pending: PendingCall, record: Any, exc: BaseException) -> None:
    """A tool execution that raised: the recorded call and the ``tool_call`` end with the exception."""
    pending.done = True
    if record is not None:
        record.finish(error=exc)
    if pending.handle is not None:
        pending.handle.end(error=exc)


def tool_result_fallback(turn: Turn, result: Any) -> None:
    """A result in a ToolCallExecutionEvent whose execution no hook saw (a custom agent's tools)."""
    pending = _claim(turn, None, getattr(result, "call_id", None), getattr(result, "name", None))
    if pending is None:
        return
    record = turn.ctx.begin_call(
        turn.key,
        "tool",
        tool_request(getattr(pending.call, "name", "?"), pending.arguments),
        ordinal=pending.ordinal,
        step_id=step_id_of(pending.handle),
    )
    _finish_tool(turn, pending, record, result)


def wrap_execute_tool_call(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``AssistantAgent._execute_tool_call`` (private; FACTS.md): one tool execution, handoff tools included."""
    turn = TURN.get()
    if not SWITCH.on or turn is None:
        return wrapped(*args, **kwargs)
    return _execute_tool(wrapped, turn, args, kwargs)


async def _execute_tool(wrapped: Any, turn: Turn, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``_execute_tool_call``."""
    call = kwargs["tool_call"] if "tool_call" in kwargs else (args[0] if args else None)  # call_arg, inline
    begun = _begin_tool(turn, call)
    if begun is None:
        return await wrapped(*args, **kwargs)
    pending, record = begun
    try:
        with activated(pending.handle):  # a nested AgentTool / TeamTool run has this tool_call as parent
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail_tool(turn, pending, record, exc)
        raise
    _finish_tool(turn, pending, record, result[1] if isinstance(result, tuple) and len(result) == 2 else result)
    return result
