"""Test helper: one framework instrumented by causaltrace onto an in-memory exporter, the collector's finished Runs
kept (issue 33's span tests share it).

    with traced("smolagents", TraceConfig(store=False)) as (exporter, runs):
        team.run(task)
    spans, run = exporter.get_finished_spans(), runs[-1]
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from _builders import capture_spans
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.tracing import get_tracing, reset_tracing
from causaltrace.schema import Run

#: The two example teams (examples/autogen_team.py, examples/smolagents_agents.py' manager CodeAgent) as
#: tests/collector/_fidelity.py runs them on OpenAI clients over testing.openai_wire.
EXAMPLES = {"autogen": "autogen RoundRobin", "smolagents": "smolagents CodeAgent"}


@contextmanager
def traced(framework: str, config: TraceConfig) -> Iterator[tuple[Any, list[Run]]]:
    """causaltrace's adapter for ``framework`` ("autogen" / "smolagents") on an in-memory exporter: (exporter, the
    Runs the collector finishes meanwhile); uninstrumented and reset afterwards."""
    pytest.importorskip("autogen_agentchat" if framework == "autogen" else "smolagents")
    if framework == "autogen":
        from causaltrace.instrumentation.autogen import instrument_autogen as instrument
        from causaltrace.instrumentation.autogen import uninstrument_autogen as uninstrument
    else:
        from causaltrace.instrumentation.smolagents import instrument_smolagents as instrument
        from causaltrace.instrumentation.smolagents import uninstrument_smolagents as uninstrument
    provider, exporter = capture_spans()
    instrument(provider, config)
    collector = get_tracing().collector
    runs: list[Run] = []
    finish = collector.finish_run

    def capture(run_id: str, **fields: Any) -> Run:
        runs.append(finish(run_id, **fields))
        return runs[-1]

    collector.finish_run = capture  # type: ignore[method-assign]
    try:
        yield exporter, runs
    finally:
        uninstrument()
        reset_tracing()
