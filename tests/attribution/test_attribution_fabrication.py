"""Fabricated data (issue 20 item 4; :mod:`causaltrace.attribution.stages.fabrication`): the first step that made
its data up is the author of the invented values, not the steps that compute on them faithfully. Built through the
real importer (``whowhen_run_from_data``, Algorithm-Generated's shape) and ranked by the real ``graph`` method."""

from __future__ import annotations

from pathlib import Path

import causaltrace
from causaltrace.attribution.stages.fabrication import find_fabrication
from causaltrace.collector.whowhen import whowhen_run_from_data

TASK = ("What country had the least number of athletes at the 1928 Summer Olympics? If there's a tie, return the "
        "first in alphabetical order. Give the IOC country code as your answer.")
PLAN = (f"# General Task\n{TASK}\n\n## Plan for solving the task\n1. Collect the number of athletes of every "
        "country at the 1928 Summer Olympics.\n2. Find the least.\n3. Break ties alphabetically.")
FETCH = ("I will look up the official participation table of the 1928 Summer Olympics and parse the athletes per "
         "country.\n```python\nrows = load_participation_table('1928 Summer Olympics')\nprint(rows[:5])\n```")
FAILED = "exitcode: 1 (execution failed)\nCode output: NameError: name 'load_participation_table' is not defined"
SIMULATE = ("The table is not reachable from here, so for demonstration I will use a sample dataset of athletes per "
            "country and find the least.\n```python\nimport pandas as pd\ndata = {'Country': ['USA', 'CAN', 'CHN'], "
            "'Athletes': [200, 150, 1]}\ndf = pd.DataFrame(data)\nprint(df.sort_values('Athletes').iloc[0])\n```")
OUTPUT = "exitcode: 0 (execution succeeded)\nCode output: Country CHN Athletes 1"
ANSWER = "The country with the least number of athletes at the 1928 Summer Olympics is China (CHN). TERMINATE"


def _run(tmp_path: Path, history: list[tuple[str, str]], task: str = TASK):
    entries = [{"name": name, "role": "user", "content": text} for name, text in history]
    data = {"question": task, "history": entries, "mistake_agent": "DataAnalysis_Expert", "mistake_step": "3",
            "ground_truth": "CUB", "is_correct": False}
    return whowhen_run_from_data(data, tmp_path / "Algorithm-Generated" / "4.json")


def _team(simulate: str = SIMULATE) -> list[tuple[str, str]]:
    return [("Olympics_Expert", PLAN), ("DataAnalysis_Expert", FETCH), ("Computer_terminal", FAILED),
            ("DataAnalysis_Expert", simulate), ("Computer_terminal", OUTPUT), ("Verification_Expert", ANSWER)]


def test_the_step_that_simulates_its_data_is_the_decisive_step(tmp_path):
    run = _run(tmp_path, _team())
    found = find_fabrication(run)
    assert found is not None and found.index == 3
    assert "for demonstration" in found.markers and "sample dataset" in found.markers
    d = causaltrace.diagnose_sync(run, "graph", store=False)
    assert d.decisive_step_index == 3 and d.agent == "DataAnalysis_Expert"
    assert any("makes up its data" in r for r in d.candidates[0].reasons)
    assert d.artifacts["fabrication"]["fabrication"]["index"] == 3


def test_ablated_the_signal_leaves_every_other_score_as_it_was(tmp_path):
    from causaltrace.attribution.methods.graph import DEFAULT_WEIGHTS

    run = _run(tmp_path, _team())
    with_it = causaltrace.diagnose_sync(run, "graph", store=False)
    without = causaltrace.diagnose_sync(run, "graph", store=False, ablate=["fabrication"])
    assert without.artifacts["fabrication"] == {"ablated": True}
    before = {c.index: c.score for c in without.candidates}
    delta = {c.index: round(c.score - before[c.index], 4) for c in with_it.candidates}
    assert delta == {i: (DEFAULT_WEIGHTS["fabrication"] if i == 3 else 0.0) for i in before}


def test_a_task_that_asks_for_a_simulation_is_not_fabrication(tmp_path):
    task = ("Simulate 1,000 rounds of the ping-pong ball game described below and report which ball number is "
            "ejected most often; give the number only.")
    simulate = "I will simulate the game 1,000 times.\n```python\nimport random\nprint(random.randint(1, 100))\n```"
    assert find_fabrication(_run(tmp_path, _team(simulate), task=task)) is None


def test_execution_output_and_pasted_pages_are_not_decisions(tmp_path):
    output = "exitcode: 0 (execution succeeded)\nCode output: simulated annealing finished; sample data written"
    page = ("I clicked 'Search'. Here is a screenshot of [Olympics 1928 - Search](https://www.bing.com/search?q=1928)"
            ". The viewport shows 30% of the webpage. Search box placeholder: 'Enter a country'.")
    run = _run(tmp_path, [("Olympics_Expert", PLAN), ("Computer_terminal", output), ("WebSurfer", page),
                          ("Verification_Expert", ANSWER)])
    assert find_fabrication(run) is None


def test_after_a_drifted_opening_the_invented_data_is_not_blamed(tmp_path):
    # the team debugs an unrelated exit code from its opening on: what it invents serves that other task
    opening = ("# Task description\nAnalyze and resolve the issue causing the code execution to fail with exit code "
               "1 and output 'unknown language unknown'.\n## Plan\n1. Review the provided code for syntax or logical "
               "errors.\n2. Debug it to pinpoint the cause of the failure.\n3. Verify the fix by running the code "
               "successfully and explain the corrected version.")
    simulate = "Simulating the failing script with dummy data to reproduce the error.\n```python\nprint('ok')\n```"
    run = _run(tmp_path, [("PythonDebugging_Expert", opening), ("PythonDebugging_Expert", simulate),
                          ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: ok"),
                          ("Verification_Expert", "The script now runs successfully. TERMINATE")])
    assert find_fabrication(run) is not None  # the stage still sees it
    d = causaltrace.diagnose_sync(run, "graph", store=False)
    assert d.decisive_step_index == 0 and d.category == "FM-2.3"
    assert not any("makes up its data" in r for c in d.candidates for r in c.reasons)


def test_knowledge_standing_in_for_a_lookup_is_fabrication_a_planners_educated_guess_is_not(tmp_path):
    recalled = ("The lookup keeps failing, so based on my training data the 1928 delegation sizes were roughly: "
                "USA 280, CAN 90, CHN 1.\n```python\nprint(min({'USA': 280, 'CAN': 90, 'CHN': 1}.items(), "
                "key=lambda kv: kv[1]))\n```")
    found = find_fabrication(_run(tmp_path, _team(recalled)))
    assert found is not None and found.index == 3 and found.markers == ("based on my training data",)
    facts_sheet = ("Here is the pre-survey.\n1. GIVEN OR VERIFIED FACTS: the 1928 Summer Olympics.\n2. FACTS TO LOOK "
                   "UP: the athletes per country.\n3. EDUCATED GUESSES: a small delegation is likely from Asia; a "
                   "rough estimate is a handful of athletes.")
    assert find_fabrication(_run(tmp_path, [("Orchestrator", facts_sheet), *_team()[1:3], *_team()[4:]])) is None
