"""The LLM judge client: every LLM call of every attribution stage goes through :class:`Judge`.

Usage::

    judge = Judge("gpt-4o-mini")                     # any litellm model; "local" = the loopback llama.cpp server
    answer = await judge.ask(messages, AnswerModel, stage_id="judge", on_call=record)

What it does (issue 5, ARCHITECTURE "The default attribution method"):

* **Any model through litellm.** litellm is imported lazily (never at ``import causaltrace`` time) with
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first, so it never tries to download its price map (FACTS.md
  "litellm offline"). A model is a *backend*: :class:`LiteLLMModel` (a litellm model string, optionally an
  ``api_base``), :class:`~causaltrace.attribution.local_model.LocalModel` (``"local"``) or a test double such as
  :class:`~causaltrace.attribution.testing_models.FunctionJudge`. Backends implement :class:`JudgeModel`.
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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, get_args, get_origin, runtime_checkable
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from causaltrace.config import causaltrace_home
from causaltrace.exceptions import JudgeError, JudgeOutputInvalid, UserError

__all__ = [
    "ALLOW_MODEL_REQUESTS_ENV",
    "CallRecord",
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
    "check_model_request_allowed",
    "compact_schema_in_messages",
    "extract_json",
    "fit_schema",
    "import_litellm",
    "json_schema_for",
    "map_judge_errors",
    "output_model",
    "short_text",
    "step_index",
]

logger = logging.getLogger(__name__)

#: Set to 0 / false to make every real (non-loopback) model request raise (the tests' kill switch).
ALLOW_MODEL_REQUESTS_ENV = "CAUSALTRACE_ALLOW_MODEL_REQUESTS"
_CACHE_VERSION = 1
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


# ------------------------------------------------------------------------------------------------- exceptions


class ModelRequestsDisabled(UserError):
    """Raised when a real model request is made while ``CAUSALTRACE_ALLOW_MODEL_REQUESTS=0`` (the kill switch)."""


class JudgeRateLimited(JudgeError):
    """Raised when the model provider kept rate-limiting (429) after every retry."""


class JudgeContextWindowExceeded(JudgeError):
    """Raised when a request does not fit the model's context window."""


class JudgeTimeout(JudgeError):
    """Raised when a model call did not answer within the judge's timeout."""


def import_litellm() -> Any:
    """Import litellm lazily, with its price map read from the package (no download at import time)."""
    if "litellm" not in sys.modules:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def check_model_request_allowed(api_base: str | None, model: str) -> None:
    """Raise :class:`ModelRequestsDisabled` when the kill switch is on and the request is not to a loopback server."""
    raw = os.environ.get(ALLOW_MODEL_REQUESTS_ENV)
    if raw is None or raw.strip().lower() not in {"0", "false", "no", "off"}:
        return
    if api_base:
        host = urlparse(api_base).hostname or ""
        if host in _LOOPBACK_HOSTS or host.startswith("127."):
            return
    raise ModelRequestsDisabled(
        f"a real LLM request to {model!r} was blocked: {ALLOW_MODEL_REQUESTS_ENV}=0 (the test kill switch); use a "
        "FunctionJudge in tests, or the loopback local model (--model local)"
    )


@contextlib.contextmanager
def map_judge_errors(model: str) -> Iterator[None]:
    """Translate litellm's exceptions (raised by litellm or by a fake backend) into JudgeError subclasses."""
    try:
        yield
    except (JudgeError, UserError):
        raise
    except TimeoutError as exc:
        raise JudgeTimeout(f"model {model!r} did not answer in time") from exc
    except Exception as exc:
        litellm = sys.modules.get("litellm")
        base = getattr(sys.modules.get("openai"), "OpenAIError", None)  # litellm's exceptions subclass OpenAI's
        if litellm is None or base is None or not isinstance(exc, base):
            if type(exc).__module__.split(".")[0] in {"openai", "httpx", "httpcore", "litellm"}:
                raise JudgeError(f"model {model!r} call failed: {type(exc).__name__}: {_short(exc)}") from exc
            raise
        name = type(exc).__name__
        if isinstance(exc, litellm.ContextWindowExceededError):
            raise JudgeContextWindowExceeded(f"model {model!r}: the request exceeds its context window") from exc
        if isinstance(exc, litellm.RateLimitError):
            raise JudgeRateLimited(f"model {model!r} is rate-limiting (429): {_short(exc)}") from exc
        if isinstance(exc, litellm.Timeout):
            raise JudgeTimeout(f"model {model!r} did not answer in time: {_short(exc)}") from exc
        if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
            raise JudgeError(
                f"model {model!r}: authentication failed ({name}); set the provider's API key (e.g. OPENAI_API_KEY)"
            ) from exc
        raise JudgeError(f"model {model!r} call failed: {name}: {_short(exc)}") from exc


