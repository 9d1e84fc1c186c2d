"""Every comparison a finding makes is related (issue 32 item 2): checked on Who&When's dev half and on live runs of
the fault suite. A finding's source is the task or an ancestor of its step in the dependency graph (a log whose
graph has no edge: an earlier step), and the two values it compares are of one type (number with number, word with
word). Checked here independently of the detectors' own rule: the graph is rebuilt, the values re-typed."""

from __future__ import annotations

import asyncio
import re

import pytest

from _zoo import zoo_home
from causaltrace.attribution.bench import select_runs, split_of
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.stages.dependencies import build_dependency_graph

_NUMBER = re.compile(r"-?\d[\d,]*(\.\d+)?")
_SOURCE_ROLES = ("source", "request", "omitted_item", "superseded_by", "unchecked")


def _typed(value: object) -> str:
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]") and text[1:-1].strip():  # a list: the type of its items
        return "list of " + _typed(text[1:-1].split(",")[0].strip(" '\""))
    return "number" if _NUMBER.fullmatch(text) else "word"


def _comparable(source: str, role: str, changed: str) -> bool:
    """Same type; an item left out of a list (``omitted_item``) is compared with the list's items."""
    if role == "omitted_item" and changed.startswith("list of "):
        return source == changed.removeprefix("list of ")
    return source == changed


def _check(run, d) -> list[str]:
    graph = build_dependency_graph(run)
    problems = []
    for f in d.findings:
        changed = [e for e in f.evidence if e.role in ("changed", "chosen_agent")]
        for e in f.evidence:
            if e.role not in _SOURCE_ROLES or e.index < 0 or e.index == f.index:
                continue
            step = run.step_at(e.index)
            if step.kind == "task":
                continue
            if e.index > f.index:
                problems.append(f"{run.run_id} #{f.index} {f.family}: source #{e.index} comes after it")
            elif graph.edges and e.index not in graph.ancestors(f.index):
                problems.append(f"{run.run_id} #{f.index} {f.family}: source #{e.index} is not an ancestor")
            for c in changed:
                # an approval compares a task's value with the word "approved"; an ignored exclusion compares labels
                # (the number used carries the label the source excluded: "80 cancelled" after "excluding
                # cancelled"), not the values themselves
                if e.value not in (None, "") and c.value not in (None, "") and f.family not in (
                        "unchecked_approval", "ignored_instruction") and not _comparable(_typed(e.value), e.role, _typed(c.value)):
                    problems.append(f"{run.run_id} #{f.index} {f.family}: {e.value!r} vs {c.value!r}")
    return problems


def test_every_finding_on_whowhen_dev_compares_related_values(whowhen_dir):
    problems, findings = [], 0

    async def all_dev() -> None:
        nonlocal findings
        for run in select_runs(whowhen_dir, "all"):
            if split_of(run) != "dev":
                continue
            d = await diagnose(run, "graph", None, store=False)
            findings += len(d.findings)
            problems.extend(_check(run, d))

    asyncio.run(all_dev())
    assert findings > 20  # the check saw findings to check
    assert problems == [], "\n".join(problems[:20])


@pytest.mark.parametrize("name", ["smol-shop-quantity", "ag-fx-rate", "ag-unit-two", "smol-misread-oslo",
                                  "ag-speaker-oslo", "smol-ignored-k4", "ag-review-lamps", "smol-plan-miles"])
def test_every_finding_on_a_live_fault_suite_run_compares_related_values(name, tmp_path):
    pytest.importorskip("smolagents", reason="the smolagents extra is not installed")
    pytest.importorskip("autogen_agentchat", reason="the autogen extra is not installed")
    from causaltrace.testing.faults import all_cases
    from causaltrace.testing.faults import runner as faults_runner

    case = next(c for c in all_cases() if c.name == name)
    with zoo_home(tmp_path):
        run = asyncio.run(faults_runner.record(case))
    d = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))
    assert d.findings, name
    assert _check(run, d) == []
