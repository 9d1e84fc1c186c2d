"""causaltrace vs openinference-instrumentation-smolagents on the same scripted agents.

The same runs are traced by each instrumentor in turn (never both at once) and the exported spans compared on what
issue 4 names: LLM spans for a custom Model class, the failed run's root span, links between steps, and tool-call
ids. The numbers are printed (``pytest -s``) and the differences asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from opentelemetry import context as otel_context
from opentelemetry.trace import StatusCode

pytest.importorskip("smolagents")
oi = pytest.importorskip("openinference.instrumentation.smolagents")

from smolagents.utils import AgentGenerationError  # noqa: E402

import causaltrace  # noqa: E402
from _builders import capture_spans  # noqa: E402
from causaltrace import semconv  # noqa: E402
from causaltrace.config import TraceConfig  # noqa: E402
from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents  # noqa: E402
from causaltrace.instrumentation.tracing import reset_tracing  # noqa: E402
from test_smolagents_adapter import SQUARES_TASK, _never_answers, example, math_agent  # noqa: E402

OI_KIND = "openinference.span.kind"


@dataclass
class Trace:
    spans: list
    unfinished_roots: int = 0

    def count(self, pred: Callable) -> int:
        return sum(1 for s in self.spans if pred(s))


def _run_scenario(scenario: Callable[[], None]) -> list:
    try:
        scenario()
    except AgentGenerationError:
        pass


def with_openinference(scenario: Callable[[], None]) -> Trace:
    provider, exporter = capture_spans()
    instrumentor = oi.SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    # OpenInference leaves a failed run's span attached as the current context: restore ours afterwards
    token = otel_context.attach(otel_context.get_current())
    try:
        _run_scenario(scenario)
    finally:
        instrumentor.uninstrument()
        otel_context.detach(token)
    spans = list(exporter.get_finished_spans())
    # a root AGENT span that never ended is absent from the finished spans: count the AGENT spans whose children
    # point at a parent that was never exported
    ids = {s.context.span_id for s in spans}
    orphans = {s.parent.span_id for s in spans if s.parent is not None and s.parent.span_id not in ids}
    return Trace(spans, unfinished_roots=len(orphans))


def with_causaltrace(scenario: Callable[[], None]) -> Trace:
    provider, exporter = capture_spans()
    instrument_smolagents(provider, TraceConfig(store=False))
    try:
        _run_scenario(scenario)
    finally:
        uninstrument_smolagents()
        reset_tracing()
    spans = list(exporter.get_finished_spans())
    ids = {s.context.span_id for s in spans}
    orphans = {s.parent.span_id for s in spans if s.parent is not None and s.parent.span_id not in ids}
    return Trace(spans, unfinished_roots=len(orphans))


def _is_llm(span) -> bool:
    return span.attributes.get(OI_KIND) == "LLM" or span.attributes.get(semconv.STEP_KIND) == "llm_response"


def _has_tool_call_id(span) -> bool:
    attrs = span.attributes
    return bool(attrs.get(semconv.GEN_AI_TOOL_CALL_ID) or attrs.get("tool_call.id"))


def _is_tool(span) -> bool:
    """A tool-call span: causaltrace's ``tool_call`` steps (which now also carry OpenInference's TOOL kind, as do
    their tool_response and code_execution siblings), or an OpenInference TOOL span."""
    if semconv.STEP_KIND in span.attributes:
        return span.attributes.get(semconv.STEP_KIND) == "tool_call"
    return span.attributes.get(OI_KIND) == "TOOL"


def _links(trace: Trace) -> int:
    return sum(len(s.links) for s in trace.spans)


def _print(title: str, rows: list[tuple[str, object, object]]) -> None:
    print(f"\n{title}")
    print(f"  {'':46} {'OpenInference':>14} {'causaltrace':>12}")
    for name, a, b in rows:
        print(f"  {name:46} {a!s:>14} {b!s:>12}")


def test_custom_model_llm_spans_links_and_tool_call_ids():
    def scenario():
        with causaltrace.run(task=example.TASK, verify=example.verify):
            example.build().run(example.TASK)

    o, c = with_openinference(scenario), with_causaltrace(scenario)
    numbers = [
        ("spans", len(o.spans), len(c.spans)),
        ("traces", len({s.context.trace_id for s in o.spans}), len({s.context.trace_id for s in c.spans})),
        ("LLM spans (custom Model, 4 calls)", o.count(_is_llm), c.count(_is_llm)),
        ("tool spans", o.count(_is_tool), c.count(_is_tool)),
        ("tool spans with a tool-call id", o.count(lambda s: _is_tool(s) and _has_tool_call_id(s)),
         c.count(lambda s: _is_tool(s) and _has_tool_call_id(s))),
        ("links (step dependencies)", _links(o), _links(c)),
        ("spans with token usage", o.count(lambda s: "llm.token_count.prompt" in s.attributes
                                            and s.attributes.get(OI_KIND) == "LLM"),
         c.count(lambda s: semconv.GEN_AI_USAGE_INPUT_TOKENS in s.attributes)),
    ]
    _print("manager CodeAgent + managed ToolCallingAgent (example, success)", numbers)
    # a Model subclass that overrides generate: OpenInference wraps only the Model classes smolagents exports
    assert o.count(_is_llm) == 0 and c.count(_is_llm) == 4
    # OpenInference emits no links; causaltrace links every dependency (but a tool result's on its own call: the
    # call and its result are one span)
    assert _links(o) == 0 and _links(c) >= 21
    # tool-call ids: none on OpenInference's tool spans; on every causaltrace tool_call that has one
    assert o.count(lambda s: _is_tool(s) and _has_tool_call_id(s)) == 0
    assert c.count(lambda s: _is_tool(s) and _has_tool_call_id(s)) == 4  # 2 python_interpreter + 2 model calls
    assert len({s.context.trace_id for s in c.spans}) == 1


def test_openai_server_model_llm_spans():
    """With smolagents' own OpenAIServerModel (on a scripted endpoint) both trace every model call: the overhead
    benchmark's like-for-like case."""
    from causaltrace.testing.openai_wire import smolagents_endpoint

    def scenario():
        agent = example.build(lambda policy: smolagents_endpoint(policy).smolagents_model())
        with causaltrace.run(task=example.TASK, verify=example.verify):
            assert agent.run(example.TASK) == 91

    o, c = with_openinference(scenario), with_causaltrace(scenario)
    _print("example on OpenAIServerModel", [("LLM spans (4 calls)", o.count(_is_llm), c.count(_is_llm)),
                                            ("spans", len(o.spans), len(c.spans))])
    assert o.count(_is_llm) == 4 and c.count(_is_llm) == 4


