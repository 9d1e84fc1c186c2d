"""What an agent turn yields, as steps: chat messages (``message`` / ``handoff``, ``produced_by`` the turn's last
llm_response or code execution), ``reasoning`` (ThoughtEvent), ``memory_access`` (MemoryQueryEvent), and the tool
calls and code executions a turn announces (handed to :mod:`._tools` and :mod:`._code`). Each item once.
"""

from __future__ import annotations

import json
from typing import Any

from autogen_agentchat.base import Response
from autogen_agentchat.messages import (
    BaseChatMessage,
    CodeExecutionEvent,
    HandoffMessage,
    MemoryQueryEvent,
    ModelClientStreamingChunkEvent,
    ThoughtEvent,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)

from causaltrace.instrumentation._emitter import internal_error
from causaltrace.instrumentation.autogen._access import extract_code, handoff_targets, text_of
from causaltrace.instrumentation.autogen._code import code_fallback
from causaltrace.instrumentation.autogen._state import Turn
from causaltrace.instrumentation.autogen._tools import start_tool_calls, tool_result_fallback

__all__ = ["observe"]


def observe(turn: Turn, item: Any, response: bool = False) -> None:
    """Turn one item an agent yielded (event, message, Response) into steps; each item once (``response``: the
    turn's Response message). An event or message of the turn's own agent is its step, in this one call (every item
    a turn yields)."""
    try:  # never_raise's work in the body: no wrapper frame per call
        if turn.state.closed:
            return
        if isinstance(item, Response):
            seen = turn.seen
            for inner in item.inner_messages or ():
                if getattr(inner, "id", None) not in seen:  # what the turn yielded already: no call (its first check)
                    observe(turn, inner)
            observe(turn, item.chat_message, True)
            turn.responded = True
            return
        mid = getattr(item, "id", None)
        if mid is not None:
            if mid in turn.seen:
                return
            turn.seen.add(mid)
        if isinstance(item, ModelClientStreamingChunkEvent):
            return
        if not response and getattr(item, "source", turn.name) != turn.name:
            return  # an inner team's event relayed through this agent: its own turn recorded it
        if isinstance(item, ToolCallRequestEvent):
            start_tool_calls(turn, list(item.content))
        elif isinstance(item, ToolCallExecutionEvent):
            for result in item.content:
                tool_result_fallback(turn, result)
        elif isinstance(item, MemoryQueryEvent):
            _memory(turn, item)
        elif isinstance(item, ThoughtEvent):
            deps = [(turn.last_llm, "produced_by")] if turn.last_llm else []
            step = turn.ctx.start_step(  # ctx.add_step, inline
                "reasoning",
                agent=turn.name,
                parent=turn.handle,
                depends_on=deps,
                content=str(item.content),
                outputs={"text": str(item.content)},
            )
            if step is not None:
                step.end()
        elif isinstance(item, CodeExecutionEvent):
            if not any(r is item.result for r in turn.code_results):
                code_fallback(turn, item.result)
        elif isinstance(item, BaseChatMessage):
            if mid is not None and mid in turn.state.msg_steps:
                return
            if response or item.source == turn.name:
                _message(turn, item)
            if response:
                turn.responded = True
    except Exception:
        internal_error("observe")


def _message(turn: Turn, msg: Any) -> None:
    """A chat message as a ``message`` or ``handoff`` step (the code it carries in ``inputs``)."""
    text = text_of(msg)
    handoff = isinstance(msg, HandoffMessage)
    deps = [] if turn.user_input or not turn.last_producer else [(turn.last_producer, "produced_by")]
    outputs: dict[str, Any] = {"text": text}
    if handoff:
        outputs["target"] = msg.target
    code = extract_code(text)
    metadata: dict[str, Any] = {"message_type": type(msg).__name__}
    if handoff:
        metadata["candidates"] = handoff_targets(turn.agent)  # the targets a correction may choose among
    if turn.user_input:
        metadata["user_input"] = True
    step = turn.ctx.start_step(  # ctx.add_step, inline (every chat message)
        "handoff" if handoff else "message",
        agent=turn.name,
        parent=turn.handle,
        depends_on=deps,
        content=text,
        inputs=code or {},
        outputs=outputs,
        metadata=metadata,
    )
    if step is None:
        return
    step.end()
    if getattr(msg, "id", None) is not None:
        turn.state.msg_steps[msg.id] = step.step_id
    if handoff:
        turn.level.handoffs[msg.target] = step.step_id


def _memory(turn: Turn, event: Any) -> None:
    """A MemoryQueryEvent as a ``memory_access`` step, read by the turn's next llm_response."""
    results: list[Any] = []
    for item in event.content or ():
        content = getattr(item, "content", item)
        results.append(content if isinstance(content, (str, dict)) else str(content))
    query = text_of(turn.delivered[-1][0]) if turn.delivered else ""
    step = turn.ctx.add_step(
        "memory_access",
        agent=turn.name,
        parent=turn.handle,
        content="\n".join(r if isinstance(r, str) else json.dumps(r, default=str) for r in results),
        inputs={"query": query},
        outputs={"results": json.loads(json.dumps(results, default=str))},
    )
    if step is not None:
        turn.memo.memory.append(step.step_id)
