"""The LLM judge client: every LLM call of every attribution stage goes through :class:`Judge`.

Usage::

    judge = Judge("gpt-4o-mini")                     # any litellm model; "local" = the loopback llama.cpp server
    answer = await judge.ask(messages, AnswerModel, stage_id="judge", on_call=record)

What it does (issue 5, ARCHITECTURE "The default attribution method"):

* **Any model through litellm.** litellm is imported lazily (never at ``import causaltrace`` time) with
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first, so it never tries to download its price map (FACTS.md
  "litellm offline"). A model is a *backend*: :class:`LiteLLMModel` (a litellm model string, optionally an
  ``api_base``), :class:`~causaltrace.attribution.local_model.LocalModel` (``"local"``) or a test double such as
  :class:`~causaltrace.testing.judges.FunctionJudge`. Backends implement :class:`JudgeModel`.
* **Structured outputs, constrained.** Each stage passes a pydantic model; its JSON schema (with the ``enum`` of
  agent names and ``minimum`` / ``maximum`` or ``enum`` of step indices built per call, see
  :func:`step_index` / :func:`agent_name`) goes to the model as ``response_format`` (``json_schema`` for litellm
  models; llama.cpp's ``json_object`` + ``schema`` grammar for the local server) and is also shown in the prompt.
  A 135M model invents steps unless the grammar forbids it (FACTS.md "A real local LLM"). A backend with a small
  output cap that enforces the schema as a grammar fits it to its answer budget first (:func:`fit_schema`, used by
  the local model) and may show :func:`answer_template` instead of the full schema.
* **Tolerant parsing, bounded repair.** :func:`extract_json` accepts markdown fences, text around the object,
  raw control characters inside strings (llama.cpp's JSON grammar lets newlines through) and truncated JSON (open
  strings / brackets are closed). Enum values are matched leniently (case, surrounding
  whitespace, a speaker suffix such as ``"Orchestrator (thought)"`` → ``"Orchestrator"``). A stage may add a
  ``fallback`` parser for a plain-text format. When the answer still does not validate, the model is asked again
  with the validation error, at most ``max_repairs`` times; then :class:`~causaltrace.exceptions.JudgeOutputInvalid`
  (with the body). The engine turns that into a Diagnosis marked failed — never a crash, never a guess.
* **Retries with backoff** on rate limits and transient server errors (429, 5xx, connection errors): exponential
  backoff with jitter, ``max_retries`` times. Not retried: context-window overflow, authentication, bad requests,
  timeouts (a timed-out local server is still busy; a retry would queue more work).
* **Timeouts** (``timeout_s`` per call, also passed to litellm) and a **concurrency limit** (an
  ``asyncio.Semaphore`` per event loop shared by every diagnosis that uses this Judge).
* **On-disk response cache** under ``$CAUSALTRACE_HOME/cache/llm``: the key is the SHA-256 of the canonical request
  (backend cache key, messages, response format, max_tokens, temperature, seed); the value is the raw text, token
  usage, money and latency of the original call. A rerun makes no model call (a resumed benchmark costs nothing);
  a hit is reported as a call with ``cached=True`` so per-method cost figures stay comparable across reruns.
* **One exception-mapping context manager** (:func:`map_judge_errors`, STYLE.md §E): litellm exceptions become
  :class:`~causaltrace.exceptions.JudgeError` subclasses ``from`` the original.
* **Money** from litellm's price map when the model is in it (``None`` otherwise; 0 for the local model).
* **Kill switch** (STYLE.md §F): with ``CAUSALTRACE_ALLOW_MODEL_REQUESTS=0`` any real model request raises
  :class:`ModelRequestsDisabled` (a UserError, so it is never folded into a failed Diagnosis) — except requests to
  a loopback ``api_base`` (the local model). Cache hits and function-backed fakes are not requests.

Token counting (:meth:`Judge.count_tokens`): ``litellm.token_counter`` for litellm models (it works offline and
falls back to its default tokenizer for models it does not know), characters / 4 (rounded up) for every other
backend unless the backend provides ``count_tokens`` itself. The local model counts characters / 4 and keeps a
25% safety margin in its budget, since SmolLM2's tokenizer is not litellm's.

Where the parts live (issue 18: one concept per module, the judge below 800 lines): the backends, the call errors
and the kill switch in :mod:`.judge_backends`; the output schemas and the budget fitting in :mod:`.judge_schemas`;
the tolerant parsing in :mod:`.judge_parsing`; this module holds the :class:`Judge` (repairs, retries, cache,
concurrency, budgets) and re-exports the names a stage needs, so ``from causaltrace.attribution.judge import …``
stays the one place to import them from.

Backends by name (:func:`resolve_backend`): ``"local"`` → the local llama.cpp model; ``"SCHEME:REST"`` where a
package registered ``SCHEME`` with :func:`causaltrace.protocols.register_judge_backend` → that backend (importing
:mod:`causaltrace.testing.judges` registers ``function:NAME``, so attribution never imports ``testing``); any
other string → :class:`LiteLLMModel`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from causaltrace.attribution.judge_backends import (
    ALLOW_MODEL_REQUESTS_ENV,
    JudgeContextWindowExceeded,
    JudgeModel,
    JudgeRateLimited,
    JudgeRequest,
    JudgeResponse,
    JudgeTimeout,
    LiteLLMModel,
    ModelRequestsDisabled,
    chars_over_4,
    check_model_request_allowed,
    import_litellm,
    is_retryable,
    map_judge_errors,
)
from causaltrace.attribution.judge_parsing import Fallback, extract_json, parse_answer
from causaltrace.attribution.judge_schemas import (
    agent_name,
    answer_template,
    answer_tokens,
    compact_schema_in_messages,
    fit_schema,
    json_schema_for,
    output_model,
    short_text,
    step_index,
)
from causaltrace.config import causaltrace_home
from causaltrace.exceptions import JudgeError, JudgeOutputInvalid, UserError
from causaltrace.protocols import get_judge_backend

__all__ = [
    "ALLOW_MODEL_REQUESTS_ENV",
    "CallHook",
    "CallRecord",
    "Fallback",
    "Judge",
    "JudgeContextWindowExceeded",
    "JudgeModel",
    "JudgeRateLimited",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeTimeout",
    "LiteLLMModel",
    "ModelRequestsDisabled",
    "agent_name",
    "answer_template",
    "answer_tokens",
    "chars_over_4",
    "check_model_request_allowed",
    "compact_schema_in_messages",
    "extract_json",
    "fit_schema",
    "import_litellm",
    "json_schema_for",
    "map_judge_errors",
    "output_model",
    "resolve_backend",
    "short_text",
    "step_index",
]

logger = logging.getLogger(__name__)

_CACHE_VERSION = 1


# -------------------------------------------------------------------------------------------------- the judge


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """What one model call (or cache hit) cost; the engine adds it to the Diagnosis's Cost under ``stage_id``."""

    stage_id: str
    cached: bool
    input_tokens: int
    output_tokens: int
    seconds: float
    usd: float | None


