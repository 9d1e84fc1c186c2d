"""What part of a step an intervention edits — the one place the playback core, repair and the proposals ask
(ARCHITECTURE "Intervention"; decision 9).

* :func:`replacement_kind` — what a replacement of a step IS (``arguments``, ``code``, ``result``, ``target`` or
  ``text``), :func:`original_value` — the step's current value of that kind, :func:`code_of` — the code a step
  carries;
* :func:`resolve_edit` — the framework-neutral half of an intervention: from the intervened step (a step of the
  original run) to the recorded call it changes, the slot of that call and the part of the model response, as a
  :class:`~causaltrace.protocols.CallEdit`. Each framework adapter turns the edit into its response objects.

==========================================  =====================================================================
step                                        the edit (recorded call · slot · part)
==========================================  =====================================================================
llm_response                                its own call · response · ``whole`` (new text, tool calls or both)
message                                     the producing llm call · response · ``text`` (the step's text is
                                            replaced where it occurs), or ``code`` for a message carrying code
reasoning / planning                        the producing llm call · response · ``thought`` / ``plan``
final_answer                                the message it answers (as a message), else the producing llm call ·
                                            ``final_answer``, else (a CodeAgent's answer) the code that made it
tool_call                                   the producing llm call · response · ``tool_arguments``; a code tool
                                            call (``python_interpreter``) · ``code``; a call made by running code:
                                            its own recorded call · arguments
tool_response                               its tool call's recorded call · result
handoff / speaker_selection                 the producing llm call · response · ``handoff`` / ``selection``
MagenticOne ledger decisions                the producing llm call · response · ``ledger`` (``field``)
code_execution                              the llm call that produced the code's carrier · response · ``code``
==========================================  =====================================================================

A replacement of the wrong shape (not a str where text is needed, arguments that are not a JSON object) is a
``UserError`` naming what is needed; so is a step no recorded model call produced.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import Any

from causaltrace.exceptions import UserError
from causaltrace.protocols import CallEdit, EditPart
from causaltrace.schema import Intervention, RecordedCall, Recording, Run, Step

__all__ = ["code_of", "edit_key", "original_value", "replacement_kind", "resolve_edit"]

#: Step kinds with a MagenticOne progress-ledger decision (``metadata["ledger_field"]``).
_LEDGER_FIELDS = ("next_speaker", "instruction_or_question")


def code_of(step: Step) -> str | None:
    """The code a step carries, if any: code_execution inputs, a code tool_call, or a message's code block."""
    code = step.inputs.get("code")
    if isinstance(code, str) and code.strip():
        return code
    if step.kind == "tool_call" and step.arguments:
        for key in ("code", "source", "script"):
            value = step.arguments.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def replacement_kind(step: Step) -> str:
    """What a replacement of ``step`` is: ``arguments``, ``code``, ``result``, ``target`` or ``text``."""
    if step.kind in ("handoff", "speaker_selection"):
        return "target"
    if code_of(step) is not None:
        return "code"
    if step.kind == "tool_call":
        return "arguments"
    if step.kind == "tool_response":
        return "result"
    return "text"


def original_value(step: Step, kind: str | None = None) -> Any:
    """The step's current value of replacement ``kind`` (default: :func:`replacement_kind`)."""
    kind = kind or replacement_kind(step)
    if kind == "code":
        return code_of(step)
    if kind == "arguments":
        return step.arguments
    if kind == "result":
        return step.outputs.get("result", step.content)
    if kind == "target":
        return step.outputs.get("target") or step.outputs.get("selected")
    return step.content or step.outputs.get("text", "")


def resolve_edit(
    run: Run,
    recording: Recording,
    intervention: Intervention | None,
    *,
    edit_kinds: Sequence[str] | None = None,
    framework: str = "this",
) -> CallEdit | None:
    """The :class:`CallEdit` of ``intervention`` (a step of ``run``; see the module table), or None without one.

    ``edit_kinds``: the step kinds the framework can apply (others are a ``UserError`` naming the kind and
    ``framework``)."""
    if intervention is None:
        return None
    try:
        step = run.step(intervention.step_id)
    except KeyError:
        raise UserError(f"step {intervention.step_id!r} is not a step of run {run.run_id}") from None
    if edit_kinds is not None and step.kind not in edit_kinds:
        raise UserError(
            f"cannot intervene on a {step.kind!r} step when replaying {framework} (supported: {', '.join(edit_kinds)})"
        )
    return _Resolver(run, recording, step, intervention.replacement).edit()


