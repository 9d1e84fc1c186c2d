"""Attribution reads kinds, dependencies and values — never speaker names (issue 32 item 1). The Who&When speaker
rules live in the importer (collector.whowhen, collector.protocol_rules); attribution keeps format-neutral rules for
a run that has no dependencies at all."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.stages.dependencies import build_dependency_graph
from causaltrace.attribution.stages.view import addressee, is_execution_output, is_instruction
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.schema import Outcome, Run, Step

ATTRIBUTION = Path(__file__).resolve().parents[2] / "src" / "causaltrace" / "attribution"
#: the speaker-name conventions that moved out: Who&When's agents and terminals, its label shapes, common team names
MOVED = re.compile(r"Computer_?[Tt]erminal|Orchestrator|WebSurfer|FileSurfer|\bAssistant\b|user_proxy|UserProxy|"
                   r"MagenticOne|\(-> |\\\(->|\(thought\)|\(termination condition\)")
#: the names attribution defined for them
MOVED_DEFINITIONS = {"LOG_RULES", "TERMINAL_SPEAKERS", "HUMAN_SPEAKERS", "base_agent", "_ADDRESSED"}


def _literals(tree: ast.Module) -> list[ast.Constant]:
    """The string literals of a module that are not docstrings (a docstring may describe a log's format)."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_speaker_name_literal_remains_in_attribution():
    files = sorted(ATTRIBUTION.rglob("*.py"))
    assert len(files) > 50 and (ATTRIBUTION / "stages" / "view.py") in files
    found = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ATTRIBUTION)}:{n.lineno}: {MOVED.search(n.value).group()!r}"  # type: ignore[union-attr]
                  for n in _literals(tree) if MOVED.search(n.value)]
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names = {t.id for t in targets if isinstance(t, ast.Name)} | (
                {node.name} if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else set())
            found += [f"{path.relative_to(ATTRIBUTION)}:{node.lineno}: defines {n}" for n in names & MOVED_DEFINITIONS]
    assert found == []


def test_the_scan_would_find_a_planted_name():
    planted = ast.parse('"""Mentions Orchestrator (-> WebSurfer) in a docstring."""\nX = {"Computer_terminal"}\n')
    assert [n.value for n in _literals(planted) if MOVED.search(n.value)] == ["Computer_terminal"]


def _renamed(run: Run, names: dict[str, str]) -> Run:
    pattern = re.compile("|".join(map(re.escape, names)))

    def sub(value):
        return pattern.sub(lambda m: names[m.group()], value) if isinstance(value, str) else value

    steps = [s.model_copy(update={"agent": sub(s.agent), "content": sub(s.content),
                                  "outputs": {k: sub(v) for k, v in s.outputs.items()},
                                  "inputs": {k: sub(v) for k, v in s.inputs.items()},
                                  "metadata": {k: sub(v) for k, v in s.metadata.items()}}) for s in run.steps]
    return run.model_copy(update={"steps": tuple(steps), "agents": tuple(map(sub, run.agents)), "task": sub(run.task)})


def test_renaming_every_agent_of_a_real_log_changes_nothing(whowhen_dir):
    """A dev-half Hand-Crafted log with its Orchestrator, surfers and terminal renamed everywhere (labels, agents,
    targets, texts): the same graph, the same ranking, the same confidence. Before issue 32 the renamed log lost its
    thought → instruction and instruction → reply edges (they were matched on the speaker labels)."""
    run = load_whowhen(whowhen_dir / "Hand-Crafted" / "14.json")
    renamed = _renamed(run, {"Orchestrator": "Conductor", "WebSurfer": "Scout", "FileSurfer": "Reader",
                             "ComputerTerminal": "Sandbox", "Assistant": "Helper"})
    assert renamed.step_at(3).metadata["speaker"] == "Conductor (-> Scout)"
    assert [e.to_json() for e in build_dependency_graph(renamed).edges] == [
        e.to_json() for e in build_dependency_graph(run).edges]
    a, b = diagnose_sync(run, "graph", store=False), diagnose_sync(renamed, "graph", store=False)
    assert (b.decisive_step_index, b.confidence) == (a.decisive_step_index, a.confidence)
    assert [(c.index, c.score) for c in b.candidates] == [(c.index, c.score) for c in a.candidates]


def _log_without_dependencies() -> Run:
    """A log of an unknown format, as a plain importer would give it: kinds and values, no dependencies, no
    speaker labels, agents named nothing attribution knows."""
    spec = [
        ("task", "client", "Which year did the bridge open? Give the year.", {}, {}),
        ("message", "lead", "Find the opening year of the bridge.", {"target": "finder"}, {}),
        ("message", "finder", "The bridge opened in 1932.", {}, {}),
        ("reasoning", "lead", "The finder says 1932; I will have it checked by running code.", {}, {}),
        ("message", "lead", "Run this: ```python\nprint(1923)\n```", {"target": "runner"}, {"code": "print(1923)\n"}),
        ("tool_response", "sandbox", "1923", {"result": "1923", "is_error": False}, {}),
        ("message", "runner", "The bridge opened in 1923.", {}, {}),
    ]
    steps = [Step(step_id=f"x-s{i}", run_id="x", index=i, kind=kind, agent=agent, content=text,  # type: ignore[arg-type]
                  outputs={"text": text, **out} if kind != "tool_response" else out, inputs=inp)
             for i, (kind, agent, text, out, inp) in enumerate(spec)]
    return Run(run_id="x", framework="somelog", task=spec[0][2], agents=("lead", "finder", "runner"),
               steps=tuple(steps), outcome=Outcome(status="failure", final_answer="1923"))


def test_a_log_without_dependencies_is_read_by_kinds_and_values():
    run = _log_without_dependencies()
    graph = build_dependency_graph(run)
    assert graph.source == "recovered"
    special = {(e.producer, e.consumer, e.kind, e.rule) for e in graph.edges if e.rule != "previous message"}
    assert special == {(1, 2, "saw", "instruction→reply"), (3, 4, "produced_by", "thought→instruction"),
                       (4, 6, "saw", "instruction→reply"), (4, 5, "executes", "code→execution")}
    assert {(e.producer, e.consumer) for e in graph.edges if e.rule == "previous message"} == {
        (i, i + 1) for i in range(6)}
    assert addressee(run.step_at(4)) == "runner" and is_instruction(run.step_at(1))
    assert is_execution_output(run.step_at(5)) and not is_execution_output(run.step_at(6))
    diagnosis = diagnose_sync(run, "graph", store=False)
    # the code retyped the year it was given (1932 → 1923): a value changed along the recovered edges
    assert (diagnosis.decisive_step_index, diagnosis.agent) == (4, "lead")
    assert "1932" in diagnosis.explanation and diagnosis.candidates[-1].index == 5  # the tool output ranks last
