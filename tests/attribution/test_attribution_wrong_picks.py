"""An entry acted on that is not the extreme the request asks for (issue 32, family ``value_changed``).

A real smolagents ToolCallingAgent, driven by the fault suite's scripted model (tuning-half case
smol-cheapest-hotel), lists Lisbon's hotels and books the one after the cheapest. The failing run has a finding at
the ``book_hotel`` call with the cheapest hotel as its source, and repair's correction books that hotel instead; the
fixed twin, diagnosed with the failing Outcome substituted, has no such finding. Both directions of extreme, bounds,
tables of several columns, a step that weighs both entries and a request that names the entry are covered below.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents", reason="smolagents is not installed (pip install causaltrace[smolagents])")

from _builders import RunBuilder
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.findings.extremes import requested_extreme
from causaltrace.replay.corrections import corrections_for
from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults.runner import record

FAILED = Outcome(status="failure", final_answer="BOOKED: Hotel Chiado, 360 EUR",
                 verdict=Verdict(passed=False, reason="expected the cheapest hotel"))


def _booked(expected: str):
    def verify(outcome: Outcome) -> Verdict:
        ok = f"BOOKED: {expected}" in (outcome.final_answer or "")
        return Verdict(passed=ok, reason="" if ok else f"expected BOOKED: {expected}")

    return verify


def _diagnosed(run):
    return asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))


def _picks(d):
    return [f for f in d.findings if "not the extreme asked for" in f.claim]


def test_booking_a_hotel_other_than_the_cheapest_listed_is_the_decisive_step_and_its_correction_books_the_cheapest():
    [case] = [c for c in all_cases("smolagents") if c.name == "smol-cheapest-hotel"]
    assert not case.held_out
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    call = case.true_step(failing)
    d = _diagnosed(failing)
    [found] = _picks(d)
    assert (found.family, found.index, d.decisive_step_index) == ("value_changed", call, call)
    assert [(e.role, e.value) for e in found.evidence] == [("source", "Baixa"), ("changed", "Chiado"),
                                                           ("request", "cheapest")]
    assert failing.step_at(found.evidence[0].index).kind == "tool_response"
    [correction] = corrections_for(failing.step_at(call), failing, [found])
    assert correction.basis == "correction" and correction.replacement == {"hotel": "Hotel Baixa", "nights": 3}

    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _picks(_diagnosed(twin.model_copy(update={"outcome": failing.outcome}))) == []


def _run(task: str, listing: str, arguments: dict, *, note: str = ""):
    b = (RunBuilder("picks").task(task)
         .llm("agent", "search", tool_calls=[{"name": "search", "arguments": {"q": "x"}}], deps=[("task", "saw")])
         .tool_call("agent", "search", {"q": "x"}, deps=[("llm-1", "produced_by")])
         .tool_response("agent", listing, deps=[("call-1", "tool_result_of")])
         .llm("agent", note or f"book({arguments})", tool_calls=[{"name": "book", "arguments": arguments}],
              deps=[("resp-1", "observed")])
         .tool_call("agent", "book", arguments, content=f"book({arguments})", deps=[("llm-2", "produced_by")])
         .tool_response("agent", f"booked {arguments['airline']}", deps=[("call-2", "tool_result_of")]))
    return b.final_answer("agent", f"BOOKED the {arguments['airline']}", deps=[("resp-2", "observed")]).build(outcome=FAILED)


LISTING = "flight Lufthansa 95 minutes; flight Iberia 80 minutes; flight Ryanair 120 minutes"


def test_both_directions_are_read_and_the_right_pick_is_no_evidence():
    assert _picks(_diagnosed(_run("Book the shortest flight.", LISTING, {"airline": "flight Lufthansa"})))
    assert _picks(_diagnosed(_run("Book the shortest flight.", LISTING, {"airline": "flight Iberia"}))) == []
    assert _picks(_diagnosed(_run("Book the longest flight.", LISTING, {"airline": "flight Lufthansa"})))
    assert _picks(_diagnosed(_run("Book the longest flight.", LISTING, {"airline": "flight Ryanair"}))) == []


def test_bounds_mixed_directions_tables_comparisons_and_named_entries_are_no_evidence():
    pick = {"airline": "flight Lufthansa"}
    assert _picks(_diagnosed(_run("Book a flight of a maximum of 100 minutes.", LISTING, pick))) == []
    assert _picks(_diagnosed(_run("Compare the shortest and the longest flight.", LISTING, pick))) == []
    assert _picks(_diagnosed(_run("Book the shortest flight.",
                                  "flight Lufthansa 95 minutes 210 EUR; flight Iberia 80 minutes 400 EUR", pick))) == []
    assert _picks(_diagnosed(_run("Book the shortest flight; I like Lufthansa.", LISTING, pick))) == []
    weighed = {"airline": "flight Lufthansa", "note": "Iberia is 80 minutes but Lufthansa is 95"}
    assert _picks(_diagnosed(_run("Book the shortest flight.", LISTING, weighed))) == []


def test_requested_extreme_reads_one_direction_and_not_a_bound():
    assert requested_extreme("Which is the cheapest option?") == ("min", "cheapest")
    assert requested_extreme("the most expensive of them") == ("max", "most expensive")
    assert requested_extreme("at a maximum of 5 stops") is None
    assert requested_extreme("the highest and the lowest") is None
    assert requested_extreme("book any hotel") is None


def test_the_same_pick_in_an_autogen_team_is_found_and_its_twin_is_clean():
    pytest.importorskip("autogen_agentchat", reason="AutoGen is not installed (pip install causaltrace[autogen])")
    from causaltrace.testing.faults.cases import FaultCase, first_step
    from causaltrace.testing.faults.zoo_picks import build_cheapest_hotel_autogen

    task = "Book the cheapest hotel in Lisbon for 3 nights. Report 'BOOKED: <hotel>, <total> EUR'."
    case = FaultCase(name="autogen-cheapest-hotel", framework="autogen", fault="misread_observation", task=task,
                     factory=lambda: build_cheapest_hotel_autogen(True),
                     fixed_factory=lambda: build_cheapest_hotel_autogen(False),
                     verify=_booked("Hotel Baixa, 285 EUR"), rule=first_step("tool_call", tool="book_hotel"),
                     rule_text="the book_hotel call")
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    d = _diagnosed(failing)
    [found] = _picks(d)
    assert found.index == case.true_step(failing) == d.decisive_step_index
    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _picks(_diagnosed(twin.model_copy(update={"outcome": failing.outcome}))) == []


def test_the_same_pick_in_a_trace_openinference_recorded_is_found(monkeypatch):
    """The smolagents team traced by OpenInference's own instrumentor (not causaltrace), imported from OTLP JSON:
    the finding is at the imported book_hotel call; the fixed team's trace has none (same failing outcome)."""
    import json

    from google.protobuf.json_format import MessageToDict
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from _builders import capture_spans
    from causaltrace.collector.otlp import load_otlp_json
    from causaltrace.testing.faults.zoo_picks import build_cheapest_hotel

    oi = pytest.importorskip("openinference.instrumentation.smolagents")
    task = "Book the cheapest hotel in Lisbon for 3 nights. Report 'BOOKED: <hotel>, <total> EUR'."

    def imported(planted: bool):
        provider, exporter = capture_spans()
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
        instrumentor = oi.SmolagentsInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            build_cheapest_hotel(planted).run(task)
        finally:
            instrumentor.uninstrument()
        (run,) = load_otlp_json(json.dumps(MessageToDict(encode_spans(exporter.get_finished_spans()))))
        return run.model_copy(update={"outcome": FAILED})

    failing = imported(True)
    call = next(s for s in failing.steps if s.kind == "tool_call" and s.tool_name == "book_hotel")
    d = _diagnosed(failing)
    [found] = _picks(d)
    assert (found.index, d.decisive_step_index) == (call.index, call.index)
    assert [(e.role, e.value) for e in found.evidence][:2] == [("source", "Baixa"), ("changed", "Chiado")]
    assert _picks(_diagnosed(imported(False))) == []
