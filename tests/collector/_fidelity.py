"""Test helper (issue 34 item 2): how much of a run another instrumentor's spans give back, against the truth.

    from _fidelity import TEAMS, traced_both, fidelity

    native, spans = traced_both(TEAMS["smolagents CodeAgent"])    # one execution, traced by both at once
    numbers = fidelity(native, imported)                          # Fidelity(critical, kinds, edges, misses)

Each team runs ONCE on the real OpenAI client classes over ``causaltrace.testing.openai_wire`` (AutoGen's
``OpenAIChatCompletionClient``, smolagents' ``OpenAIServerModel``), traced at the same time by OpenInference's
instrumentor (its own TracerProvider and in-memory exporter) and by causaltrace (its collector's finished Run is the
truth). Steps are matched by (agent, kind, order among that agent's steps of that kind) for the kinds
:data:`MATCHED`; a native step is found when the imported step at its key agrees:

* ``tool_call``: the same tool and arguments (positional and keyword, as one object);
* ``tool_response``: the same result (one text holding the other: smolagents wraps a managed agent's answer) and
  its call found at the native call's key (results paired with their calls per agent);
* ``code_execution``: the same code (its ``python_interpreter`` call's) and stdout, and the same status;
* ``llm_response``: the same status; ``message`` / ``final_answer``: the same text (one holding the other).

A native step in ERROR is an execution error: found when the imported step at its key is in ERROR too. Edges are
counted over :data:`EDGES`, an edge found when the imported run has it between the steps at the two keys.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causaltrace.schema import Run, Step

ROOT = Path(__file__).resolve().parents[2]
MATCHED = ("llm_response", "message", "tool_call", "tool_response", "code_execution", "final_answer")
CRITICAL = ("tool_call", "tool_response", "code_execution")
#: autogen-core's GenAI spans hold agent turns and tool executions, no model calls: what their goal covers
GENAI = {"matched": ("agent_turn", "tool_call", "tool_response"), "edges_of": ("tool_result_of",), "contents": False}
EDGES = ("observed", "saw", "tool_result_of", "delegated_by")


@dataclass
class Fidelity:
    """The three percentages (``None`` when the native run has nothing of that sort) and what was missed."""

    critical: float | None
    kinds: float | None
    edges: float | None
    misses: list[str] = field(default_factory=list)


def _keys(run: Run) -> tuple[dict[str, tuple[str, str, int]], dict[tuple[str, str, int], Step]]:
    count: dict[tuple[str, str], int] = {}
    by_key: dict[tuple[str, str, int], Step] = {}
    key_of: dict[str, tuple[str, str, int]] = {}
    for step in run.steps:
        n = count.get((step.agent, step.kind), 0)
        count[(step.agent, step.kind)] = n + 1
        key_of[step.step_id] = (step.agent, step.kind, n)
        by_key[(step.agent, step.kind, n)] = step
    return key_of, by_key


def _same_text(a: str, b: str) -> bool:
    a, b = " ".join(str(a).split()), " ".join(str(b).split())
    return a == b or (bool(a) and bool(b) and (a in b or b in a))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _code(run: Run, step: Step) -> str:
    by_id = {s.step_id: s for s in run.steps}
    call = next((by_id[d.step_id] for d in step.depends_on if d.kind == "executes"), None)
    return str((call.arguments or {}).get("code", call.content)) if call is not None else ""


def _agrees(native: Run, n: Step, imported: Run, i: Step, n_keys: dict, i_keys: dict, contents: bool) -> bool:
    if n.kind == "tool_call":
        return n.tool_name == i.tool_name and (not contents or _canonical(n.arguments) == _canonical(i.arguments))
    if n.kind == "tool_response":
        n_calls = [n_keys[d.step_id] for d in n.depends_on if d.kind == "tool_result_of"]
        i_calls = [i_keys[d.step_id] for d in i.depends_on if d.kind == "tool_result_of"]
        return (not contents or _same_text(n.content, i.content)) and n_calls == i_calls and n.status == i.status
    if n.kind == "code_execution":
        stdout = (str(n.outputs.get("stdout", "")).strip(), str(i.outputs.get("stdout", "")).strip())
        return _code(native, n).strip() == _code(imported, i).strip() and stdout[0] == stdout[1] \
            and n.status == i.status
    if n.kind in ("llm_response", "agent_turn"):
        return n.status == i.status
    return _same_text(n.content, i.content)


def fidelity(native: Run, imported: Run, *, matched: tuple[str, ...] = MATCHED,
             edges_of: tuple[str, ...] = EDGES, contents: bool = True) -> Fidelity:
    """The three percentages of the module docstring, for one team's native and imported runs (``matched`` /
    ``edges_of``: the kinds and edges counted, narrower for GenAI spans, which hold no model calls; ``contents``
    False: tool calls and results agree by tool, pairing and status — autogen-core records no arguments or
    results)."""
    n_keys, _ = _keys(native)
    i_keys, i_by_key = _keys(imported)
    misses: list[str] = []
    critical = [0, 0]
    kinds = [0, 0]
    for step in native.steps:
        key = n_keys[step.step_id]
        other = i_by_key.get(key)
        if step.kind in matched:
            found = other is not None and _agrees(native, step, imported, other, n_keys, i_keys, contents)
            kinds[0] += found
            kinds[1] += 1
            if step.kind in CRITICAL:
                critical[0] += found
                critical[1] += 1
            if not found:
                misses.append(f"{key}: {step.content[:60]!r}")
        if step.status == "error":
            found = other is not None and other.status == "error"
            critical[0] += found
            critical[1] += 1
            if not found:
                misses.append(f"{key}: error not marked")
    i_edges = {(i_keys[s.step_id], i_keys[d.step_id], d.kind) for s in imported.steps for d in s.depends_on}
    edges = [0, 0]
    for step in native.steps:
        for dep in step.depends_on:
            if dep.kind in edges_of:
                edge = (n_keys[step.step_id], n_keys[dep.step_id], dep.kind)
                edges[0] += edge in i_edges
                edges[1] += 1
                if edge not in i_edges:
                    misses.append(f"edge {edge}")

    def pct(pair: list[int]) -> float | None:
        return round(100.0 * pair[0] / pair[1], 1) if pair[1] else None

    return Fidelity(pct(critical), pct(kinds), pct(edges), misses)


# ------------------------------------------------------------------------------------------------------- teams


def _example(name: str) -> Any:
    sys.path.insert(0, str(ROOT / "examples"))
    return importlib.import_module(name)


def _smol_model(policy: Any) -> Any:
    from causaltrace.testing.openai_wire import smolagents_endpoint

    return smolagents_endpoint(policy).smolagents_model()


def _openai_client(policy: Any, model: str = "scripted") -> Any:
    from causaltrace.testing.openai_wire import autogen_endpoint

    return autogen_endpoint(policy, model=model).autogen_client()


@dataclass(frozen=True)
class Team:
    framework: str  # "smolagents", "autogen" (OpenInference's instrumentors) or "genai" (autogen-core's own spans)
    run: Callable[[], Any]  # builds the team and runs it once (offline)


def _smol_tool_calling() -> None:
    example = _example("smolagents_agents")
    example._math_agent(factory=_smol_model).run("Compute the sum of the squares of these numbers: [1, 2, 3, 4, 5, 6]")


def _smol_code() -> None:
    example = _example("smolagents_agents")
    example._manager(off_by_one=True, factory=_smol_model).run(example.TASK)


def _smol_two_managed() -> None:
    example = _example("smolagents_agents")
    example._parallel_manager(factory=_smol_model).run(example.TASK_PARALLEL)


def _autogen_round_robin() -> None:
    from causaltrace.testing.openai_wire import arithmetic_team_endpoints

    example = _example("autogen_team")
    team = example.build_with(tuple(e.autogen_client() for e in arithmetic_team_endpoints(off_by_one=True)))
    asyncio.run(team.run(task=example.TASK))


@contextmanager
def _openai_zoo() -> Iterator[Any]:
    """The zoo's AutoGen teams with their scripted policies behind OpenAI clients over the wire."""
    from causaltrace.testing.faults import teams_autogen

    original = teams_autogen.ScriptedChatCompletionClient
    teams_autogen.ScriptedChatCompletionClient = _openai_client  # type: ignore[assignment]
    try:
        yield teams_autogen
    finally:
        teams_autogen.ScriptedChatCompletionClient = original  # type: ignore[assignment]


