"""The plugin seams: small Protocols (Sandbox, Worker, ReplayAdapter, PlaybackCore, Verifier), the small frozen
values that cross the replay seam (CallEdit, PlaybackDecision) and the registries that connect
packages which may not import each other (ARCHITECTURE "Package layout").

* Framework adapters register a ``ReplayAdapter`` by framework name when their module is imported; ``replay/``
  finds them here, so ``replay`` never imports ``instrumentation``.
* Attribution methods register by name; ``replay/`` adds ``causalflow`` and the verification hook that the
  ``graph`` method's step 6 calls when present.
* Judge backends register by scheme: ``causaltrace.testing.judges`` registers ``function`` so that
  ``model="function:NAME"`` reaches a registered fake model, and attribution never imports ``testing``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from causaltrace.exceptions import UserError
from causaltrace.schema import (
    CodeResult,
    Diagnosis,
    Outcome,
    RecordedCall,
    Recording,
    RepairPair,
    Run,
    Step,
    Verdict,
)

__all__ = [
    "CallEdit",
    "EditPart",
    "EditSlot",
    "Factory",
    "PlaybackAction",
    "PlaybackCore",
    "PlaybackDecision",
    "SessionOpener",
    "ReplayAdapter",
    "RunStore",
    "Sandbox",
    "Verifier",
    "Worker",
    "default_sandbox",
    "get_judge_backend",
    "get_method",
    "get_replay_adapter",
    "judge_backend_schemes",
    "method_names",
    "register_default_sandbox",
    "register_judge_backend",
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


#: Which slot of a recorded call an intervention edits: an llm call's ``response``, a tool call's ``result``, or the
#: ``arguments`` a call made by running code is made with.
EditSlot = Literal["response", "result", "arguments"]

#: Which part of a recorded model response an edit changes (``whole`` for a result or arguments edit):
#: ``whole`` the response (new text, new tool calls or both), ``text`` the text of a message (``old`` is the text to
#: replace where it occurs), ``code`` the code it carries, ``thought`` a reasoning step's text, ``plan`` a plan's
#: text (both with ``old`` = the step's text), ``tool_arguments`` the arguments of the step's tool call,
#: ``final_answer`` the answer of a final-answer call, ``handoff`` the handoff call's target (``old`` = the old
#: target), ``selection`` a speaker selector's answer, ``ledger`` the ``field`` entry of a JSON progress ledger.
EditPart = Literal[
    "whole", "text", "code", "thought", "plan", "tool_arguments", "final_answer", "handoff", "selection", "ledger"
]


@dataclass(frozen=True)
class CallEdit:
    """The framework-neutral form of an intervention: the recorded call it changes, the slot and part of that call,
    and the (validated) new value. ``replay/`` resolves it from a step (``replay.playback.resolve_edit``); each
    adapter turns it into its framework's response objects (``ReplayAdapter.edit_transform``)."""

    call: RecordedCall
    slot: EditSlot
    value: Any
    part: EditPart = "whole"
    #: the step the intervention names (a step of the original run)
    step: Step | None = None
    #: the part's original value where the transform needs it (text to replace, the old handoff target)
    old: Any = None
    #: the ledger field (``next_speaker`` / ``instruction_or_question``) of a ``ledger`` edit
    field: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        """``(agent_key, kind, ordinal)`` of the edited call."""
        return self.call.key

    def label(self) -> str:
        """``agent_key kind #ordinal`` — how divergence messages name the edited call."""
        return f"{self.call.agent_key} {self.call.kind} #{self.call.ordinal}"


#: What a playback does with one call: serve it from the recording, return the intervention, run it again (a tool
#: call with recorded calls nested inside: an AgentTool / TeamTool) or run it live.
PlaybackAction = Literal["serve", "intervene", "rerun", "live"]


@dataclass(frozen=True)
class PlaybackDecision:
    """The playback core's answer for one call at ``(agent_key, kind, ordinal)``: the action and the recorded call
    it concerns (None for a live call the recording does not have)."""

    action: PlaybackAction
    call: RecordedCall | None = None