def test_failed_run_root_span():
    def generation_error():
        math_agent(policy=lambda request: (_ for _ in ()).throw(ConnectionError("down"))).run(SQUARES_TASK)

    def max_steps():
        math_agent(policy=_never_answers, max_steps=2).run(SQUARES_TASK)

    rows = []
    for name, scenario in (("AgentGenerationError", generation_error), ("AgentMaxStepsError", max_steps)):
        o, c = with_openinference(scenario), with_causaltrace(scenario)
        o_root = [s for s in o.spans if s.attributes.get(OI_KIND) == "AGENT"]
        c_root = [s for s in c.spans if semconv.is_root_span_name(s.name)]
        rows += [
            (f"{name}: root span ended", bool(o_root), bool(c_root)),
            (f"{name}: root status", o_root[0].status.status_code.name if o_root else "-",
             c_root[0].status.status_code.name),
            (f"{name}: spans left without parent", o.unfinished_roots, c.unfinished_roots),
        ]
        assert c_root and c_root[0].status.status_code is StatusCode.ERROR and c.unfinished_roots == 0
        if name == "AgentGenerationError":
            assert not o_root and o.unfinished_roots == 1  # OpenInference never ends the failed run's span
        else:
            assert o_root[0].status.status_code is not StatusCode.ERROR  # a run out of steps looks fine there
    _print("failed runs (ToolCallingAgent, owned run)", rows)


