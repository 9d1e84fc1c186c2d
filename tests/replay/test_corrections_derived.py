"""Corrections for the families whose fix is not a value the run already holds (issue 32 item 5): an approval nobody
checked, made-up data, a plan or delegation about another task (:mod:`causaltrace.replay.correct_approval`, …).

Each correction is derived from the finding and the run only. On real framework teams driven by the reactive scripted
models (the fault suite's tuning-half teams, and teams of this module), the correction replays into a success at the
finding's step, in both adapters; the same team without the fault (its twin) gets no such correction.
"""

from __future__ import annotations

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import tuning_runs_and_corrections as _zoo_runs
from _zoo import zoo_home
from causaltrace.replay.correct_approval import claim_phrase, rejection
from causaltrace.replay.corrections import corrections_for, findings_of
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair

#: the families of this module's corrections
DERIVED = frozenset({"unchecked_approval", "made_up_data", "task_drift"})




def _derived_corrections(run) -> list:
    findings = findings_of(run)
    return [c for s in run.steps for c in corrections_for(s, run, findings) if c.finding.family in DERIVED]


def test_a_claim_is_named_in_the_words_its_source_wrote_around_the_value():
    task = "A member buys 3 lamps at 40 dollars each with the 10% member discount. Report 'TOTAL: <dollars>'."
    assert claim_phrase(task, "10") == "10% member discount"
    assert claim_phrase(task, "40") == "40 dollars each with"
    assert claim_phrase("ship 2 kg and 3 kg", "2") == "2 kg"  # a clause ends at "and"
    assert claim_phrase(task, "7") == "7"  # not in the text: the value alone
    assert claim_phrase("pay 1.5 units", "5") == "5"  # a value inside another number is not the value
    text = rejection(["10% member discount"])
    assert text.startswith("REJECT:") and "10% member discount" in text and "APPROVE" not in text.upper()


@pytest.mark.parametrize("name", ["smol-review-lamps", "ag-review-lamps"])
async def test_an_unchecked_approval_is_corrected_by_a_rejection_naming_the_claim(name, tmp_path):
    """The reviewer approved ``TOTAL: 120`` though the task's 10 % discount was never used (the finding's unchecked
    value). The correction replaces the approval — a ToolCallingAgent's ``final_answer`` argument, an AutoGen
    message — by a rejection that names "the task's 10% member discount"; the drafter applies it in the replay and the
    run succeeds: a replay-verified error with a pair. The fixed team's reviewer approves a checked result: no
    finding, no correction."""
    case, run, twin, approval, [fix] = await _zoo_runs(name, "unchecked_approval", tmp_path)
    assert fix.basis == "correction" and fix.step_id == approval.step_id
    assert "the task's 10% member discount" in str(fix.replacement)
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and _derived_corrections(twin) == []
    assert result.repaired and result.decisive.step_id == approval.step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == "unchecked_approval"
    assert all(a.basis == "correction" for a in result.attempts)  # found in the corrections' pass
    assert result.pair is not None and result.pair.basis == "correction"
    assert "rejecting the result it approved unchecked" in result.diagnosis.explanation


# ------------------------------------------------------------------------------------------------- made-up data

RATES_TASK = "Convert 100 EUR and 200 GBP to USD at today's rates; report the sum as 'USD: <dollars>'."