@runtime_checkable
class PlaybackCore(Protocol):
    """The framework-neutral playback engine one replay runs on (``replay.playback.Playback``), injected into the
    adapter by ``replay/`` (ARCHITECTURE decision 6). It matches each call by ``(agent_key, kind, ordinal,
    request hash)``, applies the edit, detects and logs divergences, keeps the counts and the recorded finish order.
    It holds no module-level state: several replays can run at once."""

    run: Run
    recording: Recording
    edit: CallEdit | None
    live_override: str | None
    applied: bool
    divergences: list[str]

    def check(self) -> None: ...

    def diverge(self, message: str) -> Exception: ...

    def diverge_from(self, label: str, what: str, noun: str, recorded: Any, replayed: Any) -> Exception: ...

    def before_text(self) -> str: ...

    def next_ordinal(self, key: str, kind: str) -> int: ...

    def reserve(self, key: str, calls: Sequence[tuple[str | None, str, dict[str, Any]]], *,
                replace: bool = False) -> None: ...

    def claim(self, key: str, name: str, arguments: dict[str, Any],
              call_id: str | None = None) -> tuple[int, dict[str, Any]]: ...

    def decide(self, key: str, kind: str, ordinal: int, digest: str, canonical: Any,
               what: str) -> PlaybackDecision: ...

    def bind(self, transform: Callable[[Any], Any] | None) -> None: ...

    def edited_response(self, call: RecordedCall) -> Any: ...

    def release(self, call: RecordedCall | None) -> None: ...

    async def wait_turn(self, call: RecordedCall) -> None: ...

    def count(self, action: str, *, llm: bool = False) -> None: ...

    def count_code_run(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...

    def finish(self, new_run: Run | None) -> Run: ...


class SessionOpener(Protocol):
    """Opens a persistent sandboxed Python worker whose code can call ``functions`` back in the parent (the
    smolagents CodeAgent executor; ``replay/`` injects ``replay.sandbox.session.PythonWorkerSession``)."""

    def __call__(self, sandbox: Sandbox, functions: Mapping[str, Callable[..., Any]], *, timeout_s: float,
                 memory_mb: int) -> Any: ...


@runtime_checkable
class ReplayAdapter(Protocol):
    """The playback side of a framework adapter, consumed by ``replay/`` (ARCHITECTURE decision 6).

    ``replay`` builds a fresh team/agent with the user's factory, swaps in playback model clients, tools and code
    executor driven by the injected ``playback`` core (the original run, its recording and the resolved
    :class:`CallEdit`), runs it on the run's task, traced and stored like any run, and returns the new Run with
    ``metadata["replay"] = {"of": original run id, "intervention": ..., "served": n, "live": n,
    "live_before_intervention": n, "deterministic": bool, "divergence": str | None, ...}``. Before the intervened
    call a request that does not match the recording raises ``ReplayDivergence``.

    ``edit_kinds`` names the step kinds whose interventions the framework can apply; ``edit_transform`` turns a
    neutral :class:`CallEdit` of a model response into a function from the recorded response object to the edited
    one (``agents``: agent key → the fresh team's member, for edits that depend on the agent).
    """

    framework: str
    display_name: str
    edit_kinds: tuple[str, ...]

    async def replay(
        self,
        factory: Factory,
        playback: PlaybackCore,
        *,
        sandbox: Sandbox | None,
        open_session: SessionOpener | None,
        verify: Any = None,
    ) -> Run: ...

    def edit_transform(self, edit: CallEdit, agents: Mapping[str, Any]) -> Callable[[Any], Any] | None: ...


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


#: how to get the sandbox code runs in when the caller gives none (one slot; ``replay.executor`` fills it)
_DEFAULT_SANDBOX: list[Callable[[], Sandbox]] = []


def register_default_sandbox(factory: Callable[[], Sandbox]) -> None:
    """Register the default sandbox (``replay`` registers its shared :class:`SubprocessSandbox`), so that the
    trunk's users — the ready-made verifiers, the adapters' code executors — reach it without importing replay."""
    _DEFAULT_SANDBOX[:] = [factory]


def default_sandbox() -> Sandbox:
    """The registered default sandbox; on first use this loads ``causaltrace.replay.executor``, which registers it
    (as :func:`get_replay_adapter` loads an adapter by name)."""
    if not _DEFAULT_SANDBOX:
        import importlib

        importlib.import_module("causaltrace.replay.executor")
    if not _DEFAULT_SANDBOX:
        raise UserError("no default sandbox is registered: pass sandbox=")
    return _DEFAULT_SANDBOX[0]()


_JUDGE_BACKENDS: dict[str, Callable[[str], Any]] = {}


def register_judge_backend(scheme: str, factory: Callable[[str], Any]) -> None:
    """Make ``model="SCHEME:REST"`` resolve to ``factory(REST)`` (a judge backend: ``causaltrace.attribution``'s
    ``JudgeModel``)."""
    _JUDGE_BACKENDS[scheme] = factory


def get_judge_backend(scheme: str) -> Callable[[str], Any] | None:
    """The backend factory registered for ``scheme``, or None (the model string then goes to litellm)."""
    return _JUDGE_BACKENDS.get(scheme)


def judge_backend_schemes() -> list[str]:
    """Schemes with a registered judge backend."""
    return sorted(_JUDGE_BACKENDS)


@runtime_checkable
class RunStore(Protocol):
    """Where runs, diagnoses and repair pairs are kept (``collector.store.Store``, SQLite, is the one built in).

    The live collector's writer thread calls ``begin_run`` / ``add_steps`` / ``finish_run`` (inside the store's
    ``transaction()`` when it has one: one commit per batch); ``repair`` and ``watch`` read and save diagnoses and
    repair pairs. Structural: any object with these methods is a store.
    """

    def begin_run(self, run_id: str, **fields: Any) -> None: ...

    def add_steps(self, run_id: str, steps: Sequence[Step]) -> None: ...

    def finish_run(self, run: Run, *, stored_steps: Collection[str] = ()) -> None: ...

    def get_run(self, run_id: str) -> Run: ...

    def diagnoses(self, run_id: str) -> list[Diagnosis]: ...

    def save_diagnosis(self, d: Diagnosis) -> int: ...

    def save_repair_pair(self, p: RepairPair) -> None: ...
