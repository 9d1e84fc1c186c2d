"""The smolagents CodeAgent executor during replay (ARCHITECTURE decision 7): :class:`SandboxedCodeExecutor`
runs the code in a persistent sandboxed Python worker per agent — opened with the ``open_session`` that ``replay/``
injects (``PythonWorkerSession`` over the injected ``Sandbox``), so this package never imports ``replay`` — and
the code's calls to tools, managed agents and ``final_answer`` come back to the parent over the worker's pipe,
where the playback tool copies serve them. ``agent.python_executor`` is replaced AFTER construction (smolagents
refuses remote executors with managed agents only at construction, FACTS.md).

While the edit is not yet applied, a code execution whose request matches returns the RECORDED output (code that
reads the time, random numbers or set order would otherwise diverge, FACTS.md); once it is applied, the actual
output is returned — counted as served when it equals the recorded one, else live.

This module imports smolagents at its top; ``_playback.py`` imports it only when a playback is assembled.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from smolagents.local_python_executor import CodeOutput, check_import_authorized

from causaltrace.exceptions import ReplayError
from causaltrace.instrumentation._playback_common import exception_of
from causaltrace.instrumentation.smolagents._playback_keys import key_and_pattern
from causaltrace.instrumentation.smolagents._playback_tools import code_callable
from causaltrace.protocols import PlaybackCore, SessionOpener
from causaltrace.recording import canonicalize_request, request_hash
from causaltrace.schema import RecordedCall

__all__ = ["SandboxedCodeExecutor"]

logger = logging.getLogger("causaltrace")


class _CodeError(Exception):
    """Code that failed in the sandbox, worded like smolagents' own executor errors."""


