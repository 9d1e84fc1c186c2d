"""A Run from one trace of OpenTelemetry GenAI spans (``gen_ai.*``; autogen-core's own spans; issue 23 item 1).

Mapping, spans in start order (``gen_ai.operation.name``):

* ``invoke_agent`` → ``agent_turn`` of ``gen_ai.agent.name`` (``create_agent`` is not a step);
* ``chat`` / ``text_completion`` / ``generate_content`` → ``llm_response`` (agent: the nearest ``invoke_agent``
  ancestor, else ``gen_ai.agent.name``; ``gen_ai.request.model`` / ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens``), inputs from ``gen_ai.input.messages`` and outputs from
  ``gen_ai.output.messages`` (JSON: ``[{role, parts: [{type: text, content} | {type: tool_call, id, name,
  arguments} | {type: tool_call_response, id, response}]}]``), then its message and tool calls as for
  OpenInference; dependencies recovered from the input messages;
* ``execute_tool`` → the ``tool_call`` the LLM recorded under ``gen_ai.tool.call.id`` (else one made from the span:
  ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``), then a ``tool_response`` of
  ``gen_ai.tool.call.result`` (empty when the span does not carry it, as autogen-core's does not) ``tool_result_of``
  that call, an error when the span's status is ERROR.

The task is the first user message an LLM span was sent, when there is one. A failed span gives a step marked as it
was, as for OpenInference (:func:`~causaltrace.collector.foreign_common.step_error`).
"""

from __future__ import annotations

from typing import Any

from causaltrace.collector.chatlog_build import ChatBuilder
from causaltrace.collector.foreign_common import (
    InputMessage,
    MessageIndex,
    SpanLike,
    TraceTree,
    add_llm_output,
    call_key,
    json_or_text,
    message_text,
    read_span,
    source_of,
    step_error,
    step_status,
)
from causaltrace.schema import Run, Step, TokenUsage

__all__ = ["LLM_OPERATIONS", "OPERATION", "GenAIReader", "framework_of", "run_of_trace"]

OPERATION = "gen_ai.operation.name"
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def _messages(raw: Any) -> list[dict[str, Any]]:
    value = json_or_text(raw)
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    if isinstance(parts, list):
        return [p for p in parts if isinstance(p, dict)]
    return [{"type": "text", "content": message_text(message.get("content"))}]


def _input(message: dict[str, Any]) -> InputMessage:
    parts = _parts(message)
    text = "\n".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
    calls = tuple(str(p["id"]) for p in parts if p.get("type") == "tool_call" and p.get("id"))
    result = next((p for p in parts if p.get("type") == "tool_call_response"), None)
    if result is not None:
        response = result.get("response", "")
        return InputMessage(role="tool", text=response if isinstance(response, str) else str(response),
                            result_of=str(result.get("id")) if result.get("id") else None)
    return InputMessage(role=str(message.get("role", "")), text=text, tool_call_ids=calls)


def _output(raw: Any) -> tuple[str, list[tuple[str, Any, str | None]]]:
    texts, calls = [], []
    for message in _messages(raw):
        for part in _parts(message):
            if part.get("type") == "text":
                texts.append(str(part.get("content", "")))
            elif part.get("type") == "tool_call":
                calls.append((str(part.get("name", "")), part.get("arguments"),
                              str(part["id"]) if part.get("id") else None))
    return "\n".join(t for t in texts if t), calls


