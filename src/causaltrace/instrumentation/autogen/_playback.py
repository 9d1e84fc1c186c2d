"""The playback side of the AutoGen AgentChat adapter: :class:`AutogenReplayAdapter` (ARCHITECTURE decisions 6–7,
"Shared contracts": Factory, ReplayAdapter, Intervention; FACTS.md "Replay by playback").

``build_playback(factory, recording, intervention, sandbox=..., run=...)`` builds a FRESH team (or agent) with the
user's factory and, on every member of it — participants, nested teams, the agents and teams behind an
``AgentTool`` / ``TeamTool``, a ``SocietyOfMindAgent``'s inner team, a ``MessageFilterAgent``'s wrapped agent —
swaps in playback parts. Only the fresh objects' own attributes are reassigned; shared objects (a client or a
workbench used by several agents, module-level tools) are wrapped, never patched:

* **the model client** (an agent's, a ``SelectorGroupChat``'s, a ``MagenticOneGroupChat``'s orchestrator's) — a ``PlaybackChatCompletionClient`` wrapping the
  factory-built client and declaring the same ``model_info`` (FACTS.md: else the selector builds a different
  prompt). At ``create()`` / ``create_stream()`` entry — before the framework mutates the messages — it builds the
  canonical request exactly as the recording does (``_access.llm_request`` +
  :func:`~causaltrace.schema.canonicalize_request` + :func:`~causaltrace.schema.request_hash`) and looks up
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

Matching (decision 6), per call at ``(agent_key, kind, ordinal)`` with request hash ``h``:

* the intervened call (its request must still match) returns the replacement;
* a call whose recorded entry STARTED before the intervened call (``start_order``) must match: a different hash, or
  a call the recording does not have while the intervention is not applied yet, is a ``ReplayDivergence`` naming the
  agent key, kind and ordinal and showing the first differing part of the canonical request. The first divergence
  is kept in the playback's log and every later model or tool call raises it again (FACTS.md: an exception in a
  tool does not always stop an AutoGen run), and :meth:`AutogenReplayAdapter.run_playback` reports it;
* after it, a matching call is served from the recording and anything else runs live: the factory-built client
  (``temperature=0`` — and a ``seed`` for OpenAI clients — through ``extra_create_args`` when the client takes
  create arguments) or, only when ``live_override`` is given, a litellm-backed client; the real tool. The replay is
  ``deterministic`` (one replay decides a flip) unless a live call went to a client that does not declare
  ``deterministic = True`` (the reactive scripted clients of ``causaltrace.testing`` do; litellm models do not).

Served responses are fresh copies (:func:`~causaltrace.schema.decode_response` decodes anew). A served call made
before the intervened call is released only after every expected recorded call that FINISHED before it was released
(FACTS.md: GraphFlow fan-out — D sees B and C in the order they finished); a bounded wait, so a replay never hangs
on a call that will not come. A recorded tool call that had recorded calls nested inside it (an ``AgentTool`` or
``TeamTool``: the nested agent is re-run under its own keys, as smolagents' managed agents are) is always run; it
counts as served when its result equals the recorded one. Code always re-runs in the sandbox; before the
intervention the recorded output is returned (code reading the time or random numbers would otherwise diverge),
after it the actual output (served when equal to the recorded one, else live).

Interventions (ARCHITECTURE "Intervention"; the step is a step of the original ``run``):

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

Import: this module imports no AutoGen at import time (``instrumentation/autogen.py`` registers the adapter when it
is imported, and must import cleanly without the extra); the AutoGen subclasses are built on first use.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import inspect
import json
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from causaltrace.exceptions import ReplayDivergence, ReplayError, UserError
from causaltrace.instrumentation._playback_common import DivergenceLog, PlaybackAdapterBase
from causaltrace.instrumentation._playback_common import exception_of as _exception_of
from causaltrace.instrumentation._playback_common import first_difference as _first_difference
from causaltrace.instrumentation.autogen._access import (
    client_create_args,
    client_settings,
    llm_request,
    model_client_of,
    parse_arguments,
    participants_of,
    tool_request,
)
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

__all__ = ["AutogenPlayback", "AutogenReplayAdapter", "PlaybackLog"]

logger = logging.getLogger("causaltrace")

#: The seed live calls to OpenAI clients get during a replay (with temperature 0).
LIVE_SEED = 0
#: How long a served call waits for the recorded calls that finished before it (then it is released anyway).
RELEASE_WAIT_S = 5.0
#: Limits of one sandboxed code block during replay.
CODE_TIMEOUT_S = 60.0
CODE_MEMORY_MB = 512

_CODE_BLOCK = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)


# ------------------------------------------------------------------------------- private AutoGen attributes
# One accessor per private attribute (as in ``_access``); each degrades to a neutral value.


def _workbenches_of(agent: Any) -> list[Any]:
    """``AssistantAgent._workbench``: the agent's workbenches (a list)."""
    value = getattr(agent, "_workbench", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def _handoff_tools_of(agent: Any) -> list[Any]:
    """``AssistantAgent._handoff_tools``: the handoff tools built for this agent (fresh per agent)."""
    value = getattr(agent, "_handoff_tools", None)
    return list(value) if isinstance(value, list) else []


def _handoffs_of(agent: Any) -> dict[str, Any]:
    """``AssistantAgent._handoffs``: handoff name → ``HandoffBase`` (its ``target``)."""
    value = getattr(agent, "_handoffs", None)
    return dict(value) if isinstance(value, Mapping) else {}


def _code_executor_of(agent: Any) -> Any:
    """``CodeExecutorAgent._code_executor``."""
    return getattr(agent, "_code_executor", None)


def _tools_of(workbench: Any) -> list[Any]:
    """``StaticWorkbench._tools``: the tools of a static workbench (to reach AgentTool / TeamTool runners)."""
    value = getattr(workbench, "_tools", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def _runner_of(tool: Any) -> Any:
    """``TaskRunnerTool._task_runner``: the agent or team behind an AgentTool / TeamTool, else None."""
    return getattr(tool, "_task_runner", None)


def _inner_members(agent: Any) -> list[Any]:
    """What runs inside an agent's turn: a SocietyOfMindAgent's ``_team``, a MessageFilterAgent's
    ``_wrapped_agent``."""
    return [v for v in (getattr(agent, "_team", None), getattr(agent, "_wrapped_agent", None)) if v is not None]


def _manager_name_of(team: Any) -> str:
    """``BaseGroupChat._group_chat_manager_name`` (the selector's agent name, e.g. ``SelectorGroupChatManager``)."""
    value = getattr(team, "_group_chat_manager_name", None)
    return value if isinstance(value, str) and value else type(team).__name__ + "Manager"


# ------------------------------------------------------------------------------------------------ the target


@dataclass
class _Target:
    """The recorded call an intervention changes: an llm call whose response is ``transform(recorded)``
    (``mode="response"``) or a tool call that returns ``value`` (``mode="result"``)."""

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
class _Decision:
    action: str  # "serve" | "intervene" | "live" | "rerun"
    call: RecordedCall | None = None


@dataclass
class _Pending:
    call_id: str | None
    name: str
    arguments: dict[str, Any]
    canonical: str
    ordinal: int
    claimed: bool = False


@dataclass
class _CodeRecord:
    code: str
    stdout: str
    exit_code: int | None


# ------------------------------------------------------------------------------------------------ the log


class PlaybackLog(DivergenceLog):
    """What one playback shares across its agents: the recording, the target, ordinal counters, tool-call
    reservations, what was released, counts and the divergences seen (the first one is the one reported)."""

    def __init__(
        self,
        recording: Recording,
        target: _Target | None,
        intervention: Intervention | None,
        *,
        code: Mapping[str, list[_CodeRecord]] | None = None,
        user_inputs: Mapping[str, list[str]] | None = None,
    ) -> None:
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
        self.code_runs = 0
        self.code = {k: list(v) for k, v in (code or {}).items()}
        self.user_inputs = {k: list(v) for k, v in (user_inputs or {}).items()}
        self._ordinals: dict[tuple[str, str], int] = {}
        self._pending: dict[str, list[_Pending]] = {}
        self._released: set[int] = set()
        #: finish orders of the recorded calls that must happen before the intervened call, ascending, and the
        #: position of the first of them not released yet (a low-water mark: amortised O(1) per served call)
        self._expected = sorted(
            c.finish_order
            for c in recording.calls
            if c.finish_order is not None and (self.target_start is None or c.start_order < self.target_start)
        )
        self._first_unreleased = 0
        self._rerun = _calls_with_nested_calls(recording)
        self._lock = threading.RLock()

    # -- ordinals ------------------------------------------------------------------------------------------------

    def next_ordinal(self, key: str, kind: str) -> int:
        with self._lock:
            value = self._ordinals.get((key, kind), 0)
            self._ordinals[(key, kind)] = value + 1
            return value

    def reserve(self, key: str, result: Any) -> None:
        """A model response came back: number its tool calls in response order (as the recording does)."""
        content = getattr(result, "content", None)
        if not isinstance(content, list):
            return
        calls = [c for c in content if hasattr(c, "arguments") and hasattr(c, "name")]
        with self._lock:
            pending = self._pending.setdefault(key, [])
            pending[:] = [p for p in pending if not p.claimed]
            for call in calls:
                arguments = parse_arguments(call.arguments)
                pending.append(
                    _Pending(
                        getattr(call, "id", None),
                        str(call.name),
                        arguments,
                        canonical_json(arguments),
                        self.next_ordinal(key, "tool"),
                    )
                )

    def claim(self, key: str, name: str, call_id: str | None, arguments: Any) -> tuple[int, dict[str, Any]]:
        """The ordinal (and the response's own parsed arguments) of a tool call now running; a call no response
        announced takes the next ordinal."""
        parsed = parse_arguments(arguments if arguments is not None else {})
        text = canonical_json(parsed)
        with self._lock:
            pending = self._pending.get(key, [])
            matchers: tuple[Callable[[_Pending], bool], ...] = (
                lambda p: p.name == name and call_id is not None and p.call_id == call_id,
                lambda p: p.name == name and p.canonical == text,
                lambda p: p.name == name,
            )
            for match in matchers:
                for item in pending:
                    if not item.claimed and match(item):
                        item.claimed = True
                        return item.ordinal, item.arguments
            return self.next_ordinal(key, "tool"), parsed

    # -- matching ------------------------------------------------------------------------------------------------

    def decide(self, key: str, kind: str, ordinal: int, digest: str, canonical: Any, what: str) -> _Decision:
        """Serve, intervene, re-run or go live at ``(key, kind, ordinal)``; ReplayDivergence before the
        intervention."""
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
                + self.before_text()
                + f"; recorded agent keys: {sorted({c.agent_key for c in self.recording.calls})}"
            )
        before = self.target_start is None or rec.start_order < self.target_start
        if rec.request_hash == digest:
            if rec.live_only or _cancelled(rec.error):
                return _Decision("live", rec)
            if rec.key in self._rerun:
                return _Decision("rerun", rec)
            return _Decision("serve", rec)
        if before:
            raise self.diverge(self._difference(rec, canonical, what))
        return _Decision("live", rec)

    def before_text(self) -> str:
        if self.target is None:
            return " (a pure playback: every call must match)"
        return f" before the intervened call ({self.target.label()})"

    def _difference(self, rec: RecordedCall, canonical: Any, what: str, *, at_target: bool = False) -> str:
        where = " at the intervened call" if at_target else self.before_text()
        path, recorded, replayed = _first_difference(rec.request, json.loads(canonical_json(canonical)))
        return (
            f"replay diverged at {rec.agent_key} {rec.kind} #{rec.ordinal} ({what}){where}: the request differs from "
            f"the recording at {path or '<root>'}: recorded {recorded} / replayed {replayed}"
        )

    # -- release order -------------------------------------------------------------------------------------------

    def release(self, rec: RecordedCall | None) -> None:
        if rec is not None and rec.finish_order is not None:
            with self._lock:
                self._released.add(rec.finish_order)

    def _waiting(self, finish: int) -> bool:
        """Whether an expected recorded call that finished before ``finish`` has not been released yet."""
        with self._lock:
            expected, i = self._expected, self._first_unreleased
            while i < len(expected) and expected[i] in self._released:
                i += 1
            self._first_unreleased = i
            return i < len(expected) and expected[i] < finish

    async def wait_turn(self, rec: RecordedCall) -> None:
        """Hold a served call made before the intervention until every expected recorded call that finished before
        it was released (the recorded finish order); bounded by :data:`RELEASE_WAIT_S`."""
        if rec.finish_order is None or (self.target_start is not None and rec.start_order >= self.target_start):
            return
        deadline: float | None = None
        spins = 0
        while self._waiting(rec.finish_order) and not self.divergences:
            spins += 1
            if spins <= 50:
                await asyncio.sleep(0)
                continue
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + RELEASE_WAIT_S
            if now >= deadline:
                logger.info("causaltrace replay: %s %s #%d released before the calls that finished before it",
                            rec.agent_key, rec.kind, rec.ordinal)
                return
            await asyncio.sleep(0.002)

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

    def count_code_run(self) -> None:
        with self._lock:
            self.code_runs += 1

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
                "code_executions": self.code_runs,
            }


