"""Budgets that hold whatever the user's code does (issue 36 item 3).

The example AutoGen team (``examples/autogen_team.py``: the solver's ``add(17, 26)`` is the planted fault) replayed
with a factory that blocks, a synchronous verifier that blocks, an asynchronous verifier that never answers, and a
tool that raises ``SystemExit`` / ``KeyboardInterrupt``: through the API and through ``causaltrace repair`` in a
subprocess, timed. Each replay runs on an event loop of its own in a worker thread, its factory and synchronous
verifier in threads of their own, so ``--max-seconds`` and the per-replay timeout fire and the result names what
hung; ``SystemExit`` / ``KeyboardInterrupt`` from user code mark that replay and the search goes on.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import causaltrace
from _autogen import add_call, record_failing
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair
from causaltrace.schema import Outcome

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
example = importlib.import_module("autogen_team")
EXAMPLE = ROOT / "examples" / "autogen_team.py"
VERIFY = f"{EXAMPLE}:verify"
#: ``repair`` returns within ``--max-seconds`` + this (the issue's bound)
SLACK_S = 5.0


@pytest.fixture(autouse=True)
def _uninstrument():
    yield
    causaltrace.uninstrument()
    reset_tracing()


def blocking_factory() -> Any:
    time.sleep(3600)  # a factory stuck on a lock, a network call, input()


def blocking_verifier(outcome: Outcome) -> bool:
    time.sleep(3600)
    return True


async def hanging_verifier(outcome: Outcome) -> bool:
    await asyncio.sleep(3600)
    return True


def _exiting_team(exc: BaseException) -> Any:
    """The failing team whose ``add`` tool raises ``exc`` when given the corrected operand 25."""
    from autogen_core.tools import FunctionTool

    team = example.build_failing()

    async def add(a: int, b: int) -> int:
        if b == 25:
            raise exc
        return a + b

    solver = team._participants[1]
    solver._tools[0] = FunctionTool(add, description="Add two integers.", name="add")
    return team


def exiting_team() -> Any:
    return _exiting_team(SystemExit(3))


def interrupting_team() -> Any:
    return _exiting_team(KeyboardInterrupt())


_record = record_failing
_add = add_call


def _marks(result: Any) -> list[str]:
    return [r.error.type if r.error else str(r.flipped) for a in result.attempts for r in a.replays]


# --------------------------------------------------------------------------------------------------- the API


async def test_a_blocking_factory_ends_within_max_seconds_and_is_named():
    run = await _record()
    started = time.monotonic()
    result = await repair(run, blocking_factory, example.verify, [_add(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), max_seconds=4)
    took = time.monotonic() - started
    assert took < 4 + SLACK_S, took  # before: it never returned (killed at 420 s against --max-seconds 40)
    assert not result.repaired and result.budget_exhausted == "seconds"
    assert "the factory did not return" in result.hung
    assert "the factory did not return" in result.diagnosis.explanation


async def test_a_blocking_sync_verifier_ends_within_max_seconds_and_is_named():
    run = await _record()
    started = time.monotonic()
    result = await repair(run, example.build_failing, blocking_verifier, [_add(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), probe=False, max_seconds=4)
    assert time.monotonic() - started < 4 + SLACK_S
    assert result.budget_exhausted == "seconds" and "the verifier did not return" in result.hung
    assert _marks(result)[0] == "VerifierTimeout"


async def test_a_hanging_async_verifier_is_reported_as_what_it_is_not_as_the_seconds_budget():
    run = await _record()
    started = time.monotonic()
    result = await repair(run, example.build_failing, hanging_verifier, [_add(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), probe=False, replay_timeout_s=2, max_replays=2)
    assert time.monotonic() - started < 2 * (2 + 2) + SLACK_S
    assert _marks(result) == ["VerifierTimeout", "VerifierTimeout"]
    assert result.budget_exhausted == "replays" and "the verifier did not return within 2 s" in result.hung
    tried = result.diagnosis.artifacts["replays"]
    assert tried[0]["error"]["message"] == "the verifier did not return within 2 s"


@pytest.mark.parametrize("factory,kind", [(exiting_team, "SystemExit"), (interrupting_team, "KeyboardInterrupt")])
async def test_systemexit_or_keyboardinterrupt_from_a_tool_marks_that_replay_not_the_search(factory, kind):
    run = await _record(factory)
    result = await repair(run, factory, example.verify, [_add(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), probe=False, max_replays=6)
    marks = _marks(result)  # before: SystemExit ended the whole repair with the tool's exit code
    fixed = [r for a in result.attempts for r in a.replays if r.intervention.replacement == {"a": 17, "b": 25}]
    assert fixed and fixed[0].error is not None and fixed[0].error.type == kind, marks
    assert kind in fixed[0].error.message and len(marks) > 1  # the search went on past it
    assert not result.repaired


async def test_the_replays_after_the_corrections_have_a_budget_of_their_own():
    """Issue 32 (repair cost): once every correction was tried, the alternatives — then the tool results — stop at
    ``max_alternatives`` replays (``budget_exhausted="alternatives"``, no correction untried); without that bound the
    same search goes on through every alternative. A verifier that never passes: nothing flips."""
    run = await _record()
    steps = [_add(run).step_id]
    kwargs: dict[str, Any] = {"k": 0, "store": False, "sandbox": default_sandbox(), "probe": False, "concurrency": 1}
    bounded = await repair(run, example.build_failing, lambda outcome: False, steps, max_alternatives=3, **kwargs)
    passes = [(a.basis, len(a.replays)) for a in bounded.attempts]
    assert passes[0][0] == "correction" and passes[0][1] >= 1  # the finding's correction (b: 26 -> 25) came first
    assert [n for basis, n in passes if basis != "correction"] == [3]
    assert bounded.budget_exhausted == "alternatives" and bounded.corrections_untried == 0
    assert "the alternatives' budget ran out" in bounded.diagnosis.explanation
    free = await repair(run, example.build_failing, lambda outcome: False, steps, max_alternatives=None, **kwargs)
    assert sum(len(a.replays) for a in free.attempts if a.basis != "correction") > 3 and not free.budget_exhausted


# --------------------------------------------------------------------------------------------------- the CLI


def _cli(run_id: str, step: int, factory: str, verify: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    # tests/ too: the CLI loads this file (its factories and verifiers), which imports the _autogen helper
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "causaltrace.cli", "repair", run_id, "--factory", factory,
                           "--verify", verify, "--steps", str(step), "-k", "0", *extra],
                          capture_output=True, text=True, env=env, timeout=120)
    return done, time.monotonic() - started


def _startup() -> float:
    """What starting the CLI costs here (a loaded machine): measured, so the bound is the issue's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import causaltrace.cli, causaltrace.replay.repair, autogen_agentchat"],
                   env=env, check=True, timeout=120)
    return time.monotonic() - started


