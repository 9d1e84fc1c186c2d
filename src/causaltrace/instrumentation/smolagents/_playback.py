"""The playback side of the smolagents adapter: :class:`SmolagentsReplayAdapter` (ARCHITECTURE decisions 6–7,
"Shared contracts": Factory, ReplayAdapter, Intervention; FACTS.md "Replay by playback").

``build_playback(factory, recording, intervention, sandbox=..., run=...)`` builds a FRESH agent with the user's
factory and, on every agent of its tree (the manager and, recursively, its managed agents, keyed by the same
``/``-joined ``agent_key`` paths the recording uses), swaps in:

* **the model** — a :class:`PlaybackModel` wrapping the factory-built model. For each call it builds the canonical
  request exactly as the recording does (``_access.llm_request`` over the same arguments, call-id aliasing
  with the agent run's known ids, :func:`~causaltrace.schema.request_hash`) and looks up the recorded call at
  ``(agent_key, "llm", ordinal)``;
* **the tools** — copies (``agent.tools[name] = copy.copy(tool)`` with ``forward`` overridden; shared tool objects
  are never patched) that look up ``(agent_key, "tool", ordinal)`` the same way. Tool ordinals follow the
  recording's rule: a ToolCallingAgent's calls are numbered in the order of the model's response (reserved when the
  response comes back), code calls in the code's call order; the code execution itself takes one ordinal first;
* **the code executor** (CodeAgent) — ``agent.python_executor`` is replaced AFTER construction (smolagents refuses
  remote executors with managed agents only at construction, FACTS.md) by a persistent sandboxed Python worker per
  agent (ARCHITECTURE decision 7: ``PythonWorkerSession`` over the injected ``Sandbox``); the code's calls to tools,
  managed agents and ``final_answer`` come back to the parent over the worker's pipe and go through the playback
  tool copies. Without a sandbox (``sandbox=None``, a direct caller) the agent's own ``LocalPythonExecutor`` runs
  the code — not a security boundary (FACTS.md), logged as a warning.

Managed agents are RE-RUN, not served: their own models and tools are played back under their own keys, so
parallel managed agents are matched by (agent, call number within that agent, hash), never by a global order.

Matching (decision 6), per call at ``(agent_key, kind, ordinal)`` with request hash ``h``:

* the intervened call (its request must still match) returns the replacement;
* a call whose recorded entry STARTED before the intervened call (``start_order``) must match: a different hash, or
  a call the recording does not have while the intervention is not yet applied, is a ``ReplayDivergence`` whose
  text names the agent key, kind and ordinal and shows the first differing part of the canonical request. The
  first divergence is kept in the playback's log; every later model call raises it again, so the run stops and
  :meth:`SmolagentsReplayAdapter.run_playback` reports that FIRST divergence (a divergence inside a managed agent
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

Interventions (ARCHITECTURE "Intervention"; the step is a step of the original ``run``):

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

Package layering: ``instrumentation`` does not import ``replay``; the one exception is :func:`_open_python_session`,
which imports the sandbox's client-side ``PythonWorkerSession`` lazily, for the ``Sandbox`` that ``replay/`` injected.
"""

from __future__ import annotations

import ast
import asyncio
import contextvars
import copy
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from causaltrace.exceptions import ReplayDivergence, ReplayError, UserError
from causaltrace.instrumentation._playback_common import DivergenceLog, PlaybackAdapterBase
from causaltrace.instrumentation._playback_common import exception_of as _exception_of
from causaltrace.instrumentation._playback_common import first_difference as _first_difference
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._steps import _STATE
from causaltrace.schema import (
    Intervention,
    RecordedCall,
    Recording,
    Run,
    Step,
    StepError,
    canonical_json,
    canonicalize_request,
    request_hash,
)

__all__ = ["SmolPlayback", "SmolagentsReplayAdapter"]

logger = logging.getLogger("causaltrace")

#: The seed live API-model calls get during a replay (with temperature 0).
LIVE_SEED = 0
#: Memory limit and default timeout of a sandboxed CodeAgent worker.
WORKER_MEMORY_MB = 1024
WORKER_TIMEOUT_S = 30.0


# ------------------------------------------------------------------------------------------------ the target


@dataclass
class _Target:
    """The recorded call an intervention changes, and how.

    ``mode``: ``response`` (an llm call's response is ``transform(recorded message)``), ``result`` (a tool call
    returns ``value``), ``managed_result`` (a managed agent call answers ``value`` without running the agent) or
    ``args`` (a call made by running code is made with the arguments ``value``).
    """

    call: RecordedCall
    mode: str
    value: Any = None
    transform: Callable[[Any], Any] | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return self.call.key

    def label(self) -> str:
        return f"{self.call.agent_key} {self.call.kind} #{self.call.ordinal}"


@dataclass
class _CodeCall:
    """A call the running code makes, numbered by the parent-side function before it reaches the tool."""

    obj: Any
    key: str
    ordinal: int
    arguments: dict[str, Any]


#: The code call in progress in this context (read by the tool copy / managed agent the call reaches).
_CODE_CALL: contextvars.ContextVar[_CodeCall | None] = contextvars.ContextVar("causaltrace_smol_code_call",
                                                                             default=None)


@dataclass
class _Decision:
    action: str  # "serve" | "intervene" | "live"
    call: RecordedCall | None = None


# ------------------------------------------------------------------------------------------------ the log


@dataclass
class _Pending:
    name: str
    arguments: dict[str, Any]
    canonical: str
    ordinal: int
    claimed: bool = False


