"""Corrections derived from a finding's evidence for the tuning-half cases that a correction did not repair before
(issue 32 item 5): an ignored exclusion (:mod:`causaltrace.replay.correct_ignored`), …

Each runs a real framework team of the fault suite's tuning half (reactive scripted models): the correction is derived
from the run's finding, replays into a success at the planted step in the corrections' pass, and the fixed twin (no
finding) gets no such correction.
"""

from __future__ import annotations

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import tuning_runs_and_corrections as _zoo_runs
from _zoo import zoo_home
from causaltrace.replay.corrections import corrections_for, findings_of
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair


def _corrections(run, family: str) -> list:
    findings = findings_of(run)
    return [c for s in run.steps for c in corrections_for(s, run, findings) if c.finding.family == family]


async def _repaired_by_correction_at(case, run, found, home) -> object:
    with zoo_home(home):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert result.repaired and result.decisive.step_id == found.step_id == run.step_at(case.true_step(run)).step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == found.family
    assert all(a.basis == "correction" for a in result.attempts)  # found in the corrections' pass
    assert result.pair is not None and result.pair.basis == "correction"
    return result


# ---------------------------------------------------------------------------------------- an ignored exclusion

@pytest.mark.parametrize("name", ["smol-ignored-k4", "ag-ignored-k4"])
async def test_an_ignored_exclusion_is_corrected_by_leaving_the_excluded_value_out(name, tmp_path):
    """"Sum the order amounts of account K4, excluding cancelled orders", and the bookkeeper adds every order: the
    finding names the instruction ("excluding cancelled") and the cancelled 80 the add used. The correction is the
    same add without the 80 — a smolagents ToolCallingAgent's call, an AutoGen call — and the replay succeeds at
    that step. The twin's bookkeeper leaves the cancelled order out: no finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs(name, "ignored_instruction", tmp_path)
    assert [(e.role, e.value) for e in found.evidence] == [("request", "excluding cancelled"), ("changed", "80")]
    assert fix.replacement == {"numbers": [120, 45]} and fix.step_id == found.step_id
    assert fix.description == "leave out 80 (excluding cancelled)"
    result = await _repaired_by_correction_at(case, run, found, tmp_path)
    assert "honouring the instruction it ignored (ignored instruction)" in result.diagnosis.explanation
    assert twin.outcome.status == "success" and _corrections(twin, "ignored_instruction") == []


def test_excluded_values_are_left_out_where_the_step_lists_or_adds_them():
    from causaltrace.replay.correct_ignored import left_out

    assert left_out("arguments", {"numbers": [120, 80, 45]}, ["80"]) == {"numbers": [120, 45]}
    assert left_out("arguments", {"numbers": [80, 80, 45]}, ["80"]) == {"numbers": [80, 45]}  # once per finding
    assert left_out("arguments", {"numbers": [120, 80, 90]}, ["80", "90"]) == {"numbers": [120]}
    assert left_out("arguments", {"numbers": [120, 45]}, ["80"]) is None  # not there: nothing to leave out
    assert left_out("code", "total = sum([120, 80, 45])", ["80"]) == "total = sum([120, 45])"
    assert left_out("code", "total = sum([80, 45])", ["80"]) == "total = sum([45])"
    assert left_out("code", "total = sum([120, 80])", ["80"]) == "total = sum([120])"
    assert left_out("code", "total = 120 + 80 + 45", ["80"]) == "total = 120 + 45"
    assert left_out("code", "total = 80 + 45", ["80"]) == "total = 45"
    assert left_out("code", "total = 1800 + 45", ["80"]) is None  # a number inside another is not the value
    assert left_out("text", "The sum is 245.", ["80"]) is None  # prose: no list to leave an item out of


async def test_an_excluded_figure_is_corrected_by_the_figure_its_source_states_without_it(tmp_path):
    """fresh32-ag-net-price: "excluding VAT", and pricing multiplies the 123.00 the price list labels "incl. 23%
    VAT". The same result states "(net 100.00 EUR)": the correction is the same call on 100.00 (a scalar has no
    list to leave the value out of), and the replay succeeds at that call. The twin multiplies the net price: no
    finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("fresh32-ag-net-price", "ignored_instruction", tmp_path)
    assert fix.replacement == {"a": 100.0, "b": 3} and fix.step_id == found.step_id
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "ignored_instruction") == []


