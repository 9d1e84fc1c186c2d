"""The HTML report: structure of the step-graph picture, escaping, offline-ness, the CLI, and a real browser render."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

import causaltrace
from causaltrace.cli import main
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.store import Store
from causaltrace.report import render_html, write_report
from causaltrace.report._diff import render_diff, render_pair_diff
from causaltrace.report._graph import GraphLayout
from causaltrace.schema import (
    Candidate,
    Cost,
    Dependency,
    Diagnosis,
    EvidenceItem,
    Intervention,
    Outcome,
    RepairPair,
    ReplayResult,
    Run,
    Step,
)
from conftest import require

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample_run.otlp.jsonl"
PAYLOAD = '<script>alert("pwned")</script>'
ESCAPED = "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;"


# ----------------------------------------------------------------------------------------------------- helpers


class Elements(HTMLParser):
    """Every start tag with its attributes (attribute values come back unescaped)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def with_class(self, name: str) -> list[dict[str, str]]:
        return [a for _, a in self.tags if name in a.get("class", "").split()]

    def nodes(self, mark: str) -> list[int]:
        """The indexes of the step nodes that carry class ``mark``."""
        return sorted(int(a["data-step-index"]) for a in self.with_class("step-node") if mark in a["class"].split())


def sample_run(*, hostile: bool = False) -> Run:
    run = load_otlp_json(SAMPLE)[0]
    if not hostile:
        return run
    steps = list(run.steps)
    steps[6] = steps[6].model_copy(update={"content": f"add_range(1, 10) {PAYLOAD}", "tool_name": f"t{PAYLOAD}"})
    steps[13] = steps[13].model_copy(update={"agent": f"rev{PAYLOAD}"})
    return run.model_copy(update={"steps": tuple(steps), "task": f"sum {PAYLOAD}"})


def sid(run: Run, index: int) -> str:
    return run.step_at(index).step_id


def sample_diagnosis(run: Run, **extra) -> Diagnosis:
    return Diagnosis(
        run_id=run.run_id,
        method="graph",
        model="test-model",
        decisive_step_id=sid(run, 6),
        decisive_step_index=6,
        agent="solver",
        category="FM-2.6",
        explanation=f"stop=10 is exclusive, so 10 is never added {PAYLOAD}",
        evidence=(
            EvidenceItem(step_id=sid(run, 6), index=6, role="introduced", note="add_range(1, 10)"),
            EvidenceItem(step_id=sid(run, 8), index=8, role="carried", note="45"),
            EvidenceItem(step_id=sid(run, 15), index=15, role="exposed", note="the final answer"),
        ),
        candidates=(
            Candidate(step_id=sid(run, 6), index=6, agent="solver", score=0.8, reasons=("off by one",)),
            Candidate(step_id=sid(run, 3), index=3, agent="planner", score=0.4, reasons=(f"plan {PAYLOAD}",)),
            Candidate(step_id=sid(run, 13), index=13, agent="reviewer", score=0.1),
        ),
        verified_by="replay",
        confidence=0.9,
        cost=Cost(llm_calls=2, calls_by_stage={"judge": 2}, input_tokens=100, output_tokens=20, seconds=1.5),
        **extra,
    )


def sample_pair(run: Run) -> RepairPair:
    return RepairPair(
        pair_id="pair-1", run_id=run.run_id, step_id=sid(run, 6), step_index=6, step_kind="tool_call",
        agent="solver", prompt=[{"role": "user", "content": PAYLOAD}], chosen={"start": 1, "stop": 11},
        rejected={"start": 1, "stop": 10}, replays_run=3, replays_succeeded=3, replay_run_id="replay-2",
        minimality=0.95,
    )


REPLAYS = [
    {"step_id": None, "description": "stop 10 → 9", "replacement": {"start": 1, "stop": 9}, "flipped": False,
     "outcome": "failure", "replay_run_id": "replay-1"},
    {"step_id": None, "description": f"stop 10 → 11 {PAYLOAD}", "replacement": {"start": 1, "stop": 11},
     "flipped": True, "outcome": {"status": "success"}, "replay_run_id": "replay-2"},
]


