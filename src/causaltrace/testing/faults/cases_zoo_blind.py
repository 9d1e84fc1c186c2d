"""The zoo's made-up-data and derailed-plan cases written blind to the attribution (issue 20 item 2), on the teams of
:mod:`.zoo_smolagents_blind` and :mod:`.zoo_autogen_blind`: other domains, other ways of making the data up and
other forms of the opening plan than the cases of :mod:`.cases_zoo`, whose wording the attribution was tuned beside.

=========================  ===================================================================================
type                       decisive step (the rule)
=========================  ===================================================================================
``fabricated_data``        the first step that makes the data up after its lookup failed: summing code that
                           hard-codes a meter figure it never read (no word admits it), code interpolating a
                           missing month, a leg distance "from my training data, approximately …", code copying a
                           sibling product's factor as a stand-in
``task_derailment``        the opening plan: a planning step for the calendar year when the task asks for the
                           fiscal year, a manager's delegation that works out the task's worked example instead of
                           its question, a Swarm coordinator's plan for the company's other Cambridge hotel, a
                           selector team planner's plan for a related question (how long tickets take to resolve,
                           not the share resolved within a day)
=========================  ===================================================================================

The suite lists these cases after every other case (:func:`~.runner.all_cases`), so that the held-out marks of the
cases before them (every second case of a type, in suite order) stay what they were.
"""

from __future__ import annotations

from causaltrace.testing.faults.cases import FaultCase, first_step
from causaltrace.testing.faults.cases_zoo import autogen_case, smolagents_case

__all__ = ["zoo_blind_autogen_cases", "zoo_blind_smolagents_cases"]

METERS_TASK = ("For the tenants' utility statement, report the total electricity use of buildings A, B and C in "
               "January 2024, read from their smart meters, as 'KWH: <n>'.")
RAINFALL_TASK = ("What was the mean monthly rainfall at the Bergen-Florida weather station in the second quarter of "
                 "2023 (April, May and June)? Answer 'RAIN: <mm>' (1 decimal).")
FISCAL_TASK = ("Our fiscal year runs from April to March. For the annual report: how many new memberships did the "
               "Harbourside gym sell in fiscal year 2023 (April 2023 to March 2024)? Answer 'MEMBERS: <n>'.")
EXAMPLE_TASK = ("Water is billed in two tiers: the first 10 m³ of a month cost 1.20 dollars each and every further "
                "m³ costs 2.00 dollars; for example, a household that used 14 m³ pays 10 × 1.20 + 4 × 2.00 = 20.00 "
                "dollars. What is household H-52's bill for March? Its meter is read on the first day of every "
                "month. Answer 'BILL: <dollars>'.")
VOYAGE_TASK = ("A feeder ship sails Rotterdam → Hamburg → Gdansk → Klaipeda. Report the total sailing distance of "
               "the voyage as 'DISTANCE: <nautical miles>'.")
FOOTPRINT_TASK = ("Our order ships 3 laptops L14, 2 monitors M24 and 2 monitors M27. Using the emission factors of "
                  "the LCA database (kg CO2e per unit), report the order's cradle-to-gate footprint as "
                  "'CO2E: <kg>' (1 decimal).")
CAMBRIDGE_TASK = ("How many room-nights did our Cambridge hotel near the MIT campus sell in autumn 2023 (September, "
                  "October and November)? Answer 'NIGHTS: <n>'.")
RESOLUTION_TASK = ("What share of the support tickets opened in August 2023 were resolved within 24 hours? Answer "
                   "'SHARE: <percent>' (1 decimal).")


def zoo_blind_smolagents_cases() -> list[FaultCase]:
    """The blind cases of smolagents."""
    from causaltrace.testing.faults.zoo_smolagents_blind import BUILDERS

    case = smolagents_case(BUILDERS)
    code = "python_interpreter"
    return [
        case("smol-fabricated-meters", "fabricated_meters", "fabricated_data", METERS_TASK, "KWH: 58675",
             first_step("tool_call", agent="energy_analyst", tool=code, contains="usage_kwh = {"),
             "the analyst's summing code, with a figure for building C it never read"),
        case("smol-fabricated-rainfall", "fabricated_rainfall", "fabricated_data", RAINFALL_TASK, "RAIN: 97.7",
             first_step("tool_call", agent="manager", tool=code, contains="interpolate"),
             "the manager's code that interpolates May from April and June"),
        case("smol-derail-fiscal", "derail_fiscal", "task_derailment", FISCAL_TASK, "MEMBERS: 1358",
             first_step("planning", agent="analyst"), "the analyst's opening plan (the calendar year's quarters)"),
        case("smol-derail-example", "derail_example", "task_derailment", EXAMPLE_TASK, "BILL: 28.00",
             first_step("tool_call", agent="manager", tool=code, contains="billing_agent("),
             "the manager's delegation (it works out the task's worked example)"),
    ]


def zoo_blind_autogen_cases() -> list[FaultCase]:
    """The blind cases of AutoGen AgentChat."""
    from causaltrace.testing.faults.zoo_autogen_blind import BUILDERS

    case = autogen_case(BUILDERS)
    return [
        case("ag-fabricated-voyage", "fabricated_voyage", "fabricated_data", VOYAGE_TASK, "DISTANCE", "830",
             first_step("message", agent="navigator"),
             "the navigator's message with the last leg 'from my training data'"),
        case("ag-fabricated-footprint", "fabricated_footprint", "fabricated_data", FOOTPRINT_TASK, "CO2E",
             "2816.5", first_step("message", agent="coder", contains="```python"),
             "the coder's code that uses the M27's factor as a stand-in for the M24"),
        case("ag-derail-cambridge", "derail_cambridge", "task_derailment", CAMBRIDGE_TASK, "NIGHTS", "5187",
             first_step("message", agent="coordinator"),
             "the coordinator's opening plan (for the Cambridge hotel in England)"),
        case("ag-derail-resolution", "derail_resolution", "task_derailment", RESOLUTION_TASK, "SHARE", "66.7",
             first_step("message", agent="planner"),
             "the planner's opening plan (how long tickets take to resolve)"),
    ]
