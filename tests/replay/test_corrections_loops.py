"""The correction of a loop's first repeat (issue 32 item 5; :func:`causaltrace.replay.correct_loop.repeat_correction`).

An agent pages through a tool by the token each page names for the next one, but keeps asking for the token the
first page gave: the first call with it was sound, its answer offered the next token, and every repeat asks for the
old one again until the agent runs out of steps. The loop finding (``loop_no_progress``) starts at the sound call or at
its first repeat (as the detector decides); the correction is made at that first repeat — the same call taking the token the answer before it offered — and replays
into a success there, in both adapters. The team without the fault (it reads the latest token) has no loop: no
finding, no correction.
"""

from __future__ import annotations

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.replay.correct_loop import offered_values
from causaltrace.replay.corrections import corrections_for, findings_of
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair

TASK = "How many unpaid invoices does customer ACME have (every page)? Answer 'UNPAID: <n>'."
PAGES = (("INV-1 unpaid", "INV-2 paid"), ("INV-5 unpaid", "INV-6 unpaid"), ("INV-9 paid", "INV-11 unpaid"))
TOKENS = ["", "p2", "p3"]


def _page(customer: str, page_token: str = "") -> str:
    at = TOKENS.index(page_token) if page_token in TOKENS else 0
    nxt = TOKENS[at + 1] if at + 1 < len(PAGES) else "none"
    return f"invoices of {customer}, page {at + 1}: {', '.join(PAGES[at])}; next_page_token: {nxt}"


def _next(pages: list[str], planted: bool) -> str | None:
    """The token to ask for next (None: every page read); planted: the first page's token, always."""
    if pages and pages[-1].endswith("next_page_token: none"):
        return None
    return (pages[0] if planted else pages[-1]).rsplit(": ", 1)[1]


def _answer(pages: list[str]) -> str:
    import re

    seen = {m.group(1): m.group(2) for p in pages for m in re.finditer(r"(INV-\d+) (paid|unpaid)", p)}
    return f"UNPAID: {sum(s == 'unpaid' for s in seen.values())}"


def verify(outcome):
    from causaltrace.schema import Verdict

    return Verdict(passed="UNPAID: 4" in str(outcome.final_answer or ""), reason=str(outcome.final_answer))


def build_smolagents(planted: bool = True):
    from causaltrace.testing.faults.teams_smolagents import is_error, make_tool, string, tool_agent
    from causaltrace.testing.smolagents import Call

    listing = make_tool("list_invoices", "One page of a customer's invoices (the first without a page token, the "
                        "next ones with the next_page_token of the page before).",
                        {"customer": string("the customer"),
                         "page_token": {"type": "string", "description": "the page token", "nullable": True}},
                        "string", _page, flaky=True)

    def policy(request):
        if request.is_final_summary:
            return "I could not count the invoices."
        pages = [o for o in request.observations if not is_error(o) and "next_page_token" in o]
        if not pages:
            return [Call("list_invoices", {"customer": "ACME"})]
        token = _next(pages, planted)
        if token is None:
            return [Call("final_answer", {"answer": _answer(pages)})]
        return [Call("list_invoices", {"customer": "ACME", "page_token": token})]

    return tool_agent(policy, [listing], "bookkeeper", max_steps=7)


def build_autogen(planted: bool = True):
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, results_of, round_robin, tool

    async def list_invoices(customer: str, page_token: str = "") -> str:
        """One page of a customer's invoices (the next ones with the next_page_token of the page before)."""
        return _page(customer, page_token)

    def bookkeeper(request):
        pages = [text for _, text in results_of(request, "list_invoices")]
        if not pages:
            return call("list_invoices", customer="ACME")
        token = _next(pages, planted)
        if token is None:
            return f"{_answer(pages)}. DONE"
        return call("list_invoices", customer="ACME", page_token=token)

    return round_robin([agent("bookkeeper", bookkeeper, [tool(list_invoices, "A page of invoices.", flaky=True)],
                              iterations=7)], "DONE", 3)


async def _record(framework: str, planted: bool):
    import asyncio

    import causaltrace

    if framework == "autogen":
        async with causaltrace.run(task=TASK, verify=verify, name="invoices") as handle:
            await build_autogen(planted).run(task=TASK)
        return handle.run

    def record():
        with causaltrace.run(task=TASK, verify=verify, name="invoices") as handle:
            build_smolagents(planted).run(TASK)
        return handle.run

    return await asyncio.to_thread(record)


