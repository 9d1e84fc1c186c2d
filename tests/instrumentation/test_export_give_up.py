"""Spans given up at exit are counted and said, whatever ``OTEL_EXPORTER_OTLP_TIMEOUT`` is (issue 36 item 7).

An endpoint that accepts the connection and never answers holds each export for the exporter's own timeout (30 s
here); the processor's shutdown at exit is bounded by ``OTEL_BSP_EXPORT_TIMEOUT`` (1.5 s), so what is still queued
or in flight then is given up — before, ``export_stats()`` said ``failed 0`` and stderr said nothing. A real child
process, a real listening socket that never accepts.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

_CHILD = textwrap.dedent(
    """
    import atexit, time
    def stats():  # registered first, so it runs after the SDK's own shutdown at exit
        from causaltrace import export_stats
        s = export_stats()
        print("STATS", s.failed, s.given_up_at_exit, s.exported, time.monotonic(), flush=True)
    atexit.register(stats)
    import causaltrace
    from causaltrace import current_run
    for i in range(3):
        with causaltrace.run(task=f"t{i}") as h:
            for k in range(5):
                current_run().add_step("message", agent="a", content=f"m{k}")
            h.report(final_answer="ok")
    print("DONE", time.monotonic(), flush=True)
    """
)


def test_spans_given_up_at_exit_are_counted_and_said_with_a_long_exporter_timeout(tmp_path: Path) -> None:
    with socket.socket() as hole:  # listens, never accepts: every request waits for the exporter's timeout
        hole.bind(("127.0.0.1", 0))
        hole.listen(64)
        endpoint = f"http://127.0.0.1:{hole.getsockname()[1]}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CAUSALTRACE_"))}
        env.update(PYTHONPATH=str(SRC), CAUSALTRACE_HOME=str(tmp_path / "home"), OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                   OTEL_EXPORTER_OTLP_TIMEOUT="30")
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    done = next(line for line in proc.stdout.splitlines() if line.startswith("DONE")).split()
    _, failed, given_up, exported, at = next(
        line for line in proc.stdout.splitlines() if line.startswith("STATS")).split()
    assert float(at) - float(done[1]) < 5, f"exit waited {float(at) - float(done[1]):.1f} s (total {took:.1f} s)"
    assert int(failed) == 15 + 3 and int(exported) == 0  # every span: lost in flight or given up, and counted
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2 and all(endpoint in line for line in lines) and "Traceback" not in proc.stderr, proc.stderr
    if int(given_up):
        assert any(f"at exit {given_up} span(s) were not exported" in line for line in lines), proc.stderr
