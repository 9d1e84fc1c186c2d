"""Attribute bytes per exported span: what one run of each example team puts on the wire, by step kind.

Runs the scripted example teams (examples/autogen_team.py and examples/smolagents_agents.py, failing and passing)
under ``causaltrace.instrument`` on an in-memory exporter (store off) and measures every exported span: the number
of attributes and their bytes (key + value as UTF-8 text; a sequence counts its items), the bytes of its span
events, and the span count per run. Point ``PYTHONPATH`` at another checkout's ``src`` to measure an older commit
with the same teams (the issue-22 before / after figure: "the attribute bytes per span added").

Usage: python benchmarks/bench_span_bytes.py [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _value_bytes(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return sum(_value_bytes(v) for v in value)
    return len(str(value).encode("utf-8", "replace"))


def _attribute_bytes(attributes: Any) -> int:
    return sum(len(k.encode()) + _value_bytes(v) for k, v in (attributes or {}).items())


def _kind_of(span: Any) -> str:
    attrs = span.attributes or {}
    return str(attrs.get("causaltrace.step.kind") or ("run" if "causaltrace.run.id" in attrs else "other"))


def _run_teams() -> list[Any]:
    """Run each example team once per variant under causaltrace; return the exported spans."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import causaltrace
    from causaltrace.config import TraceConfig

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    causaltrace.instrument(tracer_provider=provider, config=TraceConfig(store=False))
    autogen_team, smol = _load("autogen_team"), _load("smolagents_agents")
    for build in (autogen_team.build, autogen_team.build_failing):
        asyncio.run(build().run(task="What is (3 + 4) * 6?"))
    for build in (smol.build, smol.build_failing):
        build().run("What is (3 + 4) * 6?")
    provider.force_flush()
    return list(exporter.get_finished_spans())


def measure() -> dict[str, Any]:
    spans = [s for s in _run_teams() if (s.attributes or {}).get("causaltrace.run.id") or _kind_of(s) != "other"]
    by_kind: dict[str, list[int]] = defaultdict(list)
    for span in spans:
        by_kind[_kind_of(span)].append(_attribute_bytes(span.attributes))
    runs = {(s.attributes or {}).get("causaltrace.run.id") for s in spans} - {None}
    attr = [_attribute_bytes(s.attributes) for s in spans]
    events = [sum(len(e.name) + _attribute_bytes(e.attributes) for e in s.events) for s in spans]
    return {
        "spans": len(spans),
        "runs": len(runs),
        "attributes_per_span_mean": round(statistics.mean(len(s.attributes or {}) for s in spans), 1),
        "attribute_bytes_per_span_mean": round(statistics.mean(attr), 1),
        "attribute_bytes_per_span_median": statistics.median(attr),
        "event_bytes_per_span_mean": round(statistics.mean(events), 1),
        "by_kind": {k: {"spans": len(v), "bytes_mean": round(statistics.mean(v), 1)} for k, v in sorted(by_kind.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures to this file ('-' = stdout)")
    args = parser.parse_args(argv)
    result = measure()
    import causaltrace

    result["causaltrace"] = str(Path(causaltrace.__file__).resolve().parent)
    print(f"{result['spans']} spans over {result['runs']} runs: {result['attributes_per_span_mean']} attributes, "
          f"{result['attribute_bytes_per_span_mean']} attribute bytes per span (median "
          f"{result['attribute_bytes_per_span_median']}), {result['event_bytes_per_span_mean']} event bytes",
          file=sys.stderr)
    for kind, row in result["by_kind"].items():
        print(f"  {kind:18} {row['spans']:4} spans  {row['bytes_mean']:8.1f} B", file=sys.stderr)
    if args.json:
        text = json.dumps(result, indent=1)
        (sys.stdout.write(text + "\n") if args.json == "-" else Path(args.json).write_text(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
