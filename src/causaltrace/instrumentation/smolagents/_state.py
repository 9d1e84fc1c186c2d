"""What one smolagents agent run knows while it executes, and the context variables it lives in.

One :class:`AgentRun` exists per ``MultiStepAgent.run`` call — the top-level agent's and every managed agent's —
and lives in :data:`CURRENT_RUN` while that run executes (copied into smolagents' parallel tool-call threads and,
through the patched ``timeout`` decorator, into the CodeAgent executor's thread). Everything that is specific to
one action step (the llm_response, its tool calls, the code execution, a pending final answer) is kept on the
AgentRun (:class:`ActionState`), because one agent run executes its action steps one after the other; the only
concurrent entry points (parallel tool calls, and the tools / managed agents running code calls) take
:attr:`AgentRun.lock`.

The hooks that feed an AgentRun are split by concept: ``_runs`` (an agent run's start and end), ``_turns`` (the
run's stream: action steps, planning, final answers), ``_model_calls``, ``_tools`` (tools and managed agents) and
``_code`` (CodeAgent code executions). This module imports none of them.

Design decisions written here because ARCHITECTURE leaves them open:

* ``Step.agent`` is the agent's own name (the root's class name when it has none); the ``/``-joined ``agent_key``
  the Recording uses is on the ``agent_turn``'s metadata and on every recorded call.
* The top-level run starts with ``task`` (agent ``user``, a user input) and then the ``agent_turn``. A managed run
  starts with its ``agent_turn`` (parent: the manager's tool_call) and then its ``task`` inside it (agent: the
  managed agent, ``delegated_by`` that tool_call).
* A tool call's span lasts while the tool runs: the ``tool_call`` step ends when the tool returns, and its
  ``tool_response`` starts then. A tool that raises gives an ERROR ``tool_response``; the ``tool_call`` itself is OK
  (the model's call was well-formed; what failed is reported once, on the response).
* ``final_answer`` in both agent types is first a ``tool_call`` (+ ``tool_response``) — the model's/code's call of
  the ``final_answer`` tool — then a ``final_answer`` step (``produced_by`` the llm_response or the code_execution,
  ``answer_of`` that tool_response). A rejection by ``final_answer_checks`` ends the ``final_answer`` step with
  ERROR; the next llm_response ``observed`` it.
* An AgentError the agent recovers from that no step carries (a parsing error…) becomes an ``error`` step
  ``produced_by`` the llm_response, which the next llm_response ``observed``. Max steps: an ``error`` step
  (AgentMaxStepsError) before smolagents' forced final-answer call, the forced ``final_answer`` (metadata
  ``forced``), the ``agent_turn`` ends with ERROR and the run stops with ``limit``. An exception that ends the run:
  an ``error`` step and ERROR on the ``agent_turn``.
* The Recording: one ``llm`` entry per model call (response = the PARSED ChatMessage, raw payload dropped, served
  back as a ChatMessage); one ``tool`` entry per tool call, per managed-agent call (settings ``managed_agent``) and
  per code execution (``python_interpreter``, response a ``CodeOutput``, settings ``code_execution``). Tool ordinals
  are reserved in the model's / code's call order, before any thread starts.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from causaltrace.instrumentation._json_text import C_MAKE_ENCODER, one_shot_args
from causaltrace.instrumentation.calls import CallHandle
from causaltrace.instrumentation.runs import RunContext, run_scope
from causaltrace.instrumentation.scope import Scope
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.steps import StepHandle

__all__ = [
    "CURRENT_RUN",
    "IN_MODEL",
    "IN_TOOL",
    "INVOKER",
    "ActionState",
    "AgentRun",
    "Invocation",
    "LLMRec",
    "MAX_CONTENT",
    "ToolRec",
    "arg",
    "call_text",
    "guard",
    "internal_error",
    "text",
]

logger = logging.getLogger("causaltrace")

#: The agent run executing in this context.
CURRENT_RUN: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar("causaltrace_smol_state", default=None)
#: The manager's call that is about to run a managed agent (read by the managed agent's run).
INVOKER: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar("causaltrace_smol_invoker", default=None)
#: Set while a tool of this agent run executes: nested tool / model calls inside it are not the agent's own steps.
IN_TOOL: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar("causaltrace_smol_in_tool", default=None)
#: Set while a hooked model call runs (a model calling another hooked model gives one llm_response).
IN_MODEL: contextvars.ContextVar[bool] = contextvars.ContextVar("causaltrace_smol_in_model", default=False)

#: How long a step's content may be (:func:`text`; a hook that has a str cuts it itself: no call).
MAX_CONTENT = 100_000


def guard(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run our own bookkeeping; a failure is logged and swallowed (the user's run goes on)."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        internal_error(fn)
        return None


def internal_error(fn: Callable[..., Any]) -> None:
    """Log our own failure in ``fn`` (inside an ``except``): what :func:`guard` does for a hook that catches its
    failure itself (the per-event ones, to spare a call)."""
    logger.warning("causaltrace: internal error in the smolagents adapter (%s); the run continues",
                   getattr(fn, "__qualname__", fn), exc_info=True)


def text(value: Any) -> str:
    """``value`` as a step's content: a string, cut at 100,000 characters."""
    out = value if isinstance(value, str) else ("" if value is None else str(value))
    return out[:MAX_CONTENT]