def _short(exc: BaseException, n: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _retryable(exc: BaseException) -> bool:
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return False
    transient = (
        litellm.RateLimitError,
        litellm.ServiceUnavailableError,
        litellm.InternalServerError,
        litellm.APIConnectionError,
        litellm.BadGatewayError,
    )
    return isinstance(exc, transient) and not isinstance(exc, litellm.Timeout)


# ---------------------------------------------------------------------------------------------------- backends


@dataclass(frozen=True, kw_only=True)
class JudgeRequest:
    """One call as a backend receives it."""

    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
    schema_name: str
    max_tokens: int
    temperature: float
    seed: int | None
    timeout_s: float
    stage_id: str = ""


@dataclass(frozen=True, kw_only=True)
class JudgeResponse:
    """A backend's answer: the text and what it cost (``None`` tokens = unknown, counted by characters / 4)."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    usd: float | None = None


@runtime_checkable
class JudgeModel(Protocol):
    """A model backend: a name, a cache key, a context window, and one async ``complete``."""

    name: str

    @property
    def cache_key(self) -> str: ...

    @property
    def context_window(self) -> int: ...

    async def complete(self, request: JudgeRequest) -> JudgeResponse: ...


def chars_over_4(text: str) -> int:
    """The fallback token count: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)


@dataclass(kw_only=True)
class LiteLLMModel:
    """Any litellm model (``"gpt-4o-mini"``, ``"anthropic/claude-…"``, ``"openai/<alias>"`` + ``api_base``).

    ``response_format_style``: ``"json_schema"`` (OpenAI-style structured outputs, the default), ``"llama_cpp"``
    (``{"type": "json_object", "schema": …}``, what llama-cpp-python's server accepts), ``"json_object"`` or
    ``"none"`` (the schema is then only in the prompt). When a provider rejects ``json_schema`` as unsupported the
    call is retried once with the schema in the prompt only, and the style is remembered.
    """

    name: str
    api_base: str | None = None
    api_key: str | None = None
    #: The model string litellm receives when it differs from the display ``name`` (``"openai/local"``).
    litellm_name: str | None = None
    response_format_style: Literal["json_schema", "llama_cpp", "json_object", "none"] = "json_schema"
    declared_context_window: int | None = None
    max_tokens_cap: int | None = None
    free: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    #: How :meth:`count_tokens` counts (stated in artifacts that depend on it).
    token_counting = "litellm.token_counter"

    @property
    def cache_key(self) -> str:
        return f"litellm:{self.name}@{self.api_base or ''}"

    @property
    def context_window(self) -> int:
        if self.declared_context_window:
            return self.declared_context_window
        try:
            info = import_litellm().get_model_info(self.name)
        except Exception:
            return 128_000  # SEEDS §7.4: the default window when the model's is unknown
        return int(info.get("max_input_tokens") or info.get("max_tokens") or 128_000)

    def count_tokens(self, text: str) -> int:
        try:
            return int(import_litellm().token_counter(model=self.name, text=text))
        except Exception:
            return chars_over_4(text)

    def _response_format(self, request: JudgeRequest) -> dict[str, Any] | None:
        if request.schema is None or self.response_format_style == "none":
            return None
        if self.response_format_style == "llama_cpp":
            return {"type": "json_object", "schema": request.schema}
        if self.response_format_style == "json_object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": request.schema, "strict": True},
        }

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        check_model_request_allowed(self.api_base, self.name)
        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            "model": self.litellm_name or self.name,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "timeout": request.timeout_s,
            "drop_params": True,
            "num_retries": 0,
            **self.extra,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        response_format = self._response_format(request)
        if response_format is not None:
            kwargs["response_format"] = response_format
        try:
            response = await litellm.acompletion(**kwargs)
        except (litellm.BadRequestError, litellm.UnsupportedParamsError) as exc:
            if response_format is None or isinstance(exc, litellm.ContextWindowExceededError):
                raise
            if "response_format" not in str(exc) and "json_schema" not in str(exc):
                raise
            logger.info("model %s rejected response_format; retrying with the schema in the prompt only", self.name)
            self.response_format_style = "none"
            kwargs.pop("response_format")
            response = await litellm.acompletion(**kwargs)
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        usd: float | None
        if self.free:
            usd = 0.0
        else:
            try:
                usd = float(litellm.completion_cost(completion_response=response, model=kwargs["model"]))
            except Exception:
                usd = None
        return JudgeResponse(
            text=text,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            usd=usd,
        )


