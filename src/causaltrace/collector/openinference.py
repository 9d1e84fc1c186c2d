"""A Run from one trace of OpenInference spans (Phoenix's conventions; issue 23 item 1).

Usage (through ``collector.otlp``, which hands over every trace without causaltrace spans)::

    runs = load_otlp_json(Path("phoenix_export.jsonl"))     # OpenInference traces become runs too

Mapping, spans in start order (``openinference.span.kind``):

* the first ``CHAIN`` or ``AGENT`` span without an OpenInference ancestor → the ``task`` (its ``input.value``: the
  ``task`` key of a JSON object, else the text); other CHAIN spans are not steps;
* ``AGENT`` → ``agent_turn`` of the agent ``graph.node.id`` (else the name smolagents' managed-agent prompt gives,
  else the span name before its first ``.``); its
  ``graph.node.parent_id`` is kept in the step's metadata (an ordering, not a data dependency);
* ``LLM`` → ``llm_response`` (agent: the nearest AGENT ancestor; ``llm.model_name``, token counts,
  ``llm.input_messages`` as inputs ``{messages}``, ``llm.output_messages`` as outputs ``{text, tool_calls}``; a
  message's text is ``message.content`` or its ``message.contents`` text parts), then
  a ``message`` of its text and a ``tool_call`` per output tool call, both ``produced_by`` it; its dependencies are
  recovered from its input messages (:mod:`causaltrace.collector.foreign_common`);
* ``TOOL`` → ``tool_response`` of ``output.value`` (``is_error`` from the span status) ``tool_result_of`` its call:
  the call id of a child ``execute_tool`` span (``gen_ai.tool.call.id``, what autogen-core writes), else the latest
  unanswered call of ``tool.name``; a TOOL span whose call no LLM span recorded also gives that ``tool_call``
  (``tool.name``; arguments: smolagents' ``{"args", "kwargs"}`` of ``input.value`` with positional arguments named by
  ``tool.parameters``, else ``input.value``, else ``tool.parameters``), marked ``metadata["recovered_from"] =
  "tool span"``;
* smolagents (:mod:`~causaltrace.collector.span_smolagents`): a CodeAgent's model output inside a ``Step N`` CHAIN
  span gives its thought (``reasoning``), its code (a ``python_interpreter`` ``tool_call``) and the code's run (a
  ``code_execution`` of the step's ``output.value``, marked as the step span was), and the TOOL spans and managed
  agents run inside that step are calls ``produced_by`` it; a managed agent's AGENT span (below its manager's, or
  — its parent lost — inside a manager that lists it in ``smolagents.managed_agents.<i>.name``) is its manager's
  call of it (the call the manager's model made, else one recovered), its ``task`` ``delegated_by`` that call and,
  when the span ends, that call's result (``output.value``); a ``final_answer`` tool's result is also the agent's
  ``final_answer``; ``tool-call`` / ``tool-response`` messages are read for their call ids and results; calls are
  paired with results per agent (two agents' models may give the same ids);
* AutoGen AgentChat (:mod:`~causaltrace.collector.span_autogen`): a model call in a team's run (``<Team>.run_stream``
  CHAIN span) but in no agent's turn is the team manager's (``SelectorGroupChatManager``,
  ``MagenticOneOrchestrator``…); when the team span ends, its ``TaskResult`` gives the run's ``final_answer``
  (``answer_of`` the message that said it) as AutoGen's run ended; a tool result the framework told the model had
  failed (``is_error`` in the next request) is marked ``error``; a prompt that quotes earlier messages verbatim
  (a selector's) ``saw`` them;
* a span whose parent is missing — traced beside causaltrace, whose spans become the current context, or cut — is
  adopted by the AGENT / CHAIN span around it in time (of two managed agents running in parallel, the one its
  model calls name) before the mapping above;
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

import heapq
from typing import Any

from causaltrace.collector.chatlog_build import ChatBuilder
from causaltrace.collector.foreign_common import (
    InputMessage,
    MessageIndex,
    SpanLike,
    TraceTree,
    add_llm_output,
    call_key,
    indexed,
    json_or_text,
    message_text,
    read_span,
    source_of,
    step_error,
    step_status,
)
from causaltrace.collector.foreign_roster import roster_of_trace
from causaltrace.collector.genai import LLM_OPERATIONS, OPERATION, GenAIReader, framework_of
from causaltrace.collector.span_autogen import (
    ORCHESTRATOR,
    final_answer,
    handoff_target,
    ledger_answer,
    ledger_of,
    manager_of_team,
    team_name,
)
from causaltrace.collector.span_smolagents import (
    STEP_SPAN,
    code_of,
    managed_agent,
    managed_task,
    observation_parts,
    positional_arguments,
    smolagents_message,
)
from causaltrace.schema import Dependency, Run, Step, StepError, TokenUsage

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
    """``graph.node.id``, else the name smolagents' managed-agent prompt gives (``input.value``), else the span
    name before its first ``.`` (``<name or class>.run``)."""
    node = span.attrs.get("graph.node.id")
    if node:
        return str(node)
    value = json_or_text(span.attrs.get("input.value"))
    return managed_agent(value.get("task") if isinstance(value, dict) else value) or span.name.split(".", 1)[0]


def _managed_names(span: SpanLike) -> set[str]:
    """The names of the managed agents an AGENT span lists (``smolagents.managed_agents.<i>.name``)."""
    return {str(v) for k, v in span.attrs.items() if k.startswith("smolagents.managed_agents.") and k.endswith(".name")}


def _content(raw: dict[str, Any]) -> str:
    """A flattened message's text: ``message.content``, else its ``message.contents.<i>.message_content.text``
    parts (what smolagents' instrumentor writes)."""
    if raw.get("message.content") is not None:
        return message_text(raw.get("message.content"))
    parts = indexed(raw, "message.contents.")
    return "\n".join(str(p["message_content.text"]) for p in parts if p.get("message_content.text"))


def _arguments(span: SpanLike) -> Any:
    """A TOOL span's call arguments: smolagents' ``{"args", "kwargs"}`` of its ``input.value`` (positional ones
    named by ``tool.parameters``), else ``input.value``, else ``tool.parameters``."""
    value = json_or_text(span.attrs.get("input.value"))
    if value is not None:
        return positional_arguments(value, span.attrs.get("tool.parameters"))
    return span.attrs.get("tool.parameters")


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
                out.append(InputMessage(role="tool", text=str(fn.get("content", "")), result_of=fn.get("call_id"),
                                        is_error=fn.get("is_error") is True))
            continue
        if role in ("tool-call", "tool-response", "user"):  # smolagents' roles and prefixes
            role, text, ids, answered = smolagents_message(role, text)
            calls, result_of = calls or ids, result_of or answered
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
        self.open: dict[tuple[str, str], list[str]] = {}  # (agent, tool) -> its calls' ids, oldest first
        self.code: dict[str, Step] = {}  # smolagents "Step N" span id -> the code_execution of its code
        self.later: list[tuple[int, int, Any]] = []  # (end time, order, action): what happens when a span ends
        self.plain, self.answered_request = 0, False  # MagenticOne's orchestrator: its outputs so far
        self.handoffs: dict[str, Step] = {}  # agent -> the handoff its next turn starts from
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
            team = team_name(parent.name) if parent.attrs.get(KIND) == "CHAIN" else None
            if team is not None:  # in a team's run, in no agent's turn: the team's manager
                return manager_of_team(team), None
        return "agent", None

    def flush(self, until: int | None = None) -> None:
        """Run the actions due when spans ended (at or before ``until``; all when None), in end order."""
        while self.later and (until is None or self.later[0][0] <= until):
            heapq.heappop(self.later)[2]()

    def step_span(self, span: SpanLike) -> SpanLike | None:
        """The nearest smolagents ``Step N`` CHAIN span enclosing ``span`` (below its agent), or None."""
        for parent in self.tree.ancestors(span):
            if parent.attrs.get(KIND) == "AGENT":
                return None
            if parent.attrs.get(KIND) == "CHAIN" and STEP_SPAN.fullmatch(parent.name):
                return parent
        return None

    def manager_of(self, span: SpanLike, name: str) -> SpanLike | None:
        """The AGENT span that ran ``span``'s agent as a managed agent: its nearest AGENT ancestor, else (the
        parents missing: traced beside another instrumentor, or cut) the innermost AGENT span that lists ``name``
        among its managed agents and encloses it in time."""
        for parent in self.tree.ancestors(span):
            if parent.attrs.get(KIND) == "AGENT":
                return parent
        if span.parent_span_id is None:
            return None
        around = [a for a in self.tree.spans if a.span_id in self.turns and name in _managed_names(a)
                  and a.start <= span.start and (not a.end or not span.end or span.end <= a.end)]
        return max(around, key=lambda a: a.start) if around else None

    def read(self, span: SpanLike) -> None:
        kind = span.attrs.get(KIND)
        if kind == "CHAIN" and team_name(span.name) and not any(KIND in p.attrs for p in self.tree.ancestors(span)):
            self.later_at(span, lambda: self.team_answer(span))
        if kind in ("CHAIN", "AGENT") and self.b.task is None and not any(KIND in p.attrs
                                                                          for p in self.tree.ancestors(span)):
            value = json_or_text(span.attrs.get("input.value"))
            task = value.get("task") if isinstance(value, dict) else value
            if isinstance(task, str) and task:
                self.index.note(self.b.add("task", "user", task, status="ok"))
        if kind == "AGENT":
            self.agent(span)
        elif kind == "LLM":
            self.llm(span)
        elif kind == "TOOL":
            self.tool(span)
        elif kind is None and OPERATION in span.attrs and not self.covered(span):
            self.genai.read(span)

    def agent(self, span: SpanLike) -> None:
        """An ``agent_turn``; a smolagents managed agent's run is also its manager's call of it (the call its
        manager's model made, else one recovered from the run), its task ``delegated_by`` that call, and, when it
        ends, the result of that call."""
        name, node_parent = _agent_name(span), span.attrs.get("graph.node.parent_id")
        manager = self.manager_of(span, name) if span.span_id not in self.turns else None
        call: Step | None = None
        if manager is not None and name in _managed_names(manager) and manager.span_id in self.turns:
            boss = self.turns[manager.span_id]
            call_id = self.pending(boss.agent, name)
            if call_id is None:
                value = json_or_text(span.attrs.get("input.value"))
                prompt = value.get("task") if isinstance(value, dict) else value
                call = self.b.tool_call(boss.agent, name, {"task": managed_task(str(prompt or ""))}, None,
                                        self.running_code(span, boss.agent),
                                        parent_step_id=boss.step_id, status="ok",
                                        metadata={"recovered_from": "agent span"})
                call_id = f"{call.step_id}-call"
                self.b.calls[call_id] = call
            call = self.b.calls[call_id]
            self.answered.add(call_id)
            self.later_at(span, lambda: self.managed_result(span, boss, call_id))
        handoff = self.handoffs.pop(name, None)
        self.turns[span.span_id] = self.b.add("agent_turn", name, "", status=step_status(span),
                                              error=step_error(span),
                                              metadata={"graph.node.parent_id": node_parent} if node_parent else {},
                                              depends_on=(Dependency(step_id=handoff.step_id, kind="handoff_from"),)
                                              if handoff is not None else ())
        if call is not None:
            value = json_or_text(span.attrs.get("input.value"))
            task = value.get("task") if isinstance(value, dict) else value
            self.index.note(self.b.add("task", name, str(task or ""), status="ok",
                                       parent_step_id=self.turns[span.span_id].step_id,
                                       depends_on=(Dependency(step_id=call.step_id, kind="delegated_by"),)))

    def running_code(self, span: SpanLike, agent: str) -> Step | None:
        """The code_execution of ``agent`` whose step span holds ``span`` (by ancestry, else by time: the managed
        agent's own span may have lost its parent), or None."""
        step = self.step_span(span)
        if step is not None:
            return self.code.get(step.span_id)
        around = [self.tree.by_id[i] for i, run in self.code.items() if run.agent == agent and i in self.tree.by_id]
        around = [s for s in around if s.start <= span.start and (not s.end or not span.end or span.end <= s.end)]
        return self.code[max(around, key=lambda s: s.start).span_id] if around else None

    def team_answer(self, span: SpanLike) -> None:
        """An AutoGen team run's final answer (:func:`~causaltrace.collector.span_autogen.final_answer`),
        ``answer_of`` the message step that said it."""
        answer = final_answer(json_or_text(span.attrs.get("output.value")))
        if answer is None:
            return
        agent, text = answer
        said = next((s for s in reversed(self.b.steps) if s.kind == "message" and s.agent == agent), None)
        self.b.text("final_answer", agent, text, status="ok",
                    depends_on=(Dependency(step_id=said.step_id, kind="answer_of"),) if said else ())

    def failed_results(self, agent: str, messages: list[InputMessage]) -> None:
        """Tool results an agent's model was told had failed (AutoGen's ``is_error``), marked as they were."""
        for message in messages:
            result = self.index.results.get(call_key(agent, message.result_of or "")) if message.is_error else None
            if result is not None and result.status == "ok":
                failed = result.model_copy(update={
                    "status": "error", "outputs": {**result.outputs, "is_error": True},
                    "error": StepError(type="ToolError", message=result.content[:2000])})
                self.b.steps[result.index] = failed
                self.index.note(failed)

    def later_at(self, span: SpanLike, action: Any) -> None:
        """Do ``action`` when ``span`` ends (its steps come from that span)."""

        def run() -> None:
            self.b.source = source_of(span)
            action()

        heapq.heappush(self.later, (span.end or span.start, len(self.b.steps) * 1000 + len(self.later), run))

    def managed_result(self, span: SpanLike, boss: Step, call_id: str) -> None:
        output = span.attrs.get("output.value", "")
        self.index.note(self.b.tool_result([call_id], output if isinstance(output, str) else str(output),
                                           is_error=step_status(span) == "error", agent=boss.agent,
                                           error=step_error(span), parent_step_id=boss.step_id))

    def pending(self, agent: str, name: str) -> str | None:
        """The latest unanswered call of tool ``name`` that ``agent``'s model made, or None."""
        waiting = self.open.get((agent, name), [])
        while waiting and waiting[-1] in self.answered:  # each id is popped once: linear in the trace
            waiting.pop()
        return waiting[-1] if waiting else None

    def orchestrator(self, llm: Step, agent: str, text: str, parent: str | None) -> None:
        """MagenticOne's orchestrator's output (:mod:`~causaltrace.collector.span_autogen`): its plan, the next
        speaker and instruction of a progress ledger, or the final answer's message; its facts give no step."""
        made = (Dependency(step_id=llm.step_id, kind="produced_by"),)
        ledger = ledger_of(text)
        if ledger is not None:
            self.plain = 0
            satisfied = ledger_answer(ledger, "is_request_satisfied") is True
            self.answered_request = satisfied
            speaker, instruction = ledger_answer(ledger, "next_speaker"), ledger_answer(ledger, "instruction_or_question")
            if not satisfied and speaker:
                self.b.text("speaker_selection", agent, str(speaker), parent_step_id=parent, status="ok", depends_on=made)
            if not satisfied and instruction:
                self.index.note(self.b.text("message", agent, str(instruction), parent_step_id=parent, status="ok",
                                            depends_on=made), llm)
        elif self.answered_request:
            add_llm_output(self.b, self.index, llm, agent, text, [], parent)
        else:
            self.plain += 1
            if self.plain == 2:  # facts, then the plan (again after a re-plan)
                self.index.note(self.b.text("planning", agent, text, parent_step_id=parent, status="ok",
                                            depends_on=made), llm)

    def code_step(self, span: SpanLike, llm: Step, agent: str, text: str, parent: str | None) -> bool:
        """A smolagents CodeAgent's model output in a ``Step N`` span: its thought (``reasoning``), its code (a
        ``python_interpreter`` call) and the code's run (``code_execution`` of the step's observations, marked as
        the step span was). False when the output holds no code or sits in no step span."""
        step = self.step_span(span)
        code = code_of(text) if step is not None else None
        if step is None or code is None:
            return False
        thought, source = code
        if thought:
            self.b.text("reasoning", agent, thought, parent_step_id=parent, status="ok",
                        depends_on=(Dependency(step_id=llm.step_id, kind="produced_by"),))
        call = self.b.tool_call(agent, "python_interpreter", {"code": source}, None, llm, parent_step_id=parent,
                                status="ok")
        observed = step.attrs.get("output.value")
        observed = observed if isinstance(observed, str) else "" if observed is None else str(observed)
        stdout, result = observation_parts(observed)
        status = step_status(step)
        execution = self.b.add("code_execution", agent, observed, parent_step_id=parent, status=status,
                               error=step_error(step), outputs={"stdout": stdout, "result": result,
                                                                "is_error": status == "error"},
                               depends_on=(Dependency(step_id=call.step_id, kind="executes"),))
        self.code[step.span_id] = execution
        self.index.note(execution)
        self.index.texts[text.strip()] = llm  # the next request quotes the whole output: it continues this call
        return True

    def llm(self, span: SpanLike) -> None:
        agent, turn = self.agent_of(span)
        parent = turn.step_id if turn else None
        messages = _input_messages(span.attrs)
        self.failed_results(agent, messages)
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
        if agent == ORCHESTRATOR and not calls:
            self.orchestrator(llm, agent, text, parent)
        elif calls or not self.code_step(span, llm, agent, text, parent):
            add_llm_output(self.b, self.index, llm, agent, text, calls, parent)
        for name, _, call_id in calls:
            if call_id:
                self.open.setdefault((agent, name), []).append(call_key(agent, call_id))

    def tool(self, span: SpanLike) -> None:
        agent, turn = self.agent_of(span)
        parent = turn.step_id if turn else None
        name = str(span.attrs.get("tool.name") or span.name.rsplit(".", 1)[-1])
        call_id = self._call_id(span, agent, name)
        if call_id is None:
            by = self.code.get(getattr(self.step_span(span), "span_id", ""))
            call = self.b.tool_call(agent, name, _arguments(span), None, by, parent_step_id=parent, status="ok",
                                    metadata={"recovered_from": "tool span"})
            call_id = f"{call.step_id}-call"
            self.b.calls[call_id] = call
        self.answered.add(call_id)
        output = span.attrs.get("output.value", "")
        result = self.b.tool_result([call_id], output if isinstance(output, str) else str(output),
                                    is_error=step_status(span) == "error", agent=agent, error=step_error(span),
                                    parent_step_id=parent)
        self.index.note(result)
        target = handoff_target(name) if result.status == "ok" else None
        if target is not None:  # an AutoGen handoff: the next turn of the target starts from it
            call = self.b.calls[call_id]
            maker = next((d.step_id for d in call.depends_on if d.kind == "produced_by"), None)
            handoff = self.b.text("handoff", agent, result.content, parent_step_id=parent, status="ok",
                                  depends_on=(Dependency(step_id=maker, kind="produced_by"),) if maker else ())
            self.index.note(handoff)
            self.handoffs[target] = handoff
        if name == "final_answer" and result.status == "ok":  # smolagents' answer: the agent's final_answer
            call = self.b.calls[call_id]
            maker = next((d.step_id for d in call.depends_on if d.kind == "produced_by"), None)
            deps = ((Dependency(step_id=maker, kind="produced_by"),) if maker else ()) + (
                Dependency(step_id=result.step_id, kind="answer_of"),)
            self.index.note(self.b.text("final_answer", agent, result.content, parent_step_id=parent, status="ok",
                                        depends_on=deps))

    def _call_id(self, span: SpanLike, agent: str, name: str) -> str | None:
        for child in self.tree.children.get(span.span_id, ()):
            call_id = child.attrs.get("gen_ai.tool.call.id")
            if call_id and call_key(agent, str(call_id)) in self.b.calls:
                return call_key(agent, str(call_id))
        return self.pending(agent, name)


def _owner(span: SpanLike, around: list[SpanLike], tree: TraceTree) -> SpanLike | None:
    """Of the spans enclosing a span whose parent is lost, the AGENT span of the agent its model calls name
    (smolagents' managed-agent prompt in their first messages): two managed agents running in parallel overlap."""
    agents = [a for a in around if a.attrs.get(KIND) == "AGENT"]
    if len(agents) < 2:
        return None
    for llm in (span, *tree.children.get(span.span_id, ())):
        for raw in indexed(llm.attrs, "llm.input_messages.")[:3]:
            name = managed_agent(_content(raw))
            if name is not None:
                return next((a for a in reversed(agents) if _agent_name(a) == name), None)
    return None


def run_of_trace(trace_id: str, spans: list[SpanLike], where: str) -> Run | None:
    """The Run of one trace's OpenInference spans; ``None`` when none of them is an AGENT, LLM or TOOL span."""
    tree = TraceTree(spans)
    # traced beside causaltrace (or cut), spans lose their parents: they are adopted by the spans around them
    tree.adopt(lambda s: s.attrs.get(KIND) in ("AGENT", "CHAIN"), lambda s, around: _owner(s, around, tree))
    b = ChatBuilder("trace", trace_id, where, provenance="openinference")
    reader = _Reader(tree, b)
    for span in tree.spans:
        with read_span(span):
            reader.flush(span.start)  # what the spans that ended before this one started left to do
            b.source = source_of(span)
            reader.read(span)
    reader.flush()
    if not any(s.kind != "task" for s in b.steps):
        return None
    roster = roster_of_trace(tree, _agent_name)  # what each agent can do, as a live run stores it
    if roster:
        b.metadata["roster"] = roster
    return b.build(framework=framework_of(spans), trace_id=trace_id)
