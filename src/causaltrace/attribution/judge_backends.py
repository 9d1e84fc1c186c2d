"""The judge's model backends and the errors of a model call (split from the judge, :mod:`.judge`).

* :class:`JudgeModel` — what a backend is: a name, a cache key, a context window and one async ``complete``
  (:class:`JudgeRequest` in, :class:`JudgeResponse` out). :class:`LiteLLMModel` is any litellm model; the local
  llama.cpp model (:mod:`.local_model`) subclasses it; a test double such as
  :class:`~causaltrace.testing.judges.FunctionJudge` implements the protocol.
* litellm is imported lazily (:func:`import_litellm`, never at ``import causaltrace`` time) with
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first, so it never tries to download its price map.
* :func:`map_judge_errors` (STYLE.md §E) turns litellm's exceptions into :class:`~causaltrace.exceptions.JudgeError`
  subclasses ``from`` the original; :func:`is_retryable` says which ones the judge retries with backoff.
* The kill switch (STYLE.md §F): :func:`check_model_request_allowed`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlparse

from causaltrace.exceptions import JudgeError, MissingExtraError, UserError

__all__ = [
    "ALLOW_MODEL_REQUESTS_ENV",
    "JudgeContextWindowExceeded",
    "JudgeModel",
    "JudgeRateLimited",
    "JudgeRequest",
    "JudgeResponse",
    "JudgeTimeout",
    "LiteLLMModel",
    "ModelRequestsDisabled",
    "chars_over_4",
    "check_model_request_allowed",
    "import_litellm",
    "is_retryable",
    "map_judge_errors",
]

logger = logging.getLogger("causaltrace.attribution.judge")

#: Set to 0 / false to make every real (non-loopback) model request raise (the tests' kill switch).
ALLOW_MODEL_REQUESTS_ENV = "CAUSALTRACE_ALLOW_MODEL_REQUESTS"
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
    try:
        import litellm
    except ImportError as exc:  # the model stages' extra is not installed: one line naming it
        raise MissingExtraError("litellm", "llm") from exc

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
            # Any other backend (a custom JudgeModel) failing is "the model could not answer" too: a failed
            # Diagnosis naming it, never an exception out of diagnose (interrupts are BaseExceptions and pass).
            raise JudgeError(f"model {model!r}: its backend raised {type(exc).__name__}: {_short(exc)}") from exc
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


def is_retryable(exc: BaseException) -> bool:
    """Whether a backend's exception is transient (rate limit, 5xx, connection): the judge retries those."""
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
