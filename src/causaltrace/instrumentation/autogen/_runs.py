"""Team runs and agent runs: ``BaseGroupChat.run_stream`` (``run`` goes through it) and ``BaseChatAgent.run_stream``
/ ``run``, top level or nested (a team participating in a team, an AgentTool / TeamTool, SocietyOfMindAgent).

A top-level run attaches to the active ``causaltrace.run()`` (or owns a run of its own), adds the ``task`` step and,
when it ends, the ``final_answer`` (``answer_of``) and the run's outcome (:func:`classify_stop` reads AutoGen's
``stop_reason``). A nested team run is an ``agent_turn`` of the team. :func:`ensure_patched_for` patches the agent and
client classes a team uses (user subclasses included) before it starts.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseChatMessage, TextMessage

from causaltrace.instrumentation._emitter import never_raise
from causaltrace.instrumentation.autogen._access import model_client_of, name_of, participants_of, text_of
from causaltrace.instrumentation.autogen._magentic import new_orchestrator
from causaltrace.instrumentation.autogen._messages import observe
from causaltrace.instrumentation.autogen._model_calls import patch_client_class
from causaltrace.instrumentation.autogen._oi import team_attributes
from causaltrace.instrumentation.autogen._patches import SWITCH
from causaltrace.instrumentation.autogen._state import (
    LEVEL,
    MANAGER,
    TURN,
    Level,
    LevelRun,
    RunState,
    extend_unique,
    state_of,
    step_id_of,
)
from causaltrace.instrumentation.autogen._streams import StreamHooks, scoped_stream
from causaltrace.instrumentation.autogen._turns import begin_turn, end_turn, patch_agent_class, turn_scope
from causaltrace.instrumentation.roster import autogen_roster
from causaltrace.instrumentation.runs import CURRENT_RUN, attach_run, run_scope
from causaltrace.instrumentation.scope import Scope
from causaltrace.instrumentation.steps import current_step
from causaltrace.schema import StepError

try:
    from autogen_agentchat.teams import MagenticOneGroupChat
except ImportError:  # pragma: no cover - an AutoGen without MagenticOne: its teams are traced like any other
    MagenticOneGroupChat = None

logger = logging.getLogger("causaltrace")

__all__ = ["classify_stop", "ensure_patched_for", "wrap_agent_run", "wrap_agent_run_stream", "wrap_team_run_stream"]


#: Stop messages of AutoGen's limit conditions (autogen_agentchat 0.7.5), as they appear in TaskResult.stop_reason.
_LIMIT_STOPS = (
    re.compile(r"Maximum number of messages \d+ reached, current message count: \d+"),
    re.compile(r"Maximum number of turns \d+ reached\.?"),
    re.compile(
        r"Token usage limit reached, total token count: \d+, prompt token count: \d+, completion token count: \d+\.?"
    ),
    re.compile(r"Timeout of [\d.]+ seconds reached"),
    re.compile(r"Max rounds reached\.?"),  # MagenticOneGroupChat's max_turns
)
_TEXT_MENTION = re.compile(r"Text '(.+?)' mentioned")


def classify_stop(stop_reason: str | None) -> tuple[str, str | None]:
    """``(stop, keyword)`` for a TaskResult's ``stop_reason``.

    ``stop`` is ``limit`` when only limit conditions fired (MaxMessageTermination, ``max_turns``,
    TokenUsageTermination, TimeoutTermination), else ``normal`` (decision: when a limit and a normal condition fire
    together, e.g. ``TextMentionTermination | MaxMessageTermination`` on the same message, the team reached its
    goal, so the stop is normal). ``keyword`` is the TextMentionTermination text, to strip from the final answer.
    """
    text = stop_reason or ""
    mention = _TEXT_MENTION.search(text)
    rest = text
    for pattern in _LIMIT_STOPS:
        rest = pattern.sub("", rest)
    limit_hit = rest != text
    stop = "limit" if limit_hit and not rest.replace(",", " ").strip() else "normal"
    return stop, mention.group(1) if mention else None


def _strip_keyword(text: str, keyword: str | None) -> str:
    """The final answer's text without the TextMentionTermination keyword."""
    if keyword:
        text = text.replace(keyword, "")
    return text.strip()


def _task_messages(kwargs: dict[str, Any]) -> list[Any]:
    """The task as chat messages; a str task becomes the same ``TextMessage(source="user")`` AutoGen would build,
    created here so its id is known before the framework starts."""
    task = kwargs.get("task")
    if isinstance(task, str):
        task = TextMessage(content=task, source="user")
        kwargs["task"] = task
    if isinstance(task, BaseChatMessage):
        return [task]
    if isinstance(task, (list, tuple)):
        return [m for m in task if isinstance(m, BaseChatMessage)]
    return []


