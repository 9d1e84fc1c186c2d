"""Model calls: each ``Model.generate`` / ``generate_stream`` of an agent's model is an ``llm_response`` step and a
recorded ``llm`` call.

``generate`` / ``generate_stream`` are wrapped on the class that defines them for ``type(agent.model)`` when a run
starts (:func:`patch_model_class`), so a user subclass that overrides ``generate`` is covered. The llm_response
``continues`` the agent's previous one in this run, ``saw`` the task and plans and ``observed`` the tool responses,
code executions and errors since then; its ``reasoning`` text is a step of its own. A ToolCallingAgent response
whose tool calls smolagents parses out of the text is recorded once parsed (:func:`flush_llm`), so a replay serves
the same ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from causaltrace import semconv
from causaltrace.instrumentation._emitter import internal_error as emitter_error
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._oi import request_attributes, response_attributes
from causaltrace.instrumentation.smolagents._patches import ensure_patched
from causaltrace.instrumentation.smolagents._state import (
    CURRENT_RUN,
    IN_MODEL,
    IN_TOOL,
    MAX_CONTENT,
    AgentRun,
    LLMRec,
    call_text,
    guard,
    internal_error,
)

__all__ = [
    "flush_llm",
    "wrap_generate",
    "wrap_generate_stream",
    "llm_end",
    "llm_error",
    "llm_start",
    "model_args",
    "patch_model_class",
]

_MODEL_ARG_NAMES = ("messages", "stop_sequences", "response_format", "tools_to_call_from")


def patch_model_class(model: Any) -> None:
    """Wrap ``generate`` (and ``generate_stream`` when the model has one) on the class of ``model`` that defines it."""
    ensure_patched(type(model), "generate", wrap_generate)
    if callable(getattr(model, "generate_stream", None)):
        ensure_patched(type(model), "generate_stream", wrap_generate_stream)


# ----------------------------------------------------------------------------------------------------- hooks


def _model_run(instance: Any) -> AgentRun | None:
    """The agent run this model call belongs to (None: not an agent's own call, e.g. nested in a tool)."""
    state = CURRENT_RUN.get()
    if state is None or state.closed or IN_MODEL.get() or IN_TOOL.get() is state:
        return None
    if getattr(state.agent, "model", None) is not instance:
        return None
    return state


def model_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A ``generate`` call's arguments as ``(messages, stop_sequences, response_format, tools_to_call_from,
    extra)``, whether passed by position or by name (the playback model canonicalises them the same way)."""
    n = len(args)  # arg() for each name, inline (every model call)
    get = kwargs.get
    messages = args[0] if n > 0 else get("messages")
    stop = args[1] if n > 1 else get("stop_sequences")
    response_format = args[2] if n > 2 else get("response_format")
    tools = args[3] if n > 3 else get("tools_to_call_from")
    extra = {}
    for key, value in kwargs.items():  # loops, not comprehensions: no frame each
        if key not in _MODEL_ARG_NAMES:
            extra[key] = value
    for i in range(len(_MODEL_ARG_NAMES), n):
        extra[f"arg{i}"] = args[i]
    return messages, stop, response_format, tools, extra


def wrap_generate(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Model.generate``: one llm_response step and one recorded call around the model's work."""
    state = CURRENT_RUN.get()  # _model_run, inline (every model call)
    if (state is None or state.closed or IN_MODEL.get() or IN_TOOL.get() is state
            or getattr(state.agent, "model", None) is not instance):
        return wrapped(*args, **kwargs)
    try:  # guard(llm_start, …), inline: every model call
        rec = llm_start(state, instance, *model_args(args, kwargs))
    except Exception:
        internal_error(llm_start)
        rec = None
    if rec is None:
        return wrapped(*args, **kwargs)
    token = IN_MODEL.set(True)
    try:
        message = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(llm_error, state, rec, exc)
        raise
    finally:
        IN_MODEL.reset(token)
    try:  # guard(llm_end, …), inline
        llm_end(state, rec, message)
    except Exception:
        internal_error(llm_end)
    return message


