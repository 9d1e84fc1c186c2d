"""Bad input to the findings-based diagnosis (issue 32, "Bad input"): a run with no candidate step, only tool
steps, one step or 10,000 steps gives a marked Diagnosis — uncertain or failed, with its reason — never an
exception; and repair's pruning keeps the step that ended the work early when the answer lacks an item (item 6)."""

from __future__ import annotations

import causaltrace
from _builders import RunBuilder
from causaltrace.schema import Outcome, Verdict

FAILED = Outcome(status="failure", final_answer="?", verdict=Verdict(passed=False, reason="wrong"))


def test_a_run_with_no_candidate_step_is_a_failed_diagnosis_with_its_reason():
    run = RunBuilder("empty").task("Say hello.").build(outcome=FAILED)
    d = causaltrace.diagnose_sync(run, store=False)
    assert d.failed and "no attribution candidate" in (d.failure_reason or "") and d.findings == ()


def test_only_tool_steps_or_one_step_give_an_uncertain_answer_not_an_exception():
    tools = (RunBuilder("tools").task("Look up the price.")
             .tool_response("lookup", "price: 21").build(outcome=FAILED))
    d = causaltrace.diagnose_sync(tools, store=False)
    assert d.failed or d.basis in ("none", "finding")
    one = RunBuilder("one").message("solver", "The answer is 12.").build(outcome=FAILED)
    d = causaltrace.diagnose_sync(one, store=False)
    assert not d.failed and d.basis == "none" and d.decisive_step_index == 0
    assert "uncertain" in d.explanation


def test_ten_thousand_steps_give_a_marked_diagnosis():
    # (a run whose every step introduces a NEW number costs provenance's derivation search far more: ~60 s for
    # 10,000 such steps here, before and after issue 32 — quoted in the notes; this run keeps CI short)
    b = RunBuilder("long").task("Report the price 172 of the item, then confirm each of the other items.")
    for _ in range(9998):
        b.message("reader", "Confirmed: the item is in stock.", deps=[("task", "saw")])
    b.message("reader", "The price of the item is 127.", deps=[("task", "saw")])
    run = b.build(outcome=FAILED)
    assert len(run.steps) == 10_000
    d = causaltrace.diagnose_sync(run, store=False)  # its time is quoted in the notes, not asserted (benchmarks/)
    assert not d.failed
    assert all(0 <= f.index < len(run.steps) for f in d.findings)


def test_pruning_keeps_the_early_answer_when_the_answer_lacks_an_item():
    from causaltrace.replay.repair import _ends_work_before_an_omission
    from causaltrace.schema import Finding, FindingEvidence

    run = (RunBuilder("early").task("Add up the prices of a widget, a gadget and a gizmo.")
           .tool_call("shopper", "get_price", {"item": "widget"})
           .tool_response("shopper", "price of widget: 12 dollars", deps=[("call-1", "tool_result_of")])
           .tool_call("shopper", "final_answer", {"answer": "TOTAL: 12"})
           .final_answer("shopper", "TOTAL: 12")
           .build(outcome=FAILED))
    omission = Finding(family="omission", step_id=run.step_at(3).step_id, index=3, claim="answers before gizmo",
                       evidence=(FindingEvidence(index=-1, value="gizmo", role="omitted_item"),))
    keep = _ends_work_before_an_omission(run, [omission])
    assert run.step_at(3).step_id in keep and run.step_at(1).step_id not in keep
    assert _ends_work_before_an_omission(run, []) == set()  # no omission: provenance prunes as before
