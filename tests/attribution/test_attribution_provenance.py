"""Value provenance (issue 20 item 4, issue 19 item 3): origins, reach, restatements, substitutions and the
responsibility boundary, on small hand-built runs whose answers are known."""

from __future__ import annotations

from datetime import timedelta

from _builders import RunBuilder
from causaltrace.attribution.stages.provenance import build_provenance, reaches_answer
from causaltrace.attribution.stages.values import number_key, values_in
from causaltrace.schema import Outcome


def _restated_price_run():
    # a lookup returns the correct price; the analyst restates it one too high; the reporter answers from it
    return (RunBuilder("restated").task("What does a lamp cost? Answer 'PRICE: <dollars>'.")
            .tool_call("researcher", "lookup_price", {"item": "lamp"}, deps=[("task", "saw")])
            .tool_response("researcher", "The lamp price is 21 dollars.", deps=[("call-1", "tool_result_of")])
            .message("bystander", "Lunch is at noon.", deps=[("task", "saw")])
            .message("analyst", "Our lamp price is 22.", deps=[("resp-1", "saw")])
            .final_answer("reporter", "PRICE: 22", deps=[("message-2", "saw")])
            .build(outcome=Outcome(status="failure", final_answer="PRICE: 22")))


def test_a_restatement_that_changes_a_tool_result_is_a_change_at_the_restating_step():
    run = _restated_price_run()
    prov = build_provenance(run)
    changes = prov.changes_of("message-2")
    assert [(c.before, c.after, c.how, c.source) for c in changes] == [("21", "22", "restatement", 2)]
    assert prov.changes_of("resp-1") == []  # a tool result is evidence, never a restatement
    assert "restates number '22' where step 2 had '21'" in changes[0].describe()
    # the answer's 22 was introduced by the analyst: the final answer merely carries it
    assert prov.origin("final-1", "number:22") == "message-2"
    assert [c.index for c in prov.carriers[5]] == [4]



def _bare_price_run(analyst: str):
    # the lookup answers with a bare number (nothing names it); the analyst restates it one too high, beside the
    # task's 3 boxes and 4 people (whose sentence also says "unit price"); the calculator multiplies the analyst's 22
    return (RunBuilder("bare").task("Buy 3 boxes of tea for the 4 of us. Look up the unit price, then report "
                                    "'TOTAL: <dollars>'.")
            .tool_call("clerk", "lookup_price", {"item": "tea"}, deps=[("task", "saw")])
            .tool_response("clerk", "21", deps=[("call-1", "tool_result_of")])
            .message("analyst", analyst, deps=[("task", "saw"), ("resp-1", "saw")])
            .tool_call("calculator", "multiply", {"a": 22, "b": 3}, deps=[("message-1", "saw")])
            .tool_response("calculator", "66", deps=[("call-2", "tool_result_of")])
            .final_answer("calculator", "TOTAL: 66", deps=[("resp-2", "observed")])
            .build(outcome=Outcome(status="failure", final_answer="TOTAL: 66")))


def test_a_restated_bare_tool_result_is_paired_with_it_not_with_a_task_number_sharing_words():
    # the analyst's 22 shares "unit price" with the task's 3 (the old rule paired them: 3 -> 22), and the tool's
    # bare 21 has no words to share: the digit slip of the result the step saw is the plausible origin
    for text in ("The unit price is 22.", "We need 3 boxes for 4 people. The unit price is 22."):
        prov = build_provenance(_bare_price_run(text))
        assert [(c.source, c.before, c.after) for c in prov.changes_of("message-1")] == [(2, "21", "22")], text
        assert [c.index for c in prov.carriers[4]] == [3]  # the calculator only carries the analyst's change
    # no slip of the bare result, no change charged to it: a number the step adds is not its restatement
    prov = build_provenance(_bare_price_run("We need 3 boxes for 4 people. The unit price is 21; it ships in 14 "
                                            "days."))
    assert prov.changes_of("message-1") == []