def test_the_figure_without_the_excluded_part_is_the_one_a_complement_word_labels():
    from _builders import RunBuilder
    from causaltrace.replay.correct_ignored import complement_value

    def complement(result: str, value: str = "123") -> str | None:
        run = (RunBuilder("net").task("Quote it excluding VAT.").tool_response("pricing", result)
               .tool_call("pricing", "multiply", {"a": float(value), "b": 3}).build())
        return complement_value(run, run.steps[-1], value)

    assert complement("123.00 EUR per licence incl. 23% VAT (net 100.00 EUR)") == "100.00"
    assert complement("123.00 EUR, 100.00 EUR before tax") is None  # 'before tax' FOLLOWS: no label before it
    assert complement("123.00 EUR gross, excl. VAT: 100.00 EUR") == "100.00"
    assert complement("123.00 EUR incl. VAT; 5 licences in stock") is None  # no complement: nothing derived
    assert complement("net 100.00 or net 90.00 with a discount; 123.00 gross") is None  # two: none chosen
    assert complement("the price is 99.00 EUR (net 80.00)") is None  # the value is not in this source


# -------------------------------------------------------------------------------------------- a route that does not fit

async def test_a_route_written_in_code_calls_the_agent_the_request_names_as_the_code_writes_that_call(tmp_path):
    """The manager's routing code tests ``category != 'billing'`` and so calls tech_agent for a refund; the finding
    names billing_agent (what the classification pointed to) and the chosen tech_agent. The correction calls
    billing_agent with the task the code itself wrote for it, in place of the tech_agent call, and the replay refunds:
    a flip at the routing code. The twin routes to billing_agent: no finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("smol-ticket-route", "unfit_routing", tmp_path)
    assert fix.description == "call billing_agent instead of tech_agent"
    assert "tech_agent(" not in fix.replacement
    assert fix.replacement.count("billing_agent(task='Refund order B7 and say how much.')") == 2
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "unfit_routing") == []


async def test_an_unfounded_speaker_choice_is_corrected_to_the_candidate_whose_tools_are_left_to_use(tmp_path):
    """The selector picks guesser (no tools), whose reply states the answer from nothing; the researcher has looked
    both cities up. The one candidate holding tools none of which the run has called is the calculator (subtract):
    the correction selects it and the replay subtracts — a flip at the speaker selection. The twin selects the
    calculator: no finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("ag-speaker-lyon", "unfit_routing", tmp_path)
    assert run.step(found.step_id).kind == "speaker_selection"
    assert fix.replacement == "calculator" and fix.description.startswith("target guesser → calculator")
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "unfit_routing") == []


def test_a_calls_text_is_read_with_balanced_parentheses_and_a_route_takes_the_codes_own_call():
    from causaltrace.replay.correct_routing import call_texts, route_in_code

    code = "a = billing(task='Refund (B7)')\nif x:\n    b = tech(task=f('x'))\nprint(tech)"
    assert call_texts(code, "billing") == ["billing(task='Refund (B7)')"]
    assert call_texts(code, "tech") == ["tech(task=f('x'))"]  # the bare name in print(tech) is no call
    assert route_in_code(code, "tech", "billing") == code.replace("tech(task=f('x'))", "billing(task='Refund (B7)')")
    assert route_in_code("r = tech(task='x')", "tech", "billing") == "r = billing(task='x')"  # no own call: renamed
    assert route_in_code("r = other(task='x')", "tech", "billing") is None


# ------------------------------------------------------------------------------------------ a loop without progress