def build_rates(planted: bool = True, *, looked_up: bool = False):
    """An AutoGen team: ``fetcher`` looks up each rate with ``get_rate`` (flaky: its first call fails and is retried),
    ``accountant`` converts; planted: after the EUR rate the fetcher states GBP's rate "from memory" — with
    ``looked_up``, after it looked GBP's rate up too."""
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, results_of, round_robin, said, tool

    rates = {"EUR": 1.08, "GBP": 1.27}

    async def get_rate(pair: str) -> str:
        """Today's exchange rate of a currency pair."""
        return f"rate {pair}: {rates.get(pair.split('/')[0], 0)}"

    def fetcher(request):
        got = {args["pair"].split("/")[0]: result.rsplit(": ", 1)[1] for args, result in results_of(request, "get_rate")}
        made_up = f"Today 1 EUR = {got.get('EUR')} USD. The GBP rate I know from memory: 1 GBP = 1.30 USD."
        if "EUR" not in got:
            return call("get_rate", pair="EUR/USD")
        if "GBP" not in got:
            return made_up if planted and not looked_up else call("get_rate", pair="GBP/USD")
        return made_up if planted and looked_up else f"Today 1 EUR = {got['EUR']} USD. Today 1 GBP = {got['GBP']} USD."

    def accountant(request):
        eur, gbp = said(request, "fetcher", r"1 EUR = ([\d.]+)"), said(request, "fetcher", r"1 GBP = ([\d.]+)")
        if eur and gbp:
            return f"USD: {100 * float(eur.group(1)) + 200 * float(gbp.group(1)):.2f}. DONE"
        return "I need both rates."

    return round_robin([agent("fetcher", fetcher, [tool(get_rate, "Today's exchange rate of a currency pair.",
                                                        flaky=True)]),
                        agent("accountant", accountant)], "DONE", 6)


def verify_rates(outcome):
    from causaltrace.schema import Verdict

    return Verdict(passed="USD: 362.00" in str(outcome.final_answer or ""), reason=str(outcome.final_answer))


async def _record_rates(planted: bool, **variant):
    import causaltrace

    async with causaltrace.run(task=RATES_TASK, verify=verify_rates, name="rates") as handle:
        await build_rates(planted, **variant).run(task=RATES_TASK)
    return handle.run


async def test_made_up_data_is_corrected_by_the_call_that_obtains_it_autogen(tmp_path):
    """The fetcher stated GBP's rate from memory after looking up EUR's. The correction replaces that reply by a call
    of the team's get_rate — the tool that fits "rate", with the arguments of the fetcher's earlier call and GBP, the
    entity the made-up sentence names, in place of EUR — and the replay fetches the real rate: a flip at the
    fabricating step. Without the fabrication (the twin) nothing is corrected."""
    with zoo_home(tmp_path):
        import causaltrace

        causaltrace.instrument()
        run = await _record_rates(True)
        twin = await _record_rates(False)
        findings = findings_of(run)
        made_up = next(f for f in findings if f.family == "made_up_data")
        [fix] = [c for c in corrections_for(run.step(made_up.step_id), run, findings) if c.finding == made_up]
        assert run.step(fix.step_id).kind == "llm_response"
        assert fix.replacement == {"text": None, "tool_calls": [{"name": "get_rate", "arguments": {"pair": "GBP/USD"}}]}
        result = await repair(run, lambda: build_rates(True), verify_rates, k=0, sandbox=default_sandbox(),
                              store=False)
    assert run.outcome.status == "failure" and twin.outcome.status == "success" and _derived_corrections(twin) == []
    assert result.repaired and result.decisive.step_id == made_up.step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == "made_up_data"
    assert all(a.basis == "correction" for a in result.attempts)


async def test_made_up_data_is_corrected_by_the_call_that_obtains_it_smolagents(tmp_path):
    """The quant's code called the market API with a placeholder key after the secret store failed. The correction is
    the code action of the tool that fits the made-up line ("placeholder until the secret store is back": get_secret,
    not price_history) with the arguments of the quant's failed call; the replay reads the real key and the run
    succeeds at the fabricating step. The fixed team gets no correction."""
    case, run, twin, made_up, [fix] = await _zoo_runs("smol-fabricated-apikey", "made_up_data", tmp_path)
    assert fix.step_id == made_up.step_id and fix.replacement == "print(get_secret(name='MARKET_API_KEY'))"
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and _derived_corrections(twin) == []
    assert result.repaired and result.decisive.step_id == made_up.step_id
    assert result.decisive.best.intervention.basis == "correction" and result.pair is not None
    assert "obtaining the data it made up" in result.diagnosis.explanation