def _calls_with_nested_calls(recording: Recording) -> set[tuple[str, str, int]]:
    """Recorded tool calls inside which other calls were recorded (an AgentTool / TeamTool ran an agent): a nested
    call sits under the tool call's agent key, starts after it and finishes before it."""
    by_key: dict[str, list[RecordedCall]] = {}
    for c in sorted(recording.calls, key=lambda c: c.start_order):
        by_key.setdefault(c.agent_key, []).append(c)
    starts = {key: [c.start_order for c in calls] for key, calls in by_key.items()}
    out: set[tuple[str, str, int]] = set()
    for tool in recording.calls:
        if tool.kind != "tool" or tool.finish_order is None:
            continue
        prefix = tool.agent_key + "/"
        for key, calls in by_key.items():
            if not key.startswith(prefix):
                continue
            i = bisect.bisect_right(starts[key], tool.start_order)  # the key's first call after the tool started
            finish = calls[i].finish_order if i < len(calls) else None
            if finish is not None and finish < tool.finish_order:
                out.add(tool.key)
                break
    return out


def _cancelled(error: StepError | None) -> bool:
    return error is not None and error.type in ("Cancelled", "CancelledError")


# ---------------------------------------------------------------------------------------------- agent keys


def _name_of(obj: Any, default: str) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else default