def edit_key(run: Run, intervention: Intervention) -> str | None:
    """What a replay of ``intervention`` changes, as a key: the recorded call, its slot and part, the new value and
    what it replaces. Two interventions with one key replay the same edited run — a CodeAgent's code edited on its
    llm_response step and on its ``python_interpreter`` tool_call, a final answer edited on the ``final_answer``
    step and on the message it answers — so repair replays the key once (issue 32, repair cost). None when the
    edit does not resolve (the replay then says why)."""
    if run.recording is None:
        return None
    try:
        edit = resolve_edit(run, run.recording, intervention)
    except Exception:
        return None
    if edit is None:
        return None
    return json.dumps([list(edit.key), edit.slot, edit.part, edit.value, edit.old, edit.field], sort_keys=True,
                      default=str)


class _Resolver:
    """Walks from the intervened step along its dependencies to the recorded call it edits."""

    def __init__(self, run: Run, recording: Recording, step: Step, value: Any) -> None:
        self.run = run
        self.step = step
        self.value = value
        self.by_step = {c.step_id: c for c in recording.calls if c.step_id}

    def edit(self) -> CallEdit:
        step, kind = self.step, self.step.kind
        ledger_field = step.metadata.get("ledger_field")  # a MagenticOne orchestrator's decision: its JSON ledger
        if ledger_field in _LEDGER_FIELDS and kind in ("speaker_selection", "message"):
            rec = self.llm_of(self.dep(step, "produced_by"))
            value = self.text(f"a {kind} intervention needs a str (the new speaker's name or instruction)")
            return self.response(rec, "ledger", value, field=str(ledger_field))
        handler = {
            "llm_response": lambda: self.response(self.llm_of(step), "whole", self.value),
            "message": lambda: self.text_or_code(step, step.content),
            "planning": lambda: self.segment("plan", "a planning intervention needs the new plan as a str"),
            "reasoning": lambda: self.segment("thought", "a reasoning intervention needs the new text as a str"),
            "final_answer": self.final_answer,
            "tool_call": self.tool_call,
            "tool_response": self.tool_response,
            "handoff": lambda: self.choice("handoff", "the new target agent's name", old=step.outputs.get("target")),
            "speaker_selection": lambda: self.choice("selection", "the new speaker's name"),
            "code_execution": self.code_execution,
        }.get(kind)
        if handler is None:
            raise UserError(f"cannot intervene on a {kind!r} step: it is not an agent's decision")
        return handler()

    # -- helpers -------------------------------------------------------------------------------------------------

    def dep(self, step: Step, kind: str) -> Step | None:
        ids = step.deps_of_kind(kind)
        return self.run.step(ids[0]) if ids else None

    def llm_of(self, producer: Step | None) -> RecordedCall:
        """The recorded llm call of ``producer`` (an llm_response), whose response the edit changes."""
        what = self.step
        if producer is None or producer.kind != "llm_response":
            made_by = f"it was produced by a {producer.kind} step" if producer is not None else "no model produced it"
            raise UserError(f"cannot intervene on {what.kind} step {what.step_id}: {made_by}")
        rec = self.by_step.get(producer.step_id)
        if rec is None or rec.kind != "llm":
            raise UserError(f"llm_response {producer.step_id} has no recorded call (recorded with record=False?)")
        if rec.live_only or rec.response is None:
            raise UserError(f"the response of {rec.agent_key} llm #{rec.ordinal} was not recorded: cannot edit it")
        return rec

    def response(self, rec: RecordedCall, part: EditPart, value: Any, *, old: Any = None,
                 field: str | None = None) -> CallEdit:
        return CallEdit(rec, "response", value, part, step=self.step, old=old, field=field)

    def text(self, message: str) -> str:
        if not isinstance(self.value, str):
            raise UserError(message)
        return self.value

    def code(self, value: Any) -> str:
        code = value.get("code") if isinstance(value, Mapping) else value
        if not isinstance(code, str):
            raise UserError(f"a code intervention needs the new code as a str, got {type(value).__name__}")
        return code

    def code_edit(self, rec: RecordedCall, value: Any) -> CallEdit:
        return self.response(rec, "code", self.code(value))

    # -- per kind ------------------------------------------------------------------------------------------------

    def text_or_code(self, message: Step, old_text: str | None) -> CallEdit:
        """A message's text (``old_text`` replaced where it occurs), or its code when it carries code."""
        rec = self.llm_of(self.dep(message, "produced_by"))
        if message.inputs.get("code") is not None:
            return self.code_edit(rec, self.value)
        value = self.text(f"a {self.step.kind} intervention needs the new text as a str, got "
                          f"{type(self.value).__name__}")
        return self.response(rec, "text", value, old=old_text)

    def segment(self, part: EditPart, message: str) -> CallEdit:
        rec = self.llm_of(self.dep(self.step, "produced_by"))
        return self.response(rec, part, self.text(message), old=self.step.content)

    def choice(self, part: EditPart, what: str, *, old: Any = None) -> CallEdit:
        rec = self.llm_of(self.dep(self.step, "produced_by"))
        value = self.text(f"a {self.step.kind} intervention needs {what} as a str")
        return self.response(rec, part, value, old=old)

    def final_answer(self) -> CallEdit:
        step = self.step
        message = self.dep(step, "answer_of")
        if message is not None and message.kind == "message":  # AutoGen: the answer is the last message's text
            return self.text_or_code(message, step.content)
        producer = self.dep(step, "produced_by")
        if producer is not None and producer.kind == "code_execution":  # a CodeAgent: the code's final_answer call
            code = producer.inputs.get("code")
            if not isinstance(code, str):
                raise UserError(f"code_execution {producer.step_id} carries no code")
            carrier = self.dep(producer, "executes") or producer
            return self.code_edit(self.llm_of(self.dep(carrier, "produced_by")), final_answer_code(code, self.value))
        return self.response(self.llm_of(producer), "final_answer", self.value)

    def tool_call(self) -> CallEdit:
        step = self.step
        if step.tool_name == "python_interpreter":  # a CodeAgent action's code (as smolagents records it)
            return self.code_edit(self.llm_of(self.dep(step, "produced_by")), self.value)
        producer = self.dep(step, "produced_by")
        if producer is not None and producer.kind == "code_execution":  # a call the running code makes
            rec = self.by_step.get(step.step_id)
            if rec is None:
                raise UserError(f"tool_call {step.step_id} has no recorded call")
            return CallEdit(rec, "arguments", arguments_of(self.value), step=step)
        rec = self.llm_of(producer)
        return self.response(rec, "tool_arguments", arguments_of(self.value))

    def tool_response(self) -> CallEdit:
        step = self.step
        call_step = self.dep(step, "tool_result_of")
        rec = self.by_step.get(call_step.step_id) if call_step is not None else None
        if rec is None or rec.kind != "tool":
            raise UserError(f"tool_response {step.step_id} has no recorded tool call")
        return CallEdit(rec, "result", self.value, step=step)

    def code_execution(self) -> CallEdit:
        step = self.step
        carrier = self.dep(step, "executes")
        if carrier is None:
            raise UserError(f"code_execution {step.step_id} has no step carrying its code")
        if carrier.kind == "llm_response":
            return self.code_edit(self.llm_of(carrier), self.value)
        if carrier.kind == "message" and carrier.inputs.get("code") is not None:
            return self.text_or_code(carrier, None)
        if carrier.kind == "tool_call":
            return self.code_edit(self.llm_of(self.dep(carrier, "produced_by")), self.value)
        raise UserError(f"code_execution {step.step_id}: its code came from a {carrier.kind} step no model produced")


def arguments_of(value: Any) -> dict[str, Any]:
    """A tool_call replacement as the arguments object (a dict, or a JSON object in a str)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise UserError("a tool_call intervention needs the new arguments as a JSON object") from None
    if not isinstance(value, Mapping):
        raise UserError(f"a tool_call intervention needs the new arguments as a dict, got {type(value).__name__}")
    return dict(value)


def final_answer_code(code: str, answer: Any) -> str:
    """The code with its one ``final_answer(...)`` call answering ``answer`` instead (else just that call)."""
    call = f"final_answer({answer!r})"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return call
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "final_answer"]
    if len(found) != 1 or found[0].end_lineno is None or found[0].end_col_offset is None:
        return call
    node = found[0]
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    start = offsets[node.lineno - 1] + node.col_offset
    end = offsets[node.end_lineno - 1] + node.end_col_offset
    return code[:start] + call + code[end:]
