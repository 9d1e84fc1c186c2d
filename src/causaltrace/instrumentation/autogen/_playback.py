"""The playback side of the AutoGen AgentChat adapter: :class:`AutogenReplayAdapter` (ARCHITECTURE decisions 6–7,
"Shared contracts": Factory, ReplayAdapter, Intervention; FACTS.md "Replay by playback").

``replay(factory, playback, sandbox=..., open_session=..., verify=...)`` builds a FRESH team (or agent) with the
user's factory and, on every member of it — participants, nested teams, the agents and teams behind an
``AgentTool`` / ``TeamTool``, a ``SocietyOfMindAgent``'s inner team, a ``MessageFilterAgent``'s wrapped agent —
swaps in playback parts. Only the fresh objects' own attributes are reassigned; shared objects (a client or a
workbench used by several agents, module-level tools) are wrapped, never patched:

* **the model client** (an agent's, a ``SelectorGroupChat``'s, a ``MagenticOneGroupChat``'s orchestrator's) — a ``PlaybackChatCompletionClient`` wrapping the
  factory-built client and declaring the same ``model_info`` (FACTS.md: else the selector builds a different
  prompt). At ``create()`` / ``create_stream()`` entry — before the framework mutates the messages — it builds the
  canonical request exactly as the recording does (``_access.llm_request`` +
  :func:`~causaltrace.recording.canonicalize_request` + :func:`~causaltrace.recording.request_hash`) and looks up
  ``(agent_key, "llm", ordinal)``;
* **the workbenches** — a playback workbench wrapping each (a ``StaticStreamWorkbench`` stays a stream workbench,
  so an ``AgentTool``'s streamed events still flow) whose ``call_tool`` / ``call_tool_stream`` look up
  ``(agent_key, "tool", ordinal)`` with the recording's request (``_access.tool_request``); handoff tools
  are per-agent copies with their own ``run_json``;
* **the code executor** of a ``CodeExecutorAgent`` — a playback executor running every block in the injected
  sandbox through :class:`~causaltrace.instrumentation.autogen.SandboxCodeExecutor` (ARCHITECTURE decision 7);
* **a UserProxyAgent's input** — the recorded user answers, in order (then the original input function).

``agent_key`` and ordinals follow the recording's rules: the key of a call is read from the recording side's live
state when the replay runs instrumented (the turn's / the selector manager's key: exactly what the new run records;
a MagenticOne orchestrator's calls: ``<team path>/<manager name>``, as the recording keys them), else the static ``/``-joined path of names computed when the team is built; llm ordinals count per key; tool
ordinals are reserved in the order of the calls in the model's response (when the response comes back) and claimed
by call id when the tool runs, so parallel calls keep their numbers.

The neutral part — matching, ordinals, divergences, the counts, and resolving an intervention to a
:class:`~causaltrace.protocols.CallEdit` — is the injected playback core (``causaltrace.replay.playback``; this
package never imports ``replay``). Matching (decision 6), per call at ``(agent_key, kind, ordinal)`` with request
hash ``h``:

* the intervened call (its request must still match) returns the replacement;
* a call whose recorded entry STARTED before the intervened call (``start_order``) must match: a different hash, or
  a call the recording does not have while the intervention is not applied yet, is a ``ReplayDivergence`` naming the
  agent key, kind and ordinal and showing the first differing part of the canonical request. The first divergence
  is kept in the playback's log and every later model or tool call raises it again (FACTS.md: an exception in a
  tool does not always stop an AutoGen run), and :meth:`AutogenReplayAdapter.replay` reports it;
* after it, a matching call is served from the recording and anything else runs live: the factory-built client
  (``temperature=0`` — and a ``seed`` for OpenAI clients — through ``extra_create_args`` when the client takes
  create arguments) or, only when ``live_override`` is given, a litellm-backed client; the real tool. The replay is
  ``deterministic`` (one replay decides a flip) unless a live call went to a client that does not declare
  ``deterministic = True`` (the reactive scripted clients of ``causaltrace.testing`` do; litellm models do not).

Served responses are fresh copies (:func:`~causaltrace.recording.decode_response` decodes anew). A served call made
before the intervened call is released only after every expected recorded call that FINISHED before it was released
(FACTS.md: GraphFlow fan-out — D sees B and C in the order they finished); a bounded wait, so a replay never hangs
on a call that will not come. A recorded tool call that had recorded calls nested inside it (an ``AgentTool`` or
``TeamTool``: the nested agent is re-run under its own keys, as smolagents' managed agents are) is always run; it
counts as served when its result equals the recorded one. Code always re-runs in the sandbox; before the
intervention the recorded output is returned (code reading the time or random numbers would otherwise diverge),
after it the actual output (served when equal to the recorded one, else live).

Interventions (ARCHITECTURE "Intervention"; the step is a step of the original ``run``; the core resolves it to a
``CallEdit``, :mod:`._playback_edits` turns that into the edited CreateResult):

==========================================  =====================================================================
step                                        what is changed
==========================================  =====================================================================
llm_response                                its CreateResult: new text (``str``), new tool calls
                                            (``[{name, arguments}]``) or ``{"text", "tool_calls"}``
message / final_answer                      the producing llm call's text: the step's text is replaced where it
                                            occurs in the response (a final answer inside its message keeps the
                                            termination keyword), else the whole text; a message carrying code
                                            gets new CODE (the code blocks are replaced)
reasoning                                   the producing llm call's ``thought``
tool_call                                   that call's arguments (a dict) in the producing CreateResult
tool_response                               that tool call's result (the tool, or the nested agent, is not run)
handoff                                     the handoff call in the producing CreateResult now targets the new
                                            agent (one of the agent's handoffs)
speaker_selection                           the selector's answer (the new speaker's name); for MagenticOne, the
                                            ``next_speaker`` answer in the orchestrator's JSON progress ledger
MagenticOne instruction (a ``message``)     the ``instruction_or_question`` answer in that ledger (new text)
planning (MagenticOne's task ledger)        the text of the plan call that wrote it (the new plan)
code_execution                              new code in the step that carried it (message or llm response)
==========================================  =====================================================================

Anything else (``agent_turn``, ``task``, ``error``, ``memory_access``, a message produced by code execution or a
tool-call summary…) is a ``UserError`` naming the kind.

The factory must build a FRESH team on every call (a replay with r of R attempts builds R of them): a team whose
clients are already playback clients is a ``UserError``.

Modules: this one (the adapter; imports no AutoGen at import time — the facade registers the adapter when it is
imported, and must import cleanly without the extra), ``_playback_keys`` (the team's members and their agent keys),
and, imported when a playback is assembled, ``_playback_clients`` (the model clients), ``_playback_tools`` (the
workbenches, handoff tools, code executor and user input) and ``_playback_edits`` (edits → CreateResults).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from causaltrace.exceptions import UserError
from causaltrace.instrumentation._playback_common import PlaybackAdapterBase, replay_name, task_of
from causaltrace.instrumentation.autogen._access import (
    code_executor_of,
    halt_runtime,
    handoff_tools_of,
    model_client_of,
    team_manager_name,
    workbenches_of,
)
from causaltrace.instrumentation.autogen._playback_keys import is_team, walk
from causaltrace.protocols import CallEdit, PlaybackCore, Sandbox, SessionOpener
from causaltrace.schema import Run

__all__ = ["EDIT_KINDS", "AutogenPlayback", "AutogenReplayAdapter"]

logger = logging.getLogger("causaltrace")

#: The step kinds an AutoGen replay can intervene on (see the module table).
EDIT_KINDS = (
    "llm_response", "message", "reasoning", "final_answer", "tool_call", "tool_response", "handoff",
    "speaker_selection", "code_execution", "planning",
)
#: Timeout of one sandboxed code block during replay (unless the factory's executor sets one).
CODE_TIMEOUT_S = 60.0


@dataclass
class AutogenPlayback:
    """An assembled playback: the fresh team (or agent) with its playback parts, around the injected core."""

    team: Any
    core: PlaybackCore
    agents: dict[str, Any]
    clients: list[Any] = field(default_factory=list)
    #: the tool calls running now (every agent's ToolPlayback adds to it), stopped when the replay is cancelled
    tools_in_flight: set[Any] = field(default_factory=set)


class AutogenReplayAdapter(PlaybackAdapterBase):
    """The AutoGen ``ReplayAdapter`` (registered by the facade, ``instrumentation/autogen/__init__.py``)."""

    framework = "autogen"
    display_name = "AutoGen"
    edit_kinds = EDIT_KINDS

    def assemble(self, root: Any, playback: PlaybackCore, *, sandbox: Sandbox | None,
                 open_session: SessionOpener | None = None) -> AutogenPlayback:
        """Swap playback clients, workbenches, handoff tools, code executors and user input into ``root``."""
        if not callable(getattr(root, "run", None)) or not (is_team(root) or hasattr(root, "on_messages_stream")):
            raise UserError(f"the factory must return an AutoGen team or agent, got {type(root).__name__}")
        members = list(walk(root, ()))
        agents = {key: obj for key, obj, _ in members}
        if playback.edit is not None:
            playback.bind(self.edit_transform(playback.edit, agents))
        from causaltrace.instrumentation.autogen import _playback_tools as tools

        assembled = AutogenPlayback(root, playback, agents)
        code, answers = tools.recorded_code(playback.run), tools.recorded_inputs(playback.run)
        for key, obj, team in members:
            self._swap_client(assembled, key, obj, team)
            if not team:
                self._swap_tools(playback, key, obj, sandbox, code, answers, assembled.tools_in_flight)
        return assembled

    @staticmethod
    def _swap_client(assembled: AutogenPlayback, key: str, obj: Any, team: bool) -> None:
        """Wrap the member's model client (an agent's, a selector's, an orchestrator's) in a playback client."""
        from autogen_agentchat.teams import MagenticOneGroupChat, SelectorGroupChat

        from causaltrace.instrumentation.autogen._playback_clients import ClientPlayback, PlaybackChatCompletionClient

        client = model_client_of(obj)
        if isinstance(client, PlaybackChatCompletionClient):
            raise UserError("the factory must build a FRESH team on every call (this one is already played back)")
        if client is None:
            return
        core = assembled.core
        if team and isinstance(obj, (SelectorGroupChat, MagenticOneGroupChat)):  # the manager's key
            pb = ClientPlayback(core, f"{key}/{team_manager_name(obj)}", client, core.live_override, manager=True)
        elif team:  # another team's own client: keyed by the client's class (the recording's rule)
            pb = ClientPlayback(core, f"{key}/{type(client).__name__}", client, core.live_override)
        else:
            pb = ClientPlayback(core, key, client, core.live_override)
        wrapped = PlaybackChatCompletionClient(pb)
        obj._model_client = wrapped
        assembled.clients.append(wrapped)

    @staticmethod
    def _swap_tools(core: PlaybackCore, key: str, obj: Any, sandbox: Sandbox | None,
                    code: Mapping[str, list[Any]], answers: Mapping[str, list[str]], in_flight: set[Any]) -> None:
        """An agent's workbenches, handoff tools, code executor and user input become playback twins."""
        from autogen_agentchat.agents import UserProxyAgent

        from causaltrace.instrumentation.autogen import _playback_tools as tools

        playback = tools.ToolPlayback(core, key, in_flight)
        workbenches = workbenches_of(obj)
        if workbenches:
            obj._workbench = [tools.playback_workbench(wb, playback) for wb in workbenches]
        handoff_tools = handoff_tools_of(obj)
        if handoff_tools:
            obj._handoff_tools = [tools.handoff_twin(t, playback) for t in handoff_tools]
        executor = code_executor_of(obj)
        if executor is not None:
            timeout = getattr(executor, "timeout", None)
            timeout_s = float(timeout) if isinstance(timeout, (int, float)) else CODE_TIMEOUT_S
            obj._code_executor = tools.PlaybackCodeExecutor(core, key, sandbox, timeout_s=timeout_s, recorded=code)
        if isinstance(obj, UserProxyAgent):
            obj.input_func = tools.input_twin(obj.input_func, core, key, answers)

    async def run_assembled(self, assembled: AutogenPlayback, *, verify: Any = None) -> Run:
        """Run the playback on the original run's task inside ``causaltrace.run(...)`` (traced and stored like any
        run) and return the new Run with ``metadata["replay"]``; the first divergence is raised as
        ``ReplayDivergence``."""
        from causaltrace.instrumentation.runs import run as mark_run

        self.ensure_instrumented()
        core = assembled.core
        run = core.run
        task = task_of(run)
        async with mark_run(task=task, verify=verify, name=replay_name(run), metadata={"replay": core.stats()}) as handle:
            try:
                await _run_or_stop(assembled.team, task, assembled.tools_in_flight)
            except Exception as exc:  # the replayed run failed: its outcome says so (or a divergence below)
                logger.info("causaltrace replay: the replayed run raised %s: %s", type(exc).__name__, exc)
            finally:
                if handle.ctx is not None:
                    handle.ctx.metadata["replay"] = core.stats()
        return core.finish(handle.run)

    def edit_transform(self, edit: CallEdit, agents: Mapping[str, Any]) -> Callable[[Any], Any] | None:
        """The transform of the recorded CreateResult that applies ``edit`` (:mod:`._playback_edits`)."""
        from causaltrace.instrumentation.autogen._playback_edits import edit_transform

        return edit_transform(edit, agents)


