"""The emit hot path builds every Step, Dependency, TokenUsage and RecordedCall without a pydantic validation
(``instrumentation.steps.build_step`` / ``construct``; issue 35, design cut 1): the objects it builds must be exactly
what a full validation of the same values gives — same field values, same field types — or the store, the CLI and
the analyses would read something a validated run never holds.

Both example teams (examples/autogen_team.py, examples/smolagents_agents.py), failing and passing, on the reactive
scripted models of ``causaltrace.testing``, with the default config; the Run the collector assembled is compared,
model by model, with its validation from a Python dump and from its JSON.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from _builders import capture_spans
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.schema import RecordedCall, Run, Step

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))


def _autogen_run(*, failing: bool) -> Run | None:
    pytest.importorskip("autogen_agentchat")
    import causaltrace
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen

    example = importlib.import_module("autogen_team")
    instrument_autogen(capture_spans()[0], TraceConfig())

    async def run() -> Run | None:
        async with causaltrace.run(task=example.TASK, verify=example.verify, name="autogen_team") as handle:
            await (example.build_failing() if failing else example.build()).run(task=example.TASK)
        return handle.run

    try:
        return asyncio.run(run())
    finally:
        uninstrument_autogen()
        reset_tracing()


def _smolagents_run(*, failing: bool) -> Run | None:
    pytest.importorskip("smolagents")
    import causaltrace
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents

    example = importlib.import_module("smolagents_agents")
    instrument_smolagents(capture_spans()[0], TraceConfig())
    try:
        with causaltrace.run(task=example.TASK, verify=example.verify, name="smolagents-example") as handle:
            (example.build_failing() if failing else example.build()).run(example.TASK)
        return handle.run
    finally:
        uninstrument_smolagents()
        reset_tracing()


def _types(value: Any) -> Any:
    """The type tree of a model's field values (a validated model and an equal constructed one could still differ
    in a type that compares equal: a list for a tuple is caught by ``==``, an int for a bool or a float is not)."""
    if isinstance(value, BaseModel):
        return (type(value).__name__, {name: _types(getattr(value, name)) for name in type(value).model_fields})
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_types(item) for item in value])
    return type(value).__name__


def _assert_as_validated(model: BaseModel) -> None:
    cls = type(model)
    for validated in (cls.model_validate(model.model_dump()), cls.model_validate_json(model.model_dump_json())):
        assert validated == model, f"{cls.__name__} differs from its validation"
        assert _types(validated) == _types(model), f"{cls.__name__}'s field types differ from its validation's"
        if cls is not Run:  # the Run is validated (built with its defaults unset); the others are constructed whole
            assert validated.model_fields_set == model.model_fields_set


@pytest.mark.parametrize("outcome", ["passing", "failing"])
@pytest.mark.parametrize("framework", ["autogen", "smolagents"])
def test_constructed_steps_equal_validated_ones(framework: str, outcome: str) -> None:
    runner = _autogen_run if framework == "autogen" else _smolagents_run
    run = runner(failing=outcome == "failing")
    assert run is not None
    assert run.outcome is not None and run.outcome.status == ("failure" if outcome == "failing" else "success")
    kinds = {step.kind for step in run.steps}
    assert {"llm_response", "tool_call", "final_answer"} <= kinds, kinds
    assert any(step.depends_on for step in run.steps) and any(step.usage for step in run.steps)
    for step in run.steps:
        assert type(step) is Step
        _assert_as_validated(step)
    assert run.recording is not None and run.recording.calls
    for call in run.recording.calls:
        assert type(call) is RecordedCall
        _assert_as_validated(call)
    _assert_as_validated(run)


def test_payloads_that_are_not_json_are_made_json_each_alone() -> None:
    """build_step makes a payload that is not plain JSON JSON (as ``json.loads(canonical_json(...))``): a tuple, a
    datetime, a NaN, a model or one nested deeper than its walk goes; the plain ones, empty ones and None are kept as
    they are (the same objects), a payload at the walk's depth included."""
    import datetime
    import json

    from causaltrace.instrumentation.steps import _is_plain_json, build_step
    from causaltrace.recording import canonical_json

    class Point(BaseModel):
        x: int

    def deep(n: int) -> Any:
        value: Any = "leaf"
        for _ in range(n):
            value = {"k": value}
        return value

    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    plain_outputs = {"text": "ok", "n": [1, 2.5, None, True]}
    cases = [
        ({"when": when}, plain_outputs, {}, None),
        ({"t": (1, 2)}, {}, {"x": float("nan")}, {"p": Point(x=1)}),
        ({"d": deep(52)}, plain_outputs, {"ok": 1}, {"a": 1}),
        ({"d": deep(40)}, plain_outputs, {"ok": 1}, {"a": 1}),
        (deep(51), plain_outputs, {"ok": 1}, None),  # at the walk's depth
        ((), [], "", None),
    ]
    for inputs, outputs, metadata, arguments in cases:
        data = {
            "step_id": "r/1", "run_id": "r", "index": 1, "kind": "tool_call", "agent": "a", "parent_step_id": None,
            "depends_on": (), "content": "", "inputs": inputs, "outputs": outputs, "usage": None, "model": None,
            "tool_name": "t", "arguments": arguments, "call_id": None, "started_at": None, "ended_at": None,
            "status": "ok", "error": None, "span_id": None, "metadata": metadata,
        }
        given = dict(data)
        step = build_step(data)
        for key in ("inputs", "outputs", "metadata", "arguments"):
            value, made = given[key], getattr(step, key)
            if not value or _is_plain_json(value):
                assert made is value, key
            else:
                assert json.dumps(made, sort_keys=True) == json.dumps(json.loads(canonical_json(value)), sort_keys=True)
