"""``repair --concurrency N`` (issue 19 item 3): replays of one step's proposals run at once, in-process, and the
answer is the one-at-a-time answer — the same earliest flipping step, the same proposal, the same replays recorded
in the same order — while each replay's printed output stays with that replay (real AutoGen team, real sandbox)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("autogen_agentchat")

import causaltrace
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.concurrency import default_concurrency
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair
from test_repair_agent_first import TASK, build, verify, verify_unreachable


@pytest.fixture(autouse=True)
def _uninstrument():
    yield
    causaltrace.uninstrument()
    reset_tracing()


async def _record(factory: Any, check: Any) -> Any:
    causaltrace.instrument()
    async with causaltrace.run(task=TASK, verify=check) as handle:
        await factory().run(task=TASK)
    return handle.run


def _shape(result: Any) -> list[Any]:
    return [(a.step_id, a.phase, a.crs, [(r.intervention.description, r.flipped, r.outcome.status) for r in a.replays])
            for a in result.attempts]


def test_the_default_follows_the_machine():
    assert 1 <= default_concurrency() <= 4


async def test_replays_that_ran_ahead_are_stopped_not_left_running_in_the_background():
    # cancelling team.run does not stop an AutoGen team (its handlers are tasks of the team's runtime): the replays
    # that ran ahead of the flip went on running and were torn down when the loop closed, a traceback each
    def factory() -> Any:  # the multiply tool answers only the corrected price: the replays that ran ahead hang
        return build(restate_wrong=True, hang_unless=21)

    run = await _record(lambda: build(restate_wrong=True), verify)
    before = asyncio.all_tasks()
    result = await repair(run, factory, verify, k=0, sandbox=default_sandbox(), store=False, concurrency=4,
                          probe=False, replay_timeout_s=3, order_proposals=False,
                          corrections=False)  # the minimality order of the alternatives: 23, 21
    assert result.repaired
    tried = result.decisive.replays  # the first proposal hung (stopped at its timeout), the second flipped, and
    assert [r.error.type if r.error else r.flipped for r in tried] == ["ReplayTimeout", True]  # two ran ahead
    for _ in range(50):  # a cancelled replay may still be unwinding when repair returns (a loaded machine)
        left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
        if not left:
            break
        await asyncio.sleep(0.2)
    assert left == [], [t.get_coro() for t in left]  # before the fix: 30 tasks, waiting on the hung tools forever


async def test_concurrent_replays_give_the_sequential_answer():
    def factory() -> Any:
        return build(restate_wrong=True)

    run = await _record(factory, verify)
    seen: dict[int, list[str]] = {1: [], 3: []}
    results = {}
    for n in (1, 3):
        results[n] = await repair(run, factory, verify, k=0, sandbox=default_sandbox(), store=False, concurrency=n,
                                  on_replay=lambda step, r, n=n: seen[n].append(r.intervention.description))
    one, three = results[1], results[3]
    assert one.repaired and three.decisive.step_id == one.decisive.step_id
    assert three.decisive.best.intervention == one.decisive.best.intervention
    assert _shape(three) == _shape(one) and three.replays == one.replays
    assert seen[3] == seen[1]  # the progress lines come in the same order


async def test_each_concurrent_replay_keeps_its_own_output(capsys):
    def noisy() -> Any:
        return build(price=22, noisy=True)

    run = await _record(noisy, verify_unreachable)
    capsys.readouterr()
    result = await repair(run, noisy, verify_unreachable, k=0, sandbox=default_sandbox(), store=False,
                          max_replays=4, concurrency=3)
    assert result.replays == 4 and not result.repaired
    outputs = [o for a in result.attempts for o in a.outputs]
    assert len(outputs) == 4
    single = [o for a in (await repair(run, noisy, verify_unreachable, k=0, sandbox=default_sandbox(), store=False,
                                       max_replays=4, concurrency=1)).attempts for o in a.outputs]
    # the same lines per replay as one at a time: nothing mixed in from the replays running beside it
    assert [o.count("calculator: thinking hard") for o in outputs] == [o.count("calculator: thinking hard")
                                                                         for o in single]
    assert "thinking hard" not in capsys.readouterr().err