def replays_for(run: Run) -> list[dict]:
    return [{**r, "step_id": sid(run, 6)} for r in REPLAYS]


def assert_offline(html: str) -> None:
    assert not re.search(r"https?://", html), re.search(r".{60}https?://.{60}", html)
    assert not re.search(r"\bsrc\s*=", html) and "@import" not in html and "<link" not in html
    assert all(m == "url(#" for m in re.findall(r"url\(.?", html))


# ------------------------------------------------------------------------------------------------ the picture


def test_graph_has_one_node_per_step_and_one_edge_per_dependency():
    run = sample_run()
    html = render_html(run, diagnosis=sample_diagnosis(run), pairs=[sample_pair(run)])
    doc = Elements(html)
    nodes = doc.with_class("step-node")
    assert len(nodes) == len(run.steps) == 16
    assert sorted(int(n["data-step-index"]) for n in nodes) == list(range(16))
    assert all(n["id"] == f"node-{n['data-step-index']}" for n in nodes)
    edges = doc.with_class("dep-edge")
    assert len(edges) == sum(len(s.depends_on) for s in run.steps) == 19
    assert sorted((int(e["data-from"]), int(e["data-to"]), e["data-kind"]) for e in edges) == sorted(
        (run.step(d.step_id).index, s.index, d.kind) for s in run.steps for d in s.depends_on
    )
    # one lane per agent, labelled, in order of first appearance
    lanes = [a.get("title") for a in doc.with_class("lane-name")]
    assert lanes == ["user", "planner", "solver", "reviewer"]
    # the SVG is inline, sized, and every node sits inside it
    (svg,) = [a for t, a in doc.tags if t == "svg" and "graph" in a.get("class", "")]
    assert float(svg["width"]) > 600 and float(svg["height"]) == 4 * 132


def test_decisive_step_evidence_path_candidates_and_error_are_marked():
    run = sample_run()
    html = render_html(run, diagnosis=sample_diagnosis(run))
    doc = Elements(html)
    assert doc.nodes("decisive") == [6]
    assert "halo" in html and "★ the decisive step" in html
    assert doc.nodes("evidence") == [6, 8, 15]
    assert doc.nodes("candidate") == [3, 6, 13]
    assert doc.nodes("status-error") == [9]
    # the path 6 → 8 → (10 → 11) → 15 runs along recorded dependencies, drawn thick in the highlight colour
    hot = sorted((int(e["data-from"]), int(e["data-to"])) for e in doc.with_class("on-path"))
    assert hot == [(6, 8), (8, 10), (10, 11), (11, 15)]
    assert all(e["stroke"] == "#f76707" and float(e["stroke-width"]) > 3 for e in doc.with_class("on-path"))
    # candidate rank badges: 1 on the decisive step
    assert re.search(r'id="node-6"[^>]*>.*?class="rank".*?>1</text>', html, re.S)
    # the diagnosis section
    for text in ("FM-2.6", "Action-Reasoning Mismatch", "introduced", "carried", "exposed", "off by one",
                 "0.800", "verified by", "2 LLM call(s) (judge: 2)", "test-model"):
        assert text in html, text


def test_untrusted_content_is_escaped_and_nothing_is_loaded_from_the_network():
    run = sample_run(hostile=True)
    d = sample_diagnosis(run, artifacts={"replays": replays_for(run)})
    html = render_html(run, diagnosis=d, pairs=[sample_pair(run)])
    assert PAYLOAD not in html and "<script>alert" not in html
    assert html.count("<script") == 1  # ours, the small vanilla script
    assert ESCAPED in html  # content, task, explanation, reasons, replay description, prompt
    assert "rev&lt;script&gt;" in html  # an agent name as lane label
    doc = Elements(html)
    assert [t for t, _ in doc.tags].count("script") == 1
    assert_offline(html)


