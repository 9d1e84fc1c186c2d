"""The recording state of the AutoGen wing: the contextvars that say where a framework event happens, and what the
adapter remembers per run.

How state flows (everything is keyed by contextvars, so two teams running concurrently in one event loop are two
separate runs):

* :data:`LEVEL` — one team run or agent run (its run, agent-key path, parent step, task step, pending
  ``selected_by`` / ``handoff_from`` edges). Set by the ``run_stream`` / ``run`` wrappers (:mod:`._runs`) around
  every step of the framework's generator, so AutoGen's embedded runtime — started inside the first step — copies it
  into every task it spawns.
* :data:`TURN` — one agent turn (``on_messages_stream``, :mod:`._turns`): its ``agent_turn`` step, the messages
  delivered to it, its last llm_response and its tool calls in flight. Model calls, tool executions and code
  executions read it.
* :data:`MANAGER` — a SelectorGroupChat manager choosing the next speaker (:mod:`._selection`): its model calls are
  llm_responses of the manager, whose agent name is the manager's own name (``SelectorGroupChatManager`` by
  default) and whose agent_key is ``<team path>/<manager name>`` (ARCHITECTURE "Recording": ``team/<manager name>``).
* :data:`ORCH` — a MagenticOne orchestrator inside one of its phases (:mod:`._magentic`): the messages it adds to its
  own thread become its steps. Its model calls are found by client identity (the team's ``model_client``, outside
  any agent turn), so the facts and plan calls of its ``handle_start`` are the orchestrator's too.
* :data:`IN_LLM` — inside a recorded model call (:mod:`._model_calls`): a client calling another client is one call.
* per run (:class:`RunState`): AutoGen message id → the step that emitted it (``saw`` edges), and per agent_key the
  previous llm_response (``continues``) and what arrived since it (``saw``, ``observed``, ``memory_read``).

Wrappers of async generators set the contextvars only around each ``__anext__`` of the wrapped generator and
reset them before yielding, so nothing leaks into the consumer and no token is reset in a foreign context.
The playback side reads :data:`TURN`, :data:`MANAGER` and :data:`LEVEL` to key a call in flight as the recording
does. No AutoGen import here.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from causaltrace.instrumentation.autogen._access import client_settings
from causaltrace.instrumentation.runs import RunContext
from causaltrace.instrumentation.steps import StepHandle
from causaltrace.schema import StepError

__all__ = [
    "IN_LLM",
    "LEVEL",
    "MANAGER",
    "NO_SCOPE",
    "ORCH",
    "SETTINGS",
    "TURN",
    "Level",
    "LevelRun",
    "Manager",
    "Memo",
    "Orchestrator",
    "PendingCall",
    "Phase",
    "RunState",
    "Turn",
    "activated",
    "add_agent_error",
    "call_arg",
    "extend_unique",
    "settings_of",
    "state_of",
    "step_id_of",
]

LEVEL: contextvars.ContextVar[Level | None] = contextvars.ContextVar("causaltrace_autogen_level", default=None)
TURN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("causaltrace_autogen_turn", default=None)
MANAGER: contextvars.ContextVar[Manager | None] = contextvars.ContextVar("causaltrace_autogen_mgr", default=None)
IN_LLM: contextvars.ContextVar[bool] = contextvars.ContextVar("causaltrace_autogen_in_llm", default=False)
ORCH: contextvars.ContextVar[Phase | None] = contextvars.ContextVar("causaltrace_autogen_orch", default=None)


class Memo:
    """Per (run, agent_key): the previous llm_response and what reached the agent since it."""

    __slots__ = ("last_llm", "memory", "observed", "saw")

    def __init__(self) -> None:
        self.last_llm: str | None = None
        self.saw: list[str] = []
        self.observed: list[str] = []
        self.memory: list[str] = []


class RunState:
    """What the adapter remembers about one run."""

    def __init__(self) -> None:
        self.msg_steps: dict[str, str] = {}
        self.memos: dict[str, Memo] = {}
        #: tool_call step id → the step whose content a nested agent/team returned through that tool (answer_of).
        self.answers: dict[str, str] = {}
        #: the first exception an agent raised in this run: (agent name, exception), for the run's reason.
        self.agent_error: tuple[str, BaseException] | None = None
        #: long-lived steps started here (turns, model / tool / code calls), ended when the run ends before them.
        self.open: list[StepHandle] = []
        #: set when the top-level team/agent run ended: late events of still-running tasks add no steps.
        self.closed = False

    def track(self, handle: StepHandle | None) -> StepHandle | None:
        """Remember a long-lived step (pruning the ended ones now and then) and hand it back."""
        if handle is not None:
            if len(self.open) > 256:
                self.open = [h for h in self.open if not h.ended]
            self.open.append(handle)
        return handle

    def end_open(self) -> None:
        """End (as cancelled) every step still open: a Run is assembled from ended steps only."""
        for handle in reversed(self.open):
            if not handle.ended:
                handle.end(error=StepError(type="Cancelled", message="the run ended before this step finished"))
        self.open.clear()

    def memo(self, key: str) -> Memo:
        """The :class:`Memo` of one agent_key, created on first use."""
        memo = self.memos.get(key)
        if memo is None:
            memo = self.memos[key] = Memo()
        return memo


#: Client (weakly referenced) → its recorded settings: a dict keyed by weak references, as a WeakKeyDictionary
#: keeps it, looked up without its ``get`` (a Python call on every model call).
_SETTINGS: dict[weakref.ref[Any], dict[str, Any]] = {}
#: The same table, looked up by the model-call hook itself (:func:`settings_of`'s lookup, inline).
SETTINGS = _SETTINGS


def _forget_settings(ref: weakref.ref[Any]) -> None:
    _SETTINGS.pop(ref, None)


def settings_of(client: Any) -> dict[str, Any]:
    """The client's recorded settings, computed once per client object."""
    try:
        settings = _SETTINGS.get(weakref.ref(client))
    except TypeError:  # not weak-referenceable (or not hashable)
        return client_settings(client)
    if settings is None:
        settings = _SETTINGS[weakref.ref(client, _forget_settings)] = client_settings(client)
    return settings


