"""smolagents' spans as OpenInference writes them, read as smolagents meant them (issue 34 "Why"): a code step's
observations and its ERROR, ``tool-call`` / ``tool-response`` messages as edges, positional tool arguments, results
paired with their calls per agent, and managed agents of one class named by their names, not their class.

The spans are written by hand in the instrumentor's shape (span names, kinds and attributes of
openinference-instrumentation-smolagents 0.1); the real instrumentor's traces are in test_import_foreign.py and
test_import_fidelity.py.
"""

from __future__ import annotations

import json
from typing import Any

from causaltrace.collector.otlp import load_otlp_json

TRACE = "5a" * 16
PROMPT = ("You're a helpful agent named '{name}'.\nYou have been submitted this task by your manager.\n---\nTask:\n"
          "{task}\n---\nYou're helping your manager solve a wider task.")


class Spans:
    """A trace under construction: each span starts after the previous one; ``end`` closes a span."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.clock = 0

    def add(self, name: str, kind: str, parent: dict[str, Any] | None = None, status: int = 1,
            **attrs: Any) -> dict[str, Any]:
        self.clock += 10
        values = {"openinference.span.kind": kind, **attrs}
        span = {"traceId": TRACE, "spanId": f"{len(self.spans) + 1:016x}", "name": name,
                "startTimeUnixNano": str(self.clock), "endTimeUnixNano": str(self.clock + 5), "status": {"code": status},
                "attributes": [{"key": k, "value": {"stringValue": v if isinstance(v, str) else json.dumps(v)}}
                               for k, v in values.items()]}
        if parent is not None:
            span["parentSpanId"] = parent["spanId"]
        self.spans.append(span)
        return span

    def end(self, span: dict[str, Any]) -> None:
        self.clock += 10
        span["endTimeUnixNano"] = str(self.clock)

    def run(self):
        (run,) = load_otlp_json(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": self.spans}]}]}))
        return run


def llm(t: Spans, parent: dict[str, Any], messages: list[tuple[str, str]], *, text: str = "",
        calls: tuple[tuple[str, str, dict], ...] = ()) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, (role, content) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.contents.0.message_content.text"] = content
    attrs["llm.output_messages.0.message.role"] = "assistant"
    if text:
        attrs["llm.output_messages.0.message.contents.0.message_content.text"] = text
    for i, (call_id, name, arguments) in enumerate(calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{i}.tool_call"
        attrs.update({f"{prefix}.id": call_id, f"{prefix}.function.name": name,
                      f"{prefix}.function.arguments": json.dumps(arguments)})
    return t.add("OpenAIModel.generate", "LLM", parent, **attrs)


def tool(t: Spans, parent: dict[str, Any], name: str, value: dict[str, Any], output: str, **attrs: Any) -> None:
    t.add(name, "TOOL", parent, **{"tool.name": name, "input.value": value, "output.value": output, **attrs})


def shape(run) -> list[str]:
    by_id = {s.step_id: s for s in run.steps}
    return [f"{s.index} {s.kind} {s.agent}" + "".join(f" {d.kind}:{by_id[d.step_id].index}" for d in s.depends_on)
            for s in run.steps]


def test_a_failed_code_step_is_a_code_execution_marked_as_it_was_and_positional_arguments_are_kept():
    t = Spans()
    agent = t.add("CodeAgent.run", "AGENT", **{"input.value": {"task": "What is 6 times 7?"}})
    step = t.add("Step 1", "CHAIN", agent, status=2, **{"output.value": "Execution logs:\nstarting\n"})
    step["status"]["message"] = "InterpreterError: Code execution failed at line 'print(x)': name 'x' is not defined"
    llm(t, step, [("user", "New task:\nWhat is 6 times 7?")], text="Thought: print it.\n<code>\nprint(x)\n</code>")
    step2 = t.add("Step 2", "CHAIN", agent, **{"output.value": "Execution logs:\nLast output from code snippet:\n42"})
    llm(t, step2, [("user", "New task:\nWhat is 6 times 7?"),
                   ("assistant", "Thought: print it.\n<code>\nprint(x)\n</code>"),
                   ("tool-call", "Calling tools:\n[{'id': 'call_2', 'type': 'function', 'function': {'name': "
                                 "'python_interpreter', 'arguments': 'print(x)'}}]"),
                   ("tool-response", "Call id: call_2\nObservation:\nExecution logs:\nstarting\n")],
        text="Thought: answer.\n<code>\nfinal_answer(42)\n</code>")
    tool(t, step2, "final_answer", {"args": [42], "kwargs": {}}, "42",
         **{"tool.parameters": {"answer": {"type": "any"}}})
    run = t.run()
    assert shape(run) == [
        "0 task user", "1 agent_turn CodeAgent", "2 llm_response CodeAgent saw:0",
        "3 reasoning CodeAgent produced_by:2", "4 tool_call CodeAgent produced_by:2",
        "5 code_execution CodeAgent executes:4",
        "6 llm_response CodeAgent continues:2 observed:5", "7 reasoning CodeAgent produced_by:6",
        "8 tool_call CodeAgent produced_by:6", "9 code_execution CodeAgent executes:8",
        "10 tool_call CodeAgent produced_by:9", "11 tool_response CodeAgent tool_result_of:10",
        "12 final_answer CodeAgent produced_by:9 answer_of:11",
    ]
    failed = run.steps[5]
    assert (failed.status, failed.error.message[:16]) == ("error", "InterpreterError")
    assert run.steps[4].arguments == {"code": "print(x)"} and failed.outputs["stdout"] == "starting"
    assert run.steps[10].arguments == {"answer": 42}
    assert run.steps[12].content == "42"


def test_two_managed_agents_of_one_class_are_two_agents_each_paired_with_its_own_calls():
    """Both managed agents are ``ToolCallingAgent.run`` spans and their models give the same call ids: each is
    named from its prompt (listed on the manager's span) and each result answers its own agent's call."""
    t = Spans()
    manager = t.add("ToolCallingAgent.run", "AGENT", **{
        "input.value": {"task": "add the squares and the cubes"},
        "smolagents.managed_agents.0.name": "squares_agent", "smolagents.managed_agents.1.name": "cubes_agent"})
    step = t.add("Step 1", "CHAIN", manager)
    llm(t, step, [("user", "New task:\nadd the squares and the cubes")],
        calls=(("call_0_0", "squares_agent", {"task": "squares"}), ("call_0_1", "cubes_agent", {"task": "cubes"})))
    workers = {}
    for name in ("squares_agent", "cubes_agent"):
        worker = t.add("ToolCallingAgent.run", "AGENT", step,
                       **{"input.value": {"task": PROMPT.format(name=name, task=name[:-6])}, "output.value": name})
        inner = t.add("Step 1", "CHAIN", worker)
        llm(t, inner, [("user", "New task:\n" + PROMPT.format(name=name, task=name[:-6]))],
            calls=(("call_0_0", "sum_of_powers", {"numbers": [1, 2]}),))
        tool(t, inner, "sum_of_powers", {"args": [], "kwargs": {"numbers": [1, 2]}}, f"{name} total")
        t.end(inner)
        t.end(worker)
        workers[name] = worker
    run = t.run()
    assert run.agents == ("ToolCallingAgent", "squares_agent", "cubes_agent")
    by_id = {s.step_id: s for s in run.steps}
    for name in ("squares_agent", "cubes_agent"):
        (result,) = [s for s in run.steps if s.kind == "tool_response" and s.agent == name]
        (call,) = [by_id[d.step_id] for d in result.depends_on]
        assert call.agent == name and result.content == f"{name} total" and call.call_id == "call_0_0"
        (answer,) = [s for s in run.steps if s.kind == "tool_response" and s.tool_name == name]
        (asked,) = [by_id[d.step_id] for d in answer.depends_on]
        assert answer.agent == "ToolCallingAgent" and asked.arguments == {"task": name[:-6]}
        (task,) = [s for s in run.steps if s.kind == "task" and s.agent == name]
        assert task.depends_on[0].kind == "delegated_by" and by_id[task.depends_on[0].step_id] == asked
