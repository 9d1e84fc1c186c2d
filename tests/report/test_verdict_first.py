"""The report answers first (issue 33 item 7): its first screen holds the task, the run's verdict with its source,
evidence and confidence, and the repair diff; the tried replays fold; an uncertain verdict is never called decisive.

Structure is read from the HTML; the first screen is measured in a real headless Chromium at 100 % (a 1440 × 900 and
a 1366 × 768 window), with a screenshot kept in the test's directory.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from causaltrace.collector.store import Store
from causaltrace.report import render_html, write_report
from causaltrace.schema import Finding, FindingEvidence
from conftest import require
from test_report import REPLAYS, Elements, cli, sample_diagnosis, sample_pair, sample_run, sid

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _report_browser import Chromium, chromium_available, in_viewport  # noqa: E402


def finding(run) -> Finding:
    return Finding(family="value_changed", step_id=sid(run, 6), index=6, category="FM-2.6",
                   claim="#6 passes stop 10 where the task asks for the numbers up to 10 (stop 11)",
                   evidence=(FindingEvidence(index=-1, value="1 to 10", role="source"),
                             FindingEvidence(step_id=sid(run, 6), index=6, value=10, role="changed")))


def correction(run, **extra):
    return sample_diagnosis(run, basis="correction", findings=(finding(run),), **extra)


def many_replays(run, n: int = 30) -> list[dict]:
    """A long search: ``n`` replays tried, the last one flipped."""
    out = [{**REPLAYS[0], "step_id": sid(run, 6), "description": f"stop 10 → {k}"} for k in range(n - 1)]
    return [*out, {**REPLAYS[1], "step_id": sid(run, 6)}]


def verdict_card(html: str) -> str:
    return re.search(r'<section id="verdict".*?</section>', html, re.S).group(0)


def test_the_verdict_comes_first_with_its_source_evidence_confidence_and_repair():
    run = sample_run()
    html = render_html(run, diagnosis=correction(run), replays=many_replays(run), pairs=[sample_pair(run)])
    order = [html.index(f'<section id="{name}"') for name in ("verdict", "graph", "diagnosis", "repair", "steps")]
    assert order == sorted(order) and html.index("<header>") < order[0]
    card = verdict_card(html)
    assert "decisive error: #6 tool_call by solver" in card
    assert "replay-verified correction · method graph · model test-model · verified by replay · basis correction" in card
    assert '<div class="conf">0.90</div>' in card
    assert "value_changed" in card and "where the task asks for the numbers up to 10" in card
    assert re.search(r'ev-source"><b>source</b> the task <code>&#x27;1 to 10&#x27;</code>', card), card
    assert re.search(r'ev-changed"><b>changed</b> <a href="#step-6">#6</a> <code>10</code>', card)
    assert "<del>10</del>" in card and "<ins>11</ins>" in card  # the repair diff, on the first screen
    # the 30 replays tried fold under one summary line
    tried = re.search(r'<details class="tried">.*?</details>\s*</section>', html, re.S).group(0)
    assert "replays tried: 30</b> (1 flipped the run)" in tried and tried.count('<tr class="flip">') == 1


def test_an_uncertain_or_alternative_verdict_is_never_called_decisive():
    run = sample_run()
    none = sample_diagnosis(run, basis="none").model_copy(update={"verified_by": "heuristic", "confidence": 0.2})
    card = verdict_card(render_html(run, diagnosis=none))
    assert "uncertain: no step shows evidence of an error" in card and "decisive" not in card.lower()
    assert 'class="verdict uncertain"' in card
    assert [m for m in re.findall(r'<li><a href="#step-(\d+)">', card)] == ["6", "3", "13"]  # the top 3
    assert "no finding: nothing the run shows singles out a step" in card
    # nor anywhere else on the page: its step is the top candidate
    page = render_html(run, diagnosis=none).split("<script>")[0]
    assert "go to the top candidate step #6" in page and "★ the top candidate step" in page
    assert not re.search(r">\s*decisive( step)?\s*<", page) and "the decisive step" not in page
    alternative = sample_diagnosis(run, basis="alternative")
    card = verdict_card(render_html(run, diagnosis=alternative))
    assert "uncertain: the run succeeds if step #6 does something else; nothing shows it was wrong" in card
    assert "replay-verified alternative" in card and "decisive error" not in card
    # no diagnosis: the card says how to get one
    assert "no diagnosis yet" in verdict_card(render_html(run))


def test_cli_report_shows_the_runs_verdict_not_its_newest_diagnosis(capsys, tmp_path):
    run = sample_run()
    with Store() as db:
        db.save_run(run)
        db.save_diagnosis(correction(run))
        newer = sample_diagnosis(run, basis="finding").model_copy(update={
            "verified_by": "heuristic", "decisive_step_id": sid(run, 3), "decisive_step_index": 3, "agent": "planner"})
        db.save_diagnosis(newer)
        db.save_repair_pair(sample_pair(run))
    code, _, err = cli(capsys, "report", run.run_id, "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    card = verdict_card((tmp_path / "r.html").read_text())
    assert "decisive error: #6 tool_call by solver" in card and "replay-verified correction" in card


@pytest.fixture(scope="module")
def browser():
    require(chromium_available(), "chromium is not installed (apt-get install chromium)")
    with Chromium(timeout=120) as driver:
        yield driver


@pytest.mark.parametrize("size", [(1440, 900), (1366, 768)])
def test_the_first_screen_holds_task_verdict_evidence_confidence_and_repair(tmp_path, browser, size):
    run = sample_run()
    path = write_report(run, tmp_path / "report.html", diagnosis=correction(run), replays=many_replays(run),
                        pairs=[sample_pair(run)])
    width, height = size
    browser.open(path.as_uri(), width=width, height=height)
    assert browser.evaluate("window.scrollY") == 0
    for selector in ("header .block", "#verdict .headline", "#verdict .source", "#verdict .conf", ".findings",
                     "#verdict .first-diff ins"):
        assert in_viewport(browser.rect(selector)), selector
    # the tried replays are folded: none of their rows is drawn
    assert browser.evaluate("document.querySelector('details.tried').open") is False
    assert browser.evaluate("Array.from(document.querySelectorAll('table.replays tr'))"
                            ".filter(r => r.checkVisibility()).length") == 0
    # the 16-step graph fits the page on load
    fits = browser.evaluate("[document.querySelector('svg.graph').getBoundingClientRect().width, "
                            "document.querySelector('.graph-scroll').clientWidth]")
    assert fits[0] <= fits[1] + 1, fits
    shot = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
    import base64

    (tmp_path / f"first-screen-{width}x{height}.png").write_bytes(base64.b64decode(shot))


def test_the_fleet_pages_run_ids_link_to_their_reports():
    from causaltrace.collector.fleet_stats import fleet_stats
    from causaltrace.report.fleet import render_fleet_html

    run = sample_run()
    with Store() as db:
        db.save_run(run)
        db.save_diagnosis(correction(run))
        stats = fleet_stats(db)
    html = render_fleet_html(stats)
    links = [a for t, a in Elements(html).tags if t == "a" and a.get("href", "").endswith(".html")]
    assert links and all(a["href"] == f"{run.run_id}.html" for a in links)


def test_report_fleet_writes_the_linked_reports_beside_the_page(capsys, tmp_path):
    from causaltrace.report.fleet import report_file_name

    run = sample_run()
    with Store() as db:
        db.save_run(run)
        db.save_diagnosis(correction(run))
    code, _, err = cli(capsys, "report", "--fleet", "--html", str(tmp_path / "out" / "fleet.html"))
    assert code == 0 and "and 1 run report beside it" in err, err
    page = (tmp_path / "out" / "fleet.html").read_text()
    hrefs = {a["href"] for t, a in Elements(page).tags if t == "a"}
    assert hrefs == {report_file_name(run.run_id)}
    linked = (tmp_path / "out" / report_file_name(run.run_id)).read_text()
    assert "decisive error: #6 tool_call by solver" in verdict_card(linked)
    assert "replay-verified correction · method graph" in page  # the example's verdict and its source
    assert report_file_name("a/../b c") == "a_.._b_c.html"
