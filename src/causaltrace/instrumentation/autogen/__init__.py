"""AutoGen AgentChat adapter (autogen-agentchat 0.7.5): every step of a live team as a typed, linked, recorded span.

Usage:
    >>> import causaltrace
    >>> causaltrace.instrument_autogen()                      # doctest: +SKIP
    >>> async with causaltrace.run(task=TASK, verify="42") as handle:   # doctest: +SKIP
    ...     await team.run(task=TASK)
    >>> handle.outcome.status                                  # doctest: +SKIP

Without a ``causaltrace.run()`` block, each top-level ``team.run`` / ``run_stream`` or ``agent.run`` /
``run_stream`` is a run of its own (ARCHITECTURE "Shared contracts").

What is captured (ARCHITECTURE "Steps"; the hooks are the ones FACTS.md measured on 0.7.5):

=================================================  ===========================================================
hook                                               steps and dependencies
=================================================  ===========================================================
``BaseGroupChat.run_stream`` (and ``run``)         the run (owned when no ``causaltrace.run()`` is active),
                                                   ``task``; ``final_answer`` (``answer_of``) on a normal
                                                   finish; a nested team: an ``agent_turn`` of the team
``BaseChatAgent.run_stream`` / ``run``             the same for a single agent (top level or AgentTool)
``<agent class>.on_messages_stream``               ``agent_turn`` (``selected_by`` / ``handoff_from``); the
                                                   messages it yields: ``message`` / ``handoff``
                                                   (``produced_by``), ``tool_call`` (``produced_by``),
                                                   ``memory_access``, ``reasoning``; an exception: an ``error``
                                                   step and ERROR on the turn
``<client class>.create`` / ``create_stream``      ``llm_response`` for EVERY model call (any client), with
                                                   ``continues`` / ``saw`` / ``observed`` / ``memory_read``;
                                                   recorded (kind ``llm``)
``AssistantAgent._execute_tool_call`` (private)    ``tool_response`` (``tool_result_of``; ERROR when
                                                   ``is_error``); recorded (kind ``tool``)
``CodeExecutorAgent.execute_code_block``           ``code_execution`` (``executes`` the step carrying the code)
``SelectorGroupChatManager.select_speaker``        the selector's ``llm_response`` (agent = the manager's name)
                                                   and ``speaker_selection`` (``produced_by`` it)
``MagenticOneOrchestrator._orchestrate_step``,     MagenticOneGroupChat's orchestrator (agent = the manager's
``._reenter_outer_loop``,                          name, ``MagenticOneOrchestrator``): every model call of its
``._update_task_ledger``,                          client outside an agent turn (facts, plan, progress ledger,
``._prepare_final_answer`` (private) and           re-planning, final answer) is its ``llm_response``; the
``BaseGroupChatManager.update_message_thread``     messages it adds to its thread are steps ``produced_by`` its
                                                   last llm_response: the task ledger a ``planning`` step, each
                                                   instruction a ``speaker_selection`` (outputs ``selected`` =
                                                   the ledger's ``next_speaker``, ``instruction``) and a
                                                   ``message``, the final answer a ``message``; a re-asked
                                                   progress ledger is ``retry_of`` the rejected one; an
                                                   exception out of its methods an ``error`` step
=================================================  ===========================================================

Decisions (documented here and in the issue note):

* ``agent_key`` (the Recording's key) is the ``/``-joined path of names from the root: the root team's ``name``
  (``"team"`` when it has none), nested teams' names, then the agent (``team/solver``); an agent run inside an
  AgentTool adds the invoking agent (``team/solver/helper``); the selector is ``<team path>/<manager name>``
  (``SelectorGroupChat/SelectorGroupChatManager`` by default), and so is a MagenticOne orchestrator
  (``MagenticOneGroupChat/MagenticOneOrchestrator``). Runtime ids never appear (they embed uuids).
* The final answer is the text of the last chat message from a participant other than ``user``, with the
  TextMentionTermination keyword stripped. ``stop`` is ``limit`` for MaxMessageTermination, ``max_turns``,
  TokenUsageTermination, TimeoutTermination, cancellation and MagenticOne's ``max_turns`` ("Max rounds reached."),
  ``normal`` for every other termination (also when a limit and another condition fire on the same message; a
  MagenticOne run the orchestrator judged satisfied), ``error`` when the run raised.
* A failed tool (``is_error=True``) is an ERROR ``tool_response`` with the error text; its ``tool_call`` stays OK
  (the call was made as the model asked). An exception inside an agent is an ``error`` step plus ERROR on its
  ``agent_turn``; the run's outcome is then a failure (AutoGen raises it from ``run_stream``, unchanged).
* An llm_response's ``inputs`` point to its recorded request (``{"recording": {agent_key, kind, ordinal,
  request_hash}}``) instead of repeating the whole context each call; with ``record=False`` they hold the messages.
* AutoGen's own OpenTelemetry spans (``create_agent``, ``invoke_agent``, ``execute_tool`` and the runtime's
  ``create/send/publish/process/ack``) go to the GLOBAL tracer provider; because the run's root span is current
  while the team's embedded runtime starts, they land in the run's trace. Switch the runtime spans off with the
  environment variable ``AUTOGEN_DISABLE_RUNTIME_TRACING=true`` (read when a runtime is constructed, i.e. when the
  team is built): the ``process`` spans otherwise carry whole message JSON.
* Each ``agent_turn`` carries its ``agent_key`` in ``metadata``; a recorded call carries its ``step_id``.
* A ``str`` task is turned into the very ``TextMessage(source="user")`` AutoGen would build, before the framework
  starts, so the ``task`` step is known to be what every agent's first delivered message came from.
* Limits: a team given an EXTERNAL runtime (``runtime=``) that was started outside the run is not traced inside
  (its tasks do not carry the run's context); MagenticOneGroupChat is captured (table above) through four PRIVATE
  MagenticOneOrchestrator methods of 0.7.5 and ``update_message_thread``: one that is missing is skipped with a
  warning (that phase's planning / speaker_selection / message steps are then missing; every orchestrator model
  call is still its llm_response, found by client identity), the selected speaker is re-read from the progress
  ledger the orchestrator accepted, its ``Max rounds reached.`` stop is a limit, and the participants'
  ``GroupChatReset`` on re-planning ends their ``continues`` chains; playback keys its calls
  ``<team path>/MagenticOneOrchestrator``, and a speaker_selection or instruction intervention edits the ledger JSON,
  a ``planning`` one the plan call's text; AutoGen 0.7.5's own
  ``CancellationToken``, cancelled while a tool runs, leaves ``team.run`` hanging with or without causaltrace
  (cancel the asyncio task instead: that is a ``limit`` stop).
* Private AutoGen attributes are read in one accessor each (:mod:`._access`).

Where things are: this module is the facade (instrument / uninstrument and :data:`PATCHES`, the table of patches;
``_patches`` installs and undoes them and holds the switch that makes every wrapper a pass-through). The recording
hooks (the ``wrap_*`` wrappers and the steps they emit) are split by concept, and none imports this module:
``_runs`` (team and agent runs: task, final answer, outcome, stop classification), ``_turns`` (agent turns),
``_messages`` (what a turn yields: messages, handoffs, reasoning, memory), ``_tools`` (tool calls and responses),
``_code`` (code executions), ``_selection`` (SelectorGroupChat's speaker selection), ``_magentic``
(MagenticOneGroupChat's orchestrator), ``_model_calls`` (every model call); ``_state`` holds the context variables
and the per-run state they share, ``_access`` every read of a private AutoGen attribute and the canonical recorded
requests. The replay side: ``_playback`` (the ReplayAdapter) with ``_playback_clients`` / ``_playback_tools`` /
``_playback_edits`` / ``_playback_keys``, and ``_executor`` (the code executor on the injected sandbox).
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any, NamedTuple

from causaltrace.config import TraceConfig
from causaltrace.exceptions import MissingExtraError
from causaltrace.instrumentation.tracing import configure

__all__ = ["SandboxCodeExecutor", "instrument_autogen", "is_instrumented", "uninstrument_autogen"]

logger = logging.getLogger("causaltrace")

_LOCK = threading.Lock()
_INSTRUMENTED = False

_AGENTS = "autogen_agentchat.agents."
_TEAMS = "autogen_agentchat.teams._group_chat."
_MAGENTIC = _TEAMS + "_magentic_one._magentic_one_orchestrator"


class Patch(NamedTuple):
    """One row of the static patch table: AutoGen's ``module`` and the ``path`` of the attribute in it, wrapped by
    ``wrapper`` of the recording module ``hooks`` (a module of this package, imported when instrumenting)."""

    module: str
    path: str
    hooks: str
    wrapper: str


#: The static patch table. Agent classes and model client classes found later (user subclasses, clients imported
#: after instrumentation) are patched on first use (``_turns.patch_agent_class``, ``_model_calls.patch_client_class``).
PATCHES: tuple[Patch, ...] = (
    Patch(_TEAMS + "_base_group_chat", "BaseGroupChat.run_stream", "_runs", "wrap_team_run_stream"),
    Patch(_AGENTS + "_base_chat_agent", "BaseChatAgent.run_stream", "_runs", "wrap_agent_run_stream"),
    Patch(_AGENTS + "_base_chat_agent", "BaseChatAgent.run", "_runs", "wrap_agent_run"),
    Patch(_AGENTS + "_base_chat_agent", "BaseChatAgent.on_messages_stream", "_turns", "wrap_turn_stream"),
    Patch(_AGENTS + "_assistant_agent", "AssistantAgent.on_messages_stream", "_turns", "wrap_turn_stream"),
    Patch(_AGENTS + "_assistant_agent", "AssistantAgent._execute_tool_call", "_tools", "wrap_execute_tool_call"),
    Patch(_AGENTS + "_code_executor_agent", "CodeExecutorAgent.on_messages_stream", "_turns", "wrap_turn_stream"),
    Patch(_AGENTS + "_code_executor_agent", "CodeExecutorAgent.execute_code_block", "_code", "wrap_execute_code"),
    Patch(_AGENTS + "_user_proxy_agent", "UserProxyAgent.on_messages_stream", "_turns", "wrap_turn_stream"),
    Patch(_AGENTS + "_society_of_mind_agent", "SocietyOfMindAgent.on_messages_stream", "_turns", "wrap_turn_stream"),
    Patch(_AGENTS + "_message_filter_agent", "MessageFilterAgent.on_messages_stream", "_turns", "wrap_turn_stream"),
    Patch(
        _TEAMS + "_selector_group_chat", "SelectorGroupChatManager.select_speaker", "_selection", "wrap_select_speaker"
    ),
    # MagenticOneGroupChat: its orchestrator picks speakers in these private methods (``select_speaker`` is unused)
    Patch(
        _TEAMS + "_base_group_chat_manager",
        "BaseGroupChatManager.update_message_thread",
        "_magentic",
        "wrap_update_message_thread",
    ),
    Patch(_MAGENTIC, "MagenticOneOrchestrator._orchestrate_step", "_magentic", "wrap_orchestrate_step"),
    Patch(_MAGENTIC, "MagenticOneOrchestrator._reenter_outer_loop", "_magentic", "wrap_orchestrator_outer_loop"),
    Patch(_MAGENTIC, "MagenticOneOrchestrator._update_task_ledger", "_magentic", "wrap_orchestrator_replan"),
    Patch(_MAGENTIC, "MagenticOneOrchestrator._prepare_final_answer", "_magentic", "wrap_orchestrator_final_answer"),
)


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    stack = list(cls.__subclasses__())
    while stack:
        klass = stack.pop()
        if klass not in out:
            out.append(klass)
            stack.extend(klass.__subclasses__())
    return out


def instrument_autogen(tracer_provider: Any = None, config: TraceConfig | None = None) -> None:
    """Instrument AutoGen AgentChat: every team / agent run becomes a causaltrace Run. Idempotent.

    ``tracer_provider`` / ``config`` are handed to :func:`causaltrace.configure` (calling again with other values
    replaces them). Raises :class:`~causaltrace.exceptions.MissingExtraError` when AutoGen is not installed.
    """
    try:
        importlib.import_module("autogen_agentchat")
        importlib.import_module("autogen_core")
    except ImportError as exc:
        raise MissingExtraError("autogen-agentchat", "autogen") from exc
    configure(tracer_provider, config)
    global _INSTRUMENTED
    with _LOCK:
        if _INSTRUMENTED:
            return
        _apply_patches()
        _INSTRUMENTED = True


def _apply_patches() -> None:
    """Wrap every attribute of :data:`PATCHES` (a missing one is skipped with a warning), then the agent and client
    classes already defined, and switch the wrappers on. Imports AutoGen and the recording modules."""
    from wrapt import resolve_path

    from causaltrace.instrumentation.autogen._model_calls import patch_client_class
    from causaltrace.instrumentation.autogen._patches import enable, patch_attribute
    from causaltrace.instrumentation.autogen._turns import patch_agent_class

    for patch in PATCHES:
        try:
            owner, attribute, _original = resolve_path(patch.module, patch.path)
        except (ImportError, AttributeError) as exc:  # an AutoGen without this hook: degrade, never fail
            logger.warning("causaltrace: AutoGen hook %s.%s not found (%s); skipped", patch.module, patch.path, exc)
            continue
        hooks = importlib.import_module(f"{__name__}.{patch.hooks}")
        patch_attribute(owner, attribute, getattr(hooks, patch.wrapper))
    from autogen_agentchat.agents import BaseChatAgent
    from autogen_core.models import ChatCompletionClient

    for klass in _subclasses(BaseChatAgent):
        if "on_messages_stream" in klass.__dict__:
            patch_agent_class(klass)
    for klass in _subclasses(ChatCompletionClient):
        patch_client_class(klass)
    enable()


def uninstrument_autogen() -> None:
    """Restore every AutoGen method :func:`instrument_autogen` wrapped. Idempotent."""
    global _INSTRUMENTED
    with _LOCK:
        if not _INSTRUMENTED:
            return
        from causaltrace.instrumentation.autogen._patches import disable, unpatch_all

        disable()
        unpatch_all()
        _INSTRUMENTED = False


def is_instrumented() -> bool:
    """Whether AutoGen is currently instrumented."""
    return _INSTRUMENTED


def __getattr__(name: str) -> Any:
    """Names loaded on first access, so importing this facade stays light.

    ``SandboxCodeExecutor`` (an AutoGen ``CodeExecutor`` on the causaltrace sandbox) imports ``autogen_core``;
    ``AutogenInstrumentor`` is an OpenTelemetry ``BaseInstrumentor`` for users of ``opentelemetry-instrument``,
    built on first access because ``opentelemetry-instrumentation`` is not a dependency of causaltrace."""
    if name == "SandboxCodeExecutor":
        from causaltrace.instrumentation.autogen._executor import SandboxCodeExecutor

        return SandboxCodeExecutor
    if name != "AutogenInstrumentor":
        raise AttributeError(name)
    try:
        from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
    except ImportError as exc:
        raise MissingExtraError("opentelemetry-instrumentation", "autogen") from exc

    class AutogenInstrumentor(BaseInstrumentor):  # type: ignore[misc,valid-type]
        """``AutogenInstrumentor().instrument(tracer_provider=..., config=TraceConfig(...))``."""

        def instrumentation_dependencies(self) -> tuple[str, ...]:
            return ("autogen-agentchat >= 0.7",)

        def _instrument(self, **kwargs: Any) -> None:
            instrument_autogen(kwargs.get("tracer_provider"), kwargs.get("config"))

        def _uninstrument(self, **kwargs: Any) -> None:
            uninstrument_autogen()

    globals()["AutogenInstrumentor"] = AutogenInstrumentor
    return AutogenInstrumentor


# ------------------------------------------------------------------------------------------------- playback


def _register_playback() -> None:
    """Register the playback side (``_playback.py``, which imports AutoGen only on first use) in the
    ReplayAdapter registry (ARCHITECTURE "Package layout": adapters register by framework name when imported)."""
    from causaltrace.instrumentation.autogen._playback import AutogenReplayAdapter
    from causaltrace.protocols import register_replay_adapter

    register_replay_adapter(AutogenReplayAdapter(instrument=lambda: None if is_instrumented() else instrument_autogen()))


_register_playback()
