"""What both playback adapters share on the instrumentation side: the shape of ``ReplayAdapter.replay`` (call the
user's factory, sync or async; assemble the framework's playback on the fresh object around the injected core; run
it marked as a run), and rebuilding a recorded error as an exception with the same type name (frameworks write
``type(e).__name__`` into the text the next model call sees, so a served error must look the same).

The framework-neutral playback engine itself lives in ``causaltrace.replay.playback`` and reaches the adapters
only through :class:`~causaltrace.protocols.PlaybackCore` (``instrumentation`` never imports ``replay``).
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from causaltrace.instrumentation._export import replays_exported, unexported
from causaltrace.protocols import CallEdit, Factory, PlaybackCore, Sandbox, SessionOpener
from causaltrace.schema import Run, StepError

__all__ = ["PlaybackAdapterBase", "exception_of", "replay_name", "replay_scope", "task_of", "unexported"]


class PlaybackAdapterBase:
    """The part of the ``ReplayAdapter`` protocol both frameworks share. A subclass sets ``framework``,
    ``display_name`` and ``edit_kinds`` and implements :meth:`assemble`, :meth:`run_assembled` and
    :meth:`edit_transform`.

    ``instrument`` is called before each replay runs (the facade passes "instrument this framework unless it is
    already"), so the replayed run is recorded like any run — the adapter never imports its facade."""

    framework: str = ""
    display_name: str = ""
    edit_kinds: tuple[str, ...] = ()

    def __init__(self, instrument: Callable[[], None] | None = None) -> None:
        self.instrument = instrument

    async def replay(
        self,
        factory: Factory,
        playback: PlaybackCore,
        *,
        sandbox: Sandbox | None,
        open_session: SessionOpener | None,
        verify: Any = None,
    ) -> Run:
        """Build a fresh team / agent with ``factory``, swap in the playback parts driven by ``playback``, run it
        on the original run's task and return the new Run (the first divergence raised as ``ReplayDivergence``).

        The build is never exported (the framework's spans while the factory runs), the replay only with
        ``CAUSALTRACE_EXPORT_REPLAYS=true``: one trace per user run (:func:`replay_scope`)."""
        with unexported():
            built = factory()
            root = await built if inspect.isawaitable(built) else built
            assembled = self.assemble(root, playback, sandbox=sandbox, open_session=open_session)
        with replay_scope():
            return await self.run_assembled(assembled, verify=verify)

    def assemble(self, root: Any, playback: PlaybackCore, *, sandbox: Sandbox | None,
                 open_session: SessionOpener | None) -> Any:
        """Swap the playback parts into ``root`` (a fresh object) and bind the edit's transform."""
        raise NotImplementedError

    async def run_assembled(self, assembled: Any, *, verify: Any = None) -> Run:
        """Run an assembled playback (see :meth:`replay`)."""
        raise NotImplementedError

    def edit_transform(self, edit: CallEdit, agents: Mapping[str, Any]) -> Callable[[Any], Any] | None:
        """The framework's transform of the recorded response that applies ``edit``."""
        raise NotImplementedError

    def ensure_instrumented(self) -> None:
        if self.instrument is not None:
            self.instrument()


def replay_scope() -> contextlib.AbstractContextManager[None]:
    """The scope a replay runs in: unexported (stored only), unless ``CAUSALTRACE_EXPORT_REPLAYS=true``."""
    return contextlib.nullcontext() if replays_exported() else unexported()


def task_of(run: Run) -> str:
    """The task a replay of ``run`` runs on: ``run.task``, else the content of its ``task`` step."""
    if run.task is not None:
        return run.task
    first = next((s for s in run.steps if s.kind == "task"), None)
    return first.content if first is not None else ""


def replay_name(run: Run) -> str:
    """The name of the replayed run."""
    return f"{run.name} (replay)" if run.name else "replay"


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