def test_reach_follows_values_and_requests_back_from_the_answer():
    run = _restated_price_run()
    reach = reaches_answer(run)
    assert reach["final-1"] == 1.0
    assert reach["message-2"] > 0.9  # its 22 is the answer's
    # the lookup's 21 never reaches the answer (the analyst replaced it): only the analyst's looking at it does
    assert 0 < reach["resp-1"] <= 0.5 and 0 < reach["call-1"] <= 0.5
    assert reach["message-1"] == 0.0  # nobody used or saw the bystander: a step repair may skip
    prov = build_provenance(run)
    ordered = sorted(["call-1", "resp-1", "message-1", "message-2", "final-1"], key=prov.order_key)
    assert ordered[0] == "message-2" and ordered[-1] == "message-1"  # value-changing first, unreached last
    assert prov.chain("message-2") == [4, 5]


def test_a_unit_the_task_did_not_give_is_a_substitution_and_its_executor_only_carries_it():
    # the planner names the wrong unit; the executor's call follows it faithfully
    run = (RunBuilder("unit").task("Parcel A weighs 12 pounds. Report its weight in kilograms as 'KG: <v>'.")
           .message("planner", "Convert 12 ounces to kilograms.", deps=[("task", "saw")])
           .tool_call("executor", "convert", {"value": 12, "from_unit": "ounces", "to_unit": "kg"},
                      deps=[("message-1", "delegated_by")])
           .tool_response("executor", "0.34 kg", deps=[("call-1", "tool_result_of")])
           .final_answer("executor", "KG: 0.34", deps=[("resp-1", "saw")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    [change] = prov.changes
    assert (change.index, change.kind, change.before, change.after, change.how) == (1, "unit", "lb", "oz",
                                                                                    "substitution")
    assert prov.origin("call-1", "unit:oz") == "message-1"
    assert [c.index for c in prov.carriers[2]] == [1]  # the executor carries the planner's change
    assert prov.reaches("message-1") > 0 and prov.reaches("call-1") > 0


def test_a_number_computed_from_earlier_numbers_is_derived_not_a_change():
    run = (RunBuilder("sum").task("Ship parcels of 2 kg and 3 kg; report the cost as 'COST: <dollars>'.")
           .tool_call("shipper", "shipping_cost", {"weight": 2, "unit": "kg"}, deps=[("task", "saw")])
           .tool_response("shipper", "shipping 2 kg: 10 dollars", deps=[("call-1", "tool_result_of")])
           .tool_call("shipper", "shipping_cost", {"weight": 3, "unit": "kg"}, deps=[("resp-1", "observed")])
           .tool_response("shipper", "shipping 3 kg: 6.8 dollars", deps=[("call-2", "tool_result_of")])
           .final_answer("shipper", "COST: 16.8", deps=[("resp-2", "observed")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    assert prov.changes == []
    assert sorted(prov.derived[5]["number:16.8"]) == [2, 4]
    # both lookups reach the answer through the sum
    assert prov.reaches("call-1") > 0 and prov.reaches("call-2") > 0


def test_a_copy_slip_of_a_given_number_in_a_tool_argument():
    run = (RunBuilder("copy").task("Three pens cost $12.50 each. What do they cost in total?")
           .tool_call("solver", "multiply", {"a": 3, "b": 12.05}, deps=[("task", "saw")])
           .tool_response("solver", "36.15", deps=[("call-1", "tool_result_of")])
           .final_answer("solver", "36.15", deps=[("resp-1", "saw")])
           .build(outcome=Outcome(status="failure")))
    [change] = build_provenance(run).changes
    assert (change.index, change.source, change.before, change.after, change.how) == (1, 0, "12.5", "12.05",
                                                                                      "copy")


def test_availability_order_puts_a_code_output_after_the_managed_agent_it_waited_for():
    # smolagents records the manager's code output (index 3) before the managed agent's steps, but it ENDS after
    b = RunBuilder("nested").task("How tall is the tower? Answer 'H: <m>'.")
    b.tool_call("manager", "python_interpreter", {"code": "print(researcher(task='height of the tower'))"},
                deps=[("task", "saw")])
    t = b.t0
    b.step("code_execution", "manager", content="The tower is 300 metres tall.", started_at=t + timedelta(seconds=2),
           ended_at=t + timedelta(seconds=9), deps=[("call-1", "executes")])
    b.tool_response("researcher", "Tower: 330 metres tall.", started_at=t + timedelta(seconds=4),
                    ended_at=t + timedelta(seconds=4))
    b.message("researcher", "The tower is 300 metres tall.", started_at=t + timedelta(seconds=5),
              deps=[("resp-1", "observed")])
    b.final_answer("manager", "H: 300", started_at=t + timedelta(seconds=10), deps=[("code-1", "saw")])
    prov = build_provenance(b.build(outcome=Outcome(status="failure")))
    assert [(c.index, c.before, c.after) for c in prov.changes] == [(4, "330", "300")]
    assert prov.origin("code-1", "number:300") == "message-1"


def test_typed_values_are_normalised_and_grouped():
    vals = {(v.kind, v.key, v.group) for v in values_in("It weighs 12kg (about 26.5 pounds) on Tuesday; net.",
                                                        code="avg = total / 2")}
    assert {("number", "12", "number"), ("unit", "kg", "mass"), ("unit", "lb", "mass"),
            ("entity", "tuesday", "weekday"), ("word", "net", "net-gross"), ("operator", "/ 2", "arithmetic")} <= vals
    assert number_key("1,234.50") == "1234.5" and number_key("207.0") == "207"
    assert [v.key for v in values_in("The price is 21.")] == ["21"]  # sentence-final


def test_bounds_in_words_and_in_code_are_operators():
    vals = {(v.key, v.group) for v in values_in("orders of at least 100 dollars, the integers from 1 to 6",
                                                code="n = len([o for o in xs if o > 100])\nfor i in range(1, 6): pass\n"
                                                     "avg = (21 + 27 + 12) / 2") if v.kind == "operator"}
    assert {(">= 100", "comparison"), ("1..6", "span"), ("> 100", "comparison"), ("1..5", "span"),
            ("mean of 3 / 2", "mean")} <= vals


def test_code_whose_operator_contradicts_its_sources_is_a_change():
    run = (RunBuilder("logic").task("Count the orders of at least 100 dollars; sum the squares of 1 to 6 "
                                    "(the integers from 1 to 6); and give the average of the three readings.")
           .tool_response("coder", "[250, 100, 40]", deps=[("task", "saw")])
           .message("coder", "```python\nprint(len([o for o in [250, 100, 40] if o > 100]))\n"
                             "print(sum(i * i for i in range(1, 6)))\nprint((21 + 27 + 12) / 2)\n```",
                    deps=[("resp-1", "saw")])
           .final_answer("coder", "1, 55, 30", deps=[("message-1", "saw")])
           .build(outcome=Outcome(status="failure")))
    changes = {(c.index, c.before, c.after) for c in build_provenance(run).changes if c.kind == "operator"}
    assert changes == {(2, ">= 100", "> 100"), (2, "1..6", "1..5"), (2, "/ 3", "/ 2")}


def test_a_handoff_to_the_agent_its_sources_did_not_name_is_a_target_substitution():
    run = (RunBuilder("route").task("A customer wants a refund for order B7.")
           .tool_response("triage", "billing", deps=[("task", "saw")])
           .step("handoff", "triage", content="Transferred to tech_agent.", outputs={"target": "tech_agent"},
                 metadata={"candidates": ["billing_agent", "tech_agent"]}, deps=[("resp-1", "observed")])
           .message("tech_agent", "Please restart the device.", deps=[("handoff-1", "handoff_from")])
           .final_answer("tech_agent", "Please restart the device.", deps=[("message-1", "answer_of")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    [change] = prov.changes
    assert (change.index, change.source, change.kind, change.before, change.after) == (2, 1, "target",
                                                                                      "billing_agent", "tech_agent")
    assert prov.reaches(2) > 0.9  # the answer came from the agent the handoff chose


def test_a_number_its_instruction_excluded_is_an_ignored_instruction():
    run = (RunBuilder("ignored").task("Sum the orders of K4, excluding cancelled orders.")
           .tool_response("bookkeeper", "orders of K4: 120 paid, 80 cancelled, 45 paid", deps=[("task", "saw")])
           .tool_call("bookkeeper", "add", {"numbers": [120, 80, 45]}, deps=[("resp-1", "observed")])
           .tool_response("bookkeeper", "sum: 245", deps=[("call-1", "tool_result_of")])
           .final_answer("bookkeeper", "TOTAL: 245", deps=[("resp-2", "observed")])
           .build(outcome=Outcome(status="failure")))
    [change] = build_provenance(run).changes
    assert (change.index, change.source, change.before, change.after, change.how) == (
        2, 0, "excluding cancelled", "80", "ignored")
    assert "excluded" in change.describe()


def test_an_approval_of_an_answer_that_never_used_a_given_value_and_an_unsupported_argument():
    run = (RunBuilder("review").task("A member buys 3 lamps at 40 dollars each with the 10% member discount.")
           .tool_call("drafter", "multiply", {"a": 3, "b": 40}, deps=[("task", "saw")])
           .tool_response("drafter", "product: 120", deps=[("call-1", "tool_result_of")])
           .message("drafter", "TOTAL: 120", deps=[("resp-1", "observed")])
           .message("reviewer", "TOTAL: 120 approved. APPROVE", deps=[("message-1", "saw")])
           .final_answer("reviewer", "TOTAL: 120 approved.", deps=[("message-2", "answer_of")])
           .build(outcome=Outcome(status="failure")))
    changes = build_provenance(run).changes
    assert [(c.index, c.before, c.how) for c in changes] == [(4, "10", "unverified")]
    # the same team quoting 8 boxes where nothing said 8: the call's argument has no source
    run = (RunBuilder("argument").task("Buy seven boxes at the unit price; report the total.")
           .tool_response("clerk", "12", deps=[("task", "saw")])
           .tool_call("clerk", "multiply", {"a": 12, "b": 8}, deps=[("resp-1", "observed")])
           .final_answer("clerk", "TOTAL: 96", deps=[("call-1", "saw")])
           .build(outcome=Outcome(status="failure")))
    assert [(c.index, c.after, c.how) for c in build_provenance(run).changes] == [(2, "8", "unsupported")]


def _selected_reply_run(reply: str):
    # two populations are stated; the selector then picks one agent, whose reply is the (wrong) answer
    return (RunBuilder("speaker").task("How many more inhabitants does Lyon have than Nice? Answer 'ANSWER: <n>'.")
            .tool_response("researcher", "population of Lyon: 516000", deps=[("task", "saw")])
            .message("researcher", "The population of Lyon is 516000.", deps=[("resp-1", "observed")])
            .tool_response("researcher", "population of Nice: 342000", deps=[("task", "saw")])
            .message("researcher", "The population of Nice is 342000.", deps=[("resp-2", "observed")])
            .step("speaker_selection", "manager", content="guesser", outputs={"selected": "guesser"},
                  metadata={"candidates": ["researcher", "calculator", "guesser"]}, deps=[("message-2", "saw")])
            .message("guesser", reply, deps=[("message-1", "saw"), ("message-2", "saw")])
            .final_answer("guesser", reply, deps=[("message-3", "answer_of")])
            .build(outcome=Outcome(status="failure")))


def test_a_selection_whose_speaker_answers_from_nothing_it_was_given_is_charged_to_the_selection():
    prov = build_provenance(_selected_reply_run("ANSWER: 400000."))
    [change] = prov.changes
    assert (change.index, change.kind, change.before, change.after, change.how) == (
        5, "target", "400000", "guesser", "unfounded")
    assert "from nothing it was given" in change.describe()
    # the same selection, where the chosen agent's (wrong) answer is built from what it was given: not unfounded
    prov = build_provenance(_selected_reply_run("516000 and 342000 differ by 184000. ANSWER: 184000."))
    assert all(c.how != "unfounded" for c in prov.changes)


def test_an_answer_stated_before_every_item_the_task_named_was_used_is_omitted_at_that_step():
    def run_of(items):
        b = RunBuilder("premature").task("Add up the prices of a kettle and a toaster; report 'TOTAL: <dollars>'.")
        deps = [("task", "saw")]
        for n, item in enumerate(items, 1):
            b = (b.tool_call("shopper", "get_price", {"item": item}, deps=deps)
                 .tool_response("shopper", f"price of {item}: {19 + 16 * (n - 1)} dollars",
                                deps=[(f"call-{n}", "tool_result_of")]))
            deps = [(f"resp-{n}", "observed")]
        total = sum(19 + 16 * n for n in range(len(items)))
        return (b.tool_call("shopper", "final_answer", {"answer": f"TOTAL: {total}"}, deps=deps)
                .final_answer("shopper", f"TOTAL: {total}", deps=[(f"call-{len(items) + 1}", "answer_of")])
                .build(outcome=Outcome(status="failure")))

    from causaltrace.attribution.stages.provenance import task_items

    assert task_items("Add up the prices of a lamp, a desk, a chair and a shelf.") == ["lamp", "desk", "chair", "shelf"]
    assert task_items("Report the total of accounts M1, M2 and M3.") == ["m1", "m2", "m3"]
    early = build_provenance(run_of(["kettle"]))
    [change] = early.changes
    assert (change.index, change.before, change.after, change.how) == (3, "toaster", "19", "omitted")
    assert "premature" in change.describe()
    # every item fetched: the (here correct) total leaves nothing out
    assert all(c.how != "omitted" for c in build_provenance(run_of(["kettle", "toaster"])).changes)


def test_an_approval_the_answer_was_released_on_reaches_it_as_a_request():
    run = (RunBuilder("gate").task("A member buys 3 lamps at 40 dollars each with the 10% member discount.")
           .message("drafter", "TOTAL: 120", deps=[("task", "saw")])
           .message("reviewer", "APPROVE", deps=[("message-1", "saw")])
           .final_answer("manager", "TOTAL: 120", deps=[("message-1", "saw"), ("message-2", "saw")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    assert prov.reaches("message-2") > 0.9  # acted on, not merely observed (0.5)
    assert [(c.index, c.how) for c in prov.changes] == [(2, "unverified")]


def test_a_sum_divided_by_other_than_its_count_is_a_mean_slip_and_a_call_from_code_carries_its_result():
    [mean] = [v for v in values_in("", code="temps = [30, 24, 15]\nprint(round(sum(temps) / 2, 1))")
              if v.group == "mean"]
    assert mean.key == "mean of 3 / 2"
    assert [v.key for v in values_in("", code="x = sum([1, 2]) / 2") if v.group == "mean"] == ["mean of 2 / 2"]
    run = (RunBuilder("mean").task("What is the average temperature of Paris, Rome and Oslo? Answer 'AVG: <c>'.")
           .tool_response("manager", "Paris 30, Rome 24, Oslo 15", deps=[("task", "saw")])
           .tool_call("manager", "python_interpreter", {"code": "avg = (30 + 24 + 15) / 2\nfinal_answer(avg)"},
                      deps=[("resp-1", "observed")])
           .step("code_execution", "manager", inputs={"code": "avg = (30 + 24 + 15) / 2"},
                 deps=[("call-1", "executes")])
           .tool_call("manager", "final_answer", {"answer": "AVG: 34.5"}, deps=[("code-1", "produced_by")])
           .final_answer("manager", "AVG: 34.5", deps=[("call-2", "answer_of")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    # the code's divisor is the change; the final_answer call its code made only carries the code's result
    assert [(c.index, c.before, c.after) for c in prov.changes] == [(2, "/ 3", "/ 2")]
    assert prov.derived[4] == {"number:34.5": [2]}


def test_a_two_letter_agent_name_is_grounded_by_its_acronym_only():
    from causaltrace.attribution.stages.targets import grounded_alternative, name_words

    assert name_words("eu_agent") == {"eu"} and name_words("transfer_to_billing_agent") == {"billing"}
    sources = [(3, "Thought: Germany is in the EU; route the question.")]
    assert grounded_alternative("us_agent", ["eu_agent", "us_agent"], sources) == ("eu_agent", 3)
    assert grounded_alternative("eu_agent", ["eu_agent", "us_agent"], sources) is None
    # "us" the pronoun is no acronym: nothing grounds either choice
    assert grounded_alternative("eu_agent", ["eu_agent", "us_agent"], [(3, "Let us route the question.")]) is None


def test_a_plan_that_writes_the_chosen_agents_name_grounds_the_choice():
    from causaltrace.attribution.stages.targets import grounded_alternative

    plan = [(2, "1. revenue_agent: look up the hotel id with find_hotel.\n2. coordinator: check and report.")]
    # the plan names both agents: handing off to the one it gives the next work is grounded, never a substitution
    assert grounded_alternative("revenue_agent", ["coordinator", "revenue_agent"], plan) is None
    # a roster writing every candidate decides nothing; the request's own word still does
    roster = [(4, "agents: billing_agent, tech_agent"), (3, "category: billing")]
    assert grounded_alternative("tech_agent", ["billing_agent", "tech_agent"], roster) == ("billing_agent", 3)
    # code that writes both names: the word in its condition decides, as before
    code = [(5, "if category != 'billing':\n    billing_agent(task='refund')\nelse:\n    tech_agent(task='fix')")]
    assert grounded_alternative("tech_agent", ["manager", "tech_agent", "billing_agent"], code) == ("billing_agent", 5)
    # the choice's own output (the bare name) is not a reason for it
    assert grounded_alternative("tech_agent", ["triage", "billing_agent", "tech_agent"],
                                [(12, "tech_agent"), (11, "The ticket is about billing.")]) == ("billing_agent", 11)


def test_a_discount_factor_is_derived_from_the_percentage_and_uses_it():
    # the drafter applies the task's 10 % discount as 120 x 0.9: 0.9 is no unsupported number, and an approval of
    # the discounted total is not an approval of a result that never used the 10 (issue 32, tuning twin)
    run = (RunBuilder("discount").task("A member buys 3 lamps at 40 dollars each with the 10% member discount.")
           .tool_call("drafter", "multiply", {"a": 3, "b": 40}, deps=[("task", "saw")])
           .tool_response("drafter", "product: 120", deps=[("call-1", "tool_result_of")])
           .tool_call("drafter", "multiply", {"a": 120, "b": 0.9}, deps=[("resp-1", "observed")])
           .tool_response("drafter", "product: 108", deps=[("call-2", "tool_result_of")])
           .message("drafter", "TOTAL: 108", deps=[("resp-2", "observed")])
           .message("reviewer", "TOTAL: 108 approved. APPROVE", deps=[("message-1", "saw")])
           .final_answer("reviewer", "TOTAL: 108 approved.", deps=[("message-2", "answer_of")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    assert prov.changes == []
    assert prov.derived[3] == {"number:0.9": [0]}  # the task step gave the 10 %
    # without the percentage, the same 0.9 is unsupported (the factor comes from the 10 %, not from any 10)
    run = (RunBuilder("no-percent").task("A member buys 3 lamps at 40 dollars each; 10 members joined today.")
           .tool_call("drafter", "multiply", {"a": 120, "b": 0.9}, deps=[("task", "saw")])
           .final_answer("drafter", "TOTAL: 108", deps=[("call-1", "saw")])
           .build(outcome=Outcome(status="failure")))
    assert ("0.9", "unsupported") in [(c.after, c.how) for c in build_provenance(run).changes]


def test_a_calls_setting_is_the_callers_choice_never_an_unsupported_number():
    def waited(arguments):
        return (RunBuilder("job").task("Submit the sales report job and report its row count as 'ROWS: <n>'.")
                .tool_response("runner", "submitted job sales-job", deps=[("task", "saw")])
                .tool_call("runner", "wait_for_job", arguments, deps=[("resp-1", "observed")])
                .final_answer("runner", "ROWS: 4213", deps=[("call-1", "saw")])
                .build(outcome=Outcome(status="failure")))

    # a timeout (issue 32, tuning twin ag-job-timeout): nobody had to give it
    assert build_provenance(waited({"job": "sales-job", "timeout": 10})).changes == []
    # the same number as data (how many rows to fetch) had to come from somewhere
    assert [(c.after, c.how) for c in build_provenance(waited({"job": "sales-job", "rows": 10})).changes] == [
        ("10", "unsupported")]


def test_a_total_of_the_items_fetched_one_by_one_beats_a_number_doubled():
    # 48 after 9, 24 and 15 is their total, not 24 + 24: every lookup reaches the answer (issue 32, tuning twin)
    run = (RunBuilder("three").task("Ship parcels of 1.5 kg, 4 kg and 2.5 kg; report the cost as 'COST: <dollars>'.")
           .tool_call("shipper", "shipping_cost", {"weight": 1.5, "unit": "kg"}, deps=[("task", "saw")])
           .tool_response("shipper", "shipping 1.5 kg: 9 dollars", deps=[("call-1", "tool_result_of")])
           .tool_call("shipper", "shipping_cost", {"weight": 4, "unit": "kg"}, deps=[("resp-1", "observed")])
           .tool_response("shipper", "shipping 4 kg: 24 dollars", deps=[("call-2", "tool_result_of")])
           .tool_call("shipper", "shipping_cost", {"weight": 2.5, "unit": "kg"}, deps=[("resp-2", "observed")])
           .tool_response("shipper", "shipping 2.5 kg: 15 dollars", deps=[("call-3", "tool_result_of")])
           .final_answer("shipper", "COST: 48", deps=[("resp-3", "observed")])
           .build(outcome=Outcome(status="failure")))
    prov = build_provenance(run)
    assert sorted(prov.derived[7]["number:48"]) == [2, 4, 6]
    assert all(prov.reaches(f"call-{i}") > 0 for i in (1, 2, 3))


def test_bad_input_gives_a_diagnosis_never_an_exception():
    from causaltrace.attribution.engine import diagnose_sync

    one = RunBuilder("one").step("message", "solo", content="only one step").build(outcome=Outcome(status="failure"))
    tools = (RunBuilder("tools").step("tool_response", "Tool", content="42").step("tool_response", "Tool", content="43")
             .build(outcome=Outcome(status="failure")))
    alien = (RunBuilder("alien").step("message", "x", content="hi", metadata={"speaker_role": "alien"})
             .build(outcome=Outcome(status="failure")))
    # 10,000 steps of speaker selections, per-item messages and calls under a task that enumerates items: the new
    # provenance rules (unfounded choices, omitted items, changes by step) stay linear
    b = RunBuilder("big").task("Add up the prices of a lamp, a desk, a chair and a shelf; report 'TOTAL: <dollars>'.")
    prev = "task"
    for i in range(2500):
        b = (b.step("speaker_selection", "manager", content="worker", outputs={"selected": "worker"},
                    metadata={"candidates": ["worker", "guesser"]}, deps=[(prev, "saw")])
             .message("worker", f"The price of item {i} is {i % 97} dollars.", deps=[(f"speaker_selection-{i + 1}", "saw")])
             .tool_call("worker", "get_price", {"item": f"i{i}"}, deps=[(f"message-{i + 1}", "saw")])
             .tool_response("worker", f"price of i{i}: {i % 89} dollars", deps=[(f"call-{i + 1}", "tool_result_of")]))
        prev = f"resp-{i + 1}"
    big = b.final_answer("worker", "TOTAL: 4000", deps=[(prev, "saw")]).build(outcome=Outcome(status="failure"))
    for run in (one, tools, alien, big):
        d = diagnose_sync(run, "graph", store=False)
        assert d.failed or d.decisive_step_index is not None
    assert len(big.steps) == 10_002 and d.candidates and all(c.reasons for c in d.candidates)


def test_a_copy_slip_changes_a_digit_never_the_magnitude():
    """A digit changed or two swapped, the decimal point where it was; a rate beside an amount (1.30 and 100: the
    same digits once the point is dropped) is no slip (repair32b's rates team: "copies number '1.3' where step 0
    had '100'")."""
    from causaltrace.attribution.stages.provenance_changes import is_copy_slip

    assert is_copy_slip("172", "127") and is_copy_slip("1,250", "1,350") and is_copy_slip("12.55", "12.45")
    assert not is_copy_slip("100", "1.30") and not is_copy_slip("1.25", "12.5") and not is_copy_slip("172", "1720")


def test_a_number_joined_to_a_word_by_a_hyphen_is_part_of_an_identifier_and_years_are_no_copy_slips():
    from causaltrace.attribution.stages.provenance_changes import is_copy_slip
    from causaltrace.attribution.stages.values import values_in

    def numbers(text: str) -> list[str]:
        return [v.key for v in values_in(text) if v.kind == "number"]

    assert numbers("job sales-7 done: 4214 rows; COVID-19 cases") == ["4214"]
    assert numbers("pages 10-20, a change of -7") == ["10", "20", "-7"]
    assert not is_copy_slip("2023", "2024") and not is_copy_slip("2019", "2014")
    assert is_copy_slip("4214", "4241") and is_copy_slip("1234", "1235") and is_copy_slip("1932", "1923")
