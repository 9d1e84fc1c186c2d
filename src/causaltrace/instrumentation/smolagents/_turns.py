"""An agent run's turns: its action steps, planning steps and final answer, read off the run's stream.

smolagents yields, per action step, the model's stream deltas, its ToolCalls, the ToolOutputs, an ActionOutput and
finally the ActionStep itself (after its callbacks); planning gives a PlanningStep and the run ends with a
FinalAnswerStep. :func:`item_handler`'s handlers turn each into steps: ``planning`` (``produced_by`` the planning llm_response),
``final_answer`` (``produced_by`` the llm_response or the code_execution, ``answer_of`` the final_answer tool's
response), ``error`` steps for an AgentError no step carries, and the max-steps ``error`` + forced ``final_answer``.
The hooks here mark where the agent is (``_step_stream`` starts an action step; planning and the forced final
answer are phases whose model calls are told apart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._code import (
    fail_code_execution,
    finish_code_execution,
    unregister_callees,
)
from causaltrace.instrumentation.smolagents._model_calls import flush_llm
from causaltrace.instrumentation.smolagents._state import (
    CURRENT_RUN,
    ActionState,
    AgentRun,
    guard,
    internal_error,
    text,
)
from causaltrace.instrumentation.smolagents._tools import on_tool_call, on_tool_output
from causaltrace.schema import StepError

__all__ = [
    "ITEM_HANDLERS", "end_action", "item_handler", "wrap_planning", "wrap_provide_final_answer", "wrap_step_stream",
]


# ----------------------------------------------------------------------------------------------------- hooks


def wrap_step_stream(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``*Agent._step_stream``: an action step begins (the one before it ends, if smolagents did not yield it)."""
    state = CURRENT_RUN.get()
    if state is not None and state.agent is instance:
        try:  # guard(_on_step_stream, …), inline: every action step
            _on_step_stream(state, args[0] if args else kwargs.get("memory_step"))  # arg(), inline
        except Exception:
            internal_error(_on_step_stream)
    return wrapped(*args, **kwargs)