def wrap_generate_stream(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """``Model.generate_stream``: the step ends when the stream is exhausted, with the agglomerated message."""
    state = _model_run(instance)
    if state is None:
        return wrapped(*args, **kwargs)
    rec = guard(llm_start, state, instance, *model_args(args, kwargs))
    if rec is None:
        return wrapped(*args, **kwargs)
    try:
        stream = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(llm_error, state, rec, exc)
        raise
    return _recorded_stream(state, rec, stream)


def _recorded_stream(state: AgentRun, rec: LLMRec, stream: Iterator[Any]) -> Iterator[Any]:
    deltas: list[Any] = []
    iterator = iter(stream)
    while True:
        token = IN_MODEL.set(True)  # while the model works (not across our yields): nested model calls pass
        try:
            delta = next(iterator)
        except StopIteration:
            break
        except BaseException as exc:
            guard(llm_error, state, rec, exc)
            raise
        finally:
            IN_MODEL.reset(token)
        deltas.append(delta)
        yield delta
    message = guard(acc.smol().agglomerate_stream_deltas, deltas)
    guard(llm_end, state, rec, message)


# -------------------------------------------------------------------------------------------- the steps


def llm_start(run: AgentRun, model: Any, messages: Any, stop: Any, response_format: Any, tools: Any,
              extra: dict[str, Any]) -> LLMRec:
    """Start the llm_response step (with its dependencies) and the recorded call of one model call."""
    phase = run.phase
    with run.lock:
        deps: list[tuple[str, str]] = [(run.prev_llm, "continues")] if run.prev_llm else []
        for sid in run.saw:  # loops, not comprehensions: no frame each
            deps.append((sid, "saw"))
        for sid in run.observed:
            deps.append((sid, "observed"))
        run.saw.clear()
        run.observed.clear()
    schemas = acc.tool_schemas(tools)  # once: the recorded request and the span's llm.tools.* both use them
    config = run.ctx.tracing.config
    # the messages read once: their canonical form for the recording, their OpenInference form for the span
    plain: list[dict[str, Any]] | None = [] if config.oi_content or config.genai_content_on else None
    request = acc.llm_request(messages or [], stop, response_format, tools, extra, schemas, plain)
    call = None
    if config.record:  # run.ctx.begin_call, inline (every model call): a failure leaves the call unrecorded
        settings, pattern = acc.model_settings(model), run.pattern()
        try:
            call = run.ctx.calls.begin(run.key, "llm", request, ordinal=None, settings=settings, step_id=None,
                                       call_id_pattern=pattern)
        except Exception:
            emitter_error("RunContext.begin_call")
    if call is not None:
        inputs: dict[str, Any] = {
            "recording": {"agent_key": run.key, "kind": "llm", "ordinal": call.ordinal,
                          "request_hash": call.request_hash},
            "message_count": len(messages or []),
        }
    else:
        inputs = {"messages": request["messages"]}
    attributes = request_attributes(model, plain or [], tools, stop, extra, schemas=schemas,
                                    genai=config.genai_content_on, content=config.oi_content)
    metadata: dict[str, Any] = {"phase": phase} if phase != "action" else {}
    provider = attributes.get(semconv.OI_LLM_PROVIDER)  # the model class's provider, named once (llm.provider)
    if provider is not None:
        metadata["provider"] = provider  # gen_ai.provider.name: the API the model class speaks (issue 22)
    model_id = getattr(model, "model_id", None)  # a class name is no model id
    step = run.ctx.start_step(  # run.new_step, inline (every model call)
        "llm_response", agent=run.name, parent=run.turn, depends_on=deps, model=str(model_id) if model_id else None,
        inputs=inputs, metadata=metadata or None)
    if step is None:
        raise RuntimeError("could not start a llm_response step")
    step.set_span_attributes(attributes)
    if call is not None:
        call.step_id = step.step_id
    run.prev_llm = step.step_id
    rec = LLMRec(step, call, phase)
    if phase == "action":
        run.act.llm = rec
    elif phase == "planning":
        run.planning_llm = step.step_id
    else:
        run.final_llm = step.step_id
    return rec


def llm_end(run: AgentRun, rec: LLMRec, message: Any) -> None:
    """The model returned ``message``: end its step (or hold it until smolagents has parsed its tool calls)."""
    if rec.phase == "action" and run.tool_calling and not getattr(message, "tool_calls", None):
        # smolagents parses the tool calls out of the text next: record the PARSED message (at the first
        # ToolCall, or when the step ends) so a replay serves the same ids.
        run.act.pending_message = message
        return
    _complete_llm(run, rec, message)


def llm_error(run: AgentRun, rec: LLMRec, error: BaseException) -> None:
    """The model call raised: its step and recorded call end with the error."""
    rec.step.end(error=error)
    if rec.call is not None:
        rec.call.finish(error=error)


def flush_llm(run: AgentRun) -> None:
    """Record the held ToolCallingAgent response, now that smolagents has parsed its tool calls."""
    act = run.act
    if act.pending_message is not None and act.llm is not None:
        message, act.pending_message = act.pending_message, None
        _complete_llm(run, act.llm, message)


def _complete_llm(run: AgentRun, rec: LLMRec, message: Any) -> None:
    calls = acc.message_tool_calls(message)
    if calls:
        with run.lock:
            for c in calls:  # a loop, not a generator (one frame per resumption)
                if c["id"]:
                    run.known_ids.append(c["id"])
    content_text = acc.message_text(message)
    usage = getattr(message, "token_usage", None)
    announced = []  # a loop, not a comprehension: no frame (every model call)
    for i, c in enumerate(calls):
        announced.append({"name": c["name"], "arguments": c["arguments"], "call_alias": f"call#{i}", "id": c["id"]})
    outputs = {"text": content_text, "tool_calls": announced}
    outputs.update(_response_facts(getattr(message, "raw", None)))
    content = content_text or "\n".join([call_text(c["name"], c["arguments"]) for c in calls])
    config = run.ctx.tracing.config
    rec.step.set_span_attributes(response_attributes(message, genai=config.genai_content_on,
                                                     content=config.oi_content))
    rec.step.end(
        content=content[:MAX_CONTENT],  # text(), inline: a str
        outputs=outputs,
        usage=(int(usage.input_tokens), int(usage.output_tokens)) if usage is not None else None,
    )
    if rec.call is not None:
        rec.call.finish(acc.chat_message_copy(message))
    if rec.phase == "action":
        thought = acc.reasoning_text(run.agent, message, text=content_text, code_agent=run.code_agent)
        if thought:
            step = run.ctx.start_step(  # run.new_step, inline (every model call of an action step)
                "reasoning", agent=run.name, parent=run.turn, content=thought[:MAX_CONTENT], outputs={"text": thought},
                depends_on=[(rec.step.step_id, "produced_by")])
            if step is None:
                raise RuntimeError("could not start a reasoning step")
            step.end()


def _response_facts(raw: Any) -> dict[str, Any]:
    """The response model and finish reason of a provider's raw response (an OpenAI-style ChatCompletion object or
    dict; ``gen_ai.response.model`` / ``.finish_reasons``), when it carries them."""
    out: dict[str, Any] = {}
    if raw is None:
        return out
    try:
        is_dict = isinstance(raw, dict)
        model = raw.get("model") if is_dict else getattr(raw, "model", None)
        if isinstance(model, str) and model:
            out["response_model"] = model
        choices = raw.get("choices") if is_dict else getattr(raw, "choices", None)
        if choices:
            first = choices[0]
            finish = first.get("finish_reason") if isinstance(first, dict) else getattr(first, "finish_reason", None)
            if isinstance(finish, str) and finish:
                out["finish_reason"] = finish
    except Exception:  # a raw response of another shape: nothing to add
        return {}
    return out
