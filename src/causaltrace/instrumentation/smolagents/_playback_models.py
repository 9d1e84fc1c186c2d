"""The models of a smolagents playback: :class:`PlaybackModel` (and :class:`StreamingPlaybackModel` for agents that
stream) wrapping the factory-built model and serving the recording through the injected playback core; live calls
go to the factory's model (temperature 0 and a seed on API models) or ``LiteLLMModel(live_override)``.

This module imports smolagents at its top; ``_playback.py`` imports it only when a playback is assembled.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from typing import Any

from smolagents.models import (
    ApiModel,
    ChatMessageStreamDelta,
    ChatMessageToolCallFunction,
    ChatMessageToolCallStreamDelta,
    LiteLLMModel,
    Model,
    agglomerate_stream_deltas,
    parse_json_if_needed,
)

from causaltrace.instrumentation._playback_common import exception_of
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._model_calls import model_args
from causaltrace.instrumentation.smolagents._playback_keys import key_and_pattern
from causaltrace.protocols import PlaybackCore, PlaybackDecision
from causaltrace.recording import canonicalize_request, request_hash

__all__ = ["LIVE_SEED", "ModelPlayback", "PlaybackModel", "StreamingPlaybackModel", "prepare_live"]

#: The seed live API-model calls get during a replay (with temperature 0).
LIVE_SEED = 0


class ModelPlayback:
    """The logic of a playback model (shared by the streaming and non-streaming classes)."""

    def __init__(self, core: PlaybackCore, agent: Any, key: str, inner: Any) -> None:
        self.core = core
        self.agent = agent
        self.key = key
        self.inner = inner
        self.live: Any = None  # LiteLLMModel(live_override), built at the first live call (litellm is slow to load)
        self._lock = threading.Lock()

    def decide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[PlaybackDecision, str, dict[str, Any]]:
        """The core's decision for this call (the canonical request built exactly as the recording builds it)."""
        key, pattern = key_and_pattern(self.agent, self.key)
        self.core.check()
        messages, stop, response_format, tools, extra = model_args(args, kwargs)
        request = acc.llm_request(messages or [], stop, response_format, tools, extra)
        canonical = canonicalize_request(request, call_id_pattern=pattern)
        ordinal = self.core.next_ordinal(key, "llm")
        decision = self.core.decide(key, "llm", ordinal, request_hash(canonical), canonical, "model call")
        return decision, key, request

    def response(self, decision: PlaybackDecision) -> Any:
        """The served or intervened message (a fresh copy), or raise the recorded error."""
        rec = decision.call
        assert rec is not None
        if decision.action == "intervene":
            return self.core.edited_response(rec)
        self.core.count("serve")
        if rec.error is not None and rec.response is None:
            raise exception_of(rec.error)
        return rec.decoded_response()

    def live_model(self) -> Any:
        """The model live calls go to: ``LiteLLMModel(live_override)`` when given, else the factory-built one."""
        override = self.core.live_override
        if override is None:
            return self.inner
        with self._lock:
            if self.live is None:
                self.live = _live_override_model(override)
            return self.live

    def count_live(self) -> None:
        self.core.count("live", llm=not _is_deterministic(self.live_model()))

    def reserve(self, key: str, message: Any, request: dict[str, Any]) -> None:
        """A ToolCallingAgent action response: number its tool calls (unparsed text: at ``parse_tool_calls``)."""
        if not request.get("tools_to_call_from") or not acc.is_tool_calling_agent(self.agent):
            return
        if getattr(message, "tool_calls", None):
            self.reserve_calls(key, message)

    def reserve_calls(self, key: str, message: Any) -> None:
        self.core.reserve(key, [(None, name, arguments) for name, arguments in _response_calls(message)],
                          replace=True)


def _response_calls(message: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for tc in getattr(message, "tool_calls", None) or []:
        fn = tc.function
        try:
            arguments = parse_json_if_needed(fn.arguments)
        except Exception:
            arguments = fn.arguments
        out.append((str(fn.name), acc.tool_arguments_from_call(arguments)))
    return out


class PlaybackModel(Model):
    """A smolagents Model that serves the recording (see ``_playback``'s docstring)."""

    def __init__(self, playback: ModelPlayback) -> None:
        inner = playback.inner
        super().__init__(
            model_id=getattr(inner, "model_id", None),
            flatten_messages_as_text=getattr(inner, "flatten_messages_as_text", False),
            tool_name_key=getattr(inner, "tool_name_key", "name"),
            tool_arguments_key=getattr(inner, "tool_arguments_key", "arguments"),
        )
        self.kwargs = dict(getattr(inner, "kwargs", None) or {})
        self.playback = playback

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        pb = self.playback
        decision, key, request = pb.decide(args, kwargs)
        if decision.action == "live":
            pb.count_live()
            message = pb.live_model().generate(*args, **kwargs)
        else:
            message = pb.response(decision)
        pb.reserve(key, message, request)
        return message

    def parse_tool_calls(self, message: Any) -> Any:
        pb = self.playback
        parsed = pb.live_model().parse_tool_calls(message)
        key, _ = key_and_pattern(pb.agent, pb.key)
        pb.reserve_calls(key, parsed)
        return parsed


class StreamingPlaybackModel(PlaybackModel):
    """:class:`PlaybackModel` for agents that stream (``stream_outputs=True``)."""

    def generate_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        pb = self.playback
        decision, key, request = pb.decide(args, kwargs)
        if decision.action == "live":
            pb.count_live()
            deltas = []
            for delta in pb.live_model().generate_stream(*args, **kwargs):
                deltas.append(delta)
                yield delta
            pb.reserve(key, agglomerate_stream_deltas(deltas), request)
            return
        message = pb.response(decision)
        pb.reserve(key, message, request)
        yield from _as_deltas(message)


def _as_deltas(message: Any) -> Iterator[Any]:
    calls = []
    for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
        arguments = tc.function.arguments
        calls.append(ChatMessageToolCallStreamDelta(
            index=i, id=tc.id, type=tc.type,
            function=ChatMessageToolCallFunction(
                name=tc.function.name,
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
            ),
        ))
    yield ChatMessageStreamDelta(content=message.content if isinstance(message.content, str) else None,
                                 tool_calls=calls or None, token_usage=message.token_usage)


def prepare_live(model: Any) -> Any:
    """Temperature 0 and a seed on API models (they accept them; litellm drops what a provider rejects)."""
    if isinstance(model, ApiModel) and isinstance(getattr(model, "kwargs", None), dict):
        model.kwargs["temperature"] = 0
        model.kwargs.setdefault("seed", LIVE_SEED)
        if isinstance(model, LiteLLMModel):
            model.kwargs.setdefault("drop_params", True)
    return model


def _live_override_model(name: str) -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never download the price map (FACTS.md)
    import smolagents

    return prepare_live(smolagents.LiteLLMModel(model_id=name, temperature=0))


def _is_deterministic(model: Any) -> bool:
    """A model that declares ``deterministic = True`` (the reactive scripted models of ``causaltrace.testing``):
    its live calls do not make a replay nondeterministic, so one replay decides a flip (ARCHITECTURE)."""
    return getattr(model, "deterministic", False) is True
