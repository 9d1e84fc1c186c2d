"""The model clients of an AutoGen playback: :class:`PlaybackChatCompletionClient` (wraps the factory-built client
and serves the recording through the injected playback core) and :class:`LiteLLMChatCompletionClient` (where live
calls go when ``live_override`` names a litellm model).

This module imports AutoGen at its top; ``_playback.py`` imports it only when a playback is assembled, so importing
the adapter stays free of AutoGen.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from autogen_core import FunctionCall
from autogen_core.models import ChatCompletionClient, CreateResult, RequestUsage

from causaltrace.exceptions import MissingExtraError
from causaltrace.instrumentation._playback_common import exception_of
from causaltrace.instrumentation.autogen._access import (
    client_create_args,
    client_settings,
    create_request,
    parse_arguments,
)
from causaltrace.instrumentation.autogen._playback_keys import live_key
from causaltrace.protocols import PlaybackCore, PlaybackDecision
from causaltrace.recording import canonicalize_request, request_hash

__all__ = ["LIVE_SEED", "ClientPlayback", "LiteLLMChatCompletionClient", "PlaybackChatCompletionClient"]

#: The seed live calls to OpenAI clients get during a replay (with temperature 0).
LIVE_SEED = 0


class ClientPlayback:
    """The logic of one agent's playback client: the request it makes, what the core decides, where live calls go."""

    def __init__(
        self, core: PlaybackCore, key: str, inner: Any, live_override: str | None, *, manager: bool = False
    ) -> None:
        self.core = core
        self.key = key
        self.inner = inner
        self.live_override = live_override
        self.manager = manager
        self.inner_name = type(inner).__name__
        self._override_client: Any = None

    def decide(self, messages: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[PlaybackDecision, str]:
        """The core's decision for this call (the canonical request built exactly as the recording builds it)."""
        self.core.check()
        request = create_request(messages, kwargs)
        canonical = canonicalize_request(request)
        key = live_key(self.key, manager=self.manager, fallback_name=self.inner_name)
        ordinal = self.core.next_ordinal(key, "llm")
        return self.core.decide(key, "llm", ordinal, request_hash(canonical), canonical, "model call"), key

    async def response(self, decision: PlaybackDecision) -> Any:
        """The served or intervened CreateResult (a fresh copy), or raise the recorded error."""
        rec = decision.call
        assert rec is not None
        core = self.core
        if decision.action == "intervene":
            core.release(rec)
            return core.edited_response(rec)
        await core.wait_turn(rec)
        core.check()
        core.count("serve")
        core.release(rec)
        if rec.error is not None and rec.response is None:
            raise exception_of(rec.error)
        return rec.decoded_response()

    def reserve(self, key: str, result: Any) -> None:
        """A model response came back: its tool calls get their ordinals in response order."""
        content = getattr(result, "content", None)
        if not isinstance(content, list):
            return
        calls = [
            (getattr(c, "id", None), str(c.name), parse_arguments(c.arguments))
            for c in content
            if hasattr(c, "arguments") and hasattr(c, "name")
        ]
        self.core.reserve(key, calls)

    def live_client(self) -> Any:
        """Where live calls go: a litellm-backed client when ``live_override`` is given, else the factory's."""
        if self.live_override is None:
            return self.inner
        if self._override_client is None:
            self._override_client = LiteLLMChatCompletionClient(self.live_override, model_info=self.inner.model_info)
        return self._override_client

    def live_kwargs(self, client: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The create arguments of a live call: temperature 0 (and a seed for OpenAI clients) where the client takes
        create arguments; the framework's own arguments otherwise unchanged."""
        out = dict(kwargs)
        if client is self.inner and client_create_args(client):
            extra = dict(out.get("extra_create_args") or {})
            extra.setdefault("temperature", 0)
            if "openai" in type(client).__module__:
                extra.setdefault("seed", LIVE_SEED)
            out["extra_create_args"] = extra
        return out


def is_deterministic(client: Any) -> bool:
    """A client that declares ``deterministic = True`` (the reactive scripted clients of ``causaltrace.testing``):
    its live calls do not make a replay nondeterministic, so one replay decides a flip (ARCHITECTURE)."""
    return getattr(client, "deterministic", False) is True


class _Usage:
    """The last and the total token usage of a client."""

    def __init__(self) -> None:
        self.last = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self.total = RequestUsage(prompt_tokens=0, completion_tokens=0)

    def add(self, usage: Any) -> None:
        if isinstance(usage, RequestUsage):
            self.last = usage
            self.total = RequestUsage(
                prompt_tokens=self.total.prompt_tokens + usage.prompt_tokens,
                completion_tokens=self.total.completion_tokens + usage.completion_tokens,
            )


class PlaybackChatCompletionClient(ChatCompletionClient):
    """A ChatCompletionClient that serves the recording (see ``_playback``'s docstring); it declares the wrapped
    client's ``model_info`` and settings (FACTS.md: else the selector builds a different prompt)."""

    def __init__(self, playback: ClientPlayback) -> None:
        self.playback = playback
        inner = playback.inner
        settings = client_settings(inner)
        #: what the recording side reads as this client's settings: the wrapped client's
        self._create_args = dict(client_create_args(inner))
        self.model = settings.get("model")
        self.temperature = settings.get("temperature")
        self._usage = _Usage()

    def _account(self, key: str, result: Any) -> None:
        self.playback.reserve(key, result)
        self._usage.add(getattr(result, "usage", None))

    async def create(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        pb = self.playback
        decision, key = pb.decide(messages, kwargs)
        if decision.action == "live":
            client = pb.live_client()
            pb.core.count("live", llm=not is_deterministic(client))
            try:
                result = await client.create(messages, **pb.live_kwargs(client, kwargs))
            finally:
                pb.core.release(decision.call)
        else:
            result = await pb.response(decision)
        self._account(key, result)
        return result

    async def create_stream(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        pb = self.playback
        decision, key = pb.decide(messages, kwargs)
        if decision.action == "live":
            client = pb.live_client()
            pb.core.count("live", llm=not is_deterministic(client))
            try:
                async for chunk in client.create_stream(messages, **pb.live_kwargs(client, kwargs)):
                    if isinstance(chunk, CreateResult):
                        self._account(key, chunk)
                    yield chunk
            finally:
                pb.core.release(decision.call)
            return
        result = await pb.response(decision)
        self._account(key, result)
        if isinstance(result.content, str) and result.content:
            yield result.content
        yield result

    async def close(self) -> None:
        await self.playback.inner.close()

    def actual_usage(self) -> Any:
        return self._usage.last

    def total_usage(self) -> Any:
        return self._usage.total

    def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
        return int(self.playback.inner.count_tokens(messages, **kwargs))

    def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
        return int(self.playback.inner.remaining_tokens(messages, **kwargs))

    @property
    def capabilities(self) -> Any:  # type: ignore[override]
        return self.playback.inner.capabilities

    @property
    def model_info(self) -> Any:
        return self.playback.inner.model_info


# ---------------------------------------------------------------------------------- live_override (litellm)


async def acompletion(**kwargs: Any) -> Any:
    """``litellm.acompletion`` (imported on first use, with the price map read from the package: FACTS.md)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:  # the model stages' extra is not installed: one line naming it
        raise MissingExtraError("litellm", "llm") from exc

    return await litellm.acompletion(**kwargs)


def oai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """AutoGen LLMMessages → OpenAI chat messages (what litellm takes)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        kind = type(m).__name__
        content = getattr(m, "content", "")
        if kind == "SystemMessage":
            out.append({"role": "system", "content": str(content)})
        elif kind == "UserMessage":
            text = content if isinstance(content, str) else "\n".join(str(p) for p in content if isinstance(p, str))
            out.append({"role": "user", "content": text})
        elif kind == "AssistantMessage":
            if isinstance(content, str):
                out.append({"role": "assistant", "content": content})
            else:
                calls = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in content
                ]
                out.append({"role": "assistant", "content": getattr(m, "thought", None), "tool_calls": calls})
        elif kind == "FunctionExecutionResultMessage":
            for r in content:
                out.append({"role": "tool", "tool_call_id": r.call_id, "content": str(r.content)})
        else:
            out.append({"role": "user", "content": str(content)})
    return out


def oai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """AutoGen tool schemas → OpenAI function tools."""
    out = []
    for tool in tools:
        schema = tool if isinstance(tool, Mapping) else getattr(tool, "schema", {})
        function = {"name": schema.get("name"), "description": schema.get("description", "")}
        if schema.get("parameters") is not None:
            function["parameters"] = schema["parameters"]
        out.append({"type": "function", "function": function})
    return out


def _create_result(response: Any, usage: RequestUsage) -> CreateResult:
    """A litellm completion as an AutoGen CreateResult."""
    choice = response.choices[0]
    message = choice.message
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        content: Any = [
            FunctionCall(id=str(c.id), name=str(c.function.name), arguments=str(c.function.arguments)) for c in calls
        ]
        finish = "function_calls"
    else:
        content = str(message.content or "")
        reason = str(getattr(choice, "finish_reason", "stop") or "stop")
        finish = reason if reason in ("stop", "length", "content_filter") else "unknown"
    return CreateResult(finish_reason=finish, content=content, usage=usage, cached=False)


class LiteLLMChatCompletionClient(ChatCompletionClient):
    """The live client of a replay with ``live_override``: any litellm model, temperature 0, a seed."""

    def __init__(self, model: str, *, model_info: Any) -> None:
        self.model = model
        self._model_info = model_info
        self._usage = _Usage()

    async def create(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        args: dict[str, Any] = {
            "model": self.model,
            "messages": oai_messages(messages),
            "temperature": 0,
            "seed": LIVE_SEED,
            "drop_params": True,
        }
        tools = oai_tools(kwargs.get("tools") or ())
        if tools:
            args["tools"] = tools
        json_output = kwargs.get("json_output")
        if json_output is True:
            args["response_format"] = {"type": "json_object"}
        elif isinstance(json_output, type):
            args["response_format"] = json_output
        response = await acompletion(**args)
        usage = getattr(response, "usage", None)
        self._usage.add(RequestUsage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        ))
        return _create_result(response, self._usage.last)

    async def create_stream(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        result = await self.create(messages, **kwargs)
        if isinstance(result.content, str) and result.content:
            yield result.content
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> Any:
        return self._usage.last

    def total_usage(self) -> Any:
        return self._usage.total

    def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
        return sum(len(str(m.get("content") or "").split()) for m in oai_messages(messages))

    def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
        return max(0, 100_000 - self.count_tokens(messages))

    @property
    def capabilities(self) -> Any:  # type: ignore[override]
        info = self._model_info
        return {k: info.get(k) for k in ("vision", "function_calling", "json_output")}

    @property
    def model_info(self) -> Any:
        return self._model_info
