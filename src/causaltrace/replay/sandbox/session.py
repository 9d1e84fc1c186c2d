"""``PythonWorkerSession``: a persistent sandboxed Python worker with call-backs to the parent.

ARCHITECTURE decision 7: smolagents CodeAgent code runs in one persistent sandboxed worker per agent run, so
variables persist between steps, and the calls the code makes to tools, managed agents and ``final_answer`` are
proxied back to the parent, where the playback wrappers serve them. The session starts the ready-made worker
(``_pyworker.py``, see its docstring for the protocol) through any :class:`~causaltrace.protocols.Sandbox`'s
``open_worker``, registers the parent's functions by name and services their call-backs while an ``execute`` runs.

Timeouts: ``timeout_s`` bounds the time one ``execute`` waits for the WORKER (time spent inside the parent's
call-backs — a managed agent's whole run — is not counted). On a timeout or a crashed worker ``execute`` returns a
result with ``timed_out`` / the error instead of raising, the worker is killed, and the next ``execute`` starts a
fresh one (its result says ``restarted=True``: variables of earlier steps are gone). ``idle_timeout_s`` is the
worker's idle timeout (``open_worker(timeout_s=...)``): a session left open without traffic is killed by then;
call-backs in progress count as traffic.

One session serves one agent run, from one thread at a time (smolagents steps are sequential; parallel managed agents
each get their own session).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from causaltrace.exceptions import SandboxError, SandboxTimeout
from causaltrace.protocols import Sandbox, Worker
from causaltrace.replay.sandbox.spares import retire_worker, take_spare

__all__ = ["PYWORKER_SOURCE", "PythonWorkerSession"]

logger = logging.getLogger("causaltrace")

#: The worker program's source, for sandboxes that start it with ``python -c`` (e.g. a Docker image).
PYWORKER_SOURCE = (Path(__file__).resolve().parent / "_pyworker.py").read_text(encoding="utf-8")


class PythonWorkerSession:
    """A persistent Python worker in ``sandbox`` whose code can call ``functions`` living in the parent.

    Args:
        sandbox: any Sandbox; its ``python_worker_argv()`` is used when it has one, else
            ``["python3", "-c", PYWORKER_SOURCE]``.
        functions: name -> callable, exposed inside the worker as Python functions that call back to the parent
            (arguments and results travel as JSON; other values arrive as their ``repr``). A parent exception is
            raised inside the worker as the builtin exception of the same name, else as ``CallbackError``.
        timeout_s: the longest one ``execute`` may keep the worker busy (call-backs excluded).
        memory_mb: the worker's memory limit.
        idle_timeout_s: the worker is killed after this long without any traffic.
        final_answer_name: the name whose call ends a snippet and is reported as ``final_answer``; when it is also
            in ``functions``, the parent's function is called first and its return value is the answer.
        start_timeout_s: how long to wait for the worker to come up.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        functions: Mapping[str, Callable[..., Any]] | None = None,
        *,
        timeout_s: float,
        memory_mb: int,
        idle_timeout_s: float = 600.0,
        final_answer_name: str = "final_answer",
        start_timeout_s: float = 60.0,
        max_output_bytes: int = 1 << 20,
    ) -> None:
        self.sandbox = sandbox
        self.functions: dict[str, Callable[..., Any]] = dict(functions or {})
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.idle_timeout_s = idle_timeout_s
        self.final_answer_name = final_answer_name
        self.start_timeout_s = start_timeout_s
        self.max_output_bytes = max_output_bytes
        self._ids = itertools.count(1)
        self._worker: Worker | None = None
        self._closed = False
        self._start()

    # ------------------------------------------------------------------------------------------ life cycle

    def _argv(self) -> list[str]:
        getter = getattr(self.sandbox, "python_worker_argv", None)
        return list(getter()) if callable(getter) else ["python3", "-c", PYWORKER_SOURCE]

    def _start(self) -> None:
        argv = self._argv()
        spare = take_spare(self.sandbox, argv, idle_s=self.idle_timeout_s, memory_mb=self.memory_mb,
                           start_timeout_s=self.start_timeout_s)  # within a repair search (:mod:`.spares`)
        worker = spare or self.sandbox.open_worker(argv, timeout_s=self.idle_timeout_s, memory_mb=self.memory_mb)
        try:
            hello = {"type": "ready"} if spare is not None else worker.recv(timeout_s=self.start_timeout_s)
            if hello.get("type") != "ready":
                raise SandboxError(f"the Python worker greeted with {hello!r} instead of 'ready'")
            self._worker = worker
            self._request(
                {
                    "type": "init",
                    "functions": sorted(self.functions),
                    "final_answer_name": self.final_answer_name,
                    "max_output_bytes": self.max_output_bytes,
                }
            )
        except SandboxError as exc:
            self._worker = None
            worker.close()
            raise SandboxError(f"the sandboxed Python worker did not start: {exc.message}") from exc

    def _discard_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a control message and wait for its ``ok``."""
        assert self._worker is not None
        message = {**message, "id": f"r{next(self._ids)}"}
        self._worker.send(message)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            answer = self._worker.recv(timeout_s=max(0.001, deadline - time.monotonic()))
            if answer.get("id") == message["id"]:
                if answer.get("type") != "ok":
                    raise SandboxError(f"the worker refused {message['type']!r}: {answer.get('error')}")
                return answer

    @property
    def alive(self) -> bool:
        """Whether a worker is running (after a timeout or crash the next ``execute`` starts a new one)."""
        return self._worker is not None

    def close(self) -> None:
        """Stop the worker. Idempotent."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None:
            with contextlib.suppress(SandboxError):
                worker.send({"type": "shutdown"})
            if not retire_worker(worker):  # within a repair search it is closed in the background (.spares)
                worker.close()

    def __enter__(self) -> PythonWorkerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ use

    def set_variables(self, variables: Mapping[str, Any]) -> None:
        """Assign JSON-serialisable ``variables`` as globals in the worker (smolagents' ``send_variables``)."""
        self._ensure_worker()
        self._request({"type": "set", "variables": dict(variables)})

    def _ensure_worker(self) -> bool:
        if self._closed:
            raise SandboxError("the Python worker session is closed")
        if self._worker is None:
            self._start()
            return True
        return False

    def execute(self, code: str, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Run ``code`` in the worker, servicing call-backs, and return its result.

        Keys: ``stdout``, ``stderr``, ``exit_code`` (0, 1 for an exception, a ``SystemExit`` status, -9 when
        killed), ``error`` (the traceback text or ``None``), ``error_type``, ``output`` / ``output_repr`` (a trailing
        expression's value), ``is_final_answer`` and — when ``final_answer`` was called — ``final_answer``, plus
        ``timed_out``, ``restarted``, ``calls`` (call-backs serviced) and ``duration_s``.
        """
        restarted = self._ensure_worker()
        worker = self._worker
        assert worker is not None
        budget = self.timeout_s if timeout_s is None else timeout_s
        started = time.monotonic()
        request_id = f"x{next(self._ids)}"
        calls = 0
        waited = 0.0
        try:
            worker.send({"type": "exec", "id": request_id, "code": code})
            while True:
                before = time.monotonic()
                message = worker.recv(timeout_s=max(0.001, budget - waited))
                waited += time.monotonic() - before
                kind = message.get("type")
                if kind == "call":
                    calls += 1
                    self._serve_call(worker, message)
                elif kind == "done" and message.get("id") == request_id:
                    result = {key: value for key, value in message.items() if key not in ("type", "id")}
                    result.update(timed_out=False, restarted=restarted, calls=calls)
                    result["duration_s"] = round(time.monotonic() - started, 6)
                    return result
                else:
                    logger.debug("causaltrace sandbox: ignoring worker message %r", message)
        except SandboxTimeout:
            self._discard_worker()
            error = (
                f"TimeoutError: the code did not finish within {budget:g}s; the sandboxed worker was killed and its "
                "variables are lost\n"
            )
            return self._failure(error, "TimeoutError", -9, True, restarted, calls, started)
        except SandboxError as exc:
            self._discard_worker()
            return self._failure(
                f"the sandboxed worker died: {exc.message}\n", "SandboxError", -9, False, restarted, calls, started
            )

    def _failure(
        self, error: str, error_type: str, exit_code: int, timed_out: bool, restarted: bool, calls: int, started: float
    ) -> dict[str, Any]:
        return {
            "stdout": "",
            "stderr": "",
            "exit_code": exit_code,
            "error": error,
            "error_type": error_type,
            "output": None,
            "output_repr": None,
            "is_final_answer": False,
            "timed_out": timed_out,
            "restarted": restarted,
            "calls": calls,
            "duration_s": round(time.monotonic() - started, 6),
        }

    def _serve_call(self, worker: Worker, message: Mapping[str, Any]) -> None:
        name = str(message.get("name"))
        call_id = message.get("id")
        function = self.functions.get(name)
        args = message.get("args") or []
        kwargs = message.get("kwargs") or {}
        with _busy(worker):
            if function is None:
                answer = {
                    "type": "error",
                    "id": call_id,
                    "exc_type": "NameError",
                    "error": f"{name!r} is not a function of the parent",
                }
            else:
                try:
                    answer = {"type": "result", "id": call_id, "value": function(*args, **kwargs)}
                except Exception as exc:  # the code sees the failure as an exception of its own
                    answer = {
                        "type": "error",
                        "id": call_id,
                        "exc_type": type(exc).__name__,
                        "error": str(exc),
                        "args": list(exc.args),
                    }
        try:
            worker.send(answer)
        except (TypeError, ValueError, RecursionError) as exc:  # not even its repr fallback serialises (circular, deep)
            error = f"the result of {name!r} cannot be sent to the sandbox: {exc}"
            worker.send({"type": "error", "id": call_id, "exc_type": "TypeError", "error": error})


@contextlib.contextmanager
def _busy(worker: Worker) -> Iterator[None]:
    """Pause the worker's idle clock while the parent services a call-back (when the worker supports it)."""
    busy = getattr(worker, "busy", None)
    if callable(busy):
        with busy():
            yield
    else:
        yield