def test_replays_and_the_repair_diff():
    run = sample_run()
    d = sample_diagnosis(run, artifacts={"replays": replays_for(run)})
    html = render_html(run, diagnosis=d, pairs=[sample_pair(run)])
    assert "stop 10 → 9" in html and "no flip · failure" in html
    assert "flipped → success" in html and "replay-2" in html
    # the repair pair: a line diff with word marks, original (rejected) left, corrected (chosen) right
    assert "<del>10</del>" in html and "<ins>11</ins>" in html
    assert "3/3 replays succeeded" in html and "minimality 0.950" in html
    # explicit ReplayResults are rendered too (and take precedence over the artifact)
    result = ReplayResult(
        original_run_id=run.run_id, outcome=Outcome(status="success"), flipped=True,
        intervention=Intervention(step_id=sid(run, 6), replacement={"start": 1, "stop": 11}, description="via api"),
    )
    html = render_html(run, diagnosis=d, replays=[result])
    assert "via api" in html and "stop 10 → 9" not in html
    # without a pair the first flipped replay's change is shown as the diff
    assert "No repair pair stored" in html and "<ins>11</ins>" in html


def test_diff_is_line_and_word_level_and_escaped():
    table = render_diff("keep\nthe <b>old</b> value\nsame", "keep\nthe <b>new</b> value\nsame\nadded")
    assert "<del>old</del>" in table and "<ins>new</ins>" in table
    assert "&lt;b&gt;" in table and "<b>" not in table
    assert 'class="add"' in table and "−1 / +2 line(s)" in table
    assert "no difference" in render_diff({"a": 1}, {"a": 1})


def test_run_without_diagnosis_still_has_graph_and_timeline():
    run = sample_run()
    html = render_html(run)
    doc = Elements(html)
    assert len(doc.with_class("step-node")) == 16 and len(doc.with_class("tl-bar")) == 16
    assert f"no diagnosis yet: run <code>causaltrace diagnose {run.run_id}</code>" in html
    assert not doc.nodes("decisive") and not doc.with_class("on-path")
    assert "No replays were tried" in html and "No repair yet" in html


def test_rendering_is_deterministic():
    run = sample_run()
    d = sample_diagnosis(run, artifacts={"replays": replays_for(run)})
    assert f"<footer>causaltrace {causaltrace.__version__} · run" in render_html(run)
    assert render_html(run, diagnosis=d, pairs=[sample_pair(run)]) == render_html(
        run, diagnosis=d, pairs=[sample_pair(run)]
    )


def big_run(n: int, *, timed: bool = True) -> Run:
    """A synthetic group chat: a selector picks one of 4 agents per turn; tools, results and messages."""
    rid = "big-run"
    agents = ["orchestrator", "surfer", "coder", "terminal", "verifier"]
    steps: list[Step] = []
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def add(kind: str, agent: str, deps: list[tuple[int, str]], **kw) -> int:
        i = len(steps)
        times = {"started_at": t0 + timedelta(seconds=i), "ended_at": t0 + timedelta(seconds=i + 0.8)} if timed else {}
        steps.append(Step(step_id=f"{rid}/{i}", run_id=rid, index=i, kind=kind, agent=agent,
                          depends_on=tuple(Dependency(step_id=f"{rid}/{d}", kind=k) for d, k in deps), **times, **kw))
        return i

    task = last = add("task", "user", [], content="task")
    turn = 0
    while len(steps) < n - 6:
        agent = agents[1 + turn % 4]
        sel = add("speaker_selection", "orchestrator", [(last, "saw")], content=agent)
        llm = add("llm_response", agent, [(last, "saw"), (task, "saw"), (sel, "selected_by")], content="…")
        call = add("tool_call", agent, [(llm, "produced_by")], tool_name="search")
        res = add("tool_response", agent, [(call, "tool_result_of")], tool_name="search", content="r")
        last = add("message", agent, [(res, "observed"), (llm, "continues")], content="m")
        turn += 1
    add("final_answer", "orchestrator", [(last, "answer_of")], content="42")
    return Run(run_id=rid, framework="autogen", agents=tuple(agents), steps=tuple(steps),
               outcome=Outcome(status="failure"))


