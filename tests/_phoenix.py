"""Test helper: run the Arize Phoenix that scripts/install_phoenix.sh installs into its own virtualenv.

    from _phoenix import phoenix_python, running_phoenix

    with running_phoenix(tmp_path) as phoenix:      # the caller decides whether a missing Phoenix skips or fails
        export to phoenix.otlp_http_traces_url
        phoenix.spans("my-project")                 # GET /v1/projects/{name}/spans, every page
        phoenix.graphql("{ projects { edges { node { name traceCount } } } }")

Each instance gets free loopback ports (HTTP and gRPC), a temporary working dir (its SQLite database) and a log
file in the caller's directory; it is stopped by its pid. Only the standard library is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
ENV_VENV = "CAUSALTRACE_PHOENIX_VENV"
#: Phoenix needs ~10 s to start on an idle machine, over a minute on a loaded one.
START_TIMEOUT_S = 240.0


def phoenix_python() -> Path | None:
    """The Python of Phoenix's own venv ($CAUSALTRACE_PHOENIX_VENV or the install script's cache path), or None."""
    env = os.environ.get(ENV_VENV)
    venv = Path(env).expanduser() if env else Path.home() / ".cache/causaltrace/phoenix-venv"
    python = venv / "bin" / "python"
    if not python.is_file():
        return None
    probe = subprocess.run([str(python), "-c", "import phoenix.server.main"], capture_output=True, timeout=120)
    return python if probe.returncode == 0 else None


@dataclasses.dataclass(frozen=True)
class PhoenixInstance:
    url: str  # http://127.0.0.1:PORT: the UI, REST (/v1/...), GraphQL (/graphql) and OTLP/HTTP (/v1/traces)
    log_path: Path

    @property
    def otlp_http_traces_url(self) -> str:
        return self.url + "/v1/traces"

    def get_json(self, path: str, timeout: float = 30.0) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of ``project`` through the REST API, following its cursor."""
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            page = self.get_json(f"/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}")
            out.extend(page.get("data") or [])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def graphql(self, query: str) -> Any:
        body = json.dumps({"query": query}).encode()
        request = urllib.request.Request(self.url + "/graphql", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read().decode("utf-8"))


def _free_ports(n: int) -> list[int]:
    held = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


@contextlib.contextmanager
def running_phoenix(python: Path, workdir: Path) -> Iterator[PhoenixInstance]:
    """Start Phoenix with ``python`` on free loopback ports, working dir and log under ``workdir``; stop it after."""
    http_port, grpc_port = _free_ports(2)
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PHOENIX_HOST": HOST,
        "PHOENIX_PORT": str(http_port),
        "PHOENIX_GRPC_PORT": str(grpc_port),  # binds every interface whatever PHOENIX_HOST says (FACTS.md)
        "PHOENIX_WORKING_DIR": str(workdir / "phoenix-home"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "PYTHONPATH"):
        env.pop(key, None)
    log_path = workdir / "phoenix.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(python), "-m", "phoenix.server.main", "serve"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    instance = PhoenixInstance(url=f"http://{HOST}:{http_port}", log_path=log_path)
    try:
        _wait_ready(instance, proc)
        yield instance
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _wait_ready(instance: PhoenixInstance, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = instance.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Phoenix exited with {proc.returncode} before it was ready:\n{tail}")
        try:
            with urllib.request.urlopen(instance.url + "/healthz", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)
    raise RuntimeError(f"Phoenix did not answer on {instance.url} within {START_TIMEOUT_S:.0f} s")
