"""The plugin seams: small Protocols (Sandbox, Worker, ReplayAdapter, Verifier) and the registries that connect
packages which may not import each other (ARCHITECTURE "Package layout").

* Framework adapters register a ``ReplayAdapter`` by framework name when their module is imported; ``replay/``
  finds them here, so ``replay`` never imports ``instrumentation``.
* Attribution methods register by name; ``replay/`` adds ``causalflow`` and the verification hook that the
  ``graph`` method's step 6 calls when present.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from causaltrace.exceptions import UserError
from causaltrace.schema import CodeResult, Intervention, Outcome, Recording, Run, Verdict

if TYPE_CHECKING:
    pass

__all__ = [
    "Factory",
    "ReplayAdapter",
    "Sandbox",
    "Verifier",
    "Worker",
    "get_method",
    "get_replay_adapter",
    "method_names",
    "register_method",
    "register_replay_adapter",
    "replay_adapter_names",
]

#: The user's zero-argument build function (sync or async) that returns a fresh team or agent.
Factory = Callable[[], Any]


@runtime_checkable
class Verifier(Protocol):
    """Judges a run's outcome: returns a Verdict or a bool (sync or async)."""

    def __call__(self, outcome: Outcome, /) -> Verdict | bool | Awaitable[Verdict | bool]: ...


@runtime_checkable
class Worker(Protocol):
    """A persistent sandboxed process that exchanges framed JSON messages over stdin/stdout."""

    def send(self, message: Mapping[str, Any]) -> None: ...

    def recv(self, timeout_s: float | None = None) -> dict[str, Any]: ...

    def close(self) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted code (ARCHITECTURE decision 7).

    ``run`` returns for everything the code does (timeouts as ``timed_out=True``) and raises ``SandboxError`` only
    when the sandbox itself cannot start.
    """

    def run(
        self, code: str, *, files: Mapping[str, bytes] | None = None, timeout_s: float, memory_mb: int
    ) -> CodeResult: ...

    def open_worker(self, argv: list[str], *, timeout_s: float, memory_mb: int) -> Worker: ...


@runtime_checkable
class ReplayAdapter(Protocol):
    """The playback side of a framework adapter, consumed by ``replay/`` (ARCHITECTURE decision 6).

    ``build_playback`` builds a fresh team/agent with the user's factory and swaps in playback model clients, tools
    and code executor (``run`` is the original Run, whose steps say which recorded call the intervention edits);
    ``run_playback`` runs it on the run's task, traced and stored like any run, and returns the new Run with
    ``metadata["replay"] = {"of": original run id, "intervention": ..., "served": n, "live": n,
    "live_before_intervention": n, "deterministic": bool, "divergence": str | None}``.
    Before the intervened call a request that does not match the recording raises ``ReplayDivergence``.
    """

    framework: str

    def build_playback(
        self,
        factory: Factory,
        recording: Recording,
        intervention: Intervention | None,
        *,
        sandbox: Sandbox | None,
        live_override: str | None = None,
        run: Run | None = None,
    ) -> Awaitable[Any] | Any: ...

    def run_playback(self, playback: Any, run: Run, *, verify: Any = None) -> Awaitable[Run]: ...


_REPLAY_ADAPTERS: dict[str, ReplayAdapter] = {}
_METHODS: dict[str, Callable[..., Any]] = {}


def register_replay_adapter(adapter: ReplayAdapter) -> None:
    """Register the playback side of a framework adapter under ``adapter.framework``."""
    _REPLAY_ADAPTERS[adapter.framework] = adapter


def get_replay_adapter(framework: str) -> ReplayAdapter:
    """The registered adapter for ``framework``; a UserError naming the extra when none is registered."""
    if framework not in _REPLAY_ADAPTERS:
        import importlib

        module = {"autogen": "causaltrace.instrumentation.autogen", "smolagents": "causaltrace.instrumentation.smolagents"}
        if framework in module:
            try:
                importlib.import_module(module[framework])
            except ImportError:
                pass
    try:
        return _REPLAY_ADAPTERS[framework]
    except KeyError:
        raise UserError(
            f"no replay adapter for framework {framework!r}; runs of {sorted(_REPLAY_ADAPTERS) or 'none'} can be "
            f"replayed (install the extra: pip install 'causaltrace[{framework}]')"
        ) from None


def replay_adapter_names() -> list[str]:
    """Frameworks with a registered replay adapter."""
    return sorted(_REPLAY_ADAPTERS)


def register_method(name: str, method: Callable[..., Any]) -> None:
    """Register an attribution method (a factory returning an object with an async ``diagnose``)."""
    _METHODS[name] = method


def get_method(name: str) -> Callable[..., Any]:
    """The registered attribution method ``name``; a UserError listing the known ones otherwise."""
    try:
        return _METHODS[name]
    except KeyError:
        raise UserError(f"unknown attribution method {name!r}; known: {', '.join(sorted(_METHODS))}") from None


def method_names() -> list[str]:
    """Names of the registered attribution methods."""
    return sorted(_METHODS)
