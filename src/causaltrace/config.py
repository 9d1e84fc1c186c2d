"""Configuration: the payload policy of exported spans, the store location, and the ``CAUSALTRACE_*`` env vars.

``TraceConfig`` applies to LIVE exported spans only (ARCHITECTURE "Payload policy"): the collector receives full
Steps in-process and the store keeps full content, so hiding inputs from Jaeger never blinds attribution or replay.
Export itself is configured by the standard ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_PROTOCOL``, ``OTEL_SERVICE_NAME``…), read by the OpenTelemetry SDK as users expect.

Environment variables:

==================================  ============================================================  ==========
variable                            meaning                                                       default
==================================  ============================================================  ==========
``CAUSALTRACE_HOME``                directory of the store (``causaltrace.db``) and caches        ``~/.causaltrace``
``CAUSALTRACE_DB``                  the store: a file path or a ``postgresql://`` URL             in HOME
``CAUSALTRACE_MAX_ATTRIBUTE_CHARS`` longest text kept in one exported span attribute              ``16384``
``CAUSALTRACE_HIDE_INPUTS``         ``true`` drops step inputs (and LLM requests) from spans      ``false``
``CAUSALTRACE_HIDE_OUTPUTS``        ``true`` drops step outputs and content from spans            ``false``
``CAUSALTRACE_CAPTURE_CONTENT``     ``on`` / ``off``: message content in the OpenInference AND     unset
                                    the GenAI attributes (overrides both defaults)
``OTEL_INSTRUMENTATION_GENAI_``     ``true``: the GenAI content attributes (``gen_ai.input.``      ``false``
``CAPTURE_MESSAGE_CONTENT``         ``messages`` …), opt-in as the conventions make them
``CAUSALTRACE_EXPORT_RECORDING``    ``false``: no Recording event on the run's root span           ``true``
``CAUSALTRACE_STORE``               ``false`` turns the SQLite writes off (collector stays on)    ``true``
``CAUSALTRACE_RECORD``              ``false`` stops recording LLM / tool calls for replay         ``true``
``CAUSALTRACE_STORE_MAX_CHARS``     longest text the store keeps in one step field                ``2000000``
``CAUSALTRACE_MAX_QUEUE``           span export queue size (drops beyond it are counted)          ``65536``
``CAUSALTRACE_MODEL``               litellm model for the LLM stages of attribution               unset
==================================  ============================================================  ==========
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from causaltrace.exceptions import UserError

__all__ = ["BackendSettings", "TraceConfig", "causaltrace_home", "db_target", "default_db_path", "default_db_target",
           "env_flag", "is_url"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

#: A redaction callback receives (attribute key, value) and returns the value to export (or None to drop it).
Redactor = Callable[[str, Any], Any]


def env_flag(name: str, default: bool, env: Mapping[str, str] | None = None) -> bool:
    """Read a boolean env var; an unrecognised value is a UserError naming the variable."""
    env = os.environ if env is None else env
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise UserError(f"{name}={raw!r} is not a boolean; use true or false")


def _env_switch(name: str, env: Mapping[str, str]) -> bool | None:
    """An on / off env var that may be unset (None)."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    return env_flag(name, False, {name: raw})


def _env_int(name: str, default: int, env: Mapping[str, str]) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"{name}={raw!r} is not an integer") from None
    if value <= 0:
        raise UserError(f"{name}={raw!r} must be positive")
    return value