def test_a_tool_fits_made_up_data_by_its_words():
    from causaltrace.replay.correct_made_up import stems

    assert "sales" in stems("get_sales") & stems("simulate West's sales figures")
    assert stems("the secret store") & stems("Read a secret from the secret store.") == {"secre", "store"}


async def test_made_up_data_the_run_had_observed_is_corrected_by_the_observed_value(tmp_path):
    """The fetcher looked GBP's rate up (1.27) and still stated one "from memory" (1.30): the observation of the run
    holds the value for that entity, so the first correction puts it in place of the made-up number (the sentence's
    other number, the 1 of "1 GBP", is a correction too, tried and failing) and the replay succeeds at that step."""
    with zoo_home(tmp_path):
        import causaltrace

        causaltrace.instrument()
        run = await _record_rates(True, looked_up=True)
        findings = findings_of(run)
        made_up = next(f for f in findings if f.family == "made_up_data")
        fixes = [c for c in corrections_for(run.step(made_up.step_id), run, findings) if c.finding == made_up]
        assert [c.description.split(" (")[0] for c in fixes[:2]] == ["number 1 → 1.27", "number 1.30 → 1.27"]
        assert fixes[-1].replacement["tool_calls"][0]["name"] == "get_rate"  # the call comes after the observed value
        result = await repair(run, lambda: build_rates(True, looked_up=True), verify_rates, k=0,
                              sandbox=default_sandbox(), store=False)
    assert result.repaired and result.decisive.step_id == made_up.step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.description.startswith("number 1.30 → 1.27")


# ------------------------------------------------------------------------------------ a plan about another task

OFFICE_TASK = ("Yesterday the Madrid office reported 31 degrees, and that figure is fine. Now I need today's "
               "temperature at the Valencia office. Answer 'TEMP: <n>'.")
#: the opening plans: about the context's Madrid reading (planted), about the request (fixed) — both long enough to be
#: judged as an opening
DRIFTED_PLAN = ("Before anything else, let's audit yesterday's reading of the Madrid office (31 degrees) against its "
                "sensor history. 1. reporter: pull the sensor history of the Madrid office and check yesterday's "
                "reading for gaps or spikes. 2. Compare the cleaned series with the reported 31 degrees and write up "
                "any discrepancy for facilities.")
PLAN = ("Plan for today's temperature at the Valencia office: 1. reporter: read the current temperature of the "
        "Valencia office from the building sensors, retrying if the service is unavailable. 2. Answer with the "
        "reading in whole degrees as 'TEMP: <n>' once the sensor confirms it.")
TEMPERATURES = {"Madrid": 29, "Valencia": 24}


def verify_office(outcome):
    from causaltrace.schema import Verdict

    return Verdict(passed="TEMP: 24" in str(outcome.final_answer or ""), reason=str(outcome.final_answer))


def build_office_autogen(planted: bool = True, *, guess: bool = False):
    """AutoGen: ``planner`` writes the opening plan, ``reporter`` (``get_temperature``, flaky) reads the office the
    plan names and answers; planted: the plan audits the Madrid reading the task mentions as fine; ``guess``: the
    reporter states a temperature from memory without ever calling its tool."""
    import re

    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, first_text_of, ok, round_robin, tool

    async def get_temperature(office: str) -> str:
        """Today's temperature at an office, in degrees Celsius."""
        return f"temperature at {office}: {TEMPERATURES.get(office, 0)}"

    def planner(request):
        return "The plan stands." if request.last_from("planner") else (DRIFTED_PLAN if planted else PLAN)

    def reporter(request):
        found = ok(request, "get_temperature")
        if found is not None:
            return f"TEMP: {found.rsplit(': ', 1)[1]}. DONE"
        if guess:
            return "I know the Valencia office from memory: it is usually 30 degrees. TEMP: 30. DONE"
        office = re.search(r"of the (\w+) office", first_text_of(request, "planner"))
        return call("get_temperature", office=office.group(1) if office else "?")

    return round_robin([agent("planner", planner),
                        agent("reporter", reporter, [tool(get_temperature, "Today's temperature at an office.",
                                                          flaky=True)])], "DONE", 6)


