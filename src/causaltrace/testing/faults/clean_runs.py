"""A negative set of CORRECT runs (issue 32, "blame only what the run shows is wrong"): teams that succeed, in shapes
and content the fault suite lacks, diagnosed as if they had failed.

Each :class:`CleanTeam` is a reactive scripted team (:mod:`.clean_teams_smolagents`, :mod:`.clean_teams_autogen`)
whose run succeeds — its strict verifier says so — and in which no step is wrong: numbers come from tools and are
used faithfully, lists are handled in full, the cheapest / latest entry is picked, a failed call is retried and
recovers, pagination makes progress, a later observation supersedes an earlier one and is the one used, names and
dates are passed as given. Nobody should be blamed for such a run.

The measurement (:func:`score_clean`) is the twin property of :mod:`.twins` without a failing sibling: the run is
diagnosed by ``graph`` (no model, no replay) with a FAILING Outcome substituted (:func:`failing_outcome`: status
failure, the run's own final answer, the verifier's reason "the answer is wrong"), so a detector that fires on the
shape of a correct run puts a finding at the top. Wanted: no finding at the top (the diagnosis is uncertain).
``benchmarks/bench_clean_runs.py`` prints it per team; ``tests/attribution/test_clean_runs.py`` pins it.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from causaltrace.schema import Outcome, Verdict

__all__ = ["AUTOGEN_TEAMS", "FAILING_REASON", "SMOLAGENTS_TEAMS", "CleanTeam", "clean_teams", "expected_reason",
           "failing_outcome", "record_clean", "score_clean", "summarize_clean"]

#: the verifier's reason of the substituted failing Outcome
FAILING_REASON = "the answer is wrong"


@dataclass(frozen=True)
class CleanTeam:
    """One correct run: a fresh team per ``factory()`` call, its task and the strict verifier it passes."""

    name: str
    framework: Literal["smolagents", "autogen"]
    task: str
    factory: Callable[[], Any]
    verify: Callable[[Outcome], Verdict]
    #: the team's shape (agents, team type) and what its content exercises, one line each
    shape: str
    content: str


def clean_teams(framework: str | None = None) -> list[CleanTeam]:
    """Every clean team (optionally of one framework), smolagents first: the rows of :data:`SMOLAGENTS_TEAMS` (the
    final answer verified to be exactly the expected text) and :data:`AUTOGEN_TEAMS` (the final answer verified to
    report the field's expected value), each built by its builder in the framework's team module (imported here,
    so the frameworks load only when asked for)."""
    from causaltrace.testing.faults.cases import answer_is

    out: list[CleanTeam] = []
    if framework in (None, "smolagents"):
        from causaltrace.testing.faults import clean_teams_smolagents as smol

        out += [CleanTeam(name=row[0], framework="smolagents", task=row[2],
                          factory=partial(getattr(smol, row[1]), **_variant(row, 6)), verify=answer_is(row[3]),
                          shape=row[4], content=row[5]) for row in SMOLAGENTS_TEAMS]
    if framework in (None, "autogen"):
        from causaltrace.testing.faults import clean_teams_autogen as ag
        from causaltrace.testing.faults.cases_autogen import reports

        out += [CleanTeam(name=row[0], framework="autogen", task=row[2],
                          factory=partial(getattr(ag, row[1]), **_variant(row, 7)), verify=reports(row[3], row[4]),
                          shape=row[5], content=row[6]) for row in AUTOGEN_TEAMS]
    return out


def _variant(row: tuple[Any, ...], at: int) -> dict[str, Any]:
    """The builder's keyword arguments of a registry row (its optional last element): a variant of a team's data."""
    return dict(row[at]) if len(row) > at else {}


#: the smolagents teams: ``(name, builder in clean_teams_smolagents, task, the exact final answer, shape, content[,
#: the builder's keyword arguments: a variant of its data])``
SMOLAGENTS_TEAMS: tuple[tuple[Any, ...], ...] = (
    ("clean-smol-pantry", "build_pantry",
     "Restock the pantry: buy 2 bags of flour, 3 bags of sugar and 4 packs of butter. Look up each unit price and "
     "report the total cost as 'TOTAL: <dollars>', rounded to cents.",
     "TOTAL: 23.25", "ToolCallingAgent with an opening facts survey",
     "a list handled in full, a failed lookup retried, a sum over every line"),
    ("clean-smol-invoices", "build_invoices",
     "Find the most recent invoice of customer Ines Duarte and report it as 'LATEST: <invoice> on <date>'.",
     "LATEST: INV-230 on 2026-08-11", "ToolCallingAgent paging a listing",
     "pagination that makes progress, a failed page retried, the latest entry picked (not the last listed)"),
    ("clean-smol-parcels", "build_parcels",
     "Order NX-4471 ships as several parcels weighed in pounds. Give their total weight in kilograms (rounded to "
     "2 decimals) and the shipping quote for it, as 'KG: <kg>, QUOTE: <eur> EUR'.",
     "KG: 10.66, QUOTE: 42.64 EUR", "CodeAgent with an opening facts survey",
     "a unit conversion done right in code, rounding stated, a failed fetch rerun"),
    ("clean-smol-trip", "build_trip",
     "Plan a trip: fly from Lisbon to Oslo on 2026-03-14 and stay 2 nights. Take the cheapest flight and the "
     "cheapest hotel and report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 487 EUR", "manager ToolCallingAgent with two managed agents",
     "delegations that fit each agent's tool, city and date passed as given, the cheapest entries picked"),
    ("clean-smol-restock", "build_restock",
     "We need 50 bolts on the shelf. Check how many bolts are in stock right now and order the difference. Report "
     "'ORDERED: <n> bolts'.",
     "ORDERED: 16 bolts", "ToolCallingAgent", "a cached count superseded by a live one, the live one used"),
    ("clean-smol-meeting", "build_meeting",
     "Find a one-hour meeting slot for Ana Souza, Bruno Lima and Chen Wei on 2026-04-22: the earliest slot free "
     "for all three. Report 'MEET: <HH:MM> on <date>'.",
     "MEET: 11:00 on 2026-04-22", "manager CodeAgent with planning every 3 steps and a managed agent",
     "one delegation per person (names and date as given), a set intersection in code, plan updates"),
    ("clean-smol-booking", "build_booking",
     "Book meeting room Atlas on 14/03/2026 for two hours in the afternoon. Report 'BOOKED: <room> <date> "
     "<start>-<end>'.",
     "BOOKED: Atlas 2026-03-14 14:00-16:00", "ToolCallingAgent",
     "a call the tool rejects (the task's date format) rewritten as the tool asks and recovered"),
    ("clean-smol-warmest", "build_warmest",
     "Which of Seville, Porto and Lyon is warmest this afternoon? Report 'WARMEST: <city>, <temp> C'.",
     "WARMEST: Seville, 24 C", "ToolCallingAgent with parallel tool calls in one response",
     "every city of the task looked up at once, the maximum picked"),
    ("clean-smol-risotto", "build_risotto",
     "I'm cooking risotto for 10 people. How many kilograms of arborio rice do I need? Report 'RICE: <kg> kg'.",
     "RICE: 0.8 kg", "ToolCallingAgent with an opening facts survey",
     "a recipe scaled by a tool, grams converted to the kilograms the task asks for"),
    ("clean-smol-accounts", "build_accounts",
     "What did accounts K4, K5 and K6 pay in total? Count paid orders only: leave out cancelled and refunded "
     "orders. Report 'TOTAL: <euros> EUR'.",
     "TOTAL: 325 EUR", "manager CodeAgent delegating in a code loop to a managed ToolCallingAgent",
     "every account of the task, an exclusion instruction followed (items of the tool's list left out as asked)"),
    ("clean-smol-laptops", "build_laptops",
     "Which are the three best-rated laptops under 1000 EUR? Report 'TOP: <name> (<rating>), ...'.",
     "TOP: Dune 16 (4.7), Aero 14 (4.6), Echo 14 (4.4)", "ToolCallingAgent",
     "a list filtered and cut to the top three as asked: the other entries are left out on purpose"),
    ("clean-smol-overdue", "build_overdue",
     "Today is 2026-03-02. When was invoice F-2291 due, and how many days overdue is it? Report 'DUE: <date>, "
     "OVERDUE: <n> days'.",
     "DUE: 2026-02-14, OVERDUE: 16 days", "CodeAgent",
     "dates derived in code (issue date + terms, days since), not copied"),
    ("clean-smol-welcome", "build_welcome",
     "Send the welcome pack to our new colleague Jonas Weber from Payments. Report 'SENT: <name> (<id>)'.",
     "SENT: Jonas Weber (E-2231)", "ToolCallingAgent",
     "a name restated in another form ('WEBER, Jonas' -> 'Jonas Weber'), the right one of two matches"),
    ("clean-smol-growth", "build_growth",
     "By how many percent did revenue grow from Q1 2026 to Q2 2026? Report 'GROWTH: <percent>%' to one decimal.",
     "GROWTH: 12.0%", "CodeAgent", "a percentage derived in code from two looked-up figures"),
    ("clean-smol-capacity", "build_capacity",
     "Check the Leeds, Hull, York, Bath and Derby warehouses: which are above 90% full? Report 'OVER: <names> "
     "(<n> checked)'.",
     "OVER: Leeds, Bath (5 checked)", "ToolCallingAgent",
     "every item the task names checked, only those matching the condition reported (the rest is not omitted)"),
    ("clean-smol-courier", "build_courier",
     "A courier leaves Porto at 09:00 Porto time for Madrid, driving at 80 km/h. When does it arrive, in Madrid "
     "local time? Report 'ARRIVES: <HH:MM> <city> time'.",
     "ARRIVES: 17:00 Madrid time", "manager ToolCallingAgent with a tool and two managed agents",
     "delegations whose tools fit (descriptions sharing few words with the task), a time derived and converted"),
    ("clean-smol-estimate", "build_estimate",
     "Estimate the yearly electricity cost of a 2.5 kW heat pump running 6 hours a day, at the current tariff in "
     "Porto. Report 'ESTIMATE: <euros> EUR per year' rounded to whole euros.",
     "ESTIMATE: 1697 EUR per year", "CodeAgent",
     "a lookup failing twice, Thoughts that refuse to guess, an estimate the task asks for computed from the tool"),
    ("clean-smol-trip-3n", "build_trip",
     "Plan a trip: fly from Lisbon to Oslo on 2026-03-14 and stay 3 nights. Take the cheapest flight and the "
     "cheapest hotel and report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 636 EUR",
     "manager ToolCallingAgent with two managed agents (variant of clean-smol-trip)",
     "a total of a flight and 3 nights (189 + 3 x 149)"),
    ("clean-smol-restock-up", "build_restock",
     "We need 50 bolts on the shelf. Check how many bolts are in stock right now and order the difference. Report "
     "'ORDERED: <n> bolts'.",
     "ORDERED: 3 bolts", "ToolCallingAgent (variant of clean-smol-restock)",
     "a cached count (40) superseded by a HIGHER live one (47: a delivery came in), the live one used",
     {"cached": 40, "live": 47}),
    ("clean-smol-growth-down", "build_growth",
     "By how many percent did revenue grow from Q1 2026 to Q2 2026? Report 'GROWTH: <percent>%' to one decimal.",
     "GROWTH: -10.7%", "CodeAgent (variant of clean-smol-growth)",
     "a negative growth derived in code (1,400,000 -> 1,250,000)",
     {"revenue": (("Q1 2026", "1,400,000"), ("Q2 2026", "1,250,000"))}),
    ("clean-smol-invoices-first", "build_invoices",
     "Find the most recent invoice of customer Ines Duarte and report it as 'LATEST: <invoice> on <date>'.",
     "LATEST: INV-204 on 2026-09-30", "ToolCallingAgent paging a listing (variant of clean-smol-invoices)",
     "the latest invoice is the FIRST listed; every page is still read before answering",
     {"pages": ((("INV-204", "2026-09-30"), ("INV-211", "2026-05-19")), (("INV-230", "2026-08-11"),))}),
    ("clean-smol-capacity-none", "build_capacity",
     "Check the Leeds, Hull, York, Bath and Derby warehouses: which are above 90% full? Report 'OVER: <names> "
     "(<n> checked)'.",
     "OVER: none (5 checked)", "ToolCallingAgent (variant of clean-smol-capacity)",
     "every warehouse the task names checked and none reported: none is above the threshold",
     {"loads": (("Leeds", 84), ("Hull", 71), ("York", 88), ("Bath", 79), ("Derby", 62))}),
    ("clean-smol-warmest-5", "build_warmest",
     "Which of Seville, Porto, Lyon, Malaga and Nice is warmest this afternoon? Report 'WARMEST: <city>, <temp> "
     "C'.",
     "WARMEST: Malaga, 26 C", "ToolCallingAgent with parallel tool calls (variant of clean-smol-warmest)",
     "five parallel lookups, the maximum is the fourth",
     {"temps": (("Seville", 24), ("Porto", 19), ("Lyon", 21), ("Malaga", 26), ("Nice", 22))}),
    ("clean-smol-estimate-once", "build_estimate",
     "Estimate the yearly electricity cost of a 2.5 kW heat pump running 6 hours a day, at the current tariff in "
     "Porto. Report 'ESTIMATE: <euros> EUR per year' rounded to whole euros.",
     "ESTIMATE: 1697 EUR per year", "CodeAgent (variant of clean-smol-estimate)",
     "a lookup failing once, retried and recovered", {"down": 1}),
    ("clean-smol-checked", "build_checked",
     "How far is 7.9 miles in kilometres? Answer with the number and its unit.",
     "12.71 km", "ToolCallingAgent with smolagents' final_answer_checks",
     "a first answer (a bare number) rejected by the check, the same value answered again with its unit"),
    ("clean-smol-pantry-salt", "build_pantry",
     "Restock the pantry: buy 4 bags of rice, 2 bottles of oil and 5 packs of salt. Look up each unit price and "
     "report the total cost as 'TOTAL: <dollars>', rounded to cents.",
     "TOTAL: 30.75", "ToolCallingAgent with an opening facts survey (variant of clean-smol-pantry)",
     "three prices, one below a dollar (0.89), all carried into one calculator expression",
     {"prices": (("rice", "bag", 3.2), ("oil", "bottle", 6.75), ("salt", "pack", 0.89))}),
    ("clean-smol-meeting-2025", "build_meeting",
     "Find a one-hour meeting slot for Rui Costa, Sara Neves and Tiago Reis on 2025-11-03: the earliest slot free "
     "for all three. Report 'MEET: <HH:MM> on <date>'.",
     "MEET: 10:00 on 2025-11-03",
     "manager CodeAgent with planning and a managed agent (variant of clean-smol-meeting)",
     "other people, another date; the earliest common slot is not the first listed by everyone",
     {"free": (("Rui Costa", ("08:00", "10:00", "15:00")), ("Sara Neves", ("10:00", "15:00")), ("Tiago Reis",
     ("15:00", "10:00")))}),
    ("clean-smol-booking-1h", "build_booking",
     "Book meeting room Atlas on 14/03/2026 for one hours in the afternoon. Report 'BOOKED: <room> <date> "
     "<start>-<end>'.",
     "BOOKED: Atlas 2026-03-14 14:00-15:00", "ToolCallingAgent (variant of clean-smol-booking)",
     "a rejected date format recovered; an end time (15:00) no observation states"),
    ("clean-smol-trip-5n", "build_trip",
     "Plan a trip: fly from Lisbon to Oslo on 2026-03-14 and stay 5 nights. Take the cheapest flight and the "
     "cheapest hotel and report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 934 EUR",
     "manager ToolCallingAgent with two managed agents (variant of clean-smol-trip)",
     "a total of a flight and 5 nights (189 + 5 x 149)"),
    ("clean-smol-accounts-zero", "build_accounts",
     "What did accounts K4, K5 and K6 pay in total? Count paid orders only: leave out cancelled and refunded "
     "orders. Report 'TOTAL: <euros> EUR'.",
     "TOTAL: 225 EUR", "manager CodeAgent delegating in a code loop (variant of clean-smol-accounts)",
     "an account whose only order is cancelled: its paid total is 0, carried as such",
     {"accounts": (("K4", ((120, "paid"), (80, "cancelled"), (45, "paid"))), ("K5", ((60, "paid"), (30,
     "refunded"))), ("K6", ((40, "cancelled"),)))}),
    ("clean-smol-pantry-7", "build_pantry",
     "Restock the pantry: buy 2 bags of flour, 3 bags of sugar and 4 packs of butter. Look up each unit price and "
     "report the total cost as 'TOTAL: <dollars>', rounded to cents.",
     "TOTAL: 39.25", "ToolCallingAgent with an opening facts survey (variant of clean-smol-pantry)",
     "the expression ends with 7.15 (read as 7 by the figure pattern, but 7 = 3 + 4 derives it: clean by luck)",
     {"prices": (("flour", "bag", 2.49), ("sugar", "bag", 1.89), ("butter", "pack", 7.15))}),
    ("clean-smol-risotto-6", "build_risotto",
     "I'm cooking risotto for 6 people. How many kilograms of arborio rice do I need? Report 'RICE: <kg> kg'.",
     "RICE: 0.48 kg", "ToolCallingAgent with an opening facts survey (variant of clean-smol-risotto)",
     "a recipe scaled to 6, 480 g given as 0.48 kg"),
    ("clean-smol-capacity-all", "build_capacity",
     "Check the Leeds, Hull, York, Bath and Derby warehouses: which are above 90% full? Report 'OVER: <names> "
     "(<n> checked)'.",
     "OVER: Leeds, Hull, York, Bath, Derby (5 checked)", "ToolCallingAgent (variant of clean-smol-capacity)",
     "every warehouse over the threshold, all reported",
     {"loads": (("Leeds", 94), ("Hull", 91), ("York", 98), ("Bath", 97), ("Derby", 92))}),
    ("clean-smol-coffee", "build_unit_price",
     "What was the average price per kilogram of the coffee we bought in 2026-02? Report 'AVG: <euros> EUR per "
     "kg'.",
     "AVG: 2.39 EUR per kg", "CodeAgent",
     "an average that is a weighted mean (total paid / total kg, 23.90 / 10), not the mean of the three bags"),
    ("clean-smol-pantry-5", "build_pantry",
     "Restock the pantry: buy 2 bags of flour, 3 bags of sugar and 4 packs of butter. Look up each unit price and "
     "report the total cost as 'TOTAL: <dollars>', rounded to cents.",
     "TOTAL: 32.05", "ToolCallingAgent with an opening facts survey (variant of clean-smol-pantry)",
     "the calculator expression ends with 5.35 (read as 5 by the figure pattern, which nothing derives)",
     {"prices": (("flour", "bag", 2.49), ("sugar", "bag", 1.89), ("butter", "pack", 5.35))}),
    ("clean-smol-courier-600", "build_courier",
     "A courier leaves Porto at 09:00 Porto time for Madrid, driving at 80 km/h. When does it arrive, in Madrid "
     "local time? Report 'ARRIVES: <HH:MM> <city> time'.",
     "ARRIVES: 17:30 Madrid time", "dispatcher with a tool and two managed agents (variant of clean-smol-courier)",
     "600 km: 7 h 30 min, the minutes carried into the clock conversion", {"km": 600}),
    ("clean-smol-risotto-7", "build_risotto",
     "I'm cooking risotto for 7 people. How many kilograms of arborio rice do I need? Report 'RICE: <kg> kg'.",
     "RICE: 0.525 kg", "ToolCallingAgent with an opening facts survey (variant of clean-smol-risotto)",
     "another recipe (300 g for 4) scaled to 7: 525 g given as 0.525 kg",
     {"lines": (("arborio rice", "300 g"), ("parmesan", "60 g"), ("butter", "40 g"))}),
    ("clean-smol-laptops-950", "build_laptops",
     "Which are the three best-rated laptops under 950 EUR? Report 'TOP: <name> (<rating>), ...'.",
     "TOP: Aero 14 (4.6), Echo 14 (4.4), Civic 13 (4.2)", "ToolCallingAgent (variant of clean-smol-laptops)",
     "a tighter budget: the two best-rated overall are left out as asked"),
    ("clean-smol-parcels-4", "build_parcels",
     "Order NX-5120 ships as several parcels weighed in pounds. Give their total weight in kilograms (rounded to "
     "2 decimals) and the shipping quote for it, as 'KG: <kg>, QUOTE: <eur> EUR'.",
     "KG: 7.98, QUOTE: 27.93 EUR", "CodeAgent with an opening facts survey (variant of clean-smol-parcels)",
     "four parcels and another rate", {"weights": (4.4, 9.9, 1.1, 2.2), "rate": 3.5}),
    ("clean-smol-overdue-leap", "build_overdue",
     "Today is 2028-03-15. When was invoice F-7001 due, and how many days overdue is it? Report 'DUE: <date>, "
     "OVERDUE: <n> days'.",
     "DUE: 2028-03-01, OVERDUE: 14 days", "CodeAgent (variant of clean-smol-overdue)",
     "dates across a leap February, derived in code", {"issued": "2028-01-31", "terms": 30}),
    ("clean-smol-accounts-excluding", "build_accounts",
     "What did accounts K4, K5 and K6 pay in total, excluding cancelled and refunded orders? Report 'TOTAL: "
     "<euros> EUR'.",
     "TOTAL: 325 EUR", "manager CodeAgent delegating in a code loop (variant of clean-smol-accounts)",
     "the exclusion worded 'excluding cancelled and refunded orders' (two excluded words), followed"),
    ("clean-smol-restock-not-more", "build_restock",
     "We need 50 bolts on the shelf, not more. Check how many bolts are in stock right now and order the "
     "difference. Report 'ORDERED: <n> bolts'.",
     "ORDERED: 16 bolts", "ToolCallingAgent (variant of clean-smol-restock)", "'not more' in the task"),
    ("clean-smol-restock-morning", "build_restock",
     "The morning count said 40 bolts. We need 50 bolts on the shelf. Check how many bolts are in stock right now and "
     "order the difference. Report 'ORDERED: <n> bolts'.",
     "ORDERED: 16 bolts", "ToolCallingAgent (variant of clean-smol-restock)", "the task's stale count superseded"),
    ("clean-smol-pantry-last-month", "build_pantry",
     "Restock the pantry: buy 2 bags of flour, 3 bags of sugar and 4 packs of butter. Last month flour was 2.29 a bag, "
     "but prices change: look up each unit price and report the total cost as 'TOTAL: <dollars>', rounded to cents.",
     "TOTAL: 23.25", "ToolCallingAgent with a facts survey (variant)", "the task's stale price superseded by the tool's"),
    ("clean-smol-pantry-remark", "build_pantry",
     "The old March price list is outdated and the shop's website had a KeyError yesterday. Restock the pantry: buy 2 "
     "bags of flour, 3 bags of sugar and 4 packs of butter. Look up each unit price and report the total cost as "
     "'TOTAL: <dollars>', rounded to cents.",
     "TOTAL: 23.25", "ToolCallingAgent with a facts survey (variant)", "side remarks the plan rightly leaves aside"),
    ("clean-smol-warmest-each", "build_warmest",
     "Check this afternoon's forecast for each city. Which of Seville, Porto and Lyon is warmest this afternoon? Report "
     "'WARMEST: <city>, <temp> C'.",
     "WARMEST: Seville, 24 C", "ToolCallingAgent, parallel calls (variant)", "'for each city': each looked up"),
    ("clean-smol-trip-budget", "build_trip",
     "Plan a trip: fly from Lisbon to Oslo on 2026-03-14 and stay 2 nights; my budget is 600 EUR. Take the cheapest "
     "flight and the cheapest hotel and report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 487 EUR", "manager with two managed agents (variant)", "a budget the answer is under"),
    ("clean-smol-estimate-3", "build_estimate",
     "Estimate the yearly electricity cost of a 2.5 kW heat pump running 6 hours a day, at the current tariff in "
     "Porto. Report 'ESTIMATE: <euros> EUR per year' rounded to whole euros.",
     "ESTIMATE: 1697 EUR per year", "CodeAgent (variant of clean-smol-estimate)", "three failures, the fourth try answers",
     {"down": 3}),
    ("clean-smol-invoices-1-page", "build_invoices",
     "Find the most recent invoice of customer Ines Duarte and report it as 'LATEST: <invoice> on <date>'.",
     "LATEST: INV-211 on 2026-05-19", "ToolCallingAgent (variant of clean-smol-invoices)", "a single page: no paging",
     {"pages": ((("INV-204", "2026-03-02"), ("INV-211", "2026-05-19")),)}),
    ("clean-smol-courier-delivered", "build_courier",
     "A courier leaves Porto at 09:00 Porto time for Madrid, driving at 80 km/h. What time will the parcel be "
     "delivered, in Madrid local time? Report 'ARRIVES: <HH:MM> <city> time'.",
     "ARRIVES: 17:00 Madrid time", "dispatcher with two managed agents (variant)", "'delivered' for 'arrive'"),
    ("clean-smol-trip-hotel-first", "build_trip",
     "Plan a trip: I need the cheapest hotel and the cheapest flight: fly from Lisbon to Oslo on 2026-03-14 and stay 2 "
     "nights. Report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 487 EUR", "manager with two managed agents (variant)",
     "the hotel named first, the flight delegated first"),
    ("clean-smol-invoices-6-pages", "build_invoices",
     "Find the most recent invoice of customer Ines Duarte and report it as 'LATEST: <invoice> on <date>'.",
     "LATEST: INV-311 on 2025-06-20", "ToolCallingAgent paging (variant of clean-smol-invoices)",
     "six pages read one after another (six near-identical calls with progress), the latest is the last listed",
     {"pages": ((("INV-300", "2025-01-10"), ("INV-301", "2025-01-20")), (("INV-302", "2025-02-10"), ("INV-303",
     "2025-02-20")), (("INV-304", "2025-03-10"), ("INV-305", "2025-03-20")), (("INV-306", "2025-04-10"),
     ("INV-307", "2025-04-20")), (("INV-308", "2025-05-10"), ("INV-309", "2025-05-20")), (("INV-310",
     "2025-06-10"), ("INV-311", "2025-06-20")))}),
    ("clean-smol-capacity-8", "build_capacity",
     "Check the Leeds, Hull, York, Bath, Derby, Kent, Essex and Dover warehouses: which are above 90% full? Report "
     "'OVER: <names> (<n> checked)'.",
     "OVER: Leeds, Bath, Kent (8 checked)", "ToolCallingAgent (variant of clean-smol-capacity)",
     "eight warehouses, one exactly at 90% (not above)",
     {"loads": (("Leeds", 94), ("Hull", 71), ("York", 88), ("Bath", 97), ("Derby", 62), ("Kent", 91), ("Essex", 45),
                ("Dover", 90))}),
    ("clean-smol-restock-at-most", "build_restock",
     "We need 50 bolts on the shelf. Check how many bolts are in stock right now and order the difference (at most 20 "
     "bolts per order). Report 'ORDERED: <n> bolts'.",
     "ORDERED: 16 bolts", "ToolCallingAgent (variant of clean-smol-restock)", "a bound the order is under"),
    ("clean-smol-trip-at-most", "build_trip",
     "Plan a trip: fly from Lisbon to Oslo on 2026-03-14 and stay 2 nights, at most 500 EUR in all. Take the cheapest "
     "flight and the cheapest hotel and report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 487 EUR", "manager with two managed agents (variant)", "a bound the total is under"),
    ("clean-smol-booking-before", "build_booking",
     "Book meeting room Atlas on 14/03/2026 for two hours in the afternoon, ending before 17:00. Report 'BOOKED: "
     "<room> <date> <start>-<end>'.",
     "BOOKED: Atlas 2026-03-14 14:00-16:00", "ToolCallingAgent (variant of clean-smol-booking)", "an end bound met"),
    ("clean-smol-meeting-not-before", "build_meeting",
     "Find a one-hour meeting slot for Ana Souza, Bruno Lima and Chen Wei on 2026-04-22, not before 10:00: the "
     "earliest slot free for all three. Report 'MEET: <HH:MM> on <date>'.",
     "MEET: 11:00 on 2026-04-22", "manager CodeAgent with planning (variant)", "a start bound met by the earliest slot"),
    ("clean-smol-trip-bed", "build_trip",
     "Plan a trip: go from Lisbon to Oslo on 2026-03-14 and stay 2 nights; I want the cheapest plane seat and the "
     "cheapest bed. Report 'TRIP: <flight> + <hotel>, <total> EUR'.",
     "TRIP: SK1812 + Saga Hotel, 487 EUR", "manager with two managed agents (variant)", "'plane seat' and 'bed'"),
    ("clean-smol-courier-eta", "build_courier",
     "A courier leaves Porto at 09:00 Porto time for Madrid, driving at 80 km/h. What is the ETA in Madrid local "
     "time? Report 'ARRIVES: <HH:MM> <city> time'.",
     "ARRIVES: 17:00 Madrid time", "dispatcher with two managed agents (variant)", "'ETA'"),
    ("clean-smol-meeting-sync", "build_meeting",
     "Set up a one-hour sync for Ana Souza, Bruno Lima and Chen Wei on 2026-04-22: the earliest hour all three can "
     "make. Report 'MEET: <HH:MM> on <date>'.",
     "MEET: 11:00 on 2026-04-22", "manager CodeAgent with planning (variant)", "'sync', 'all three can make'"),
    ("clean-smol-invoices-newest", "build_invoices",
     "Find the newest invoice of customer Ines Duarte and report it as 'LATEST: <invoice> on <date>'.",
     "LATEST: INV-230 on 2026-08-11", "ToolCallingAgent paging (variant)", "'newest', answered under 'LATEST'"),
    ("clean-smol-laptops-highest-first", "build_laptops",
     "Which are the three best-rated laptops under 1000 EUR, highest rating first? Report 'TOP: <name> (<rating>), "
     "...'.",
     "TOP: Dune 16 (4.7), Aero 14 (4.6), Echo 14 (4.4)", "ToolCallingAgent (variant)", "'highest rating first'"),
    ("clean-smol-capacity-out-of-space", "build_capacity",
     "Check the Leeds, Hull, York, Bath and Derby warehouses: which are above 90% full, i.e. nearly out of space? "
     "Report 'OVER: <names> (<n> checked)'.",
     "OVER: Leeds, Bath (5 checked)", "ToolCallingAgent (variant)", "'nearly out of space'"),
)

#: the AutoGen teams: ``(name, builder in clean_teams_autogen, task, the field its final answer reports, the field's
#: value, shape, content[, the builder's keyword arguments: a variant of its data])``
AUTOGEN_TEAMS: tuple[tuple[Any, ...], ...] = (
    ("clean-ag-invoice", "build_invoice",
     "Add up the lines of invoice F-2291 and report 'TOTAL: <euros> EUR'.",
     "TOTAL", "1486.69", "RoundRobinGroupChat: a worker and a reviewer that checks",
     "a rejected format and a restated draft, every line added, the reviewer re-reads the source"),
    ("clean-ag-fare", "build_fare",
     "Find the cheapest fare from BOS to ORD on 2026-05-09 and give its price in euros at today's rate, rounded "
     "to cents, as 'FARE: <euros> EUR'.",
     "FARE", "158.60", "SelectorGroupChat: planner, two tool agents, reviewer",
     "a task restated as a plan, the cheapest entry picked, a currency conversion with rounding stated"),
    ("clean-ag-refund", "build_refund",
     "Hello, order A-1093 arrived yesterday but the desk lamp was damaged. Please refund the lamp only. Report "
     "'REFUND: <euros> EUR'.",
     "REFUND", "34.90", "Swarm: triage hands off to billing",
     "a hand-off that fits the request, one item of a list refunded as asked"),
    ("clean-ag-fuel", "build_fuel",
     "Estimate the diesel cost of driving from Porto to Madrid in a van using 7.5 litres per 100 km, at today's "
     "diesel price in Spain. Answer in whole euros as 'RESULT: <euros>'.",
     "RESULT", "64", "MagenticOneGroupChat: facts sheet, ledger, three members",
     "figures from tools used faithfully, a product of three numbers, rounding stated, a checked result"),
    ("clean-ag-legs", "build_legs",
     "How long is route NE-7 in kilometres? Sum its legs (given in miles) and report 'KM: <km>' rounded to 0.1 km.",
     "KM", "376.1", "RoundRobinGroupChat: coder and code executor",
     "a unit conversion done right in code, every leg summed, a failed fetch retried"),
    ("clean-ag-tickets", "build_tickets",
     "How many tickets are open in the payments queue, and how many of them have high priority? Report 'OPEN: "
     "<n>'.",
     "OPEN", "6", "RoundRobinGroupChat: analyst and a reviewer that checks",
     "pagination by cursor that makes progress, every page counted, a check against another source"),
    ("clean-ag-gate", "build_gate",
     "Tell passenger Jonas Weber on LH 1172 on 2026-06-02 his boarding gate and report 'GATE: <gate>'.",
     "GATE", "C4", "RoundRobinGroupChat: a tool agent and a notifier",
     "a later observation (a gate change) superseding the published gate, names and dates as given"),
    ("clean-ag-router", "build_router",
     "My router keeps dropping the connection (account 5521). Please fix it, and apply the 10 EUR goodwill credit "
     "your outage policy promises. Report 'CREDIT: <euros> EUR'.",
     "CREDIT", "10.00", "Swarm: triage -> tech_agent -> back to triage -> billing_agent",
     "two requests of one task each handed to the agent whose tools fit, a hand-back in between"),
    ("clean-ag-contractor", "build_contractor",
     "Estimate the monthly cost of contractor Lena Ortiz at her current day rate. Assume 22 working days per "
     "month. Report 'MONTHLY: <euros> EUR'.",
     "MONTHLY", "9020", "RoundRobinGroupChat: estimator and a reviewer that re-reads the rate card",
     "an assumption the task states, said aloud ('assuming 22 working days'), the looked-up rate used"),
    ("clean-ag-rice", "build_rice",
     "Which is the cheapest rice per kilogram: FreshMart, Bodega or GrainCo? Report 'CHEAPEST: <store>'.",
     "CHEAPEST", "GrainCo", "RoundRobinGroupChat of one assistant with parallel tool calls",
     "every store of the task looked up at once, unit prices computed, the cheapest per kg (not per bag)"),
    ("clean-ag-export", "build_export",
     "Export the orders table since 2026-01-01 and tell me how many rows it has. Report 'ROWS: <n>'.",
     "ROWS", "1284", "RoundRobinGroupChat of one assistant polling a job",
     "a status polled three times with progress each time (not a loop), then the download"),
    ("clean-ag-census", "build_census",
     "What was the combined population of Lisbon's and Porto's metro areas in 2021? Report 'POP: <millions> "
     "million' to one decimal.",
     "POP", "4.6", "SelectorGroupChat: researcher, analyst, writer",
     "two figures looked up, added by a tool, the sum rounded to millions by the writer as asked"),
    ("clean-ag-tax", "build_tax",
     "What will 3 nights for 2 adults in Lisbon cost in tourist tax? Report 'RESULT: <euros>'.",
     "RESULT", "24", "MagenticOneGroupChat re-planning after a stall (max_stalls=1)",
     "a lookup that times out, reported as unknown, a facts / plan update, the retry recovers; a product of three "
     "numbers checked"),
    ("clean-ag-balance", "build_balance",
     "What is the balance of account ACC-9? Report 'BALANCE: <euros>' without thousands separators.",
     "BALANCE", "1204.50", "RoundRobinGroupChat of one AssistantAgent with reflect_on_tool_use",
     "a tool's '1,204.50 EUR' restated as '1204.50' in the format the task asks"),
    ("clean-ag-refund-bulb", "build_refund",
     "Hello, order A-1093 arrived yesterday but the lamp bulb was broken. Please refund the bulb only. Report "
     "'REFUND: <euros> EUR'.",
     "REFUND", "4.50", "Swarm: triage hands off to billing (variant of clean-ag-refund)",
     "the one broken item of three refunded, the others (incl. a costlier one) left as they are",
     {"lines": (("desk lamp", "34.90", "delivered"), ("lamp bulb", "4.50", "broken on delivery"), ("shipping",
     "5.00", "charged"))}),
    ("clean-ag-export-stalled", "build_export",
     "Export the orders table since 2026-01-01 and tell me how many rows it has. Report 'ROWS: <n>'.",
     "ROWS", "1284", "RoundRobinGroupChat of one assistant polling a job (variant of clean-ag-export)",
     "a status polled three times: '50% done' twice (the job stalled one poll), then done, then the download",
     {"progress": (50, 50)}),
    ("clean-ag-export-long", "build_export",
     "Export the orders table since 2026-01-01 and tell me how many rows it has. Report 'ROWS: <n>'.",
     "ROWS", "1284", "RoundRobinGroupChat of one assistant polling a job (variant of clean-ag-export)",
     "six polls, each with more progress (10 % ... 85 %, done)", {"progress": (10, 25, 40, 60, 85)}),
    ("clean-ag-fare-first", "build_fare",
     "Find the cheapest fare from BOS to ORD on 2026-05-09 and give its price in euros at today's rate, rounded "
     "to cents, as 'FARE: <euros> EUR'.",
     "FARE", "158.60", "SelectorGroupChat (variant of clean-ag-fare)", "the cheapest fare listed first",
     {"fares": (("AA 2231", "172.15"), ("UA 412", "188.40"), ("B6 901", "179.00"))}),
    ("clean-ag-tickets-4p", "build_tickets",
     "How many tickets are open in the payments queue, and how many of them have high priority? Report 'OPEN: "
     "<n>'.",
     "OPEN", "5", "RoundRobinGroupChat: analyst and a reviewer that checks (variant of clean-ag-tickets)",
     "four pages by cursor, the last with one ticket",
     {"pages": ((("T-101", "open", "high"), ("T-102", "closed", "low")), (("T-103", "open", "low"), ("T-104",
     "open", "medium")), (("T-105", "closed", "high"), ("T-106", "open", "high")), (("T-107", "open", "low"),))}),
    ("clean-ag-gate-b14", "build_gate",
     "Tell passenger Jonas Weber on LH 1172 on 2026-06-02 his boarding gate and report 'GATE: <gate>'.",
     "GATE", "B14", "RoundRobinGroupChat: a tool agent and a notifier (variant of clean-ag-gate)",
     "a gate change to a gate one digit away from the published one (B12 -> B14): not a copy slip",
     {"published": "B12", "changed": "B14"}),
    ("clean-ag-contractor-20", "build_contractor",
     "Estimate the monthly cost of contractor Lena Ortiz at her current day rate. Assume 20 working days per "
     "month. Report 'MONTHLY: <euros> EUR'.",
     "MONTHLY", "7700", "RoundRobinGroupChat: estimator and a reviewer (variant of clean-ag-contractor)",
     "another stated assumption (20 days) and rate (385 EUR)", {"rate": 385}),
    ("clean-ag-router-credit-first", "build_router",
     "Please apply the 10 EUR goodwill credit your outage policy promises to account 5521, and fix my router: it "
     "keeps dropping the connection. Report 'CREDIT: <euros> EUR'.",
     "CREDIT", "10.00",
     "Swarm: triage -> tech_agent -> back to triage -> billing_agent (variant of clean-ag-router)",
     "the request names the credit first; the team fixes first, then credits: both parts done"),
    ("clean-ag-fuel-lisbon", "build_fuel",
     "Estimate the diesel cost of driving from Porto to Lisbon in a van using 8.5 litres per 100 km, at today's "
     "diesel price in Spain. Answer in whole euros as 'RESULT: <euros>'.",
     "RESULT", "43", "MagenticOneGroupChat (variant of clean-ag-fuel)",
     "other figures (312 km, 8.5 l/100 km, 1.61 EUR/l), the same templated orchestrator instructions",
     {"km": 312, "price": "1.61"}),
    ("clean-ag-legs-2", "build_legs",
     "How long is route AL-2 in kilometres? Sum its legs (given in miles) and report 'KM: <km>' rounded to 0.1 km.",
     "KM", "309.8", "RoundRobinGroupChat: coder and code executor (variant of clean-ag-legs)",
     "two legs, another route", {"legs": (("Lyon", "Geneva", 93.4), ("Geneva", "Bern", 99.1))}),
    ("clean-ag-invoice-6", "build_invoice",
     "Add up the lines of invoice F-3310 and report 'TOTAL: <euros> EUR'.",
     "TOTAL", "1541.35", "RoundRobinGroupChat: a worker and a reviewer that checks (variant of clean-ag-invoice)",
     "six lines, all added; the reviewer re-reads them",
     {"lines": (("design", "850.00"), ("hosting", "29.90"), ("domain", "12.00"), ("support", "240.00"), ("licence",
     "99.00"), ("travel", "310.45"))}),
    ("clean-ag-rice-first", "build_rice",
     "Which is the cheapest rice per kilogram: FreshMart, Bodega or GrainCo? Report 'CHEAPEST: <store>'.",
     "CHEAPEST", "FreshMart",
     "RoundRobinGroupChat of one assistant with parallel tool calls (variant of clean-ag-rice)",
     "the cheapest per kg is the first store asked",
     {"offers": (("FreshMart", 5, "9.50"), ("Bodega", 2, "4.90"), ("GrainCo", 10, "21.00"))}),
    ("clean-ag-tax-porto", "build_tax",
     "What will 5 nights for 4 adults in Porto cost in tourist tax? Report 'RESULT: <euros>'.",
     "RESULT", "60", "MagenticOneGroupChat re-planning after a stall (variant of clean-ag-tax)",
     "other figures (5 nights, 4 adults, 3 EUR) after the re-plan", {"rate": 3}),
    ("clean-ag-nested", "build_nested",
     "Which has more inhabitants, Braga or Coimbra? Report 'LARGER: <city>'.",
     "LARGER", "Braga", "RoundRobinGroupChat of a SocietyOfMindAgent (an inner team) and a reviewer",
     "an inner team's two lookups (one retried) summarised by the outer agent, the comparison approved"),
    ("clean-ag-fuel-204", "build_fuel",
     "Estimate the diesel cost of driving from Porto to Madrid in a van using 7.5 litres per 100 km, at today's "
     "diesel price in Spain. Answer in whole euros as 'RESULT: <euros>'.",
     "RESULT", "86", "MagenticOneGroupChat (variant of clean-ag-fuel)", "a diesel price of 2.04 EUR",
     {"price": "2.04"}),
    ("clean-ag-fuel-087", "build_fuel",
     "Estimate the diesel cost of driving from Porto to Madrid in a van using 7.5 litres per 100 km, at today's "
     "diesel price in Spain. Answer in whole euros as 'RESULT: <euros>'.",
     "RESULT", "37", "MagenticOneGroupChat (variant of clean-ag-fuel)",
     "a diesel price of 0.87 EUR; the reviewer states the litres it recomputed (561 x 7.5 / 100 = 42.075)",
     {"price": "0.87"}),
    ("clean-ag-contractor-21", "build_contractor",
     "Estimate the monthly cost of contractor Lena Ortiz at her current day rate. Assume 21 working days per "
     "month. Report 'MONTHLY: <euros> EUR'.",
     "MONTHLY", "10752", "RoundRobinGroupChat: estimator and a reviewer (variant of clean-ag-contractor)",
     "21 days at 512 EUR", {"rate": 512}),
    ("clean-ag-invoice-without-exception", "build_invoice",
     "Add up the lines of invoice F-2291, every line without exception, and report 'TOTAL: <euros> EUR'.",
     "TOTAL", "1486.69", "RoundRobinGroupChat: a worker and a reviewer that checks (variant of clean-ag-invoice)",
     "'without exception' in the task (a phrase, not an excluded value); the reviewer re-reads the lines"),
    ("clean-ag-refund-not", "build_refund",
     "Hello, order A-1093 arrived yesterday but the desk lamp was damaged. Please refund the lamp only, not the "
     "bulb or the shipping. Report 'REFUND: <euros> EUR'.",
     "REFUND", "34.90", "Swarm: triage hands off to billing (variant of clean-ag-refund)",
     "the items left out named with 'not'"),
    ("clean-ag-contractor-ignoring", "build_contractor",
     "Estimate the monthly cost of contractor Lena Ortiz at her current day rate. Assume 22 working days per "
     "month, ignoring holidays. Report 'MONTHLY: <euros> EUR'.",
     "MONTHLY", "9020", "RoundRobinGroupChat: estimator and a reviewer (variant of clean-ag-contractor)",
     "'ignoring holidays' in the task"),
    ("clean-ag-tickets-excluding", "build_tickets",
     "How many tickets are open in the payments queue, excluding closed tickets, and how many of them have high "
     "priority? Report 'OPEN: <n>'.",
     "OPEN", "6", "RoundRobinGroupChat: analyst and a reviewer (variant of clean-ag-tickets)",
     "'excluding closed tickets'"),
    ("clean-ag-invoice-including", "build_invoice",
     "Add up the lines of invoice F-2291, including travel and printing, and report 'TOTAL: <euros> EUR'.",
     "TOTAL", "1486.69", "RoundRobinGroupChat: a worker and a reviewer (variant of clean-ag-invoice)",
     "'including travel and printing'"),
    ("clean-ag-tax-excluding", "build_tax",
     "What will 3 nights for 2 adults in Lisbon cost in tourist tax, excluding children (we have none)? Report "
     "'RESULT: <euros>'.",
     "RESULT", "24", "MagenticOneGroupChat re-planning (variant of clean-ag-tax)",
     "'excluding children (we have none)'"),
    ("clean-ag-fare-not-whole", "build_fare",
     "Find the cheapest fare from BOS to ORD on 2026-05-09 and give its price in euros at today's rate, rounded "
     "to cents (not to whole euros), as 'FARE: <euros> EUR'.",
     "FARE", "158.60", "SelectorGroupChat (variant of clean-ag-fare)", "'(not to whole euros)'"),
    ("clean-ag-gate-boarding-pass", "build_gate",
     "His boarding pass says gate B12. Tell passenger Jonas Weber on LH 1172 on 2026-06-02 his boarding gate now and "
     "report 'GATE: <gate>'.",
     "GATE", "C4", "RoundRobinGroupChat (variant of clean-ag-gate)", "the task's gate superseded by the later change"),
    ("clean-ag-fuel-roughly", "build_fuel",
     "Roughly what will the diesel cost of driving from Porto to Madrid in a van using 7.5 litres per 100 km be, at "
     "today's diesel price in Spain? Answer in whole euros as 'RESULT: <euros>'.",
     "RESULT", "64", "MagenticOneGroupChat (variant of clean-ag-fuel)", "'Roughly' in the task"),
    ("clean-ag-contractor-approximately", "build_contractor",
     "Approximately what will contractor Lena Ortiz cost per month at her current day rate? Assume 22 working days "
     "per month. Report 'MONTHLY: <euros> EUR'.",
     "MONTHLY", "9020", "RoundRobinGroupChat (variant of clean-ag-contractor)", "'Approximately' in the task"),
    ("clean-ag-fare-at-most", "build_fare",
     "Find the cheapest fare from BOS to ORD on 2026-05-09, at most 200 USD, and give its price in euros at today's "
     "rate, rounded to cents, as 'FARE: <euros> EUR'.",
     "FARE", "158.60", "SelectorGroupChat (variant of clean-ag-fare)", "a bound (at most 200 USD) the fare is under"),
    ("clean-ag-invoice-without-vat", "build_invoice",
     "Add up the lines of invoice F-2291 (amounts are without VAT) and report 'TOTAL: <euros> EUR'.",
     "TOTAL", "1486.69", "RoundRobinGroupChat (variant of clean-ag-invoice)", "'(amounts are without VAT)'"),
    ("clean-ag-invoice-all", "build_invoice",
     "Add up all the lines of invoice F-2291 and report 'TOTAL: <euros> EUR'.",
     "TOTAL", "1486.69", "RoundRobinGroupChat (variant of clean-ag-invoice)", "'all the lines'"),
    ("clean-ag-tickets-only", "build_tickets",
     "How many tickets are open in the payments queue (count only open ones), and how many of them have high "
     "priority? Report 'OPEN: <n>'.",
     "OPEN", "6", "RoundRobinGroupChat (variant of clean-ag-tickets)", "'(count only open ones)'"),
    ("clean-ag-export-long-stall", "build_export",
     "Export the orders table since 2026-01-01 and tell me how many rows it has. Report 'ROWS: <n>'.",
     "ROWS", "1284", "RoundRobinGroupChat of one assistant polling (variant)", "'50% done' three times, then done",
     {"progress": (50, 50, 50)}),
    ("clean-ag-export-mixed", "build_export",
     "Export the orders table since 2026-01-01 and tell me how many rows it has. Report 'ROWS: <n>'.",
     "ROWS", "1284", "RoundRobinGroupChat of one assistant polling (variant)", "10 %, 50 %, 50 %, 90 %, done",
     {"progress": (10, 50, 50, 90)}),
    ("clean-ag-tax-rate-1", "build_tax",
     "What will 3 nights for 2 adults in Lisbon cost in tourist tax? Report 'RESULT: <euros>'.",
     "RESULT", "6", "MagenticOneGroupChat re-planning (variant of clean-ag-tax)", "a rate of 1 EUR (a factor of one)",
     {"rate": 1}),
    ("clean-ag-router-short", "build_router",
     "Account 5521: router broken. Fix it and apply the 10 EUR goodwill credit. Report 'CREDIT: <euros> EUR'.",
     "CREDIT", "10.00", "Swarm round trip (variant of clean-ag-router)",
     "a terse request: the router's fix still goes to the agent with diagnostics and firmware tools"),
    ("clean-ag-fare-convert-first", "build_fare",
     "Convert to euros, at today's rate and rounded to cents, the cheapest fare from BOS to ORD on 2026-05-09. Report "
     "'FARE: <euros> EUR'.",
     "FARE", "158.60", "SelectorGroupChat (variant of clean-ag-fare)", "the conversion named before the search"),
    ("clean-ag-refund-money-back", "build_refund",
     "Billing: order A-1093 arrived yesterday but the desk lamp was damaged; I want my money back for the lamp only. "
     "Report 'REFUND: <euros> EUR'.",
     "REFUND", "34.90", "Swarm (variant of clean-ag-refund)", "'money back' for 'refund'"),
    ("clean-ag-tickets-6-pages", "build_tickets",
     "How many tickets are open in the payments queue, and how many of them have high priority? Report 'OPEN: <n>'.",
     "OPEN", "9", "RoundRobinGroupChat: analyst and a reviewer (variant of clean-ag-tickets)", "six cursor pages",
     {"pages": ((("T-100", "open", "low"), ("T-101", "closed", "high"), ("T-102", "closed", "high")), (("T-103",
     "open", "low"), ("T-104", "closed", "high"), ("T-105", "open", "high")), (("T-106", "open", "low"), ("T-107",
     "closed", "high"), ("T-108", "closed", "high")), (("T-109", "open", "low"), ("T-110", "closed", "high"),
     ("T-111", "open", "high")), (("T-112", "open", "low"), ("T-113", "closed", "high"), ("T-114", "closed",
     "high")), (("T-115", "open", "low"), ("T-116", "closed", "high"), ("T-117", "open", "high")))}),
    ("clean-ag-contractor-cap", "build_contractor",
     "Estimate the monthly cost of contractor Lena Ortiz at her current day rate; our cap is 10000 EUR. Assume 22 "
     "working days per month. Report 'MONTHLY: <euros> EUR'.",
     "MONTHLY", "9020", "RoundRobinGroupChat (variant of clean-ag-contractor)", "a cap the estimate is under"),
    ("clean-ag-gate-30-minutes", "build_gate",
     "Tell passenger Jonas Weber on LH 1172 on 2026-06-02 his boarding gate at least 30 minutes before boarding and "
     "report 'GATE: <gate>'.",
     "GATE", "C4", "RoundRobinGroupChat (variant of clean-ag-gate)", "'at least 30 minutes before boarding'"),
    ("clean-ag-fare-lowest", "build_fare",
     "What is the lowest ticket price from BOS to ORD on 2026-05-09, in euros at today's rate, rounded to cents? "
     "Report 'FARE: <euros> EUR'.",
     "FARE", "158.60", "SelectorGroupChat (variant of clean-ag-fare)", "'lowest ticket price', restated as 'cheapest'"),
    ("clean-ag-refund-reimbursed", "build_refund",
     "Hi! order A-1093 came yesterday and my desk lamp was broken when I opened the box. Can I get the lamp "
     "reimbursed? Report 'REFUND: <euros> EUR'.",
     "REFUND", "34.90", "Swarm (variant of clean-ag-refund)", "'reimbursed', 'broken when I opened the box'"),
    ("clean-ag-router-wifi", "build_router",
     "My wifi keeps cutting out (account 5521). Please sort it out, and apply the 10 EUR goodwill credit your outage "
     "policy promises. Report 'CREDIT: <euros> EUR'.",
     "CREDIT", "10.00", "Swarm round trip (variant of clean-ag-router)", "'wifi keeps cutting out', 'sort it out'"),
    ("clean-ag-tickets-unresolved", "build_tickets",
     "How many tickets are still unresolved in the payments queue, and how many of them are urgent? Report 'OPEN: "
     "<n>'.",
     "OPEN", "6", "RoundRobinGroupChat: analyst and a reviewer (variant)", "'unresolved' for open, 'urgent' for high"),
    ("clean-ag-rice-lowest", "build_rice",
     "Which is the cheapest rice per kilogram, i.e. the lowest price per kg: FreshMart, Bodega or GrainCo? Report "
     "'CHEAPEST: <store>'.",
     "CHEAPEST", "GrainCo", "RoundRobinGroupChat of one assistant (variant)", "'cheapest' and 'lowest' both"),
)


def _record_sync(team: CleanTeam) -> Any:
    import causaltrace

    with causaltrace.run(task=team.task, verify=team.verify, name=team.name) as handle:
        try:
            team.factory().run(team.task)
        except Exception:
            pass
    return handle.run


async def record_clean(team: CleanTeam) -> Any:
    """Run ``team`` on its task, instrumented and stored in ``$CAUSALTRACE_HOME``'s store; return the Run."""
    from causaltrace.testing.faults.runner import _instrument

    _instrument()
    if team.framework == "smolagents":
        return await asyncio.to_thread(_record_sync, team)
    import causaltrace

    async with causaltrace.run(task=team.task, verify=team.verify, name=team.name) as handle:
        try:
            await team.factory().run(task=team.task)
        except Exception:
            pass
    return handle.run


def failing_outcome(run: Any, *, expected: bool = False) -> Outcome:
    """The Outcome substituted for a correct run's: status failure, its own final answer and stop, and a verifier
    verdict "the answer is wrong" (the way :func:`.twins.score_twin` substitutes a failing run's Outcome);
    ``expected=True``: the reason the fault suite's strict verifiers give, naming the answer and another one
    expected (:func:`expected_reason`), so a stage that reads values off the reason has some to read."""
    reason = expected_reason(run.outcome.final_answer) if expected else FAILING_REASON
    verdict = Verdict(passed=False, reason=reason)
    return Outcome(status="failure", final_answer=run.outcome.final_answer, stop=run.outcome.stop, verdict=verdict,
                   reason=reason)


def expected_reason(answer: str | None) -> str:
    """``the final answer is 'TOTAL: 23.25', expected 'TOTAL: 24.25'``: the answer's first number plus one, in the
    words of :func:`.cases.answer_is`."""
    text = " ".join(str(answer or "").split())
    first = re.search(r"\d+(?:\.(\d+))?", text)
    if first is None:
        return f"the final answer is {text!r}, expected something else"
    value = float(first.group(0)) + 1
    other = f"{value:.{len(first.group(1))}f}" if first.group(1) else str(int(value))
    return f"the final answer is {text!r}, expected {text[:first.start()] + other + text[first.end():]!r}"


async def score_clean(run: Any, *, expected: bool = False) -> dict[str, Any]:
    """Diagnose ``run`` by ``graph`` (no model, no replay) with :func:`failing_outcome` substituted (``expected``:
    its reason names an expected answer): the run's own status, the top step (index, agent, kind), whether a
    finding backs it (families and claims), the confidence, and whether the diagnosis is uncertain."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.attribution.stages.confidence import is_uncertain

    substituted = run.model_copy(update={"outcome": failing_outcome(run, expected=expected)})
    d = await diagnose(substituted, "graph", None, ablate=("replay_verify",), store=False)
    top = d.top_findings
    step = run.step_at(d.decisive_step_index) if d.decisive_step_index is not None else None
    return {"status": run.outcome.status, "final_answer": run.outcome.final_answer, "steps": len(run.steps),
            "top": d.decisive_step_index, "agent": step.agent if step else None, "kind": step.kind if step else None,
            "finding_at_top": bool(top), "families": sorted({f.family for f in top}),
            "claims": [f.claim for f in top], "confidence": d.confidence, "uncertain": is_uncertain(d),
            "findings": [{"index": f.index, "family": f.family, "claim": f.claim} for f in d.findings]}


def summarize_clean(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over scored rows: how many succeeded, how many have no finding at the top (and how many any finding
    at all), how many are uncertain, the mean confidence, and how often each family is at a top (a false finding)."""
    scored = [r for r in rows if r.get("score")]
    clean = sum(1 for r in scored if not r["score"]["finding_at_top"])
    confidences = [float(r["score"]["confidence"] or 0.0) for r in scored]
    return {"n": len(scored), "succeeded": sum(1 for r in scored if r["score"]["status"] == "success"),
            "no_finding_at_top": clean,
            "uncertain": sum(1 for r in scored if r["score"]["uncertain"]),
            "any_finding": sum(1 for r in scored if r["score"]["findings"]),
            "top_finding_families": dict(sorted(Counter(f for r in scored for f in r["score"]["families"]).items())),
            "mean_confidence": round(sum(confidences) / len(confidences), 4) if confidences else None}
