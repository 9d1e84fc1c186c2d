"""The state of one smolagents agent run and the Steps it emits (the hooks in ``instrumentation/smolagents.py`` feed
it events; ARCHITECTURE "Steps" and "Recording" say what comes out).

One :class:`AgentRun` exists per ``MultiStepAgent.run`` call — the top-level agent's and every managed agent's —
and lives in the ``_STATE`` context variable while that run executes (copied into smolagents' parallel tool-call
threads and, through the patched ``timeout`` decorator, into the CodeAgent executor's thread). Everything that is
specific to one action step (the llm_response, its tool calls, the code execution, a pending final answer) is kept
on the AgentRun, because one agent run executes its action steps one after the other; the only concurrent entry
points (parallel tool calls, and the tools / managed agents running code calls) take ``_lock``.

Design decisions written here because ARCHITECTURE leaves them open:

* ``Step.agent`` is the agent's own name (the root's class name when it has none); the ``/``-joined ``agent_key``
  the Recording uses is on the ``agent_turn``'s metadata and on every recorded call.
* The top-level run starts with ``task`` (agent ``user``, a user input) and then the ``agent_turn``. A managed run
  starts with its ``agent_turn`` (parent: the manager's tool_call) and then its ``task`` inside it (agent: the
  managed agent, ``delegated_by`` that tool_call).
* A tool call's span lasts while the tool runs: the ``tool_call`` step ends when the tool returns, and its
  ``tool_response`` starts then. A tool that raises gives an ERROR ``tool_response``; the ``tool_call`` itself is OK
  (the model's call was well-formed; what failed is reported once, on the response).
* ``final_answer`` in both agent types is first a ``tool_call`` (+ ``tool_response``) — the model's/code's call of
  the ``final_answer`` tool — then a ``final_answer`` step (``produced_by`` the llm_response or the code_execution,
  ``answer_of`` that tool_response). A rejection by ``final_answer_checks`` ends the ``final_answer`` step with
  ERROR; the next llm_response ``observed`` it.
* An AgentError the agent recovers from that no step carries (a parsing error…) becomes an ``error`` step
  ``produced_by`` the llm_response, which the next llm_response ``observed``. Max steps: an ``error`` step
  (AgentMaxStepsError) before smolagents' forced final-answer call, the forced ``final_answer`` (metadata
  ``forced``), the ``agent_turn`` ends with ERROR and the run stops with ``limit``. An exception that ends the run:
  an ``error`` step and ERROR on the ``agent_turn``.
* The Recording: one ``llm`` entry per model call (response = the PARSED ChatMessage, raw payload dropped, served
  back as a ChatMessage); one ``tool`` entry per tool call, per managed-agent call (settings ``managed_agent``) and
  per code execution (``python_interpreter``, response a ``CodeOutput``, settings ``code_execution``). Tool ordinals
  are reserved in the model's / code's call order, before any thread starts.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from causaltrace.instrumentation import _runtime
from causaltrace.instrumentation._runtime import CallHandle, RunContext, StepHandle
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.schema import StepError

logger = logging.getLogger("causaltrace")

#: The agent run executing in this context.
_STATE: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar("causaltrace_smol_state", default=None)
#: The manager's call that is about to run a managed agent (read by the managed agent's run).
_INVOKER: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar("causaltrace_smol_invoker", default=None)
#: Set while a tool of this agent run executes: nested tool / model calls inside it are not the agent's own steps.
_IN_TOOL: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar("causaltrace_smol_in_tool", default=None)
#: Set while a hooked model call runs (a model calling another hooked model gives one llm_response).
_IN_MODEL: contextvars.ContextVar[bool] = contextvars.ContextVar("causaltrace_smol_in_model", default=False)

_MAX_CONTENT = 100_000

#: Tools and managed agents that running CodeAgent code can call, by object id. A call from a thread the code
#: started itself (no copied context) is attributed to the one agent run whose running code can call that object.
_CODE_CALLEES: dict[int, list[AgentRun]] = {}
_CALLEES_LOCK = threading.Lock()


def code_caller_of(obj: Any) -> AgentRun | None:
    """The agent run whose running code can call ``obj`` (None when there is none, or more than one)."""
    with _CALLEES_LOCK:
        runs = _CODE_CALLEES.get(id(obj))
        return runs[0] if runs and len(runs) == 1 else None


def guard(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run our own bookkeeping; a failure is logged and swallowed (the user's run goes on)."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        logger.warning("causaltrace: internal error in the smolagents adapter (%s); the run continues",
                       getattr(fn, "__qualname__", fn), exc_info=True)
        return None


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text[:_MAX_CONTENT]


def _call_text(name: str, arguments: Any) -> str:
    return f"{name}({json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)})"


@dataclass
class Invocation:
    """A manager's call that runs a managed agent; the managed run writes its final_answer step id back."""

    tool_call: StepHandle
    parent: AgentRun
    target: str
    answer_step_id: str | None = None


