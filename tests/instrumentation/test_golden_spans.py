"""Golden spans (issue 35 item 5): the spans causaltrace exports for both example teams, failing and passing, with
the store on, are identical to the checked-in documents in ``tests/instrumentation/golden/`` apart from timing
fields and random ids (``tests/_golden.py`` says exactly what it normalises).

The teams are the examples' own (examples/autogen_team.py, examples/smolagents_agents.py's manager CodeAgent) on the
reactive scripted models of ``causaltrace.testing``; ``build_failing()`` plants each example's fault and the example's
verifier fails the run. causaltrace is instrumented onto a provider built here (a SimpleSpanProcessor into memory)
with the DEFAULT ``TraceConfig()`` — store on, into the per-test CAUSALTRACE_HOME of conftest.py.

Regenerating: ``CAUSALTRACE_REGEN_GOLDEN=1 pytest tests/instrumentation/test_golden_spans.py`` rewrites the four
documents. Issue 35's rule: the exported spans must not change, so a commit that regenerates them names why.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from _builders import capture_spans
from _golden import first_difference, normalise_spans
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.tracing import reset_tracing

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("CAUSALTRACE_REGEN_GOLDEN", "") == "1"
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))


def _autogen_spans(provider: Any, *, failing: bool) -> str:
    import causaltrace
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen

    example = importlib.import_module("autogen_team")
    instrument_autogen(provider, TraceConfig())

    async def run() -> str:
        async with causaltrace.run(task=example.TASK, verify=example.verify, name="autogen_team") as handle:
            await (example.build_failing() if failing else example.build()).run(task=example.TASK)
        return handle.outcome.status

    try:
        return asyncio.run(run())
    finally:
        uninstrument_autogen()
        reset_tracing()  # flushes the store's writes


def _smolagents_spans(provider: Any, *, failing: bool) -> str:
    import causaltrace
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents

    example = importlib.import_module("smolagents_agents")
    instrument_smolagents(provider, TraceConfig())
    try:
        with causaltrace.run(task=example.TASK, verify=example.verify, name="smolagents-example") as handle:
            (example.build_failing() if failing else example.build()).run(example.TASK)
        return handle.outcome.status
    finally:
        uninstrument_smolagents()
        reset_tracing()


RUNNERS = {"autogen": ("autogen_agentchat", _autogen_spans), "smolagents": ("smolagents", _smolagents_spans)}


def golden_document(framework: str, outcome: str) -> list[dict[str, Any]]:
    """Run the example team of ``framework`` (``outcome`` "failing" / "passing") traced and stored; its exported spans
    normalised."""
    module, runner = RUNNERS[framework]
    pytest.importorskip(module)
    provider, exporter = capture_spans()
    status = runner(provider, failing=outcome == "failing")
    assert status == ("failure" if outcome == "failing" else "success")
    return normalise_spans(exporter.get_finished_spans())


@pytest.mark.parametrize("outcome", ["passing", "failing"])
@pytest.mark.parametrize("framework", ["autogen", "smolagents"])
def test_exported_spans_match_the_golden_document(framework: str, outcome: str, causaltrace_home: Path) -> None:
    document = golden_document(framework, outcome)
    assert (causaltrace_home / "causaltrace.db").is_file()  # the store was on
    path = GOLDEN / f"{framework}_{outcome}.json"
    if REGENERATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(path.read_text(encoding="utf-8"))
    difference = first_difference(expected, document)
    assert difference is None, (
        f"the exported spans of the {framework} example ({outcome}) differ from {path.relative_to(ROOT)} "
        f"(regenerate only with a named reason: CAUSALTRACE_REGEN_GOLDEN=1):\n{difference}"
    )


# -- the normaliser itself: what it must keep catching ----------------------------------------------------------------


def _two_spans(provider: Any, *, run_id: str, content: str = "RESULT: 126", link_kind: str = "saw") -> None:
    tracer = provider.get_tracer("golden-test")
    with tracer.start_as_current_span("root", attributes={"causaltrace.run.id": run_id}) as root:
        first = tracer.start_span("task", attributes={"causaltrace.step.id": f"{run_id}/0"})
        first.end()
        from opentelemetry.trace import Link

        link = Link(first.get_span_context(), {"causaltrace.dependency.kind": link_kind})
        with tracer.start_as_current_span(
            "final_answer",
            links=[link],
            attributes={
                "causaltrace.step.id": f"{run_id}/1",
                "causaltrace.step.content": content,
                "causaltrace.step.ended_at": 1_796_629_505_185_598_000,
                "input.value": '{"id": "0f11a536-6a99-45e6-b948-5fd16d91ae47", "created_at": "2026-12-07T07:45:05.1Z"}',
                "causaltrace.run.metadata": json.dumps(
                    {"root_span_id": format(root.get_span_context().span_id, "016x")}
                ),
            },
        ):
            pass


def _normalised(**kwargs: Any) -> list[dict[str, Any]]:
    provider, exporter = capture_spans()
    _two_spans(provider, **kwargs)
    return normalise_spans(exporter.get_finished_spans())


def test_the_normaliser_equates_runs_that_differ_only_in_ids_and_times() -> None:
    one = _normalised(run_id="1b1783a6bd4dd1a8daf483b23e7e02d7")
    other = _normalised(run_id="ffffffffbd4dd1a8daf483b23e7e0000")
    assert first_difference(one, other) is None
    final = one[1]
    assert final["attributes"]["causaltrace.step.id"] == "<run-1>/1"
    assert final["attributes"]["causaltrace.step.ended_at"] == "<time>"
    assert final["attributes"]["input.value"] == '{"id": "<uuid-1>", "created_at": "<time>"}'
    assert final["attributes"]["causaltrace.run.metadata"] == '{"root_span_id": "<span-2>"}'  # the root: #0's parent
    assert final["links"][0]["#"] == 0 and final["parent"] == {"#": 2, "span": "<span-2>"}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"content": "RESULT: 129"}, "'causaltrace.step.content' differs"),
        ({"content": "RESULT:  126"}, "'causaltrace.step.content' differs"),  # one more space
        ({"link_kind": "produced_by"}, "'causaltrace.dependency.kind' differs"),
    ],
)
def test_the_normaliser_keeps_a_changed_value_visible(change: dict[str, str], named: str) -> None:
    run_id = "1b1783a6bd4dd1a8daf483b23e7e02d7"
    difference = first_difference(_normalised(run_id=run_id), _normalised(run_id=run_id, **change))
    assert difference is not None
    assert difference.startswith("span #1 'final_answer'") and named in difference


def test_the_normaliser_names_a_missing_span_and_a_new_key() -> None:
    document = _normalised(run_id="1b1783a6bd4dd1a8daf483b23e7e02d7")
    assert "3 spans expected, 2 exported" in (first_difference(document, document[:2]) or "")
    changed = json.loads(json.dumps(document))
    changed[0]["attributes"]["extra"] = 1
    assert "key 'extra' is new" in (first_difference(document, changed) or "")