@pytest.mark.parametrize("timed", [True, False])
def test_a_long_run_stays_a_readable_picture(timed):
    run = big_run(150, timed=timed)
    first_call = next(s for s in run.steps if s.kind == "tool_call")
    d = Diagnosis(run_id=run.run_id, method="t", decisive_step_id=first_call.step_id,
                  decisive_step_index=first_call.index, evidence=(
                      EvidenceItem(step_id=first_call.step_id, index=first_call.index, role="introduced"),
                      EvidenceItem(step_id=run.steps[-1].step_id, index=run.steps[-1].index, role="exposed")))
    html = render_html(run, diagnosis=d)
    doc = Elements(html)
    nodes = doc.with_class("step-node")
    assert len(nodes) == len(run.steps)
    assert len(doc.with_class("dep-edge")) == sum(len(s.depends_on) for s in run.steps)
    # columns of at least 60 px (horizontal scroll, not squeezed) and no two nodes in one place
    (svg,) = [a for t, a in doc.tags if t == "svg" and "graph" in a.get("class", "")]
    assert float(svg["width"]) >= 60 * len(run.steps)
    layout = GraphLayout.of(run)
    centres = {layout.xy(s.step_id) for s in run.steps}
    assert len(centres) == len(run.steps)
    assert all(0 < x < float(svg["width"]) and 0 < y < float(svg["height"]) for x, y in centres)
    assert len(layout.lanes) == 6 and layout.lanes[0] == "user"
    # the long "saw the task" edges become labelled stubs instead of a web of lines across the picture
    assert 'class="stub-label"' in html
    # the propagation path from the first tool call to the final answer is drawn along dependencies
    assert doc.with_class("on-path")
    assert ("step index → (no times)" in html) is (not timed)
    assert_offline(html)


# --------------------------------------------------------------------------------------------------------- CLI


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_report_with_and_without_a_diagnosis(capsys, tmp_path):
    code, out, _ = cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    run_id = out.strip()
    target = tmp_path / "out" / "report.html"
    code, out, err = cli(capsys, "report", run_id[:8], "--html", str(target))
    assert code == 0 and out == ""
    assert f"no diagnosis yet: run causaltrace diagnose {run_id}" in err and f"wrote {target}" in err
    html = target.read_text(encoding="utf-8")
    assert len(Elements(html).with_class("step-node")) == 16 and "no diagnosis yet" in html

    run = sample_run()
    with Store() as store:
        store.save_diagnosis(sample_diagnosis(run).model_copy(update={"explanation": "an older one"}))
        store.save_diagnosis(sample_diagnosis(run, artifacts={"replays": replays_for(run)}))
        store.save_repair_pair(sample_pair(run))
    code, out, err = cli(capsys, "report", run_id, "--html", str(target))
    assert code == 0 and "no diagnosis yet" not in err
    html = target.read_text(encoding="utf-8")
    assert "stop=10 is exclusive" in html and "an older one" not in html  # the newest diagnosis
    assert Elements(html).nodes("decisive") == [6]
    assert "flipped → success" in html and "<ins>11</ins>" in html


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "does-not-exist", "--html", "x.html"], "no run with id or prefix"),
    ],
)
def test_cli_report_user_errors_are_one_line_exit_2(capsys, argv, message):
    code, _, err = cli(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_report_unwritable_target_is_a_user_error(capsys, tmp_path):
    _, out, _ = cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli(capsys, "report", out.strip(), "--html", str(blocker / "r.html"))
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- real browser


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120,
    )