def _is_team(obj: Any) -> bool:
    try:
        from autogen_agentchat.base import Team
    except ImportError:  # pragma: no cover - AutoGen is installed whenever an AutoGen run is replayed
        return bool(participants_of(obj))
    return isinstance(obj, Team)


def _walk(obj: Any, path: tuple[str, ...], seen: set[int] | None = None) -> Iterator[tuple[str, Any, bool]]:
    """``(static agent_key, member, is_team)`` for the root and everything that runs inside it, keyed by the
    recording's rule (``_hooks``): a team adds its name, an agent its name, and whatever runs inside an
    agent's turn (an AgentTool / TeamTool runner, a SocietyOfMind team, a wrapped agent) sits under that agent."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if _is_team(obj):
        here = (*path, _name_of(obj, "team"))
        yield "/".join(here), obj, True
        for member in participants_of(obj):
            yield from _walk(member, here, seen)
        return
    here = (*path, _name_of(obj, type(obj).__name__))
    yield "/".join(here), obj, False
    for workbench in _workbenches_of(obj):
        for tool in _tools_of(workbench):
            runner = _runner_of(tool)
            if runner is not None:
                yield from _walk(runner, here, seen)
    for inner in _inner_members(obj):
        yield from _walk(inner, here, seen)


def _live_key(static_key: str, *, manager: bool = False, fallback_name: str | None = None) -> str:
    """The agent key the recording side gives the call in flight (the current turn's or the selector manager's),
    read from its contextvars; the static key when the replay does not run instrumented."""
    try:
        from causaltrace.instrumentation import _runtime
        from causaltrace.instrumentation.autogen import _hooks as hooks
    except ImportError:  # pragma: no cover - AutoGen missing
        return static_key
    ctx = _runtime.current_run()
    if ctx is None:
        return static_key
    turn = hooks._TURN.get()
    if turn is not None and turn.ctx is ctx:
        return str(turn.key)
    mgr = hooks._MANAGER.get()
    if mgr is not None:
        return str(mgr.key)
    level = hooks._LEVEL.get()
    if level is not None and level.ctx is ctx and fallback_name is not None and not manager:
        return "/".join((*level.path, fallback_name))
    return static_key


# ------------------------------------------------------------------------------------------- the model client


class _ClientPlayback:
    """The logic of one agent's playback client (the AutoGen class around it is built lazily)."""

    def __init__(
        self, log: PlaybackLog, key: str, inner: Any, live_override: str | None, *, manager: bool = False
    ) -> None:
        self.log = log
        self.key = key
        self.inner = inner
        self.live_override = live_override
        self.manager = manager
        self.inner_name = type(inner).__name__
        self._override_client: Any = None

    def decide(self, messages: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[_Decision, str]:
        self.log.check()
        request = llm_request(
            messages,
            tools=kwargs.get("tools") or (),
            tool_choice=kwargs.get("tool_choice", "auto"),
            json_output=kwargs.get("json_output"),
            extra_create_args=kwargs.get("extra_create_args"),
        )
        canonical = canonicalize_request(request)
        key = _live_key(self.key, manager=self.manager, fallback_name=self.inner_name)
        ordinal = self.log.next_ordinal(key, "llm")
        return self.log.decide(key, "llm", ordinal, request_hash(canonical), canonical, "model call"), key

    async def response(self, decision: _Decision) -> Any:
        """The served or intervened CreateResult (a fresh copy), or raise the recorded error."""
        rec = decision.call
        assert rec is not None
        log = self.log
        if decision.action == "intervene":
            target = log.target
            assert target is not None and target.transform is not None
            log.release(rec)
            return target.transform(rec.decoded_response())
        await log.wait_turn(rec)
        log.check()
        log.count("serve")
        log.release(rec)
        if rec.error is not None and rec.response is None:
            raise _exception_of(rec.error)
        return rec.decoded_response()

    def live_client(self) -> Any:
        """Where live calls go: a litellm-backed client when ``live_override`` is given, else the factory's."""
        if self.live_override is None:
            return self.inner
        if self._override_client is None:
            self._override_client = _litellm_client_class()(self.live_override, model_info=self.inner.model_info)
        return self._override_client

    def live_kwargs(self, client: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The create arguments of a live call: temperature 0 (and a seed for OpenAI clients) where the client takes
        create arguments; the framework's own arguments otherwise unchanged."""
        out = dict(kwargs)
        if client is self.inner and client_create_args(client):
            extra = dict(out.get("extra_create_args") or {})
            extra.setdefault("temperature", 0)
            if "openai" in type(client).__module__:
                extra.setdefault("seed", LIVE_SEED)
            out["extra_create_args"] = extra
        return out


def _is_deterministic(client: Any) -> bool:
    """A client that declares ``deterministic = True`` (the reactive scripted clients of ``causaltrace.testing``):
    its live calls do not make a replay nondeterministic, so one replay decides a flip (ARCHITECTURE)."""
    return getattr(client, "deterministic", False) is True


_CLASSES: dict[str, type] = {}
_CLASSES_LOCK = threading.Lock()


def _client_class() -> type:
    with _CLASSES_LOCK:
        if "client" in _CLASSES:
            return _CLASSES["client"]
        from autogen_core.models import ChatCompletionClient, CreateResult, RequestUsage

        class PlaybackChatCompletionClient(ChatCompletionClient):
            """A ChatCompletionClient that serves the recording (see the module docstring); it declares the
            wrapped client's ``model_info`` and settings."""

            def __init__(self, playback: _ClientPlayback) -> None:
                self.playback = playback
                inner = playback.inner
                settings = client_settings(inner)
                #: what the recording side reads as this client's settings: the wrapped client's
                self._create_args = dict(client_create_args(inner))
                self.model = settings.get("model")
                self.temperature = settings.get("temperature")
                self._usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
                self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)

            def _account(self, result: Any) -> None:
                usage = getattr(result, "usage", None)
                if isinstance(usage, RequestUsage):
                    self._usage = usage
                    self._total = RequestUsage(
                        prompt_tokens=self._total.prompt_tokens + usage.prompt_tokens,
                        completion_tokens=self._total.completion_tokens + usage.completion_tokens,
                    )

            async def create(self, messages: Sequence[Any], **kwargs: Any) -> Any:
                pb = self.playback
                decision, key = pb.decide(messages, kwargs)
                if decision.action == "live":
                    client = pb.live_client()
                    pb.log.count("live", llm=not _is_deterministic(client))
                    try:
                        result = await client.create(messages, **pb.live_kwargs(client, kwargs))
                    finally:
                        pb.log.release(decision.call)
                else:
                    result = await pb.response(decision)
                pb.log.reserve(key, result)
                self._account(result)
                return result

            async def create_stream(self, messages: Sequence[Any], **kwargs: Any) -> Any:
                pb = self.playback
                decision, key = pb.decide(messages, kwargs)
                result = None
                if decision.action == "live":
                    client = pb.live_client()
                    pb.log.count("live", llm=not _is_deterministic(client))
                    try:
                        async for chunk in client.create_stream(messages, **pb.live_kwargs(client, kwargs)):
                            if isinstance(chunk, CreateResult):
                                result = chunk
                                pb.log.reserve(key, result)
                                self._account(result)
                            yield chunk
                    finally:
                        pb.log.release(decision.call)
                    return
                result = await pb.response(decision)
                pb.log.reserve(key, result)
                self._account(result)
                if isinstance(result.content, str) and result.content:
                    yield result.content
                yield result

            async def close(self) -> None:
                await self.playback.inner.close()

            def actual_usage(self) -> Any:
                return self._usage

            def total_usage(self) -> Any:
                return self._total

            def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
                return int(self.playback.inner.count_tokens(messages, **kwargs))

            def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
                return int(self.playback.inner.remaining_tokens(messages, **kwargs))

            @property
            def capabilities(self) -> Any:  # type: ignore[override]
                return self.playback.inner.capabilities

            @property
            def model_info(self) -> Any:
                return self.playback.inner.model_info

        _CLASSES["client"] = PlaybackChatCompletionClient
        return PlaybackChatCompletionClient


# ---------------------------------------------------------------------------------- live_override (litellm)


async def _acompletion(**kwargs: Any) -> Any:
    """``litellm.acompletion`` (imported on first use, with the price map read from the package: FACTS.md)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return await litellm.acompletion(**kwargs)


def _oai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """AutoGen LLMMessages → OpenAI chat messages (what litellm takes)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        kind = type(m).__name__
        content = getattr(m, "content", "")
        if kind == "SystemMessage":
            out.append({"role": "system", "content": str(content)})
        elif kind == "UserMessage":
            text = content if isinstance(content, str) else "\n".join(str(p) for p in content if isinstance(p, str))
            out.append({"role": "user", "content": text})
        elif kind == "AssistantMessage":
            if isinstance(content, str):
                out.append({"role": "assistant", "content": content})
            else:
                calls = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in content
                ]
                out.append({"role": "assistant", "content": getattr(m, "thought", None), "tool_calls": calls})
        elif kind == "FunctionExecutionResultMessage":
            for r in content:
                out.append({"role": "tool", "tool_call_id": r.call_id, "content": str(r.content)})
        else:
            out.append({"role": "user", "content": str(content)})
    return out


