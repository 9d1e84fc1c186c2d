"""MagenticOneGroupChat's orchestrator, captured through four private MagenticOneOrchestrator methods and
``update_message_thread``.

MagenticOneOrchestrator (autogen_agentchat 0.7.5) chooses speakers in its own private methods, not in
``select_speaker`` (which it leaves unused): ``handle_start`` asks for facts and a plan, ``_reenter_outer_loop``
broadcasts the task ledger, each ``_orchestrate_step`` asks for the JSON progress ledger, then broadcasts the
instruction to the next speaker (or ``_update_task_ledger`` re-plans, or ``_prepare_final_answer`` answers). Each of
these messages enters the orchestrator's own thread through ``update_message_thread`` BEFORE it is published, so
that hook makes its steps while the phase it belongs to is known: the task ledger → ``planning``; an instruction →
``speaker_selection`` (the ledger's ``next_speaker``) and ``message``; the final answer → ``message``. Each is
``produced_by`` the orchestrator's last llm_response; the selected agent's next agent_turn is ``selected_by`` the
speaker_selection, and the agents' llm_responses ``saw`` the messages. The orchestrator's model calls themselves are
recorded by :mod:`._model_calls`, which asks :func:`orchestrator_of` whose call it is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from autogen_agentchat.messages import BaseChatMessage
from autogen_core.utils import extract_json_from_str

from causaltrace.instrumentation._emitter import never_raise
from causaltrace.instrumentation.autogen._access import (
    extract_code,
    message_thread_of,
    model_client_of,
    name_of,
    participants_of,
    team_manager_name,
    text_of,
)
from causaltrace.instrumentation.autogen._patches import SWITCH
from causaltrace.instrumentation.autogen._state import (
    LEVEL,
    ORCH,
    Level,
    Orchestrator,
    Phase,
    add_agent_error,
    call_arg,
    extend_unique,
)
from causaltrace.instrumentation.runs import CURRENT_RUN, RunContext

__all__ = [
    "new_orchestrator",
    "note_attempt",
    "orchestrator_of",
    "retried_attempt",
    "wrap_orchestrate_step",
    "wrap_orchestrator_final_answer",
    "wrap_orchestrator_outer_loop",
    "wrap_orchestrator_replan",
    "wrap_update_message_thread",
]


@never_raise(default=None)
def new_orchestrator(team: Any, level: Level) -> Orchestrator | None:
    """The orchestrator of a MagenticOneGroupChat run (None when the team holds no model client)."""
    client = model_client_of(team)
    if client is None:
        return None
    name = team_manager_name(team)
    key = "/".join(level.path + (name,))
    memo = level.state.memo(key)
    extend_unique(memo.saw, [level.task_step_id])  # the facts call reads the task
    members = [name_of(p, type(p).__name__) for p in participants_of(team)]
    return Orchestrator(name=name, key=key, parent_id=level.parent_id, memo=memo, client=client, participants=members)


def orchestrator_of(ctx: RunContext, client: Any) -> Orchestrator | None:
    """The MagenticOne orchestrator whose client makes this model call outside any agent turn, or None."""
    level = LEVEL.get()
    if level is None or level.ctx is not ctx or level.orchestrator is None:
        return None
    return level.orchestrator if client is level.orchestrator.client else None


def retried_attempt(orch: Orchestrator) -> str | None:
    """The previous progress-ledger call of the same ``_orchestrate_step`` (its JSON was rejected), or None."""
    phase = ORCH.get()
    if phase is None or phase.orch is not orch or phase.kind != "step" or not phase.attempts:
        return None
    return phase.attempts[-1]


def note_attempt(orch: Orchestrator, step_id: str) -> None:
    """Note a progress-ledger call of the ``_orchestrate_step`` in flight (a later one is its retry)."""
    phase = ORCH.get()
    if phase is not None and phase.orch is orch and phase.kind == "step":
        phase.attempts.append(step_id)


@never_raise(default=None)
def _begin_phase(manager: Any, kind: str) -> Phase | None:
    """Enter an orchestrator method (``kind``); on re-planning the participants' context is reset, otherwise what
    the agents added to the thread is what its next call ``saw``. None outside a traced MagenticOne run."""
    level = LEVEL.get()
    if level is None or level.orchestrator is None or CURRENT_RUN.get() is not level.ctx or level.state.closed:
        return None
    orch = level.orchestrator
    if model_client_of(manager) is not orch.client:
        return None
    if kind == "outer":  # the participants are reset (GroupChatReset): their context does not carry over
        for name in orch.participants:
            memo = level.state.memos.get("/".join(level.path + (name,)))
            if memo is not None:
                memo.last_llm, memo.saw, memo.observed, memo.memory = None, [], [], []
    else:  # what reached the orchestrator's thread from the agents since its last call
        fresh: list[str | None] = []
        for msg in message_thread_of(manager):
            if isinstance(msg, BaseChatMessage) and msg.id not in orch.seen:
                orch.seen.add(msg.id)
                if msg.source != orch.name:
                    fresh.append(level.state.msg_steps.get(msg.id))
        extend_unique(orch.memo.saw, fresh)
    return Phase(orch, level, manager, kind)


def _next_speaker(ledger: str, participants: list[str]) -> str | None:
    """The progress ledger's ``next_speaker`` answer, read as the orchestrator reads it."""
    if len(participants) == 1:
        return participants[0]
    try:
        found = extract_json_from_str(ledger)
    except Exception:
        return None
    entry = found[0].get("next_speaker") if len(found) == 1 and isinstance(found[0], dict) else None
    answer = entry.get("answer") if isinstance(entry, dict) else None
    return answer if isinstance(answer, str) else None


