"""``causaltrace demo``: the whole product on the embedded default — no API key, no network.

For each framework's demo team (:mod:`causaltrace.demo.autogen_team`, :mod:`causaltrace.demo.smolagents_team`:
reactive scripted models and a planted decisive error that the mutation proposals can repair) the demo

1. runs the team, traced (to the local store; also over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set);
2. diagnoses the failed run (the ``graph`` method: deterministic stages, plus LLM stages with ``--model``);
3. repairs it by replay (recorded calls before the corrected step, live after it, code in the sandbox);
4. exports the repair pair (TRL DPO JSONL) and writes the HTML report;
5. prints where everything is.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DemoResult", "FRAMEWORKS", "run_demo"]

FRAMEWORKS = {
    "autogen": "causaltrace.demo.autogen_team",
    "smolagents": "causaltrace.demo.smolagents_team",
}


@dataclass
class DemoResult:
    """What the demo of one framework produced."""

    framework: str
    run_id: str
    status: str
    decisive_index: int | None = None
    decisive_agent: str | None = None
    decisive_kind: str | None = None
    ranked_first_index: int | None = None
    repaired: bool = False
    fix: str = ""
    replays: int = 0
    repaired_answer: str | None = None
    report: Path | None = None
    pairs: Path | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


async def _run_team(module: Any, framework: str) -> Any:
    import causaltrace

    team = module.build()
    if framework == "autogen":
        async with causaltrace.run(task=module.TASK, verify=module.verify, name=f"demo ({framework})") as handle:
            await team.run(task=module.TASK)
    else:
        with causaltrace.run(task=module.TASK, verify=module.verify, name=f"demo ({framework})") as handle:
            team.run(module.TASK)
    return handle.run


async def demo_framework(
    framework: str, *, model: str | None, out_dir: Path, say: Callable[[str], None]
) -> DemoResult:
    """Run, diagnose, repair, export and report the demo team of ``framework``."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.collector.store import Store
    from causaltrace.replay.repair import repair

    started = time.perf_counter()
    module = importlib.import_module(FRAMEWORKS[framework])
    say(f"[{framework}] running the demo team (planted fault: {module.FAULT})")
    run = await _run_team(module, framework)
    result = DemoResult(framework=framework, run_id=run.run_id, status=run.outcome.status)
    say(f"[{framework}] run {run.run_id}: {run.outcome.status} — {run.outcome.reason}")
    if run.outcome.status != "failure":
        result.notes.append("the run did not fail: nothing to diagnose")
        return result
    say(f"[{framework}] diagnosing ({'graph method with ' + model if model else 'graph method, no model'})")
    diagnosis = await diagnose(run, method="graph", model=model, store=False)  # stored just below
    with Store() as store:
        store.save_diagnosis(diagnosis)
        result.ranked_first_index = diagnosis.decisive_step_index
        say(f"[{framework}] ranked first: step #{diagnosis.decisive_step_index} by {diagnosis.agent}; repairing by replay")

        def progress(step: Any, replayed: Any) -> None:
            if replayed.flipped:
                say(f"[{framework}]   step #{step.index}: {replayed.intervention.description} → flipped to success")

        repaired = await repair(run, module.build, module.verify, diagnosis=diagnosis, store=store, on_replay=progress)
        result.replays = repaired.replays
        final = repaired.diagnosis
        result.decisive_index = final.decisive_step_index
        result.decisive_agent = final.agent
        if final.decisive_step_id:
            result.decisive_kind = run.step(final.decisive_step_id).kind
        if final.decisive_step_index is not None and final.decisive_step_index != result.ranked_first_index:
            # say it plainly when the replay overturned the ranking: the proof outranks the prediction
            say(f"[{framework}] ranked first: #{result.ranked_first_index}; replay proved #{final.decisive_step_index}")
        if repaired.decisive is not None and repaired.decisive.best is not None:
            result.repaired = True
            result.fix = repaired.decisive.best.intervention.description
            result.repaired_answer = repaired.decisive.best.outcome.final_answer
        pairs = store.repair_pairs(run_id=run.run_id)
    result.pairs = out_dir / f"{framework}-repair-pairs.jsonl"
    result.report = await asyncio.to_thread(
        _write_outputs, run, final, pairs, result.pairs, out_dir / f"{framework}-report.html"
    )
    result.seconds = time.perf_counter() - started
    return result


def _write_outputs(run: Any, diagnosis: Any, pairs: list[Any], pairs_path: Path, report_path: Path) -> Path:
    from causaltrace.replay.pairs import export_pairs
    from causaltrace.report import write_report

    pairs_path.parent.mkdir(parents=True, exist_ok=True)
    pairs_path.write_text(export_pairs(pairs, format="trl-dpo"), encoding="utf-8")
    return write_report(run, report_path, diagnosis=diagnosis, pairs=pairs)


def run_demo(
    frameworks: list[str], *, model: str | None = None, out_dir: Path, say: Callable[[str], None] = print
) -> list[DemoResult]:
    """Instrument, then run :func:`demo_framework` for each framework in turn."""
    from causaltrace.instrumentation import instrument

    instrument()
    return [asyncio.run(demo_framework(fw, model=model, out_dir=out_dir, say=say)) for fw in frameworks]