def _oai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        schema = tool if isinstance(tool, Mapping) else getattr(tool, "schema", {})
        function = {"name": schema.get("name"), "description": schema.get("description", "")}
        if schema.get("parameters") is not None:
            function["parameters"] = schema["parameters"]
        out.append({"type": "function", "function": function})
    return out


def _litellm_client_class() -> type:
    with _CLASSES_LOCK:
        if "litellm" in _CLASSES:
            return _CLASSES["litellm"]
        from autogen_core import FunctionCall
        from autogen_core.models import ChatCompletionClient, CreateResult, RequestUsage

        class LiteLLMChatCompletionClient(ChatCompletionClient):
            """The live client of a replay with ``live_override``: any litellm model, temperature 0, a seed."""

            def __init__(self, model: str, *, model_info: Any) -> None:
                self.model = model
                self._model_info = model_info
                self._usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
                self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)

            async def create(self, messages: Sequence[Any], **kwargs: Any) -> Any:
                args: dict[str, Any] = {
                    "model": self.model,
                    "messages": _oai_messages(messages),
                    "temperature": 0,
                    "seed": LIVE_SEED,
                    "drop_params": True,
                }
                tools = _oai_tools(kwargs.get("tools") or ())
                if tools:
                    args["tools"] = tools
                json_output = kwargs.get("json_output")
                if json_output is True:
                    args["response_format"] = {"type": "json_object"}
                elif isinstance(json_output, type):
                    args["response_format"] = json_output
                response = await _acompletion(**args)
                choice = response.choices[0]
                message = choice.message
                calls = getattr(message, "tool_calls", None) or []
                usage = getattr(response, "usage", None)
                self._usage = RequestUsage(
                    prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                    completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                )
                self._total = RequestUsage(
                    prompt_tokens=self._total.prompt_tokens + self._usage.prompt_tokens,
                    completion_tokens=self._total.completion_tokens + self._usage.completion_tokens,
                )
                if calls:
                    content: Any = [
                        FunctionCall(id=str(c.id), name=str(c.function.name), arguments=str(c.function.arguments))
                        for c in calls
                    ]
                    finish = "function_calls"
                else:
                    content = str(message.content or "")
                    reason = str(getattr(choice, "finish_reason", "stop") or "stop")
                    finish = reason if reason in ("stop", "length", "content_filter") else "unknown"
                return CreateResult(finish_reason=finish, content=content, usage=self._usage, cached=False)

            async def create_stream(self, messages: Sequence[Any], **kwargs: Any) -> Any:
                result = await self.create(messages, **kwargs)
                if isinstance(result.content, str) and result.content:
                    yield result.content
                yield result

            async def close(self) -> None:
                return None

            def actual_usage(self) -> Any:
                return self._usage

            def total_usage(self) -> Any:
                return self._total

            def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
                return sum(len(str(m.get("content") or "").split()) for m in _oai_messages(messages))

            def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
                return max(0, 100_000 - self.count_tokens(messages))

            @property
            def capabilities(self) -> Any:  # type: ignore[override]
                info = self._model_info
                return {k: info.get(k) for k in ("vision", "function_calling", "json_output")}

            @property
            def model_info(self) -> Any:
                return self._model_info

        _CLASSES["litellm"] = LiteLLMChatCompletionClient
        return LiteLLMChatCompletionClient


# ------------------------------------------------------------------------------------------------ the tools


