"""What each agent can do, from another instrumentor's spans (issue 32 item 1 on imported traces): a smolagents
manager with two managed agents, run once on real OpenAI client classes over a scripted wire and traced by
OpenInference's instrumentor only, imported from OTLP JSON. The imported run carries the roster a live run stores
(managed agents' descriptions from the manager's AGENT span, their tools from their own spans), and a delegation
to the agent whose tools fit nothing the task asks is an ``unfit_routing`` finding — in the failing trace, not in
its fixed twin's (diagnosed with the failing Outcome substituted).
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("openinference.instrumentation.smolagents")

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from causaltrace.attribution.engine import diagnose
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.schema import Outcome
from causaltrace.testing.smolagents import Call

TASK = "A customer asks for a refund of order B7: report the refundable amount as 'REFUND: <dollars>'."


def _worker(tool_name: str):
    def policy(request):
        if request.observations:
            return [Call("final_answer", {"answer": request.observations[-1].split("Observation:")[-1].strip()})]
        return [Call(tool_name, {"order": "B7"})]

    return policy


def _manager(chosen: str):
    def policy(request):
        if request.observations:
            return [Call("final_answer", {"answer": f"REFUND: {request.observations[-1].split()[-2]}"})]
        return [Call(chosen, {"task": "Handle order B7."})]

    return policy


def _run_team(planted: bool) -> list:
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from smolagents import LogLevel, ToolCallingAgent, tool

    from causaltrace.testing.openai_wire import smolagents_endpoint

    @tool
    def lookup_refund(order: str) -> str:
        """The refundable amount of an order.

        Args:
            order: the order's id
        """
        return f"order {order}: 40 dollars"

    @tool
    def reset_router(order: str) -> str:
        """Restart a router remotely.

        Args:
            order: the order the router came with
        """
        return f"router of order {order}: restarted"

    def model(policy):
        return smolagents_endpoint(policy).smolagents_model()

    team_one = ToolCallingAgent(tools=[lookup_refund], model=model(_worker("lookup_refund")), name="team_one",
                                description="Handles refunds and billing for orders.", verbosity_level=LogLevel.OFF, max_steps=3)
    team_two = ToolCallingAgent(tools=[reset_router], model=model(_worker("reset_router")), name="team_two",
                                description="Fixes routers and other devices.", verbosity_level=LogLevel.OFF, max_steps=3)
    manager = ToolCallingAgent(tools=[], model=model(_manager("team_two" if planted else "team_one")),
                               managed_agents=[team_one, team_two], name="manager", verbosity_level=LogLevel.OFF,
                               max_steps=3)
    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        manager.run(TASK)
    finally:
        instrumentor.uninstrument()
    (run,) = load_otlp_json(json.dumps(MessageToDict(encode_spans(list(exporter.get_finished_spans())))))
    return run


def test_an_imported_trace_carries_the_roster_and_routing_is_judged_by_it():
    failing = _run_team(planted=True)
    roster = failing.metadata["roster"]
    assert roster["team_one"]["description"] == "Handles refunds and billing for orders."
    assert [t["name"] for t in roster["team_one"]["tools"]] == []  # team_one never ran: its tools are unknown
    assert [t["name"] for t in roster["team_two"]["tools"]] == ["reset_router"]
    assert set(roster) >= {"manager", "team_one", "team_two"}

    outcome = Outcome(status="failure", final_answer=failing.outcome.final_answer, reason="no REFUND: 40")
    d = asyncio.run(diagnose(failing.model_copy(update={"outcome": outcome}), "graph", None, store=False))
    found = [f for f in d.findings if f.family == "unfit_routing"]
    call = next(s for s in failing.steps if s.kind == "tool_call" and s.tool_name == "team_two")
    assert [f.index for f in found] == [call.index]
    assert {e.role: e.value for e in found[0].evidence} == {"request": "team_one", "chosen_agent": "team_two"}

    twin = _run_team(planted=False)
    assert "REFUND: 40" in (twin.outcome.final_answer or "")
    d = asyncio.run(diagnose(twin.model_copy(update={"outcome": outcome}), "graph", None, store=False))
    assert [f for f in d.findings if f.family == "unfit_routing"] == []
