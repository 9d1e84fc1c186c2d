"""Imported orchestrator logs (Magentic-One's shape, as Who&When's Hand-Crafted subset records it): what an
instruction loop and a unit substitution are when every instruction restates the task and every reply pastes a
page. Built through the real importer (``whowhen_run_from_data``); issue 20 items 3 and 4."""

from __future__ import annotations

from pathlib import Path

from causaltrace.attribution.stages.loops import detect_loops
from causaltrace.attribution.stages.provenance import build_provenance
from causaltrace.collector.whowhen import whowhen_run_from_data

TASK = ("Which waterfall trails in Yosemite National Park have more than 1,000 reviews on TripAdvisor and an "
        "average rating of 4.5 or higher?")


def _log(instructions: list[str], replies: list[str]) -> dict:
    history = [{"role": "human", "content": TASK}]
    for instruction, reply in zip(instructions, replies, strict=True):
        history.append({"role": "Orchestrator (-> WebSurfer)", "content": instruction})
        history.append({"role": "WebSurfer", "content": reply})
    return {"question": TASK, "history": history, "mistake_agent": "WebSurfer", "mistake_step": "2",
            "ground_truth": "Yosemite Falls"}


def _run(tmp_path: Path, instructions: list[str], replies: list[str]):
    return whowhen_run_from_data(_log(instructions, replies), tmp_path / "Hand-Crafted" / "1.json")


def test_instructions_that_share_only_the_tasks_words_are_not_a_re_issued_instruction(tmp_path):
    # two different steps of a plan, each restating the task: search, then open the listing page
    run = _run(tmp_path, [
        "Please search for waterfall trails in Yosemite National Park with more than 1,000 reviews on TripAdvisor "
        "and an average rating of 4.5 or higher.",
        "Open the TripAdvisor listing of waterfall trails in Yosemite National Park and read which have more than "
        "1,000 reviews and an average rating of 4.5 or higher.",
    ], ["I typed the query into the search box.", "I clicked 'Things to do'."])
    assert [lp for lp in detect_loops(run) if lp.kind == "instruction"] == []


def test_an_instruction_repeated_beyond_the_task_is_still_a_re_issued_instruction(tmp_path):
    ask = ("Please click the 'Mist Trail' result, scroll to its reviews section and report the review count "
           "shown beside the stars.")
    run = _run(tmp_path, [ask, "Again: " + ask], ["I clicked 'See more results'.", "I clicked 'Mist Trail'."])
    loops = [lp for lp in detect_loops(run) if lp.kind == "instruction"]
    assert [(lp.agent, lp.addressee, lp.members, lp.replies) for lp in loops] == [
        ("Orchestrator", "WebSurfer", [1, 3], [2, 4])]


def _hours_log(page: str) -> dict:
    task = "How many hours does the Mist Trail hike take? Answer in hours."
    return {"question": task, "mistake_agent": "WebSurfer", "mistake_step": "2", "ground_truth": "3",
            "history": [{"role": "human", "content": task},
                        {"role": "Orchestrator (-> WebSurfer)", "content": "Find the Mist Trail hike duration."},
                        {"role": "WebSurfer", "content": page},
                        {"role": "Orchestrator (-> WebSurfer)", "content": "Report the duration in minutes."}]}


def test_a_unit_written_after_a_number_on_a_page_is_a_quantity_not_a_substituted_unit(tmp_path):
    # the task asks for hours; the page the surfer pastes says "a 5 min read" — another measurement, not a swap
    run = whowhen_run_from_data(_hours_log("The page shows: Mist Trail guide, a 5 min read. The trail is steep."),
                                tmp_path / "Hand-Crafted" / "2.json")
    assert [c for c in build_provenance(run, anchor=3).changes_of(2) if c.kind == "unit"] == []
    # a unit WORD a step chose is still compared with what it was given: "minutes" where the task said hours
    run = whowhen_run_from_data(_hours_log("The page shows: Mist Trail guide. The hike takes 3 hours."),
                                tmp_path / "Hand-Crafted" / "4.json")
    assert [(c.before, c.after, c.how) for c in build_provenance(run, anchor=3).changes_of(3) if c.kind == "unit"
            ] == [("h", "min", "substitution")]


