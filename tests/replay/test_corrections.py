"""Repair corrects; it does not merely find another way (issue 32 item 5; :mod:`causaltrace.replay.corrections`).

A correction is derived from a finding — the analyst restated the clerk's 21 as 22, so the correction puts 21 back
— and a flip by a correction is a replay-verified error with a repair pair. Any other edit is an alternative: its
flip is stored with ``basis="alternative"``, gives no exported pair unless asked, and never becomes the run's
verdict over a diagnosis whose top rests on a finding. The same real AutoGen team as the ordering tests.
"""

from __future__ import annotations

import pytest

from causaltrace.collector.store import Store
from causaltrace.replay.corrections import _substitute, corrections_for, findings_of
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.pairs import pair_rows
from causaltrace.replay.repair import repair
from test_repair_order import _record, _uninstrument, build, verify  # noqa: F401  (the fixture is autouse there)


def test_a_correction_puts_the_source_value_back_in_the_shape_the_step_writes_it():
    assert _substitute({"a": 17, "b": 26}, "25", "26") == {"a": 17, "b": 25}
    assert _substitute("The unit price of tea is 22 dollars, 3 boxes.", "21", "22") == (
        "The unit price of tea is 21 dollars, 3 boxes.")
    assert _substitute("total = sum(i * i for i in range(1, 6))", "1..6", "1..5") == (
        "total = sum(i * i for i in range(1, 7))")
    assert _substitute("if amount >= 100:\n    keep()", "> 100", ">= 100") == "if amount > 100:\n    keep()"
    assert _substitute("ship in kilograms", "pounds", "kilograms") == "ship in pounds"
    assert _substitute({"city": "Oslo"}, "25", "26") is None  # nothing to put back: no correction


@pytest.fixture
def run():
    import asyncio

    return asyncio.run(_record())


