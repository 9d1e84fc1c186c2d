"""The framework-neutral playback core (ARCHITECTURE decision 6; FACTS.md "Replay by playback").

One :class:`Playback` per replay holds what its agents share: the original run and its recording, the resolved
:class:`~causaltrace.protocols.CallEdit`, ordinal counters, tool-call reservations, the recorded finish order, the
counts and the divergences seen. The framework adapters (``instrumentation/autogen``, ``instrumentation/smolagents``)
receive it through the :class:`~causaltrace.protocols.PlaybackCore` protocol and only build their framework's
playback objects around it; nothing here is kept at module level, so several replays can run at once.

Matching, per call at ``(agent_key, kind, ordinal)`` with request hash ``h`` (:meth:`Playback.decide`):

* the intervened call (its request must still match) is ``intervene``;
* a call whose recorded entry STARTED before the intervened call (``start_order``) must match: a different hash, or
  a call the recording does not have while the edit is not applied yet, is a ``ReplayDivergence`` naming the agent
  key, kind and ordinal and showing the first differing part of the canonical request. The first divergence is
  kept; every later call raises it again (a divergence inside a nested agent must not surface later as another
  error) and :meth:`Playback.finish` reports it;
* after it, a matching call is ``serve`` (``live`` when the recording could not keep its response or the recorded
  call was cancelled; ``rerun`` for a recorded tool call with recorded calls nested inside it — an AgentTool or
  TeamTool runs its agent again under its own keys), anything else ``live``.

Ordinals follow the recording's rule: llm ordinals count per key; tool ordinals are reserved in the order of the
calls in the model's response (:meth:`Playback.reserve`, when the response comes back) and claimed when the tool
runs (:meth:`Playback.claim`, by call id, then name and arguments, then name), so parallel calls keep their numbers.
A served call made before the intervened call is released only after every recorded call that FINISHED before it
(:meth:`Playback.wait_turn`; FACTS.md: GraphFlow fan-out), a bounded wait.

:func:`resolve_edit` is the neutral half of an intervention: from the intervened step to the recorded call and the
slot and part it edits (see its table). What a replacement of a step IS (``replacement_kind``), its original value
and the code a step carries live in :mod:`causaltrace.replay.edits`, which repair and the proposals ask too.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from causaltrace.exceptions import ReplayDivergence, ReplayError, UserError
from causaltrace.protocols import CallEdit, PlaybackDecision, ReplayAdapter
from causaltrace.recording import canonical_json
from causaltrace.replay.edits import resolve_edit
from causaltrace.schema import Intervention, RecordedCall, Recording, Run, StepError

__all__ = ["RELEASE_WAIT_S", "Playback", "calls_with_nested_calls", "first_difference", "playback_for", "resolve_edit"]

logger = logging.getLogger("causaltrace")

#: How long a served call waits for the recorded calls that finished before it (then it is released anyway).
RELEASE_WAIT_S = 5.0


@dataclass
class _Pending:
    """A tool call announced by a model response, waiting for the tool to run (and claim its ordinal)."""

    call_id: str | None
    name: str
    arguments: dict[str, Any]
    canonical: str
    ordinal: int
    claimed: bool = False


class Playback:
    """The playback core of one replay (implements :class:`~causaltrace.protocols.PlaybackCore`)."""

    def __init__(
        self,
        run: Run,
        edit: CallEdit | None = None,
        *,
        intervention: Intervention | None = None,
        live_override: str | None = None,
    ) -> None:
        if run.recording is None:
            raise UserError(f"run {run.run_id} has no recording: it cannot be played back")
        self.run = run
        self.recording: Recording = run.recording
        self.edit = edit
        self.intervention = intervention
        self.live_override = live_override
        self.target_start = edit.call.start_order if edit is not None else None
        self.applied = False
        self.divergences: list[str] = []
        self.served = 0
        self.live = 0
        self.live_llm = 0
        self.live_before = 0
        self.code_runs = 0
        self._transform: Callable[[Any], Any] | None = None
        self._ordinals: dict[tuple[str, str], int] = {}
        self._pending: dict[str, list[_Pending]] = {}
        self._released: set[int] = set()
        #: finish orders of the recorded calls that must happen before the intervened call, ascending, and the
        #: position of the first of them not released yet (a low-water mark: amortised O(1) per served call)
        self._expected = sorted(
            c.finish_order
            for c in self.recording.calls
            if c.finish_order is not None and (self.target_start is None or c.start_order < self.target_start)
        )
        self._first_unreleased = 0
        self._rerun = calls_with_nested_calls(self.recording)
        self._lock = threading.RLock()

    # -- the edit ------------------------------------------------------------------------------------------------

    def bind(self, transform: Callable[[Any], Any] | None) -> None:
        """Set the framework's transform of the edited response, applied once now to a copy of the recorded
        response, so a replacement that cannot apply is a UserError before the replay rather than in its middle."""
        if transform is not None and self.edit is not None:
            try:
                transform(self.edit.call.decoded_response())
            except ReplayError as exc:
                raise UserError(exc.message) from exc
        self._transform = transform

    def edited_response(self, call: RecordedCall) -> Any:
        """The recorded response of the intervened call with the edit applied (a fresh copy)."""
        if self._transform is None:
            raise ReplayError(f"no edit transform was bound for {call.agent_key} {call.kind} #{call.ordinal}")
        return self._transform(call.decoded_response())

    # -- divergences ---------------------------------------------------------------------------------------------

    def check(self) -> None:
        """Raise the first divergence again (the run must stop at it)."""
        if self.divergences:
            raise ReplayDivergence(self.divergences[0])

    def diverge(self, message: str) -> ReplayDivergence:
        """Note a divergence; returns the exception of the FIRST one."""
        with self._lock:
            self.divergences.append(message)
            first = self.divergences[0]
        logger.info("causaltrace replay: %s", message)
        return ReplayDivergence(first)

    def before_text(self) -> str:
        """Where in the replay a divergence happened, as divergence messages say it."""
        if self.edit is None:
            return " (a pure playback: every call must match)"
        return f" before the intervened call ({self.edit.label()})"

    def diverge_from(
        self, label: str, what: str, noun: str, recorded: Any, replayed: Any, *, at_target: bool = False
    ) -> ReplayDivergence:
        """Note a divergence of ``noun`` (``request``, ``code``) at ``label`` and show where it first differs."""
        where = " at the intervened call" if at_target else self.before_text()
        path, old, new = first_difference(recorded, replayed)
        return self.diverge(
            f"replay diverged at {label} ({what}){where}: the {noun} differs from the recording at "
            f"{path or '<root>'}: recorded {old} / replayed {new}"
        )

    # -- ordinals ------------------------------------------------------------------------------------------------

    def next_ordinal(self, key: str, kind: str) -> int:
        """The next ordinal of ``(key, kind)`` (per agent key and call kind, as the recording counts)."""
        with self._lock:
            value = self._ordinals.get((key, kind), 0)
            self._ordinals[(key, kind)] = value + 1
            return value

    def reserve(
        self, key: str, calls: Sequence[tuple[str | None, str, dict[str, Any]]], *, replace: bool = False
    ) -> None:
        """A model response came back with ``calls`` (``(call id, name, arguments)``): number them in response
        order, as the recording does. ``replace`` drops the reservations not claimed yet (smolagents runs every
        call of a response before the next one); otherwise only the claimed ones go."""
        with self._lock:
            pending = self._pending.setdefault(key, [])
            pending[:] = [] if replace else [p for p in pending if not p.claimed]
            for call_id, name, arguments in calls:
                ordinal = self.next_ordinal(key, "tool")
                pending.append(_Pending(call_id, name, arguments, canonical_json(arguments), ordinal))

    def claim(
        self, key: str, name: str, arguments: dict[str, Any], call_id: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """The ordinal (and the response's own arguments) of a tool call now running; a call no response
        announced takes the next ordinal."""
        text = canonical_json(arguments)
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
            return self.next_ordinal(key, "tool"), arguments

    # -- matching ------------------------------------------------------------------------------------------------

    def decide(self, key: str, kind: str, ordinal: int, digest: str, canonical: Any, what: str) -> PlaybackDecision:
        """Serve, intervene, re-run or go live at ``(key, kind, ordinal)``; ReplayDivergence before the edit."""
        self.check()
        rec = self.recording.find(key, kind, ordinal)
        edit = self.edit
        with self._lock:
            if edit is not None and not self.applied and edit.key == (key, kind, ordinal):
                if rec is not None and rec.request_hash != digest:
                    raise self._request_divergence(rec, canonical, what, at_target=True)
                self.applied = True
                return PlaybackDecision("intervene", rec)
            applied = self.applied
        if rec is None:
            if applied:
                return PlaybackDecision("live")
            raise self.diverge(
                f"replay diverged at {key} {kind} #{ordinal} ({what}): the recording has no such call"
                + self.before_text()
                + f"; recorded agent keys: {sorted({c.agent_key for c in self.recording.calls})}"
            )
        before = self.target_start is None or rec.start_order < self.target_start
        if rec.request_hash == digest:
            if rec.live_only or _cancelled(rec.error):
                return PlaybackDecision("live", rec)
            if rec.key in self._rerun:
                return PlaybackDecision("rerun", rec)
            return PlaybackDecision("serve", rec)
        if before:
            raise self._request_divergence(rec, canonical, what)
        return PlaybackDecision("live", rec)

    def _request_divergence(
        self, rec: RecordedCall, canonical: Any, what: str, *, at_target: bool = False
    ) -> ReplayDivergence:
        label = f"{rec.agent_key} {rec.kind} #{rec.ordinal}"
        replayed = json.loads(canonical_json(canonical))
        return self.diverge_from(label, what, "request", rec.request, replayed, at_target=at_target)

    # -- release order -------------------------------------------------------------------------------------------

    def release(self, call: RecordedCall | None) -> None:
        """A call's result went back to the framework (it counts as finished for :meth:`wait_turn`)."""
        if call is not None and call.finish_order is not None:
            with self._lock:
                self._released.add(call.finish_order)

    def _waiting(self, finish: int) -> bool:
        """Whether an expected recorded call that finished before ``finish`` has not been released yet."""
        with self._lock:
            expected, i = self._expected, self._first_unreleased
            while i < len(expected) and expected[i] in self._released:
                i += 1
            self._first_unreleased = i
            return i < len(expected) and expected[i] < finish

    async def wait_turn(self, call: RecordedCall) -> None:
        """Hold a served call made before the intervention until every expected recorded call that finished before
        it was released (the recorded finish order); bounded by :data:`RELEASE_WAIT_S`."""
        if call.finish_order is None or (self.target_start is not None and call.start_order >= self.target_start):
            return
        deadline: float | None = None
        spins = 0
        while self._waiting(call.finish_order) and not self.divergences:
            spins += 1
            if spins <= 50:
                await asyncio.sleep(0)
                continue
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + RELEASE_WAIT_S
            if now >= deadline:
                logger.info("causaltrace replay: %s %s #%d released before the calls that finished before it",
                            call.agent_key, call.kind, call.ordinal)
                return
            await asyncio.sleep(0.002)

    # -- counts and the result -----------------------------------------------------------------------------------

    def count(self, action: str, *, llm: bool = False) -> None:
        """Count a served or live call (``llm``: a live call to a model that is not deterministic)."""
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
        """Count one code execution that ran in the sandbox."""
        with self._lock:
            self.code_runs += 1

    def stats(self) -> dict[str, Any]:
        """What the new Run's ``metadata["replay"]`` says about this playback."""
        with self._lock:
            divergence = self.divergences[0] if self.divergences else None
            if divergence is None and self.edit is not None and not self.applied:
                divergence = f"the replay never reached the intervened call ({self.edit.label()})"
            return {
                "of": self.run.run_id,
                "intervention": self.intervention.step_id if self.intervention is not None else None,
                "served": self.served,
                "live": self.live,
                "live_before_intervention": self.live_before,
                "deterministic": self.live_llm == 0,
                "divergence": divergence,
                "applied": self.applied,
                "code_executions": self.code_runs,
            }

    def finish(self, new_run: Run | None) -> Run:
        """The replayed run, or the first divergence raised as ``ReplayDivergence`` (also when the replay never
        reached the intervened call)."""
        if self.divergences:
            raise ReplayDivergence(self.divergences[0])
        if new_run is None:
            raise ReplayError(f"the replay of run {self.run.run_id} produced no run")
        stats = new_run.metadata.get("replay")
        if isinstance(stats, dict) and stats.get("divergence") and not self.applied:
            raise ReplayDivergence(str(stats["divergence"]))
        return new_run


def playback_for(
    adapter: ReplayAdapter, run: Run, intervention: Intervention | None = None, *, live_override: str | None = None
) -> Playback:
    """The playback core of one replay of ``run`` through ``adapter``: ``intervention`` resolved to a
    :class:`CallEdit` the adapter's framework can apply (a ``UserError`` otherwise)."""
    if run.recording is None:
        raise UserError(f"run {run.run_id} has no recording: it cannot be played back")
    edit = resolve_edit(run, run.recording, intervention, edit_kinds=adapter.edit_kinds,
                        framework=adapter.display_name)
    return Playback(run, edit, intervention=intervention, live_override=live_override)


def calls_with_nested_calls(recording: Recording) -> set[tuple[str, str, int]]:
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


def first_difference(recorded: Any, replayed: Any, path: str = "") -> tuple[str, str, str]:
    """The path of the first difference between two canonical requests and a short view of both sides."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(set(recorded) | set(replayed)):
            if key not in recorded:
                return f"{path}.{key}", "<absent>", _short(replayed[key])
            if key not in replayed:
                return f"{path}.{key}", _short(recorded[key]), "<absent>"
            if recorded[key] != replayed[key]:
                return first_difference(recorded[key], replayed[key], f"{path}.{key}")
    elif isinstance(recorded, list) and isinstance(replayed, list):
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
        if len(recorded) != len(replayed):
            return f"{path} (length)", f"{len(recorded)} items", f"{len(replayed)} items"
    elif isinstance(recorded, str) and isinstance(replayed, str):
        i = next((n for n, (a, b) in enumerate(zip(recorded, replayed, strict=False)) if a != b),
                 min(len(recorded), len(replayed)))
        lo = max(0, i - 40)
        return (f"{path} (character {i})", repr(("…" if lo else "") + recorded[lo:i + 80]),
                repr(("…" if lo else "") + replayed[lo:i + 80]))
    return path, _short(recorded), _short(replayed)


def _short(value: Any, limit: int = 160) -> str:
    text = canonical_json(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