CallHook = Callable[[CallRecord], None]


class Judge:
    """The LLM client every stage uses (module docstring); share one instance across diagnoses of a benchmark."""

    def __init__(
        self,
        model: str | JudgeModel,
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        seed: int | None = 0,
        timeout_s: float | None = None,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_repairs: int = 2,
        concurrency: int = 4,
        cache: bool = True,
        cache_dir: Path | None = None,
        api_base: str | None = None,
    ) -> None:
        self.backend: JudgeModel = resolve_backend(model, api_base=api_base)
        cap = getattr(self.backend, "max_tokens_cap", None)
        self.max_tokens = min(max_tokens, cap) if cap else max_tokens
        self.temperature = temperature
        self.seed = seed
        self.timeout_s = float(timeout_s or getattr(self.backend, "default_timeout_s", None) or 120.0)
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_repairs = max_repairs
        cap_c = getattr(self.backend, "max_concurrency", None)
        self.concurrency = max(1, min(concurrency, cap_c) if cap_c else concurrency)
        self.cache_enabled = cache
        self._cache_dir = cache_dir
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        #: Counters over this Judge's lifetime: real requests made and cache hits.
        self.requests_made = 0
        self.cache_hits = 0

    def __repr__(self) -> str:
        return f"Judge({self.name!r})"

    @property
    def name(self) -> str:
        """The model's name as reported in a Diagnosis."""
        return self.backend.name

    @property
    def cache_dir(self) -> Path:
        """Where responses are cached: ``$CAUSALTRACE_HOME/cache/llm`` unless given."""
        return self._cache_dir or causaltrace_home() / "cache" / "llm"

    # -- budgets -------------------------------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        """The model's context window in tokens."""
        return int(self.backend.context_window)

    @property
    def input_budget(self) -> int:
        """Tokens a single request's messages may use: the window minus the answer's room and a safety margin."""
        margin = getattr(self.backend, "budget_margin", 0.05)
        return max(256, int(self.context_window * (1 - margin)) - self.max_tokens - 64)

    @property
    def token_counting(self) -> str:
        """How :meth:`count_tokens` counts: ``"litellm.token_counter"`` or ``"characters/4"``."""
        return str(getattr(self.backend, "token_counting", "characters/4"))

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as this judge counts them (module docstring: litellm's counter or characters / 4)."""
        counter = getattr(self.backend, "count_tokens", None)
        return int(counter(text)) if callable(counter) else chars_over_4(text)

    def count_message_tokens(self, messages: Sequence[Mapping[str, str]]) -> int:
        """Tokens of a message list (contents plus a small per-message overhead)."""
        return sum(self.count_tokens(m.get("content", "")) + 4 for m in messages)

    # -- calls ---------------------------------------------------------------------------------------------------

    async def ask(
        self,
        messages: Sequence[Mapping[str, str]],
        output: type[BaseModel],
        *,
        stage_id: str,
        on_call: CallHook | None = None,
        fallback: Fallback | None = None,
        schema_name: str | None = None,
    ) -> BaseModel:
        """Ask for a structured answer validated by ``output``; repair up to ``max_repairs`` times.

        Raises :class:`JudgeOutputInvalid` when no valid answer came back, :class:`JudgeError` when a call failed.
        """
        schema = json_schema_for(output)
        name = schema_name or re.sub(r"[^A-Za-z0-9_-]", "_", output.__name__)[:64] or "answer"
        convo = [dict(m) for m in messages]
        last_text = ""
        last_error = ""
        for attempt in range(self.max_repairs + 1):
            if attempt:
                convo = [
                    *convo,
                    {"role": "assistant", "content": last_text[:4000]},
                    {
                        "role": "user",
                        "content": (
                            f"That answer could not be used: {last_error}. Reply again with ONLY a JSON object "
                            f"matching this schema: {json.dumps(schema, separators=(',', ':'))}"
                        ),
                    },
                ]
            last_text = await self.complete_text(convo, schema=schema, schema_name=name, stage_id=stage_id,
                                                 on_call=on_call)
            parsed, last_error = parse_answer(last_text, output, fallback)
            if parsed is not None:
                return parsed
        raise JudgeOutputInvalid(
            f"model {self.name!r} gave no valid answer for stage {stage_id!r} after {self.max_repairs + 1} "
            f"attempt(s): {last_error}",
            body=last_text,
        )

    async def complete_text(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        stage_id: str,
        on_call: CallHook | None = None,
    ) -> str:
        """One call (or cache hit) returning the raw text; retries rate limits and transient errors with backoff."""
        request = JudgeRequest(
            messages=[{"role": m["role"], "content": m["content"]} for m in messages],
            schema=schema,
            schema_name=schema_name,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            seed=self.seed,
            timeout_s=self.timeout_s,
            stage_id=stage_id,
        )
        key = self._cache_key(request)
        if self.cache_enabled:
            hit = self._cache_read(key)
            if hit is not None:
                self.cache_hits += 1
                if on_call is not None:
                    on_call(
                        CallRecord(
                            stage_id=stage_id,
                            cached=True,
                            input_tokens=int(hit.get("input_tokens") or 0),
                            output_tokens=int(hit.get("output_tokens") or 0),
                            seconds=float(hit.get("seconds") or 0.0),
                            usd=hit.get("usd"),
                        )
                    )
                return str(hit["text"])
        started = time.perf_counter()
        response = await self._call_with_retries(request)
        seconds = time.perf_counter() - started
        text = response.text or ""
        prompt_text = "".join(m["content"] for m in request.messages)
        in_tok = response.input_tokens if response.input_tokens is not None else chars_over_4(prompt_text)
        out_tok = response.output_tokens if response.output_tokens is not None else chars_over_4(text)
        record = CallRecord(
            stage_id=stage_id, cached=False, input_tokens=in_tok, output_tokens=out_tok, seconds=seconds,
            usd=response.usd,
        )
        if self.cache_enabled:
            self._cache_write(key, {"text": text, "input_tokens": in_tok, "output_tokens": out_tok,
                                    "seconds": round(seconds, 4), "usd": response.usd, "model": self.name})
        if on_call is not None:
            on_call(record)
        return text

    async def _call_with_retries(self, request: JudgeRequest) -> JudgeResponse:
        attempt = 0
        while True:
            try:
                async with self._semaphore():
                    self.requests_made += 1
                    # asyncio.timeout runs the call in this task: wait_for's inner task would be left holding an
                    # interrupt (KeyboardInterrupt) nobody retrieves, logged at its collection as a stray traceback
                    async with asyncio.timeout(self.timeout_s):
                        return await self.backend.complete(request)
            except (JudgeError, UserError):
                raise
            except Exception as exc:
                if attempt < self.max_retries and is_retryable(exc):
                    attempt += 1
                    delay = self.backoff_s * (2 ** (attempt - 1)) * (1 + random.random() * 0.25)
                    logger.info("model %s: %s; retry %d in %.2fs", self.name, type(exc).__name__, attempt, delay)
                    await asyncio.sleep(delay)
                    continue
                with map_judge_errors(self.name):
                    raise

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(id(loop))
        if sem is None:
            sem = self._semaphores[id(loop)] = asyncio.Semaphore(self.concurrency)
        return sem

    # -- cache ---------------------------------------------------------------------------------------------------

    def _cache_key(self, request: JudgeRequest) -> str:
        body = {
            "v": _CACHE_VERSION,
            "backend": self.backend.cache_key,
            "messages": request.messages,
            "schema": request.schema,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cache_read(self, key: str) -> dict[str, Any] | None:
        path = self._cache_path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("text"), str) else None

    def _cache_write(self, key: str, value: dict[str, Any]) -> None:
        path = self._cache_path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
            tmp.replace(path)
        except OSError as exc:  # a read-only home must not break a diagnosis
            logger.warning("cannot write the LLM cache at %s: %s", path, exc)


def resolve_backend(model: str | JudgeModel, *, api_base: str | None = None) -> JudgeModel:
    """A backend for ``model``: ``"local"`` → the local llama.cpp model, ``"SCHEME:REST"`` with a registered scheme
    → that scheme's backend for REST (``"function:NAME"``: a registered FunctionJudge), any other string →
    :class:`LiteLLMModel`, a JudgeModel → itself (a Judge → its backend)."""
    if not isinstance(model, str):
        if isinstance(model, Judge):
            return model.backend
        return model
    text = model.strip()
    if not text:
        raise UserError("empty model name; pass a litellm model such as 'gpt-4o-mini', or 'local'")
    if text == "local":
        from causaltrace.attribution.local_model import LocalModel

        return LocalModel()
    scheme, sep, rest = text.partition(":")
    factory = get_judge_backend(scheme) if sep else None
    if factory is not None:
        return factory(rest)  # type: ignore[no-any-return]
    return LiteLLMModel(name=text, api_base=api_base)