def build_office_smolagents(planted: bool = True):
    """smolagents: a ToolCallingAgent plans first (one opening plan), then calls ``get_temperature`` (flaky) for the
    office its plan names and answers; planted: the plan audits the Madrid reading."""
    import re

    from causaltrace.testing.faults.teams_smolagents import make_tool, string, tool_agent, written_plan
    from causaltrace.testing.smolagents import Call

    get_temperature = make_tool("get_temperature", "Today's temperature at an office, in degrees Celsius.",
                                {"office": string("the office")}, "string",
                                lambda office: f"temperature at {office}: {TEMPERATURES.get(office, 0)}", flaky=True)

    def policy(request):
        if request.is_planning:
            return (DRIFTED_PLAN if planted else PLAN) + "<end_plan>"
        if request.is_final_summary:
            return "no temperature"
        found = [m for o in request.observations for m in [re.search(r"temperature at \w+: (\d+)", o)] if m]
        if found:
            return [Call("final_answer", {"answer": f"TEMP: {found[-1].group(1)}"})]
        office = re.search(r"of the (\w+) office", written_plan(request))
        return [Call("get_temperature", {"office": office.group(1) if office else "?"})]

    agent = tool_agent(policy, [get_temperature], "reporter", max_steps=5)
    agent.planning_interval = 10  # one opening plan
    return agent


async def _record_office(framework: str, planted: bool, **variant):
    import asyncio

    import causaltrace

    build = build_office_autogen if framework == "autogen" else build_office_smolagents
    if framework == "autogen":
        async with causaltrace.run(task=OFFICE_TASK, verify=verify_office, name="office") as handle:
            await build(planted, **variant).run(task=OFFICE_TASK)
        return handle.run

    def record():
        with causaltrace.run(task=OFFICE_TASK, verify=verify_office, name="office") as handle:
            build(planted).run(OFFICE_TASK)
        return handle.run

    return await asyncio.to_thread(record)


@pytest.mark.parametrize("framework", ["autogen", "smolagents"])
async def test_a_drifted_plan_is_restated_for_the_request_in_both_adapters(framework, tmp_path):
    """The opening plan audits the Madrid reading the task calls fine, and the executor faithfully reads Madrid. The
    correction puts the request's entity of the same kind (Valencia: both are "the … office") in place of the foreign
    one — an AutoGen message, the reply a smolagents planning step wraps — and the replay reads Valencia: a flip at
    the opening, with a pair. The restatement as the request itself is the second correction. The twin's plan is about the
    request: no drift, no correction."""
    import causaltrace

    with zoo_home(tmp_path):
        causaltrace.instrument()
        run = await _record_office(framework, True)
        twin = await _record_office(framework, False)
        build = build_office_autogen if framework == "autogen" else build_office_smolagents
        findings = findings_of(run)
        drift = next(f for f in findings if f.family == "task_drift")
        opening = run.step(drift.step_id)
        assert opening.kind == ("message" if framework == "autogen" else "planning")
        swap, restated = corrections_for(opening, run, findings)
        assert swap.description == "entity Madrid → Valencia" and "Madrid" not in swap.replacement
        # a smolagents plan is corrected in the reply it wraps: the replay and the pair hold what the model wrote
        assert run.step(swap.step_id).kind == ("message" if framework == "autogen" else "llm_response")
        assert "Now I need today's temperature at the Valencia office." in restated.replacement
        result = await repair(run, lambda: build(True), verify_office, k=0, sandbox=default_sandbox(), store=False)
    assert run.outcome.status == "failure" and twin.outcome.status == "success" and _derived_corrections(twin) == []
    assert result.repaired and result.decisive.step_id == drift.step_id
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == "task_drift" and best.description == swap.description
    assert result.pair is not None and "Valencia office" in str(result.pair.chosen)
    assert "restating its opening for the task's request" in result.diagnosis.explanation