class _ToolPlayback:
    """The logic of one agent's playback workbenches and handoff tools."""

    def __init__(self, log: PlaybackLog, key: str) -> None:
        self.log = log
        self.key = key

    def decide(self, name: str, arguments: Any, call_id: str | None) -> _Decision:
        log = self.log
        log.check()
        key = _live_key(self.key)
        ordinal, parsed = log.claim(key, name, call_id, arguments)
        canonical = canonicalize_request(tool_request(name, parsed))
        return log.decide(key, "tool", ordinal, request_hash(canonical), canonical, f"tool {name}")

    async def play(
        self,
        name: str,
        arguments: Any,
        call_id: str | None,
        run_live: Callable[[], Awaitable[Any]],
        wrap: Callable[[str, bool], Any],
        text_of_result: Callable[[Any], tuple[str, bool]],
    ) -> Any:
        """Serve, intervene, re-run or run live one tool call. ``wrap(text, is_error)`` builds the result the caller
        returns; ``text_of_result`` reads a live result back."""
        decision = self.decide(name, arguments, call_id)
        rec = decision.call
        log = self.log
        if decision.action == "intervene":
            target = log.target
            assert target is not None
            log.release(rec)
            value = target.value
            return wrap(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), False)
        if decision.action == "serve":
            assert rec is not None
            await log.wait_turn(rec)
            log.check()
            log.count("serve")
            log.release(rec)
            text, is_error = _recorded_tool_result(rec)
            return wrap(text, is_error)
        try:
            result = await run_live()
        finally:
            log.release(rec)
        if decision.action == "rerun" and rec is not None and text_of_result(result) == _recorded_tool_result(rec):
            log.count("serve")
        else:
            log.count("live")
        return result


def _recorded_tool_result(rec: RecordedCall) -> tuple[str, bool]:
    """``(content, is_error)`` of a recorded tool call (a FunctionExecutionResult, or the recorded exception)."""
    if rec.response is None and rec.error is not None:
        return rec.error.message, True
    value = rec.decoded_response()
    content = getattr(value, "content", value)
    return (content if isinstance(content, str) else str(content)), bool(getattr(value, "is_error", False))