# ----------------------------------------------------------------------------------------- output schemas


def step_index(lo: int | Sequence[int], hi: int | None = None) -> Any:
    """A step-index field type: ``step_index(0, n - 1)`` (``minimum`` / ``maximum``) or ``step_index([3, 7])``
    (``enum``)."""
    if hi is None:
        values = (lo,) if isinstance(lo, int) else tuple(sorted(set(lo)))
        if not values:
            raise ValueError("step_index needs at least one allowed index")
        return Literal[values]  # type: ignore[valid-type]
    if not isinstance(lo, int) or hi < lo:
        raise ValueError(f"empty step range {lo}..{hi}")
    return Annotated[int, Field(ge=lo, le=hi)]


def agent_name(names: Sequence[str]) -> Any:
    """An agent-name field type: the ``enum`` of the run's agents."""
    values = tuple(dict.fromkeys(n for n in names if n))
    if not values:
        raise ValueError("agent_name needs at least one agent")
    return Literal[values]  # type: ignore[valid-type]


def short_text(max_chars: int = 300) -> Any:
    """A free-text field whose schema says ``maxLength`` (a grammar-constrained model stops there) while validation
    accepts longer text (a model that ignores the schema is not sent back for repair over a long reason)."""
    return Annotated[str, Field(json_schema_extra={"maxLength": max_chars})]


def output_model(name: str, /, **fields: Any) -> type[BaseModel]:
    """Build a stage's output model; a field is a type or ``(type, default)``.

    Example: ``output_model("Answer", agent=agent_name(agents), step=step_index(0, n - 1), reason=str)``.
    Extra keys in the model's answer are ignored (tolerant); the schema sent to the model forbids them.
    """
    spec = {k: (v if isinstance(v, tuple) else (v, ...)) for k, v in fields.items()}
    return create_model(name, __config__=ConfigDict(extra="ignore"), **spec)


def json_schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, inlined (no ``$ref``), strict: every property required, no extra properties."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].split("/")[-1]])
            out = {k: walk(v) for k, v in node.items() if k not in ("title", "default")}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            if "const" in out and "enum" not in out:
                out["enum"] = [out.pop("const")]
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(raw)


# ------------------------------------------------------------------------------- answers fitted to a budget

#: The shortest string and the fewest list items :func:`fit_schema` leaves (an answer keeps some substance).
_MIN_CHARS, _SOFT_MIN_CHARS, _DEFAULT_CHARS, _DEFAULT_ITEMS = 16, 48, 200, 8
#: An integer range this small becomes an ``enum`` (llama.cpp's schema converter ignores minimum / maximum).
_MAX_RANGE_ENUM = 256


def answer_tokens(schema: Mapping[str, Any], chars_per_token: float = 3.0) -> int | None:
    """The most tokens an answer conforming to ``schema`` can take (estimated; None when unbounded).

    Strings count ``maxLength / chars_per_token`` plus quotes, lists ``maxItems`` items, keys and punctuation about
    one token per three characters; a string without ``maxLength`` or a list without ``maxItems`` is unbounded.
    """

    def cost(node: Any) -> float | None:
        if not isinstance(node, Mapping):
            return 1.0
        if "enum" in node:
            return 1.0 + max((len(json.dumps(v)) / chars_per_token for v in node["enum"]), default=1.0)
        alts = node.get("anyOf") or node.get("oneOf")
        if alts:
            costs = [cost(a) for a in alts]
            return None if any(c is None for c in costs) else max(c for c in costs if c is not None)
        kind = node.get("type")
        if kind == "object":
            total = 2.0
            for key, sub in (node.get("properties") or {}).items():
                c = cost(sub)
                if c is None:
                    return None
                total += c + 1.0 + (len(key) + 3) / chars_per_token
            return total
        if kind == "array":
            n, item = node.get("maxItems"), cost(node.get("items", {}))
            return None if n is None or item is None else 2.0 + n * (item + 1.0)
        if kind == "string":
            n = node.get("maxLength")
            return None if n is None else 2.0 + n / chars_per_token
        if kind == "integer":
            hi = max(abs(node.get("maximum", 10**16)), abs(node.get("minimum", 0)))
            return 1.0 + len(str(hi))
        if kind == "number":
            return 17.0
        return 2.0  # boolean, null

    value = cost(schema)
    return None if value is None else math.ceil(value)


