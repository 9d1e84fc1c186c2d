"""The persistent Python worker that runs INSIDE a sandbox (stdlib only; ARCHITECTURE decision 7).

It speaks one JSON object per line with the parent (:class:`causaltrace.replay.sandbox.PythonWorkerSession`) over
private duplicates of its stdin/stdout; the real fds 0/1 are then pointed at ``/dev/null`` and stderr, so nothing
the code prints or reads can reach the channel. Globals persist between ``exec`` requests.

Parent → worker: ``{"type": "init", "id", "functions": [names], "final_answer_name", "max_output_bytes"}``,
``{"type": "set", "id", "variables": {...}}``, ``{"type": "exec", "id", "code"}``, ``{"type": "result" | "error",
"id", ...}`` (answers to call-backs) and ``{"type": "shutdown"}``.

Worker → parent: ``{"type": "ready"}`` once at start, ``{"type": "ok", "id"}`` for init/set, ``{"type": "call",
"id", "name", "args", "kwargs"}`` when the code calls a registered function (the call blocks until the parent
answers: a ``result`` is returned, an ``error`` raised — as the builtin exception of the same name when there is
one, else ``CallbackError``), and per exec ``{"type": "done", "id", "stdout", "stderr", "exit_code", "error",
"error_type", "output", "output_repr", "is_final_answer", "final_answer"?}``. ``stdout`` / ``stderr`` capture
everything written to fds 1/2 during the exec (subprocesses and C extensions included). ``output`` is the value of a
trailing expression (as smolagents' executor reports it). Calling ``final_answer(...)`` (the registered name, default
``final_answer``) asks the parent when it registered that name, stops the snippet and reports ``final_answer``.

The channel is trusted by nobody: code in the worker can forge messages, which only lets it call the functions it
could call anyway or misreport its own result.
"""

import ast
import builtins
import io
import itertools
import json
import linecache
import os
import sys
import tempfile
import traceback


class CallbackError(Exception):
    """A call-back to the parent failed with an exception that has no builtin counterpart."""


class _FinalAnswer(BaseException):
    def __init__(self, value):
        super().__init__("final answer")
        self.value = value