@never_raise(default=None)
def _begin_level(obj: Any, kwargs: dict[str, Any], *, team: bool) -> LevelRun | None:
    """Open a team / agent run: attach to (or own) the causaltrace run, add its ``task`` step, and for a nested
    team its ``agent_turn``; None when nothing is traced."""
    outer = CURRENT_RUN.get()
    outer_level = LEVEL.get()
    outer_turn = TURN.get()
    if outer_level is not None and outer_level.ctx is not outer:
        outer_level = None
    if outer_turn is not None and outer_turn.ctx is not outer:
        outer_turn = None
    nested = outer is not None and (outer_level is not None or outer_turn is not None)
    messages = _task_messages(kwargs)
    task_text = "\n".join(text_of(m) for m in messages) or None
    name = name_of(obj, "team" if team else type(obj).__name__)
    ctx, owned = attach_run(
        framework="autogen", task=None if nested else task_text, name=None if nested else name, source=obj
    )
    state = state_of(ctx)
    if outer_turn is not None:
        base = outer_turn.path
    elif outer_level is not None:
        base = outer_level.path
    else:
        base = ()
    path = base + (name,) if team else base
    invoking = current_step() if nested else None
    if invoking is not None and invoking.ctx is not ctx:
        invoking = None
    team_turn = None
    if nested and team:
        deps: list[tuple[str, str]] = []
        if outer_level is not None and outer_turn is None:  # a team participating in a team
            selected = outer_level.selected.pop(name, None)
            handoff = outer_level.handoffs.pop(name, None)
            deps += [(selected, "selected_by")] if selected else []
            deps += [(handoff, "handoff_from")] if handoff else []
        team_turn = state.track(
            ctx.start_step(
                "agent_turn",
                agent=name,
                parent=invoking,
                depends_on=deps,
                content=f"{name} turn",
                metadata={"agent_key": "/".join(path), "team": True},
            )
        )
    if team:  # what its participants can do, for the diagnosis (stored with the run, not exported)
        ctx.add_roster(autogen_roster(obj))
    if team:  # the team's id and participants, where OpenInference's instrumentor shows them (its CHAIN span)
        if team_turn is not None:
            team_turn.set_span_attributes(team_attributes(obj))
        elif not nested:
            ctx.set_root_attributes(team_attributes(obj))
    task_step_id = None
    new = [m for m in messages if m.id not in state.msg_steps]
    if new:
        deps = [(invoking.step_id, "delegated_by")] if invoking is not None and invoking.kind == "tool_call" else []
        agent = invoking.agent if (nested and invoking is not None) else "user"
        new_text = (task_text or "") if len(new) == len(messages) else "\n".join([text_of(m) for m in new])  # once
        task_step = ctx.add_step(
            "task",
            agent=agent,
            parent=team_turn if team_turn is not None else invoking,
            depends_on=deps,
            content=new_text,
            outputs={"text": new_text},
            metadata={} if nested else {"user_input": True},
        )
        if task_step is not None:
            task_step_id = task_step.step_id
            for m in new:
                state.msg_steps[m.id] = task_step_id
    elif messages:
        task_step_id = state.msg_steps.get(messages[-1].id)
    parent_id = step_id_of(team_turn) if team_turn is not None else step_id_of(invoking)
    level = Level(ctx, state, path, nested, parent_id, task_step_id)
    if team and MagenticOneGroupChat is not None and isinstance(obj, MagenticOneGroupChat):
        level.orchestrator = new_orchestrator(obj, level)
    ensure_patched_for(obj)
    return LevelRun(ctx, owned, level, nested, team_turn, invoking, messages, outer_turn)


def _level_scope(lr: LevelRun) -> Scope:
    """This team / agent run is current (and its run when owned, and its team turn when nested); no agent turn or
    speaker selection is."""
    values = ((LEVEL, lr.level), (TURN, None), (MANAGER, None))
    if lr.owned:
        return run_scope(lr.ctx, *values, step=lr.team_turn)
    if lr.team_turn is not None:
        return lr.team_turn.activate(*values)
    return Scope(values)


async def _end_level(lr: LevelRun, result: Any, error: BaseException | None, *, closed: bool) -> None:
    """Close a team/agent run: nested → end its turn and note its answer; top level → final answer, end report,
    and (when the adapter owns the run) the verifier and the stored Run."""
    try:
        _close_level(lr, result, error, closed=closed)
        if lr.owned:  # an owned run is never nested; it is finished even if closing it above failed
            await lr.ctx.finish()
    except Exception:
        logger.warning("causaltrace: closing an AutoGen run failed (the run continues)", exc_info=True)