def wrap_planning(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``MultiStepAgent._generate_planning_step``: its model calls are the planning phase's."""
    gen = wrapped(*args, **kwargs)
    state = CURRENT_RUN.get()
    if state is None or state.agent is not instance:
        return gen
    return _in_phase(state, "planning", gen)


def _in_phase(state: AgentRun, phase: str, gen: Iterator[Any]) -> Iterator[Any]:
    previous, state.phase = state.phase, phase
    try:
        yield from gen
    finally:
        state.phase = previous


def wrap_provide_final_answer(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """``MultiStepAgent.provide_final_answer``: max steps were reached; its model call is the forced answer's."""
    state = CURRENT_RUN.get()
    if state is None or state.agent is not instance:
        return wrapped(*args, **kwargs)
    guard(_on_max_steps, state)
    previous, state.phase = state.phase, "final"
    try:
        return wrapped(*args, **kwargs)
    finally:
        state.phase = previous


def _on_step_stream(run: AgentRun, memory_step: Any) -> None:
    if run.act.memory_step is not None and run.act.memory_step is not memory_step:
        end_action(run, None)
    run.act.memory_step = memory_step
    run.phase = "action"


def _on_max_steps(run: AgentRun) -> None:
    """smolagents is about to force a final answer: the step budget is spent."""
    flush_llm(run)
    run.stop = "limit"
    step = run.new_step("error", content="AgentMaxStepsError: Reached max steps.",
                        metadata={"max_steps": getattr(run.agent, "max_steps", None)})
    step.end(error=StepError(type="AgentMaxStepsError", message="Reached max steps."))
    run.observe(step.step_id)


# ------------------------------------------------------------------------------------ the run's stream


#: An item's class → what :func:`item_handler` gave for it.
ITEM_HANDLERS: dict[type, Callable[[AgentRun, Any], None] | None] = {}


def item_handler(cls: type) -> Callable[[AgentRun, Any], None] | None:
    """What the run does with an item of its stream of class ``cls``, in the order smolagents yields them (None:
    nothing, e.g. a model's stream delta); decided once per class (:data:`ITEM_HANDLERS`), so the run's stream calls
    the handler directly, no dispatching call per item."""
    s = acc.smol()
    handler: Callable[[AgentRun, Any], None] | None = None
    if issubclass(cls, s.ChatMessageStreamDelta):
        handler = None
    elif issubclass(cls, s.ToolCall):
        handler = on_tool_call
    elif issubclass(cls, s.ToolOutput):
        handler = on_tool_output
    elif issubclass(cls, s.ActionOutput):
        handler = _on_action_output
    elif issubclass(cls, s.ActionStep):
        handler = _on_action_step
    elif issubclass(cls, s.PlanningStep):
        handler = _on_planning
    elif issubclass(cls, s.FinalAnswerStep):
        handler = _on_final_answer
    if len(ITEM_HANDLERS) < 256:
        ITEM_HANDLERS[cls] = handler
    return handler


def _on_action_step(run: AgentRun, item: Any) -> None:
    if item is not run.last_action_step:
        run.last_action_step = item
        end_action(run, item)


def _on_action_output(run: AgentRun, out: Any) -> None:
    if run.act.pending_message is not None:  # flush_llm's own test, first: no call on every item
        flush_llm(run)
    act = run.act
    producer = act.llm.step.step_id if act.llm is not None else None
    if act.code_exec is not None:
        producer = finish_code_execution(run, out)
    if out.is_final_answer:
        deps = [(producer, "produced_by")] if producer else []
        if act.final_tool_response:
            deps.append((act.final_tool_response, "answer_of"))
        answer = text(out.output)  # once, for the content and the outputs
        act.final_step = run.new_step("final_answer", content=answer, outputs={"text": answer}, depends_on=deps)
        run.output = out.output


def end_action(run: AgentRun, memory_step: Any) -> None:
    """The action step is over (smolagents yielded it after its callbacks): settle what is still open."""
    if run.callees:  # a CodeAgent's code registered some (no call, no lock for the others)
        unregister_callees(run)
    if run.act.pending_message is not None:  # flush_llm's own test, first: no call on every item
        flush_llm(run)
    act = run.act
    error = getattr(memory_step, "error", None) if memory_step is not None else None
    if act.final_step is not None:
        if error is not None:  # final_answer_checks rejected it
            act.final_step.end(error=error)
            run.observe(act.final_step.step_id)
            act.accounted.add(id(error))
        else:
            act.final_step.end()
            run.accepted = True
            run.answer_step_id = act.final_step.step_id
    if act.code_exec is not None:
        fail_code_execution(run, memory_step, error)
    if error is not None and id(error) not in act.accounted:
        step = run.new_step("error", content=text(f"{type(error).__name__}: {error}"), depends_on=run.produced_by_llm())
        step.end(error=error)
        run.observe(step.step_id)
    for rec in act.tools:
        if not rec.step.ended:
            rec.step.end()
    run.act = ActionState()


def _on_planning(run: AgentRun, plan_step: Any) -> None:
    plan = text(getattr(plan_step, "plan", ""))
    deps = [(run.planning_llm, "produced_by")] if run.planning_llm else []
    step = run.new_step("planning", content=plan, outputs={"text": plan}, depends_on=deps)
    step.end()
    run.planning_llm = None
    with run.lock:
        run.saw.append(step.step_id)


def _on_final_answer(run: AgentRun, final: Any) -> None:
    flush_llm(run)
    if run.act.memory_step is not None or run.act.final_step is not None:
        end_action(run, run.act.memory_step)
    run.output = getattr(final, "output", None)
    if not run.accepted:
        run.stop = "limit"
        deps = [(run.final_llm, "produced_by")] if run.final_llm else []
        answer = text(run.output)  # once, for the content and the outputs
        step = run.new_step("final_answer", content=answer, outputs={"text": answer},
                            depends_on=deps, metadata={"forced": True})
        step.end()
        run.answer_step_id = step.step_id