class GenAIReader:
    """Walks one trace's GenAI spans in order and feeds the builder (mapping in the module docstring).

    :mod:`causaltrace.collector.openinference` hands it the GenAI spans of a mixed trace that no OpenInference span
    covers, sharing its builder, message ``index`` and agent ``turns`` (span id → agent_turn step), so the two
    conventions make one run."""

    def __init__(self, tree: TraceTree, b: ChatBuilder, *, index: MessageIndex | None = None,
                 turns: dict[str, Step] | None = None) -> None:
        self.tree, self.b = tree, b
        self.index = index if index is not None else MessageIndex()
        self.turns: dict[str, Step] = turns if turns is not None else {}

    def agent_of(self, span: SpanLike) -> tuple[str, str | None]:
        for parent in self.tree.ancestors(span):
            if parent.span_id in self.turns:
                turn = self.turns[parent.span_id]
                return turn.agent, turn.step_id
        return str(span.attrs.get("gen_ai.agent.name") or "agent"), None

    def read(self, span: SpanLike) -> None:
        operation = span.attrs.get(OPERATION)
        if operation == "invoke_agent":
            name = str(span.attrs.get("gen_ai.agent.name") or span.name.removeprefix("invoke_agent ").strip())
            self.turns[span.span_id] = self.b.add("agent_turn", name or "agent", "", status=step_status(span),
                                                  error=step_error(span))
        elif operation in LLM_OPERATIONS:
            self.llm(span)
        elif operation == "execute_tool":
            self.tool(span)

    def llm(self, span: SpanLike) -> None:
        agent, parent = self.agent_of(span)
        messages = [_input(m) for m in _messages(span.attrs.get("gen_ai.input.messages"))]
        first = next((m for m in messages if m.role == "user" and m.text), None)
        if self.b.task is None and first is not None:
            self.index.note(self.b.add("task", "user", first.text, status="ok"))
        text, calls = _output(span.attrs.get("gen_ai.output.messages"))
        tokens_in, tokens_out = span.attrs.get("gen_ai.usage.input_tokens"), span.attrs.get("gen_ai.usage.output_tokens")
        model = span.attrs.get("gen_ai.response.model") or span.attrs.get("gen_ai.request.model")
        llm = self.b.add(
            "llm_response", agent, text or ", ".join(c[0] for c in calls), model=str(model) if model else None,
            inputs={"messages": [{"role": m.role, "content": m.text} for m in messages]},
            outputs={"text": text, "tool_calls": [{"name": n, "arguments": a, "call_alias": i} for n, a, i in calls]},
            usage=TokenUsage(input_tokens=int(tokens_in or 0), output_tokens=int(tokens_out or 0))
            if tokens_in is not None else None,
            parent_step_id=parent, status=step_status(span), error=step_error(span),
            depends_on=self.index.dependencies(agent, messages, len(self.b.steps)),
        )
        add_llm_output(self.b, self.index, llm, agent, text, calls, parent)

    def tool(self, span: SpanLike) -> None:
        agent, parent = self.agent_of(span)
        name = str(span.attrs.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool ").strip())
        raw_id = str(span.attrs.get("gen_ai.tool.call.id") or "") or None
        call_id = call_key(agent, raw_id) if raw_id else None
        if call_id is None or call_id not in self.b.calls:
            arguments = span.attrs.get("gen_ai.tool.call.arguments")  # opt-in: autogen-core never writes it
            call = self.b.tool_call(agent, name, {} if arguments is None else arguments, raw_id, None,
                                    parent_step_id=parent, status="ok", metadata={"recovered_from": "tool span"},
                                    key=call_id)
            if call_id is None:
                call_id = f"{call.step_id}-call"
                self.b.calls[call_id] = call
        result = span.attrs.get("gen_ai.tool.call.result", "")
        step = self.b.tool_result([call_id], result if isinstance(result, str) else str(result),
                                  is_error=step_status(span) == "error", agent=agent, error=step_error(span),
                                  parent_step_id=parent)
        self.index.note(step)


def framework_of(spans: list[SpanLike]) -> str:
    """The one ``gen_ai.system`` a trace's spans name, else ``unknown``."""
    systems = {str(s.attrs["gen_ai.system"]) for s in spans if s.attrs.get("gen_ai.system")}
    return systems.pop() if len(systems) == 1 else "unknown"


def run_of_trace(trace_id: str, spans: list[SpanLike], where: str) -> Run | None:
    """The Run of one trace's GenAI spans; ``None`` when none is an agent, LLM or tool span."""
    tree = TraceTree(spans)
    tree.adopt(lambda s: s.attrs.get(OPERATION) == "invoke_agent")  # parents lost beside causaltrace: the agent around
    b = ChatBuilder("trace", trace_id, where, provenance="genai")
    reader = GenAIReader(tree, b)
    for span in tree.spans:
        b.source = source_of(span)
        with read_span(span):
            reader.read(span)
    if not b.steps:
        return None
    return b.build(framework=framework_of(spans), trace_id=trace_id)
