"""Shapes of correct runs that are no evidence (issue 32: blame only what the run shows is wrong), each found on
the negative set of correct runs (``testing.faults.clean_runs``; ``tests/attribution/test_clean_runs.py`` checks the
whole teams): a list or section label is no value, two of the task's own numbers combine, a total of a fixed and a
per-unit cost scaled by the task's count is computed, and what a code execution printed is the code's result.
"""

from __future__ import annotations

from causaltrace.attribution.stages.provenance_derive import derivation, scaled_derivation
from causaltrace.attribution.stages.values import values_in

TASK = -1


def _numbers(text: str) -> list[str]:
    return [v.key for v in values_in(text) if v.kind == "number"]


def test_list_and_section_labels_are_no_values() -> None:
    # smolagents' facts survey: its headings are not restatements of the task's numbers
    assert _numbers("## 1. Facts survey\n### 1.2. Facts to look up\n- the free slots") == []
    assert _numbers("1. Ask calendar_agent\n2) intersect the lists") == []
    # a value at the start of a line stays one: three digits, no item text after it, a decimal before a unit
    assert _numbers("330. That is the height") == ["330"]
    assert _numbers("height 12.") == ["12"]
    assert _numbers("- 3.5 kg of rice") == ["3.5"]


def test_two_of_the_tasks_numbers_combine_but_not_two_of_one_steps() -> None:
    pool = {14.0: TASK, 2.0: TASK}  # "from 14:00 ... for two hours": the end is 16:00
    assert derivation(16.0, pool, {round(a, 6): i for a, i in pool.items()}) == [TASK, TASK]
    pool = {14.0: 7, 2.0: 7}  # two numbers one result introduced: no evidence a later step computed with them
    assert derivation(16.0, pool, {round(a, 6): i for a, i in pool.items()}) is None


def test_a_fixed_cost_plus_the_tasks_count_times_a_unit_cost_is_computed() -> None:
    pool = {2.0: TASK, 189.0: 16, 149.0: 28}  # "stay 2 nights": flight 189 + 2 x 149 a night
    exact = {round(a, 6): i for a, i in pool.items()}
    assert scaled_derivation(487.0, pool, exact, [2.0]) == [16, 28]
    assert scaled_derivation(488.0, pool, exact, [2.0]) is None
    assert scaled_derivation(487.0, pool, exact, []) is None  # the task counts nothing: nothing scales
    # "(17 + 25) * 3": operands, no counted noun — the copy slip 26 stays one (17 + 3 x 3 would "derive" it)
    pool = {17.0: TASK, 25.0: TASK, 3.0: TASK}
    assert scaled_derivation(26.0, pool, {round(a, 6): i for a, i in pool.items()}, []) is None


def test_an_observations_header_is_no_entrys_label() -> None:
    from causaltrace.attribution.findings.entries import entries_of

    # the route and date every fare is for: not the first fare's label (the request names them)
    fares = entries_of("fares BOS-ORD on 2026-05-09: UA 412 at 188.40 USD, AA 2231 at 172.15 USD, B6 901 at 179 USD")
    assert all("bos" not in labels and "2026" not in numbers for labels, numbers in fares)
    days = entries_of("Oslo forecast: Monday 18 C, Tuesday 21 C, Wednesday 16 C")
    assert [sorted(labels) for labels, _ in days] == [["monday"], ["tuesday"], ["wednesday"]]


def test_a_poll_whose_numbers_change_reports_progress() -> None:
    from causaltrace.attribution.stages.loops import _same_observation

    words = frozenset({"export", "x", "orders", "done"})
    assert not _same_observation(words | {"30"}, words | {"70"}, 0.7)  # 30 % then 70 %: progress
    assert not _same_observation(words, words | {"70"}, 0.7)  # then done
    assert _same_observation(words | {"30"}, words | {"30"}, 0.7)  # the same answer again: no progress


def test_a_worded_restatement_compares_numbers_of_one_magnitude() -> None:
    from causaltrace.attribution.stages.provenance_changes import restated
    from causaltrace.attribution.stages.values import Value

    def number(key: str, words: set[str]) -> Value:
        return Value("number", key, "number", key, frozenset(words))

    words = {"tower", "height", "metres"}
    change = restated(5, number("300", words), [(3, number("330", words))])
    assert change is not None and (change.before, change.after) == ("330", "300")  # (also a digit changed)
    change = restated(5, number("310", words), [(3, number("330", words))])
    assert change is not None and change.how == "restatement"  # the same words, the same magnitude
    # the same words around 2 and 737015 are no evidence that one was meant for the other
    assert restated(5, number("737015", words), [(3, number("2", words))]) is None


def test_a_figure_is_read_whole_and_an_exclusion_covers_its_list() -> None:
    import re

    from causaltrace.attribution.findings.entries import _EXCLUDED
    from causaltrace.attribution.findings.filled_gaps import _FIGURE

    # a decimal right before an argument's closing quote is no figure — not its integer part "0" either
    assert _FIGURE.findall('"expression": "4 * 3.2 + 2 * 6.75 + 5 * 0.89"') == ["3.2", "2", "6.75", "5"]
    excluded = [re.findall(r"\w+", m.group(1)) for m in _EXCLUDED.finditer("in total, excluding cancelled and "
                                                                          "refunded orders")]
    assert excluded == [["cancelled", "and", "refunded"]]


def test_one_sided_extremes_ask_for_the_same_entry_and_a_cap_is_a_bound() -> None:
    from causaltrace.attribution.stages.provenance_changes import _same_extreme
    from causaltrace.attribution.stages.values import values_in

    assert _same_extreme("lowest", "cheapest") and _same_extreme("maximum", "latest")
    assert not _same_extreme("latest", "largest")  # one side, two measures: a changed word
    assert not _same_extreme("cheapest", "highest")
    assert [v.key for v in values_in("our cap is 10000 EUR") if v.group == "comparison"] == ["<= 10000"]


def test_a_rate_per_a_round_quantity_is_an_operand_of_the_amount_it_gives() -> None:
    from causaltrace.attribution.stages.provenance_walk import _PER_N

    # "7.5 litres per 100 km" over 561 km uses 42.075 litres: the rate's quotient is in the lookup, not the pool
    rates = {round(float(m.group(1)) / float(m.group(2).replace(",", "")), 6): TASK
             for m in _PER_N.finditer("a van using 7.5 litres per 100 km, 12 deaths per 1,000 people")}
    assert rates == {0.075: TASK, 0.012: TASK}
    pool = {561.0: 10}
    assert derivation(42.075, pool, {**rates, 561.0: 10}) == [10, TASK]
    assert derivation(42.0, pool, {**rates, 561.0: 10}) is None  # a changed amount stays unexplained
    assert not list(_PER_N.finditer("3 per day, 4 per 7 days"))  # only a round quantity is a rate's base