#: How long a cancelled replay's team is given to unwind once its runtime's tasks are cancelled.
STOP_GRACE_S = 1.0


async def _run_or_stop(team: Any, task: str, tools_in_flight: set[Any]) -> Any:
    """``await team.run(task=task)`` — and when the replay is CANCELLED (it ran ahead of an earlier flip, or outlived
    its timeout), stop the team's own runtime too.

    Cancelling ``team.run`` alone does not stop an AutoGen team: its agents' handlers are tasks of the team's
    runtime, and ``run_stream``'s cleanup waits for that runtime to go idle, so the "cancelled" replay ran on in the
    background and its tasks were torn down only when the event loop closed, each printing a traceback to the
    terminal (seen at the end of ``repair --concurrency 2``). Here the run is its own task, and on cancellation the
    team is halted (:func:`_halt`). A run that ended by itself is checked the same way: a handler AutoGen left
    running past the end of the run (one still publishing when the runtime stopped) is halted too."""
    running = asyncio.ensure_future(team.run(task=task))
    try:
        await asyncio.wait({running})
    except asyncio.CancelledError:
        await _halt(team, [running], tools_in_flight)
        raise
    await _halt(team, [], tools_in_flight)
    return running.result()


async def _halt(team: Any, first: list[Any], tools_in_flight: set[Any]) -> None:
    """Cancel what is left of a replay's team — ``first``, its own runtime (:func:`~._access.halt_runtime`: queue
    shut down, message loop and handlers) and the playback's tool calls in flight (the task AssistantAgent runs a
    response's tool calls in outlives a cancelled agent) — and wait for it briefly, a few rounds (a task that
    unwinds may start another). Their exceptions are retrieved, so nothing is reported later. Nothing left: no
    wait."""
    stopped: list[Any] = []
    for _ in range(3):
        left = [t for t in first if not t.done()] + [t for t in (*halt_runtime(team), *tools_in_flight) if not t.done()]
        if not left:
            break
        for item in left:
            item.cancel()
        stopped += left
        await asyncio.wait(left, timeout=STOP_GRACE_S)
    for item in stopped:
        if item.done() and not item.cancelled():
            item.exception()  # retrieved: an interrupted handler's error is part of the halted replay
