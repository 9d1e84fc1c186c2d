"""Test doubles shipped with causaltrace: reactive scripted models for AutoGen (``causaltrace.testing.autogen``) and
smolagents (``causaltrace.testing.smolagents``), and fixtures. Each submodule imports its framework lazily."""

from __future__ import annotations

from typing import Any

__all__ = ["CallInfo", "FunctionJudge", "register_function_model"]


def __getattr__(name: str) -> Any:
    """The function-backed fake judge (:mod:`causaltrace.testing.judges`), re-exported here (imported on first use)."""
    if name in __all__:
        from causaltrace.testing import judges

        return getattr(judges, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