def test_headless_chromium_renders_every_step(tmp_path):
    require(shutil.which("chromium") is not None, "chromium is not installed (apt-get install chromium)")
    run = sample_run(hostile=True)
    d = sample_diagnosis(run, artifacts={"replays": replays_for(run)})
    path = write_report(run, tmp_path / "report.html", diagnosis=d, pairs=[sample_pair(run)])
    proc = chromium(tmp_path, "--dump-dom", path.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Elements(proc.stdout)
    assert len(dom.with_class("step-node")) == len(run.steps) == 16
    assert len(dom.with_class("dep-edge")) == 19
    (body,) = [a for t, a in dom.tags if t == "body"]
    assert body["data-rendered-steps"] == "16"  # set by the page's script: it ran and saw 16 nodes
    assert "(16 step nodes drawn)" in proc.stdout
    assert "<script>alert" not in proc.stdout  # the payload stayed text
    shot = tmp_path / "report.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1600,1000", path.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


# ------------------------------------------------------------------------------------------ at real sizes


sys.path.insert(0, str(ROOT / "benchmarks"))
from _report_browser import Chromium, chromium_available, in_viewport, long_run, long_run_diagnosis  # noqa: E402


def test_long_run_candidates_fold_below_five_rows_and_code_shows_as_code():
    run = long_run(200)
    d = long_run_diagnosis(run, candidates=20)
    html = render_html(run, diagnosis=d)
    tables = re.findall(r'<table class="grid candidates">.*?</table>', html, re.S)
    assert [t.count("<tr") for t in tables] == [1 + 5, 15]  # header + the first five; the rest folded
    assert '<details class="more-candidates"><summary>show the other 15 candidates (of 20)' in html
    # the decisive card shows the code as a <pre> block, newlines and indentation kept
    card = re.search(r'<div class="fact decisive-fact">.*?</div></div>', html, re.S).group(0)
    code = run.step(d.decisive_step_id).inputs["code"]
    assert "\n    print(x)" in code and f'<pre class="code">{escape(code)}</pre>' in card
    # a short list has no fold
    few = d.model_copy(update={"candidates": d.candidates[:5]})
    assert not Elements(render_html(run, diagnosis=few)).with_class("more-candidates")


def test_sub_agent_turns_fold_in_the_graph_and_the_table():
    run = long_run(200)
    d = long_run_diagnosis(run)
    doc = Elements(render_html(run, diagnosis=d))
    turns = [s for s in run.steps if s.kind == "agent_turn"]
    decisive = run.step(d.decisive_step_id)
    # every member of a turn carries it, in the graph and in the table
    members = [n for n in doc.with_class("step-node") if n.get("data-turns")]
    assert len(members) == 4 * len(turns)
    assert next(n for n in members if n["data-step-index"] == str(decisive.index))["data-turns"] == str(
        run.step(decisive.parent_step_id).index)
    graph_buttons = doc.with_class("fold-btn")
    table_buttons = doc.with_class("fold")
    assert sorted(int(b["data-fold"]) for b in graph_buttons) == [t.index for t in turns]
    assert all(b["data-size"] == "4" for b in graph_buttons + table_buttons)
    # a long run folds its sub-agent turns in the table on load, all but the one holding the decisive step
    folded = sorted(int(b["data-fold"]) for b in table_buttons if "data-default-fold" in b)
    assert folded == [t.index for t in turns if t.step_id != decisive.parent_step_id]
    # a short run folds nothing by default
    short_doc = Elements(render_html(long_run(40), diagnosis=long_run_diagnosis(long_run(40))))
    assert short_doc.with_class("fold") and not [b for b in short_doc.with_class("fold") if "data-default-fold" in b]


def test_minimap_and_zoom_only_where_the_graph_scrolls():
    run = long_run(200)
    d = long_run_diagnosis(run)
    doc = Elements(render_html(run, diagnosis=d))
    (mm,) = [a for t, a in doc.tags if t == "svg" and "minimap" in a.get("class", "")]
    layout = GraphLayout.of(run)
    assert mm["viewbox"] == f"0 0 {layout.width:g} {layout.height:g}" and mm["preserveaspectratio"] == "none"
    (line,) = doc.with_class("mm-decisive")
    assert float(line["x1"]) == layout.xy(d.decisive_step_id)[0]
    assert [a["data-zoom"] for _, a in doc.tags if "data-zoom" in a] == ["out", "in", "fit", "1"]
    assert doc.with_class("to-decisive")
    small = Elements(render_html(sample_run(), diagnosis=sample_diagnosis(sample_run())))
    assert not small.with_class("minimap") and not small.with_class("mm-view")


def test_a_thousand_step_run_renders_whole():
    run = long_run(1000)
    d = long_run_diagnosis(run)
    html = render_html(run, diagnosis=d)
    doc = Elements(html)
    assert len(doc.with_class("step-node")) == len(run.steps) >= 1000
    assert len(doc.with_class("dep-edge")) == sum(len(s.depends_on) for s in run.steps)
    assert doc.nodes("decisive") == [d.decisive_step_index]
    assert_offline(html)


@pytest.fixture(scope="module")
def browser():
    require(chromium_available(), "chromium is not installed (apt-get install chromium)")
    with Chromium(timeout=120) as driver:
        yield driver


@pytest.mark.parametrize("n", [200, 1000])
def test_the_graph_opens_fitted_on_the_decisive_step_without_scrolling_the_window(tmp_path, browser, n):
    run = long_run(n)
    d = long_run_diagnosis(run)
    path = write_report(run, tmp_path / "report.html", diagnosis=d)
    browser.open(path.as_uri(), width=1600, height=1000)
    assert browser.evaluate("document.querySelectorAll('svg.graph .step-node').length") == len(run.steps)
    # the window stays on the verdict (issue 33 item 7: the report answers first, then shows)
    assert browser.evaluate("window.scrollY") == 0
    assert in_viewport(browser.rect("#verdict"))
    # the graph is fitted to the window (no smaller than 30 %) and scrolled sideways to the decisive step
    layout = GraphLayout.of(run)
    client = browser.evaluate("document.querySelector('.graph-scroll').clientWidth")
    zoom = max(client / layout.width, 0.3)
    assert browser.evaluate("parseFloat(document.querySelector('svg.graph').getAttribute('width'))") == (
        pytest.approx(layout.width * zoom, abs=1))
    assert browser.evaluate("document.querySelector('.zoom-level').textContent") == f"{round(zoom * 100)}%"
    node = browser.rect(f"#node-{d.decisive_step_index}")
    strip = browser.rect(".graph-scroll")
    assert strip["left"] <= node["left"] and node["right"] <= strip["right"], (node, strip)
    assert browser.evaluate("document.querySelector('.graph-scroll').scrollLeft") > 0
    assert "arrived" in browser.evaluate(f"document.getElementById('node-{d.decisive_step_index}').className.baseVal")
    # the timeline opened on the decisive step's bar too
    bar = browser.rect(f'.tl-scroll .tl-bar[data-step-index="{d.decisive_step_index}"] rect')
    strip = browser.rect(".tl-scroll")
    assert strip["left"] <= (bar["left"] + bar["right"]) / 2 <= strip["right"], (bar, strip)
    # the minimap's window sits over the decisive step's line
    view = browser.rect("svg.minimap .mm-view")
    line = browser.rect("svg.minimap .mm-decisive")
    assert view["left"] <= (line["left"] + line["right"]) / 2 <= view["right"]
    # the button still brings the decisive step into the window
    browser.evaluate("document.querySelector('.to-decisive').click()")
    browser.call("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 900))", "awaitPromise": True})
    assert in_viewport(browser.rect(f"#node-{d.decisive_step_index}"))


