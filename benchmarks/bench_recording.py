"""Recording cost per model / tool call: the canonical request and its hash, hot path vs the reference definition.

Every recorded call canonicalises its request (call ids aliased, ``created_at`` dropped) and hashes it, on the
agent's thread, before the framework can mutate it (ARCHITECTURE "Recording"). The requests measured are the real
ones of one run of each bundled scripted example (``examples/autogen_team.py`` and ``examples/smolagents_agents.py``,
captured while they run under causaltrace), so their sizes and ids are what the adapters produce: smolagents'
requests carry a ~10 KB system prompt and tool-call ids inside message text.

* hot path — ``recording.canonical_request``: pydantic-core makes the request plain data, orjson writes its key-sorted
  JSON when that is exactly the standard library's text, ids are aliased on the text, SHA-256 of it;
* reference — the definition itself: ``canonical_json`` (the standard library), parsed back, the id-aliasing walk
  (``_canonical_walk``), and SHA-256 of ``canonical_json`` of the result.

Both must give the same canonical request and hash for every request (checked before timing). Each request is timed
in a tight loop (best of ``--repeat`` rounds), and the sum over one run's requests is reported.

Usage: python benchmarks/bench_recording.py [--loops 200] [--repeat 7] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _capture(run_once: Any) -> list[tuple[Any, dict[str, Any]]]:
    """The (request, keyword arguments) of every ``canonical_request`` call made while ``run_once()`` runs."""
    from causaltrace.instrumentation import calls

    captured: list[tuple[Any, dict[str, Any]]] = []
    original = calls.canonical_request

    def capture(request: Any, **kwargs: Any) -> Any:
        captured.append((request, kwargs))
        return original(request, **kwargs)

    calls.canonical_request = capture
    try:
        run_once()
    finally:
        calls.canonical_request = original
    return captured


def _requests_of(example_name: str, framework: str, run_once: Any) -> list[tuple[Any, dict[str, Any]]]:
    """The requests recorded during one run of a bundled example under causaltrace (store off)."""
    import causaltrace
    from causaltrace.instrumentation.tracing import reset_tracing

    example = _load_example(example_name)
    getattr(causaltrace, f"instrument_{framework}")(config=causaltrace.TraceConfig(store=False))
    try:
        return _capture(lambda: run_once(example))
    finally:
        getattr(causaltrace, f"uninstrument_{framework}")()
        reset_tracing()


def _smolagents_requests() -> list[tuple[Any, dict[str, Any]]]:
    return _requests_of("smolagents_agents", "smolagents", lambda ex: ex.build().run(ex.TASK))


def _autogen_requests() -> list[tuple[Any, dict[str, Any]]]:
    return _requests_of("autogen_team", "autogen", lambda ex: asyncio.run(ex.build().run(task=ex.TASK)))


def _reference(request: Any, kwargs: dict[str, Any]) -> tuple[Any, str]:
    from causaltrace.recording import _canonical_walk, canonical_json

    plain = json.loads(canonical_json(request))
    canonical = _canonical_walk(plain, kwargs.get("call_id_pattern"), ("created_at",))
    return canonical, hashlib.sha256(canonical_json(canonical).encode()).hexdigest()


def _best_us(fn: Any, loops: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def measure(requests: list[tuple[Any, dict[str, Any]]], loops: int, repeat: int) -> dict[str, float]:
    from causaltrace.recording import canonical_json, canonical_request

    hot_us = ref_us = 0.0
    for request, kwargs in requests:
        canonical, digest = canonical_request(request, **kwargs)
        ref_canonical, ref_digest = _reference(request, kwargs)
        if canonical != ref_canonical or digest != ref_digest:
            raise SystemExit(f"hot path and reference disagree on a request: {canonical_json(request)[:200]}")
        hot_us += _best_us(lambda r=request, k=kwargs: canonical_request(r, **k), loops, repeat)
        ref_us += _best_us(lambda r=request, k=kwargs: _reference(r, k), loops, repeat)
    chars = sum(len(canonical_json(r)) for r, _ in requests)
    return {"requests": float(len(requests)), "chars": float(chars), "hot_us": hot_us, "reference_us": ref_us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=200, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=7, help="timings per request (the best is kept)")
    parser.add_argument("--json", help="write the results to this file ('-' = stdout)")
    args = parser.parse_args()
    os.environ.setdefault("CAUSALTRACE_HOME", tempfile.mkdtemp(prefix="causaltrace-bench-"))
    results = {
        "smolagents example run": measure(_smolagents_requests(), args.loops, args.repeat),
        "autogen team run": measure(_autogen_requests(), args.loops, args.repeat),
    }
    print("canonical request + hash of every recorded call of one run (tight loop, best of rounds):")
    for name, r in results.items():
        print(
            f"  {name:24s} {r['requests']:3.0f} requests, {r['chars'] / 1000:5.1f} K chars: "
            f"hot path {r['hot_us']:7.1f} µs, reference {r['reference_us']:7.1f} µs "
            f"({r['reference_us'] / r['hot_us']:.1f}x)"
        )
    if args.json:
        text = json.dumps(results, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