@never_raise()
def _orchestrator_said(phase: Phase, messages: Any) -> None:
    """The orchestrator's own messages entering its thread, as its steps (see the module docstring)."""
    orch, level = phase.orch, phase.level
    if level.state.closed:
        return
    for msg in list(messages or ()):
        if not isinstance(msg, BaseChatMessage) or msg.source != orch.name or msg.id in level.state.msg_steps:
            continue
        orch.seen.add(msg.id)
        text = text_of(msg)
        deps = [(orch.last_llm, "produced_by")] if orch.last_llm else []
        metadata: dict[str, Any] = {"message_type": type(msg).__name__, "agent_key": orch.key}
        if phase.kind == "step":
            selected = _next_speaker(orch.last_text, orch.participants)
            if selected is not None:
                selection = level.ctx.add_step(
                    "speaker_selection",
                    agent=orch.name,
                    parent=orch.parent_id,
                    depends_on=deps,
                    content=selected,
                    outputs={"selected": selected, "instruction": text},
                    metadata={
                        "agent_key": orch.key,
                        "by_model": orch.last_llm is not None,
                        "candidates": list(orch.participants),
                        "ledger_field": "next_speaker",
                    },
                )
                if selection is not None:
                    level.selected[selected] = selection.step_id
            metadata["ledger_field"] = "instruction_or_question"
        phase.said += 1
        step = level.ctx.add_step(
            "planning" if phase.kind == "outer" and phase.said == 1 else "message",  # the task ledger comes first
            agent=orch.name,
            parent=orch.parent_id,
            depends_on=deps,
            content=text,
            inputs=extract_code(text) or {},
            outputs={"text": text},
            metadata=metadata,
        )
        if step is not None:
            level.state.msg_steps[msg.id] = step.step_id


@never_raise()
def _orchestrator_failed(phase: Phase, exc: BaseException) -> None:
    """An exception out of an orchestrator phase (a ledger it could not parse, an invalid speaker): one ``error``
    step of the orchestrator (once, however many nested phases it passes through)."""
    orch, level = phase.orch, phase.level
    if isinstance(exc, asyncio.CancelledError) or orch.failed is exc or level.state.closed:
        return
    orch.failed = exc
    add_agent_error(level.ctx, level.state, orch.name, orch.key, orch.parent_id, exc)


async def _in_phase(wrapped: Any, phase: Phase, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run an orchestrator method with its phase current; an exception out of it is an ``error`` step."""
    token = ORCH.set(phase)
    try:
        return await wrapped(*args, **kwargs)
    except BaseException as exc:
        _orchestrator_failed(phase, exc)
        raise
    finally:
        ORCH.reset(token)


def _phase_wrapper(kind: str, doc: str) -> Any:
    """The wrapper of one orchestrator method (``kind`` names its phase)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        phase = _begin_phase(instance, kind) if SWITCH.on else None
        if phase is None:
            return wrapped(*args, **kwargs)
        return _in_phase(wrapped, phase, args, kwargs)

    wrapper.__doc__ = doc
    return wrapper


wrap_orchestrate_step = _phase_wrapper(
    "step",
    "``MagenticOneOrchestrator._orchestrate_step`` (private): the progress-ledger call(s), then a speaker_selection "
    "and the instruction message (or re-planning, or the final answer).",
)
wrap_orchestrator_outer_loop = _phase_wrapper(
    "outer", "``MagenticOneOrchestrator._reenter_outer_loop`` (private): the task ledger, a ``planning`` step."
)
wrap_orchestrator_replan = _phase_wrapper(
    "replan", "``MagenticOneOrchestrator._update_task_ledger`` (private): the facts-update and plan-update calls."
)
wrap_orchestrator_final_answer = _phase_wrapper(
    "final", "``MagenticOneOrchestrator._prepare_final_answer`` (private): the final-answer call and its message."
)


def wrap_update_message_thread(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseGroupChatManager.update_message_thread``: inside a MagenticOne orchestrator phase, the orchestrator's
    own messages (added to its thread before they are published) become its steps; a pass-through otherwise."""
    phase = ORCH.get()
    if SWITCH.on and phase is not None and phase.manager is instance:
        _orchestrator_said(phase, call_arg(args, kwargs, 0, "messages", ()))
    return wrapped(*args, **kwargs)
