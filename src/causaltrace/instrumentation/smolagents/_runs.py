"""Agent runs: each ``MultiStepAgent.run`` (the top-level agent's and every managed agent's) is an :class:`AgentRun`
with its ``task`` and ``agent_turn`` steps; the top-level one is (or joins) a causaltrace run.

Without a ``causaltrace.run()`` block each top-level ``agent.run(...)`` is a run of its own (``stream=True``
included: the run ends when the generator is exhausted or closed). The run's stream is passed through
(``_run_stream``), each item handed to its handler (:func:`~._turns.item_handler`) inside the run's context. The
outcome: ``normal`` on a final answer, ``limit`` when max steps were reached without one (or the stream was closed
early), ``error`` when the run raised (the user's exception passes through unchanged); a managed run's end writes
its final_answer step id back to the manager's call (``answer_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from causaltrace.instrumentation.roster import smolagents_roster
from causaltrace.instrumentation.runs import attach_run
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._code import unregister_callees
from causaltrace.instrumentation.smolagents._model_calls import flush_llm, patch_model_class
from causaltrace.instrumentation.smolagents._oi import agent_attributes, token_attributes
from causaltrace.instrumentation.smolagents._state import (
    CURRENT_RUN,
    INVOKER,
    AgentRun,
    guard,
    internal_error,
    text,
)
from causaltrace.instrumentation.smolagents._tools import patch_tool_classes
from causaltrace.instrumentation.smolagents._turns import ITEM_HANDLERS, item_handler
from causaltrace.schema import StepError

__all__ = ["close", "wrap_run", "wrap_run_stream"]

#: Not in :data:`~._turns.ITEM_HANDLERS` yet.
_UNSEEN: Any = object()


# ----------------------------------------------------------------------------------------------------- hooks


def wrap_run(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``MultiStepAgent.run``: an agent run from its start to its end (a streamed run ends with its stream)."""
    n = len(args)  # arg() for both, and guard(_begin, …), inline (every agent run, managed ones included)
    task = args[0] if n > 0 else kwargs.get("task")
    stream = bool(args[1] if n > 1 else kwargs.get("stream", False))
    try:
        state: AgentRun | None = _begin(instance, task)
    except Exception:
        internal_error(_begin)
        state = None
    if state is None:
        return wrapped(*args, **kwargs)
    with state.entered(force=True):
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            guard(close, state, error=exc)
            raise
        if not stream and not state.closed:
            guard(close, state)
    return result