def test_an_answer_offers_the_next_value_of_an_argument_by_its_name():
    answer = "invoices of ACME, page 2: INV-5 unpaid; next_page_token: p3"
    assert offered_values(answer, {"customer": "ACME", "page_token": "p2"}) == {"page_token": "p3"}
    assert offered_values("page 3: INV-9 paid; next_page_token: none", {"page_token": "p3"}) == {}
    assert offered_values(answer, {"page_token": "p3"}) == {}  # already asked for: nothing new
    assert offered_values("cursor=c7 (the last)", {"cursor": "c6", "limit": 10}) == {"cursor": "c7"}
    assert offered_values("done", {"cursor": "c6"}) == {}


@pytest.mark.parametrize("framework", ["smolagents", "autogen"])
async def test_a_loops_first_repeat_takes_the_value_the_answer_before_it_offered(framework, tmp_path):
    """The loop finding starts at the sound call with ``p2`` (or at its repeat); its first repeat asks for ``p2`` again though the
    answer said ``next_page_token: p3``. The correction, at that repeat, asks for ``p3``; the replay reads page 3
    and answers: a flip by a correction at the repeat, with a pair. The fixed team reads the latest token: no loop,
    no correction."""
    import causaltrace

    with zoo_home(tmp_path):
        causaltrace.instrument()
        run = await _record(framework, True)
        twin = await _record(framework, False)
        findings = findings_of(run)
        loop = next(f for f in findings if f.family == "loop_no_progress")
        calls = [s for s in run.steps if s.kind == "tool_call" and s.tool_name == "list_invoices"
                 and (s.arguments or {}).get("page_token") == "p2"]
        sound, repeat = calls[0], calls[1]
        assert loop.step_id in (sound.step_id, repeat.step_id)  # the detector may blame the repeat itself
        [fix] = [c for c in corrections_for(repeat, run, findings) if c.finding == loop]
        assert fix.basis == "correction" and fix.replacement == {**repeat.arguments, "page_token": "p3"}
        build = build_autogen if framework == "autogen" else build_smolagents
        result = await repair(run, lambda: build(True), verify, k=0, sandbox=default_sandbox(), store=False)
        twin_findings = findings_of(twin)
    assert run.outcome.status == "failure" and twin.outcome.status == "success"
    assert not any(f.family == "loop_no_progress" for f in twin_findings)
    assert not [c for s in twin.steps for c in corrections_for(s, twin, twin_findings)
                if c.finding.family == "loop_no_progress"]
    assert result.repaired and result.decisive.step_id == repeat.step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == "loop_no_progress"
    assert result.pair is not None and "p3" in str(result.pair.chosen)


# ------------------------------------------------------------------------- a refused form, asked again unchanged

BOOK_TASK = "Book the 45-minute design review with Ines Sousa on 9 March 2027 at 10:00 and report 'BOOKED: <id>'."


def _book(person: str, date: str, time: str) -> str:
    import re

    if not re.fullmatch(r"\d{4}-\d\d-\d\d", date):
        raise ValueError(f"date must be YYYY-MM-DD, got {date!r}")
    return f"booked BK-77 for {person} on {date} at {time}"


def verify_booking(outcome):
    from causaltrace.schema import Verdict

    return Verdict(passed="BOOKED: BK-77" in str(outcome.final_answer or ""), reason=str(outcome.final_answer))


def build_booking_smolagents(planted: bool = True):
    import re

    from causaltrace.testing.faults.teams_smolagents import make_tool, string, tool_agent
    from causaltrace.testing.smolagents import Call

    book = make_tool("book_room", "Book a meeting (date as YYYY-MM-DD).",
                     {"person": string("who"), "date": string("the date"), "time": string("the time")}, "string",
                     _book)

    def policy(request):
        if request.is_final_summary:
            return "I could not book it."
        done = [m.group(1) for o in request.observations for m in [re.search(r"booked (BK-\d+)", o)] if m]
        if done:
            return [Call("final_answer", {"answer": f"BOOKED: {done[-1]}"})]
        refused = [o for o in request.observations if "must be YYYY-MM-DD" in o]
        date = "2027-03-09" if refused and not planted else "09/03/2027"
        return [Call("book_room", {"person": "Ines Sousa", "date": date, "time": "10:00"})]

    return tool_agent(policy, [book], "scheduler", max_steps=5)