@pytest.mark.parametrize(("name", "expected"), [
    ("ag-job-timeout", "argument timeout: 5 → 30 (the budget of the loop's 6 repeats in one action)"),
    ("smol-newton-bound", "loop cap while abs(x * x - target) > 1e-9 and i < 3: → while abs(x * x - target) > 1e-9 "
                          "and i < 9: (the budget of the loop's 3 repeats in one action)")])
async def test_a_loop_without_progress_is_corrected_by_giving_its_action_the_budget_its_repeats_spent(name, expected,
                                                                                                     tmp_path):
    """The runner waits 5 s for a job that needs 6 and repeats the same wait (6 times); the solver's Newton loop is
    capped at 3 iterations and resent unchanged (3 times). The correction gives the loop's first action its limit
    times the loop's actions — the timeout the result restates, the code's one loop cap — and the replay finishes
    the job / converges: a flip at the planted step. The twins do not loop: no finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs(name, "loop_no_progress", tmp_path)
    assert fix.description == expected
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "loop_no_progress") == []


def test_a_loops_limit_is_the_one_number_that_bounds_its_action():
    from causaltrace.replay.correct_loop import raised_limit

    wait = {"job": "j-7", "timeout": 5}
    assert raised_limit("arguments", wait, "job j-7 still running after 5 s", 3)[0] == {"job": "j-7", "timeout": 15}
    # the result restates neither number: the one named as a limit
    assert raised_limit("arguments", {"page": 2, "max_wait": 10}, "pending", 2)[0] == {"page": 2, "max_wait": 20}
    assert raised_limit("arguments", {"page": 2, "size": 10}, "pending", 2) is None  # no limit: nothing to raise
    assert raised_limit("arguments", wait, "still running after 5 s", 1) is None  # no repeat: no loop
    code = "for k in range(4):\n    step()\n"
    assert raised_limit("code", code, "not converged", 2)[0] == "for k in range(8):\n    step()\n"
    assert raised_limit("code", code, "rows: 12", 2) is None  # the result shows no bound was hit: any loop
    assert raised_limit("arguments", {"page": 1}, "page 1 of 3: a, b", 2) is None  # restated, but not as a stop
    assert raised_limit("code", "solve(tol=1e-6, max_iter=50)", "", 2)[0] == "solve(tol=1e-6, max_iter=100)"
    two = "for k in range(4):\n    while i < 3:\n        i += 1\n"
    assert raised_limit("code", two, "not converged", 2) is None  # two caps: nothing shows which one it hit
    assert raised_limit("text", "waiting 5 s", "", 2) is None


# ------------------------------------------------------------------------------- a figure filled into a gap

async def test_a_figure_filled_into_a_gap_is_corrected_by_the_lookup_that_left_it(tmp_path):
    """Building C's meter timed out and the analyst's table writes 18400 for C beside A's and B's readings (no marker
    word: the gap is the evidence). The correction is the code of the lookup that failed and was never answered,
    ``read_meter(building='C', month='January 2024')``; the gateway's outage follows the run (the recorded timeout
    counts), so the replay reads C and succeeds — a flip at the planted step. The twin reads C: no finding, no
    correction."""
    case, run, twin, found, [fix] = await _zoo_runs("smol-fabricated-meters", "made_up_data", tmp_path)
    assert [e.role for e in found.evidence] == ["source", "source", "changed"]
    assert fix.step_id == found.step_id
    assert fix.replacement == "print(read_meter(building='C', month='January 2024'))"
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "made_up_data") == []


@pytest.mark.parametrize(("name", "call"), [
    ("smol-fabricated-sales", "print(get_sales(region='West'))"),
    ("ag-fabricated-voyage", {"text": None, "tool_calls": [
        {"name": "sea_distance", "arguments": {"origin": "Gdansk", "destination": "Klaipeda"}}]})])
async def test_made_up_data_after_a_timeout_is_obtained_in_the_replay_as_the_outage_follows_the_run(name, call,
                                                                                                    tmp_path):
    """The lookup for one key timed out and the agent made the figure up. The correction is the call that obtains it;
    the service's outage follows the run like the flaky tools' first-call failure (zoo_common.outage counts the
    timeout the agent's memory or context holds, served from the recording), so the corrected call is the run's
    next call of that key and succeeds, as the fixed twin's retry does: a flip at the planted step."""
    case, run, twin, found, fixes = await _zoo_runs(name, "made_up_data", tmp_path)
    assert call in [f.replacement for f in fixes]
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "made_up_data") == []