_STATES_LOCK = threading.Lock()


def state_of(ctx: RunContext) -> RunState:
    """The adapter's :class:`RunState` of a run, created on first use (kept on the run, ``ctx.adapters``: it goes
    with the run)."""
    state = ctx.adapters.get("autogen")
    if state is None:
        with _STATES_LOCK:
            state = ctx.adapters.get("autogen")
            if state is None:
                state = ctx.adapters["autogen"] = RunState()
    return state


@dataclass(eq=False)
class Level:
    """One team run or agent run inside a causaltrace run."""

    ctx: RunContext
    state: RunState
    path: tuple[str, ...]
    nested: bool
    parent_id: str | None
    task_step_id: str | None
    selected: dict[str, str] = field(default_factory=dict)
    handoffs: dict[str, str] = field(default_factory=dict)
    selector_seen: dict[str, int] = field(default_factory=dict)
    orchestrator: Orchestrator | None = None


@dataclass(eq=False)
class LevelRun:
    """A team / agent run in flight as its wrapper sees it: whether it owns the causaltrace run, its nested team
    turn, the step that invoked it (an AgentTool's tool_call), its task messages and the agent turn around it."""

    ctx: RunContext
    owned: bool
    level: Level
    nested: bool
    team_turn: StepHandle | None
    invoking: StepHandle | None
    task_messages: list[Any]
    outer_turn: Turn | None = None


@dataclass(eq=False)
class PendingCall:
    """One FunctionCall of a turn, from its ``tool_call`` step to its result (``ordinal``: its recorded call's)."""

    call: Any
    handle: StepHandle | None
    ordinal: int | None
    arguments: dict[str, Any]
    done: bool = False


@dataclass(eq=False)
class Turn:
    """One agent turn (``on_messages_stream`` call) in flight."""

    ctx: RunContext
    state: RunState
    level: Level
    agent: Any
    name: str
    key: str
    path: tuple[str, ...]
    handle: StepHandle | None
    memo: Memo
    delivered: list[tuple[Any, str | None]]
    user_input: bool
    last_llm: str | None = None
    last_producer: str | None = None
    calls: list[PendingCall] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    code_results: list[Any] = field(default_factory=list)
    responded: bool = False


@dataclass(eq=False)
class Manager:
    """A group-chat manager making model calls (SelectorGroupChat's speaker selection): the agent of its
    llm_responses, their agent_key, parent and :class:`Memo`."""

    name: str
    key: str
    parent_id: str | None
    memo: Memo
    last_llm: str | None = None


@dataclass(eq=False)
class Orchestrator(Manager):
    """A MagenticOneGroupChat's orchestrator (one per team run): its client, the participants it chooses among,
    the thread messages it has already read, and the text of its last model call (the progress ledger)."""

    client: Any = None
    participants: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    last_text: str = ""
    failed: BaseException | None = None


@dataclass(eq=False)
class Phase:
    """One orchestrator method in flight (``kind``: ``step``, ``outer``, ``replan`` or ``final``)."""

    orch: Orchestrator
    level: Level
    manager: Any
    kind: str
    attempts: list[str] = field(default_factory=list)
    said: int = 0


def step_id_of(handle: StepHandle | None) -> str | None:
    """The step id of a handle, None for no handle (recording off or a step that could not start)."""
    return handle.step_id if handle is not None else None


def call_arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    """A wrapped method's argument, passed by ``name`` or at position ``index`` (``self`` not counted)."""
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else default


def extend_unique(target: list[str], items: list[str | None]) -> None:
    """Append the step ids of ``items`` not already in ``target`` (None skipped), keeping their order."""
    for item in items:
        if item is not None and item not in target:
            target.append(item)


NO_SCOPE = nullcontext()


def add_agent_error(ctx: RunContext, state: RunState, agent: str, key: str, parent: Any, error: BaseException) -> None:
    """An exception out of an agent's turn or an orchestrator phase: an ``error`` step of that agent under
    ``parent``, and the run's first agent error (the run's reason) when it has none yet."""
    if state.agent_error is None:
        state.agent_error = (agent, error)
    ctx.add_step(
        "error",
        agent=agent,
        parent=parent,
        content=f"{type(error).__name__}: {error}",
        error=error,
        metadata={"agent_key": key},
    )


def activated(handle: StepHandle | None) -> AbstractContextManager[Any]:
    """The step current while the framework runs inside it (nothing for no handle)."""
    return NO_SCOPE if handle is None else handle.activate()
