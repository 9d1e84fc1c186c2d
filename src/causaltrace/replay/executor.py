"""Replay = re-run with a playback (ARCHITECTURE decision 6; CausalFlow §4, "re-execution").

``replay(run, factory, intervention, verify)`` finds the run's framework adapter in the ``ReplayAdapter`` registry,
resolves the intervention to a neutral edit and builds the playback core (:mod:`causaltrace.replay.playback`), and
injects the core, the sandbox and the session factory into the adapter, which builds a fresh team/agent with the
user's factory, swaps in playback clients, tools and code executor, and runs it on the run's task:

* before the intervened step every request must match the recording (a mismatch is a ``ReplayDivergence`` that
  shows the first differing request);
* the intervened step returns the replacement;
* after it, a request that matches the recording at the same (agent_key, kind, ordinal) is served from it, anything
  else runs live (LLM at temperature 0 with a seed; tools; code in the sandbox).

The verifier decides the new outcome; the replay ``flipped`` when a failed run now succeeds. With live LLM calls
in the replay a flip counts only when it holds in ``r`` of ``R`` replays (``ARCHITECTURE`` "Shared contracts";
default 2 of 3); with only deterministic calls one replay suffices.

The adapter reports what it served in the new Run's ``metadata["replay"]``: ``served``, ``live``,
``live_before_intervention``, ``deterministic`` (no live LLM call happened), ``divergence``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from causaltrace.exceptions import ReplayDivergence, ReplayError, UserError
from causaltrace.protocols import Factory, PlaybackDecision, Sandbox, get_replay_adapter, register_default_sandbox
from causaltrace.replay.playback import Playback, playback_for
from causaltrace.schema import Intervention, Outcome, ReplayResult, Run, StepError

__all__ = ["ControlPlayback", "ReplayPolicy", "answered_differently", "default_sandbox", "replay", "replay_sync"]

logger = logging.getLogger("causaltrace")


@dataclass(frozen=True)
class ReplayPolicy:
    """How many replays a flip needs when live LLM calls are involved (r of R)."""

    required: int = 2
    attempts: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.required <= self.attempts:
            raise UserError(f"a flip needs r of R replays with 1 <= r <= R, got {self.required} of {self.attempts}")


def has_recording(run: Run) -> bool:
    """Whether the run can be played back: it has a Recording with at least one recorded call."""
    return run.recording is not None and bool(run.recording.calls)


_DEFAULT_SANDBOX: Sandbox | None = None


def default_sandbox() -> Sandbox:
    """The sandbox replays use unless given one: a shared :class:`SubprocessSandbox` (bubblewrap, cgroups)."""
    global _DEFAULT_SANDBOX
    if _DEFAULT_SANDBOX is None:
        from causaltrace.replay.sandbox import SubprocessSandbox

        _DEFAULT_SANDBOX = SubprocessSandbox()
    return _DEFAULT_SANDBOX


register_default_sandbox(default_sandbox)  # the trunk's default_sandbox() answers with this one


class ControlPlayback(Playback):
    """The UNEDITED run replayed as an edited replay runs (issue 36 item 2): every call before the intervened call is
    served (it must match), the intervened call gets its RECORDED answer (an identity intervention), and every call
    after it runs LIVE — also one whose request matches the recording, which an edited replay would serve. A replay
    serving everything from the recording proves nothing: a noisy tool or model after the step is only exercised
    when it runs. If this replay succeeds, the run's outcome changes without any edit (nondeterministic); if a live
    call answers its recorded request differently (:func:`answered_differently`), the environment is."""

    def __init__(self, run: Run, at: Playback) -> None:
        super().__init__(run, None, intervention=at.intervention, live_override=at.live_override)
        if at.edit is None:
            raise UserError("a control replay needs the intervened call of an edit")
        self.at = at.edit
        self.target_start = at.edit.call.start_order
        self._expected = sorted(c.finish_order for c in self.recording.calls
                                if c.finish_order is not None and c.start_order < self.target_start)

    def decide(self, key: str, kind: str, ordinal: int, digest: str, canonical: Any, what: str) -> PlaybackDecision:
        if self.applied:
            rec = self.recording.find(key, kind, ordinal)
            if rec is not None and rec.start_order < (self.target_start or 0):
                return super().decide(key, kind, ordinal, digest, canonical, what)  # recorded before: must match
            self.check()
            return PlaybackDecision("live", rec)
        decision = super().decide(key, kind, ordinal, digest, canonical, what)
        if (key, kind, ordinal) == self.at.key:
            if decision.action == "live" and decision.call is not None and decision.call.request_hash != digest:
                raise self._request_divergence(decision.call, canonical, what, at_target=True)
            with self._lock:
                self.applied = True  # the recorded answer at the step: the identity edit; live from here on
        return decision

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if out["divergence"] is None and not self.applied:
            out["divergence"] = f"the unedited replay never reached the intervened call ({self.at.label()})"
        out["control"] = True
        return out


def answered_differently(run: Run, new_run: Run | None) -> list[str]:
    """The calls of ``new_run`` that asked a recorded call's exact request and got another answer than the recording
    kept (``"agent_key kind #n"``): a tool, code or model that does not answer the same request the same way."""
    if new_run is None or new_run.recording is None or run.recording is None:
        return []
    from causaltrace.replay.probe import answer_key

    out = []
    for call in new_run.recording.calls:
        rec = run.recording.find(*call.key)
        if (rec is None or rec.request_hash != call.request_hash or rec.live_only or rec.response is None
                or call.response is None):
            continue
        if answer_key(rec) != answer_key(call):
            out.append(f"{call.agent_key} {call.kind} #{call.ordinal}")
    return out


async def _replay_once(
    run: Run,
    factory: Factory,
    intervention: Intervention,
    verify: Any,
    *,
    sandbox: Sandbox | None,
    live_override: str | None,
    control: bool = False,
) -> ReplayResult:
    if not has_recording(run):
        raise UserError(
            f"run {run.run_id} has no recording (imported or recorded with record=False): give a model (--model) "
            "for predictive replay"
        )
    if intervention.step_id not in {s.step_id for s in run.steps}:
        raise UserError(f"step {intervention.step_id!r} is not a step of run {run.run_id}")
    from causaltrace.replay.sandbox.session import PythonWorkerSession  # the sandbox package loads on first replay

    adapter = get_replay_adapter(run.framework)
    playback = playback_for(adapter, run, intervention, live_override=live_override)
    if control:
        playback = ControlPlayback(run, playback)
    try:
        new_run: Run = await adapter.replay(
            factory, playback, sandbox=sandbox, open_session=PythonWorkerSession, verify=verify
        )
    except ReplayDivergence as exc:
        return ReplayResult(
            original_run_id=run.run_id,
            intervention=intervention,
            outcome=Outcome(status="unknown", reason=f"replay diverged: {exc.message}"),
            flipped=False,
            divergence=exc.message,
            error=StepError(type="ReplayDivergence", message=exc.message),
        )
    stats = new_run.metadata.get("replay") if isinstance(new_run.metadata.get("replay"), dict) else {}
    assert isinstance(stats, dict)
    flipped = run.outcome.status == "failure" and new_run.outcome.status == "success"
    return ReplayResult(
        original_run_id=run.run_id,
        intervention=intervention,
        run=new_run,
        outcome=new_run.outcome,
        flipped=flipped,
        verified_by="replay",
        served_calls=int(stats.get("served", 0)),
        live_calls=int(stats.get("live", 0)),
        live_calls_before_intervention=int(stats.get("live_before_intervention", 0)),
        divergence=stats.get("divergence") if isinstance(stats.get("divergence"), str) else None,
    )


async def replay(
    run: Run,
    factory: Factory,
    intervention: Intervention,
    verify: Any,
    *,
    sandbox: Sandbox | None = None,
    live_override: str | None = None,
    policy: ReplayPolicy | None = None,
    model: Any = None,
    control: bool = False,
) -> ReplayResult:
    """Re-run ``run`` with ``intervention`` applied and judge the new outcome with ``verify``.

    A run without a Recording (an imported log) cannot be re-run: with ``model`` its outcome is PREDICTED
    (:mod:`causaltrace.replay.predictive`, ``verified_by="prediction"``), without one it is a ``UserError``.

    Returns the first replay's result, with ``flipped`` decided by the r-of-R policy when the replay made live LLM
    calls (a deterministic replay decides alone). ``control=True`` replays the run WITHOUT the edit, live after the
    intervened call (:class:`ControlPlayback`), once: ``flipped`` then says the unedited run succeeded. Raises ``UserError`` for a run without a recording or a step that
    is not in it, and ``ReplayError`` when the adapter cannot play the run back at all.
    """
    if not has_recording(run) and model is not None:
        from causaltrace.replay.predictive import predict_replay

        judge = model
        if not hasattr(model, "ask"):
            from causaltrace.attribution.judge import Judge

            judge = Judge(model)
        return await predict_replay(run, intervention, judge=judge)
    if sandbox is None:
        sandbox = default_sandbox()
    if control:
        once = await _replay_once(run, factory, intervention, verify, sandbox=sandbox, live_override=live_override,
                                  control=True)
        return once.model_copy(update={"replays_flipped": int(once.flipped)})
    policy = policy or ReplayPolicy()
    first = await _replay_once(run, factory, intervention, verify, sandbox=sandbox, live_override=live_override)
    deterministic = bool(first.run is not None and first.run.metadata.get("replay", {}).get("deterministic", True))
    if deterministic or first.divergence is not None:
        return first.model_copy(update={"replays_flipped": int(first.flipped)})
    flips = int(first.flipped)
    tried = 1
    while tried < policy.attempts and flips < policy.required and flips + (policy.attempts - tried) >= policy.required:
        again = await _replay_once(run, factory, intervention, verify, sandbox=sandbox, live_override=live_override)
        flips += int(again.flipped)
        tried += 1
    return first.model_copy(
        update={"flipped": flips >= policy.required, "replays_run": tried, "replays_flipped": flips}
    )


def replay_sync(run: Run, factory: Factory, intervention: Intervention, verify: Any, **kwargs: Any) -> ReplayResult:
    """:func:`replay` for sync code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(replay(run, factory, intervention, verify, **kwargs))
    raise ReplayError("replay_sync() was called from a running event loop; use `await causaltrace.replay(...)`")