# ------------------------------------------------------------------------ made-up data after a search found nothing

async def test_made_up_data_after_a_search_found_nothing_is_corrected_by_the_refined_search(tmp_path):
    """The researcher's search for Nice's population found nothing and it states a "hypothetical" figure. Repeating
    the same query would find nothing again; the correction searches with that query plus the terms every result
    found for the other cities shares (the source they cite, "(commune) ... (INSEE, 2021 census)"), and the replay
    finds Nice: a flip at the planted step. The twin searches again itself: no finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("ag-fabricated-census", "made_up_data", tmp_path)
    assert fix.replacement == {"text": None, "tool_calls": [{"name": "web_search", "arguments": {
        "query": "population of Nice latest census commune INSEE"}}]}
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "made_up_data") == []


def test_a_search_is_refined_only_when_the_same_call_found_nothing_and_its_siblings_share_terms():
    from _builders import RunBuilder
    from causaltrace.replay.correct_made_up import _refined

    def run_of(*answers: tuple[str, str, bool]):
        b = RunBuilder("search").task("Population of Lyon, Marseille and Nice?")
        for query, answer, error in answers:
            b = b.tool_call("researcher", "web_search", {"query": query}).tool_response(
                "researcher", answer, is_error=error, tool_name="web_search",
                **({"status": "error", "error": {"type": "TimeoutError", "message": answer}} if error else {}))
        run = b.message("researcher", "Nice: hypothetically 350,000.").build()
        return run, run.steps[-1]

    lyon, marseille = ("population of Lyon", "Lyon (commune): 522,250 (INSEE)", False), (
        "population of Marseille", "Marseille (commune): 873,076 (INSEE)", False)
    nice = {"query": "population of Nice"}
    run, step = run_of(lyon, marseille, ("population of Nice", "No results found.", False))
    assert _refined(run, step, "web_search", nice) == {"query": "population of Nice commune INSEE"}
    run, step = run_of(lyon, marseille, ("population of Nice", "timeout", True))
    assert _refined(run, step, "web_search", nice) == nice  # a failure, not an empty answer: the call again
    run, step = run_of(lyon, ("population of Nice", "No results found.", False))
    assert _refined(run, step, "web_search", nice) is None  # one sibling: no terms shown to be shared


def test_a_reply_replaced_wholesale_is_the_pairs_chosen_turn():
    """A correction that replaces a model reply's text and tool calls wholesale (the call that obtains made-up data,
    the call for an omitted item) gives the turn the pair chooses: the calls it names, the text it gives, the
    original call ids kept by position; a call without a name gives no turn."""
    from _builders import RunBuilder
    from causaltrace.replay.turns import corrected_turn

    run = (RunBuilder("reply").task("Population of Nice?")
           .llm("researcher", "", tool_calls=[{"id": "c-1", "name": "web_search", "arguments": {"query": "Nice"}}])
           .llm("researcher", "Nice has roughly 350,000 inhabitants.").build())
    searched, stated = run.steps[1], run.steps[2]
    edit = corrected_turn(run, stated, {"text": None, "tool_calls": [{"name": "web_search",
                                                                      "arguments": {"query": "Nice INSEE"}}]})
    assert edit.turn == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "web_search", "arguments": {"query": "Nice INSEE"}}}]}
    edit = corrected_turn(run, searched, {"text": "Let me search again.", "tool_calls": [
        {"name": "web_search", "arguments": {"query": "Nice INSEE"}}, {"name": "add", "arguments": {}}]})
    assert edit.turn["content"] == "Let me search again."
    assert [c["id"] for c in edit.turn["tool_calls"]] == ["c-1", "call_1"]
    assert corrected_turn(run, stated, {"tool_calls": [{"arguments": {}}]}).turn is None


# ------------------------------------------------------------------------------------------ a narrowed period

async def test_a_period_narrowed_to_one_year_is_corrected_by_enumerating_the_whole_span(tmp_path):
    """"fiscal year 2023 (April 2023 to March 2024)", and the opening plan fetches 2023-Q1 … 2023-Q4: the finding's
    evidence is the request's span and the dropped 2024. The correction rewrites the plan's enumeration for the span
    in its own notation — 2023-Q2, 2023-Q3, 2023-Q4 and 2024-Q1 — in the model reply the smolagents planning step
    wraps, and the replay fetches the fiscal year: a flip at the planted step, with a pair. The twin plans the fiscal
    year: no finding, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("smol-derail-fiscal", "ignored_instruction", tmp_path)
    assert run.step(found.step_id).kind == "planning" and run.step(fix.step_id).kind == "llm_response"
    assert "for 2023-Q2, 2023-Q3, 2023-Q4 and 2024-Q1 with" in fix.replacement and "2023-Q1" not in fix.replacement
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "ignored_instruction") == []