def fit_schema(
    schema: Mapping[str, Any], budget_tokens: int, chars_per_token: float = 3.0
) -> tuple[dict[str, Any], int]:
    """A copy of ``schema`` whose longest conforming answer fits ``budget_tokens``; returns it and that bound.

    For a backend that enforces the schema as a grammar (llama.cpp) and has a small output cap: a weak model fills
    every free string and list to the limit, and a JSON answer cut at ``max_tokens`` is lost. So every string gets a
    ``maxLength`` and every list a ``maxItems`` (defaults 200 / 8), then strings are shortened (to 48 characters)
    and the largest lists lose items (down to 1), then strings go down to 16 characters, until the estimate
    (:func:`answer_tokens`) fits the budget. Small integer ranges become an ``enum`` (the grammar enforces enums,
    not ``minimum`` / ``maximum``). Validation stays with the stage's pydantic model, which accepts longer text.
    """
    fitted: dict[str, Any] = json.loads(json.dumps(schema))
    strings: list[dict[str, Any]] = []
    arrays: list[dict[str, Any]] = []

    def prepare(node: Any) -> None:
        if isinstance(node, list):
            for v in node:
                prepare(v)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == "string" and "enum" not in node and "pattern" not in node:
            node["maxLength"] = int(node.get("maxLength") or _DEFAULT_CHARS)
            strings.append(node)
        elif kind == "array":
            node["maxItems"] = int(node.get("maxItems") or _DEFAULT_ITEMS)
            arrays.append(node)
        elif kind == "integer" and "enum" not in node and "minimum" in node and "maximum" in node:
            lo, hi = int(node["minimum"]), int(node["maximum"])
            if 0 <= hi - lo < _MAX_RANGE_ENUM:
                node["enum"] = list(range(lo, hi + 1))
        for v in node.values():
            prepare(v)

    prepare(fitted)

    def bound() -> int:
        return answer_tokens(fitted, chars_per_token) or 0

    for _ in range(500):
        if bound() <= budget_tokens:
            break
        long = [s for s in strings if s["maxLength"] > _SOFT_MIN_CHARS]
        if long:
            for s in long:
                s["maxLength"] = max(_SOFT_MIN_CHARS, int(s["maxLength"] * 0.8))
            continue
        wide = [a for a in arrays if a["maxItems"] > 1 and a.get("minItems", 0) < a["maxItems"]]
        if wide:
            widest = max(wide, key=lambda a: (a["maxItems"] * (answer_tokens(a["items"], chars_per_token) or 1)))
            widest["maxItems"] -= 1
            continue
        short = [s for s in strings if s["maxLength"] > _MIN_CHARS]
        if not short:
            break
        for s in short:
            s["maxLength"] = max(_MIN_CHARS, int(s["maxLength"] * 0.8))
    return fitted, bound()


def answer_template(schema: Mapping[str, Any]) -> str:
    """A short picture of the answer ``schema`` asks for: ``{"step": 2|5, "reason": "<text, ≤ 80 characters>"}``.

    For a backend that enforces the schema as a grammar, this replaces the full JSON schema in the prompt
    (:func:`compact_schema_in_messages`): the grammar already forbids everything else, and the schema's JSON costs
    a small model hundreds of prompt tokens per call.
    """

    def render(node: Any) -> str:
        if not isinstance(node, Mapping):
            return "<value>"
        if "enum" in node:
            values = list(node["enum"])
            if len(values) > 6 and all(type(v) is int for v in values) and values == list(range(values[0],
                                                                                                values[-1] + 1)):
                return f"<integer {values[0]}–{values[-1]}>"
            return "|".join(json.dumps(v, ensure_ascii=False) for v in values)
        alts = node.get("anyOf") or node.get("oneOf")
        if alts:
            return " or ".join(render(a) for a in alts)
        kind = node.get("type")
        if kind == "object":
            props = node.get("properties") or {}
            return "{" + ", ".join(f"{json.dumps(k)}: {render(v)}" for k, v in props.items()) + "}"
        if kind == "array":
            n = node.get("maxItems")
            return f"[{render(node.get('items', {}))}, …{f' at most {n}' if n else ''}]"
        if kind == "string":
            n = node.get("maxLength")
            return f'"<text{f", ≤ {n} characters" if n else ""}>"'
        if kind == "integer":
            lo, hi = node.get("minimum"), node.get("maximum")
            return f"<integer {lo}–{hi}>" if lo is not None and hi is not None else "<integer>"
        if kind == "number":
            return "<number>"
        if kind == "boolean":
            return "true|false"
        return "null" if kind == "null" else "<value>"

    return render(schema)


def compact_schema_in_messages(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], shown: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """``messages`` with every copy of ``schema``'s compact JSON (what the stages show, see ``schema_text``)
    replaced by :func:`answer_template` of ``shown`` (default: ``schema``)."""
    text = json.dumps(schema, separators=(",", ":"))
    short = answer_template(shown if shown is not None else schema)
    return [{**m, "content": m["content"].replace(text, short)} for m in messages]


