"""Model calls: ``create`` / ``create_stream`` of every ChatCompletionClient class (OpenAI, replay, custom) is an
``llm_response`` step and a recorded call (kind ``llm``), owned by the agent turn, the selector manager or the
MagenticOne orchestrator in flight (else the client is the agent), with ``continues`` / ``saw`` / ``observed`` /
``memory_read`` / ``retry_of`` edges. The request is hashed when the call starts, before the framework mutates it;
with ``record=False`` the step's inputs hold the messages.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any

from autogen_core.models import ChatCompletionClient, CreateResult

from causaltrace import semconv
from causaltrace.instrumentation._emitter import internal_error, never_raise
from causaltrace.instrumentation._json_text import C_MAKE_ENCODER, one_shot_args
from causaltrace.instrumentation.autogen._access import create_request, parse_arguments
from causaltrace.instrumentation.autogen._magentic import note_attempt, orchestrator_of, retried_attempt
from causaltrace.instrumentation.autogen._oi import request_attributes, response_attributes
from causaltrace.instrumentation.autogen._patches import CHECKED, SWITCH, patch_defining
from causaltrace.instrumentation.autogen._state import (
    IN_LLM,
    LEVEL,
    MANAGER,
    SETTINGS,
    TURN,
    Memo,
    Orchestrator,
    Turn,
    settings_of,
    state_of,
)
from causaltrace.instrumentation.autogen._streams import StreamHooks, scoped_stream
from causaltrace.instrumentation.runs import CURRENT_RUN, RunContext
from causaltrace.instrumentation.scope import Scope
from causaltrace.instrumentation.steps import StepHandle
from causaltrace.recording import canonicalize_request

__all__ = ["patch_client_class", "wrap_create", "wrap_create_stream"]

#: ``json.dumps(…, sort_keys=True)``'s encoder (dumps builds one per call with a keyword argument).
_ARGUMENTS_JSON = json.JSONEncoder(sort_keys=True)
_ARGUMENTS_JSON_ARGS = one_shot_args(_ARGUMENTS_JSON)


@dataclass(eq=False)
class _LlmCall:
    """One model call in flight: its owner (a :class:`Turn`, a :class:`Manager` / :class:`Orchestrator`, or None
    when the client is the agent), the owner's :class:`Memo`, its ``llm_response`` step and its recorded call."""

    owner: Any
    memo: Memo
    handle: StepHandle | None
    record: Any