def test_parallel_managed_agents():
    def scenario():
        with causaltrace.run(task=example.TASK_PARALLEL, verify=example.verify_parallel):
            example.build_parallel().run(example.TASK_PARALLEL)

    o, c = with_openinference(scenario), with_causaltrace(scenario)
    o_agents = [s for s in o.spans if s.attributes.get(OI_KIND) == "AGENT"]
    c_turns = [s for s in c.spans if s.attributes.get(semconv.STEP_KIND) == "agent_turn"]
    by_id = {s.context.span_id: s for s in c.spans}
    delegated = [s for s in c_turns if s.parent is not None and by_id[s.parent.span_id].attributes.get(
        semconv.STEP_KIND) == "tool_call"]
    numbers = [
        ("agent spans", len(o_agents), len(c_turns)),
        ("managed runs under the call that made them", 0, len(delegated)),
        ("LLM spans (6 calls)", o.count(_is_llm), c.count(_is_llm)),
        ("links", _links(o), _links(c)),
    ]
    _print("manager ToolCallingAgent + 2 managed agents in parallel", numbers)
    assert len(o_agents) == len(c_turns) == 3
    assert len(delegated) == 2 and c.count(_is_llm) == 6 and o.count(_is_llm) == 0


def test_a_tool_call_text_is_read_even_when_cpython_trips_on_parallel_parsing(monkeypatch):
    """CPython 3.11 before 3.11.8 can raise ``SystemError: AST constructor recursion depth mismatch`` from a valid
    ``ast.literal_eval`` when two threads parse at once (smolagents' managed agents in parallel). The hook retries
    instead of letting the error cost the model call's record; a text it never managed to read is not remembered as
    holding no call."""
    import ast as real_ast
    import types

    from causaltrace.instrumentation.smolagents import _oi

    text = "Calling tools:\n[{'id': 'call_1', 'type': 'function', 'function': {'name': 'add', 'arguments': {'a': 1}}}]"
    failures = {"left": 1}

    def flaky_literal_eval(source):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")
        return real_ast.literal_eval(source)

    monkeypatch.setattr(_oi, "ast", types.SimpleNamespace(literal_eval=flaky_literal_eval))
    monkeypatch.setattr(_oi, "_PARSED_CALLS", {})
    assert [c["name"] for c in _oi._parsed_calls(text)] == ["add"]
    failures["left"] = 10  # never readable this time: no calls, and nothing remembered
    other = text.replace("call_1", "call_2")
    assert _oi._parsed_calls(other) == () and other not in _oi._PARSED_CALLS
    failures["left"] = 0
    assert [c["id"] for c in _oi._parsed_calls(other)] == ["call_2"]


def test_a_model_calls_messages_are_read_once_for_the_recording_and_the_span():
    """``_access.canonical_messages`` with a ``plain`` list gives the same canonical messages as without it and,
    from the same read, their OpenInference form: OpenAI's roles, content parts as text / image, a tool-call
    message's calls (parsed from its ``Calling tools: [...]`` text), a tool response's call id (from the tool-call
    before it when its text names none)."""
    from smolagents.models import ChatMessage, MessageRole

    from causaltrace.collector.oi_messages import json_text
    from causaltrace.instrumentation.smolagents import _access

    calling = "Calling tools:\n[{'id': 'call_1', 'type': 'function', 'function': {'name': 'add', 'arguments': {'a': 1}}}]"
    messages = [
        {"role": "system", "content": "be brief"},
        ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": "hi"},
                                                    {"type": "image_url", "image_url": {"url": "u"}}, "loose"]),
        ChatMessage(role=MessageRole.TOOL_CALL, content=[{"type": "text", "text": calling}]),
        ChatMessage(role=MessageRole.TOOL_RESPONSE, content=[{"type": "text", "text": "Observation: 2"}]),
        ChatMessage(role=MessageRole.TOOL_RESPONSE, content=[{"type": "text", "text": "Call id: call_9\n3"}]),
        {"role": None, "content": None},
    ]
    plain: list = []
    assert _access.canonical_messages(messages, plain) == _access.canonical_messages(messages)
    assert plain == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image"},
                                     {"type": "text", "text": "loose"}]},
        {"role": "assistant", "content": [{"type": "text", "text": calling}],
         "tool_calls": [{"id": "call_1", "name": "add", "arguments": json_text({"a": 1})}]},
        {"role": "tool", "content": [{"type": "text", "text": "Observation: 2"}], "tool_call_id": "call_1"},
        {"role": "tool", "content": [{"type": "text", "text": "Call id: call_9\n3"}], "tool_call_id": "call_9"},
        {"role": "", "content": None},
    ]