def _cut_off_log(end: list[dict]) -> dict:
    history = [{"role": "human", "content": TASK},
               {"role": "Orchestrator (thought)", "content": "Initial plan: search TripAdvisor for Yosemite waterfall "
                                                             "trails, then verify review counts and ratings."},
               {"role": "Orchestrator (-> WebSurfer)", "content": "Please search for waterfall trails in Yosemite "
                                                                 "National Park and note their review counts."},
               {"role": "WebSurfer", "content": "I typed 'Yosemite waterfall trails' into the search box. The page "
                                                "lists Mist Trail, Vernal Fall Footbridge and Lower Yosemite Fall."},
               {"role": "Orchestrator (-> WebSurfer)", "content": "Open the TripAdvisor page of Lower Yosemite Fall "
                                                                 "and read its review count and rating."},
               {"role": "WebSurfer", "content": "I clicked 'Images'. The page shows photos of Lower Yosemite Fall "
                                                "in winter with snow on the granite cliffs."}, *end]
    return {"question": TASK, "history": history, "mistake_agent": "WebSurfer", "mistake_step": "5",
            "ground_truth": "Yosemite Falls"}


def test_a_run_cut_off_on_an_executors_reply_blames_that_last_attempt(tmp_path):
    import asyncio

    from causaltrace.attribution.engine import diagnose

    run = whowhen_run_from_data(_cut_off_log([]), tmp_path / "Hand-Crafted" / "6.json")
    d = asyncio.run(diagnose(run, "graph", store=False))
    assert (d.decisive_step_index, d.agent) == (5, "WebSurfer")
    assert any("the run ended on this reply to the instruction of step 4" in r for r in d.candidates[0].reasons)
    # the same reply followed by the orchestrator's termination is no longer where the run stopped: no such signal
    ended = whowhen_run_from_data(_cut_off_log([{"role": "Orchestrator (termination condition)",
                                                 "content": "No agent selected: the request could not be satisfied "
                                                            "within the turn limit of this conversation."}]),
                                  tmp_path / "Hand-Crafted" / "8.json")
    d = asyncio.run(diagnose(ended, "graph", store=False))
    assert not any("the run ended on this reply" in r for c in d.candidates for r in c.reasons)


def test_a_re_issued_instruction_is_a_loop_finding_only_when_its_addressee_repeats_itself(tmp_path):
    # Magentic-One re-issues an instruction while the web surfer works through it: replies that show new pages are
    # progress (what the framework always does: no evidence); replies that repeat each other are a loop
    from causaltrace.attribution.findings.loops import detect_loops_without_progress

    ask = ("Please click the 'Mist Trail' result, scroll to its reviews section and report the review count "
           "shown beside the stars.")
    progressing = _run(tmp_path, [ask, "Again: " + ask, "Once more: " + ask],
                       ["I clicked 'See more results'. The page lists Mist Trail and Panorama Trail.",
                        "I clicked 'Mist Trail'. Its page opened with a photo gallery.",
                        "I scrolled to the reviews section: 2,841 reviews."])
    assert [lp.replies for lp in detect_loops(progressing) if lp.kind == "instruction"] == [[2, 4, 6]]
    assert detect_loops_without_progress(progressing, detect_loops(progressing)) == []
    stuck = _run(tmp_path, [ask, "Again: " + ask, "Once more: " + ask],
                 ["I clicked 'See more results'. The page lists Mist Trail and Panorama Trail.",
                  "I clicked 'See more results'. The page lists Mist Trail and Panorama Trail.",
                  "I scrolled to the reviews section: 2,841 reviews."])
    found = detect_loops_without_progress(stuck, detect_loops(stuck))
    assert ("loop_no_progress", 2) in [(f.family, f.index) for f in found]
    assert any("re-issued" in f.claim for f in found)
