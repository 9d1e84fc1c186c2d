"""The playback side of the smolagents adapter: :class:`SmolagentsReplayAdapter` (ARCHITECTURE decisions 6–7,
"Shared contracts": Factory, ReplayAdapter, Intervention; FACTS.md "Replay by playback").

``replay(factory, playback, sandbox=..., open_session=..., verify=...)`` builds a FRESH agent with the user's
factory and, on every agent of its tree (the manager and, recursively, its managed agents, keyed by the same
``/``-joined ``agent_key`` paths the recording uses), swaps in:

* **the model** — a :class:`PlaybackModel` wrapping the factory-built model. For each call it builds the canonical
  request exactly as the recording does (``_access.llm_request`` over the same arguments, call-id aliasing
  with the agent run's known ids, :func:`~causaltrace.recording.request_hash`) and looks up the recorded call at
  ``(agent_key, "llm", ordinal)``;
* **the tools** — copies (``agent.tools[name] = copy.copy(tool)`` with ``forward`` overridden; shared tool objects
  are never patched) that look up ``(agent_key, "tool", ordinal)`` the same way. Tool ordinals follow the
  recording's rule: a ToolCallingAgent's calls are numbered in the order of the model's response (reserved when the
  response comes back), code calls in the code's call order; the code execution itself takes one ordinal first;
* **the code executor** (CodeAgent) — ``agent.python_executor`` is replaced AFTER construction (smolagents refuses
  remote executors with managed agents only at construction, FACTS.md) by a persistent sandboxed Python worker per
  agent (ARCHITECTURE decision 7: the injected ``open_session`` over the injected ``Sandbox``); the code's calls to tools,
  managed agents and ``final_answer`` come back to the parent over the worker's pipe and go through the playback
  tool copies. Without a sandbox (``sandbox=None``, a direct caller) the agent's own ``LocalPythonExecutor`` runs
  the code — not a security boundary (FACTS.md), logged as a warning.

Managed agents are RE-RUN, not served: their own models and tools are played back under their own keys, so
parallel managed agents are matched by (agent, call number within that agent, hash), never by a global order.

The neutral part — matching, ordinals, divergences, the counts, and resolving an intervention to a
:class:`~causaltrace.protocols.CallEdit` — is the injected playback core (``causaltrace.replay.playback``). Matching
(decision 6), per call at ``(agent_key, kind, ordinal)`` with request hash ``h``:

* the intervened call (its request must still match) returns the replacement;
* a call whose recorded entry STARTED before the intervened call (``start_order``) must match: a different hash, or
  a call the recording does not have while the intervention is not yet applied, is a ``ReplayDivergence`` whose
  text names the agent key, kind and ordinal and shows the first differing part of the canonical request. The
  first divergence is kept in the playback's log; every later model call raises it again, so the run stops and
  :meth:`SmolagentsReplayAdapter.replay` reports that FIRST divergence (a divergence inside a managed agent
  would otherwise surface later as a different error in the manager, FACTS.md);
* after it, a matching call is served from the recording and anything else runs live: the factory-built model
  (``temperature=0`` and a ``seed`` set on API models, which accept them) or ``LiteLLMModel(live_override)``; the
  real tool.

Served responses are fresh copies (``decode_response`` decodes anew: agents mutate what they get back); a recorded
error is served by raising an exception of the recorded type name and message. Released order: smolagents sorts
parallel tool results by tool-call id, so serving needs no finish-order gate here.

Code executions always RUN (the worker's variables and the calls the code makes — managed agents re-run — must
happen). While the intervention is not yet applied, a code execution whose request matches returns the RECORDED
output (code that reads the time, random numbers or set order would otherwise diverge, FACTS.md); once it is
applied, the actual output is returned — counted as served when it equals the recorded one, else live.

Interventions (ARCHITECTURE "Intervention"; the step is a step of the original ``run``; the core resolves it to a
``CallEdit``, :mod:`._playback_edits` turns that into the edited message):

==========================================  =====================================================================
step                                        what is changed
==========================================  =====================================================================
llm_response                                its response: text (``str``), tool calls (``[{name, arguments}]``) or
                                            ``{"text", "tool_calls"}``
reasoning / planning                        the producing llm response's text: the thought (or plan) is replaced,
                                            the rest of the response (the code block, the tool calls) is kept
final_answer                                ToolCallingAgent: the ``final_answer`` call's answer in the producing
                                            response; forced final answer: the response text; CodeAgent: the
                                            ``final_answer(...)`` call in the producing code
tool_call (ToolCallingAgent)                the producing response's tool call (matched by call id) gets the new
                                            arguments (a dict)
tool_call ``python_interpreter`` /          the producing llm response with the code between the code tags replaced
code_execution                              by the new code (``str`` or ``{"code": ...}``); the text is otherwise
                                            unchanged
tool_call made by running code              that call is made with the new arguments
tool_response                               that tool call's result is the replacement (a managed agent's answer:
                                            the agent is not run; its report is the replacement)
==========================================  =====================================================================

Anything else (``agent_turn``, ``task``, ``error``, ``message``…) is a ``UserError`` naming the kind.

Modules: this one (the adapter; imports no smolagents at import time), ``_playback_keys`` (agent keys and call-id
patterns) and, imported when a playback is assembled, ``_playback_models`` (the models), ``_playback_tools`` (tool
copies, code call-backs, the answering managed agent), ``_playback_edits`` (edits → messages) and ``_executor`` (the
sandboxed CodeAgent executor). ``instrumentation`` never imports ``replay``: the core and the session factory are
injected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from causaltrace.exceptions import UserError
from causaltrace.instrumentation._playback_common import (
    PlaybackAdapterBase,
    replay_name,
    replay_scope,
    task_of,
    unexported,
)
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._playback_keys import walk
from causaltrace.protocols import CallEdit, Factory, PlaybackCore, Sandbox, SessionOpener
from causaltrace.schema import Run

__all__ = ["EDIT_KINDS", "SmolPlayback", "SmolagentsReplayAdapter"]

logger = logging.getLogger("causaltrace")

#: The step kinds a smolagents replay can intervene on (see the module table).
EDIT_KINDS = ("llm_response", "reasoning", "planning", "final_answer", "tool_call", "tool_response", "code_execution")
#: Memory limit and default timeout of a sandboxed CodeAgent worker.
WORKER_MEMORY_MB = 1024
WORKER_TIMEOUT_S = 30.0


@dataclass
class SmolPlayback:
    """An assembled playback: the fresh agent with its playback parts, around the injected core."""

    agent: Any
    core: PlaybackCore
    agents: dict[str, Any]
    executors: list[Any] = field(default_factory=list)


class SmolagentsReplayAdapter(PlaybackAdapterBase):
    """The smolagents ``ReplayAdapter`` (registered by the facade, ``instrumentation/smolagents/__init__.py``)."""

    framework = "smolagents"
    display_name = "smolagents"
    edit_kinds = EDIT_KINDS

    def replay_sync(self, factory: Factory, playback: PlaybackCore, *, sandbox: Sandbox | None,
                    open_session: SessionOpener | None, verify: Any = None) -> Run:
        """:meth:`~PlaybackAdapterBase.replay` for sync code (a sync factory; smolagents itself is sync, so the async
        twin runs the agent in a worker thread)."""
        with unexported():  # the build's spans are never exported; the replay's only when asked (replay_scope)
            assembled = self.assemble(factory(), playback, sandbox=sandbox, open_session=open_session)
        with replay_scope():
            return self.run_assembled_sync(assembled, verify=verify)

    def assemble(self, root: Any, playback: PlaybackCore, *, sandbox: Sandbox | None,
                 open_session: SessionOpener | None) -> SmolPlayback:
        """Swap playback models, tool copies and sandboxed executors into every agent of ``root``'s tree."""
        if not isinstance(root, acc.smol().MultiStepAgent):
            raise UserError(f"the factory must return a smolagents agent, got {type(root).__name__}")
        agents = dict(walk(root, acc.agent_name(root)))
        edit = playback.edit
        if edit is not None:
            playback.bind(self.edit_transform(edit, agents))
        from causaltrace.instrumentation.smolagents import _playback_models as models
        from causaltrace.instrumentation.smolagents import _playback_tools as tools

        assembled = SmolPlayback(root, playback, agents)
        if sandbox is None and any(acc.is_code_agent(a) for a in agents.values()):
            logger.warning("causaltrace replay: no sandbox given; CodeAgent code runs in smolagents' "
                           "LocalPythonExecutor, which is not a security boundary")
        for key, agent in agents.items():
            inner = models.prepare_live(agent.model)
            cls = models.StreamingPlaybackModel if callable(getattr(inner, "generate_stream", None)) \
                else models.PlaybackModel
            agent.model = cls(models.ModelPlayback(playback, agent, key, inner))
            for name, tool in list(agent.tools.items()):
                agent.tools[name] = tools.tool_twin(tool, playback, agent, key)
            if acc.is_code_agent(agent):
                assembled.executors.append(self._swap_executor(playback, agent, key, sandbox, open_session))
        if edit is not None and edit.slot == "result" and edit.call.settings.get("managed_agent"):
            request = edit.call.request
            managed = agents.get(f"{edit.call.agent_key}/{request.get('name')}" if isinstance(request, dict) else "")
            if managed is None:
                raise UserError(f"the factory's agent has no managed agent for {edit.label()}")
            managed.__class__ = tools.answering_class(type(managed), playback, edit.call.agent_key)
        return assembled

    @staticmethod
    def _swap_executor(core: PlaybackCore, agent: Any, key: str, sandbox: Sandbox | None,
                       open_session: SessionOpener | None) -> Any:
        """A CodeAgent's executor becomes a sandboxed one (the agent's own local one without a sandbox)."""
        from causaltrace.instrumentation.smolagents._executor import SandboxedCodeExecutor

        stdout = {s.step_id: str(s.outputs.get("stdout") or "") for s in core.run.steps if s.kind == "code_execution"}
        original = getattr(agent, "python_executor", None)
        executor = SandboxedCodeExecutor(
            core, agent, key, sandbox,
            timeout_s=float(getattr(original, "timeout_seconds", None) or WORKER_TIMEOUT_S),
            memory_mb=WORKER_MEMORY_MB, open_session=open_session,
            local=original if sandbox is None else None, recorded_stdout=stdout,
        )
        agent.python_executor = executor  # after construction: smolagents checks only there (FACTS.md)
        return executor

    async def run_assembled(self, assembled: SmolPlayback, *, verify: Any = None) -> Run:
        """Run an assembled playback (in a worker thread; see :meth:`run_assembled_sync`)."""
        return await asyncio.to_thread(self.run_assembled_sync, assembled, verify=verify)

    def run_assembled_sync(self, assembled: SmolPlayback, *, verify: Any = None) -> Run:
        """Run the playback on the original run's task inside ``causaltrace.run(...)`` (traced and stored like any
        run) and return the new Run with ``metadata["replay"]``; the first divergence is raised as
        ``ReplayDivergence``."""
        from causaltrace.instrumentation.runs import run as mark_run

        self.ensure_instrumented()
        core = assembled.core
        task = task_of(core.run)
        try:
            with mark_run(task=task, verify=verify, name=replay_name(core.run),
                          metadata={"replay": core.stats()}) as handle:
                try:
                    assembled.agent.run(task)
                except Exception as exc:  # the replayed run failed: its outcome says so (or a divergence below)
                    logger.info("causaltrace replay: the replayed run raised %s: %s", type(exc).__name__, exc)
                finally:
                    if handle.ctx is not None:
                        handle.ctx.metadata["replay"] = core.stats()
        finally:
            for executor in assembled.executors:
                executor.cleanup()
        return core.finish(handle.run)

    def edit_transform(self, edit: CallEdit, agents: Mapping[str, Any]) -> Callable[[Any], Any] | None:
        """The transform of the recorded message that applies ``edit`` (:mod:`._playback_edits`)."""
        from causaltrace.instrumentation.smolagents._playback_edits import edit_transform

        return edit_transform(edit, agents)
