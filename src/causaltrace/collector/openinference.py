"""A Run from one trace of OpenInference spans (Phoenix's conventions; issue 23 item 1).

Usage (through ``collector.otlp``, which hands over every trace without causaltrace spans)::

    runs = load_otlp_json(Path("phoenix_export.jsonl"))     # OpenInference traces become runs too

Mapping, spans in start order (``openinference.span.kind``):

* the first ``CHAIN`` or ``AGENT`` span without an OpenInference ancestor → the ``task`` (its ``input.value``: the
  ``task`` key of a JSON object, else the text); other CHAIN spans are not steps;
* ``AGENT`` → ``agent_turn`` of the agent ``graph.node.id`` (else the span name before its first ``.``); its
  ``graph.node.parent_id`` is kept in the step's metadata (an ordering, not a data dependency);
* ``LLM`` → ``llm_response`` (agent: the nearest AGENT ancestor; ``llm.model_name``, token counts,
  ``llm.input_messages`` as inputs ``{messages}``, ``llm.output_messages`` as outputs ``{text, tool_calls}``; a
  message's text is ``message.content`` or its ``message.contents`` text parts), then
  a ``message`` of its text and a ``tool_call`` per output tool call, both ``produced_by`` it; its dependencies are
  recovered from its input messages (:mod:`causaltrace.collector.foreign_common`);
* ``TOOL`` → ``tool_response`` of ``output.value`` (``is_error`` from the span status) ``tool_result_of`` its call:
  the call id of a child ``execute_tool`` span (``gen_ai.tool.call.id``, what autogen-core writes), else the latest
  unanswered call of ``tool.name``; a TOOL span whose call no LLM span recorded also gives that ``tool_call``
  (``tool.name``; arguments: the ``kwargs`` of ``input.value``, else ``input.value``, else ``tool.parameters``), marked ``metadata["recovered_from"] = "tool span"``;
* other kinds (RETRIEVER, EMBEDDING, …) and spans of no convention are not steps;
* a failed span gives a step marked as it was (:func:`~causaltrace.collector.foreign_common.step_error`): status
  ``error`` for ERROR, or UNSET with an ``exception`` event; the error's text from the status message, else the
  event's ``exception.message``, its type from ``exception.type``; a span a reader cannot map is one
  InvalidInputError line naming it (:func:`~causaltrace.collector.foreign_common.read_span`), never a crash;
* a trace mixing conventions: a GenAI span (``gen_ai.operation.name``) is read by the GenAI rules
  (:class:`causaltrace.collector.genai.GenAIReader`, into the same run) unless an OpenInference span of the same
  role encloses it or lies inside it (``invoke_agent`` ~ AGENT, ``chat`` ~ LLM, ``execute_tool`` ~ TOOL) — so
  autogen-core's own spans, which wrap or sit under the instrumentor's, add nothing twice, and a tool or model
  call only the GenAI spans recorded is not lost.
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
    indexed,
    json_or_text,
    message_text,
    read_span,
    step_error,
    step_status,
)
from causaltrace.collector.genai import LLM_OPERATIONS, OPERATION, GenAIReader, framework_of
from causaltrace.schema import Run, Step, TokenUsage

__all__ = ["KIND", "run_of_trace"]

KIND = "openinference.span.kind"


def _role_of_operation(operation: Any) -> str | None:
    """The OpenInference kind of the same role as a GenAI operation (module docstring), or None."""
    if operation == "invoke_agent":
        return "AGENT"
    if operation == "execute_tool":
        return "TOOL"
    return "LLM" if operation in LLM_OPERATIONS else None


def _agent_name(span: SpanLike) -> str:
    node = span.attrs.get("graph.node.id")
    return str(node) if node else span.name.split(".", 1)[0]


def _content(raw: dict[str, Any]) -> str:
    """A flattened message's text: ``message.content``, else its ``message.contents.<i>.message_content.text``
    parts (what smolagents' instrumentor writes)."""
    if raw.get("message.content") is not None:
        return message_text(raw.get("message.content"))
    parts = indexed(raw, "message.contents.")
    return "\n".join(str(p["message_content.text"]) for p in parts if p.get("message_content.text"))


def _arguments(span: SpanLike) -> Any:
    """A TOOL span's call arguments: the ``kwargs`` of its ``input.value`` (smolagents), else ``input.value``,
    else ``tool.parameters``."""
    value = json_or_text(span.attrs.get("input.value"))
    if isinstance(value, dict) and isinstance(value.get("kwargs"), dict):
        return value["kwargs"]
    return value if value is not None else span.attrs.get("tool.parameters")


def _input_messages(attrs: dict[str, Any]) -> list[InputMessage]:
    out = []
    for raw in indexed(attrs, "llm.input_messages."):
        role = str(raw.get("message.role", ""))
        calls = tuple(str(c["tool_call.id"]) for c in indexed(raw, "message.tool_calls.") if "tool_call.id" in c)
        result_of = raw.get("message.tool_call_id")
        text = _content(raw)
        functions = [json_or_text(v) for k, v in sorted(raw.items()) if k.startswith("function.")]
        if functions:  # autogen's FunctionExecutionResultMessage: one JSON object per result
            for fn in functions:
                fn = fn if isinstance(fn, dict) else {"content": fn}
                out.append(InputMessage(role="tool", text=str(fn.get("content", "")), result_of=fn.get("call_id")))
            continue
        out.append(InputMessage(role=role, text=text, tool_call_ids=calls,
                                result_of=str(result_of) if result_of else None))
    return out


def _output(attrs: dict[str, Any]) -> tuple[str, list[tuple[str, Any, str | None]]]:
    texts: list[str] = []
    calls: list[tuple[str, Any, str | None]] = []
    for raw in indexed(attrs, "llm.output_messages."):
        texts.append(_content(raw))
        for call in indexed(raw, "message.tool_calls."):
            calls.append((str(call.get("tool_call.function.name", "")), call.get("tool_call.function.arguments"),
                          str(call["tool_call.id"]) if call.get("tool_call.id") else None))
    return "\n".join(t for t in texts if t), calls


class _Reader:
    """Walks one trace's spans in order and feeds the builder (mapping in the module docstring)."""

    def __init__(self, tree: TraceTree, b: ChatBuilder) -> None:
        self.tree, self.b = tree, b
        self.index = MessageIndex()
        self.turns: dict[str, Step] = {}  # AGENT span id -> its agent_turn step
        self.answered: set[str] = set()
        self.open: dict[str, list[str]] = {}  # tool name -> its calls' ids, oldest first (answered ones skipped)
        self.genai = GenAIReader(tree, b, index=self.index, turns=self.turns)
        self.kinds_below: dict[str, set[str]] = {}  # span id -> the OpenInference kinds of the spans inside it
        mixed = any(OPERATION in s.attrs and KIND not in s.attrs for s in tree.spans)
        for span in tree.spans if mixed else ():
            if span.attrs.get(KIND):
                for parent in tree.ancestors(span):
                    self.kinds_below.setdefault(parent.span_id, set()).add(str(span.attrs[KIND]))

    def covered(self, span: SpanLike) -> bool:
        """Whether an OpenInference span of the GenAI span's role encloses it or lies inside it."""
        role = _role_of_operation(span.attrs.get(OPERATION))
        if role is None:
            return True
        return role in self.kinds_below.get(span.span_id, ()) or any(p.attrs.get(KIND) == role
                                                                      for p in self.tree.ancestors(span))

    def agent_of(self, span: SpanLike) -> tuple[str, Step | None]:
        for parent in self.tree.ancestors(span):
            if parent.span_id in self.turns:
                return self.turns[parent.span_id].agent, self.turns[parent.span_id]
            if parent.attrs.get("gen_ai.agent.name"):
                return str(parent.attrs["gen_ai.agent.name"]), None
        return "agent", None

    def read(self, span: SpanLike) -> None:
        kind = span.attrs.get(KIND)
        if kind in ("CHAIN", "AGENT") and self.b.task is None and not any(KIND in p.attrs
                                                                          for p in self.tree.ancestors(span)):
            value = json_or_text(span.attrs.get("input.value"))
            task = value.get("task") if isinstance(value, dict) else value
            if isinstance(task, str) and task:
                self.index.note(self.b.add("task", "user", task, status="ok"))
        if kind == "AGENT":
            parent = span.attrs.get("graph.node.parent_id")
            self.turns[span.span_id] = self.b.add("agent_turn", _agent_name(span), "", status=step_status(span),
                                                  error=step_error(span),
                                                  metadata={"graph.node.parent_id": parent} if parent else {})
        elif kind == "LLM":
            self.llm(span)
        elif kind == "TOOL":
            self.tool(span)
        elif kind is None and OPERATION in span.attrs and not self.covered(span):
            self.genai.read(span)

    def llm(self, span: SpanLike) -> None:
        agent, turn = self.agent_of(span)
        parent = turn.step_id if turn else None
        messages = _input_messages(span.attrs)
        text, calls = _output(span.attrs)
        prompt, completion = span.attrs.get("llm.token_count.prompt"), span.attrs.get("llm.token_count.completion")
        usage = TokenUsage(input_tokens=int(prompt or 0), output_tokens=int(completion or 0)) if prompt else None
        llm = self.b.add(
            "llm_response", agent, text or ", ".join(c[0] for c in calls),
            model=str(span.attrs["llm.model_name"]) if span.attrs.get("llm.model_name") else None,
            inputs={"messages": [{"role": m.role, "content": m.text} for m in messages]},
            outputs={"text": text, "tool_calls": [{"name": n, "arguments": a, "call_alias": i} for n, a, i in calls]},
            usage=usage, parent_step_id=parent, status=step_status(span), error=step_error(span),
            depends_on=self.index.dependencies(agent, messages, len(self.b.steps)),
        )
        add_llm_output(self.b, self.index, llm, agent, text, calls, parent)
        for name, _, call_id in calls:
            if call_id:
                self.open.setdefault(name, []).append(call_id)

    def tool(self, span: SpanLike) -> None:
        agent, turn = self.agent_of(span)
        parent = turn.step_id if turn else None
        name = str(span.attrs.get("tool.name") or span.name.rsplit(".", 1)[-1])
        call_id = self._call_id(span, name)
        if call_id is None:
            arguments = _arguments(span)
            call = self.b.tool_call(agent, name, arguments, None, None, parent_step_id=parent, status="ok",
                                    metadata={"recovered_from": "tool span"})
            call_id = f"{call.step_id}-call"
            self.b.calls[call_id] = call
        self.answered.add(call_id)
        output = span.attrs.get("output.value", "")
        result = self.b.tool_result([call_id], output if isinstance(output, str) else str(output),
                                    is_error=step_status(span) == "error", agent=agent, error=step_error(span),
                                    parent_step_id=parent)
        self.index.note(result)

    def _call_id(self, span: SpanLike, name: str) -> str | None:
        for child in self.tree.children.get(span.span_id, ()):
            call_id = child.attrs.get("gen_ai.tool.call.id")
            if call_id and str(call_id) in self.b.calls:
                return str(call_id)
        pending = self.open.get(name, [])
        while pending and pending[-1] in self.answered:  # each id is popped once: linear in the trace
            pending.pop()
        return pending[-1] if pending else None


def run_of_trace(trace_id: str, spans: list[SpanLike], where: str) -> Run | None:
    """The Run of one trace's OpenInference spans; ``None`` when none of them is an AGENT, LLM or TOOL span."""
    tree = TraceTree(spans)
    b = ChatBuilder("trace", trace_id, where, provenance="openinference")
    reader = _Reader(tree, b)
    for span in tree.spans:
        with read_span(span):
            reader.read(span)
    if not any(s.kind != "task" for s in b.steps):
        return None
    return b.build(framework=framework_of(spans), trace_id=trace_id)