def test_folds_and_zoom_work_in_the_browser(tmp_path, browser):
    run = long_run(200)
    d = long_run_diagnosis(run)
    path = write_report(run, tmp_path / "report.html", diagnosis=d)
    browser.open(path.as_uri())
    browser.evaluate("document.querySelector('[data-zoom=\"1\"]').click()")  # it opened fitted; measure at 100 %
    visible = "Array.from(document.querySelectorAll('%s')).filter(el => el.getClientRects().length > 0).length"
    rows = len(run.steps)
    turns = [s for s in run.steps if s.kind == "agent_turn"]
    # the table starts with every sub-agent turn but the decisive one folded (4 rows each)
    assert browser.evaluate(visible % "table.steps tbody tr") == rows - 4 * (len(turns) - 1)
    # folding a turn in the graph hides its 4 member nodes and the edges touching them; unfolding shows them
    first = turns[0].index
    before = browser.evaluate(visible % "svg.graph .dep-edge")
    width = "document.querySelector('svg.graph').getBoundingClientRect().width"
    # where the manager's step right after the turn's 4 members sits in the graph
    x_of = (f"document.getElementById('node-{first + 5}').getBoundingClientRect().left - "
            "document.querySelector('svg.graph').getBoundingClientRect().left")
    w0, x0 = browser.evaluate(width), browser.evaluate(x_of)
    edge = f"document.querySelector('.dep-edge[data-from=\"{first + 5}\"]').getAttribute('d')"
    d0 = browser.evaluate(edge)
    click = (f"document.querySelector('svg.graph .fold-btn[data-fold=\"{first}\"]')"
             ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    browser.evaluate(click)
    assert browser.evaluate(visible % "svg.graph .step-node") == len(run.steps) - 4
    assert browser.evaluate(visible % "svg.graph .dep-edge") < before
    assert "turn-folded" in browser.evaluate(f"document.getElementById('node-{first}').className.baseVal")
    # the folded columns are given back: the graph is 4 columns narrower, what follows moved left, edges redrawn
    col_w = GraphLayout.of(run).col_w
    assert browser.evaluate(width) == pytest.approx(w0 - 4 * col_w, abs=1)
    assert browser.evaluate(x_of) == pytest.approx(x0 - 4 * col_w, abs=1)
    assert browser.evaluate(edge) != d0
    browser.evaluate(click)
    assert browser.evaluate(visible % "svg.graph .step-node") == len(run.steps)
    assert browser.evaluate(width) == pytest.approx(w0, abs=1) and browser.evaluate(edge) == d0
    # clicking a node whose row is folded unfolds the row's turn and shows it
    member = run.step(turns[1].step_id).index + 1
    browser.evaluate(f"document.getElementById('node-{member}').dispatchEvent(new MouseEvent('click'))")
    assert browser.evaluate(f"document.getElementById('step-{member}').getClientRects().length") == 1
    # "fit" puts the whole graph in the window; "100%" restores it
    browser.evaluate("document.querySelector('[data-zoom=\"fit\"]').click()")
    fit = browser.evaluate("[document.querySelector('svg.graph').getBoundingClientRect().width, "
                           "document.querySelector('.graph-scroll').clientWidth]")
    assert fit[0] <= fit[1] + 1
    browser.evaluate("document.querySelector('[data-zoom=\"1\"]').click()")
    assert browser.evaluate("document.querySelector('svg.graph').getBoundingClientRect().width") == pytest.approx(
        GraphLayout.of(run).width, abs=1)


# ---------------------------------------------------------------------------------------- the pair's tool calls


def turn(content: str, *calls: tuple[str, str, object]) -> dict:
    """An assistant turn as repair pairs carry it: tool calls with id, type and function {name, arguments}."""
    out: dict = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                             for cid, name, args in calls]
    return out


