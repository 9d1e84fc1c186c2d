"""Test helper: find and run the locally built Jaeger (see scripts/install_jaeger.sh).

    from tests._jaeger import jaeger_binary, running_jaeger

    def test_x(tmp_path):
        with running_jaeger(tmp_path) as jaeger:   # skips the test if Jaeger is not built
            export to jaeger.otlp_http_traces_url / jaeger.otlp_grpc_endpoint
            jaeger.get_json("/api/v3/services")   # {} while empty, then {"services": [...]}

Each instance gets its own free loopback ports (so instances can run side by side), in-memory storage, and a
config copy + log in tmp_path. Only the standard library is used: the ports are edited in the config template
by text substitution.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JAEGER_VERSION = "v1.76.0"
ENV_BIN = "CAUSALTRACE_JAEGER_BIN"
HOST = "127.0.0.1"
CONFIG_TEMPLATE_NAME = "all-in-one.yaml"

# Listening ports in Jaeger v1.76.0's cmd/jaeger/internal/all-in-one.yaml, written `...:PORT"` (endpoints) or
# `port: PORT` (Prometheus metrics reader). Each must occur exactly once in the template.
_TCP_PORTS = {
    "otlp_grpc": 4317,  # receivers.otlp.protocols.grpc.endpoint
    "otlp_http": 4318,  # receivers.otlp.protocols.http.endpoint
    "jaeger_grpc": 14250,  # receivers.jaeger.protocols.grpc.endpoint
    "jaeger_thrift_http": 14268,  # receivers.jaeger.protocols.thrift_http.endpoint
    "zipkin": 9411,  # receivers.zipkin.endpoint
    "sampling_http": 5778,  # extensions.remote_sampling.http.endpoint
    "sampling_grpc": 5779,  # extensions.remote_sampling.grpc.endpoint
    "health": 13133,  # extensions.healthcheckv2.http.endpoint
    "expvar": 27777,  # extensions.expvar.endpoint
    "zpages": 27778,  # extensions.zpages.endpoint
    "metrics": 8888,  # service.telemetry.metrics.readers[0].pull.exporter.prometheus.port
}
_UDP_PORTS = {
    "jaeger_thrift_binary": 6832,  # receivers.jaeger.protocols.thrift_binary.endpoint
    "jaeger_thrift_compact": 6831,  # receivers.jaeger.protocols.thrift_compact.endpoint
}
# Not in the template, where they default to fixed ports: query http 16686 / grpc 16685 (added under
# extensions.jaeger_query) and the health-check gRPC server 13132 (the template's `healthcheckv2: grpc:` is empty,
# which ENABLES it on its default port; we give it an endpoint).
_EXTRA_PORTS = ("query_http", "query_grpc", "health_grpc")


def jaeger_binary() -> Path | None:
    """The Jaeger binary: $CAUSALTRACE_JAEGER_BIN, else the install script's cache path; None if absent."""
    env = os.environ.get(ENV_BIN)
    path = Path(env).expanduser() if env else Path.home() / ".cache/causaltrace/jaeger" / JAEGER_VERSION / "jaeger"
    return path if path.is_file() and os.access(path, os.X_OK) else None


@dataclasses.dataclass(frozen=True)
class JaegerInstance:
    otlp_http_endpoint: str  # base URL, e.g. http://127.0.0.1:PORT (OTEL_EXPORTER_OTLP_ENDPOINT style)
    otlp_grpc_endpoint: str  # http://127.0.0.1:PORT (scheme http => insecure gRPC)
    query_url: str  # http://127.0.0.1:PORT; /api/v3/... and legacy /api/traces
    ports: dict[str, int] = dataclasses.field(default_factory=dict)
    config_path: Path | None = None
    log_path: Path | None = None

    @property
    def otlp_http_traces_url(self) -> str:
        """Full URL for OTLPSpanExporter(endpoint=...) of the OTLP/HTTP exporter."""
        return self.otlp_http_endpoint + "/v1/traces"

    def get_json(self, path: str, timeout: float = 10.0) -> Any:
        """GET query_url + path and decode JSON (raises urllib.error.HTTPError on non-2xx)."""
        with urllib.request.urlopen(self.query_url + path, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))


def _free_ports() -> dict[str, int]:
    """Distinct free loopback ports; all sockets are held open until every port is chosen."""
    held: list[socket.socket] = []
    ports: dict[str, int] = {}
    try:
        for name in (*_TCP_PORTS, *_EXTRA_PORTS):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            held.append(s)
            ports[name] = s.getsockname()[1]
        for name in _UDP_PORTS:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((HOST, 0))
            held.append(s)
            ports[name] = s.getsockname()[1]
    finally:
        for s in held:
            s.close()
    return ports


