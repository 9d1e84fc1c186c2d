"""Issue 35's before / after table: the overhead benchmarks and bench_emit.py on two source trees, in one sitting.

For each tree — BEFORE (``--base``, e.g. the session's starting tree) and AFTER (``--head``, by default the tree this
script is in) — the tree's OWN benchmark files run with ``PYTHONPATH=<tree>/src``, each in a fresh interpreter (this
one, ``sys.executable``), the two trees taking turns benchmark by benchmark so a drifting machine hits both alike:

  bench_autogen_overhead.py    --client both --batch B --batches N   (N rounds, B runs per mode per round)
  bench_smolagents_overhead.py --client both --runs R --rounds N
  bench_emit.py                --steps S --repeats K

and prints the issue's table, per row (team, clients) and tree: store off ÷ OpenInference, store on ÷ OpenInference
(CPU time added per framework event; the median over rounds of the paired differences, with the quartiles of the
per-round ratio where the benchmark reports them), OpenInference µs/event and causaltrace µs/event with the store on;
then bench_emit's ratio to a raw SDK span. The raw outputs and a JSON of the table go to ``--out`` (a new temporary
directory by default, printed).

Targets (issue 35, not asserted): like-for-like rows (OpenAI clients) store on ÷ OI <= 1.0, store off <= 0.7; every
row store on <= 250 µs/event; bench_emit <= 1.3x a raw SDK span.

Duration (2-core x86_64 VM shared with other work, load 5-6, 2026-12-07): with the defaults — 30 rounds, AutoGen 6
runs per mode per round (2 clients x 7 modes x (10 warm-up + 180) runs per tree), smolagents 4 runs per variant per
round (4 scenarios x (6 + 6 variants x 30 x 5) runs), emit 20,000 steps x 5 — expect about 12 minutes for both trees,
16 at most on a loaded machine: a 10-round run of the suite with the same settings took 4.4 minutes (AutoGen 1.0, the
smolagents 0.6-1.0, emit 0.4 minutes per tree: about 61 ms per AutoGen run, 40-70 ms per smolagents run), a 2-round
check 0.8. ``--rounds 2 --batch 1 --runs 1 --emit-steps 2000 --emit-repeats 1`` checks the suite works in a minute.
Usage (from the AFTER tree): .venv/bin/python benchmarks/run_cost_suite.py --base /work/wt/base35 [--rounds 30]
       [--batch 6] [--runs 4] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: (row label, benchmark, client/scenario key) in the issue's order.
ROWS = (
    ("AutoGen, OpenAI clients on a scripted endpoint (like for like)", "autogen", "openai"),
    ("smolagents example, OpenAIServerModel (like for like)", "smolagents", "example/openai"),
    ("smolagents parallel, OpenAIServerModel (like for like)", "smolagents", "parallel/openai"),
    ("AutoGen, scripted clients (OI traces no model call here)", "autogen", "scripted"),
    ("smolagents example, ScriptedModel (same)", "smolagents", "example"),
    ("smolagents parallel, ScriptedModel (same)", "smolagents", "parallel"),
)


def run_bench(tree: Path, script: str, args: list[str], out: Path, label: str) -> tuple[str, float]:
    """Run ``tree``'s benchmarks/``script`` with ``tree``'s sources first; (stdout, wall seconds). The output is
    also kept in ``out``/``label``.log; a failing benchmark stops the suite (its output is printed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["PYTHONPATH"] = str(tree / "src")
    env["CAUSALTRACE_HOME"] = str(out / f"home-{label}")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(tree / "benchmarks" / script), *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (out / f"{label}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"{script} on {tree} failed (exit {done.returncode}); its output is in {out}/{label}.log")
    print(f"  {label}: {seconds / 60:.1f} min", flush=True)
    return done.stdout, seconds


def autogen_row(results: dict[str, Any], client: str) -> dict[str, Any]:
    r = results[client]
    return {
        "store_off_ratio": r["ct-store-off"]["ratio_cpu_to_openinference"],
        "store_off_spread": r["ct-store-off"].get("ratio_cpu_per_round_q1_median_q3"),
        "store_on_ratio": r["ct-store-on"]["ratio_cpu_to_openinference"],
        "store_on_spread": r["ct-store-on"].get("ratio_cpu_per_round_q1_median_q3"),
        "oi_us": r["openinference"]["added_cpu_us_per_event"],
        "ct_on_us": r["ct-store-on"]["added_cpu_us_per_event"],
    }


def smolagents_row(results: dict[str, Any], scenario: str) -> dict[str, Any]:
    cpu = results[scenario]["cpu"]
    return {
        "store_off_ratio": cpu["ratio_store_off_to_openinference"],
        "store_off_spread": cpu.get("ratio_store_off_per_round_q1_median_q3"),
        "store_on_ratio": cpu["ratio_store_on_to_openinference"],
        "store_on_spread": cpu.get("ratio_store_on_per_round_q1_median_q3"),  # newer benchmark files only
        "oi_us": cpu["added_us_per_event"]["openinference"],
        "ct_on_us": cpu["added_us_per_event"]["causaltrace_store_on"],
    }


def emit_figures(stdout: str) -> dict[str, float | None]:
    """bench_emit.py's printed medians: raw SDK µs/step, causaltrace µs/step, their ratio (None where not found)."""
    def number(pattern: str) -> float | None:
        found = re.search(pattern + r"[^0-9]*([0-9.]+)", stdout)
        return float(found.group(1)) if found else None

    return {"raw_us": number(r"raw OTel SDK span[^:]*:"), "ct_us": number(r"causaltrace step[^:]*:"),
            "ratio": number(r"ratio causaltrace / raw:")}


def _ratio_cell(value: float | None, spread: list[float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" + (f" [{spread[0]:.2f}–{spread[2]:.2f}]" if spread else "")


def _us_cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def table(rows: dict[str, dict[str, dict[str, Any]]], trees: list[str]) -> str:
    """The issue's table, one line per (row, tree): ratios as median [per-round quartiles]."""
    lines = ["| team, clients | tree | store off ÷ OI | store on ÷ OI | OpenInference µs/event | "
             "causaltrace µs/event, store on |", "|---|---|---|---|---|---|"]
    for label, _, _ in ROWS:
        for tree in trees:
            r = rows[label][tree]
            lines.append(f"| {label} | {tree} | {_ratio_cell(r['store_off_ratio'], r['store_off_spread'])} | "
                         f"{_ratio_cell(r['store_on_ratio'], r['store_on_spread'])} | {_us_cell(r['oi_us'])} | "
                         f"{_us_cell(r['ct_on_us'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, default=Path("/work/wt/base35"), help="the BEFORE source tree")
    parser.add_argument("--head", type=Path, default=HERE.parent, help="the AFTER source tree (default: this one)")
    parser.add_argument("--rounds", type=int, default=30, help="rounds of both overhead benchmarks (>= 30 to quote)")
    parser.add_argument("--batch", type=int, default=6, help="AutoGen runs per mode per round")
    parser.add_argument("--runs", type=int, default=4, help="smolagents runs per variant per round")
    parser.add_argument("--emit-steps", type=int, default=20000)
    parser.add_argument("--emit-repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="where the raw outputs go (default: a new temporary directory)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="cost-suite-"))
    out.mkdir(parents=True, exist_ok=True)
    trees = {"before": args.base.resolve(), "after": args.head.resolve()}
    for name, tree in trees.items():
        if not (tree / "src" / "causaltrace").is_dir() or not (tree / "benchmarks").is_dir():
            print(f"{name} tree {tree} has no src/causaltrace or benchmarks/", file=sys.stderr)
            return 2
    print(f"cost suite: before {trees['before']}, after {trees['after']}; outputs in {out}", flush=True)
    started = time.perf_counter()
    raw: dict[str, dict[str, Any]] = {name: {} for name in trees}
    for bench in ("autogen", "smolagents", "emit"):
        for name, tree in trees.items():
            label = f"{name}-{bench}"
            if bench == "autogen":
                json_path = out / f"{label}.json"
                run_bench(tree, "bench_autogen_overhead.py", ["--client", "both", "--batch", str(args.batch),
                          "--batches", str(args.rounds), "--json", str(json_path)], out, label)
                raw[name][bench] = json.loads(json_path.read_text())
            elif bench == "smolagents":
                json_path = out / f"{label}.json"
                run_bench(tree, "bench_smolagents_overhead.py", ["--client", "both", "--runs", str(args.runs),
                          "--rounds", str(args.rounds), "--json", str(json_path)], out, label)
                raw[name][bench] = json.loads(json_path.read_text())
            else:
                stdout, _ = run_bench(tree, "bench_emit.py", ["--steps", str(args.emit_steps), "--repeats",
                                      str(args.emit_repeats)], out, label)
                raw[name][bench] = emit_figures(stdout)
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for label, bench, key in ROWS:
        rows[label] = {name: (autogen_row if bench == "autogen" else smolagents_row)(raw[name][bench], key)
                       for name in trees}
    minutes = (time.perf_counter() - started) / 60
    print(f"\nCPU time added per framework event, {args.rounds} rounds (AutoGen {args.batch} runs / mode / round, "
          f"smolagents {args.runs}); ratios: median over rounds [quartiles of the per-round ratio]; "
          f"{minutes:.1f} min in all\n")
    print(table(rows, list(trees)))
    for name in trees:
        e = raw[name]["emit"]
        print(f"\nbench_emit.py ({name}): raw SDK span {e['raw_us']} µs/step, causaltrace {e['ct_us']} µs/step, "
              f"ratio {e['ratio']} (target <= 1.3)", end="")
    print("\n\ntargets: like-for-like store on ÷ OI <= 1.0, store off <= 0.7; every row store on <= 250 µs/event")
    (out / "table.json").write_text(json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "rows": rows,
                                                "emit": {n: raw[n]["emit"] for n in trees}, "minutes": minutes,
                                                "args": {k: str(v) for k, v in vars(args).items()}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
