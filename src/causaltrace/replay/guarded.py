"""One replay of the repair search, guarded (issue 19, "Bad input"): its output captured, its time bounded, and bad
input turned into a MARKED result (``ReplayResult.error``) instead of an exception, so the search goes on and the
repair report shows what happened:

==============================================  ========================================================
what went wrong                                 the mark (``error.type``)
==============================================  ========================================================
the adapter refused the proposal                ``InterventionRefused`` (e.g. a handoff target the agent lacks)
the replay outlived ``timeout_s``               ``ReplayTimeout`` (cancelled, waited for 2 s at most)
the factory (or anything before the run) raised the exception's type (``RuntimeError``…)
the verifier raised, or returned neither a      ``VerifierError`` (the run marking already counts it as a failed
Verdict nor a bool                              verification; the mark says why), never a flip
the framework raised during the replayed run    the exception's type, from the run's ``error`` step (the run
(a proposal it could not take)                  ended by an exception and did not flip)
the replay diverged from the recording          ``ReplayDivergence`` (:mod:`causaltrace.replay.executor`)
==============================================  ========================================================

What the replay prints (a framework's tracebacks, rich panels) goes to its own buffer
(:mod:`causaltrace.replay.concurrency`), returned beside the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import io
from collections.abc import AsyncIterator
from typing import Any

from causaltrace.exceptions import UserError
from causaltrace.protocols import Factory
from causaltrace.replay.concurrency import captured
from causaltrace.replay.executor import replay
from causaltrace.schema import Intervention, Outcome, ReplayResult, Run, StepError, Verdict

__all__ = ["bounded", "captured_output", "guarded_replay", "guarded_verifier", "marked", "with_mark"]


@contextlib.asynccontextmanager
async def captured_output() -> AsyncIterator[io.StringIO]:
    """Everything this replay prints to stdout / stderr inside the block (a framework's tracebacks and panels)
    goes to the yielded buffer instead of the user's terminal; concurrent replays each get their own
    (:mod:`causaltrace.replay.concurrency`)."""
    with captured() as buffer:
        yield buffer


async def guarded_replay(run: Run, factory: Factory, proposal: Intervention, verify: Any, *, timeout_s: float | None,
                           **kwargs: Any) -> tuple[ReplayResult, str]:
    """One replay with its output captured; a refused proposal, a replay that raises, one that outlives
    ``timeout_s``, a broken verifier and a framework that raised each become a marked result (``error``; module
    docstring), so the search goes on."""
    problems: list[str] = []
    async with captured_output() as buffer:
        try:
            result = await bounded(replay(run, factory, proposal, guarded_verifier(verify, problems), **kwargs), timeout_s)
        except UserError as exc:  # the adapter refused this proposal (e.g. a handoff target the agent lacks)
            result = marked(run, proposal, "InterventionRefused", f"intervention refused: {exc.message}")
        except TimeoutError:
            result = marked(run, proposal, "ReplayTimeout", f"the replay did not finish within {timeout_s:g} s")
        except Exception as exc:  # a factory, verifier or framework that raises: this replay failed, not the search
            result = marked(run, proposal, type(exc).__name__, f"the replay raised {type(exc).__name__}: {exc}")
    return with_mark(result, problems), buffer.getvalue()


def guarded_verifier(verify: Any, problems: list[str]) -> Any:
    """``verify`` that notes in ``problems`` when it raises or returns neither a Verdict nor a bool (and raises
    then, as the run marking expects). Its signature is the original's (``functools.wraps``), so a verifier taking
    the answer text still gets the text."""
    if verify is None or isinstance(verify, str) or not callable(verify):
        return verify

    def checked(result: Any) -> Any:
        if isinstance(result, (bool, Verdict)):
            return result
        problems.append(f"the verifier returned {type(result).__name__}, not a Verdict or a bool")
        raise TypeError(problems[-1])

    async def checked_async(awaitable: Any) -> Any:
        try:
            result = await awaitable
        except Exception as exc:
            problems.append(f"the verifier raised {type(exc).__name__}: {exc}")
            raise
        return checked(result)

    @functools.wraps(verify)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            result = verify(*args, **kwargs)
        except Exception as exc:
            problems.append(f"the verifier raised {type(exc).__name__}: {exc}")
            raise
        return checked_async(result) if inspect.isawaitable(result) else checked(result)

    return guarded


def with_mark(result: ReplayResult, problems: list[str]) -> ReplayResult:
    """``result`` marked when its verifier broke (``VerifierError``) or the replayed run ended in an exception that
    did not flip it (the exception's type) — bad input the repair report must show."""
    if result.error is not None:
        return result
    if problems:
        return result.model_copy(update={"flipped": False,
                                         "error": StepError(type="VerifierError", message=problems[0][:2000])})
    new = result.run
    if new is None or result.flipped or new.outcome.stop != "error":
        return result
    failed = next((s for s in new.steps if s.kind == "error"), None)
    kind = failed.error.type if failed is not None and failed.error is not None else "RunError"
    said = failed.error.message if failed is not None and failed.error is not None else (
        failed.content if failed is not None else new.outcome.reason)
    return result.model_copy(update={"error": StepError(type=kind, message=f"the replayed run raised {kind}: "
                                                                           f"{said}"[:2000])})


async def bounded(coro: Any, timeout_s: float | None) -> Any:
    """``await coro``, but give up after ``timeout_s``: the replay is cancelled and NOT waited for beyond a short
    grace (a framework's cleanup may itself wait on the stuck call); it dies with the search's event loop."""
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:  # a replay that ran ahead of an earlier flip: stop it too
        task.cancel()
        raise
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=2.0)
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    raise TimeoutError


def marked(run: Run, proposal: Intervention, kind: str, message: str) -> ReplayResult:
    """A replay that produced no run, marked ``kind``. It counts as one replay run (and against the search's budget:
    a factory that raises on every build must not make the search unbounded) unless the adapter refused the
    proposal before anything ran."""
    return ReplayResult(
        original_run_id=run.run_id,
        intervention=proposal,
        outcome=Outcome(status="unknown", reason=message),
        flipped=False,
        replays_run=0 if kind == "InterventionRefused" else 1,
        error=StepError(type=kind, message=message[:2000]),
    )