def _begin_llm(ctx: RunContext, client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _LlmCall | None:
    """Start one model call: find its owner (turn, manager, orchestrator or the client itself), its dependencies
    (what the owner saw since its last call), the recorded call and the ``llm_response`` step."""
    try:  # never_raise's work in the body: no wrapper frame per call
        state = ctx.adapters.get("autogen")  # state_of, inline (every model call): made when the run began
        if state is None:
            state = state_of(ctx)
        if state.closed:
            return None
        turn = TURN.get()
        mgr = MANAGER.get()
        owner: Any
        if turn is not None and turn.ctx is ctx:
            owner, agent, key, parent, memo = turn, turn.name, turn.key, turn.handle, turn.memo
        elif mgr is not None:
            owner, agent, key, parent, memo = mgr, mgr.name, mgr.key, mgr.parent_id, mgr.memo
        elif (orch := orchestrator_of(ctx, client)) is not None:
            owner, agent, key, parent, memo = orch, orch.name, orch.key, orch.parent_id, orch.memo
        else:  # a model call outside any agent turn (a custom orchestrator): the client is the agent
            level = LEVEL.get()
            agent = type(client).__name__
            key = "/".join((level.path if level is not None and level.ctx is ctx else ()) + (agent,))
            owner, parent, memo = None, (level.parent_id if level is not None and level.ctx is ctx else None), None
            memo = state.memo(key)
        deps: list[tuple[str, str]] = []
        retried = retried_attempt(owner) if isinstance(owner, Orchestrator) else None
        if memo.last_llm and memo.last_llm != retried:
            deps.append((memo.last_llm, "continues"))
        if retried:
            deps.append((retried, "retry_of"))
        for ids, kind in ((memo.saw, "saw"), (memo.observed, "observed"), (memo.memory, "memory_read")):
            for sid in ids:  # loops, not comprehensions: no frame each
                deps.append((sid, kind))
        memo.saw, memo.observed, memo.memory = [], [], []
        messages = kwargs["messages"] if "messages" in kwargs else (args[0] if args else ())  # call_arg, inline
        request = create_request(messages, kwargs)
        try:  # settings_of's lookup, inline (every model call): the settings are made once per client
            settings = SETTINGS.get(weakref.ref(client))
        except TypeError:  # not weak-referenceable: settings_of makes them each time
            settings = None
        if settings is None:
            settings = settings_of(client)
        record = None
        config = ctx.tracing.config
        if config.record:  # ctx.begin_call, inline (every model call): a failure leaves the call unrecorded
            try:
                record = ctx.calls.begin(key, "llm", request, ordinal=None, settings=settings, step_id=None,
                                         call_id_pattern=None)
            except Exception:
                internal_error("RunContext.begin_call")
        if record is not None:
            inputs: dict[str, Any] = {"recording": {"agent_key": key, "kind": "llm", "ordinal": record.ordinal,
                                                    "request_hash": record.request_hash}}
        else:
            inputs = {"messages": canonicalize_request(list(messages))}
        attributes = request_attributes(client, messages, kwargs, genai=config.genai_content_on,
                                        content=config.oi_content)
        metadata: dict[str, Any] = {} if record is not None else {"agent_key": key}
        provider = attributes.get(semconv.OI_LLM_PROVIDER)  # the client's provider, named once (llm.provider)
        if provider is not None:
            metadata["provider"] = provider  # gen_ai.provider.name: the API the client speaks (issue 22)
        model = settings.get("model")
        handle = ctx.start_step(
            "llm_response", agent=agent, parent=parent, depends_on=deps, inputs=inputs, metadata=metadata,
            model=None if model == type(client).__name__ else model,  # a class name is no model id
        )
        if handle is not None:
            if len(state.open) > 256:  # state.track, inline (every model call)
                state.open = [h for h in state.open if not h.ended]
            state.open.append(handle)
            handle.set_span_attributes(attributes)
        if record is not None and handle is not None:
            record.step_id = handle.step_id
        if isinstance(owner, Orchestrator) and handle is not None:
            note_attempt(owner, handle.step_id)
        return _LlmCall(owner, memo, handle, record)
    except Exception:
        internal_error("_begin_llm")
        return None


def _end_llm(llm: _LlmCall, result: Any) -> None:
    """End a model call with its CreateResult: text, tool calls, usage; the owner's last llm_response moves on."""
    try:  # never_raise's work in the body: no wrapper frame per call
        handle = llm.handle
        content = getattr(result, "content", None)
        thought = getattr(result, "thought", None)
        calls: list[dict[str, Any]] = []
        if isinstance(content, str):
            text = content
        else:
            text = thought or ""
            for i, call in enumerate(content or ()):
                calls.append(
                    {
                        "name": getattr(call, "name", "?"),
                        "arguments": parse_arguments(getattr(call, "arguments", "")),
                        "call_alias": f"call#{i}",
                        "call_id": getattr(call, "id", None),
                    }
                )
        outputs: dict[str, Any] = {"text": text, "tool_calls": calls}
        if thought and isinstance(content, str):
            outputs["thought"] = thought
        finish = getattr(result, "finish_reason", None)
        if finish is not None:
            outputs["finish_reason"] = str(finish)
        usage = getattr(result, "usage", None)
        tokens = (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
        if text:
            display = text
        else:  # a loop, not a generator; json.dumps(…, sort_keys=True)'s encoder made once
            shown = []
            for c in calls:
                encoded = ("".join(C_MAKE_ENCODER({}, *_ARGUMENTS_JSON_ARGS)(c["arguments"], 0))
                           if _ARGUMENTS_JSON_ARGS is not None else _ARGUMENTS_JSON.encode(c["arguments"]))
                shown.append(f"{c['name']}({encoded})")
            display = "; ".join(shown)
        if handle is not None:
            config = handle.ctx.tracing.config
            handle.set_span_attributes(response_attributes(result, genai=config.genai_content_on,
                                                           content=config.oi_content))
            handle.end(status="ok", content=display, outputs=outputs, usage=tokens)
        if llm.record is not None:
            llm.record.finish(result)
        step_id = handle.step_id if handle is not None else None
        if step_id is not None:
            llm.memo.last_llm = step_id
            if llm.owner is not None:
                llm.owner.last_llm = step_id
                if isinstance(llm.owner, Turn):
                    llm.owner.last_producer = step_id
                elif isinstance(llm.owner, Orchestrator):
                    llm.owner.last_text = text
    except Exception:
        internal_error("_end_llm")


@never_raise()
def _fail_llm(llm: _LlmCall, exc: BaseException) -> None:
    """A model call that raised: the step and the recorded call end with the exception."""
    if llm.handle is not None:
        llm.handle.end(error=exc)
    if llm.record is not None:
        llm.record.finish(error=exc)


def wrap_create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``<client class>.create``: one llm_response step and one recorded call per model call."""
    if not SWITCH.on or IN_LLM.get():
        return wrapped(*args, **kwargs)
    ctx = CURRENT_RUN.get()
    if ctx is None:
        return wrapped(*args, **kwargs)
    return _create(wrapped, instance, ctx, args, kwargs)


async def _create(wrapped: Any, client: Any, ctx: RunContext, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``create``."""
    llm = _begin_llm(ctx, client, args, kwargs)  # hashes the request now, before the framework mutates it
    if llm is None:
        return await wrapped(*args, **kwargs)
    try:  # _llm_scope, inline (every model call)
        with Scope(((IN_LLM, True),)) if llm.handle is None else llm.handle.activate((IN_LLM, True)):
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail_llm(llm, exc)
        raise
    _end_llm(llm, result)
    return result


def _llm_scope(llm: _LlmCall) -> Scope:
    """The call's step current, and IN_LLM set (a client calling another client inside is one call), while the
    client runs."""
    return Scope(((IN_LLM, True),)) if llm.handle is None else llm.handle.activate((IN_LLM, True))


def wrap_create_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``<client class>.create_stream``: like :func:`wrap_create`; the step ends with the final CreateResult."""
    if not SWITCH.on or IN_LLM.get():
        return wrapped(*args, **kwargs)
    ctx = CURRENT_RUN.get()
    if ctx is None:
        return wrapped(*args, **kwargs)
    return scoped_stream(partial(_stream_hooks, ctx, instance, args, kwargs), wrapped, args, kwargs)  # no lambda frame


def _stream_hooks(ctx: RunContext, client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StreamHooks | None:
    """The wrapped ``create_stream``: the chunks pass through; the step ends with the final CreateResult."""
    llm = _begin_llm(ctx, client, args, kwargs)
    if llm is None:
        return None

    def end(result: Any, error: BaseException | None, closed: bool) -> None:
        if error is not None:
            _fail_llm(llm, error)
        elif result is not None:
            _end_llm(llm, result)
        else:
            _fail_llm(llm, asyncio.CancelledError("the stream was closed before its final result"))

    return StreamHooks(scope=_llm_scope(llm), end=end, result_type=CreateResult, close_in_scope=False)


def patch_client_class(cls: type) -> None:
    """Wrap ``create`` / ``create_stream`` of a ChatCompletionClient class (any client: OpenAI, replay, custom)."""
    if (cls, "create") in CHECKED and (cls, "create_stream") in CHECKED:  # every turn asks: no call in when done
        return
    patch_defining(cls, "create", wrap_create, skip=(ChatCompletionClient,))
    patch_defining(cls, "create_stream", wrap_create_stream, skip=(ChatCompletionClient,))