#: ``json.dumps(…, ensure_ascii=False, sort_keys=True, default=str)``'s encoder, made once (dumps builds one per
#: call with these arguments).
_CALL_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)
_CALL_JSON_ARGS = one_shot_args(_CALL_JSON)


def call_text(name: str, arguments: Any) -> str:
    """A tool call as a step's content: ``name({...})`` (the encoder's C work straight: :mod:`.._json_text`)."""
    if _CALL_JSON_ARGS is None:
        return f"{name}({_CALL_JSON.encode(arguments)})"
    return f"{name}({''.join(C_MAKE_ENCODER({}, *_CALL_JSON_ARGS)(arguments, 0))})"


def arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    """A wrapped method's argument, passed by position or by name."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


@dataclass
class Invocation:
    """A manager's call that runs a managed agent; the managed run writes its final_answer step id back."""

    tool_call: StepHandle
    parent: AgentRun
    target: str
    answer_step_id: str | None = None


@dataclass
class ToolRec:
    """One tool call of the current action step (or of the running code)."""

    step: StepHandle
    ordinal: int | None
    name: str
    raw_arguments: Any
    arguments: dict[str, Any]
    call_id: str | None = None
    claimed: bool = False


@dataclass
class LLMRec:
    """A model call in flight."""

    step: StepHandle
    call: CallHandle | None
    phase: str


@dataclass
class ActionState:
    """What belongs to the action step being executed."""

    memory_step: Any = None
    llm: LLMRec | None = None
    pending_message: Any = None  # a ToolCallingAgent response whose tool calls smolagents still has to parse
    tools: list[ToolRec] = field(default_factory=list)
    code_exec: StepHandle | None = None
    code_call: CallHandle | None = None
    final_step: StepHandle | None = None
    final_tool_response: str | None = None
    accounted: set[int] = field(default_factory=set)


class AgentRun:
    """One smolagents agent run (top-level or managed): its steps, dependencies and recorded calls."""

    def __init__(
        self,
        ctx: RunContext,
        agent: Any,
        *,
        owned: bool,
        parent: AgentRun | None,
        invocation: Invocation | None,
        task: str | None,
    ) -> None:
        self.ctx = ctx
        self.agent = agent
        self.owned = owned
        self.parent = parent
        self.invocation = invocation
        self.task = task
        self.name = acc.agent_name(agent)
        self.key = f"{parent.key}/{self.name}" if parent is not None else self.name
        self.code_agent = acc.is_code_agent(agent)
        self.tool_calling = acc.is_tool_calling_agent(agent)
        self.lock = threading.RLock()
        self.saw: list[str] = []
        self.observed: list[str] = []
        self.prev_llm: str | None = None
        self.known_ids: list[str] = []
        self._pattern: Any = None
        self._pattern_size = -1
        self.phase = "action"
        self.act = ActionState()
        self.planning_llm: str | None = None
        self.final_llm: str | None = None
        self.last_action_step: Any = None
        self.accepted = False
        self.answer_step_id: str | None = None
        self.output: Any = None
        self.stop = "normal"
        self.closed = False
        self.observing = False
        self.turn: StepHandle | None = None
        self.task_step: StepHandle | None = None
        self.callees: list[int] = []  # ids of the tools / managed agents its running code can call

    def entered(self, *, force: bool = False) -> AbstractContextManager[Any]:
        """Make this agent run current (its run, its agent_turn span); a no-op when it already is."""
        if not force and CURRENT_RUN.get() is self:
            return nullcontext()
        values = ((CURRENT_RUN, self), (INVOKER, None), (IN_TOOL, None))
        if self.owned:
            return run_scope(self.ctx, *values, step=self.turn)
        if self.turn is not None:
            return self.turn.activate(*values)
        return Scope(values)

    def new_step(self, kind: str, **fields: Any) -> StepHandle:
        """Start a step of this agent, inside its agent_turn."""
        handle = self.ctx.start_step(kind, agent=self.name, parent=self.turn, **fields)
        if handle is None:
            raise RuntimeError(f"could not start a {kind} step")
        return handle

    def observe(self, step_id: str) -> None:
        """The agent's next model call ``observed`` this step (a tool response, a code execution, an error)."""
        with self.lock:
            self.observed.append(step_id)

    def produced_by_llm(self) -> list[tuple[str, str]]:
        """A ``produced_by`` dependency on the current action step's llm_response (none when there is none)."""
        return [(self.act.llm.step.step_id, "produced_by")] if self.act.llm is not None else []

    def pattern(self) -> Any:
        """The matcher of the tool-call ids seen so far in this run (rebuilt only when new ids arrived)."""
        with self.lock:
            if self._pattern_size != len(self.known_ids):
                # acc.call_id_pattern, inline (CallIdPattern drops the empty ids itself)
                self._pattern = acc.CallIdPattern(self.known_ids) if any(self.known_ids) else None
                self._pattern_size = len(self.known_ids)
            return self._pattern
