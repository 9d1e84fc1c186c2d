"""The step builder the log and foreign-span importers share (``chatlog``, ``chatlog_shapes``, ``foreign_spans``):
step indices and ids, call ids → their tool_call steps, the Run with its provenance.

Usage::

    b = ChatBuilder("openai", document, where="log.json")
    said = b.text("message", "assistant", "I will add them.")
    b.tool_call("assistant", "add", '{"a": 1, "b": 2}', "call_1", said)
    b.tool_result(["call_1"], "3")
    run = b.build()

Run ids hold a digest of the source document (``<prefix>-<shape>-<12 hex of SHA-256 of its canonical JSON>``), so
re-importing is idempotent and another log never takes a stored run's id. ``metadata`` marks the provenance
(``causaltrace.provenance``: ``chat``, ``openinference``, ``genai``), the source shape
(``causaltrace.source_format``) and ``causaltrace.has_recording`` = ``False``: an imported log has no Recording, so
it can be diagnosed but not replayed call by call.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from causaltrace.collector.protocol_rules import DERIVED, DERIVED_KEY, derive_dependencies
from causaltrace.collector.speakers import classify_speaker
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Dependency, Outcome, Run, Step, StepError, StepSource, action_signature

__all__ = ["HAS_RECORDING_KEY", "PROVENANCE_KEY", "SOURCE_FORMAT_KEY", "ChatBuilder", "chat_digest", "text_of"]

PROVENANCE_KEY = "causaltrace.provenance"
SOURCE_FORMAT_KEY = "causaltrace.source_format"
HAS_RECORDING_KEY = "causaltrace.has_recording"


def chat_digest(document: Any) -> str:
    """12 hex digits of the SHA-256 of a document's canonical JSON (sorted keys): formatting never changes it."""
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def text_of(content: Any) -> str:
    """The text of a message ``content``: a string, or the ``text`` parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return json.dumps(content, default=str)


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as an object: decoded from a JSON string; anything else is kept under ``value``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return {"value": raw}
    return raw if isinstance(raw, dict) else {"value": raw}


class ChatBuilder:
    """Accumulates the Steps of one imported conversation or trace, then builds its Run.

    The readers call :meth:`add` / :meth:`text` / :meth:`tool_call` / :meth:`tool_result`; :meth:`build` makes the
    Run. ``where`` names the source in error messages; ``provenance`` is ``chat`` for logs, the convention's name
    for foreign spans (it is also the run id's prefix).
    """

    def __init__(self, shape: str, document: Any, where: str, *, provenance: str = "chat") -> None:
        self.shape = shape
        self.where = where
        self.provenance = provenance
        self.run_id = f"{provenance}-{shape}-{chat_digest(document)}"
        self.steps: list[Step] = []
        self.calls: dict[str, Step] = {}
        self.metadata: dict[str, Any] = {}
        self.task: str | None = None
        #: where the steps being added come from (span readers set it per span); given to each step as its source
        self.source: StepSource | None = None

    def add(self, kind: str, agent: str, content: str, **fields: Any) -> Step:
        """Append one step (``fields`` are Step fields — outputs, inputs, depends_on, tool_name… — plus ``target``,
        the addressee that goes into the action signature)."""
        target = fields.pop("target", None)
        if self.source is not None:
            fields.setdefault("source", self.source)
        payload = fields.get("arguments") if kind == "tool_call" else content
        if self.provenance != "chat":  # spans name their agents: the type follows the kind (no copy at build)
            role = "human" if kind == "task" else "tool" if kind == "tool_response" else "agent"
            fields["metadata"] = {"speaker_role": role, **fields.get("metadata", {})}
        step = Step(
            step_id=f"{self.run_id}-s{len(self.steps)}",
            run_id=self.run_id,
            index=len(self.steps),
            kind=kind,  # type: ignore[arg-type]
            agent=agent,
            content=content,
            action_signature=action_signature(kind, target or fields.get("tool_name"), payload),
            **fields,
        )
        self.steps.append(step)
        if kind == "task" and self.task is None:
            self.task = content
        return step

    def text(self, kind: str, agent: str, content: str, **fields: Any) -> Step:
        """A message / reasoning / planning / final_answer step: outputs ``{text}``."""
        return self.add(kind, agent, content, outputs={"text": content}, **fields)

    def tool_call(self, agent: str, name: str, arguments: Any, call_id: str | None, by: Step | None, *,
                  key: str | None = None, **fields: Any) -> Step:
        """A tool_call step ``produced_by`` ``by`` (when given); it is remembered for its result under ``key``, else
        its call id (span readers key calls by agent too: two agents' models may give the same ids)."""
        args = decode_arguments(arguments)
        deps = (Dependency(step_id=by.step_id, kind="produced_by"),) if by is not None else ()
        content = f"{name}({json.dumps(args, sort_keys=True, default=str)})"
        step = self.add("tool_call", agent, content, tool_name=name, arguments=args, call_id=call_id,
                        depends_on=deps, **fields)
        if key or call_id:
            self.calls[key or call_id] = step  # type: ignore[index]
        return step

    def tool_result(self, call_ids: list[str], result: Any, *, is_error: bool = False, agent: str | None = None,
                    error: StepError | None = None, **fields: Any) -> Step:
        """A tool_response depending ``tool_result_of`` each call it answers. A result of no earlier call is an
        InvalidInputError: the source lost the call, so the result cannot be placed."""
        calls = []
        for call_id in call_ids:
            call = self.calls.get(call_id) if call_id else None
            if call is None:
                named = f"call id {call_id!r}" if call_id else "no call id"
                raise InvalidInputError(
                    f"{self.where}: a tool result names {named}, but no earlier tool call has it (tool results "
                    "need their calls)"
                )
            calls.append(call)
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        if is_error and error is None:
            error = StepError(type="ToolError", message=text[:2000])
        return self.add(
            "tool_response",
            agent or (calls[0].agent if calls else "tool"),
            text,
            outputs={"result": text, "is_error": is_error},
            depends_on=tuple(Dependency(step_id=c.step_id, kind="tool_result_of") for c in calls),
            tool_name=calls[0].tool_name if calls else None,
            call_id=(calls[0].call_id or call_ids[0]) if len(call_ids) == 1 else None,
            status="error" if is_error else "ok",
            error=error,
            **fields,
        )

    def build(self, *, outcome: Outcome | None = None, framework: str | None = None, **run_fields: Any) -> Run:
        """The Run: agents in order of first appearance (not the task's author), provenance in metadata; the
        outcome defaults to ``unknown`` with the last message or final answer as its final answer."""
        if not self.steps:
            raise InvalidInputError(f"{self.where}: no steps to import (the conversation has no messages)")
        agents: list[str] = []
        for step in self.steps:
            if step.kind not in ("task", "tool_response") and step.agent and step.agent not in agents:
                agents.append(step.agent)
        if outcome is None:
            last = next((s for s in reversed(self.steps) if s.kind in ("message", "final_answer")), None)
            outcome = Outcome(status="unknown", final_answer=last.content if last is not None else None)
        self.steps = _typed_speakers(self.steps, by_content=self.provenance == "chat")
        metadata = {PROVENANCE_KEY: self.provenance, SOURCE_FORMAT_KEY: self.shape, HAS_RECORDING_KEY: False,
                    **self.metadata}
        if self.provenance == "chat" and DERIVED_KEY not in metadata:
            # a log states only a result's call and a call's message: who read what follows from the conversation's
            # protocol, derived here as for a Who&When log (a log with one tool call is no live run)
            self.steps = _with_derived(self.steps)
            metadata[DERIVED_KEY] = DERIVED
        return Run(run_id=self.run_id, framework=framework or self.shape, task=self.task, agents=tuple(agents),
                   steps=tuple(self.steps), outcome=outcome, metadata=metadata, **run_fields)


def _with_derived(steps: list[Step]) -> list[Step]:
    """``steps`` with the dependencies the conversation's protocol derives (:func:`.protocol_rules.derive_dependencies`)
    added where the log states none between the two steps: a call ``produced_by`` its message does not also
    ``saw`` it."""
    stated = {s.step_id: {d.step_id for d in s.depends_on} for s in steps}
    out = []
    for step in derive_dependencies(steps):
        deps = tuple(d for i, d in enumerate(step.depends_on)
                     if i < len(stated[step.step_id]) or d.step_id not in stated[step.step_id])
        out.append(step if deps == step.depends_on else step.model_copy(update={"depends_on": deps}))
    return out


def _typed_speakers(steps: list[Step], *, by_content: bool) -> list[Step]:
    """Each step with ``metadata["speaker_role"]`` (:mod:`causaltrace.collector.speakers`, what attribution reads):
    ``human`` for the task, ``tool`` for tool results, else (``by_content``, for logs) the speaker's type by its
    name and the shape of all it said — spans name their agents, so their other steps are ``agent``. A role a
    reader already set is kept."""
    contents: dict[str, list[str]] = {}
    for step in steps:
        if by_content and step.kind not in ("task", "tool_response", "tool_call"):
            contents.setdefault(step.agent, []).append(step.content)
    roles = {name: classify_speaker(name, None, texts) for name, texts in contents.items()}
    out = []
    for step in steps:
        if "speaker_role" in step.metadata:
            out.append(step)
            continue
        role = "human" if step.kind == "task" else "tool" if step.kind == "tool_response" else roles.get(step.agent, "agent")
        out.append(step.model_copy(update={"metadata": {**step.metadata, "speaker_role": role}}))
    return out
