"""Attribution engine cost without a model, and the judge client's own overhead.

* ``graph`` (deterministic) on a synthetic live run of N steps (default 10,000) with explicit ``saw`` / ``produced_by``
  / ``tool_result_of`` dependencies: seconds per diagnosis (the stages must stay near-linear in the run's length).
* ``graph`` and the two heuristics over Who&When (when the data is present): seconds per trace.
* The judge with a function-backed fake model: per-call overhead on a cache miss (schema building, validation,
  cache write) and on a cache hit.

Usage: python benchmarks/bench_attribution.py [--steps 10000] [--data ../shared/data/whowhen]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from causaltrace.attribution import Judge, diagnose
from causaltrace.attribution.bench import bench_whowhen, default_data_dir
from causaltrace.attribution.judge import agent_name, output_model, step_index
from causaltrace.schema import Dependency, Outcome, Run, Step
from causaltrace.testing.judges import FunctionJudge


def live_run(n: int) -> Run:
    steps: list[Step] = []
    agents = ["planner", "solver", "reviewer"]
    for i in range(n):
        agent = agents[(i // 4) % 3]
        if i % 4 == 0:
            kind, deps, content = "llm_response", ([Dependency(step_id=f"s{i - 1}", kind="saw")] if i else []), (
                f"thinking about item {i % 97}")
        elif i % 4 == 1:
            kind, deps, content = "tool_call", [Dependency(step_id=f"s{i - 1}", kind="produced_by")], (
                f"lookup(item={i % 97})")
        elif i % 4 == 2:
            kind, deps, content = "tool_response", [Dependency(step_id=f"s{i - 1}", kind="tool_result_of")], (
                f"value {i * 7 % 1013}")
        else:
            kind, deps, content = "message", [Dependency(step_id=f"s{i - 3}", kind="produced_by")], (
                f"item {i % 97} has value {(i - 1) * 7 % 1013}")
        steps.append(Step(step_id=f"s{i}", run_id="bench", index=i, kind=kind, agent=agent, depends_on=tuple(deps),
                          content=content, tool_name="lookup" if kind in ("tool_call", "tool_response") else None))
    return Run(run_id="bench", steps=tuple(steps), outcome=Outcome(status="failure", final_answer="?"))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args()
    os.environ["CAUSALTRACE_HOME"] = tempfile.mkdtemp(prefix="ct-bench-")

    run = live_run(args.steps)
    t = time.perf_counter()
    d = await diagnose(run)
    print(f"graph on a {args.steps}-step live run: {time.perf_counter() - t:.2f} s "
          f"(decisive step {d.decisive_step_index}, {len(d.candidates)} candidates)")

    data = args.data or default_data_dir()
    if (data / "Algorithm-Generated").is_dir():
        report = await bench_whowhen(data, ["graph", "first-agent-step", "most-active-agent"])
        for name, row in report.items():
            print(f"{name} over Who&When (n={row['n']}): {row['seconds_per_trace'] * 1000:.1f} ms per trace")

    Answer = output_model("Answer", agent_name=agent_name(["A", "B"]), step_number=step_index(0, 99), reason=str)
    fake = FunctionJudge(lambda m, i: {"agent_name": "A", "step_number": 3, "reason": "r"})
    judge = Judge(fake)
    n = 200
    t = time.perf_counter()
    for k in range(n):
        await judge.ask([{"role": "user", "content": f"question {k}"}], Answer, stage_id="judge")
    miss = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for k in range(n):
        await judge.ask([{"role": "user", "content": f"question {k}"}], Answer, stage_id="judge")
    hit = (time.perf_counter() - t) / n
    print(f"judge overhead per call: {miss * 1000:.2f} ms on a cache miss, {hit * 1000:.2f} ms on a hit "
          f"({len(fake.calls)} fake calls for {2 * n} asks)")


if __name__ == "__main__":
    asyncio.run(main())
