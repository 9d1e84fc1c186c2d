"""smolagents instrumentation: every agent step as a typed, linked step span, every model and tool call recorded.

Usage::

    import causaltrace
    from causaltrace.instrumentation.smolagents import instrument_smolagents

    instrument_smolagents()                      # or causaltrace.instrument()
    with causaltrace.run(task=task, verify="91") as handle:
        agent.run(task)
    handle.outcome.status, handle.run.steps, handle.run.recording

Without a ``causaltrace.run()`` block each top-level ``agent.run(...)`` is a run of its own (``stream=True``
included: the run ends when the generator is exhausted or closed).

What is captured (ARCHITECTURE "Steps"; the state machine is in ``_steps.py``, every read of a smolagents
object in ``_access.py``):

* ``task`` and an ``agent_turn`` per agent run. A managed agent's ``agent_turn`` is a child of the manager's
  ``tool_call`` that invoked it and its ``task`` is ``delegated_by`` that call; the manager's ``tool_response``
  carrying its report is ``answer_of`` the managed agent's ``final_answer``.
* ``planning`` steps (``planning_interval``), each ``produced_by`` the planning ``llm_response``.
* per ActionStep: the ``llm_response`` (any Model class: ``generate`` / ``generate_stream`` are wrapped on the class
  that defines them for ``type(agent.model)`` when a run starts, so a user subclass that overrides ``generate`` is
  covered), with ``continues`` (the agent's previous llm_response in this run), ``saw`` (the task, a plan),
  ``observed`` (tool responses, code executions, errors since the previous call); the ``reasoning`` text; each
  ``tool_call`` / ``tool_response`` (ids linked, ``tool_result_of``; a tool that raises is an ERROR
  ``tool_response``); CodeAgent: the code as a ``python_interpreter`` ``tool_call``, its ``code_execution``
  (``executes``; stdout, stderr, exit code, error) and the calls the code makes (``produced_by`` the
  code_execution); ``final_answer``; ``error`` steps.
* outcome: ``stop="normal"`` on a final answer, ``"limit"`` when max steps were reached without one
  (AgentMaxStepsError), ``"error"`` when the run raised (the user's exception passes through unchanged); a failed
  run's root span ends with ERROR.
* the Recording (ARCHITECTURE "Recording"): every model call (canonical request: messages, stop sequences,
  response format, tool SCHEMAS; tool-call ids aliased, also inside message text; response: the parsed
  ChatMessage) and every tool / managed-agent / code call, keyed ``(agent_key, kind, ordinal, request_hash)`` with
  ``agent_key`` the ``/``-joined agent names from the root (``manager/math_agent``).

Replay: importing this module registers the playback side, :class:`~causaltrace.instrumentation.smolagents._playback.
SmolagentsReplayAdapter`, in the ReplayAdapter registry (``causaltrace.replay`` finds it by framework name).

Context propagation: smolagents runs parallel tool calls with ``copy_context()``; its LocalPythonExecutor runs code
in a thread of its own without it — the patched ``local_python_executor.timeout`` runs that thread in a copy of the
caller's context, so calls made by the code stay in the run (and in its trace). A tool or managed agent that the
code calls from a thread it started itself (``concurrent.futures`` in the code) gets no context at all: it is
attributed to the one agent run whose running code can call that object (a registry of the tools and managed
agents of agents whose code is running). Such calls are numbered in the order they start.

Patches are table-driven (``wrapt``) and undone by one generic loop; each wrapper belongs to one instrumentation
generation, so a wrapper that another library wrapped over (and that could therefore not be removed) stays inert.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import TracerProvider

from causaltrace.config import TraceConfig
from causaltrace.exceptions import MissingExtraError
from causaltrace.instrumentation import _runtime
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._steps import (
    _IN_MODEL,
    _IN_TOOL,
    _INVOKER,
    _STATE,
    AgentRun,
    code_caller_of,
    guard,
)

__all__ = ["instrument_smolagents", "is_instrumented", "uninstrument_smolagents"]

logger = logging.getLogger("causaltrace")

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass
class _Patch:
    owner: Any  # a class or a module
    attr: str
    original: Any
    installed: Any


_LOCK = threading.RLock()
_PATCHES: list[_Patch] = []
_GENERATION = [0]  # the live generation; 0 = not instrumented


def is_instrumented() -> bool:
    """Whether :func:`instrument_smolagents` is in force."""
    return bool(_PATCHES)


def instrument_smolagents(tracer_provider: TracerProvider | None = None, config: TraceConfig | None = None) -> None:
    """Instrument smolagents (idempotent). ``tracer_provider`` / ``config`` set where spans go and the payload
    policy (see :func:`causaltrace.configure`).

    Raises:
        MissingExtraError: smolagents is not installed (``pip install 'causaltrace[smolagents]'``).
    """
    try:
        import smolagents  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("smolagents", "smolagents") from exc
    _runtime.configure(tracer_provider, config)
    with _LOCK:
        if _PATCHES:
            return
        _GENERATION[0] += 1
        s = acc.smol()
        from smolagents import local_python_executor

        for owner, attr, fn in (
            (s.MultiStepAgent, "run", _run),
            (s.MultiStepAgent, "_run_stream", _run_stream),
            (s.MultiStepAgent, "__call__", _agent_call),
            (s.MultiStepAgent, "_generate_planning_step", _planning),
            (s.MultiStepAgent, "provide_final_answer", _provide_final_answer),
            (s.ToolCallingAgent, "_step_stream", _step_stream),
            (s.CodeAgent, "_step_stream", _step_stream),
            (s.ToolCallingAgent, "execute_tool_call", _execute_tool_call),
            (s.Tool, "__call__", _tool_call),
            (local_python_executor, "timeout", _timeout),
        ):
            _patch(owner, attr, fn)


def uninstrument_smolagents() -> None:
    """Undo :func:`instrument_smolagents` (idempotent); patches added for model and tool classes go too."""
    with _LOCK:
        _GENERATION[0] += 1  # every wrapper still installed anywhere is inert from now on
        for patch in reversed(_PATCHES):
            if vars(patch.owner).get(patch.attr) is patch.installed:
                setattr(patch.owner, patch.attr, patch.original)
            else:
                logger.info("causaltrace: %s.%s was wrapped again by another library; our wrapper stays, inert",
                            getattr(patch.owner, "__name__", patch.owner), patch.attr)
        _PATCHES.clear()


def _patch(owner: Any, attr: str, fn: Wrapper) -> None:
    import wrapt

    original = vars(owner).get(attr)
    if original is None:
        return
    generation = _GENERATION[0]

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _GENERATION[0] != generation:
            return wrapped(*args, **kwargs)
        return fn(wrapped, instance, args, kwargs)

    wrapt.wrap_function_wrapper(owner, attr, wrapper)
    _PATCHES.append(_Patch(owner, attr, original, vars(owner)[attr]))


def _ensure_patched(cls: type, attr: str, fn: Wrapper) -> None:
    """Wrap ``attr`` on the class of ``cls``'s MRO that defines it (a subclass's override shadows a base patch)."""
    owner = next((k for k in cls.__mro__ if attr in vars(k)), None)
    if owner is None or owner is object:
        return
    with _LOCK:
        if not _PATCHES:
            return
        current = vars(owner)[attr]
        if any(p.owner is owner and p.attr == attr and p.installed is current for p in _PATCHES):
            return
        _patch(owner, attr, fn)


def _patch_agent_classes(agent: Any) -> None:
    model = getattr(agent, "model", None)
    if model is not None:
        _ensure_patched(type(model), "generate", _generate)
        if callable(getattr(model, "generate_stream", None)):
            _ensure_patched(type(model), "generate_stream", _generate_stream)
    for tool in list(getattr(agent, "tools", {}).values()):
        _ensure_patched(type(tool), "__call__", _tool_call)


# ------------------------------------------------------------------------------------------------- agent runs


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _begin(agent: Any, task: Any) -> AgentRun:
    parent = _STATE.get()
    if parent is not None and parent.closed:
        parent = None
    invocation = _INVOKER.get()
    if parent is None:
        ctx, owned = _runtime.attach_run(
            framework="smolagents", task=None if task is None else str(task), source=agent
        )
    else:
        ctx, owned = parent.ctx, False
    if invocation is not None and (invocation.parent is not parent or invocation.target != acc.agent_name(agent)):
        invocation = None
    try:
        _patch_agent_classes(agent)
        state = AgentRun(ctx, agent, owned=owned, parent=parent, invocation=invocation,
                         task=None if task is None else str(task))
        state.start()
    except Exception:
        if owned:  # do not leave a root span open for a run we will not follow
            ctx.report_end(stop="error", error="causaltrace could not follow this run (internal error)")
            ctx.finish_sync()
        raise
    return state


def _run(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    task = _arg(args, kwargs, 0, "task")
    stream = bool(_arg(args, kwargs, 1, "stream", False))
    state: AgentRun | None = guard(_begin, instance, task)
    if state is None:
        return wrapped(*args, **kwargs)
    with state.entered(force=True):
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            guard(state.close, error=exc)
            raise
        if not stream and not state.closed:
            guard(state.close)
    return result


def _run_stream(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    gen = wrapped(*args, **kwargs)
    state = _STATE.get()
    if state is None or state.agent is not instance or state.observing or state.closed:
        return gen
    state.observing = True
    return _observe(state, gen)


def _observe(state: AgentRun, gen: Iterator[Any]) -> Iterator[Any]:
    """Pass the run's stream through, feeding each item to the agent run (inside its context)."""
    while True:
        with state.entered():
            try:
                item = next(gen)
            except StopIteration:
                guard(state.close)
                return
            except BaseException as exc:
                guard(state.close, error=exc)
                raise
            guard(state.on_item, item)
        try:
            yield item
        except GeneratorExit:
            try:
                gen.close()  # may raise: smolagents' _run_stream yields in a ``finally`` (as without us)
            finally:
                with state.entered():
                    guard(state.close, closed_early=True)
            raise
        except BaseException as exc:
            with state.entered():
                guard(state.close, error=exc)
            raise


