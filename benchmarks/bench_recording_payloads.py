"""What a large tool result costs the store: one real instrumented run whose tool returns a random 20 MB payload.

Issue 21 item 14: every model request after the tool returned carries the payload again (the conversation is sent
whole each time), so a recording that keeps each request as it is holds the payload once per request. The run here is
a real smolagents ``ToolCallingAgent`` on a reactive scripted model (``causaltrace.testing.smolagents``), traced by
``causaltrace.instrument()`` into the embedded SQLite store: the model calls ``read_blob`` (the payload: hex of
random bytes, so nothing compresses it), then ``note`` ``--notes`` times, then answers — each of those requests
carries the payload.

Reported per source tree, each in a fresh child process (so peak RSS is that run's alone): the store's bytes on
disk after the run (the file, its write-ahead log checkpointed), its ratio to the payload (target <= 2x), the peak
RSS of the process (``ru_maxrss``) and its growth over the RSS just before the run (payload already built), the
run's wall time, the RSS growth and time of reading the run back in a fresh process (what ``repair`` or
``export`` starts with), and whether the recording read back from the store equals the live one (its steps differ: a
field longer than ``CAUSALTRACE_STORE_MAX_CHARS`` is cut in the store).

``--baseline REV`` also measures the source tree of a git revision (``git archive REV src`` into a temp dir, put
first on the child's ``PYTHONPATH``), the old write path, in the same invocation; quote ``uptime`` beside it.

Usage: python benchmarks/bench_recording_payloads.py [--payload-mb 20] [--notes 4] [--baseline REV] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _agent(notes: int) -> Any:
    """A fresh ToolCallingAgent: ``read_blob`` once, ``note`` ``notes`` times, then ``final_answer``."""
    from smolagents import LogLevel, ToolCallingAgent, tool

    from causaltrace.testing.smolagents import Call, ScriptedModel, ScriptedRequest

    payload = os.environ["CT_BENCH_PAYLOAD_FILE"]

    @tool
    def read_blob() -> str:
        """Read the blob the task is about."""
        return Path(payload).read_text()

    @tool
    def note(text: str) -> str:
        """Write down a note.

        Args:
            text: the note.
        """
        return f"noted: {text}"

    def policy(request: ScriptedRequest) -> Any:
        seen = request.observations
        if not seen:
            return [Call("read_blob", {})]
        if len(seen) <= notes:
            return [Call("note", {"text": f"part {len(seen)}: {len(seen[0])} characters read"})]
        return [Call("final_answer", {"answer": f"{len(seen[0])} characters"})]

    return ToolCallingAgent(tools=[read_blob, note], model=ScriptedModel(policy), name="reader", max_steps=notes + 3,
                            verbosity_level=LogLevel.OFF)


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _child(notes: int, payload_chars: int) -> dict[str, Any]:
    """One measured run in this process (the parent set CAUSALTRACE_HOME and the payload file)."""
    import resource
    import sqlite3

    from opentelemetry.sdk.trace import TracerProvider

    import causaltrace
    from causaltrace.collector.store import Store
    from causaltrace.instrumentation.tracing import get_tracing

    causaltrace.instrument(tracer_provider=TracerProvider())  # spans go nowhere: the store is what is measured
    agent = _agent(notes)
    before_kb = _rss_kb()
    started = time.perf_counter()
    with causaltrace.run(task="How long is the blob?") as handle:
        agent.run("How long is the blob?")
    get_tracing().collector.flush(600)
    wall = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    live = handle.run
    db = Path(os.environ["CAUSALTRACE_HOME"]) / "causaltrace.db"
    with Store(db, readonly=True) as store:
        back = store.get_run(handle.run_id)
        version = store.schema_version()
    equal = live is not None and back.recording == live.recording  # steps: cut at the store's max_chars
    calls = len(back.recording.calls) if back.recording else 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = sum(p.stat().st_size for p in db.parent.glob("causaltrace.db*"))
    return {
        "schema_version": version,
        "outcome": back.outcome.status,
        "recorded_calls": calls,
        "store_bytes": size,
        "ratio": size / payload_chars,
        "peak_rss_mb": peak_kb / 1024,
        "rss_growth_mb": (peak_kb - before_kb) / 1024,
        "run_s": wall,
        "read_back_equal": equal,
    }


def _reader() -> dict[str, Any]:
    """Read the stored run back in a fresh process (what ``repair`` / ``diagnose`` / ``export`` start with)."""
    import resource

    from causaltrace.collector.store import Store

    db = Path(os.environ["CAUSALTRACE_HOME"]) / "causaltrace.db"
    before_kb = _rss_kb()
    started = time.perf_counter()
    with Store(db, readonly=True) as store:
        run = store.get_run(store.list_runs()[0]["run_id"])
    wall = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert run.recording is not None
    return {"read_s": wall, "read_peak_rss_mb": peak_kb / 1024, "read_rss_growth_mb": (peak_kb - before_kb) / 1024}


def _measure(src: Path, payload_file: Path, notes: int, payload_chars: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ct-bench-payload-") as home:
        env = dict(os.environ, CAUSALTRACE_HOME=home, CT_BENCH_PAYLOAD_FILE=str(payload_file),
                   PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        env.pop("CAUSALTRACE_DB", None)
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        for mode in ("--child", "--read"):
            done = subprocess.run(
                [sys.executable, __file__, mode, "--notes", str(notes), "--payload-chars", str(payload_chars)],
                env=env, capture_output=True, text=True, check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"the measured {mode[2:]} under {src} failed ({done.returncode}):\n"
                                 f"{done.stderr[-4000:]}")
            out.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def _source_of(rev: str, into: Path) -> Path:
    """The ``src`` tree of git revision ``rev``, extracted into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload-mb", type=float, default=20.0, help="payload size in MB (10^6 characters)")
    parser.add_argument("--notes", type=int, default=4, help="model calls after the payload before the answer")
    parser.add_argument("--baseline", metavar="REV", help="also measure the src tree of this git revision")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--read", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--payload-chars", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.notes, args.payload_chars)))
        return 0
    if args.read:
        print(json.dumps(_reader()))
        return 0
    chars = int(args.payload_mb * 1_000_000) // 2 * 2
    results: dict[str, Any] = {"payload_chars": chars, "notes": args.notes, "load": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="ct-bench-payload-src-") as tmp:
        payload_file = Path(tmp) / "payload.txt"
        payload_file.write_text(os.urandom(chars // 2).hex())
        trees = [("current", ROOT / "src")]
        if args.baseline:
            trees.insert(0, (f"baseline {args.baseline}", _source_of(args.baseline, Path(tmp))))
        for name, src in trees:
            results[name] = _measure(src, payload_file, args.notes, chars)
    print(f"payload {chars / 1e6:.1f} MB (random hex), {args.notes} notes; load {results['load'][0]:.2f}")
    print(f"{'tree':<24} {'store MB':>9} {'ratio':>7} {'peak RSS MB':>12} {'RSS +MB':>8} {'run s':>6} "
          f"{'read RSS +MB':>13} {'read s':>7}  recording read back equal")
    for name, _ in trees:
        r = results[name]
        print(f"{name:<24} {r['store_bytes'] / 1e6:>9.1f} {r['ratio']:>6.2f}x {r['peak_rss_mb']:>12.0f} "
              f"{r['rss_growth_mb']:>8.0f} {r['run_s']:>6.2f} {r['read_rss_growth_mb']:>13.0f} {r['read_s']:>7.2f}  "
              f"{r['read_back_equal']} (v{r['schema_version']}, {r['recorded_calls']} calls, {r['outcome']})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