def _fallback(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return repr(value)


def _format_exception(exc):
    """The traceback of the user's code only: the worker's own frames (exec, call-back proxies) are left out."""
    here = os.path.abspath(__file__)
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    report.stack = traceback.StackSummary.from_list(
        [frame for frame in report.stack if os.path.abspath(frame.filename) != here]
    )
    return "".join(report.format())


class Channel:
    """Framed JSON over private copies of fds 0 and 1."""

    def __init__(self):
        self.rfile = os.fdopen(os.dup(0), "rb")
        self.wfile = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(2, 1)  # stray writes to fd 1 between execs go to stderr, never into the channel
        os.close(null)

    def send(self, message):
        data = json.dumps(message, default=_fallback, separators=(",", ":"), ensure_ascii=False)
        self.wfile.write(data.encode("utf-8", errors="surrogateescape") + b"\n")
        self.wfile.flush()

    def recv(self):
        while True:
            line = self.rfile.readline()
            if not line:
                raise EOFError
            if line.strip():
                return json.loads(line)


class Worker:
    """Executes snippets with persistent globals and proxies registered functions to the parent."""

    def __init__(self, channel):
        self.channel = channel
        self.ids = itertools.count(1)
        self.functions = []
        self.final_answer_name = "final_answer"
        self.max_output = 1 << 20
        self.cell = 0
        self.globals = {"__name__": "__main__", "__builtins__": builtins}
        self.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        self.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        sys.stdin = open(os.devnull)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        sys.__stdout__, sys.__stderr__ = self.stdout, self.stderr  # unbuffered too, so captured per exec

    # ------------------------------------------------------------------ call-backs

    def call(self, name, args, kwargs):
        call_id = f"c{next(self.ids)}"
        self.channel.send({"type": "call", "id": call_id, "name": name, "args": list(args), "kwargs": kwargs})
        while True:
            try:
                message = self.channel.recv()
            except EOFError:
                os._exit(0)
            if message.get("id") != call_id:
                continue
            if message.get("type") == "result":
                return message.get("value")
            text = str(message.get("error", ""))
            exc_type = getattr(builtins, str(message.get("exc_type", "")), None)
            if isinstance(exc_type, type) and issubclass(exc_type, Exception):
                args = message.get("args")
                try:
                    error = exc_type(*args) if isinstance(args, list) and args else exc_type(text)
                except Exception:  # a constructor with another signature: fall back to the text
                    error = exc_type(text)
                raise error
            raise CallbackError(f"{message.get('exc_type', 'Error')}: {text}")

    def _proxy(self, name):
        def proxy(*args, **kwargs):
            return self.call(name, args, kwargs)

        proxy.__name__ = proxy.__qualname__ = name
        return proxy

    def _final_answer(self, *args, **kwargs):
        if self.final_answer_name in self.functions:
            value = self.call(self.final_answer_name, args, kwargs)
        else:
            value = args[0] if args else next(iter(kwargs.values()), None)
        raise _FinalAnswer(value)

    def _inject(self):
        for name in self.functions:
            self.globals[name] = self._proxy(name)
        if self.final_answer_name:
            self.globals[self.final_answer_name] = self._final_answer

    # ------------------------------------------------------------------ execution

    def _run(self, code, filename):
        tree = ast.parse(code, filename=filename, mode="exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), self.globals)
        if last is not None:
            return True, eval(compile(last, filename, "eval"), self.globals)
        return False, None

    def _read(self, handle):
        handle.flush()
        size = handle.seek(0, os.SEEK_END)
        handle.seek(0)
        data = handle.read(self.max_output)
        text = data.decode("utf-8", errors="replace")
        if size > self.max_output:
            text += f"\n[causaltrace sandbox: {size - self.max_output} more bytes of output dropped]\n"
        return text

    def execute(self, message):
        code = str(message.get("code", ""))
        self.cell += 1
        filename = f"<cell {self.cell}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True) or [""], filename)
        self._inject()
        result = {
            "type": "done",
            "id": message.get("id"),
            "exit_code": 0,
            "error": None,
            "error_type": None,
            "output": None,
            "output_repr": None,
            "is_final_answer": False,
        }
        out_file = tempfile.TemporaryFile()
        err_file = tempfile.TemporaryFile()
        saved_out, saved_err = os.dup(1), os.dup(2)
        try:
            os.dup2(out_file.fileno(), 1)
            os.dup2(err_file.fileno(), 2)
            try:
                has_value, value = self._run(code, filename)
                if has_value:
                    result["output"] = value
                    result["output_repr"] = repr(value)[:10000]
            except _FinalAnswer as answer:
                result.update(
                    is_final_answer=True,
                    final_answer=answer.value,
                    output=answer.value,
                    output_repr=repr(answer.value)[:10000],
                )
            except SystemExit as exc:
                status = exc.code
                if status is None or isinstance(status, int):
                    result["exit_code"] = status or 0
                else:
                    print(status, file=sys.stderr)
                    result["exit_code"] = 1
            except BaseException as exc:  # report everything the code raised; the worker carries on
                result["exit_code"] = 1
                result["error_type"] = type(exc).__name__
                result["error"] = _format_exception(exc)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # the code may have closed or replaced them: nothing to flush
                    pass
            sys.stdout, sys.stderr = self.stdout, self.stderr
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            result["stdout"] = self._read(out_file)
            result["stderr"] = self._read(err_file)
            out_file.close()
            err_file.close()
        return result

    def send_result(self, result):
        """Send an exec's result; a value that cannot be encoded (nested too deeply, circular) becomes the exec's
        error instead of ending the worker (the parent would lose every variable)."""
        try:
            self.channel.send(result)
            return
        except RecursionError:
            why = "nested too deeply to encode as JSON"
        except (TypeError, ValueError) as exc:
            why = f"not encodable as JSON ({exc})"
        result.update(output=None, output_repr=None, is_final_answer=False, exit_code=1, error_type="ValueError")
        result.pop("final_answer", None)
        result["error"] = f"ValueError: the value of the snippet cannot be sent to the parent: it is {why}\n"
        self.channel.send(result)

    # ------------------------------------------------------------------ main loop

    def serve(self):
        self.channel.send({"type": "ready", "pid": os.getpid(), "python": sys.version.split()[0]})
        while True:
            try:
                message = self.channel.recv()
            except EOFError:
                return
            kind = message.get("type")
            if kind == "exec":
                self.send_result(self.execute(message))
            elif kind == "init":
                self.functions = [str(name) for name in message.get("functions", [])]
                self.final_answer_name = message.get("final_answer_name") or ""
                self.max_output = int(message.get("max_output_bytes") or self.max_output)
                self.channel.send({"type": "ok", "id": message.get("id")})
            elif kind == "set":
                self.globals.update(message.get("variables") or {})
                self.channel.send({"type": "ok", "id": message.get("id")})
            elif kind == "shutdown":
                return
            elif kind not in ("result", "error"):  # late answers to call-backs are dropped
                self.channel.send({"type": "error", "id": message.get("id"), "error": f"unknown type {kind!r}"})


def main():
    Worker(Channel()).serve()


if __name__ == "__main__":
    main()