@never_raise(default=None)
def _close_level(lr: LevelRun, result: Any, error: BaseException | None, *, closed: bool) -> bool | None:
    """The end of a team / agent run as steps: a nested one ends its team turn and notes its answer for the
    tool that ran it; a top-level one ends the steps still open, adds the ``final_answer`` and reports the outcome."""
    ctx, state = lr.ctx, lr.level.state
    answer_msg = None
    stop, keyword = "normal", None
    if isinstance(result, TaskResult):
        for msg in reversed(result.messages):
            if isinstance(msg, BaseChatMessage) and msg.source != "user":
                answer_msg = msg
                break
        stop, keyword = classify_stop(result.stop_reason)
    answer = _strip_keyword(text_of(answer_msg), keyword) if answer_msg is not None else None
    answer_sid = state.msg_steps.get(answer_msg.id) if answer_msg is not None else None
    cancelled = isinstance(error, asyncio.CancelledError) or (closed and result is None)
    if lr.nested:
        if lr.team_turn is not None:
            if error is not None:
                lr.team_turn.end(error=error)
            elif cancelled:
                lr.team_turn.end(error=StepError(type="Cancelled", message="the team run was closed before it ended"))
            else:
                lr.team_turn.end(status="ok", outputs={"text": answer or "", "stop_reason": _stop_reason(result)})
        if lr.invoking is not None and lr.invoking.kind == "tool_call":
            if answer_sid is not None:
                state.answers[lr.invoking.step_id] = answer_sid
        elif lr.outer_turn is not None and isinstance(result, TaskResult):
            # a team run inside an agent's turn (SocietyOfMindAgent): the agent reads its whole transcript
            sids = [state.msg_steps.get(m.id) for m in result.messages if isinstance(m, BaseChatMessage)]
            extend_unique(lr.outer_turn.memo.saw, sids)
        return None
    state.end_open()
    if error is None and not cancelled and stop == "normal" and answer_sid is not None:
        ctx.add_step(
            "final_answer",
            agent=answer_msg.source,
            parent=lr.level.parent_id,
            depends_on=[(answer_sid, "answer_of")],
            content=answer or "",
            outputs={"text": answer or ""},
        )
    if cancelled and not isinstance(error, Exception):
        ctx.report_end(final_answer=answer, stop="limit", reason="the run was cancelled before it ended")
    elif error is not None:
        ctx.report_end(final_answer=answer, error=error, reason=_error_reason(state, error))
    else:
        ctx.report_end(final_answer=answer, stop=stop, reason=_stop_reason(result))
    if lr.owned:
        state.closed = True
    return True


def _error_reason(state: RunState, error: BaseException) -> str:
    """A one-line reason: the agent that raised and its exception (AutoGen re-raises it as a RuntimeError whose
    text carries a whole traceback)."""
    if state.agent_error is not None:
        agent, exc = state.agent_error
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"agent {agent!r} raised {type(exc).__name__}: {first}"
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"


def _stop_reason(result: Any) -> str:
    """AutoGen's ``stop_reason`` of a TaskResult (empty when there is none)."""
    reason = getattr(result, "stop_reason", None)
    return reason if isinstance(reason, str) else ""


def wrap_team_run_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseGroupChat.run_stream``: a team run (``BaseGroupChat.run`` goes through it)."""
    if not SWITCH.on:
        return wrapped(*args, **kwargs)
    return _level_stream(wrapped, instance, args, kwargs, team=True)


def wrap_agent_run_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatAgent.run_stream``: a single agent's run (top level, or inside an AgentTool)."""
    if not SWITCH.on:
        return wrapped(*args, **kwargs)
    return _level_stream(wrapped, instance, args, kwargs, team=False)


def _level_stream(wrapped: Any, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, team: bool) -> Any:
    """The wrapped ``run_stream``: each ``__anext__`` inside the run's scope, the run closed however it ends."""
    kwargs = dict(kwargs)

    def begin() -> StreamHooks | None:
        lr = _begin_level(obj, kwargs, team=team)
        if lr is None:
            return None

        async def end(result: Any, error: BaseException | None, closed: bool) -> None:
            await _end_level(lr, result, error, closed=closed)

        return StreamHooks(scope=_level_scope(lr), end=end, result_type=TaskResult)

    return scoped_stream(begin, wrapped, args, kwargs)


def wrap_agent_run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatAgent.run``: it calls ``on_messages`` directly, so the turn is opened here."""
    if not SWITCH.on:
        return wrapped(*args, **kwargs)
    return _agent_run(wrapped, instance, args, kwargs)


async def _agent_run(wrapped: Any, agent: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The wrapped ``BaseChatAgent.run``: one agent run whose one turn is opened here."""
    kwargs = dict(kwargs)
    lr = _begin_level(agent, kwargs, team=False)
    if lr is None:
        return await wrapped(*args, **kwargs)
    result = None
    error: BaseException | None = None
    try:
        with _level_scope(lr):
            turn, owner = begin_turn(agent, lr.task_messages)
            try:
                with turn_scope(turn):
                    result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if turn is not None and owner:
                    for msg in getattr(result, "messages", None) or ():
                        observe(turn, msg)
                    end_turn(turn, error, closed=False)
        return result
    finally:
        await _end_level(lr, result, error, closed=False)


@never_raise()
def ensure_patched_for(obj: Any, _depth: int = 0) -> None:
    """Make sure the agent classes and model-client classes a team or agent uses are wrapped."""
    if obj is None or _depth > 8:
        return
    members = participants_of(obj)
    if members:
        for member in members:
            ensure_patched_for(member, _depth + 1)
    elif hasattr(obj, "on_messages_stream"):
        patch_agent_class(type(obj))
    client = model_client_of(obj)
    if client is not None:
        patch_client_class(type(client))