def test_a_corrected_handoff_shows_its_renamed_transfer_call():
    text = "\n".join(f"line {i} of the agent's reasoning" for i in range(20))
    rejected = turn(text, ("call_7", "transfer_to_sales", {}))
    chosen = turn(text, ("call_7", "transfer_to_refunds", {}))
    table = render_pair_diff(rejected, chosen)
    assert ("<li>tool call 1: <code><del>transfer_to_sales</del></code> → <code><ins>transfer_to_refunds</ins>"
            "</code> (same arguments)</li><li>text unchanged</li>") in table
    # the line diff marks the name on the call's header line, next to 20 unchanged lines folded around it
    row = re.search(r'<tr class="chg">.*?</tr>', table).group(0)
    assert '<td class="old">▸ tool call 1: <del>transfer_to_sales</del> · id call_7</td>' in row
    assert '<td class="new">▸ tool call 1: <ins>transfer_to_refunds</ins> · id call_7</td>' in row
    assert "−1 / +1 line(s)" in table and "unchanged lines ⋯" in table


def test_corrected_arguments_are_listed_key_by_key_from_either_form():
    for args_of in (lambda a: a, json.dumps):  # arguments as an object (TRL) or a JSON string (OpenAI)
        rejected = turn("", ("c1", "lookup", args_of({"item": "tea"})), ("c2", "multiply", args_of({"a": 3, "b": 12.05})))
        chosen = turn("", ("c1", "lookup", args_of({"item": "tea"})), ("c2", "multiply", args_of({"a": 3, "b": 12.5})))
        table = render_pair_diff(rejected, chosen)
        assert "<li>tool call 1 <code>lookup</code>: unchanged</li>" in table
        assert ("<li>tool call 2 <code>multiply</code>: <code>b</code> <code><del>12.05</del></code> → "
                "<code><ins>12.5</ins></code></li>") in table
        # the decoded arguments are one line per key: the changed line is exactly the "b" line
        (row,) = re.findall(r'<tr class="chg">.*?</tr>', table)
        assert "&quot;b&quot;: 12." in row and "&quot;a&quot;" not in row