# ---------------------------------------------------------------------------------------- tolerant parsing

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\r?\n?(.*?)(?:```|$)", re.DOTALL)


def extract_json(text: str) -> Any:
    """Parse the JSON value in a model's answer: fenced, surrounded by prose, or truncated. ValueError if none."""
    candidates: list[str] = []
    stripped = text.strip()
    if stripped:
        candidates.append(stripped)
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(text))
    # strict=False: control characters (raw newlines) inside strings are accepted — llama.cpp's JSON grammar lets
    # them through, and a JSON answer must not be lost over them
    decoder = json.JSONDecoder(strict=False)
    for cand in candidates:
        try:
            return decoder.decode(cand)
        except ValueError:
            pass
    for cand in candidates:
        starts = sorted(p for p in (cand.find("{"), cand.find("[")) if p >= 0)
        for start in starts:
            try:
                value, _ = decoder.raw_decode(cand[start:])
                return value
            except ValueError:
                pass
        for start in starts:
            repaired = _close_truncated(cand[start:])
            if repaired is not None:
                try:
                    return decoder.decode(repaired)
                except ValueError:
                    pass
    raise ValueError("no JSON object found in the answer")


def _close_truncated(text: str) -> str | None:
    """Close what a truncated JSON text left open: a string, then dangling commas / keys, then brackets."""
    stack: list[str] = []
    in_string = escape = False
    for ch in text:
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
    if not stack and not in_string:
        return None
    out = text
    if in_string:
        if escape:
            out = out[:-1]
        out += '"'
    for _ in range(3):
        trimmed = out.rstrip()
        trimmed = re.sub(r",\s*$", "", trimmed)
        trimmed = re.sub(r'[{,]\s*"[^"]*"\s*:?\s*$', lambda m: m.group(0)[0] if m.group(0)[0] == "{" else "", trimmed)
        if trimmed == out:
            break
        out = trimmed
    return out + "".join(reversed(stack))


def _normalise_literals(model: type[BaseModel], data: Any) -> Any:
    """Map near-miss enum answers onto the allowed values (case, whitespace, ``"Agent (suffix)"``, ``"3"``)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for key, info in model.model_fields.items():
        if key not in out or get_origin(info.annotation) is not Literal:
            continue
        allowed = get_args(info.annotation)
        value = out[key]
        if all(isinstance(a, int) for a in allowed):
            with contextlib.suppress(TypeError, ValueError):
                out[key] = int(str(value).strip())
            continue
        if not isinstance(value, str):
            continue
        text = value.strip().strip("'\"`").strip()
        for form in (text, text.split(" (", 1)[0].strip()):
            hit = next((a for a in allowed if isinstance(a, str) and a.casefold() == form.casefold()), None)
            if hit is not None:
                out[key] = hit
                break
    return out


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
Fallback = Callable[[str], Mapping[str, Any] | None]


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
            parsed, last_error = _parse_answer(last_text, output, fallback)
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
                    return await asyncio.wait_for(self.backend.complete(request), self.timeout_s)
            except (JudgeError, UserError):
                raise
            except Exception as exc:
                if attempt < self.max_retries and _retryable(exc):
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


def _parse_answer(
    text: str, output: type[BaseModel], fallback: Fallback | None
) -> tuple[BaseModel | None, str]:
    """Parse + validate; returns (model, "") or (None, why)."""
    errors: list[str] = []
    data: Any = None
    try:
        data = extract_json(text)
    except ValueError as exc:
        errors.append(str(exc))
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    for candidate in (data, fallback(text) if fallback is not None else None):
        if candidate is None:
            continue
        for attempt in (candidate, _normalise_literals(output, candidate)):
            try:
                return output.model_validate(attempt), ""
            except ValidationError as exc:
                msgs = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()[:3]
                )
                errors.append(msgs)
    if not errors:
        errors.append("the answer is not a JSON object")
    return None, errors[-1]


def resolve_backend(model: str | JudgeModel, *, api_base: str | None = None) -> JudgeModel:
    """A backend for ``model``: ``"local"`` → the local llama.cpp model, ``"function:NAME"`` → a registered
    FunctionJudge, any other string → :class:`LiteLLMModel`, a JudgeModel → itself."""
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
    if text.startswith("function:"):
        from causaltrace.attribution.testing_models import registered_function_model

        return registered_function_model(text.split(":", 1)[1])
    return LiteLLMModel(name=text, api_base=api_base)

