"""A teammate's correction ignored (issue 32, family ``ignored_instruction``, MAST FM-2.5).

A real AutoGen RoundRobinGroupChat driven by scripted models: the booker proposes 'Room A', the reviewer corrects it
("Use 'Room B' instead of 'Room A'"), and the booker books 'Room A' all the same. The finding is at that call, with
the correction as its source; the fixed twin (it books 'Room B'), diagnosed with the failing Outcome substituted,
has none. A correction of one's own statement, or of a value nobody stated, is no evidence.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("autogen_agentchat", reason="autogen-agentchat is not installed (pip install causaltrace[autogen])")

from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.findings.ignored_feedback import corrections_in
from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.faults.cases import FaultCase, first_step
from causaltrace.testing.faults.runner import record

TASK = "Book a meeting room for Friday's team offsite and report 'ROOM: <name>'."


def _verify(outcome: Outcome) -> Verdict:
    ok = "ROOM: Room B" in str(outcome.final_answer or "")
    return Verdict(passed=ok, reason="" if ok else "the room booked is closed on Fridays")


def _team(planted: bool):
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, ok, round_robin, tool

    async def book_room(room: str) -> str:
        """Book a meeting room; returns the room booked."""
        return room

    def booker(request):
        booked = ok(request, "book_room")
        if booked is not None:
            return f"ROOM: {booked}. DONE"
        if request.last_from("reviewer") is None:
            return "I'll book 'Room A' for the offsite."
        return call("book_room", room="Room A" if planted else "Room B")

    def reviewer(request):
        return "Use 'Room B' instead of 'Room A': Room A is closed on Fridays."

    return round_robin([agent("booker", booker, [tool(book_room, "Book a meeting room.")]),
                        agent("reviewer", reviewer)], "DONE", 8)


def _case() -> FaultCase:
    return FaultCase(name="ignored-feedback", framework="autogen", fault="ignored_instruction", task=TASK,
                     factory=lambda: _team(True), fixed_factory=lambda: _team(False), verify=_verify,
                     rule=first_step("tool_call", tool="book_room"), rule_text="the booking after the correction")


def _ignored(run):
    d = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))
    return d, [f for f in d.findings if f.category == "FM-2.5" and f.family == "ignored_instruction"]


def test_a_call_that_ignores_a_teammates_correction_is_a_finding():
    case = _case()
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    booking = case.true_step(failing)
    d, [found] = _ignored(failing)
    assert found.index == booking == d.decisive_step_index
    [source, changed] = found.evidence
    assert (source.role, source.value, changed.role, changed.value) == ("source", "Room B", "changed", "Room A")
    assert failing.step_at(source.index).agent == "reviewer" and source.index < booking

    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _ignored(twin.model_copy(update={"outcome": failing.outcome}))[1] == []


def test_corrections_in_reads_new_and_old_values():
    assert corrections_in("The rate should be 0.25, not 0.52.") == [("0.25", "0.52")]
    assert corrections_in("Use 25 instead of 26; change '2023-Q1' to '2023-Q2'.") == [("25", "26"),
                                                                                     ("2023-Q2", "2023-Q1")]
    assert corrections_in("It is not 1,200 but 1,300.") == [("1300", "1200")]
    assert corrections_in("This is not good, use the other tool instead.") == []