def test_a_spans_periods_are_enumerated_in_the_notation_the_text_uses():
    from causaltrace.replay.correct_ignored import respanned, span_periods

    assert span_periods("April 2023 to March 2024", "quarter") == [(2023, 2), (2023, 3), (2023, 4), (2024, 1)]
    assert span_periods("from 2019 through 2020", "quarter")[::4] == [(2019, 1), (2020, 1)]
    assert span_periods("Nov 2023 - Feb 2024", "month") == [(2023, 11), (2023, 12), (2024, 1), (2024, 2)]
    assert span_periods("the year 2023", "month") == []
    assert respanned("fetch Q1 2023, Q2 2023, Q3 2023 and Q4 2023.", "July 2023 to June 2024") == (
        "fetch Q3 2023, Q4 2023, Q1 2024 and Q2 2024.")
    assert respanned("months 2023-11 / 2023-12", "Nov 2023 - Jan 2024") == "months 2023-11 / 2023-12 / 2024-01"
    assert respanned("fetch 2023-Q1 only", "April 2023 to March 2024") is None  # one period: no enumeration
    assert respanned("fetch 2023-Q2, 2023-Q3, 2023-Q4 and 2024-Q1", "April 2023 to March 2024") is None


def test_a_finding_these_corrections_cannot_derive_costs_the_correction_not_the_repair():
    """Bad input for each correction of this module: evidence of the right roles whose values the step does not
    hold, a loop with no repeat, a routing choice with no candidates, a span that is no span — no correction and no
    exception."""
    from _builders import RunBuilder
    from causaltrace.schema import Finding, FindingEvidence

    run = (RunBuilder("bad").task("Sum the orders of K4, excluding cancelled orders, from April 2023 to March 2024.")
           .tool_call("bookkeeper", "add", {"numbers": [120, 45]})
           .tool_response("bookkeeper", "sum: 165", tool_name="add")
           .step("speaker_selection", "manager", outputs={"selected": "guesser"}, content="guesser")
           .message("planner", "Plan: fetch 2023-Q1 and 2023-Q2.").build())
    add, pick, plan = run.steps[1], run.steps[3], run.steps[4]

    def finding(step, family, *evidence):
        return Finding(family=family, step_id=step.step_id, index=step.index, claim="bad input",
                       evidence=tuple(FindingEvidence(index=i, value=v, role=r) for r, i, v in evidence))

    assert corrections_for(add, run, [finding(add, "ignored_instruction", ("request", -1, "excluding cancelled"),
                                              ("changed", add.index, "80"))]) == []  # no 80 to leave out
    assert corrections_for(add, run, [finding(add, "loop_no_progress")]) == []  # no repeat: no loop budget
    assert corrections_for(add, run, [finding(add, "loop_no_progress", ("repeat", 99, None))]) == []  # no limit
    assert corrections_for(pick, run, [finding(pick, "unfit_routing", ("changed", pick.index, "400000"),
                                               ("chosen_agent", pick.index, "guesser"))]) == []  # no candidates
    assert corrections_for(plan, run, [finding(plan, "ignored_instruction", ("request", -1, "the whole year"),
                                               ("omitted_item", plan.index, "2024"))]) == []  # no span