def _agent_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A managed agent called by the manager's running code (the ToolCallingAgent path goes through
    ``execute_tool_call``, which has already announced the call)."""
    state = _STATE.get()
    if state is None:
        return _from_code_thread(_agent_call, wrapped, instance, args, kwargs)
    if _IN_TOOL.get() is not None or state.act.code_exec is None:
        return wrapped(*args, **kwargs)
    arguments = {"task": acc.jsonable(_arg(args, kwargs, 0, "task"))}
    arguments.update({str(k): acc.jsonable(v) for k, v in kwargs.items() if k != "task"})
    rec = guard(state.begin_code_call, acc.agent_name(instance), arguments)
    if rec is None:
        return wrapped(*args, **kwargs)
    return state.run_tool(rec, lambda: wrapped(*args, **kwargs), managed=True)


def _tool_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A tool called by the agent's running code (calls from a ToolCallingAgent pass: they are already steps)."""
    state = _STATE.get()
    if state is None:
        return _from_code_thread(_tool_call, wrapped, instance, args, kwargs)
    if _IN_TOOL.get() is not None or state.act.code_exec is None:
        return wrapped(*args, **kwargs)
    name = str(getattr(instance, "name", type(instance).__name__))
    rec = guard(state.begin_code_call, name, acc.call_arguments(instance, args, kwargs))
    if rec is None:
        return wrapped(*args, **kwargs)
    return state.run_tool(rec, lambda: wrapped(*args, **kwargs), managed=False)


