"""The r-of-R rule for flips with live LLM calls (ARCHITECTURE "Shared contracts"): a seeded nondeterministic fake
playback (its live "model" succeeds with a seeded coin) — one replay decides when the replay was deterministic."""

from __future__ import annotations

import random

import pytest

from causaltrace.exceptions import UserError
from causaltrace.protocols import _REPLAY_ADAPTERS, register_replay_adapter
from causaltrace.replay.executor import ReplayPolicy, replay
from causaltrace.schema import Dependency, Intervention, Outcome, RecordedCall, Recording, Run, Step


class CoinAdapter:
    """Plays back by flipping a seeded coin: the stand-in for a live model at temperature > 0."""

    framework = "coin-test"
    display_name = "coin"
    edit_kinds = ("message",)

    def __init__(self, outcomes, *, deterministic=False):
        self.outcomes = list(outcomes)
        self.deterministic = deterministic
        self.calls = 0

    def edit_transform(self, edit, agents):
        return None

    async def replay(self, factory, playback, *, sandbox, open_session, verify=None):
        # replay/ injected the core holding the neutral edit: the message's producing llm call, its text
        edit = playback.edit
        assert (edit.call.step_id, edit.slot, edit.part, edit.value, edit.old) == ("r/1", "response", "text",
                                                                                  "right", "wrong")
        assert open_session is not None and sandbox is not None
        success = self.outcomes[self.calls]
        self.calls += 1
        run = playback.run
        return Run(run_id=f"replay-{self.calls}", framework=self.framework,
                   outcome=Outcome(status="success" if success else "failure", final_answer="x", stop="normal"),
                   metadata={"replay": {"of": run.run_id, "served": 1, "live": 1, "live_before_intervention": 0,
                                        "deterministic": self.deterministic}})


def _failed_run() -> Run:
    steps = (Step(step_id="r/0", run_id="r", index=0, kind="task"),
             Step(step_id="r/1", run_id="r", index=1, kind="llm_response", content="wrong"),
             Step(step_id="r/2", run_id="r", index=2, kind="message", content="wrong",
                  depends_on=[Dependency(step_id="r/1", kind="produced_by")]))
    recording = Recording(run_id="r", calls=(RecordedCall(run_id="r", step_id="r/1", agent_key="a", kind="llm",
                                                          ordinal=0, request={}, request_hash="h", response="wrong",
                                                          start_order=0),))
    return Run(run_id="r", framework="coin-test", steps=steps, recording=recording,
               outcome=Outcome(status="failure", final_answer="wrong", stop="normal"))


@pytest.fixture
def adapter_slot():
    yield
    _REPLAY_ADAPTERS.pop("coin-test", None)


def _seeded(seed: int, n: int = 3, p: float = 0.5) -> list[bool]:
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(n)]


@pytest.mark.parametrize("seed", range(8))
async def test_flip_needs_two_of_three_live_replays(adapter_slot, seed):
    outcomes = _seeded(seed)
    adapter = CoinAdapter(outcomes)
    register_replay_adapter(adapter)
    result = await replay(_failed_run(), lambda: None, Intervention(step_id="r/2", replacement="right"), "x",
                          sandbox=object(), policy=ReplayPolicy(required=2, attempts=3))
    # the expected verdict computed independently from the seeded coin: stop as soon as the answer is decided
    flips, tried = 0, 0
    for outcome in outcomes:
        tried += 1
        flips += outcome
        if flips >= 2 or flips + (3 - tried) < 2:
            break
    assert (result.flipped, result.replays_run, result.replays_flipped) == (flips >= 2, tried, flips)
    assert adapter.calls == tried


async def test_a_deterministic_replay_decides_alone(adapter_slot):
    adapter = CoinAdapter([True, False, False], deterministic=True)
    register_replay_adapter(adapter)
    result = await replay(_failed_run(), lambda: None, Intervention(step_id="r/2", replacement="right"), "x",
                          sandbox=object())
    assert result.flipped and result.replays_run == 1 and adapter.calls == 1


def test_policy_bounds():
    with pytest.raises(UserError):
        ReplayPolicy(required=4, attempts=3)


async def test_unknown_step_and_missing_recording_are_user_errors(adapter_slot):
    register_replay_adapter(CoinAdapter([True]))
    run = _failed_run()
    with pytest.raises(UserError, match="not a step"):
        await replay(run, lambda: None, Intervention(step_id="nope", replacement="x"), "x", sandbox=object())
    with pytest.raises(UserError, match="no recording"):
        await replay(run.model_copy(update={"recording": None}), lambda: None,
                     Intervention(step_id="r/2", replacement="x"), "x", sandbox=object())