async def test_a_flip_by_a_correction_is_a_verified_error_with_a_pair(run, tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALTRACE_HOME", str(tmp_path))
    analyst = next(s for s in run.steps if s.kind == "message" and s.agent == "analyst")
    with Store() as store:
        store.save_run(run)
    result = await repair(run, build, verify, k=0, sandbox=default_sandbox())
    assert result.decisive.step_id == analyst.step_id and result.decisive.basis == "correction"
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.finding is not None and best.finding.family == "value_changed"
    assert best.description == "number 22 → 21"
    assert "restoring what its source had (value changed)" in result.diagnosis.explanation
    # pass 1 tried corrections only: nothing before the flip was an alternative
    assert all(a.basis == "correction" for a in result.attempts)
    assert result.pair is not None and result.pair.basis == "correction" and result.alternative_pair is None
    d = result.diagnosis
    assert d.verified_by == "replay" and d.basis == "correction" and d.confidence == 1.0
    with Store() as store:
        verdict = store.verdict(run.run_id)
        assert verdict.basis == "correction" and verdict.decisive_step_id == analyst.step_id
        assert len(list(pair_rows(store.repair_pairs(run_id=run.run_id)))) == 1


async def test_a_flip_by_an_alternative_is_no_verified_error_and_no_pair(run, tmp_path, monkeypatch):
    """Without corrections every edit is an alternative: the same flip proves nothing (no exported pair, an
    uncertain verdict line), and the finding-backed diagnosis stays the run's verdict."""
    import causaltrace
    from causaltrace.attribution.stages.confidence import is_uncertain

    monkeypatch.setenv("CAUSALTRACE_HOME", str(tmp_path))
    with Store() as store:
        store.save_run(run)
    ranked = causaltrace.diagnose_sync(run)  # stored: its top rests on the analyst's changed price
    assert ranked.basis == "finding"
    result = await repair(run, build, verify, k=0, sandbox=default_sandbox(), corrections=False)
    assert result.repaired and result.decisive.best.intervention.basis == "alternative"
    assert result.pair is None and result.alternative_pair is not None
    assert result.alternative_pair.basis == "alternative"
    d = result.diagnosis
    assert d.basis == "alternative" and is_uncertain(d) and d.confidence <= 0.25
    assert "nothing shows step" in d.explanation and "an alternative, not a verified error" in d.explanation
    with Store() as store:
        assert store.verdict(run.run_id).basis == "finding"  # the alternative does not override it
        pairs = store.repair_pairs(run_id=run.run_id)
        assert [p.basis for p in pairs] == ["alternative"]
        assert list(pair_rows(pairs)) == [] and len(list(pair_rows(pairs, include_alternatives=True))) == 1


def test_the_corrections_of_a_step_come_from_its_findings_only(run):
    import causaltrace

    d = causaltrace.diagnose_sync(run, store=False)
    analyst = next(s for s in run.steps if s.kind == "message" and s.agent == "analyst")
    clerk = next(s for s in run.steps if s.kind == "tool_call" and s.agent == "clerk")
    [correction] = corrections_for(analyst, run, d.findings)
    assert correction.replacement.endswith("tea is 21 dollars.") and correction.basis == "correction"
    assert corrections_for(clerk, run, d.findings) == []  # no finding there: nothing to correct


@pytest.mark.parametrize("name", ["smol-premature-three", "ag-premature-three"])
async def test_an_omission_is_corrected_by_the_call_for_the_missing_item_in_both_adapters(name, tmp_path):
    """The shopper answered before pricing the gizmo: the correction replaces the producing reply's tool calls with
    get_price(item='gizmo') — the tool that handled the other items — and both adapters replay that reply into the
    right total (the flaky get_price failed once in the recorded run, not again in the replay)."""
    from _zoo import zoo_home
    from causaltrace.replay.corrections import findings_of
    from causaltrace.replay.guarded import guarded_replay
    from causaltrace.testing.faults import all_cases
    from causaltrace.testing.faults import runner as faults_runner

    case = next(c for c in all_cases() if c.name == name)
    with zoo_home(tmp_path):  # this module's autouse fixture uninstruments after each test: record afresh
        run = await faults_runner.record(case)
    findings = findings_of(run)
    omission = next(f for f in findings if f.family == "omission")
    [fix] = corrections_for(run.step(omission.step_id), run, findings)
    assert fix.basis == "correction" and run.step(fix.step_id).kind == "llm_response"
    assert fix.replacement == {"text": None, "tool_calls": [{"name": "get_price", "arguments": {"item": "gizmo"}}]}
    result, _ = await guarded_replay(run, case.factory, fix, case.verify, sandbox=default_sandbox(), timeout_s=60)
    assert result.error is None and result.divergence is None and result.run is not None
    assert any(s.kind == "tool_call" and s.tool_name == "get_price" and (s.arguments or {}).get("item") == "gizmo"
               for s in result.run.steps)
    assert result.flipped


@pytest.mark.parametrize(("name", "call"), [
    ("fresh32-smol-each-warehouse", {"name": "stock_level", "arguments": {"part": "M8 bolts", "warehouse": "Hull"}}),
    ("fresh32-ag-handback", {"name": "refund_item", "arguments": {"order": "A-730", "item": "shade"}})])
async def test_an_omitted_item_is_called_by_the_argument_that_names_the_items(name, call, tmp_path):
    """The tool that handled the earlier items takes two strings (``stock_level(part, warehouse)``,
    ``refund_item(order, item)``): the item is the argument whose value changed between the agent's calls (Leeds,
    then York; lamp, then bulb) — the part and the order stayed. The correction calls it for the omitted item, written
    as the task writes it (``Hull``), in place of the early answer (a managed agent's final_answer, a Swarm agent's
    report before its hand-back), and repair flips the run there by that correction. The fixed twin handles every
    item: no omission, no correction."""
    from _zoo import tuning_runs_and_corrections, zoo_home

    case, run, twin, omission, [fix] = await tuning_runs_and_corrections(name, "omission", tmp_path)
    assert fix.basis == "correction" and fix.replacement == {"text": None, "tool_calls": [call]}
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    twin_findings = findings_of(twin)
    assert twin.outcome.status == "success" and not [f for f in twin_findings if f.family == "omission"]
    assert result.repaired and result.decisive.step_id == omission.step_id
    assert omission.index == case.true_step(run)
    assert result.decisive.best.intervention.basis == "correction"


@pytest.mark.parametrize("name", ["smol-unit-two", "ag-unit-two"])
async def test_a_wrong_unit_is_repaired_by_its_correction_in_both_adapters(name, tmp_path):
    """The shipper priced the second parcel in lb; the correction ``unit: lb → kg`` is the replay's first live call
    of the flaky shipping_cost. The tool's transient failure follows the run (it failed once, before, in the
    recording), so the corrected call answers and the run flips — before, the fresh team's tool failed it and the
    retry put ``lb`` back, and no wrong_unit case of either framework was repaired. The unedited control replay
    answers every recorded request as recorded, so the flip is confirmed by two checks, not six."""
    from _zoo import zoo_home
    from causaltrace.testing.faults import all_cases
    from causaltrace.testing.faults import runner as faults_runner

    case = next(c for c in all_cases() if c.name == name)
    with zoo_home(tmp_path):
        run = await faults_runner.record(case)
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert result.repaired and result.decisive.index == case.true_step(run)
    best = result.decisive.best.intervention
    assert best.basis == "correction" and best.description == "argument unit: lb → kg"
    assert result.pair is not None and result.pair.basis == "correction"
    assert result.check_replays == 2 and not result.nondeterministic


@pytest.mark.parametrize(("name", "fixed"), [("smol-plan-gallons", "Convert 4 gallons to litres."),
                                             ("ag-plan-miles", "miles")])
async def test_a_substituted_unit_is_put_back_in_the_words_the_step_writes(name, fixed, tmp_path):
    """The finding names units canonically (``qt`` where the task had ``gal``); the delegation writes "quarts". The
    correction writes the source's unit in the step's form ("gallons", plural like "quarts"; "feet" → "miles") and
    flips the run at the planted step — before, it matched nothing and the search ran through 131 alternatives."""
    from _zoo import zoo_home
    from causaltrace.replay.corrections import findings_of
    from causaltrace.testing.faults import all_cases
    from causaltrace.testing.faults import runner as faults_runner

    case = next(c for c in all_cases() if c.name == name)
    with zoo_home(tmp_path):
        run = await faults_runner.record(case)
        findings = findings_of(run)
        unit = next(f for f in findings if f.family == "value_changed" and f.index == case.true_step(run))
        [fix] = corrections_for(run.step(unit.step_id), run, findings)
        assert fixed in str(fix.replacement)
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert result.repaired and result.decisive.index == case.true_step(run)
    assert result.decisive.best.intervention.basis == "correction" and result.replays == 3


def test_a_unit_word_keeps_its_form():
    from causaltrace.replay.corrections import _same_form

    assert _same_form(["gallon", "gallons"], "quarts", "gal") == "gallons"
    assert _same_form(["mile", "miles"], "feet", "mi") == "miles"  # the task's singular does not fit a plural slot
    assert _same_form(["pounds"], "ounce", "lb") == "lb"  # the run never wrote the singular: the symbol
    assert _same_form(["gallons"], "qt", "gal") == "gal"


def test_an_arithmetic_operator_is_put_back_as_the_code_writes_it():
    from causaltrace.replay.corrections import _substitute_text

    assert _substitute_text("avg = (a + b + c) / 2", "/ 3", "/ 2") == "avg = (a + b + c) / 3"
    assert _substitute_text("avg = (a+b+c)/2", "/ 3", "/ 2") == "avg = (a+b+c)/ 3"  # unspaced code
    assert _substitute_text("total = sub * (1 + 0.15)", "- 0.15", "+ 0.15") == "total = sub * (1 - 0.15)"
    assert _substitute_text("n = jars // 2", "/ 3", "/ 2") is None  # '/ 2' is no part of '// 2'
    assert _substitute_text("y = x ** 2", "* 3", "* 2") is None  # nor '* 2' of '** 2'
    assert _substitute_text("if x >= 100:", "> 100", ">= 100") == "if x > 100:"


def test_a_bare_operator_is_put_back_at_each_place_the_code_writes_it_one_correction_each():
    """``+`` where the task had ``-`` names the operator, not which of the code's pluses: each binary ``+`` outside
    a string is its own correction (earliest first), never all of them at once; a ``+`` in a string is no
    operator."""
    from _builders import RunBuilder
    from causaltrace.schema import Finding, FindingEvidence

    code = "n = a + b\ntotal = n + n * 15 / 100\nprint('a + b', f'{total:.2f}')"
    run = (RunBuilder("ops").task("Take 15% off.").tool_call("coder", "python_interpreter", {"code": code})
           .build())
    step = next(s for s in run.steps if s.kind == "tool_call")
    found = Finding(family="value_changed", step_id=step.step_id, index=step.index, claim="'+' where the task had '-'",
                    evidence=(FindingEvidence(index=-1, value="-", role="source"),
                              FindingEvidence(step_id=step.step_id, index=step.index, value="+", role="changed")))
    fixes = corrections_for(step, run, [found])
    assert [f.replacement for f in fixes] == [
        "n = a - b\ntotal = n + n * 15 / 100\nprint('a + b', f'{total:.2f}')",
        "n = a + b\ntotal = n - n * 15 / 100\nprint('a + b', f'{total:.2f}')"]
    assert all(f.basis == "correction" for f in fixes)


async def test_an_operator_changed_from_the_tasks_is_put_back_in_the_code_and_flips(tmp_path):
    """fresh32-ag-discount-sign: the coder's code adds the 15% loyalty discount (``subtotal + subtotal * 15 / 100``)
    where the task takes it off. The finding names ``+`` for ``-``; the correction writes the one binary ``+`` back
    as ``-`` in the message's code, and repair flips the run there by that correction. The fixed twin subtracts: no
    operator finding."""
    from _zoo import tuning_runs_and_corrections, zoo_home

    case, run, twin, changed, [fix] = await tuning_runs_and_corrections("fresh32-ag-discount-sign", "value_changed",
                                                                        tmp_path)
    assert fix.description.startswith("operator + → -") and "subtotal - subtotal * 15 / 100" in str(fix.replacement)
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and not [
        f for f in findings_of(twin) if f.family == "value_changed" and f.index == changed.index]
    assert result.repaired and result.decisive.step_id == changed.step_id and changed.index == case.true_step(run)
    assert result.decisive.best.intervention.basis == "correction"


def test_a_division_rounded_the_other_way_is_put_back_as_the_source_said():
    from causaltrace.replay.corrections import _substitute_text

    code = "boxes = 250 // 12\ncost = boxes * 1.85"
    assert _substitute_text(code, "ceil", "250 // 12") == "boxes = -(-250 // 12)\ncost = boxes * 1.85"
    assert _substitute_text("n = math.ceil(250 / 12)", "floor", "ceil(250 / 12)") == "n = 250 // 12"
    assert _substitute_text("n = 2250 // 12", "ceil", "250 // 12") is None  # not the division the finding names
    assert _substitute_text(code, "floor", "250 // 12") is None  # already rounded down: nothing to put back


async def test_a_division_rounded_down_where_the_plan_rounds_up_is_corrected_and_flips(tmp_path):
    """fresh32-ag-boxes: the plan says a partly filled box is still a box (the finding's 'ceil'), and the coder's
    code writes ``250 // 12``. The correction writes the ceiling, ``-(-250 // 12)``, in the message's code; repair
    flips the run there by it. The fixed twin rounds up: no such finding."""
    from _zoo import tuning_runs_and_corrections, zoo_home

    case, run, twin, changed, [fix] = await tuning_runs_and_corrections("fresh32-ag-boxes", "value_changed", tmp_path)
    assert "-(-250 // 12)" in str(fix.replacement) and fix.description.startswith("operator 250 // 12 → ceil")
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and not [f for f in findings_of(twin) if f.family == "value_changed"]
    assert result.repaired and result.decisive.step_id == changed.step_id and changed.index == case.true_step(run)
    assert result.decisive.best.intervention.basis == "correction"


def test_an_order_taken_from_the_wrong_end_is_taken_from_the_end_the_task_names():
    from causaltrace.replay.corrections import _substitute_text

    code = "recent = sorted(invoices, key=lambda row: row['date'])[:3]"
    assert _substitute_text(code, "the largest", "the smallest") == (
        "recent = sorted(invoices, key=lambda row: row['date'], reverse=True)[:3]")
    assert _substitute_text("x = sorted(a, reverse=True)[0]", "the smallest", "the largest") == "x = sorted(a)[0]"
    assert _substitute_text("x = min(prices)", "the largest", "the smallest") == "x = max(prices)"
    assert _substitute_text("x = min(a) + min(b)", "the largest", "the smallest") is None  # which one: none
    assert _substitute_text("x = sorted(a)", "the largest", "the smallest") is None  # no end taken


async def test_the_most_recent_taken_from_the_oldest_end_is_corrected_and_flips(tmp_path):
    """fresh32-smol-sort-order: "the three most recent invoices", and the CodeAgent sorts by date ascending and takes
    ``[:3]`` (the finding: 'the smallest' where the task had 'the largest'). The correction sorts descending
    (``reverse=True``) in the code action; repair flips the run there by it. The twin takes the newest: no such
    finding."""
    from _zoo import tuning_runs_and_corrections, zoo_home

    case, run, twin, changed, [fix] = await tuning_runs_and_corrections("fresh32-smol-sort-order", "value_changed",
                                                                        tmp_path)
    assert "reverse=True)[:3]" in str(fix.replacement)
    with zoo_home(tmp_path):
        result = await repair(run, case.factory, case.verify, k=0, sandbox=default_sandbox(), store=False)
    assert twin.outcome.status == "success" and not [f for f in findings_of(twin) if f.family == "value_changed"]
    assert result.repaired and result.decisive.step_id == changed.step_id and changed.index == case.true_step(run)
    assert result.decisive.best.intervention.basis == "correction"