@pytest.mark.parametrize("factory,verify,named", [
    ("blocking_factory", VERIFY, "the factory did not return"),
    ("build_failing", "blocking_verifier", "the verifier did not return"),
])
def test_cli_repair_returns_within_max_seconds_naming_what_hung(factory, verify, named):
    run = asyncio.run(_record())
    spec = {"blocking_factory": f"{__file__}:blocking_factory", "build_failing": f"{EXAMPLE}:build_failing",
            "blocking_verifier": f"{__file__}:blocking_verifier"}
    done, took = _cli(run.run_id, _add(run).index, spec[factory], spec.get(verify, verify), "--max-seconds", "4")
    assert took < 4 + SLACK_S + _startup(), (took, done.stderr[-2000:])
    assert done.returncode == 1, done.stderr[-2000:]  # no repair found, said; not a crash
    assert "seconds budget ran out" in done.stdout and named in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


def test_cli_hanging_async_verifier_is_named_not_only_the_seconds_budget():
    run = asyncio.run(_record())
    done, took = _cli(run.run_id, _add(run).index, f"{EXAMPLE}:build_failing", f"{__file__}:hanging_verifier",
                      "--max-seconds", "4", "--no-prune")
    assert took < 4 + SLACK_S + _startup(), (took, done.stderr[-2000:])
    assert done.returncode == 1, done.stderr[-2000:]
    progress = [line for line in done.stderr.splitlines() if "· step #" in line]
    assert progress and all("(VerifierTimeout)" in line for line in progress), done.stderr
    assert "the verifier did not return within" in done.stdout, done.stdout


def test_cli_a_tool_raising_systemexit_marks_its_replay_and_repair_goes_on():
    run = asyncio.run(_record(exiting_team))
    done, _ = _cli(run.run_id, _add(run).index, f"{__file__}:exiting_team", VERIFY, "--max-replays", "4")
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])  # before: 3, the tool's exit code
    progress = [line for line in done.stderr.splitlines() if "· step #" in line]
    assert any("(SystemExit)" in line for line in progress) and len(progress) > 1, done.stderr
    assert "Traceback" not in done.stderr and "no repair found" in done.stdout


async def test_a_flip_whose_checks_the_seconds_budget_cuts_is_unconfirmed_not_nondeterministic():
    """The flip is found, then the factory blocks (it builds the unedited run's control replay): the budget ends
    the check, so the flip is left unconfirmed — the budget is named, the run is not called nondeterministic."""
    succeeded: list[bool] = []

    def factory() -> Any:
        if succeeded:
            time.sleep(3600)
        return example.build_failing()

    def verify(outcome: Outcome) -> Any:
        verdict = example.verify(outcome)
        succeeded.append(True) if verdict.passed else None
        return verdict

    run = await _record()
    started = time.monotonic()
    result = await repair(run, factory, verify, [_add(run).step_id], k=0, store=False, sandbox=default_sandbox(),
                          probe=False, concurrency=1, max_seconds=8)
    assert time.monotonic() - started < 8 + SLACK_S
    assert succeeded and not result.repaired and result.pair is None and not result.nondeterministic
    assert result.budget_exhausted == "seconds" and "the factory did not return" in result.hung
    assert "unconfirmed flip" in result.diagnosis.explanation.lower() and "unconfirmed" in result.diagnosis.artifacts
    assert result.diagnosis.verified_by != "replay" and "the factory did not return" in result.diagnosis.explanation


async def hanging_async_factory() -> Any:
    await asyncio.sleep(3600)


async def test_a_hanging_async_factory_is_named():
    run = await _record()
    result = await repair(run, hanging_async_factory, example.verify, [_add(run).step_id], k=0, store=False,
                          sandbox=default_sandbox(), probe=False, replay_timeout_s=2, max_replays=1)
    assert _marks(result) == ["FactoryTimeout"] and "the factory did not return within 2 s" in result.hung
