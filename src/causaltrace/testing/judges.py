"""A function-backed fake model for the judge (STYLE.md §C, modelled on pydantic-ai's ``FunctionModel``).

Usage::

    from causaltrace.testing.judges import FunctionJudge

    def answer(messages, info):                   # may also be `async def`
        assert "Step Number" not in messages[-1]["content"]
        return '{"agent_name": "WebSurfer", "step_number": 3, "reason": "clicked the wrong link"}'

    fake = FunctionJudge(answer, context_window=16_000)
    diagnosis = await causaltrace.diagnose(run, method="all-at-once", model=fake)
    assert len(fake.calls) == 1 and fake.calls[0].stage_id == "judge"

The function receives the messages exactly as they would be sent and a :class:`CallInfo` (stage id, JSON schema,
call number, max_tokens); it returns the answer text, a dict / list (sent as JSON), or a
:class:`~causaltrace.attribution.judge.JudgeResponse`, or it raises — e.g. ``litellm.RateLimitError`` to exercise
the judge's retries. With ``context_window`` set, a request whose messages count more tokens than that (characters
/ 4, rounded up, the same count the judge's budget uses for non-litellm backends) raises litellm's
``ContextWindowExceededError`` before the function is called, as a real provider would.

``register_function_model(name, fake)`` makes the fake reachable as ``--model function:NAME`` (in-process CLI tests):
importing this module registers the ``function`` scheme in the judge-backend registry
(:func:`causaltrace.protocols.register_judge_backend`), so the judge finds it without importing ``testing``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from causaltrace.attribution.judge_backends import JudgeRequest, JudgeResponse, chars_over_4, import_litellm
from causaltrace.exceptions import UserError
from causaltrace.protocols import register_judge_backend

__all__ = ["CallInfo", "FunctionJudge", "register_function_model", "registered_function_model"]


@dataclass(frozen=True, kw_only=True)
class CallInfo:
    """What the fake model's function learns about a call besides the messages."""

    stage_id: str
    schema: dict[str, Any] | None
    schema_name: str
    number: int
    max_tokens: int
    input_tokens: int
    messages: list[dict[str, str]] = field(repr=False)

    @property
    def prompt(self) -> str:
        """All message contents joined (handy for assertions)."""
        return "\n".join(m["content"] for m in self.messages)

    @property
    def last(self) -> str:
        """The last message's content."""
        return self.messages[-1]["content"] if self.messages else ""


ModelFunction = Callable[[list[dict[str, str]], CallInfo], Any]


class FunctionJudge:
    """A fake judge backend driven by a Python function (module docstring). Records every call in ``calls``."""

    def __init__(
        self,
        function: ModelFunction,
        *,
        name: str | None = None,
        context_window: int | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.function = function
        self.name = name or f"function:{getattr(function, '__qualname__', 'fake')}"
        self._context_window = context_window
        self.delay_s = delay_s
        self.calls: list[CallInfo] = []

    def __repr__(self) -> str:
        return f"FunctionJudge({self.name!r})"

    @property
    def cache_key(self) -> str:
        return f"function:{self.name}"

    @property
    def context_window(self) -> int:
        return self._context_window or 128_000

    def count_tokens(self, text: str) -> int:
        return chars_over_4(text)

    def calls_by_stage(self) -> dict[str, int]:
        """How many calls each stage made."""
        out: dict[str, int] = {}
        for call in self.calls:
            out[call.stage_id] = out.get(call.stage_id, 0) + 1
        return out

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        tokens = sum(chars_over_4(m["content"]) + 4 for m in request.messages)
        info = CallInfo(
            stage_id=request.stage_id,
            schema=request.schema,
            schema_name=request.schema_name,
            number=len(self.calls),
            max_tokens=request.max_tokens,
            input_tokens=tokens,
            messages=[dict(m) for m in request.messages],
        )
        self.calls.append(info)
        if self._context_window is not None and tokens > self._context_window:
            litellm = import_litellm()
            raise litellm.ContextWindowExceededError(
                message=f"This model's maximum context length is {self._context_window} tokens; the request has "
                f"{tokens} tokens",
                model=self.name,
                llm_provider="function",
            )
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        result = self.function(info.messages, info)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, JudgeResponse):
            return result
        text = result if isinstance(result, str) else json.dumps(result)
        return JudgeResponse(text=text, input_tokens=tokens, output_tokens=chars_over_4(text), usd=None)


_REGISTRY: dict[str, FunctionJudge] = {}


def register_function_model(name: str, model: FunctionJudge) -> None:
    """Make ``model`` reachable as ``--model function:NAME`` (or ``model="function:NAME"``)."""
    _REGISTRY[name] = model


def registered_function_model(name: str) -> FunctionJudge:
    """The FunctionJudge registered under ``name`` (UserError otherwise)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UserError(f"no function model registered as {name!r}; known: {sorted(_REGISTRY) or 'none'}") from None


register_judge_backend("function", registered_function_model)
