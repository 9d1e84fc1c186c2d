"""What both playback adapters share: describing where a replayed request first differs from the recorded one,
and rebuilding a recorded error as an exception with the same type name (frameworks write ``type(e).__name__``
into the text the next model call sees, so a served error must look the same)."""

from __future__ import annotations

import builtins
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from causaltrace.exceptions import ReplayDivergence
from causaltrace.schema import Intervention, Recording, Run, StepError, canonical_json

__all__ = ["DivergenceLog", "PlaybackAdapterBase", "exception_of", "first_difference", "short"]

logger = logging.getLogger("causaltrace")


class DivergenceLog:
    """The divergence half of a playback log: once a replay diverges, every later call raises the FIRST divergence
    (a divergence inside a nested agent must not surface later as some other error). Subclasses set ``_lock`` and
    ``divergences``."""

    _lock: threading.Lock
    divergences: list[str]

    def check(self) -> None:
        """Raise the first divergence again (the run must stop at it)."""
        if self.divergences:
            raise ReplayDivergence(self.divergences[0])

    def diverge(self, message: str) -> ReplayDivergence:
        """Note a divergence; returns the exception of the FIRST one."""
        with self._lock:
            self.divergences.append(message)
            first = self.divergences[0]
        logger.info("causaltrace replay: %s", message)
        return ReplayDivergence(first)


class PlaybackAdapterBase:
    """The part of the ``ReplayAdapter`` protocol both frameworks share: call the user's factory (sync or async),
    then ``_assemble`` the playback on the fresh object (framework-specific)."""

    framework: str = ""

    def build_playback(
        self,
        factory: Callable[[], Any],
        recording: Recording,
        intervention: Intervention | None,
        *,
        sandbox: Any,
        live_override: str | None = None,
        run: Run | None = None,
    ) -> Any:
        """Build a fresh team / agent with ``factory`` and swap in the playback parts (an awaitable when the factory
        is async)."""
        built = factory()
        if inspect.isawaitable(built):

            async def assemble() -> Any:
                return self._assemble(await built, recording, intervention, sandbox, live_override, run)

            return assemble()
        return self._assemble(built, recording, intervention, sandbox, live_override, run)

    def _assemble(
        self,
        root: Any,
        recording: Recording,
        intervention: Intervention | None,
        sandbox: Any,
        live_override: str | None,
        run: Run | None,
    ) -> Any:
        raise NotImplementedError


def first_difference(recorded: Any, replayed: Any, path: str = "") -> tuple[str, str, str]:
    """The path of the first difference between two canonical requests and a short view of both sides."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(set(recorded) | set(replayed)):
            if key not in recorded:
                return f"{path}.{key}", "<absent>", short(replayed[key])
            if key not in replayed:
                return f"{path}.{key}", short(recorded[key]), "<absent>"
            if recorded[key] != replayed[key]:
                return first_difference(recorded[key], replayed[key], f"{path}.{key}")
    elif isinstance(recorded, list) and isinstance(replayed, list):
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
        if len(recorded) != len(replayed):
            return f"{path} (length)", f"{len(recorded)} items", f"{len(replayed)} items"
    elif isinstance(recorded, str) and isinstance(replayed, str):
        i = next((n for n, (a, b) in enumerate(zip(recorded, replayed, strict=False)) if a != b),
                 min(len(recorded), len(replayed)))
        lo = max(0, i - 40)
        return (f"{path} (character {i})", repr(("…" if lo else "") + recorded[lo:i + 80]),
                repr(("…" if lo else "") + replayed[lo:i + 80]))
    return path, short(recorded), short(replayed)


def short(value: Any, limit: int = 160) -> str:
    text = canonical_json(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def exception_of(error: StepError | None, default: str = "Error") -> BaseException:
    """An exception with the recorded type NAME and message (smolagents writes ``type(e).__name__`` into text)."""
    name = error.type if error is not None and error.type else default
    message = error.message if error is not None else ""
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        try:
            return builtin(message)
        except Exception:
            pass
    return type(name, (Exception,), {"__module__": "causaltrace.replay.served"})(message)