def build_booking_autogen(planted: bool = True):
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, errors, ok, round_robin, tool

    async def book_room(person: str, date: str, time: str) -> str:
        """Book a meeting (date as YYYY-MM-DD)."""
        return _book(person, date, time)

    def scheduler(request):
        done = ok(request, "book_room")
        if done is not None:
            return f"BOOKED: {done.split()[1]}. DONE"
        date = "2027-03-09" if errors(request, "book_room") and not planted else "09/03/2027"
        return call("book_room", person="Ines Sousa", date=date, time="10:00")

    return round_robin([agent("scheduler", scheduler, [tool(book_room, "Book a meeting.")], iterations=5)],
                       "DONE", 3)


async def _record_booking(framework: str, planted: bool):
    import asyncio

    import causaltrace

    if framework == "autogen":
        async with causaltrace.run(task=BOOK_TASK, verify=verify_booking, name="booking") as handle:
            await build_booking_autogen(planted).run(task=BOOK_TASK)
        return handle.run

    def record():
        with causaltrace.run(task=BOOK_TASK, verify=verify_booking, name="booking") as handle:
            build_booking_smolagents(planted).run(BOOK_TASK)
        return handle.run

    return await asyncio.to_thread(record)


def test_a_refused_date_is_rewritten_in_the_form_the_refusal_names_as_the_run_reads_it():
    from causaltrace.replay.correct_loop import refused_dates

    refusal = "date must be YYYY-MM-DD, got '09/03/2027'"
    args = {"person": "Ines Sousa", "date": "09/03/2027", "time": "10:00"}
    assert refused_dates(refusal, args, {(2027, 3, 9)}) == {"date": "2027-03-09"}  # day-first, as the task says
    assert refused_dates(refusal, args, {(2027, 9, 3)}) == {"date": "2027-09-03"}  # month-first, as the run wrote
    assert refused_dates(refusal, args, set()) == {}  # 09/03 either way: nothing tells which
    assert refused_dates(refusal, {**args, "date": "25/03/2027"}, set()) == {"date": "2027-03-25"}  # one reading
    assert refused_dates("not available at 10:00", args, {(2027, 3, 9)}) == {}  # no form refused


@pytest.mark.parametrize("framework", ["smolagents", "autogen"])
async def test_a_loops_first_repeat_takes_the_form_the_refusal_named(framework, tmp_path):
    """``book_room`` refuses ``09/03/2027`` ("date must be YYYY-MM-DD"); the scheduler asks again unchanged until it
    runs out. The correction at the first repeat asks for ``2027-03-09`` — day-first, as the task's "9 March 2027"
    reads it — and the replay books: a flip by a correction at the repeat. The fixed team rewrites the date after
    the refusal: no loop, no correction."""
    import causaltrace

    with zoo_home(tmp_path):
        causaltrace.instrument()
        run = await _record_booking(framework, True)
        twin = await _record_booking(framework, False)
        findings = findings_of(run)
        loop = next(f for f in findings if f.family == "loop_no_progress")
        calls = [s for s in run.steps if s.kind == "tool_call" and s.tool_name == "book_room"]
        assert loop.step_id in (calls[0].step_id, calls[1].step_id)  # the first try was refused: either is the start
        [fix] = [c for c in corrections_for(calls[1], run, findings) if c.finding == loop]
        assert fix.replacement == {**calls[1].arguments, "date": "2027-03-09"}
        build = build_booking_autogen if framework == "autogen" else build_booking_smolagents
        result = await repair(run, lambda: build(True), verify_booking, k=0, sandbox=default_sandbox(), store=False)
        twin_findings = findings_of(twin)
    assert run.outcome.status == "failure" and twin.outcome.status == "success"
    assert not [c for s in twin.steps for c in corrections_for(s, twin, twin_findings)
                if c.finding.family == "loop_no_progress"]
    assert result.repaired and result.decisive.step_id == calls[1].step_id
    assert result.decisive.best.intervention.basis == "correction"