@dataclass
class ToolRec:
    """One tool call of the current action step (or of the running code)."""

    step: StepHandle
    ordinal: int | None
    name: str
    raw_arguments: Any
    arguments: dict[str, Any]
    call_id: str | None = None
    claimed: bool = False


@dataclass
class LLMRec:
    """A model call in flight."""

    step: StepHandle
    call: CallHandle | None
    phase: str


@dataclass
class _ActionState:
    """What belongs to the action step being executed."""

    memory_step: Any = None
    llm: LLMRec | None = None
    pending_message: Any = None  # a ToolCallingAgent response whose tool calls smolagents still has to parse
    tools: list[ToolRec] = field(default_factory=list)
    code_exec: StepHandle | None = None
    code_call: CallHandle | None = None
    final_step: StepHandle | None = None
    final_tool_response: str | None = None
    accounted: set[int] = field(default_factory=set)


class AgentRun:
    """One smolagents agent run (top-level or managed): its steps, dependencies and recorded calls."""

    def __init__(
        self,
        ctx: RunContext,
        agent: Any,
        *,
        owned: bool,
        parent: AgentRun | None,
        invocation: Invocation | None,
        task: str | None,
    ) -> None:
        self.ctx = ctx
        self.agent = agent
        self.owned = owned
        self.parent = parent
        self.invocation = invocation
        self.task = task
        self.name = acc.agent_name(agent)
        self.key = f"{parent.key}/{self.name}" if parent is not None else self.name
        self.code_agent = acc.is_code_agent(agent)
        self.tool_calling = acc.is_tool_calling_agent(agent)
        self._lock = threading.RLock()
        self.saw: list[str] = []
        self.observed: list[str] = []
        self.prev_llm: str | None = None
        self.known_ids: list[str] = []
        self._pattern: Any = None
        self._pattern_size = -1
        self.phase = "action"
        self.act = _ActionState()
        self.planning_llm: str | None = None
        self.final_llm: str | None = None
        self.last_action_step: Any = None
        self.accepted = False
        self.answer_step_id: str | None = None
        self.output: Any = None
        self.stop = "normal"
        self.closed = False
        self.observing = False
        self.turn: StepHandle | None = None
        self.task_step: StepHandle | None = None
        self._callees: list[int] = []

    # -- context ---------------------------------------------------------------------------------------------------

    def entered(self, *, force: bool = False) -> AbstractContextManager[Any]:
        """Make this agent run current (its run, its agent_turn span); a no-op when it already is."""
        if not force and _STATE.get() is self:
            return nullcontext()
        values = ((_STATE, self), (_INVOKER, None), (_IN_TOOL, None))
        if self.owned:
            return _runtime.run_scope(self.ctx, *values, step=self.turn)
        if self.turn is not None:
            return self.turn.activate(*values)
        return _runtime.Scope(values)

    def _step(self, kind: str, **fields: Any) -> StepHandle:
        handle = self.ctx.start_step(kind, agent=self.name, parent=self.turn, **fields)
        if handle is None:
            raise RuntimeError(f"could not start a {kind} step")
        return handle

    def _observe(self, step_id: str) -> None:
        with self._lock:
            self.observed.append(step_id)

    def pattern(self) -> Any:
        with self._lock:
            if self._pattern_size != len(self.known_ids):
                self._pattern = acc.call_id_pattern(self.known_ids)
                self._pattern_size = len(self.known_ids)
            return self._pattern

    # -- start -------------------------------------------------------------------------------------------------------

    def start(self) -> None:
        meta = {"agent_key": self.key, "agent_class": type(self.agent).__name__,
                "max_steps": getattr(self.agent, "max_steps", None)}
        if self.parent is None:
            self.task_step = self.ctx.start_step(
                "task", agent="user", content=_text(self.task), metadata={"user_input": True}
            )
            if self.task_step is not None:
                self.task_step.end()
            self.turn = self.ctx.start_step("agent_turn", agent=self.name, content=f"{self.name} runs",
                                            metadata=meta)
        else:
            inv = self.invocation
            meta["delegated_by_agent"] = self.parent.name
            self.turn = self.ctx.start_step(
                "agent_turn", agent=self.name, parent=inv.tool_call if inv else self.parent.turn,
                content=f"{self.name} runs", metadata=meta,
            )
            self.task_step = self._step(
                "task", content=_text(self.task),
                depends_on=[(inv.tool_call.step_id, "delegated_by")] if inv else (),
                metadata={"delegated_by_agent": self.parent.name},
            )
            self.task_step.end()
        if self.task_step is not None:
            self.saw.append(self.task_step.step_id)

    # -- model calls -----------------------------------------------------------------------------------------------

    def llm_start(self, model: Any, messages: Any, stop: Any, response_format: Any, tools: Any,
                  extra: dict[str, Any]) -> LLMRec:
        phase = self.phase
        with self._lock:
            deps: list[tuple[str, str]] = [(self.prev_llm, "continues")] if self.prev_llm else []
            deps += [(s, "saw") for s in self.saw] + [(o, "observed") for o in self.observed]
            self.saw.clear()
            self.observed.clear()
        request = acc.llm_request(messages or [], stop, response_format, tools, extra)
        call = self.ctx.begin_call(self.key, "llm", request, settings=acc.model_settings(model),
                                   call_id_pattern=self.pattern())
        if call is not None:
            inputs: dict[str, Any] = {
                "recording": {"agent_key": self.key, "kind": "llm", "ordinal": call.ordinal,
                              "request_hash": call.request_hash},
                "message_count": len(messages or []),
            }
        else:
            inputs = {"messages": request["messages"]}
        step = self._step("llm_response", depends_on=deps, model=acc.model_name(model), inputs=inputs,
                          metadata={"phase": phase} if phase != "action" else None)
        if call is not None:
            call.step_id = step.step_id
        self.prev_llm = step.step_id
        rec = LLMRec(step, call, phase)
        if phase == "action":
            self.act.llm = rec
        elif phase == "planning":
            self.planning_llm = step.step_id
        else:
            self.final_llm = step.step_id
        return rec

    def llm_end(self, rec: LLMRec, message: Any) -> None:
        if rec.phase == "action" and self.tool_calling and not getattr(message, "tool_calls", None):
            # smolagents parses the tool calls out of the text next: record the PARSED message (at the first
            # ToolCall, or when the step ends) so a replay serves the same ids.
            self.act.pending_message = message
            return
        self._complete_llm(rec, message)

    def llm_error(self, rec: LLMRec, error: BaseException) -> None:
        rec.step.end(error=error)
        if rec.call is not None:
            rec.call.finish(error=error)

    def _complete_llm(self, rec: LLMRec, message: Any) -> None:
        calls = acc.message_tool_calls(message)
        with self._lock:
            self.known_ids.extend(c["id"] for c in calls if c["id"])
        text = acc.message_text(message)
        usage = getattr(message, "token_usage", None)
        outputs = {
            "text": text,
            "tool_calls": [{"name": c["name"], "arguments": c["arguments"], "call_alias": f"call#{i}", "id": c["id"]}
                           for i, c in enumerate(calls)],
        }
        content = text or "\n".join(_call_text(c["name"], c["arguments"]) for c in calls)
        rec.step.end(
            content=_text(content),
            outputs=outputs,
            usage=(int(usage.input_tokens), int(usage.output_tokens)) if usage is not None else None,
        )
        if rec.call is not None:
            rec.call.finish(acc.chat_message_copy(message))
        if rec.phase == "action":
            thought = acc.reasoning_text(self.agent, message)
            if thought:
                self._step("reasoning", content=_text(thought), outputs={"text": thought},
                           depends_on=[(rec.step.step_id, "produced_by")]).end()

    def _flush_llm(self) -> None:
        act = self.act
        if act.pending_message is not None and act.llm is not None:
            message, act.pending_message = act.pending_message, None
            self._complete_llm(act.llm, message)

    # -- phases -------------------------------------------------------------------------------------------------------

    def on_step_stream(self, memory_step: Any) -> None:
        if self.act.memory_step is not None and self.act.memory_step is not memory_step:
            self._end_action(None)
        self.act.memory_step = memory_step
        self.phase = "action"

    def on_max_steps(self) -> None:
        """smolagents is about to force a final answer: the step budget is spent."""
        self._flush_llm()
        self.stop = "limit"
        step = self._step("error", content="AgentMaxStepsError: Reached max steps.",
                          metadata={"max_steps": getattr(self.agent, "max_steps", None)})
        step.end(error=StepError(type="AgentMaxStepsError", message="Reached max steps."))
        self._observe(step.step_id)

    # -- items of the run's stream ------------------------------------------------------------------------------------

    def on_item(self, item: Any) -> None:
        s = acc.smol()
        if isinstance(item, s.ChatMessageStreamDelta):
            return
        if isinstance(item, s.ToolCall):
            self._on_tool_call(item)
        elif isinstance(item, s.ToolOutput):
            self._on_tool_output(item)
        elif isinstance(item, s.ActionOutput):
            self._on_action_output(item)
        elif isinstance(item, s.ActionStep):
            if item is not self.last_action_step:
                self.last_action_step = item
                self._end_action(item)
        elif isinstance(item, s.PlanningStep):
            self._on_planning(item)
        elif isinstance(item, s.FinalAnswerStep):
            self._on_final_answer(item)

    def _on_tool_call(self, tc: Any) -> None:
        self._flush_llm()
        act = self.act
        with self._lock:
            if tc.id:
                self.known_ids.append(str(tc.id))
        produced = [(act.llm.step.step_id, "produced_by")] if act.llm is not None else []
        if self.code_agent and tc.name == "python_interpreter":
            code = tc.arguments if isinstance(tc.arguments, str) else json.dumps(acc.jsonable(tc.arguments))
            call_step = self._step("tool_call", tool_name="python_interpreter", arguments={"code": code},
                                   call_id=str(tc.id), content=_text(code), depends_on=produced)
            call_step.end()
            ordinal = self.ctx.reserve_ordinals(self.key, "tool", 1)
            act.code_exec = self._step("code_execution", inputs={"code": code}, call_id=str(tc.id),
                                       content=_text(code), depends_on=[(call_step.step_id, "executes")])
            self._register_callees()
            act.code_call = self.ctx.begin_call(
                self.key, "tool", {"name": "python_interpreter", "arguments": {"code": code}},
                ordinal=ordinal[0] if ordinal else None, settings={"code_execution": True},
                step_id=act.code_exec.step_id,
            )
            return
        arguments = acc.tool_arguments_from_call(tc.arguments)
        ordinal = self.ctx.reserve_ordinals(self.key, "tool", 1)
        step = self._step("tool_call", tool_name=str(tc.name), arguments=arguments, call_id=str(tc.id),
                          content=_text(_call_text(tc.name, arguments)), depends_on=produced)
        with self._lock:
            act.tools.append(ToolRec(step, ordinal[0] if ordinal else None, str(tc.name), tc.arguments, arguments,
                                     str(tc.id)))

    def _on_tool_output(self, out: Any) -> None:
        # A call that bypassed execute_tool_call (a subclass of the agent overrode it): answer from the output.
        with self._lock:
            rec = next((r for r in self.act.tools if r.call_id == str(out.id) and not r.claimed), None)
            if rec is None:
                return
            rec.claimed = True
        self._tool_done(rec, None, None, result=out.output, error=None)

    def _on_action_output(self, out: Any) -> None:
        self._flush_llm()
        act = self.act
        producer = act.llm.step.step_id if act.llm is not None else None
        if act.code_exec is not None:
            logs = acc.code_logs(act.memory_step)
            act.code_exec.end(
                content=_text(logs + ("" if out.is_final_answer else f"\nOut: {out.output}")),
                outputs={"stdout": logs, "stderr": "", "exit_code": 0, "error": None,
                         "result": acc.jsonable(out.output), "is_final_answer": bool(out.is_final_answer)},
            )
            self._observe(act.code_exec.step_id)
            producer = act.code_exec.step_id
            if act.code_call is not None:
                act.code_call.finish(acc.smol().CodeOutput(output=out.output, logs=logs,
                                                          is_final_answer=bool(out.is_final_answer)))
            act.code_exec, act.code_call = None, None
        if out.is_final_answer:
            deps = [(producer, "produced_by")] if producer else []
            if act.final_tool_response:
                deps.append((act.final_tool_response, "answer_of"))
            act.final_step = self._step("final_answer", content=_text(out.output),
                                        outputs={"text": _text(out.output)}, depends_on=deps)
            self.output = out.output

    def _register_callees(self) -> None:
        objects = [*getattr(self.agent, "tools", {}).values(), *getattr(self.agent, "managed_agents", {}).values()]
        with _CALLEES_LOCK:
            for obj in objects:
                _CODE_CALLEES.setdefault(id(obj), []).append(self)
            self._callees = [id(obj) for obj in objects]

    def _unregister_callees(self) -> None:
        with _CALLEES_LOCK:
            for key in self._callees:
                runs = _CODE_CALLEES.get(key)
                if runs and self in runs:
                    runs.remove(self)
                    if not runs:
                        del _CODE_CALLEES[key]
            self._callees = []

    def _end_action(self, memory_step: Any) -> None:
        """The action step is over (smolagents yielded it after its callbacks): settle what is still open."""
        self._unregister_callees()
        self._flush_llm()
        act = self.act
        error = getattr(memory_step, "error", None) if memory_step is not None else None
        if act.final_step is not None:
            if error is not None:  # final_answer_checks rejected it
                act.final_step.end(error=error)
                self._observe(act.final_step.step_id)
                act.accounted.add(id(error))
            else:
                act.final_step.end()
                self.accepted = True
                self.answer_step_id = act.final_step.step_id
        if act.code_exec is not None:
            logs = acc.code_logs(memory_step) if memory_step is not None else ""
            message = str(error) if error is not None else "the code did not finish"
            act.code_exec.end(
                error=error if error is not None else StepError(type="Error", message=message),
                outputs={"stdout": logs, "stderr": message, "exit_code": 1, "error": message, "result": None},
            )
            self._observe(act.code_exec.step_id)
            if act.code_call is not None:
                act.code_call.finish(error=error)
            if error is not None:
                act.accounted.add(id(error))
        if error is not None and id(error) not in act.accounted:
            produced = [(act.llm.step.step_id, "produced_by")] if act.llm is not None else []
            step = self._step("error", content=_text(f"{type(error).__name__}: {error}"), depends_on=produced)
            step.end(error=error)
            self._observe(step.step_id)
        for rec in act.tools:
            if not rec.step.ended:
                rec.step.end()
        self.act = _ActionState()

    def _on_planning(self, planning: Any) -> None:
        plan = _text(getattr(planning, "plan", ""))
        deps = [(self.planning_llm, "produced_by")] if self.planning_llm else []
        step = self._step("planning", content=plan, outputs={"text": plan}, depends_on=deps)
        step.end()
        self.planning_llm = None
        with self._lock:
            self.saw.append(step.step_id)

    def _on_final_answer(self, final: Any) -> None:
        self._flush_llm()
        if self.act.memory_step is not None or self.act.final_step is not None:
            self._end_action(self.act.memory_step)
        self.output = getattr(final, "output", None)
        if not self.accepted:
            self.stop = "limit"
            deps = [(self.final_llm, "produced_by")] if self.final_llm else []
            step = self._step("final_answer", content=_text(self.output), outputs={"text": _text(self.output)},
                              depends_on=deps, metadata={"forced": True})
            step.end()
            self.answer_step_id = step.step_id

    # -- tool calls ---------------------------------------------------------------------------------------------------

    def claim_tool(self, name: str, arguments: Any) -> ToolRec:
        """The tool_call step (from the model's response) that this ``execute_tool_call`` runs."""
        with self._lock:
            for match in (lambda r: r.raw_arguments is arguments,
                          lambda r: (r.raw_arguments or {}) == (arguments or {})):
                for rec in self.act.tools:
                    if not rec.claimed and rec.name == name and match(rec):
                        rec.claimed = True
                        return rec
        # Not announced by a ToolCall (an agent subclass calling tools itself): a tool_call step of its own.
        args = acc.tool_arguments_from_call(arguments)
        ordinal = self.ctx.reserve_ordinals(self.key, "tool", 1)
        produced = [(self.act.llm.step.step_id, "produced_by")] if self.act.llm is not None else []
        step = self._step("tool_call", tool_name=name, arguments=args, content=_text(_call_text(name, args)),
                          depends_on=produced)
        return ToolRec(step, ordinal[0] if ordinal else None, name, arguments, args, claimed=True)

    def begin_code_call(self, name: str, arguments: dict[str, Any]) -> ToolRec | None:
        """A call the running code makes (a tool, a managed agent, final_answer): a tool_call ``produced_by`` the
        code_execution, numbered in the code's call order."""
        exec_step = self.act.code_exec
        if exec_step is None:
            return None
        ordinal = self.ctx.reserve_ordinals(self.key, "tool", 1)
        step = self._step("tool_call", tool_name=name, arguments=arguments, content=_text(_call_text(name, arguments)),
                          depends_on=[(exec_step.step_id, "produced_by")])
        return ToolRec(step, ordinal[0] if ordinal else None, name, arguments, arguments, claimed=True)

    def run_tool(self, rec: ToolRec, invoke: Callable[[], Any], *, managed: bool) -> Any:
        """Run a tool (or managed agent) call, recording it and its response; the user's exception passes through."""
        started = guard(self._tool_start, rec, managed)
        call, invocation = started if started else (None, None)
        tokens = (_IN_TOOL.set(self), _INVOKER.set(invocation))
        try:
            result = invoke()
        except BaseException as exc:
            guard(self._tool_done, rec, call, invocation, result=None, error=exc)
            raise
        finally:
            _IN_TOOL.reset(tokens[0])
            _INVOKER.reset(tokens[1])
        guard(self._tool_done, rec, call, invocation, result=result, error=None)
        return result

    def _tool_start(self, rec: ToolRec, managed: bool) -> tuple[CallHandle | None, Invocation | None]:
        call = self.ctx.begin_call(
            self.key, "tool", {"name": rec.name, "arguments": rec.arguments}, ordinal=rec.ordinal,
            settings={"managed_agent": True} if managed else None, step_id=rec.step.step_id,
            call_id_pattern=self.pattern(),
        )
        return call, Invocation(rec.step, self, rec.name) if managed else None

    def _tool_done(self, rec: ToolRec, call: CallHandle | None, invocation: Invocation | None, *, result: Any,
                   error: BaseException | None) -> None:
        rec.step.end()
        deps = [(rec.step.step_id, "tool_result_of")]
        if invocation is not None and invocation.answer_step_id:
            deps.append((invocation.answer_step_id, "answer_of"))
        step = self._step("tool_response", tool_name=rec.name, call_id=rec.call_id, depends_on=deps)
        if error is not None:
            message = f"{type(error).__name__}: {error}"
            step.end(error=error, content=_text(message), outputs={"result": message, "is_error": True})
            self.act.accounted.add(id(error))
        else:
            step.end(content=_text(result), outputs={"result": acc.jsonable(result), "is_error": False})
        self._observe(step.step_id)
        if rec.name == "final_answer":
            self.act.final_tool_response = step.step_id
        if call is not None:
            if error is not None:
                call.finish(error=error)
            else:
                call.finish(result)

    # -- the end -------------------------------------------------------------------------------------------------------

    def close(self, *, error: BaseException | None = None, closed_early: bool = False) -> None:
        """The agent run ended (normally, with an exception, or its stream was closed): end its steps and, for
        the top-level agent, report the run's end (and finish the run when the adapter owns it)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._unregister_callees()
            self._flush_llm()
            act = self.act
            if act.llm is not None and not act.llm.step.ended:
                act.llm.step.end(error=error) if error is not None else act.llm.step.end()
            for handle in [act.code_exec, act.final_step, *(r.step for r in act.tools)]:
                if handle is not None and not handle.ended:
                    handle.end(error=error) if error is not None else handle.end(status="unset")
            if error is not None:
                step = self._step("error", content=_text(f"{type(error).__name__}: {error}"))
                step.end(error=error)
                if self.turn is not None:
                    self.turn.end(error=error, outputs={"final_answer": None})
            elif self.turn is not None:
                outputs = {"final_answer": None if self.output is None else _text(self.output)}
                if self.stop == "limit":
                    self.turn.end(error=StepError(type="AgentMaxStepsError", message="Reached max steps."),
                                  outputs=outputs)
                elif closed_early:
                    self.turn.end(status="unset", outputs={**outputs, "stream_closed": True})
                else:
                    self.turn.end(outputs=outputs)
            if self.invocation is not None:
                self.invocation.answer_step_id = self.answer_step_id
        finally:
            if self.parent is None:
                self._report(error, closed_early)

    def _report(self, error: BaseException | None, closed_early: bool) -> None:
        answer = None if self.output is None else str(self.output)
        if error is not None:
            self.ctx.report_end(final_answer=None, stop="error", error=error)
        elif closed_early:
            self.ctx.report_end(final_answer=answer, stop="limit",
                                reason="the run's stream was closed before the agent finished")
        elif self.stop == "limit":
            self.ctx.report_end(final_answer=answer, stop="limit", reason="AgentMaxStepsError: Reached max steps.")
        else:
            self.ctx.report_end(final_answer=answer, stop="normal")
        if self.owned:
            self.ctx.finish_sync()