def _workbench_classes() -> tuple[type, type]:
    with _CLASSES_LOCK:
        if "workbench" in _CLASSES:
            return _CLASSES["workbench"], _CLASSES["stream_workbench"]
        from autogen_core.tools import StaticStreamWorkbench, TextResultContent, ToolResult, Workbench

        def wrap(name: str) -> Callable[[str, bool], Any]:
            return lambda text, is_error: ToolResult(
                name=name, result=[TextResultContent(content=text)], is_error=is_error
            )

        def text_of_result(result: Any) -> tuple[str, bool]:
            return result.to_text(), bool(result.is_error)

        class _Delegating:
            _inner: Any

            async def list_tools(self) -> Any:
                return await self._inner.list_tools()

            async def start(self) -> None:
                await self._inner.start()

            async def stop(self) -> None:
                await self._inner.stop()

            async def reset(self) -> None:
                await self._inner.reset()

            async def save_state(self) -> Any:
                return await self._inner.save_state()

            async def load_state(self, state: Mapping[str, Any]) -> None:
                await self._inner.load_state(state)

        class PlaybackWorkbench(_Delegating, Workbench):
            """A workbench that serves the recorded tool results and runs the wrapped one otherwise."""

            def __init__(self, inner: Any, playback: _ToolPlayback) -> None:
                self._inner = inner
                self.playback = playback

            async def call_tool(
                self,
                name: str,
                arguments: Mapping[str, Any] | None = None,
                cancellation_token: Any = None,
                call_id: str | None = None,
            ) -> Any:
                return await self.playback.play(
                    name,
                    arguments,
                    call_id,
                    lambda: self._inner.call_tool(name, arguments, cancellation_token, call_id),
                    wrap(name),
                    text_of_result,
                )

            def call_tool_stream(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not a stream one
                raise NotImplementedError("a playback of a non-stream workbench has no call_tool_stream")

        class PlaybackStreamWorkbench(_Delegating, StaticStreamWorkbench):
            """:class:`PlaybackWorkbench` for a ``StaticStreamWorkbench`` (AssistantAgent streams its events)."""

            def __init__(self, inner: Any, playback: _ToolPlayback) -> None:
                super().__init__(tools=[])
                self._inner = inner
                self.playback = playback

            async def call_tool(
                self,
                name: str,
                arguments: Mapping[str, Any] | None = None,
                cancellation_token: Any = None,
                call_id: str | None = None,
            ) -> Any:
                return await self.playback.play(
                    name,
                    arguments,
                    call_id,
                    lambda: self._inner.call_tool(name, arguments, cancellation_token, call_id),
                    wrap(name),
                    text_of_result,
                )

            async def call_tool_stream(
                self,
                name: str,
                arguments: Mapping[str, Any] | None = None,
                cancellation_token: Any = None,
                call_id: str | None = None,
            ) -> Any:
                events: asyncio.Queue[Any] = asyncio.Queue()

                async def run_live() -> Any:
                    final = None
                    async for event in self._inner.call_tool_stream(name, arguments, cancellation_token, call_id):
                        if isinstance(event, ToolResult):
                            final = event
                        else:
                            events.put_nowait(event)
                    return final

                task = asyncio.ensure_future(
                    self.playback.play(name, arguments, call_id, run_live, wrap(name), text_of_result)
                )
                while not (task.done() and events.empty()):
                    getter = asyncio.ensure_future(events.get())
                    await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                    if getter.done():
                        yield getter.result()
                    else:
                        getter.cancel()
                yield task.result()

        _CLASSES["workbench"] = PlaybackWorkbench
        _CLASSES["stream_workbench"] = PlaybackStreamWorkbench
        return PlaybackWorkbench, PlaybackStreamWorkbench


def _playback_workbench(inner: Any, playback: _ToolPlayback) -> Any:
    plain, stream = _workbench_classes()
    from autogen_core.tools import StaticStreamWorkbench

    return (stream if isinstance(inner, StaticStreamWorkbench) else plain)(inner, playback)


def _handoff_twin(tool: Any, playback: _ToolPlayback) -> Any:
    """A copy of a handoff tool whose ``run_json`` plays the recording (``_execute_tool_call`` calls it directly)."""
    twin = copy.copy(tool)
    original = tool.run_json
    name = str(getattr(tool, "name", type(tool).__name__))

    async def run_json(args: Mapping[str, Any], cancellation_token: Any, call_id: str | None = None) -> Any:
        return await playback.play(
            name,
            dict(args),
            call_id,
            lambda: original(args, cancellation_token, call_id=call_id),
            lambda text, is_error: text,
            lambda result: (tool.return_value_as_string(result), False),
        )

    twin.run_json = run_json
    return twin


# ------------------------------------------------------------------------------------------------ the code


def _code_executor_class() -> type:
    with _CLASSES_LOCK:
        if "executor" in _CLASSES:
            return _CLASSES["executor"]
        from autogen_core.code_executor import CodeExecutor, CodeResult

        from causaltrace.instrumentation.autogen._executor import SandboxCodeExecutor

        class PlaybackCodeExecutor(CodeExecutor):
            """A CodeExecutorAgent's executor during replay: every block runs in the sandbox
            (:class:`SandboxCodeExecutor`); before the intervention the recorded output is returned."""

            def __init__(self, log: PlaybackLog, key: str, sandbox: Any, *, timeout_s: float) -> None:
                self.log = log
                self.key = key
                self.sandboxed = SandboxCodeExecutor(sandbox, timeout_s=timeout_s, memory_mb=CODE_MEMORY_MB)

            async def execute_code_blocks(self, code_blocks: list[Any], cancellation_token: Any) -> Any:
                log = self.log
                log.check()
                key = _live_key(self.key)
                ordinal = log.next_ordinal(key, "code")
                recorded = log.code.get(key, [])
                rec = recorded[ordinal] if ordinal < len(recorded) else None
                code = "\n\n".join(getattr(b, "code", str(b)) for b in code_blocks)
                if rec is not None and rec.code != code and not log.applied:
                    path, old, new = _first_difference(rec.code, code)
                    raise log.diverge(
                        f"replay diverged at {key} code #{ordinal} (code execution){log.before_text()}: the code "
                        f"differs from the recording at {path or '<root>'}: recorded {old} / replayed {new}"
                    )
                result = await self.sandboxed.execute_code_blocks(code_blocks, cancellation_token)
                log.count_code_run()
                if rec is not None and rec.code == code:
                    if not log.applied:  # the recorded output: code reading time or random numbers stays in step
                        log.count("serve")
                        return CodeResult(exit_code=rec.exit_code if rec.exit_code is not None else 1,
                                          output=rec.stdout)
                    if result.output == rec.stdout and result.exit_code == rec.exit_code:
                        log.count("serve")
                        return result
                log.count("live")
                return result

            async def start(self) -> None:
                await self.sandboxed.start()

            async def stop(self) -> None:
                await self.sandboxed.stop()

            async def restart(self) -> None:
                await self.sandboxed.restart()

        _CLASSES["executor"] = PlaybackCodeExecutor
        return PlaybackCodeExecutor


def _replace_code(text: str, code: str) -> str:
    """``text`` with the body of its Markdown code blocks replaced by ``code`` (several blocks: the span from the
    first block's body to the last block's end becomes one body); a text without a block gets one appended."""
    blocks = list(_CODE_BLOCK.finditer(text))
    body = code if code.endswith("\n") else code + "\n"
    if not blocks:
        return f"{text.rstrip()}\n```python\n{body}```"
    start = blocks[0].start(2)
    end = blocks[-1].end(2)
    return text[:start] + body + text[end:]


# --------------------------------------------------------------------------------------- interventions


def _dep(step: Step, kind: str, run: Run) -> Step | None:
    ids = step.deps_of_kind(kind)
    return run.step(ids[0]) if ids else None


def _set_text(result: Any, old: str | None, new: str) -> Any:
    """The CreateResult's text with ``old`` replaced by ``new`` where it occurs, else all of it."""
    content = result.content
    if not isinstance(content, str):
        raise UserError("the producing model response is a tool call, not text: intervene on its tool_call")
    if old and old in content and old != content:
        result.content = content.replace(old, new, 1)
    else:
        result.content = new
    return result


_FENCED_JSON = re.compile(r"```(?:[ \t]*json)?[ \t]*\n([\s\S]*?)```")


def _ledger_transform(field_name: str, value: str) -> Callable[[Any], Any]:
    """A MagenticOne progress ledger (the JSON object the orchestrator parses, bare or in a fenced block) with the
    ``answer`` of ``field_name`` (``next_speaker`` / ``instruction_or_question``) replaced by ``value``."""

    def apply(result: Any) -> Any:
        content = result.content
        if not isinstance(content, str):
            raise UserError("the producing model response is a tool call, not a progress ledger")
        fenced = _FENCED_JSON.search(content)
        raw = fenced.group(1) if fenced else content
        try:
            ledger = json.loads(raw)
        except ValueError:
            raise UserError("the producing model response is not a JSON progress ledger") from None
        entry = ledger.get(field_name) if isinstance(ledger, dict) else None
        if not isinstance(entry, dict):
            raise UserError(f"the progress ledger has no {field_name!r} entry")
        entry["answer"] = value
        new = json.dumps(ledger, ensure_ascii=False)
        result.content = content[: fenced.start(1)] + new + "\n" + content[fenced.end(1) :] if fenced else new
        return result

    return apply


def _function_calls(calls: Any, old: Any) -> list[Any]:
    from autogen_core import FunctionCall

    if not isinstance(calls, list):
        raise UserError("new tool calls must be a list of {name, arguments}")
    previous = list(old) if isinstance(old, list) else []
    out = []
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping) or not call.get("name"):
            raise UserError("each new tool call needs a name (and arguments)")
        arguments = call.get("arguments") or {}
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call_id = getattr(previous[i], "id", None) if i < len(previous) else None
        out.append(FunctionCall(id=str(call_id or f"replay-call-{i}"), name=str(call["name"]), arguments=raw))
    return out


def _llm_transform(value: Any) -> Callable[[Any], Any]:
    """An llm_response's new text, new tool calls (``[{name, arguments}]``) or ``{"text", "tool_calls"}``."""
    if isinstance(value, str):
        text, calls = value, None
    elif isinstance(value, list):
        text, calls = None, value
    elif isinstance(value, Mapping):
        text, calls = value.get("text"), value.get("tool_calls")
    else:
        raise UserError(f"an llm_response intervention needs text or tool calls, got {type(value).__name__}")

    def apply(result: Any) -> Any:
        if calls:
            result.content = _function_calls(calls, result.content)
            result.finish_reason = "function_calls"
            if text is not None:
                result.thought = str(text)
        elif text is not None:
            result.content = str(text)
            result.finish_reason = "stop"
        return result

    return apply


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise UserError("a tool_call intervention needs the new arguments as a JSON object") from None
    if not isinstance(value, Mapping):
        raise UserError(f"a tool_call intervention needs the new arguments as a dict, got {type(value).__name__}")
    return dict(value)


def _args_transform(step: Step, arguments: dict[str, Any]) -> Callable[[Any], Any]:
    def apply(result: Any) -> Any:
        calls = result.content if isinstance(result.content, list) else []
        match = [c for c in calls if step.call_id is not None and c.id == step.call_id and c.name == step.tool_name]
        match = match or [c for c in calls if c.name == step.tool_name]
        if not match:
            raise ReplayError(f"the recorded response has no tool call {step.tool_name!r} ({step.call_id})")
        match[0].arguments = json.dumps(arguments, ensure_ascii=False)
        return result

    return apply


