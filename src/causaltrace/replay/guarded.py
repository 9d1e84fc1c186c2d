"""One replay of the repair search, guarded (issue 19, "Bad input"; issue 36 item 3): its output captured, its time
bounded whatever the user's code does, and bad input turned into a MARKED result (``ReplayResult.error``) instead of
an exception, so the search goes on and the repair report shows what happened.

Where the user's code runs: the replay on an event loop of its own in a daemon worker thread
(:func:`~causaltrace.replay.concurrency.in_own_loop`), its factory and a synchronous verifier each in a daemon thread
of their own waited for until the replay's deadline (:class:`Watch`). So a factory, a tool or a verifier that blocks
its thread holds neither the search's loop nor the replay's past its deadline — the per-replay timeout and the
search's ``max_seconds`` fire — and a ``SystemExit`` / ``KeyboardInterrupt`` that escapes a framework's task (asyncio
re-raises those out of the loop) ends the replay's own loop, not the search. A stuck thread is abandoned (a daemon:
it never holds up the process's exit).

==============================================  ========================================================
what went wrong                                 the mark (``error.type``)
==============================================  ========================================================
the adapter refused the proposal                ``InterventionRefused`` (e.g. a handoff target the agent lacks)
the replay outlived ``timeout_s``               ``FactoryTimeout`` / ``VerifierTimeout`` when the factory / the
                                                verifier was the one running, else ``ReplayTimeout`` (cancelled,
                                                waited for 2 s at most)
user code raised ``SystemExit`` or              ``SystemExit`` / ``KeyboardInterrupt`` (that replay only; the
``KeyboardInterrupt``                           user's own Ctrl-C stops the command: :mod:`causaltrace.cli.interrupt`)
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
import contextvars
import functools
import inspect
import io
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from causaltrace.exceptions import UserError
from causaltrace.protocols import Factory
from causaltrace.replay.concurrency import UserCodeExit, captured, in_own_loop
from causaltrace.replay.executor import replay
from causaltrace.schema import Intervention, Outcome, ReplayResult, Run, StepError, Verdict

__all__ = ["UserCodeTimeout", "Watch", "bounded", "captured_output", "guarded_replay", "guarded_verifier", "marked",
           "watched_factory", "with_mark"]

#: A problem already named by its mark's type (``VerifierTimeout: …``, ``SystemExit: …``)
_MARKED = re.compile(r"^(VerifierTimeout|SystemExit|KeyboardInterrupt): ")


@contextlib.asynccontextmanager
async def captured_output() -> AsyncIterator[io.StringIO]:
    """Everything this replay prints to stdout / stderr inside the block (a framework's tracebacks and panels)
    goes to the yielded buffer instead of the user's terminal; concurrent replays each get their own
    (:mod:`causaltrace.replay.concurrency`)."""
    with captured() as buffer:
        yield buffer


class UserCodeTimeout(Exception):
    """The factory or the verifier did not return before the replay's deadline (its thread is abandoned)."""


@dataclass
class Watch:
    """One replay's user code under watch (issue 36 item 3): its deadline, what runs now (``the factory``, ``the
    verifier``) and what outlived the deadline, so a replay that times out names what hung."""

    timeout_s: float | None
    started: float = field(default_factory=time.monotonic)
    running: str = ""
    hung: str = ""

    def remaining(self) -> float | None:
        return None if self.timeout_s is None else max(0.0, self.started + self.timeout_s - time.monotonic())

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a daemon thread of its own (this context copied), waited for until the
        deadline: a call that blocks raises :class:`UserCodeTimeout` naming ``what`` instead of holding its caller
        (the replay's event loop) forever; ``SystemExit`` / ``KeyboardInterrupt`` come back as
        :class:`UserCodeExit`."""
        box: dict[str, Any] = {}
        context = contextvars.copy_context()

        def target() -> None:
            try:
                box["value"] = context.run(fn, *args, **kwargs)
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

        thread = threading.Thread(target=target, daemon=True, name=f"causaltrace-{what.split()[-1]}")
        self.running = what
        thread.start()
        thread.join(self.remaining())
        if thread.is_alive():
            self.hung = what
            raise UserCodeTimeout(f"{what} did not return within {_seconds(self.timeout_s)} s")
        self.running = ""
        error = box.get("error")
        if isinstance(error, (SystemExit, KeyboardInterrupt)):
            raise UserCodeExit(error) from None
        if error is not None:
            raise error
        return box.get("value")

    async def wait(self, what: str, awaitable: Any) -> Any:
        """``await awaitable`` until the deadline (:class:`UserCodeTimeout` naming ``what`` after it)."""
        self.running = what
        try:
            result = await asyncio.wait_for(awaitable, self.remaining())
        except TimeoutError:
            self.hung = what
            raise UserCodeTimeout(f"{what} did not return within {_seconds(self.timeout_s)} s") from None
        except (SystemExit, KeyboardInterrupt) as exc:
            raise UserCodeExit(exc) from None
        self.running = ""
        return result

    def timeout_mark(self) -> tuple[str, str]:
        """The mark of a replay that outlived its deadline: what hung, when the watch knows it."""
        what = self.hung or self.running
        kinds = {"the factory": "FactoryTimeout", "the verifier": "VerifierTimeout"}
        if what in kinds:
            return kinds[what], f"{what} did not return within {_seconds(self.timeout_s)} s"
        return "ReplayTimeout", f"the replay did not finish within {_seconds(self.timeout_s)} s"


def _seconds(value: float | None) -> str:
    return f"{round(value or 0.0, 1):g}"


def watched_factory(factory: Factory, watch: Watch) -> Factory:
    """``factory`` run under ``watch`` (a factory that blocks cannot hold the replay's loop)."""

    @functools.wraps(factory)
    def build(*args: Any, **kwargs: Any) -> Any:
        built = watch.call("the factory", factory, *args, **kwargs)
        return watch.wait("the factory", built) if inspect.isawaitable(built) else built  # an async factory

    return build


async def guarded_replay(run: Run, factory: Factory, proposal: Intervention, verify: Any, *, timeout_s: float | None,
                           **kwargs: Any) -> tuple[ReplayResult, str]:
    """One replay with its output captured, run on an event loop of its own in a worker thread
    (:func:`~causaltrace.replay.concurrency.in_own_loop`) with its factory and verifier watched (:class:`Watch`): a
    refused proposal, a replay that raises, one that outlives ``timeout_s`` (named by what hung: the factory, the
    verifier, else the replay), a broken verifier, user code raising ``SystemExit`` / ``KeyboardInterrupt`` and a
    framework that raised each become a marked result (``error``; module docstring), so the search goes on."""
    problems: list[str] = []
    watch = Watch(timeout_s)
    async with captured_output() as buffer:
        try:
            result = await in_own_loop(lambda: replay(run, watched_factory(factory, watch), proposal,
                                                      guarded_verifier(verify, problems, watch), **kwargs), timeout_s)
        except UserError as exc:  # the adapter refused this proposal (e.g. a handoff target the agent lacks)
            result = marked(run, proposal, "InterventionRefused", f"intervention refused: {exc.message}")
        except (TimeoutError, UserCodeTimeout):
            result = marked(run, proposal, *watch.timeout_mark())
        except UserCodeExit as exc:  # a tool (or the factory) raised SystemExit / KeyboardInterrupt: this replay
            result = marked(run, proposal, exc.kind, f"the replay's {exc}")
        except Exception as exc:  # a factory, verifier or framework that raises: this replay failed, not the search
            result = marked(run, proposal, type(exc).__name__, f"the replay raised {type(exc).__name__}: {exc}")
    return with_mark(result, problems), buffer.getvalue()


def guarded_verifier(verify: Any, problems: list[str], watch: Watch | None = None) -> Any:
    """``verify`` that notes in ``problems`` when it raises, returns neither a Verdict nor a bool, or (under
    ``watch``) does not return before the replay's deadline — run in a thread of its own when it is synchronous, so
    a verifier that blocks cannot hold the replay — and raises then, as the run marking expects. Its signature is
    the original's (``functools.wraps``), so a verifier taking the answer text still gets the text."""
    if verify is None or isinstance(verify, str) or not callable(verify):
        return verify

    def checked(result: Any) -> Any:
        if isinstance(result, (bool, Verdict)):
            return result
        problems.append(f"the verifier returned {type(result).__name__}, not a Verdict or a bool")
        raise TypeError(problems[-1])

    def noted(exc: BaseException) -> None:
        if isinstance(exc, UserCodeTimeout):
            problems.append(f"VerifierTimeout: {exc}")
        elif isinstance(exc, UserCodeExit):
            problems.append(f"{exc.kind}: the verifier {str(exc).removeprefix('user code ')}")
        else:
            problems.append(f"the verifier raised {type(exc).__name__}: {exc}")

    async def checked_async(awaitable: Any) -> Any:
        try:
            result = await (watch.wait("the verifier", awaitable) if watch is not None else awaitable)
        except Exception as exc:
            noted(exc)
            raise
        return checked(result)

    @functools.wraps(verify)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            result = watch.call("the verifier", verify, *args, **kwargs) if watch is not None else verify(*args, **kwargs)
        except Exception as exc:
            noted(exc)
            raise
        return checked_async(result) if inspect.isawaitable(result) else checked(result)

    return guarded


def with_mark(result: ReplayResult, problems: list[str]) -> ReplayResult:
    """``result`` marked when its verifier broke (``VerifierError``) or the replayed run ended in an exception that
    did not flip it (the exception's type) — bad input the repair report must show."""
    if result.error is not None:
        return result
    if problems:
        kind, _, said = problems[0].partition(": ") if _MARKED.match(problems[0]) else ("VerifierError", "", problems[0])
        return result.model_copy(update={"flipped": False, "error": StepError(type=kind, message=said[:2000])})
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