def wrap_run_stream(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``MultiStepAgent._run_stream``: observe the stream of the agent run that is starting."""
    gen = wrapped(*args, **kwargs)
    state = CURRENT_RUN.get()
    if state is None or state.agent is not instance or state.observing or state.closed:
        return gen
    state.observing = True
    return _observe(state, gen)


def _observe(state: AgentRun, gen: Iterator[Any]) -> Iterator[Any]:
    """Pass the run's stream through, feeding each item to the agent run (inside its context)."""
    while True:
        # the run is current while smolagents makes the next item; it usually is already (a run that is not
        # streamed), and then no scope is entered (a Scope when it is not: its exit ignores the exception)
        scope = None if CURRENT_RUN.get() is state else state.entered(force=True)
        if scope is not None:
            scope.__enter__()
        try:
            try:
                item = next(gen)
            except StopIteration:
                guard(close, state)
                return
            except BaseException as exc:
                guard(close, state, error=exc)
                raise
            handler = None
            try:  # guard(handler, …), inline: once per item (its handler: no dispatching call)
                handler = ITEM_HANDLERS.get(type(item), _UNSEEN)
                if handler is _UNSEEN:
                    handler = item_handler(type(item))
                if handler is not None:
                    handler(state, item)
            except Exception:
                internal_error(handler or item_handler)
        finally:
            if scope is not None:
                scope.__exit__(None, None, None)
        try:
            yield item
        except GeneratorExit:
            try:
                gen.close()  # may raise: smolagents' _run_stream yields in a ``finally`` (as without us)
            finally:
                with state.entered():
                    guard(close, state, closed_early=True)
            raise
        except BaseException as exc:
            with state.entered():
                guard(close, state, error=exc)
            raise


# ------------------------------------------------------------------------------------------------ the start


def _begin(agent: Any, task: Any) -> AgentRun:
    parent = CURRENT_RUN.get()
    if parent is not None and parent.closed:
        parent = None
    invocation = INVOKER.get()
    if parent is None:
        ctx, owned = attach_run(
            framework="smolagents", task=None if task is None else str(task), source=agent
        )
    else:
        ctx, owned = parent.ctx, False
    if invocation is not None and (invocation.parent is not parent or invocation.target != acc.agent_name(agent)):
        invocation = None
    try:
        model = getattr(agent, "model", None)
        if model is not None:
            patch_model_class(model)
        patch_tool_classes(agent)
        state = AgentRun(ctx, agent, owned=owned, parent=parent, invocation=invocation,
                         task=None if task is None else str(task))
        _start(state)
    except Exception:
        if owned:  # do not leave a root span open for a run we will not follow
            ctx.report_end(stop="error", error="causaltrace could not follow this run (internal error)")
            ctx.finish_sync()
        raise
    return state


def _start(run: AgentRun) -> None:
    """The run's first steps: the top-level task then its agent_turn, or a managed agent_turn then its task."""
    meta = {"agent_key": run.key, "agent_class": type(run.agent).__name__,
            "max_steps": getattr(run.agent, "max_steps", None)}
    if run.parent is None:  # what the agent and its managed agents can do (stored with the run, not exported)
        run.ctx.add_roster(smolagents_roster(run.agent))
        run.task_step = run.ctx.start_step(
            "task", agent="user", content=text(run.task), metadata={"user_input": True}
        )
        if run.task_step is not None:
            run.task_step.end()
        run.turn = run.ctx.start_step("agent_turn", agent=run.name, content=f"{run.name} runs", metadata=meta)
    else:
        inv = run.invocation
        meta["delegated_by_agent"] = run.parent.name
        run.turn = run.ctx.start_step(
            "agent_turn", agent=run.name, parent=inv.tool_call if inv else run.parent.turn,
            content=f"{run.name} runs", metadata=meta,
        )
        run.task_step = run.new_step(
            "task", content=text(run.task),
            depends_on=[(inv.tool_call.step_id, "delegated_by")] if inv else (),
            metadata={"delegated_by_agent": run.parent.name},
        )
        run.task_step.end()
    if run.turn is not None:
        run.turn.set_span_attributes(agent_attributes(run.agent, run.task,
                                                      content=run.ctx.tracing.config.oi_content))
    if run.task_step is not None:
        run.saw.append(run.task_step.step_id)


# -------------------------------------------------------------------------------------------------- the end


def close(run: AgentRun, *, error: BaseException | None = None, closed_early: bool = False) -> None:
    """The agent run ended (normally, with an exception, or its stream was closed): end its steps and, for
    the top-level agent, report the run's end (and finish the run when the adapter owns it)."""
    if run.closed:
        return
    run.closed = True
    try:
        unregister_callees(run)
        flush_llm(run)
        _end_open_steps(run, error)
        if run.turn is not None:
            run.turn.set_span_attributes(token_attributes(run.agent))
        if error is not None:
            step = run.new_step("error", content=text(f"{type(error).__name__}: {error}"))
            step.end(error=error)
            if run.turn is not None:
                run.turn.end(error=error, outputs={"final_answer": None})
        elif run.turn is not None:
            outputs = {"final_answer": None if run.output is None else text(run.output)}
            if run.stop == "limit":
                run.turn.end(error=StepError(type="AgentMaxStepsError", message="Reached max steps."),
                             outputs=outputs)
            elif closed_early:
                run.turn.end(status="unset", outputs={**outputs, "stream_closed": True})
            else:
                run.turn.end(outputs=outputs)
        if run.invocation is not None:
            run.invocation.answer_step_id = run.answer_step_id
    finally:
        if run.parent is None:
            _report(run, error, closed_early)


def _end_open_steps(run: AgentRun, error: BaseException | None) -> None:
    act = run.act
    if act.llm is not None and not act.llm.step.ended:
        act.llm.step.end(error=error) if error is not None else act.llm.step.end()
    for handle in [act.code_exec, act.final_step, *(r.step for r in act.tools)]:
        if handle is not None and not handle.ended:
            handle.end(error=error) if error is not None else handle.end(status="unset")


def _report(run: AgentRun, error: BaseException | None, closed_early: bool) -> None:
    answer = None if run.output is None else str(run.output)
    if error is not None:
        run.ctx.report_end(final_answer=None, stop="error", error=error)
    elif closed_early:
        run.ctx.report_end(final_answer=answer, stop="limit",
                           reason="the run's stream was closed before the agent finished")
    elif run.stop == "limit":
        run.ctx.report_end(final_answer=answer, stop="limit", reason="AgentMaxStepsError: Reached max steps.")
    else:
        run.ctx.report_end(final_answer=answer, stop="normal")
    if run.owned:
        run.ctx.finish_sync()