def _handoff_transform(agent: Any, old_target: Any, new_target: str) -> Callable[[Any], Any]:
    handoffs = _handoffs_of(agent)
    names = {h.target: name for name, h in handoffs.items() if hasattr(h, "target")}
    if new_target not in names:
        raise UserError(
            f"agent {_name_of(agent, '?')!r} has no handoff to {new_target!r}; its handoff targets: {sorted(names)}"
        )
    old_name = names.get(str(old_target))

    def apply(result: Any) -> Any:
        calls = result.content if isinstance(result.content, list) else []
        match = [c for c in calls if c.name == old_name] or [c for c in calls if c.name in handoffs]
        if not match:
            raise ReplayError(f"the recorded response has no handoff call to {old_target!r}")
        match[0].name = names[new_target]
        return result

    return apply


def _resolve_target(
    run: Run | None, recording: Recording, intervention: Intervention | None, agents: Mapping[str, Any]
) -> _Target | None:
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
            return _checked(_Target(rec, "response", value=value, transform=_llm_transform(value)))
        return _Target(rec, "result", value=value)
    try:
        step = run.step(intervention.step_id)
    except KeyError:
        raise UserError(f"step {intervention.step_id!r} is not a step of run {run.run_id}") from None

    def llm_of(producer: Step | None, what: Step) -> RecordedCall:
        if producer is None or producer.kind != "llm_response":
            made_by = f"it was produced by a {producer.kind} step" if producer is not None else "no model produced it"
            raise UserError(f"cannot intervene on {what.kind} step {what.step_id}: {made_by}")
        rec = by_step.get(producer.step_id)
        if rec is None or rec.kind != "llm":
            raise UserError(f"llm_response {producer.step_id} has no recorded call (recorded with record=False?)")
        if rec.live_only or rec.response is None:
            raise UserError(f"the response of {rec.agent_key} llm #{rec.ordinal} was not recorded: cannot edit it")
        return rec

    def text_or_code(message: Step, old_text: str | None) -> _Target:
        rec = llm_of(_dep(message, "produced_by", run), message)
        if message.inputs.get("code") is not None:  # a code-bearing message: the replacement is the new code
            code = value.get("code") if isinstance(value, Mapping) else value
            if not isinstance(code, str):
                raise UserError(f"a code intervention needs the new code as a str, got {type(value).__name__}")
            return _Target(rec, "response", value=code, transform=lambda r: _set_text(r, None, _replace_code(
                r.content if isinstance(r.content, str) else "", code)))
        if not isinstance(value, str):
            raise UserError(f"a {step.kind} intervention needs the new text as a str, got {type(value).__name__}")
        return _Target(rec, "response", value=value, transform=lambda r: _set_text(r, old_text, value))

    kind = step.kind
    ledger_field = step.metadata.get("ledger_field")  # a MagenticOne orchestrator's decision: its JSON ledger
    if ledger_field in ("next_speaker", "instruction_or_question") and kind in ("speaker_selection", "message"):
        rec = llm_of(_dep(step, "produced_by", run), step)
        if not isinstance(value, str):
            raise UserError(f"a {kind} intervention needs a str (the new speaker's name or instruction)")
        return _checked(_Target(rec, "response", value=value, transform=_ledger_transform(str(ledger_field), value)))
    if kind == "llm_response":
        rec = llm_of(step, step)
        return _checked(_Target(rec, "response", value=value, transform=_llm_transform(value)))
    if kind == "message":
        return _checked(text_or_code(step, step.content))
    if kind == "planning":  # a MagenticOne task ledger: the plan call that wrote it gets the new plan
        rec = llm_of(_dep(step, "produced_by", run), step)
        if not isinstance(value, str):
            raise UserError("a planning intervention needs the new plan as a str")
        return _checked(_Target(rec, "response", value=value, transform=lambda r: _set_text(r, None, value)))
    if kind == "final_answer":
        message = _dep(step, "answer_of", run)
        if message is None:
            raise UserError(f"final_answer {step.step_id} is not the answer of a message")
        return _checked(text_or_code(message, step.content))
    if kind == "reasoning":
        rec = llm_of(_dep(step, "produced_by", run), step)
        if not isinstance(value, str):
            raise UserError("a reasoning intervention needs the new text as a str")

        def thought(result: Any) -> Any:
            result.thought = value
            return result

        return _checked(_Target(rec, "response", value=value, transform=thought))
    if kind == "tool_call":
        rec = llm_of(_dep(step, "produced_by", run), step)
        return _checked(_Target(rec, "response", value=value, transform=_args_transform(step, _arguments(value))))
    if kind == "tool_response":
        call_step = _dep(step, "tool_result_of", run)
        rec = by_step.get(call_step.step_id) if call_step is not None else None
        if rec is None or rec.kind != "tool":
            raise UserError(f"tool_response {step.step_id} has no recorded tool call")
        return _Target(rec, "result", value=value)
    if kind == "handoff":
        rec = llm_of(_dep(step, "produced_by", run), step)
        if not isinstance(value, str):
            raise UserError("a handoff intervention needs the new target agent's name as a str")
        agent = agents.get(rec.agent_key)
        if agent is None:
            raise UserError(f"the factory's team has no agent {rec.agent_key!r}")
        transform = _handoff_transform(agent, step.outputs.get("target"), value)
        return _checked(_Target(rec, "response", value=value, transform=transform))
    if kind == "speaker_selection":
        rec = llm_of(_dep(step, "produced_by", run), step)
        if not isinstance(value, str):
            raise UserError("a speaker_selection intervention needs the new speaker's name as a str")

        def select(result: Any) -> Any:
            result.content = value
            return result

        return _checked(_Target(rec, "response", value=value, transform=select))
    if kind == "code_execution":
        carrier = _dep(step, "executes", run)
        if carrier is None:
            raise UserError(f"code_execution {step.step_id} has no step carrying its code")
        if carrier.kind == "llm_response":
            rec = llm_of(carrier, step)
            code = value.get("code") if isinstance(value, Mapping) else value
            if not isinstance(code, str):
                raise UserError(f"a code intervention needs the new code as a str, got {type(value).__name__}")
            return _checked(_Target(rec, "response", value=code, transform=lambda r: _set_text(
                r, None, _replace_code(r.content if isinstance(r.content, str) else "", code))))
        if carrier.kind == "message" and carrier.inputs.get("code") is not None:
            return _checked(text_or_code(carrier, None))
        raise UserError(f"code_execution {step.step_id}: its code came from a {carrier.kind} step no model produced")
    raise UserError(
        f"cannot intervene on a {kind!r} step in an AutoGen replay (supported: llm_response, message, reasoning, "
        "final_answer, tool_call, tool_response, handoff, speaker_selection, code_execution, planning)"
    )


def _checked(target: _Target) -> _Target:
    """Apply the transform once to a copy of the recorded response, so a replacement that cannot apply is a
    UserError now rather than an error in the middle of the replay."""
    if target.transform is not None:
        try:
            target.transform(target.call.decoded_response())
        except ReplayError as exc:
            raise UserError(exc.message) from exc
    return target