class SandboxedCodeExecutor:
    """A smolagents ``PythonExecutor`` for a CodeAgent during replay: the code runs in a persistent sandboxed worker
    (one per agent; variables persist between steps, opened with the injected ``open_session``); tools, managed
    agents and ``final_answer`` are parent-side functions (``_playback_tools.code_callable``). Without a sandbox it
    runs the agent's own ``LocalPythonExecutor``."""

    def __init__(self, core: PlaybackCore, agent: Any, key: str, sandbox: Any, *, timeout_s: float,
                 memory_mb: int, open_session: SessionOpener | None = None, local: Any = None,
                 recorded_stdout: Mapping[str, str] | None = None) -> None:
        self.core = core
        self.open_session = open_session
        #: The recorded stdout of each code_execution step (served with a recorded error: smolagents reads it).
        self.recorded_stdout = dict(recorded_stdout or {})
        self.agent = agent
        self.key = key
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.local = local
        self.state: dict[str, Any] = {"_print_outputs": ""}
        self._functions: dict[str, Callable[..., Any]] = {}
        self._variables: dict[str, Any] = {}
        self._session: Any = None
        self.runs = 0

    # -- the PythonExecutor interface ---------------------------------------------------------------------------

    def send_tools(self, tools: Mapping[str, Any]) -> None:
        functions = {name: code_callable(self.core, self.agent, self.key, name) for name in tools}
        if self._session is not None and set(functions) != set(self._functions):
            self.cleanup()
        self._functions = functions
        if self.local is not None:
            self.local.send_tools(functions)

    def send_variables(self, variables: Mapping[str, Any]) -> None:
        if self.local is not None:
            self.local.send_variables(variables)
            return
        plain = {}
        for name, value in variables.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                logger.warning("causaltrace replay: variable %r is not JSON and is not sent to the sandbox", name)
                continue
            plain[str(name)] = value
        self._variables.update(plain)
        if self._session is not None and plain:
            self._session.set_variables(plain)

    def __call__(self, code_action: str) -> Any:
        core = self.core
        core.check()
        key, _ = key_and_pattern(self.agent, self.key)
        ordinal = core.next_ordinal(key, "tool")
        canonical = canonicalize_request({"name": "python_interpreter", "arguments": {"code": code_action}})
        decision = core.decide(key, "tool", ordinal, request_hash(canonical), canonical, "code execution")
        error: BaseException | None = None
        output: Any = None
        try:
            output = self._execute(code_action)
        except _CodeError as exc:
            error = exc
        core.check()  # a divergence inside (a managed agent's) call-backs ends the step here
        rec = decision.call
        # "rerun": code that called managed agents (whose calls are nested in it) — code always runs anyway
        if decision.action in ("serve", "rerun") and rec is not None:
            if not core.applied:  # before the intervention: the recorded output (time, random, set order)
                core.count("serve")
                return self._recorded(rec)
            if error is None and rec.error is None and _same_output(rec.decoded_response(), output):
                core.count("serve")
                return output
        core.count("live")
        if error is not None:
            raise error
        return output

    def cleanup(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                session.close()
            except Exception:  # closing a dead worker: nothing left to do
                logger.debug("causaltrace replay: closing the sandboxed worker failed", exc_info=True)

    # -- internals ------------------------------------------------------------------------------------------------

    def _recorded(self, rec: RecordedCall) -> Any:
        if rec.error is not None or rec.response is None:
            step_logs = self.recorded_stdout.get(rec.step_id or "", "")
            self.state["_print_outputs"] = step_logs
            if self.local is not None:
                self.local.state["_print_outputs"] = step_logs
            raise exception_of(rec.error, "InterpreterError") if rec.error is not None else _CodeError(
                "the recorded code execution did not finish")
        return rec.decoded_response()

    def _execute(self, code: str) -> Any:
        self.runs += 1
        self.core.count_code_run()
        if self.local is not None:
            try:
                return self.local(code)
            except Exception as exc:
                self.state["_print_outputs"] = str(self.local.state.get("_print_outputs", ""))
                raise _CodeError(str(exc)) from exc
        self._check_imports(code)
        if self._session is None:
            if self.open_session is None:
                raise ReplayError("a sandboxed CodeAgent replay needs a session factory (open_session)")
            self._session = self.open_session(self.sandbox, self._functions, timeout_s=self.timeout_s,
                                              memory_mb=self.memory_mb)
            if self._variables:
                self._session.set_variables(self._variables)
        result = self._session.execute(_with_trailing_value(code))
        logs = str(result.get("stdout") or "")
        self.state["_print_outputs"] = logs
        if result.get("timed_out"):
            raise _CodeError(f"Code execution failed: the code did not finish within {self.timeout_s:g} seconds")
        if result.get("exit_code") not in (0, None) or result.get("error"):
            raise _CodeError(_error_text(code, result))
        if result.get("is_final_answer"):
            return CodeOutput(output=result.get("final_answer"), logs=logs, is_final_answer=True)
        return CodeOutput(output=result.get("output"), logs=logs, is_final_answer=False)

    def _check_imports(self, code: str) -> None:
        """smolagents' import rule, applied before the code reaches the sandbox (the sandbox would allow more)."""
        authorized = list(getattr(self.agent, "authorized_imports", None) or [])
        if not authorized or "*" in authorized:
            return
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return  # the worker reports it
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if not check_import_authorized(name, authorized):
                    line = ast.get_source_segment(code, node) or name
                    raise _CodeError(
                        f"Code execution failed at line '{line}' due to: InterpreterError: Import of {name} is not "
                        f"allowed. Authorized imports are: {authorized}"
                    )


def _same_output(recorded: Any, actual: Any) -> bool:
    try:
        return (bool(recorded.is_final_answer) == bool(actual.is_final_answer) and recorded.logs == actual.logs
                and recorded.output == actual.output)
    except Exception:
        return False


def _with_trailing_value(code: str) -> str:
    """LocalPythonExecutor reports the value of the last statement, an assignment included; the worker reports a
    trailing expression's value only — so a trailing assignment to one name is followed by that name."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    if not tree.body:
        return code
    last = tree.body[-1]
    target: ast.expr | None = None
    if isinstance(last, ast.Assign) and len(last.targets) == 1:
        target = last.targets[0]
    elif isinstance(last, (ast.AugAssign, ast.AnnAssign)) and getattr(last, "value", None) is not None:
        target = last.target
    if isinstance(target, ast.Name):
        return f"{code.rstrip()}\n{target.id}\n"
    return code


def _error_text(code: str, result: Mapping[str, Any]) -> str:
    trace = str(result.get("error") or result.get("stderr") or "").strip()
    last = trace.splitlines()[-1] if trace else f"exit code {result.get('exit_code')}"
    line = ""
    lines = code.splitlines()
    for text in reversed(trace.splitlines()):
        text = text.strip()
        if text.startswith('File "<cell') and ", line " in text:
            try:
                number = int(text.split(", line ", 1)[1].split(",", 1)[0])
            except ValueError:
                break
            if 1 <= number <= len(lines):
                line = lines[number - 1].strip()
            break
    where = f" at line '{line}'" if line else ""
    return f"Code execution failed{where} due to: {last}"