async def test_a_structured_output_the_framework_reserialised_gets_its_pair_in_the_models_spacing(tmp_path):
    """fresh32-ag-structured-po: the order writer's structured output is posted re-serialised
    (``{"sku":"PX-210","quantity":21,…}``) while the model wrote ``{"sku": "PX-210", "quantity": 21, …}``. The
    correction of the quantity (21 → 12) flips the run; its pair's chosen turn is the corrected JSON in the model's
    own spacing — before, the posted text was not found in the model's output and the flip had no pair."""
    case, run, twin, found, [fix] = await _zoo_runs("fresh32-ag-structured-po", "value_changed", tmp_path)
    result = await _repaired_by_correction_at(case, run, found, tmp_path)
    assert '"quantity": 12' in str(result.pair.chosen) and '"quantity": 21' not in str(result.pair.chosen)
    assert twin.outcome.status == "success" and _corrections(twin, "value_changed") == []


# ---------------------------------------------------------------------------------- an error never recovered

async def test_a_refused_value_is_asked_again_as_the_tasks_unused_value_of_its_shape(tmp_path):
    """fresh32-smol-currency-code: "1,200 EUR, 950 DKK and 400 CHF", and the treasurer asks get_rate(pair='SFR/EUR');
    the tool refuses ("unknown currency code 'SFR'") and the franc payment is silently left out. The task's three-
    capital codes are EUR, DKK and CHF; the earlier DKK/EUR call used two: the correction asks for CHF/EUR at the
    refused call, and the replay succeeds there. The twin asks CHF/EUR: no error, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("fresh32-smol-currency-code", "unrecovered_error", tmp_path)
    assert fix.replacement == {"pair": "CHF/EUR"} and fix.step_id == found.step_id
    await _repaired_by_correction_at(case, run, found, tmp_path)
    assert twin.outcome.status == "success" and _corrections(twin, "unrecovered_error") == []


def test_a_refused_value_has_a_correction_only_from_one_unused_value_of_its_shape():
    from _builders import RunBuilder
    from causaltrace.replay.correct_error import refused_value_correction, shape
    from causaltrace.schema import Finding, FindingEvidence

    assert shape("SFR") == shape("CHF") == "AAA" and shape("A-512") == "A-999" != shape("SFR")

    def fix(task: str, error: str, earlier: str = "DKK/EUR"):
        run = (RunBuilder("fx").task(task).tool_call("t", "get_rate", {"pair": earlier})
               .tool_call("t", "get_rate", {"pair": "SFR/EUR"}).build(task=task))
        step = run.steps[-1]
        found = Finding(family="unrecovered_error", step_id=step.step_id, index=step.index, claim="refused",
                        evidence=(FindingEvidence(step_id=step.step_id, index=step.index, value=error, role="error"),))
        made = refused_value_correction(step, run, found)
        return made.replacement if made is not None else None

    refusal = "ValueError: unknown currency code 'SFR': use an ISO 4217 code"
    assert fix("Paid 1,200 EUR, 950 DKK and 400 CHF.", refusal) == {"pair": "CHF/EUR"}
    assert fix("Paid 950 DKK, 400 CHF and 80 GBP.", refusal) is None  # CHF or GBP: nothing tells which
    assert fix("Paid 1,200 EUR, 950 DKK and 400 CHF.", "service temporarily unavailable") is None  # quotes nothing
    assert fix("Paid 1,200 EUR and 950 DKK.", refusal) is None  # no unused code of that shape