def _from_code_thread(hook: Wrapper, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """A tool / managed agent called in a thread that running code started itself (``concurrent.futures`` in the
    code): no context was copied there, so find the agent run whose running code can call this object."""
    caller = code_caller_of(instance)
    if caller is None or caller.closed:
        return wrapped(*args, **kwargs)
    with caller.entered(force=True):
        return hook(wrapped, instance, args, kwargs)


def _execute_tool_call(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> Any:
    state = _STATE.get()
    if state is None or state.agent is not instance:
        return wrapped(*args, **kwargs)
    name = _arg(args, kwargs, 0, "tool_name")
    arguments = _arg(args, kwargs, 1, "arguments")
    rec = guard(state.claim_tool, str(name), arguments)
    if rec is None:
        return wrapped(*args, **kwargs)
    managed = name in (getattr(instance, "managed_agents", None) or {})
    return state.run_tool(rec, lambda: wrapped(*args, **kwargs), managed=managed)


def _step_stream(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    state = _STATE.get()
    if state is not None and state.agent is instance:
        guard(state.on_step_stream, _arg(args, kwargs, 0, "memory_step"))
    return wrapped(*args, **kwargs)


def _planning(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    gen = wrapped(*args, **kwargs)
    state = _STATE.get()
    if state is None or state.agent is not instance:
        return gen
    return _in_phase(state, "planning", gen)


def _in_phase(state: AgentRun, phase: str, gen: Iterator[Any]) -> Iterator[Any]:
    previous, state.phase = state.phase, phase
    try:
        yield from gen
    finally:
        state.phase = previous


def _provide_final_answer(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
    state = _STATE.get()
    if state is None or state.agent is not instance:
        return wrapped(*args, **kwargs)
    guard(state.on_max_steps)
    previous, state.phase = state.phase, "final"
    try:
        return wrapped(*args, **kwargs)
    finally:
        state.phase = previous


# ----------------------------------------------------------------------------------------------------- models


def _model_state(instance: Any) -> AgentRun | None:
    state = _STATE.get()
    if state is None or state.closed or _IN_MODEL.get() or _IN_TOOL.get() is state:
        return None
    if getattr(state.agent, "model", None) is not instance:
        return None
    return state


def _model_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    names = ("messages", "stop_sequences", "response_format", "tools_to_call_from")
    values = [_arg(args, kwargs, i, n) for i, n in enumerate(names)]
    extra = {k: v for k, v in kwargs.items() if k not in names}
    extra.update({f"arg{i}": v for i, v in enumerate(args[len(names):], start=len(names))})
    return (*values, extra)


def _generate(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    state = _model_state(instance)
    if state is None:
        return wrapped(*args, **kwargs)
    rec = guard(state.llm_start, instance, *_model_args(args, kwargs))
    if rec is None:
        return wrapped(*args, **kwargs)
    token = _IN_MODEL.set(True)
    try:
        message = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(state.llm_error, rec, exc)
        raise
    finally:
        _IN_MODEL.reset(token)
    guard(state.llm_end, rec, message)
    return message


def _generate_stream(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    state = _model_state(instance)
    if state is None:
        return wrapped(*args, **kwargs)
    rec = guard(state.llm_start, instance, *_model_args(args, kwargs))
    if rec is None:
        return wrapped(*args, **kwargs)
    try:
        stream = wrapped(*args, **kwargs)
    except BaseException as exc:
        guard(state.llm_error, rec, exc)
        raise
    return _recorded_stream(state, rec, stream)


def _recorded_stream(state: AgentRun, rec: Any, stream: Iterator[Any]) -> Iterator[Any]:
    deltas: list[Any] = []
    iterator = iter(stream)
    while True:
        token = _IN_MODEL.set(True)  # while the model works (not across our yields): nested model calls pass
        try:
            delta = next(iterator)
        except StopIteration:
            break
        except BaseException as exc:
            guard(state.llm_error, rec, exc)
            raise
        finally:
            _IN_MODEL.reset(token)
        deltas.append(delta)
        yield delta
    message = guard(acc.smol().agglomerate_stream_deltas, deltas)
    guard(state.llm_end, rec, message)


# ------------------------------------------------------------------------------------------- executor threads


def _timeout(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """LocalPythonExecutor runs each code snippet through ``timeout(seconds)(fn)()``, in a fresh thread: run it in a
    copy of the caller's context, so the code's tool calls belong to the run and its trace."""
    decorate = wrapped(*args, **kwargs)

    def propagate(fn: Callable[..., Any]) -> Callable[..., Any]:
        context = contextvars.copy_context()

        @functools.wraps(fn)
        def in_context(*a: Any, **k: Any) -> Any:
            return context.run(fn, *a, **k)

        return decorate(in_context)

    return propagate


# ------------------------------------------------------------------------------------------------- playback


def _register_playback() -> None:
    """Register the playback side (``_playback.py``) in the ReplayAdapter registry (ARCHITECTURE "Package
    layout": adapters register by framework name when imported)."""
    from causaltrace.instrumentation.smolagents._playback import SmolagentsReplayAdapter
    from causaltrace.protocols import register_replay_adapter

    register_replay_adapter(SmolagentsReplayAdapter(instrument=lambda: None if is_instrumented() else instrument_smolagents()))


_register_playback()