async def test_made_up_data_with_a_tool_never_called_takes_the_arguments_from_its_schema(tmp_path):
    """The reporter states Valencia's temperature from memory and never calls get_temperature. No earlier call gives
    arguments; the tool's schema in the reply's recorded request has one string parameter, ``office``, and the made-up
    sentence names one name of the task, Valencia: the correction calls get_temperature(office='Valencia') and the
    replay answers with the real temperature."""
    import causaltrace

    with zoo_home(tmp_path):
        causaltrace.instrument()
        run = await _record_office("autogen", False, guess=True)
        findings = findings_of(run)
        made_up = next(f for f in findings if f.family == "made_up_data")
        [fix] = [c for c in corrections_for(run.step(made_up.step_id), run, findings) if c.finding == made_up]
        assert fix.replacement == {"text": None, "tool_calls": [{"name": "get_temperature",
                                                                  "arguments": {"office": "Valencia"}}]}
        result = await repair(run, lambda: build_office_autogen(False, guess=True), verify_office, k=0,
                              sandbox=default_sandbox(), store=False)
    assert run.outcome.status == "failure"
    assert result.repaired and result.decisive.step_id == made_up.step_id
    assert result.decisive.best.intervention.basis == "correction"


def test_entities_pair_only_with_an_entity_of_the_same_kind():
    from causaltrace.attribution.stages.drift import task_request
    from causaltrace.replay.correct_drift import entity_pairs

    assert entity_pairs(OFFICE_TASK, task_request(OFFICE_TASK), DRIFTED_PLAN) == [("Madrid", "Valencia")]
    task = ("Heads-up: the nightly job failed with KeyError: 'store_id'. Separately, I need the number of orders "
            "the Lisbon store shipped in March. Answer 'SHIPPED: <n>'.")
    plan = "Read the job log, find the KeyError and report its root cause."
    assert entity_pairs(task, task_request(task), plan) == []  # an error name has no counterpart of its kind


async def test_a_finding_whose_correction_cannot_be_derived_costs_that_correction_not_the_repair(tmp_path):
    """Bad input: evidence pointing past the run (an unchecked value at step 999), a made-up finding with no marker, a
    drift finding on a run without a task — no correction and no exception; the other findings' corrections stay."""
    from causaltrace.schema import FindingEvidence

    case, run, _, approval, [fix] = await _zoo_runs("ag-review-lamps", "unchecked_approval", tmp_path)
    step = run.step(approval.step_id)
    past = approval.model_copy(update={"evidence": (FindingEvidence(index=999, value="10", role="unchecked"),)})
    assert corrections_for(step, run, [past]) == []
    assert corrections_for(step, run, [past, approval]) == [fix]
    bare = approval.model_copy(update={"family": "made_up_data", "evidence": ()})
    assert corrections_for(step, run, [bare]) == []
    drift = approval.model_copy(update={"family": "task_drift"})
    assert corrections_for(step, run.model_copy(update={"task": None}), [drift]) == []


# ------------------------------------------------------------------------------------ a number nothing gave

@pytest.mark.parametrize("name", ["smol-shop-quantity", "ag-shop-quantity", "smol-progress-sales",
                                  "ag-progress-sales"])