def render_config(template: str, ports: dict[str, int]) -> str:
    """The all-in-one config with every listening port replaced, the query and health gRPC endpoints added,
    and jaeger_query's self-tracing disabled (it is on by default and exports Jaeger's own spans over OTLP gRPC
    to $OTEL_EXPORTER_OTLP_ENDPOINT, default localhost:4317: into whatever else listens there)."""
    text = template
    for name, default in {**_TCP_PORTS, **_UDP_PORTS}.items():
        if name == "metrics":
            pattern = rf"(\bport:\s*){default}\b"
        else:
            pattern = rf'(:){default}(")'
        port = str(ports[name])

        def repl(m: re.Match[str], port: str = port) -> str:
            return m.group(1) + port + (m.group(2) if m.lastindex == 2 else "")

        text, n = re.subn(pattern, repl, text)
        if n != 1:
            raise RuntimeError(f"Jaeger config template: expected one {name} port {default}, found {n}")
    match = re.search(r"^(\s*)jaeger_query:\s*$", text, flags=re.MULTILINE)
    if match is None:
        raise RuntimeError("Jaeger config template: no extensions.jaeger_query section")
    indent = match.group(1) + "  "
    block = (
        f"\n{indent}enable_tracing: false"
        f'\n{indent}http:\n{indent}  endpoint: "{HOST}:{ports["query_http"]}"'
        f'\n{indent}grpc:\n{indent}  endpoint: "{HOST}:{ports["query_grpc"]}"'
    )
    text = text[: match.end()] + block + text[match.end() :]
    # healthcheckv2's empty `grpc:` (the line after its http endpoint) -> an explicit endpoint.
    text, n = re.subn(
        r"^(\s*healthcheckv2:\s*\n(?:\s+.*\n)*?)(\s+)grpc:[ \t]*$",
        lambda m: f'{m.group(1)}{m.group(2)}grpc:\n{m.group(2)}  endpoint: "{HOST}:{ports["health_grpc"]}"',
        text,
        count=1,
        flags=re.MULTILINE,
    )
    if n != 1:
        raise RuntimeError("Jaeger config template: no empty extensions.healthcheckv2.grpc key")
    return text


def _config_template(binary: Path) -> str:
    path = binary.parent / CONFIG_TEMPLATE_NAME
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: run scripts/install_jaeger.sh")
    return path.read_text(encoding="utf-8")


def _skip_or_raise(reason: str) -> None:
    """Skip when the machine has no Go toolchain at all (a machine fact); otherwise — Go is there, so the build was
    simply not run — skip locally but FAIL under CAUSALTRACE_STRICT=1 (.ci/run)."""
    try:
        import pytest
    except ImportError:  # pragma: no cover - helper used outside pytest
        raise RuntimeError(reason) from None
    import shutil

    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        pytest.skip(f"no Go toolchain on this machine, so Jaeger cannot be built ({reason})")
    if os.environ.get("CAUSALTRACE_STRICT", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CAUSALTRACE_STRICT=1 and {reason}")
    pytest.skip(reason)


def _ready(instance: JaegerInstance) -> bool:
    try:
        with urllib.request.urlopen(instance.query_url + "/api/v3/services", timeout=2) as resp:
            if resp.status != 200:
                return False
        for port in (instance.ports["otlp_http"], instance.ports["otlp_grpc"]):
            with socket.create_connection((HOST, port), timeout=2):
                pass
        return True
    except (OSError, urllib.error.URLError):
        return False


_BIND_ERROR = "address already in use"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def running_jaeger(tmp_path: Path, timeout: float = 30.0) -> Iterator[JaegerInstance]:
    """Start an all-in-one Jaeger (in-memory) on free loopback ports; stop it on exit.

    Skips the calling test (pytest.skip) if the binary is not built; raises RuntimeError if it does not become
    ready within `timeout` seconds (retried on a port clash).
    """
    binary = jaeger_binary()
    if binary is None:
        _skip_or_raise("Jaeger is not built: run scripts/install_jaeger.sh (needs Go and the Go module proxy)")
        raise AssertionError("unreachable")
    template = _config_template(binary)
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    # OTEL_* of the test process (exporter endpoints, resource attributes) must not configure Jaeger itself.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["JAEGER_LISTEN_HOST"] = HOST

    last_error = ""
    for attempt in range(3):  # a free port can be taken by someone else before Jaeger binds it
        ports = _free_ports()
        config_path = tmp_path / f"jaeger-{attempt}.yaml"
        config_path.write_text(render_config(template, ports), encoding="utf-8")
        log_path = tmp_path / f"jaeger-{attempt}.log"
        instance = JaegerInstance(
            otlp_http_endpoint=f"http://{HOST}:{ports['otlp_http']}",
            otlp_grpc_endpoint=f"http://{HOST}:{ports['otlp_grpc']}",
            query_url=f"http://{HOST}:{ports['query_http']}",
            ports=ports,
            config_path=config_path,
            log_path=log_path,
        )
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(binary), "--config", str(config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + timeout
            ready = clash = False
            while proc.poll() is None and time.monotonic() < deadline:
                if _ready(instance):
                    ready = True
                    break
                # A component that fails to start (e.g. a port taken meanwhile) makes Jaeger log the error and
                # start a shutdown that can hang: read the log instead of waiting for an exit.
                if _BIND_ERROR in _log_tail(log_path, 200):
                    clash = True
                    break
                time.sleep(0.1)
            if not ready:
                clash = clash or _BIND_ERROR in _log_tail(log_path, 200)
                state = "still running" if proc.poll() is None else f"exit code {proc.returncode}"
                last_error = f"Jaeger not ready after {timeout:.0f} s ({state}); log {log_path}:\n{_log_tail(log_path)}"
                if clash:
                    continue
                raise RuntimeError(last_error)
            yield instance
            return
        finally:
            _stop(proc)
    raise RuntimeError(last_error)
