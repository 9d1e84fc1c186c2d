"""Framework hooks → Steps → spans, recording of calls, run marking.

Each adapter module imports its framework only inside its functions, so this package imports cleanly without
any framework installed. ``instrument()`` instruments every framework that is installed. The package's public
modules: ``runs`` (run marking), ``steps`` (step handles), ``calls`` (recorded calls), ``tracing`` (set-up) and
``scope``; from its private emitter and exporter it publishes :func:`apply_payload_policy` (what ``causaltrace
export --redact`` applies) and :func:`export_stats` (``causaltrace.export_stats``).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any

from causaltrace.config import TraceConfig
from causaltrace.instrumentation._emitter import apply_payload_policy
from causaltrace.instrumentation._export import ExportStats, export_stats

__all__ = ["ExportStats", "apply_payload_policy", "export_stats", "instrument", "uninstrument"]

logger = logging.getLogger("causaltrace")

#: framework import name → (adapter module, instrument function, uninstrument function)
_ADAPTERS = {
    "autogen_agentchat": ("causaltrace.instrumentation.autogen", "instrument_autogen", "uninstrument_autogen"),
    "smolagents": ("causaltrace.instrumentation.smolagents", "instrument_smolagents", "uninstrument_smolagents"),
}


def instrument(tracer_provider: Any = None, config: TraceConfig | None = None) -> list[str]:
    """Instrument every installed framework (AutoGen AgentChat, smolagents); returns the ones instrumented.

    Idempotent. A framework that is not installed is skipped silently.
    """
    done = []
    for package, (module, func, _) in _ADAPTERS.items():
        if importlib.util.find_spec(package) is None:
            continue
        getattr(importlib.import_module(module), func)(tracer_provider=tracer_provider, config=config)
        done.append(package)
    return done


def uninstrument() -> None:
    """Undo :func:`instrument` for every framework that was instrumented."""
    for package, (module, _, func) in _ADAPTERS.items():
        if importlib.util.find_spec(package) is None:
            continue
        getattr(importlib.import_module(module), func)()