def causaltrace_home(env: Mapping[str, str] | None = None) -> Path:
    """``$CAUSALTRACE_HOME`` or ``~/.causaltrace``."""
    env = os.environ if env is None else env
    raw = env.get("CAUSALTRACE_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".causaltrace"


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """The embedded store: ``$CAUSALTRACE_HOME/causaltrace.db``."""
    return causaltrace_home(env) / "causaltrace.db"


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(target: str | os.PathLike[str]) -> bool:
    """Whether a store target is a URL (``scheme://…``), which is never taken for a file path."""
    return isinstance(target, str) and bool(_URL.match(target))


def db_target(raw: str | os.PathLike[str]) -> Path | str:
    """A store target as given: a URL stays the string it is (``Path`` would fold its ``//``), a path is a Path."""
    return raw if is_url(raw) else Path(raw).expanduser()


def default_db_target(env: Mapping[str, str] | None = None) -> Path | str:
    """The store used when none is given: ``$CAUSALTRACE_DB`` (a path or a URL), else :func:`default_db_path`."""
    env = os.environ if env is None else env
    raw = env.get("CAUSALTRACE_DB", "").strip()
    return db_target(raw) if raw else default_db_path(env)


@dataclass(frozen=True, kw_only=True)
class TraceConfig:
    """What exported spans may carry, and what the collector stores and records.

    Build it directly, or from the environment with :meth:`from_env` (explicit arguments override env vars).
    """

    #: Longest text kept in one span attribute; longer text is cut and a marker says how much was cut.
    max_attribute_chars: int = 16384
    #: Drop step inputs (prompts, tool arguments, code) from exported spans.
    hide_inputs: bool = False
    #: Drop step outputs and content from exported spans.
    hide_outputs: bool = False
    #: ``CAUSALTRACE_CAPTURE_CONTENT``: True / False turns message content on / off in both the OpenInference and
    #: the GenAI attributes; None leaves each to its own default (OpenInference on, GenAI :attr:`genai_content`).
    capture_content: bool | None = None
    #: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: the GenAI content attributes (``gen_ai.input.messages``,
    #: ``.output.messages``, ``.system_instructions``, ``.tool.definitions``, ``gen_ai.tool.call.arguments`` /
    #: ``.result``), opt-in as the GenAI conventions make them.
    genai_content: bool = False
    #: Called with (key, value) for every exported payload attribute; returns the value to export (None drops it).
    redact: Redactor | None = None
    #: Write finished runs to the SQLite store (off: the collector still assembles runs in memory).
    store: bool = True
    #: Record every LLM and tool call for replay.
    record: bool = True
    #: Longest text the store keeps in one step field (generous: the store is the full record).
    store_max_chars: int = 2_000_000
    #: Size of the span export queue; spans dropped beyond it are counted.
    max_queue_size: int = 65536
    #: The store: a file path or a ``postgresql://`` URL; None means ``default_db_path()`` at the time of use.
    db_path: Path | str | None = None
    #: Extra env for tests; not a user setting.
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_attribute_chars < 64:
            raise UserError(f"max_attribute_chars={self.max_attribute_chars} is too small (minimum 64)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> TraceConfig:
        """A config from ``CAUSALTRACE_*`` env vars, with keyword overrides on top."""
        env = os.environ if env is None else env
        base = cls(
            max_attribute_chars=_env_int("CAUSALTRACE_MAX_ATTRIBUTE_CHARS", 16384, env),
            hide_inputs=env_flag("CAUSALTRACE_HIDE_INPUTS", False, env),
            hide_outputs=env_flag("CAUSALTRACE_HIDE_OUTPUTS", False, env),
            capture_content=_env_switch("CAUSALTRACE_CAPTURE_CONTENT", env),
            genai_content=env_flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", False, env),
            store=env_flag("CAUSALTRACE_STORE", True, env),
            record=env_flag("CAUSALTRACE_RECORD", True, env),
            store_max_chars=_env_int("CAUSALTRACE_STORE_MAX_CHARS", 2_000_000, env),
            max_queue_size=_env_int("CAUSALTRACE_MAX_QUEUE", 65536, env),
            db_path=db_target(env["CAUSALTRACE_DB"]) if env.get("CAUSALTRACE_DB", "").strip() else None,
        )
        return replace(base, **overrides) if overrides else base

    # the two content switches are read on every step and model call: cached on the (frozen) instance, so a read
    # after the first is a plain attribute, not a call (issue 35)
    @cached_property
    def oi_content(self) -> bool:
        """Whether OpenInference content attributes (messages, input / output values) are exported (default on,
        as OpenInference's own instrumentors do)."""
        return True if self.capture_content is None else self.capture_content

    @cached_property
    def genai_content_on(self) -> bool:
        """Whether the GenAI content attributes are exported (opt-in; ``CAUSALTRACE_CAPTURE_CONTENT`` overrides)."""
        return self.genai_content if self.capture_content is None else self.capture_content

    def resolved_db_path(self) -> Path | str:
        """The store this config writes to (a file path, or a URL kept as its string)."""
        return self.db_path if self.db_path is not None else default_db_path()


@dataclass(frozen=True, kw_only=True)
class BackendSettings:
    """Where the trace backends a user reads are (issue 34 item 3: links from imported steps back to their spans;
    shared with the first-contact issue's annotations). From the environment with :meth:`from_env`."""

    #: The OTLP endpoint spans go to (``OTEL_EXPORTER_OTLP_ENDPOINT``), e.g. ``http://localhost:4318``.
    otlp_endpoint: str | None = None
    #: The Phoenix server (``CAUSALTRACE_PHOENIX_URL``), e.g. ``http://localhost:6006``.
    phoenix_url: str | None = None
    #: The Phoenix project the runs' traces are in (``CAUSALTRACE_PROJECT``, else ``OTEL_SERVICE_NAME``, else
    #: ``causaltrace``: the project the exporter puts them in).
    project: str | None = None
    #: Phoenix's API key (``PHOENIX_API_KEY``), sent as a bearer token when Phoenix asks for one.
    phoenix_api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BackendSettings:
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        return cls(otlp_endpoint=get("OTEL_EXPORTER_OTLP_ENDPOINT"), phoenix_url=get("CAUSALTRACE_PHOENIX_URL"),
                   project=get("CAUSALTRACE_PROJECT") or get("OTEL_SERVICE_NAME") or "causaltrace",
                   phoenix_api_key=get("PHOENIX_API_KEY"))