class PlaybackLog(DivergenceLog):
    """What one playback shares across its agents: the recording, the target, ordinal counters, reservations,
    counts and the divergences seen (the first one is the one reported)."""

    def __init__(self, recording: Recording, target: _Target | None, intervention: Intervention | None) -> None:
        self.recording = recording
        self.target = target
        self.intervention = intervention
        self.target_start = target.call.start_order if target is not None else None
        self.applied = False
        self.divergences: list[str] = []
        self.served = 0
        self.live = 0
        self.live_llm = 0
        self.live_before = 0
        self._ordinals: dict[tuple[str, str], int] = {}
        self._pending: dict[str, list[_Pending]] = {}
        self._lock = threading.RLock()

    # -- ordinals ------------------------------------------------------------------------------------------------

    def next_ordinal(self, key: str, kind: str) -> int:
        with self._lock:
            value = self._ordinals.get((key, kind), 0)
            self._ordinals[(key, kind)] = value + 1
            return value

    def reserve(self, key: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """A ToolCallingAgent response came back: number its tool calls in response order (as the recording)."""
        with self._lock:
            self._pending[key] = [
                _Pending(name, arguments, canonical_json(arguments), self.next_ordinal(key, "tool"))
                for name, arguments in calls
            ]

    def claim(self, key: str, name: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The ordinal (and the response's own arguments) of a tool call now running; a call no response announced
        takes the next ordinal."""
        text = canonical_json(arguments)
        with self._lock:
            pending = self._pending.get(key, [])
            for match in (lambda p: p.name == name and p.canonical == text, lambda p: p.name == name):
                for item in pending:
                    if not item.claimed and match(item):
                        item.claimed = True
                        return item.ordinal, item.arguments
            return self.next_ordinal(key, "tool"), arguments

    # -- matching ------------------------------------------------------------------------------------------------

    def decide(self, key: str, kind: str, ordinal: int, digest: str, canonical: Any, what: str) -> _Decision:
        """Serve, intervene or go live at ``(key, kind, ordinal)``; ReplayDivergence before the intervention."""
        self.check()
        rec = self.recording.find(key, kind, ordinal)
        target = self.target
        with self._lock:
            if target is not None and not self.applied and target.key == (key, kind, ordinal):
                if rec is not None and rec.request_hash != digest:
                    raise self.diverge(self._difference(rec, canonical, what, at_target=True))
                self.applied = True
                return _Decision("intervene", rec)
            applied = self.applied
        if rec is None:
            if applied:
                return _Decision("live")
            raise self.diverge(
                f"replay diverged at {key} {kind} #{ordinal} ({what}): the recording has no such call"
                + self._before_text()
                + f"; recorded agent keys: {sorted({c.agent_key for c in self.recording.calls})}"
            )
        before = self.target_start is None or rec.start_order < self.target_start
        if rec.request_hash == digest:
            if rec.live_only:
                return _Decision("live", rec)
            return _Decision("serve", rec)
        if before:
            raise self.diverge(self._difference(rec, canonical, what))
        return _Decision("live", rec)

    def _before_text(self) -> str:
        if self.target is None:
            return " (a pure playback: every call must match)"
        return f" before the intervened call ({self.target.label()})"

    def _difference(self, rec: RecordedCall, canonical: Any, what: str, *, at_target: bool = False) -> str:
        where = " at the intervened call" if at_target else self._before_text()
        path, recorded, replayed = _first_difference(rec.request, json.loads(canonical_json(canonical)))
        return (
            f"replay diverged at {rec.agent_key} {rec.kind} #{rec.ordinal} ({what}){where}: the request differs from "
            f"the recording at {path or '<root>'}: recorded {recorded} / replayed {replayed}"
        )

    # -- counts --------------------------------------------------------------------------------------------------

    def count(self, action: str, *, llm: bool = False) -> None:
        with self._lock:
            if action == "serve":
                self.served += 1
            elif action == "live":
                self.live += 1
                if llm:
                    self.live_llm += 1
                if not self.applied:
                    self.live_before += 1

    def stats(self, run_id: str) -> dict[str, Any]:
        with self._lock:
            divergence = self.divergences[0] if self.divergences else None
            if divergence is None and self.target is not None and not self.applied:
                divergence = f"the replay never reached the intervened call ({self.target.label()})"
            return {
                "of": run_id,
                "intervention": self.intervention.step_id if self.intervention is not None else None,
                "served": self.served,
                "live": self.live,
                "live_before_intervention": self.live_before,
                "deterministic": self.live_llm == 0,
                "divergence": divergence,
                "applied": self.applied,
            }


# --------------------------------------------------------------------------------------- agents and keys


def _walk(agent: Any, key: str) -> Iterator[tuple[str, Any]]:
    yield key, agent
    for name, managed in (getattr(agent, "managed_agents", None) or {}).items():
        yield from _walk(managed, f"{key}/{acc.agent_name(managed) or name}")


def _key_and_pattern(agent: Any, static_key: str) -> tuple[str, Any]:
    """The agent run's key and call-id pattern, read off the recording side's live state (exactly what the
    recording hashes with); without instrumentation, the static key and the ids in the agent's memory."""
    state = _STATE.get()
    if state is not None and state.agent is agent and not state.closed:
        return state.key, state.pattern()
    ids: list[str] = []
    for step in getattr(getattr(agent, "memory", None), "steps", None) or []:
        for tc in getattr(step, "tool_calls", None) or []:
            ids.append(str(getattr(tc, "id", "") or ""))
        for tc in getattr(getattr(step, "model_output_message", None), "tool_calls", None) or []:
            ids.append(str(getattr(tc, "id", "") or ""))
    return static_key, acc.call_id_pattern(ids)


# ------------------------------------------------------------------------------------------------ the model


def _model_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    from causaltrace.instrumentation import smolagents as hooks

    return hooks._model_args(args, kwargs)


class _ModelPlayback:
    """The logic of a playback model (shared by the streaming and non-streaming classes)."""

    def __init__(self, log: PlaybackLog, agent: Any, key: str, inner: Any, live_override: str | None) -> None:
        self.log = log
        self.agent = agent
        self.key = key
        self.inner = inner
        self.live_override = live_override
        self.live: Any = None  # LiteLLMModel(live_override), built at the first live call (litellm is slow to load)
        self._lock = threading.Lock()

    def decide(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[_Decision, str, dict[str, Any]]:
        key, pattern = _key_and_pattern(self.agent, self.key)
        self.log.check()
        messages, stop, response_format, tools, extra = _model_args(args, kwargs)
        request = acc.llm_request(messages or [], stop, response_format, tools, extra)
        canonical = canonicalize_request(request, call_id_pattern=pattern)
        ordinal = self.log.next_ordinal(key, "llm")
        decision = self.log.decide(key, "llm", ordinal, request_hash(canonical), canonical, "model call")
        return decision, key, request

    def response(self, decision: _Decision) -> Any:
        """The served or intervened message (a fresh copy), or raise the recorded error."""
        rec = decision.call
        assert rec is not None
        if decision.action == "intervene":
            target = self.log.target
            assert target is not None and target.transform is not None
            return target.transform(rec.decoded_response())
        self.log.count("serve")
        if rec.error is not None and rec.response is None:
            raise _exception_of(rec.error)
        return rec.decoded_response()

    def target(self) -> Any:
        """The model live calls go to: ``LiteLLMModel(live_override)`` when given, else the factory-built one."""
        if self.live_override is None:
            return self.inner
        with self._lock:
            if self.live is None:
                self.live = _live_override_model(self.live_override)
            return self.live

    def reserve(self, key: str, message: Any, request: dict[str, Any]) -> None:
        """A ToolCallingAgent action response: number its tool calls (unparsed text: at ``parse_tool_calls``)."""
        if not request.get("tools_to_call_from") or not acc.is_tool_calling_agent(self.agent):
            return
        if getattr(message, "tool_calls", None):
            self.log.reserve(key, _response_calls(message))


def _response_calls(message: Any) -> list[tuple[str, dict[str, Any]]]:
    from smolagents.models import parse_json_if_needed

    out = []
    for tc in getattr(message, "tool_calls", None) or []:
        fn = tc.function
        try:
            arguments = parse_json_if_needed(fn.arguments)
        except Exception:
            arguments = fn.arguments
        out.append((str(fn.name), acc.tool_arguments_from_call(arguments)))
    return out


_MODEL_CLASSES: dict[str, type] = {}
_CLASSES_LOCK = threading.Lock()


def _model_classes() -> tuple[type, type]:
    with _CLASSES_LOCK:
        if _MODEL_CLASSES:
            return _MODEL_CLASSES["plain"], _MODEL_CLASSES["stream"]
        from smolagents.models import Model

        class PlaybackModel(Model):
            """A smolagents Model that serves the recording (see the module docstring)."""

            def __init__(self, playback: _ModelPlayback) -> None:
                inner = playback.inner
                super().__init__(
                    model_id=getattr(inner, "model_id", None),
                    flatten_messages_as_text=getattr(inner, "flatten_messages_as_text", False),
                    tool_name_key=getattr(inner, "tool_name_key", "name"),
                    tool_arguments_key=getattr(inner, "tool_arguments_key", "arguments"),
                )
                self.kwargs = dict(getattr(inner, "kwargs", None) or {})
                self.playback = playback

            def generate(self, *args: Any, **kwargs: Any) -> Any:
                pb = self.playback
                decision, key, request = pb.decide(args, kwargs)
                if decision.action == "live":
                    pb.log.count("live", llm=not _is_deterministic(pb.target()))
                    message = pb.target().generate(*args, **kwargs)
                else:
                    message = pb.response(decision)
                pb.reserve(key, message, request)
                return message

            def parse_tool_calls(self, message: Any) -> Any:
                pb = self.playback
                parsed = pb.target().parse_tool_calls(message)
                key, _ = _key_and_pattern(pb.agent, pb.key)
                pb.log.reserve(key, _response_calls(parsed))
                return parsed

        class StreamingPlaybackModel(PlaybackModel):
            """:class:`PlaybackModel` for agents that stream (``stream_outputs=True``)."""

            def generate_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
                pb = self.playback
                decision, key, request = pb.decide(args, kwargs)
                if decision.action == "live":
                    pb.log.count("live", llm=not _is_deterministic(pb.target()))
                    deltas = []
                    for delta in pb.target().generate_stream(*args, **kwargs):
                        deltas.append(delta)
                        yield delta
                    from smolagents.models import agglomerate_stream_deltas

                    pb.reserve(key, agglomerate_stream_deltas(deltas), request)
                    return
                message = pb.response(decision)
                pb.reserve(key, message, request)
                yield from _as_deltas(message)

        _MODEL_CLASSES["plain"] = PlaybackModel
        _MODEL_CLASSES["stream"] = StreamingPlaybackModel
        return PlaybackModel, StreamingPlaybackModel


def _as_deltas(message: Any) -> Iterator[Any]:
    from smolagents.models import ChatMessageStreamDelta, ChatMessageToolCallFunction, ChatMessageToolCallStreamDelta

    calls = []
    for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
        arguments = tc.function.arguments
        calls.append(ChatMessageToolCallStreamDelta(
            index=i, id=tc.id, type=tc.type,
            function=ChatMessageToolCallFunction(
                name=tc.function.name,
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
            ),
        ))
    yield ChatMessageStreamDelta(content=message.content if isinstance(message.content, str) else None,
                                 tool_calls=calls or None, token_usage=message.token_usage)


def _prepare_live(model: Any) -> Any:
    """Temperature 0 and a seed on API models (they accept them; litellm drops what a provider rejects)."""
    try:
        from smolagents.models import ApiModel, LiteLLMModel
    except ImportError:  # pragma: no cover - smolagents without API models
        return model
    if isinstance(model, ApiModel) and isinstance(getattr(model, "kwargs", None), dict):
        model.kwargs["temperature"] = 0
        model.kwargs.setdefault("seed", LIVE_SEED)
        if isinstance(model, LiteLLMModel):
            model.kwargs.setdefault("drop_params", True)
    return model


def _live_override_model(name: str) -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never download the price map (FACTS.md)
    from smolagents import LiteLLMModel

    return _prepare_live(LiteLLMModel(model_id=name, temperature=0))


# ------------------------------------------------------------------------------------------------ the tools


def _tool_twin(tool: Any, log: PlaybackLog, agent: Any, key: str) -> Any:
    """A copy of ``tool`` whose ``forward`` serves the recording (the shared tool object is left alone)."""
    twin = copy.copy(tool)
    original = twin.forward  # bound to the twin (or the instance's own forward)
    name = str(getattr(tool, "name", type(tool).__name__))

    def forward(*args: Any, **kwargs: Any) -> Any:
        log.check()
        live_key, pattern = _key_and_pattern(agent, key)
        code_call = _CODE_CALL.get()
        if code_call is not None and code_call.obj is twin:
            ordinal, arguments = code_call.ordinal, code_call.arguments
        else:
            ordinal, arguments = log.claim(live_key, name, acc.call_arguments(twin, args, kwargs))
        canonical = canonicalize_request({"name": name, "arguments": arguments}, call_id_pattern=pattern)
        decision = log.decide(live_key, "tool", ordinal, request_hash(canonical), canonical, f"tool {name}")
        if decision.action == "intervene":
            target = log.target
            assert target is not None
            if target.mode == "result":
                return copy.deepcopy(target.value)
            decision = _Decision("live", decision.call)  # an "args" target was applied by the code call
        if decision.action == "serve":
            rec = decision.call
            assert rec is not None
            log.count("serve")
            if rec.error is not None and rec.response is None:
                raise _exception_of(_tool_error(rec.error, name))
            return rec.decoded_response()
        log.count("live")
        return original(*args, **kwargs)

    twin.forward = forward
    return twin


_TOOL_ERRORS = tuple(
    re.compile(
        r"^Error executing tool '(?P<name>[^']*)' with arguments " + arguments
        + r": (?P<type>[A-Za-z_][\w.]*): (?P<message>.*)\nPlease try again or use another tool$",
        re.DOTALL,
    )
    for arguments in (r"\{.*?\}", r".*?")  # a dict's repr first, then anything
)


def _tool_error(error: StepError, name: str) -> StepError:
    """The tool's own exception inside a recorded ToolCallingAgent error: the recording keeps the error
    ``execute_tool_call`` raised (``AgentToolExecutionError`` wrapping ``{type}: {message}``), while the playback
    raises inside the tool, where smolagents wraps it again into the very same text."""
    if error.type != "AgentToolExecutionError":
        return error
    match = next((m for m in (p.match(error.message) for p in _TOOL_ERRORS) if m is not None), None)
    if match is None or match.group("name") != name:
        return error
    return StepError(type=match.group("type").rsplit(".", 1)[-1], message=match.group("message"))


def _answering_class(cls: type, log: PlaybackLog, parent_key: str) -> type:
    """A subclass for the managed agent whose answer the intervention replaces: the intervened call answers the
    replacement without running the agent (its report is the replacement); other calls run it as usual."""

    def __call__(self: Any, task: str, **kwargs: Any) -> Any:
        code_call = _CODE_CALL.get()
        if code_call is None or code_call.obj is not self:
            arguments = {"task": acc.jsonable(task), **{str(k): acc.jsonable(v) for k, v in kwargs.items()}}
            ordinal, arguments = log.claim(parent_key, acc.agent_name(self), arguments)
            code_call = _CodeCall(self, parent_key, ordinal, arguments)
        token = _CODE_CALL.set(code_call)
        try:
            return super(subclass, self).__call__(task, **kwargs)
        finally:
            _CODE_CALL.reset(token)

    def run(self: Any, task: str, *args: Any, **kwargs: Any) -> Any:
        code_call = _CODE_CALL.get()
        target = log.target
        if (code_call is not None and code_call.obj is self and target is not None
                and target.key == (code_call.key, "tool", code_call.ordinal)):
            state = _STATE.get()  # the caller's run: the managed agent's own run has not started
            pattern = state.pattern() if state is not None and state.key == code_call.key else None
            canonical = canonicalize_request({"name": acc.agent_name(self), "arguments": code_call.arguments},
                                             call_id_pattern=pattern)
            decision = log.decide(code_call.key, "tool", code_call.ordinal, request_hash(canonical), canonical,
                                  f"managed agent {acc.agent_name(self)}")
            if decision.action == "intervene":
                return _report_answer(self, target.value)
        return super(subclass, self).run(task, *args, **kwargs)

    subclass = type(cls.__name__, (cls,), {"__call__": __call__, "run": run, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
    return subclass


def _report_answer(agent: Any, replacement: Any) -> Any:
    """The final answer that ``MultiStepAgent.__call__`` turns into ``replacement`` (its report template's prefix
    and suffix are stripped when the replacement carries them)."""
    text = replacement if isinstance(replacement, str) else json.dumps(replacement)
    try:
        from smolagents.agents import populate_template

        marker = "\x00causaltrace\x00"
        rendered = populate_template(agent.prompt_templates["managed_agent"]["report"],
                                     variables={"name": agent.name, "final_answer": marker})
        prefix, suffix = rendered.split(marker, 1)
    except Exception:
        return replacement
    if text.startswith(prefix) and text.endswith(suffix) and len(text) >= len(prefix) + len(suffix):
        return text[len(prefix): len(text) - len(suffix)]
    return replacement


# ------------------------------------------------------------------------------------------------ the code


def _code_callable(log: PlaybackLog, agent: Any, key: str, name: str) -> Callable[..., Any]:
    """The parent-side function the running code calls for ``name`` (a tool, a managed agent, final_answer)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        log.check()
        tools = getattr(agent, "tools", {}) or {}
        managed = getattr(agent, "managed_agents", {}) or {}
        obj = tools.get(name) if name in tools else managed.get(name)
        if obj is None:
            raise NameError(f"{name!r} is not a tool or managed agent of {acc.agent_name(agent)}")
        is_managed = name not in tools
        live_key, pattern = _key_and_pattern(agent, key)
        ordinal = log.next_ordinal(live_key, "tool")
        arguments = _code_arguments(obj, is_managed, args, kwargs)
        target = log.target
        if target is not None and target.mode == "args" and target.key == (live_key, "tool", ordinal):
            canonical = canonicalize_request({"name": name, "arguments": arguments}, call_id_pattern=pattern)
            log.decide(live_key, "tool", ordinal, request_hash(canonical), canonical, f"code call {name}")
            args, kwargs = (), dict(target.value)
            arguments = _code_arguments(obj, is_managed, args, kwargs)
        token = _CODE_CALL.set(_CodeCall(obj, live_key, ordinal, arguments))
        try:
            return obj(*args, **kwargs)
        finally:
            _CODE_CALL.reset(token)

    call.__name__ = call.__qualname__ = name
    return call


def _code_arguments(obj: Any, is_managed: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if is_managed:  # as the recording's managed-agent hook writes them
        task = args[0] if args else kwargs.get("task")
        out = {"task": acc.jsonable(task)}
        out.update({str(k): acc.jsonable(v) for k, v in kwargs.items() if k != "task"})
        return out
    return acc.call_arguments(obj, args, kwargs)


def _open_python_session(sandbox: Any, functions: Mapping[str, Callable[..., Any]], *, timeout_s: float,
                         memory_mb: int) -> Any:
    """A persistent sandboxed Python worker (ARCHITECTURE decision 7) — the one import of ``replay`` here (lazy; the
    sandbox itself was injected by ``replay/``)."""
    from causaltrace.replay.sandbox.session import PythonWorkerSession

    return PythonWorkerSession(sandbox, functions, timeout_s=timeout_s, memory_mb=memory_mb)


class _CodeError(Exception):
    """Code that failed in the sandbox, worded like smolagents' own executor errors."""


class SandboxedCodeExecutor:
    """A smolagents ``PythonExecutor`` for a CodeAgent during replay: the code runs in a persistent sandboxed worker
    (one per agent; variables persist between steps); tools, managed agents and ``final_answer`` are parent-side
    functions (:func:`_code_callable`). Without a sandbox it runs the agent's own ``LocalPythonExecutor``."""

    def __init__(self, log: PlaybackLog, agent: Any, key: str, sandbox: Any, *, timeout_s: float,
                 memory_mb: int, local: Any = None, recorded_stdout: Mapping[str, str] | None = None) -> None:
        self.log = log
        #: The recorded stdout of each code_execution step (served with a recorded error: smolagents reads it).
        self.recorded_stdout = dict(recorded_stdout or {})
        self.agent = agent
        self.key = key
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.local = local
        self.state: dict[str, Any] = {"_print_outputs": ""}
        self._functions: dict[str, Callable[..., Any]] = {}
        self._variables: dict[str, Any] = {}
        self._session: Any = None
        self.runs = 0

    # -- the PythonExecutor interface ---------------------------------------------------------------------------

    def send_tools(self, tools: Mapping[str, Any]) -> None:
        functions = {name: _code_callable(self.log, self.agent, self.key, name) for name in tools}
        if self._session is not None and set(functions) != set(self._functions):
            self.cleanup()
        self._functions = functions
        if self.local is not None:
            self.local.send_tools(functions)

    def send_variables(self, variables: Mapping[str, Any]) -> None:
        if self.local is not None:
            self.local.send_variables(variables)
            return
        plain = {}
        for name, value in variables.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                logger.warning("causaltrace replay: variable %r is not JSON and is not sent to the sandbox", name)
                continue
            plain[str(name)] = value
        self._variables.update(plain)
        if self._session is not None and plain:
            self._session.set_variables(plain)

    def __call__(self, code_action: str) -> Any:
        from smolagents.local_python_executor import CodeOutput

        log = self.log
        log.check()
        key, _ = _key_and_pattern(self.agent, self.key)
        ordinal = log.next_ordinal(key, "tool")
        canonical = canonicalize_request({"name": "python_interpreter", "arguments": {"code": code_action}})
        decision = log.decide(key, "tool", ordinal, request_hash(canonical), canonical, "code execution")
        error: BaseException | None = None
        output: Any = None
        try:
            output = self._execute(code_action)
        except _CodeError as exc:
            error = exc
        log.check()  # a divergence inside (a managed agent's) call-backs ends the step here
        rec = decision.call
        if decision.action == "serve" and rec is not None:
            if not log.applied:  # before the intervention: the recorded output (time, random, set order)
                log.count("serve")
                return self._recorded(rec, CodeOutput)
            if error is None and rec.error is None and _same_output(rec.decoded_response(), output):
                log.count("serve")
                return output
        log.count("live")
        if error is not None:
            raise error
        return output

    def cleanup(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                session.close()
            except Exception:  # closing a dead worker: nothing left to do
                logger.debug("causaltrace replay: closing the sandboxed worker failed", exc_info=True)

    # -- internals ------------------------------------------------------------------------------------------------

    def _recorded(self, rec: RecordedCall, code_output: type) -> Any:
        if rec.error is not None or rec.response is None:
            step_logs = self.recorded_stdout.get(rec.step_id or "", "")
            self.state["_print_outputs"] = step_logs
            if self.local is not None:
                self.local.state["_print_outputs"] = step_logs
            raise _exception_of(rec.error, "InterpreterError") if rec.error is not None else _CodeError(
                "the recorded code execution did not finish")
        return rec.decoded_response()

    def _execute(self, code: str) -> Any:
        self.runs += 1
        if self.local is not None:
            try:
                return self.local(code)
            except Exception as exc:
                self.state["_print_outputs"] = str(self.local.state.get("_print_outputs", ""))
                raise _CodeError(str(exc)) from exc
        from smolagents.local_python_executor import CodeOutput

        self._check_imports(code)
        if self._session is None:
            self._session = _open_python_session(self.sandbox, self._functions, timeout_s=self.timeout_s,
                                                 memory_mb=self.memory_mb)
            if self._variables:
                self._session.set_variables(self._variables)
        result = self._session.execute(_with_trailing_value(code))
        logs = str(result.get("stdout") or "")
        self.state["_print_outputs"] = logs
        if result.get("timed_out"):
            raise _CodeError(f"Code execution failed: the code did not finish within {self.timeout_s:g} seconds")
        if result.get("exit_code") not in (0, None) or result.get("error"):
            raise _CodeError(_error_text(code, result))
        if result.get("is_final_answer"):
            return CodeOutput(output=result.get("final_answer"), logs=logs, is_final_answer=True)
        return CodeOutput(output=result.get("output"), logs=logs, is_final_answer=False)

    def _check_imports(self, code: str) -> None:
        """smolagents' import rule, applied before the code reaches the sandbox (the sandbox would allow more)."""
        from smolagents.local_python_executor import check_import_authorized

        authorized = list(getattr(self.agent, "authorized_imports", None) or [])
        if not authorized or "*" in authorized:
            return
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return  # the worker reports it
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if not check_import_authorized(name, authorized):
                    line = ast.get_source_segment(code, node) or name
                    raise _CodeError(
                        f"Code execution failed at line '{line}' due to: InterpreterError: Import of {name} is not "
                        f"allowed. Authorized imports are: {authorized}"
                    )


def _same_output(recorded: Any, actual: Any) -> bool:
    try:
        return (bool(recorded.is_final_answer) == bool(actual.is_final_answer) and recorded.logs == actual.logs
                and recorded.output == actual.output)
    except Exception:
        return False


def _with_trailing_value(code: str) -> str:
    """LocalPythonExecutor reports the value of the last statement, an assignment included; the worker reports a
    trailing expression's value only — so a trailing assignment to one name is followed by that name."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    if not tree.body:
        return code
    last = tree.body[-1]
    target: ast.expr | None = None
    if isinstance(last, ast.Assign) and len(last.targets) == 1:
        target = last.targets[0]
    elif isinstance(last, (ast.AugAssign, ast.AnnAssign)) and getattr(last, "value", None) is not None:
        target = last.target
    if isinstance(target, ast.Name):
        return f"{code.rstrip()}\n{target.id}\n"
    return code


def _error_text(code: str, result: Mapping[str, Any]) -> str:
    trace = str(result.get("error") or result.get("stderr") or "").strip()
    last = trace.splitlines()[-1] if trace else f"exit code {result.get('exit_code')}"
    line = ""
    lines = code.splitlines()
    for text in reversed(trace.splitlines()):
        text = text.strip()
        if text.startswith('File "<cell') and ", line " in text:
            try:
                number = int(text.split(", line ", 1)[1].split(",", 1)[0])
            except ValueError:
                break
            if 1 <= number <= len(lines):
                line = lines[number - 1].strip()
            break
    where = f" at line '{line}'" if line else ""
    return f"Code execution failed{where} due to: {last}"


# --------------------------------------------------------------------------------------- interventions


def _dep(step: Step, kind: str, run: Run) -> Step | None:
    ids = step.deps_of_kind(kind)
    return run.step(ids[0]) if ids else None


def _resolve_target(run: Run | None, recording: Recording, intervention: Intervention | None,
                    agents: Mapping[str, Any]) -> _Target | None:
    """Map ``intervention.step_id`` (a step of ``run``) to the recorded call it changes (see the module table)."""
    if intervention is None:
        return None
    by_step = {c.step_id: c for c in recording.calls if c.step_id}
    value = intervention.replacement
    if run is None:  # the step must then be a recorded call's own step
        rec = by_step.get(intervention.step_id)
        if rec is None:
            raise UserError(f"step {intervention.step_id!r} is not a recorded call; pass run= to replay other steps")
        if rec.kind == "llm":
            return _Target(rec, "response", transform=_text_transform(value))
        return _Target(rec, "result", value=value)
    try:
        step = run.step(intervention.step_id)
    except KeyError:
        raise UserError(f"step {intervention.step_id!r} is not a step of run {run.run_id}") from None

    def llm_of(producer: Step | None) -> RecordedCall:
        if producer is None or producer.kind != "llm_response":
            raise UserError(f"cannot intervene on {step.kind} step {step.step_id}: no producing llm_response")
        rec = by_step.get(producer.step_id)
        if rec is None or rec.kind != "llm":
            raise UserError(f"llm_response {producer.step_id} has no recorded call (recorded with record=False?)")
        if rec.live_only or rec.response is None:
            raise UserError(f"the response of {rec.agent_key} llm #{rec.ordinal} was not recorded: cannot edit it")
        return rec

    def code_target(code_step: Step, code: Any) -> _Target:
        rec = llm_of(_dep(code_step, "produced_by", run))
        new_code = code.get("code") if isinstance(code, Mapping) else code
        if not isinstance(new_code, str):
            raise UserError(f"a code intervention needs the new code as a str, got {type(code).__name__}")
        agent = agents.get(rec.agent_key)
        return _Target(rec, "response", value=new_code, transform=_code_transform(agent, new_code))

    kind = step.kind
    if kind == "llm_response":
        rec = llm_of(step)
        return _Target(rec, "response", value=value, transform=_llm_transform(value))
    if kind in ("reasoning", "planning"):
        producer = _dep(step, "produced_by", run)
        rec = llm_of(producer)
        return _Target(rec, "response", value=value, transform=_segment_transform(step, value))
    if kind == "code_execution":
        call_step = _dep(step, "executes", run)
        if call_step is None:
            raise UserError(f"code_execution {step.step_id} has no tool_call it executes")
        return code_target(call_step, value)
    if kind == "tool_call":
        if step.tool_name == "python_interpreter":
            return code_target(step, value)
        producer = _dep(step, "produced_by", run)
        if producer is not None and producer.kind == "code_execution":
            rec = by_step.get(step.step_id)
            if rec is None:
                raise UserError(f"tool_call {step.step_id} has no recorded call")
            return _Target(rec, "args", value=_arguments(value))
        rec = llm_of(producer)
        return _Target(rec, "response", value=value, transform=_args_transform(step, _arguments(value)))
    if kind == "tool_response":
        call_step = _dep(step, "tool_result_of", run)
        rec = by_step.get(call_step.step_id) if call_step is not None else None
        if rec is None or rec.kind != "tool":
            raise UserError(f"tool_response {step.step_id} has no recorded tool call")
        if rec.settings.get("managed_agent"):
            return _Target(rec, "managed_result", value=value)
        return _Target(rec, "result", value=value)
    if kind == "final_answer":
        producer = _dep(step, "produced_by", run)
        if producer is not None and producer.kind == "code_execution":
            code = producer.inputs.get("code")
            if not isinstance(code, str):
                raise UserError(f"code_execution {producer.step_id} carries no code")
            call_step = _dep(producer, "executes", run)
            return code_target(call_step or producer, _final_answer_code(code, value))
        rec = llm_of(producer)
        return _Target(rec, "response", value=value, transform=_final_answer_transform(value))
    raise UserError(
        f"cannot intervene on a {kind!r} step in a smolagents replay (supported: llm_response, reasoning, planning, "
        "final_answer, tool_call, tool_response, code_execution)"
    )


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise UserError("a tool_call intervention needs the new arguments as a JSON object") from None
    if not isinstance(value, Mapping):
        raise UserError(f"a tool_call intervention needs the new arguments as a dict, got {type(value).__name__}")
    return dict(value)


def _set_content(message: Any, text: str) -> Any:
    message.content = text
    return message


def _text_transform(value: Any) -> Callable[[Any], Any]:
    return lambda message: _set_content(message, value if isinstance(value, str) else json.dumps(value))


def _llm_transform(value: Any) -> Callable[[Any], Any]:
    """An llm_response's new text, new tool calls (``[{name, arguments}]``) or ``{"text", "tool_calls"}``."""
    if isinstance(value, str):
        return _text_transform(value)
    text: Any = None
    calls: Any = None
    if isinstance(value, list):
        calls = value
    elif isinstance(value, Mapping):
        text, calls = value.get("text"), value.get("tool_calls")
    else:
        raise UserError(f"an llm_response intervention needs text or tool calls, got {type(value).__name__}")

    def apply(message: Any) -> Any:
        from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction

        if text is not None:
            message.content = text
        if calls is not None:
            old = list(message.tool_calls or [])
            message.tool_calls = [
                ChatMessageToolCall(
                    id=old[i].id if i < len(old) else f"call_replay_{i}",
                    type="function",
                    function=ChatMessageToolCallFunction(name=str(c["name"]), arguments=c.get("arguments") or {}),
                )
                for i, c in enumerate(calls)
            ] or None
        return message

    return apply


def _segment_transform(step: Step, value: Any) -> Callable[[Any], Any]:
    """Reasoning / plan: replace that segment of the response text (the step's text minus any wrapper around the
    response), keeping the rest (the code block, the tool calls)."""
    if not isinstance(value, str):
        raise UserError(f"a {step.kind} intervention needs the new text as a str")
    original = step.content

    def apply(message: Any) -> Any:
        content = acc.message_text(message)
        new = value
        at = original.find(content) if content else -1
        if content and at >= 0:  # the step wraps the response (a plan): unwrap the replacement the same way
            prefix, suffix = original[:at], original[at + len(content):]
            if new.startswith(prefix) and new.endswith(suffix) and len(new) >= len(prefix) + len(suffix):
                new = new[len(prefix): len(new) - len(suffix)]
            message.content = new
        elif original and original in content:
            message.content = content.replace(original, new, 1)
        else:
            message.content = new
        return message

    return apply


def _args_transform(step: Step, arguments: dict[str, Any]) -> Callable[[Any], Any]:
    def apply(message: Any) -> Any:
        calls = list(message.tool_calls or [])
        match = [tc for tc in calls if step.call_id is not None and str(tc.id) == step.call_id]
        if not match:
            match = [tc for tc in calls if tc.function.name == step.tool_name]
        if not match:
            raise ReplayError(f"the recorded response has no tool call {step.tool_name!r} ({step.call_id})")
        fn = match[0].function
        fn.arguments = json.dumps(arguments, ensure_ascii=False) if isinstance(fn.arguments, str) else dict(arguments)
        return message

    return apply


def _final_answer_transform(value: Any) -> Callable[[Any], Any]:
    def apply(message: Any) -> Any:
        calls = [tc for tc in (message.tool_calls or []) if tc.function.name == "final_answer"]
        if not calls:  # a forced final answer: the response text is the answer
            return _set_content(message, value if isinstance(value, str) else json.dumps(value))
        fn = calls[0].function
        args = fn.arguments
        parsed = json.loads(args) if isinstance(args, str) else args
        key = next(iter(parsed), "answer") if isinstance(parsed, Mapping) and len(parsed) == 1 else "answer"
        new = {key: value}
        fn.arguments = json.dumps(new, ensure_ascii=False) if isinstance(args, str) else new
        return message

    return apply


def _code_transform(agent: Any, code: str) -> Callable[[Any], Any]:
    tags = tuple(getattr(agent, "code_block_tags", None) or ("<code>", "</code>"))
    structured = bool(getattr(agent, "_use_structured_outputs_internally", False))

    def apply(message: Any) -> Any:
        content = acc.message_text(message)
        if structured:
            try:
                data = json.loads(content)
            except ValueError:
                data = None
            if isinstance(data, dict) and "code" in data:
                data["code"] = code
                return _set_content(message, json.dumps(data, ensure_ascii=False))
        return _set_content(message, _replace_code(content, code, tags))

    return apply


def _replace_code(content: str, code: str, tags: tuple[str, ...]) -> str:
    """The response text with the code between the code tags replaced (several blocks: the span from the first
    block's start to the last block's end); the whitespace around the code inside the tags is kept."""
    open_tag, close_tag = tags[0], tags[1]
    start = content.find(open_tag)
    if start < 0:
        return f"{content.rstrip()}\n{open_tag}\n{code.strip()}\n{close_tag}"
    inner_start = start + len(open_tag)
    last_open = content.rfind(open_tag)
    end = content.find(close_tag, last_open + len(open_tag))
    if end < 0:
        end = len(content)
    inner = content[inner_start:end]
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()):] if inner.strip() else ""
    return content[:inner_start] + lead + code.strip() + trail + content[end:]


def _final_answer_code(code: str, answer: Any) -> str:
    """The code with its one ``final_answer(...)`` call answering ``answer`` instead (else just that call)."""
    call = f"final_answer({answer!r})"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return call
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "final_answer"]
    if len(found) != 1 or found[0].end_lineno is None or found[0].end_col_offset is None:
        return call
    node = found[0]
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    start = offsets[node.lineno - 1] + node.col_offset
    end = offsets[node.end_lineno - 1] + node.end_col_offset
    return code[:start] + call + code[end:]


# ------------------------------------------------------------------------------------------------ the adapter


@dataclass
class SmolPlayback:
    """A built playback: the fresh agent with its playback parts, and the shared log."""

    agent: Any
    log: PlaybackLog
    agents: dict[str, Any]
    executors: list[SandboxedCodeExecutor] = field(default_factory=list)


class SmolagentsReplayAdapter(PlaybackAdapterBase):
    """The smolagents ``ReplayAdapter`` (registered by ``instrumentation/smolagents.py`` at import)."""

    framework = "smolagents"

    def _assemble(self, root: Any, recording: Recording, intervention: Intervention | None, sandbox: Any,
                  live_override: str | None, run: Run | None) -> SmolPlayback:
        s = acc.smol()
        if not isinstance(root, s.MultiStepAgent):
            raise UserError(f"the factory must return a smolagents agent, got {type(root).__name__}")
        agents = dict(_walk(root, acc.agent_name(root)))
        target = _resolve_target(run, recording, intervention, agents)
        log = PlaybackLog(recording, target, intervention)
        playback = SmolPlayback(root, log, agents)
        plain_cls, stream_cls = _model_classes()
        stdout = {s_.step_id: str(s_.outputs.get("stdout") or "") for s_ in (run.steps if run else ())
                  if s_.kind == "code_execution"}
        if sandbox is None and any(acc.is_code_agent(a) for a in agents.values()):
            logger.warning("causaltrace replay: no sandbox given; CodeAgent code runs in smolagents' "
                           "LocalPythonExecutor, which is not a security boundary")
        for key, agent in agents.items():
            inner = _prepare_live(agent.model)
            cls = stream_cls if callable(getattr(inner, "generate_stream", None)) else plain_cls
            agent.model = cls(_ModelPlayback(log, agent, key, inner, live_override))
            for name, tool in list(agent.tools.items()):
                agent.tools[name] = _tool_twin(tool, log, agent, key)
            if acc.is_code_agent(agent):
                original = getattr(agent, "python_executor", None)
                executor = SandboxedCodeExecutor(
                    log, agent, key, sandbox,
                    timeout_s=float(getattr(original, "timeout_seconds", None) or WORKER_TIMEOUT_S),
                    memory_mb=WORKER_MEMORY_MB,
                    local=original if sandbox is None else None, recorded_stdout=stdout,
                )
                agent.python_executor = executor  # after construction: smolagents checks only there (FACTS.md)
                playback.executors.append(executor)
        if target is not None and target.mode == "managed_result":
            managed = agents.get(f"{target.call.agent_key}/{target.call.request.get('name')}"
                                 if isinstance(target.call.request, dict) else "")
            if managed is None:
                raise UserError(f"the factory's agent has no managed agent for {target.label()}")
            managed.__class__ = _answering_class(type(managed), log, target.call.agent_key)
        return playback

    async def run_playback(self, playback: SmolPlayback, run: Run, *, verify: Any = None) -> Run:
        """Run the playback on ``run``'s task inside ``causaltrace.run(...)`` (traced and stored like any run) and
        return the new Run with ``metadata["replay"]``; the first divergence is raised as ``ReplayDivergence``."""
        return await asyncio.to_thread(self.run_playback_sync, playback, run, verify=verify)

    def run_playback_sync(self, playback: SmolPlayback, run: Run, *, verify: Any = None) -> Run:
        """:meth:`run_playback` for sync code."""
        from causaltrace.instrumentation._runtime import run as mark_run
        from causaltrace.instrumentation.smolagents import instrument_smolagents, is_instrumented

        if not is_instrumented():
            instrument_smolagents()
        task = run.task
        if task is None:
            first = next((s for s in run.steps if s.kind == "task"), None)
            task = first.content if first is not None else ""
        log = playback.log
        meta = {"replay": log.stats(run.run_id)}
        name = f"{run.name} (replay)" if run.name else "replay"
        try:
            with mark_run(task=task, verify=verify, name=name, metadata=meta) as handle:
                try:
                    playback.agent.run(task)
                except Exception as exc:  # the replayed run failed: its outcome says so (or a divergence below)
                    logger.info("causaltrace replay: the replayed run raised %s: %s", type(exc).__name__, exc)
                finally:
                    if handle.ctx is not None:
                        handle.ctx.metadata["replay"] = log.stats(run.run_id)
        finally:
            for executor in playback.executors:
                executor.cleanup()
        if log.divergences:
            raise ReplayDivergence(log.divergences[0])
        new_run = handle.run
        if new_run is None:
            raise ReplayError(f"the replay of run {run.run_id} produced no run")
        stats = new_run.metadata.get("replay")
        if isinstance(stats, dict) and stats.get("divergence") and not log.applied:
            raise ReplayDivergence(str(stats["divergence"]))
        return new_run


def _is_deterministic(model: Any) -> bool:
    """A model that declares ``deterministic = True`` (the reactive scripted models of ``causaltrace.testing``):
    its live calls do not make a replay nondeterministic, so one replay decides a flip (ARCHITECTURE)."""
    return getattr(model, "deterministic", False) is True
