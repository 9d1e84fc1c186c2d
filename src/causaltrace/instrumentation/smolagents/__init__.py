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

What is captured (ARCHITECTURE "Steps"):

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

Patches are table-driven (``wrapt``, the table is :func:`_patch_table`) and undone by one generic loop
(``_patches``); each wrapper belongs to one instrumentation generation, so a wrapper that another library wrapped
over (and that could therefore not be removed) stays inert.

Where things are: this module is the facade (instrument / uninstrument, the table of patches; ``_patches`` installs
and undoes them). The recording hooks (the ``wrap_*`` wrappers and the steps they emit) are split by concept, and
none imports this module: ``_runs`` (agent runs: task, agent_turn, the outcome), ``_turns`` (the run's stream:
action steps, planning, final answers, errors), ``_model_calls``, ``_tools`` (tools and managed agents), ``_code``
(CodeAgent code executions and the calls the code makes); ``_state`` is the AgentRun they share and its context
variables, ``_access`` every private smolagents name and the canonical model request. The replay side:
``_playback`` (the ReplayAdapter) with ``_playback_models`` / ``_playback_tools`` / ``_playback_edits`` /
``_playback_keys``, and ``_executor`` (the CodeAgent executor on the injected sandbox).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opentelemetry.trace import TracerProvider

from causaltrace.config import TraceConfig
from causaltrace.exceptions import MissingExtraError
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents import _code, _patches, _runs, _tools, _turns
from causaltrace.instrumentation.smolagents._patches import Wrapper
from causaltrace.instrumentation.tracing import configure

__all__ = ["instrument_smolagents", "is_instrumented", "uninstrument_smolagents"]


def is_instrumented() -> bool:
    """Whether :func:`instrument_smolagents` is in force."""
    return _patches.is_patched()


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
    configure(tracer_provider, config)
    _patches.install(_patch_table)


def uninstrument_smolagents() -> None:
    """Undo :func:`instrument_smolagents` (idempotent); patches added for model and tool classes go too."""
    _patches.unpatch_all()


def _patch_table() -> Iterator[tuple[Any, str, Wrapper]]:
    """What is patched when instrumenting: ``(class or module, attribute, wrapper)``. The model and tool classes of
    an agent are patched when its first run starts (``_model_calls.patch_model_class``,
    ``_tools.patch_tool_classes``)."""
    s = acc.smol()
    from smolagents import local_python_executor

    yield from (
        (s.MultiStepAgent, "run", _runs.wrap_run),
        (s.MultiStepAgent, "_run_stream", _runs.wrap_run_stream),
        (s.MultiStepAgent, "__call__", _tools.wrap_agent_call),
        (s.MultiStepAgent, "_generate_planning_step", _turns.wrap_planning),
        (s.MultiStepAgent, "provide_final_answer", _turns.wrap_provide_final_answer),
        (s.ToolCallingAgent, "_step_stream", _turns.wrap_step_stream),
        (s.CodeAgent, "_step_stream", _turns.wrap_step_stream),
        (s.ToolCallingAgent, "execute_tool_call", _tools.wrap_execute_tool_call),
        (s.Tool, "__call__", _tools.wrap_tool_call),
        (local_python_executor, "timeout", _code.wrap_timeout),
    )


# ------------------------------------------------------------------------------------------------- playback


def _register_playback() -> None:
    """Register the playback side (``_playback.py``) in the ReplayAdapter registry (ARCHITECTURE "Package
    layout": adapters register by framework name when imported)."""
    from causaltrace.instrumentation.smolagents._playback import SmolagentsReplayAdapter
    from causaltrace.protocols import register_replay_adapter

    register_replay_adapter(SmolagentsReplayAdapter(instrument=_ensure_instrumented))


def _ensure_instrumented() -> None:
    """Instrument smolagents unless it is (a replay runs instrumented; the adapter gets this, never the facade)."""
    if not is_instrumented():
        instrument_smolagents()


_register_playback()