def _autogen_zoo(builder: str) -> Callable[[], None]:
    def run() -> None:
        with _openai_zoo() as zoo:
            team = getattr(zoo, builder)(True)
        asyncio.run(team.run(task="My invoice was charged twice, please refund the duplicate."))

    return run


def _autogen_magentic() -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.teams import MagenticOneGroupChat
    from autogen_core.tools import FunctionTool

    from causaltrace.testing.autogen import orchestrator_policy, planner_policy, reviewer_policy, solver_policy

    example = _example("autogen_team")
    tools = [FunctionTool(example.add, description="Add two integers."),
             FunctionTool(example.multiply, description="Multiply two integers.")]
    team = MagenticOneGroupChat([
        AssistantAgent("planner", _openai_client(planner_policy, "scripted-planner"),
                       description="Restates the task as a two-step plan."),
        AssistantAgent("solver", _openai_client(solver_policy(off_by_one=True), "scripted-solver"), tools=tools,
                       max_tool_iterations=5, description="Computes with the add and multiply tools."),
        AssistantAgent("reviewer", _openai_client(reviewer_policy, "scripted-reviewer"),
                       description="Checks the solver's arithmetic."),
    ], model_client=_openai_client(orchestrator_policy(), "scripted-orchestrator"))
    asyncio.run(team.run(task=example.TASK))


