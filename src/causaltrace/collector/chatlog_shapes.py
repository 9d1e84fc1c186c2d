"""The framework shapes of ``import --format chat``: AutoGen ``TaskResult`` dumps and smolagents memory steps.

Both are read from their JSON dumps only (AutoGen's ``TaskResult.model_dump_json()``, smolagents'
``json.dumps(agent.memory.get_full_steps())``): importing a log never imports either framework.

AutoGen ``TaskResult`` (``messages`` of typed events, ``stop_reason``), by ``type``:

* the first ``TextMessage`` from ``user`` → ``task``; other ``TextMessage`` / ``StopMessage`` /
  ``ToolCallSummaryMessage`` / ``MultiModalMessage`` → ``message`` (agent = ``source``);
* ``ToolCallRequestEvent`` → one ``tool_call`` per ``FunctionCall``; ``ToolCallExecutionEvent`` → one
  ``tool_response`` per ``FunctionExecutionResult`` (``tool_result_of`` its ``call_id``, ``is_error`` kept);
* ``HandoffMessage`` → ``handoff`` (outputs ``{target}``); ``ThoughtEvent`` → ``reasoning``;
  ``SelectSpeakerEvent`` → ``speaker_selection`` (outputs ``{selected}``); ``CodeGenerationEvent`` → ``message``
  carrying its code; ``CodeExecutionEvent`` → ``code_execution`` (``executes`` the code's message);
* streaming chunks and memory queries are not steps. ``stop_reason`` is the outcome's reason.

smolagents steps (``get_full_steps()``, a list of step dicts): ``{task}`` → ``task``; ``{plan}`` → ``planning``;
an action step → an ``llm_response`` (the model output, with its tool calls), then either a ``code_execution`` of
its ``code_action`` (outputs ``{stdout: observations, error}``, ``executes`` the response) or one ``tool_call`` per
tool call ``produced_by`` the response and a ``tool_response`` of the observations ``tool_result_of`` those calls;
the ``final_answer`` call of the last step is a ``final_answer`` step. A step's ``error`` marks its result step as an
error. The agent is ``agent`` (the dump does not name it).
"""

from __future__ import annotations

import json
from typing import Any

from causaltrace.collector.chatlog_build import ChatBuilder, text_of
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Dependency, Outcome, Run, StepError

__all__ = ["is_smolagents_steps", "is_task_result", "smolagents_run", "task_result_run"]

_TEXT_TYPES = frozenset({"TextMessage", "StopMessage", "ToolCallSummaryMessage", "MultiModalMessage",
                         "StructuredMessage", "UserInputRequestedEvent"})
_SKIPPED_TYPES = frozenset({"ModelClientStreamingChunkEvent", "MemoryQueryEvent"})
_SMOL_KEYS = frozenset({"task", "step_number", "plan", "output", "system_prompt"})


def is_task_result(document: Any) -> bool:
    """An AutoGen TaskResult dump: ``messages`` whose entries carry ``type`` and ``source``."""
    messages = document.get("messages") if isinstance(document, dict) else None
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and "type" in m and "source" in m for m in messages)
    )


def is_smolagents_steps(document: Any) -> bool:
    """A smolagents ``get_full_steps()`` dump: a list of step dicts, each with one of the steps' own keys."""
    return (
        isinstance(document, list)
        and bool(document)
        and all(isinstance(s, dict) and _SMOL_KEYS & s.keys() for s in document)
        and any("step_number" in s for s in document)
    )


# ------------------------------------------------------------------------------------------------ AutoGen


def task_result_run(document: dict[str, Any], where: str) -> Run:
    """The Run of an AutoGen TaskResult dump (mapping in the module docstring)."""
    b = ChatBuilder("autogen", document, where)
    for i, msg in enumerate(document["messages"]):
        _task_result_message(b, msg, f"{where}: messages[{i}]")
    last = next((s for s in reversed(b.steps) if s.kind == "message"), None)
    outcome = Outcome(status="unknown", final_answer=last.content if last else None,
                      reason=str(document.get("stop_reason") or ""))
    return b.build(outcome=outcome)


def _task_result_message(b: ChatBuilder, msg: dict[str, Any], where: str) -> None:
    kind, source, content = msg["type"], str(msg["source"]), msg.get("content")
    if kind in _SKIPPED_TYPES:
        return
    if kind == "TextMessage" and source == "user" and not b.steps:
        b.add("task", "user", text_of(content))
    elif kind == "ToolCallRequestEvent":
        for call in _list(content, where):
            b.tool_call(source, str(call.get("name", "")), call.get("arguments"), call.get("id"), None)
    elif kind == "ToolCallExecutionEvent":
        for result in _list(content, where):
            is_error = bool(result.get("is_error"))
            b.tool_result([str(result.get("call_id", ""))], text_of(result.get("content")), is_error=is_error,
                          agent=source)
    elif kind == "HandoffMessage":
        b.add("handoff", source, text_of(content), outputs={"target": msg.get("target")}, target=msg.get("target"))
    elif kind == "ThoughtEvent":
        b.text("reasoning", source, text_of(content))
    elif kind == "SelectSpeakerEvent":
        selected = content if isinstance(content, list) else [content]
        b.add("speaker_selection", source, ", ".join(map(str, selected)), outputs={"selected": selected})
    elif kind == "CodeGenerationEvent":
        code = "\n\n".join(str(block.get("code", "")) for block in msg.get("code_blocks") or [])
        b.add("message", source, text_of(content), outputs={"text": text_of(content)}, inputs={"code": code})
    elif kind == "CodeExecutionEvent":
        _code_execution(b, source, msg)
    else:  # the text types and any type a newer AutoGen adds
        b.text("message", source, text_of(content))


