"""The Who&When importer maps the format's naming conventions to kinds, values and dependencies (issue 32 item 1):
a terminal's output is a ``tool_response``, the Orchestrator's thought a ``reasoning`` step, ``X (-> Y)`` a message
addressed to Y (``outputs["target"]``), and the conversation's protocol rules run at import and are stored as the
steps' ``depends_on``. Real logs from the dev half (even file numbers) of ../shared/data/whowhen; a run stored before
the change is brought to the same form at read time."""

from __future__ import annotations

from pathlib import Path

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.stages.dependencies import build_dependency_graph
from causaltrace.collector.protocol_rules import CONVERSATION_RULES, conversation_steps, interpret_rules
from causaltrace.collector.store import Store
from causaltrace.collector.whowhen import current_form, load_whowhen, whowhen_run_from_data
from causaltrace.schema import Run


def deps(run: Run) -> set[tuple[int, int, str]]:
    """(consumer, producer, kind) of every stored dependency, by step index."""
    return {(s.index, run.step(d.step_id).index, d.kind) for s in run.steps for d in s.depends_on}


def as_stored_before(run: Run) -> Run:
    """``run`` as the importer stored it before issue 32: no dependencies, no addressee values, no marker, and (before
    issue 20) no speaker types — only the speaker labels and texts."""
    steps = []
    for s in run.steps:
        outputs = {k: v for k, v in s.outputs.items() if k != "target"}
        metadata = {k: v for k, v in s.metadata.items() if k != "speaker_role"}
        steps.append(s.model_copy(update={"depends_on": (), "outputs": outputs, "metadata": metadata}))
    metadata = {k: v for k, v in run.metadata.items() if k != "dependencies"}
    return run.model_copy(update={"steps": tuple(steps), "metadata": metadata})


def test_a_hand_crafted_log_gets_kinds_values_and_dependencies_at_import(whowhen_dir: Path):
    run = load_whowhen(whowhen_dir / "Hand-Crafted" / "14.json")  # dev half
    by = {s.index: s for s in run.steps}
    assert by[0].kind == "task" and by[1].kind == "reasoning" and by[12].kind == "tool_response"
    assert by[12].metadata["speaker"] == "ComputerTerminal" and by[12].outputs["is_error"] is False
    assert [(i, by[i].kind, by[i].outputs.get("target")) for i in (3, 6, 10, 14)] == [
        (3, "message", "WebSurfer"), (6, "message", "FileSurfer"), (10, "message", "ComputerTerminal"),
        (14, "message", "ComputerTerminal")]
    have = deps(run)
    assert (3, 2, "produced_by") in have  # the thought → the instruction it produced
    assert (8, 6, "saw") in have  # an instruction → the addressed agent's next step (a thought in between)
    assert (16, 14, "executes") in have and (12, 10, "executes") not in have  # code → its terminal output
    assert {(c, p) for c, p, k in have if k == "saw" and c - p == 1} == {(i, i - 1) for i in range(1, len(run.steps))}
    assert run.metadata["dependencies"] == "derived"


def test_attribution_reads_the_derived_graph_as_the_rules_would_recover_it(whowhen_dir: Path):
    """The stored dependencies, labelled by the rules that admit them, are the graph the rules give when they run in
    attribution (what ``graph`` read before issue 32): the same edges, kinds and rule names."""
    for path in (whowhen_dir / "Hand-Crafted" / "14.json", whowhen_dir / "Algorithm-Generated" / "8.json"):
        run = load_whowhen(path)
        graph = build_dependency_graph(run)
        recovered = interpret_rules(conversation_steps(run.steps), CONVERSATION_RULES)  # reads no depends_on
        recovered.sort(key=lambda e: (e.consumer, e.producer, e.kind))
        assert graph.source == "recovered"  # derived at import: an imported log, not a live run
        assert [e.to_json() for e in graph.edges] == [e.to_json() for e in recovered], path.name
        assert {e.rule for e in graph.edges} >= {"previous message", "code→execution"}


def test_an_algorithm_generated_terminal_is_a_tool_output_with_its_code(whowhen_dir: Path):
    run = load_whowhen(whowhen_dir / "Algorithm-Generated" / "8.json")  # dev half
    terminals = [s for s in run.steps if s.metadata["speaker"] == "Computer_terminal"]
    assert terminals and all(s.kind == "tool_response" and s.metadata["speaker_role"] == "tool" for s in terminals)
    executes = {(c, p) for c, p, k in deps(run) if k == "executes"}
    assert {c for c, _ in executes} <= {s.index for s in terminals} and executes
    assert all(run.step_at(p).inputs.get("code") for _, p in executes)


def test_a_run_stored_before_is_brought_to_the_importers_form_at_read_time(whowhen_dir: Path):
    fresh = load_whowhen(whowhen_dir / "Hand-Crafted" / "14.json", content_id=True)
    old = as_stored_before(fresh)
    assert deps(old) == set() and build_dependency_graph(old).edges != build_dependency_graph(fresh).edges
    assert current_form(old) == fresh and current_form(fresh) is fresh
    store = Store()
    store.save_run(old)
    stored = store.get_run(fresh.run_id)
    assert deps(stored) == set()  # the store keeps what it was given; the engine reads it in today's form
    a, b = diagnose_sync(stored, "graph", store=False), diagnose_sync(fresh, "graph", store=False)
    assert (a.decisive_step_index, a.agent, a.confidence) == (b.decisive_step_index, b.agent, b.confidence)
    assert [c.index for c in a.candidates] == [c.index for c in b.candidates]


def test_the_convention_is_mapped_whatever_the_agents_are_called(tmp_path: Path):
    """Another team in the Who&When shape: ``Conductor (-> Scout)`` addresses Scout, ``Conductor (thought)`` is
    just a message (only the Orchestrator's thought is Who&When's reasoning), a ``Shell`` is a tool by its name."""
    data = {"question": "How many moons does Mars have?", "history": [
        {"role": "human", "content": "How many moons does Mars have?"},
        {"role": "Conductor (-> Scout)", "content": "Look up the moons of Mars."},
        {"role": "Conductor (-> Coder)", "content": "Count them: ```python\nprint(len(['Phobos']))\n```"},
        {"role": "Scout", "content": "Mars has two moons, Phobos and Deimos."},
        {"role": "Shell", "content": "exitcode: 0 (execution succeeded)\nCode output: 1"},
        {"role": "Coder", "content": "Mars has 1 moon."},
    ], "mistake_agent": "Conductor", "mistake_step": "2"}
    run = whowhen_run_from_data(data, tmp_path / "Hand-Crafted" / "4.json")
    assert [s.kind for s in run.steps] == ["task", "message", "message", "message", "tool_response", "message"]
    assert [s.outputs.get("target") for s in run.steps] == [None, "Scout", "Coder", None, None, None]
    have = deps(run)
    assert {(3, 1, "saw"), (5, 2, "saw"), (4, 2, "executes")} <= have
    assert {(c, p) for c, p, k in have if k == "saw" and c - p == 1} == {(i, i - 1) for i in range(1, 6)}
