"""The model probe repair runs before its first replay (issue 19 item 3): do the factory's models answer the
conversation, or do they recite a fixed list?

Repair is only meaningful when the models the factory builds ANSWER what they are asked: after an intervention the
conversation changes, and a flip needs the models to react to it. A client that returns a fixed list of answers in
order (AutoGen's ``ReplayChatCompletionClient`` and hand-written look-alikes: a list restarting from the top each
time the factory builds a fresh one) can never flip a run, and a list shared by every build has run out after the
original run. Without this probe repair spent its whole budget (98 replays, 3,000 lines of tracebacks) on such a
factory before saying "no repair found".

The probe is one short replay with a :class:`ProbePlayback`: every recorded call is served as usual up to ONE
probe call — the earliest recorded model call of an agent whose recorded answer differs from every earlier answer of
that agent — which goes live to the factory's model with the recorded request; the first call after it stops the
replay (nothing else runs live, so a live LLM is asked once). The replayed run's recording holds the live answer:

* the model raised → refused (a list that ran out, or a model that cannot answer the recorded request);
* it gave the recorded answer of that very request → passes (a reactive model, or an LLM that answers the same);
* it gave the recorded answer of a DIFFERENT, EARLIER request of that agent (and not its own) → refused: it recites
  a list from the top instead of reading the request;
* anything else (a live LLM at temperature 0 that words it differently) → passes.

Because the rule compares answers to the requests they were recorded for, a reactive model whose answers happen to
repeat ("4", "4", "8") passes: it gives each request the answer recorded for it. The probe is inconclusive (repair
goes on, and its replays report the problem) when nothing can be probed (no agent answered twice differently), the
recording is off, or the replay diverges or fails before the probe call.

The refusal is ONE line (a :class:`~causaltrace.exceptions.UserError`, exit 2 in the CLI) saying what the factory
needs: models that answer the conversation — a live LLM or a reactive model.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pydantic_core

from causaltrace.exceptions import UserError
from causaltrace.protocols import Factory, PlaybackDecision, Sandbox, get_replay_adapter
from causaltrace.recording import canonical_json
from causaltrace.replay.playback import Playback
from causaltrace.schema import RecordedCall, Recording, Run

__all__ = ["ProbePlayback", "ProbeVerdict", "answer_key", "probe_models", "probe_target"]

logger = logging.getLogger("causaltrace")

#: Parts of a response that say nothing about WHAT the model answered (ids, token counts, raw provider payloads).
_NOT_THE_ANSWER = frozenset({"id", "usage", "token_usage", "raw", "logprobs", "cached", "finish_reason", "created",
                             "timing", "model", "system_fingerprint"})
#: The divergence that stops a probe replay at the first call after the probe call.
PROBE_DONE = "the model probe has its answer: the probe replay stops here"


@dataclass(frozen=True)
class ProbeVerdict:
    """What the probe found: ``passed`` (or inconclusive, ``probed=False``) and a one-line ``detail``."""

    passed: bool
    probed: bool
    detail: str


def answer_key(call: RecordedCall) -> str | None:
    """What a recorded model call answered, as canonical text without ids, token counts and provider payloads
    (None when the call has no response)."""
    if call.response is None:
        return None
    try:
        value = call.decoded_response()
    except Exception:  # a response that cannot be decoded here: compare what was stored
        value = call.response
    plain = pydantic_core.to_jsonable_python(value, fallback=repr)
    return json.dumps(_strip(plain), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in _NOT_THE_ANSWER}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _llm_calls(recording: Recording) -> dict[str, list[RecordedCall]]:
    by_key: dict[str, list[RecordedCall]] = {}
    for call in recording.calls:
        if call.kind == "llm":
            by_key.setdefault(call.agent_key, []).append(call)
    return {key: sorted(calls, key=lambda c: c.ordinal) for key, calls in by_key.items()}


def probe_target(recording: Recording) -> RecordedCall | None:
    """The probe call: the earliest recorded model call (by start order) whose answer differs from every earlier
    answer of its agent — a fixed list from the top gives that agent's first answer there, not this one."""
    best: RecordedCall | None = None
    for calls in _llm_calls(recording).values():
        seen: set[str] = set()
        for call in calls:
            answer = answer_key(call)
            if answer is None or call.live_only or call.error is not None:
                break  # the recording cannot serve this call: later ones of the agent cannot be reached cleanly
            if seen and answer not in seen:
                if best is None or call.start_order < best.start_order:
                    best = call
                break
            seen.add(answer)
    return best