# ------------------------------------------------------------------------------------------------ the adapter


@dataclass
class AutogenPlayback:
    """A built playback: the fresh team (or agent) with its playback parts, and the shared log."""

    team: Any
    log: PlaybackLog
    agents: dict[str, Any]
    clients: list[Any] = field(default_factory=list)


def _recorded_code(run: Run | None) -> dict[str, list[_CodeRecord]]:
    """Per agent key, the code executions of the original run (code, stdout, exit code), in order."""
    out: dict[str, list[_CodeRecord]] = {}
    if run is None:
        return out
    by_id = {s.step_id: s for s in run.steps}
    for step in run.steps:
        if step.kind != "code_execution":
            continue
        turn = by_id.get(step.parent_step_id or "")
        key = turn.metadata.get("agent_key") if turn is not None else None
        if not isinstance(key, str):
            continue
        exit_code = step.outputs.get("exit_code")
        out.setdefault(key, []).append(
            _CodeRecord(
                code=str(step.inputs.get("code") or ""),
                stdout=str(step.outputs.get("stdout") or ""),
                exit_code=exit_code if isinstance(exit_code, int) else None,
            )
        )
    return out


def _recorded_inputs(run: Run | None) -> dict[str, list[str]]:
    """Per agent key, what a UserProxyAgent answered in the original run, in order."""
    out: dict[str, list[str]] = {}
    if run is None:
        return out
    by_id = {s.step_id: s for s in run.steps}
    for step in run.steps:
        if step.kind != "message" or step.metadata.get("user_input") is not True:
            continue
        turn = by_id.get(step.parent_step_id or "")
        key = turn.metadata.get("agent_key") if turn is not None else None
        if isinstance(key, str):
            out.setdefault(key, []).append(str(step.outputs.get("text", step.content)))
    return out


def _input_twin(original: Callable[..., Any], log: PlaybackLog, key: str) -> Callable[..., Any]:
    """A UserProxyAgent input function answering what the user answered in the original run, then asking."""

    def recorded() -> str | None:
        queue = log.user_inputs.get(_live_key(key), [])
        if queue:
            log.count("serve")
            return queue.pop(0)
        return None

    if inspect.iscoroutinefunction(original):

        async def ask_async(prompt: str, cancellation_token: Any = None) -> str:
            answer = recorded()
            if answer is not None:
                return answer
            log.count("live")
            return str(await original(prompt, cancellation_token))

        return ask_async

    def ask(prompt: str) -> str:
        answer = recorded()
        if answer is not None:
            return answer
        log.count("live")
        return str(original(prompt))

    return ask


class AutogenReplayAdapter(PlaybackAdapterBase):
    """The AutoGen ``ReplayAdapter`` (registered by ``instrumentation/autogen.py`` at import)."""

    framework = "autogen"

    def _assemble(
        self,
        root: Any,
        recording: Recording,
        intervention: Intervention | None,
        sandbox: Any,
        live_override: str | None,
        run: Run | None,
    ) -> AutogenPlayback:
        if not callable(getattr(root, "run", None)) or not (
            _is_team(root) or hasattr(root, "on_messages_stream")
        ):
            raise UserError(f"the factory must return an AutoGen team or agent, got {type(root).__name__}")
        members = list(_walk(root, ()))
        agents = {key: obj for key, obj, _ in members}
        target = _resolve_target(run, recording, intervention, agents)
        log = PlaybackLog(recording, target, intervention, code=_recorded_code(run), user_inputs=_recorded_inputs(run))
        playback = AutogenPlayback(root, log, agents)
        client_cls = _client_class()
        from autogen_agentchat.agents import UserProxyAgent
        from autogen_agentchat.teams import MagenticOneGroupChat, SelectorGroupChat

        for key, obj, is_team in members:
            client = model_client_of(obj)
            if isinstance(client, client_cls):
                raise UserError("the factory must build a FRESH team on every call (this one is already played back)")
            if client is not None:
                if is_team and isinstance(obj, (SelectorGroupChat, MagenticOneGroupChat)):  # the manager's key
                    pb = _ClientPlayback(log, f"{key}/{_manager_name_of(obj)}", client, live_override, manager=True)
                elif is_team:  # another team's own client: keyed by the client's class (the recording's rule)
                    pb = _ClientPlayback(log, f"{key}/{type(client).__name__}", client, live_override)
                else:
                    pb = _ClientPlayback(log, key, client, live_override)
                wrapped = client_cls(pb)
                obj._model_client = wrapped
                playback.clients.append(wrapped)
            if is_team:
                continue
            tools = _ToolPlayback(log, key)
            workbenches = _workbenches_of(obj)
            if workbenches:
                obj._workbench = [_playback_workbench(wb, tools) for wb in workbenches]
            handoff_tools = _handoff_tools_of(obj)
            if handoff_tools:
                obj._handoff_tools = [_handoff_twin(t, tools) for t in handoff_tools]
            executor = _code_executor_of(obj)
            if executor is not None:
                timeout = getattr(executor, "timeout", None)
                obj._code_executor = _code_executor_class()(
                    log, key, sandbox, timeout_s=float(timeout) if isinstance(timeout, (int, float)) else CODE_TIMEOUT_S
                )
            if isinstance(obj, UserProxyAgent):
                obj.input_func = _input_twin(obj.input_func, log, key)
        return playback

    async def run_playback(self, playback: AutogenPlayback, run: Run, *, verify: Any = None) -> Run:
        """Run the playback on ``run``'s task inside ``causaltrace.run(...)`` (traced and stored like any run) and
        return the new Run with ``metadata["replay"]``; the first divergence is raised as ``ReplayDivergence``."""
        from causaltrace.instrumentation._runtime import run as mark_run
        from causaltrace.instrumentation.autogen import instrument_autogen, is_instrumented

        if not is_instrumented():
            instrument_autogen()
        task = run.task
        if task is None:
            first = next((s for s in run.steps if s.kind == "task"), None)
            task = first.content if first is not None else ""
        log = playback.log
        name = f"{run.name} (replay)" if run.name else "replay"
        async with mark_run(task=task, verify=verify, name=name, metadata={"replay": log.stats(run.run_id)}) as handle:
            try:
                await playback.team.run(task=task)
            except Exception as exc:  # the replayed run failed: its outcome says so (or a divergence below)
                logger.info("causaltrace replay: the replayed run raised %s: %s", type(exc).__name__, exc)
            finally:
                if handle.ctx is not None:
                    handle.ctx.metadata["replay"] = log.stats(run.run_id)
        if log.divergences:
            raise ReplayDivergence(log.divergences[0])
        new_run = handle.run
        if new_run is None:
            raise ReplayError(f"the replay of run {run.run_id} produced no run")
        stats = new_run.metadata.get("replay")
        if isinstance(stats, dict) and stats.get("divergence") and not log.applied:
            raise ReplayDivergence(str(stats["divergence"]))
        return new_run