TEAMS: dict[str, Team] = {
    "autogen RoundRobin": Team("autogen", _autogen_round_robin),
    "autogen Selector": Team("autogen", _autogen_zoo("build_selector")),
    "autogen Swarm": Team("autogen", _autogen_zoo("build_swarm")),
    "autogen MagenticOne": Team("autogen", _autogen_magentic),
    "autogen RoundRobin (autogen-core GenAI spans)": Team("genai", _autogen_round_robin),
    "smolagents ToolCallingAgent": Team("smolagents", _smol_tool_calling),
    "smolagents CodeAgent": Team("smolagents", _smol_code),
    "smolagents manager + 2 managed (one class)": Team("smolagents", _smol_two_managed),
}


@contextmanager
def _other_instrumentor(framework: str, provider: Any) -> Iterator[None]:
    """OpenInference's instrumentor of ``framework`` on ``provider``; for ``genai``, ``provider`` as the global
    tracer provider, which autogen-core's own GenAI spans go to."""
    if framework == "genai":
        from opentelemetry import trace

        saved = trace._TRACER_PROVIDER  # the SDK keeps the global provider here; set once per process otherwise
        trace._TRACER_PROVIDER = provider
        try:
            yield
        finally:
            trace._TRACER_PROVIDER = saved
        return
    if framework == "smolagents":
        from openinference.instrumentation.smolagents import SmolagentsInstrumentor as Instrumentor
    else:
        from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor as Instrumentor
    instrumentor = Instrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def traced_both(team: Team, collector_runs: Callable[[], list[Run]]) -> tuple[Run, list[Any]]:
    """Run ``team`` once, traced by OpenInference's instrumentor (own provider, in-memory exporter) while the
    caller has causaltrace instrumented (or, for ``genai``, with autogen-core's own spans captured); the native Run
    (the last one ``collector_runs`` holds) and the other instrumentor's spans."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with _other_instrumentor(team.framework, provider):
        try:
            team.run()
        except Exception as exc:  # a failing team may raise; both traces are what the failure left
            if "Agent" not in type(exc).__name__:
                raise
    runs = collector_runs()
    assert runs, "causaltrace recorded no run"
    return runs[-1], list(exporter.get_finished_spans())