class ProbePlayback(Playback):
    """A pure playback (no edit) whose ``target`` call goes live; the first call after it stops the replay, and
    :meth:`finish` returns the replayed run even then (the probe needs its recording, not its outcome)."""

    def __init__(self, run: Run, target: RecordedCall) -> None:
        super().__init__(run, None)
        self.target = target
        self.target_start = target.start_order  # served calls after the probe call wait for nothing
        self.probed = False

    def decide(self, key: str, kind: str, ordinal: int, digest: str, canonical: Any, what: str) -> PlaybackDecision:
        if self.probed:
            if kind == "llm":
                raise self.diverge(PROBE_DONE)
            # a tool call the probe answer asked for: its recorded result (nothing runs live, no nested agent
            # re-runs); raising here instead would leave an AutoGen team hanging on the failed tool call
            rec = self.recording.find(key, kind, ordinal)
            return PlaybackDecision("serve", rec) if rec is not None else PlaybackDecision("live")
        if (key, kind, ordinal) == self.target.key:
            self.check()
            if digest != self.target.request_hash:
                label = f"{key} {kind} #{ordinal}"
                replayed = json.loads(canonical_json(canonical))
                raise self.diverge_from(label, what, "request", self.target.request, replayed, at_target=True)
            self.probed = True
            return PlaybackDecision("live", self.target)
        return super().decide(key, kind, ordinal, digest, canonical, what)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["probe"] = f"{self.target.agent_key} llm #{self.target.ordinal}"
        out["divergence"] = None if self.probed else out["divergence"]
        return out

    def finish(self, new_run: Run | None) -> Run:
        if new_run is None:
            return super().finish(new_run)
        return new_run


async def probe_models(run: Run, factory: Factory, *, sandbox: Sandbox | None = None) -> ProbeVerdict:
    """Run the probe (module docstring); raise a one-line :class:`UserError` when the factory's model recites a
    fixed list or raises on the probe request, else return the verdict (passed or inconclusive)."""
    if run.recording is None:
        return ProbeVerdict(True, False, "no recording to probe with")
    target = probe_target(run.recording)
    if target is None:
        return ProbeVerdict(True, False, "no agent answered twice differently: nothing to probe")
    from causaltrace.replay.sandbox.session import PythonWorkerSession

    playback = ProbePlayback(run, target)
    try:
        adapter = get_replay_adapter(run.framework)
        new_run = await adapter.replay(factory, playback, sandbox=sandbox, open_session=PythonWorkerSession,
                                       verify=None)
    except Exception as exc:  # a factory or framework that fails: the search's replays mark it, one by one
        logger.info("causaltrace repair: the model probe could not run: %s: %s", type(exc).__name__, exc)
        said = f"{type(exc).__name__}: {exc}"  # a factory that hung says so (issue 36 item 3)
        return ProbeVerdict(True, False, f"the probe replay failed ({said[:300]})")
    got = new_run.recording.find(*target.key) if new_run.recording is not None else None
    if not playback.probed or got is None:
        return ProbeVerdict(True, False, "the probe replay did not reach the probe call")
    return _judge(run.recording, target, got)


def _judge(recording: Recording, target: RecordedCall, got: RecordedCall) -> ProbeVerdict:
    where = f"agent {target.agent_key!r}, its model call #{target.ordinal}"
    needs = ("repair needs a factory whose models answer the conversation (a live LLM or a reactive model), "
             "not a fixed list of answers")
    if got.response is None:
        error = f"{got.error.type}: {got.error.message}" if got.error is not None else "no answer"
        raise UserError(f"the factory's model raised on a recorded request ({where}): {error[:160]}; {needs}")
    live, own = answer_key(got), answer_key(target)
    if live == own:
        return ProbeVerdict(True, True, f"{where} answered its recorded request as recorded")
    earlier = [c for c in _llm_calls(recording).get(target.agent_key, [])
               if c.ordinal < target.ordinal and answer_key(c) == live]
    if earlier:
        raise UserError(f"the factory's model answered a recorded request ({where}) with the recorded answer to its "
                        f"earlier call #{earlier[0].ordinal}, as a fixed list restarting from the top does; {needs}")
    return ProbeVerdict(True, True, f"{where} answered its recorded request (differently from the recording)")