async def test_a_number_nothing_gave_is_corrected_by_the_tasks_only_unused_number(name, tmp_path):
    """"Buy 7 boxes": the shopper multiplies the price by 8, which nothing gave, and no step ever uses the task's 7
    (the progress cases: "over 7 days", divided by 8 after polling the job "sales-7", whose 7 is no number).
    The finding names the 7 as its source; the correction passes it (``multiply(12, 7)``) and the replay succeeds in
    the corrections' pass; the twin, which uses the 7, has no unsupported number."""
    case, run, twin, found, [fix] = await _zoo_runs(name, "unsupported_value", tmp_path)
    assert [(e.role, e.index, e.value) for e in found.evidence][:2] == [("source", -1, "7"),
                                                                        ("changed", found.index, "8")]
    assert "the task's '7' is used by no step" in found.claim
    assert fix.basis == "correction" and "7" in str(fix.replacement) and "8" not in str(fix.replacement)
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert result.repaired and result.decisive.step_id == found.step_id
    assert result.decisive.best.intervention.basis == "correction"
    assert not [f for f in findings_of(twin) if f.family == "unsupported_value"]


def test_an_unsupported_number_gets_no_source_when_the_task_leaves_two_numbers_unused():
    from _builders import RunBuilder
    from causaltrace.attribution.stages.provenance import build_provenance

    def changes(task: str):
        run = (RunBuilder("shop").task(task)
               .tool_call("shopper", "multiply", {"a": 12, "b": 8}, content='multiply({"a": 12, "b": 8})',
                          deps=[("task", "saw")])
               .tool_response("shopper", "product: 96", deps=[("call-1", "tool_result_of")])
               .final_answer("shopper", "TOTAL: 96", deps=[("resp-1", "observed")]).build())
        return [(c.before, c.after) for c in build_provenance(run).changes if c.how == "unsupported"]

    assert changes("Buy 7 boxes at 12 dollars each.") == [("7", "8")]
    assert changes("Buy 7 boxes at 12 dollars each, or 9 if on sale.") == [("", "8")]


# ------------------------------------------------------------------------------------ a derailed opening, restated

@pytest.mark.parametrize("name", ["smol-derail-keyerror", "smol-derail-warehouse", "ag-derail-refund"])
async def test_a_derailed_opening_restated_as_the_request_flips_the_tuning_team(name, tmp_path):
    """The opening plans another task the task mentions in passing (a KeyError to debug, the Madrid average that
    checks out, a crash support already answered). Its correction restates it as the task's request; the team's
    executor follows a plan in the request's words as its fixed planner reads the task (the AutoGen planner re-plans
    from its own restated message), and the replay succeeds at the opening: a flip by a correction, with a pair.
    The fixed team's opening is about the request: no drift, no correction."""
    case, run, twin, drift, fixes = await _zoo_runs(name, "task_drift", tmp_path)
    restated = next(c for c in fixes if c.description == "opening restated as the task's request")
    assert restated.basis == "correction"
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and not [c for c in _derived_corrections(twin)
                                                      if c.finding.family == "task_drift"]
    assert result.repaired and result.decisive.step_id == drift.step_id and drift.index == case.true_step(run)
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding.family == "task_drift"
    assert result.pair is not None


async def test_a_made_up_rate_is_obtained_by_the_tool_whose_one_parameter_takes_the_code_it_names(tmp_path):
    """fresh32-ag-assumed-rate: the coder converts at 'rate = 0.92  # approximate USD/EUR rate' and never calls
    get_rate(pair). The task names no entity the made-up line names (EUR is a label); the line's one code, USD/EUR,
    is what it stands for: the correction calls get_rate(pair='USD/EUR') in place of the reply. The twin asks
    get_rate: no made-up data, no correction."""
    case, run, twin, found, [fix] = await _zoo_runs("fresh32-ag-assumed-rate", "made_up_data", tmp_path)
    assert fix.basis == "correction" and fix.replacement == {
        "text": None, "tool_calls": [{"name": "get_rate", "arguments": {"pair": "USD/EUR"}}]}
    assert twin.outcome.status == "success" and not [c for c in _derived_corrections(twin)
                                                      if c.finding.family == "made_up_data"]