def test_an_unchanged_tool_call_stays_in_view_when_only_the_text_changed():
    text = "\n".join(f"step {i}" for i in range(30))
    rejected = turn(text.replace("step 2\n", "step 2 is 21\n"), ("c1", "submit", {"answer": 21}))
    chosen = turn(text.replace("step 2\n", "step 2 is 20\n"), ("c1", "submit", {"answer": 21}))
    table = render_pair_diff(rejected, chosen)
    assert "<li>tool call 1 <code>submit</code>: unchanged</li><li>text changed (below)</li>" in table
    # 27 unchanged lines sit between the change and the call, yet the call's header line is shown, not folded
    assert re.search(r'<tr class="same call">.*?▸ tool call 1: submit · id c1', table)
    assert "unchanged lines ⋯" in table
    # and a call added or removed is named
    assert "tool call added: <code><ins>submit</ins></code>" in render_pair_diff(turn("x"), turn("x", ("c", "submit", {})))
    assert "tool call 1 removed: <code><del>submit</del></code>" in render_pair_diff(turn("x", ("c", "submit", {})),
                                                                                    turn("x"))


def test_the_report_shows_a_handoff_pair_with_its_tool_call_change():
    run = sample_run()
    pair = sample_pair(run).model_copy(update={
        "step_kind": "handoff", "rejected": turn("", ("call_1", "transfer_to_sales", "{}")),
        "chosen": turn("", ("call_1", "transfer_to_refunds", "{}"))})
    html = render_html(run, diagnosis=sample_diagnosis(run), pairs=[pair])
    assert "<code><del>transfer_to_sales</del></code> → <code><ins>transfer_to_refunds</ins></code>" in html
    assert_offline(html)
    # hostile names stay text
    bad = pair.model_copy(update={"chosen": turn("", ("call_1", PAYLOAD, "{}"))})
    html = render_html(run, pairs=[bad])
    assert PAYLOAD not in html and ESCAPED in html