def _code_execution(b: ChatBuilder, source: str, msg: dict[str, Any]) -> None:
    result = msg.get("result") if isinstance(msg.get("result"), dict) else {}
    exit_code = result.get("exit_code", 0)
    code_step = next((s for s in reversed(b.steps) if "code" in s.inputs), None)
    deps = (Dependency(step_id=code_step.step_id, kind="executes"),) if code_step else ()
    output = str(result.get("output", ""))
    b.add("code_execution", source, output,
          inputs={"code": code_step.inputs["code"] if code_step else ""},
          outputs={"stdout": output, "stderr": "", "exit_code": exit_code, "error": None},
          status="error" if exit_code else "ok", depends_on=deps)


def _list(content: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
        raise InvalidInputError(f"{where}: content must be a list of objects")
    return content


# ------------------------------------------------------------------------------------------------ smolagents


def smolagents_run(document: list[dict[str, Any]], where: str) -> Run:
    """The Run of a smolagents ``get_full_steps()`` dump (mapping in the module docstring)."""
    b = ChatBuilder("smolagents", document, where)
    for i, step in enumerate(document):
        if "task" in step and "step_number" not in step:
            if not b.steps:
                b.add("task", "user", text_of(step["task"]))
            else:
                b.text("message", "user", text_of(step["task"]))
        elif "system_prompt" in step:
            b.metadata.setdefault("system_prompts", []).append(text_of(step["system_prompt"]))
        elif "plan" in step:
            b.text("planning", "agent", text_of(step["plan"]))
        elif "step_number" in step:
            _action_step(b, step, f"{where}: steps[{i}]")
        elif "output" in step and not any(s.kind == "final_answer" for s in b.steps):
            b.text("final_answer", "agent", text_of(step["output"]))
    final = next((s for s in reversed(b.steps) if s.kind == "final_answer"), None)
    return b.build(outcome=Outcome(status="unknown", final_answer=final.content if final else None))


def _action_step(b: ChatBuilder, step: dict[str, Any], where: str) -> None:
    calls = step.get("tool_calls") or []
    if not isinstance(calls, list):
        raise InvalidInputError(f"{where}: tool_calls must be a list")
    output = step.get("model_output")
    text = output if isinstance(output, str) else text_of(output)
    listed = [_smol_call(c, where) for c in calls]
    llm = b.add("llm_response", "agent", text or ", ".join(name for name, _, _ in listed),
                outputs={"text": text, "tool_calls": [{"name": n, "arguments": a, "call_alias": i}
                                                      for n, a, i in listed]})
    error = step.get("error") if isinstance(step.get("error"), dict) else None
    observations = text_of(step.get("observations"))
    if step.get("code_action"):
        b.add("code_execution", "agent", observations, inputs={"code": str(step["code_action"])},
              outputs={"stdout": observations, "stderr": "", "exit_code": 1 if error else 0,
                       "error": _error_text(error)},
              status="error" if error else "ok", error=_step_error(error),
              depends_on=(Dependency(step_id=llm.step_id, kind="executes"),))
        return
    ids: list[str] = []
    for name, arguments, call_id in listed:
        if name == "final_answer":
            answer = arguments.get("answer", arguments) if isinstance(arguments, dict) else arguments
            b.text("final_answer", "agent", text_of(answer),
                   depends_on=(Dependency(step_id=llm.step_id, kind="produced_by"),))
            continue
        b.tool_call("agent", name, arguments, call_id, llm)
        ids.append(call_id or "")
    if ids or error:
        b.tool_result(ids, observations or _error_text(error) or "", is_error=error is not None,
                      error=_step_error(error))


def _smol_call(call: Any, where: str) -> tuple[str, Any, str | None]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise InvalidInputError(f"{where}: a tool call has no function name")
    arguments = fn.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return fn["name"], arguments, call.get("id")


def _error_text(error: dict[str, Any] | None) -> str | None:
    return None if error is None else str(error.get("message", error))


def _step_error(error: dict[str, Any] | None) -> StepError | None:
    if error is None:
        return None
    return StepError(type=str(error.get("type", "AgentError")), message=str(error.get("message", ""))[:2000])
