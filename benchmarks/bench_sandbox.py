"""Sandbox latency: ``print(1)`` through ``SubprocessSandbox.run`` vs a plain ``subprocess.run([python, -c, ...])``.

Both sides run interleaved in one process (so machine load hits them alike) and the medians are reported; the
sandboxed side includes everything a run does: temp work dir, code file, per-run pids/memory/cpu cgroups, rlimits,
bubblewrap (namespaces, binds), the interpreter's start-up, output collection and clean-up. Also measured: the
persistent worker's per-``execute`` latency (``PythonWorkerSession``; a trivial snippet and one with a call-back to
the parent) and its start-up. Target: sandboxed ``print(1)`` median <= 50 ms.

Usage: python benchmarks/bench_sandbox.py [--runs 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from causaltrace.replay.sandbox import PythonWorkerSession, SubprocessSandbox
from causaltrace.replay.sandbox._cgroup import cgroups_available

TARGET_MS = 50.0


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p10_ms": round(ordered[len(ordered) // 10] * 1000, 2),
        "p90_ms": round(ordered[(len(ordered) * 9) // 10] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    results: dict[str, object] = {"python": sys.executable, "cgroups": cgroups_available()}
    for mode in ("bwrap", "unshare"):
        sandbox = SubprocessSandbox(use_bwrap=mode == "bwrap")
        plain: list[float] = []
        sandboxed: list[float] = []
        for i in range(args.warmup + args.runs):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True)
            t1 = time.perf_counter()
            result = sandbox.run("print(1)", timeout_s=10, memory_mb=256)
            t2 = time.perf_counter()
            assert done.stdout == b"1\n" and result.stdout == "1\n", result
            if i >= args.warmup:
                plain.append(t1 - t0)
                sandboxed.append(t2 - t1)
        results[mode] = {"plain_subprocess": _ms(plain), "sandbox_run": _ms(sandboxed)}

    sandbox = SubprocessSandbox()
    starts: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        PythonWorkerSession(sandbox, {}, timeout_s=10, memory_mb=256).close()
        starts.append(time.perf_counter() - t0)
    with PythonWorkerSession(sandbox, {"tool": lambda x: x + 1}, timeout_s=10, memory_mb=256) as session:
        trivial: list[float] = []
        callback: list[float] = []
        for i in range(args.warmup + args.runs * 5):
            t0 = time.perf_counter()
            session.execute("x = 1")
            t1 = time.perf_counter()
            assert session.execute("tool(x)")["output"] == 2
            t2 = time.perf_counter()
            if i >= args.warmup:
                trivial.append(t1 - t0)
                callback.append(t2 - t1)
    results["worker"] = {"start": _ms(starts), "execute": _ms(trivial), "execute_with_callback": _ms(callback)}
    bwrap_median = results["bwrap"]["sandbox_run"]["median_ms"]  # type: ignore[index]
    results["target_ms"] = TARGET_MS
    results["meets_target"] = bwrap_median <= TARGET_MS

    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
