"""Import plain conversation logs as Runs: ``causaltrace import --format chat`` (issue 23 item 2).

Usage::

    from causaltrace.collector.chatlog import load_chat, sniff_format

    runs = load_chat(Path("failed_conversation.jsonl"))   # one Run per conversation
    sniff_format(Path("trace.jsonl"))                      # "otlp-json", "spans" or "chat" (``--format auto``)

A file is one JSON document or JSON lines (one conversation per line). Each document is one of:

* an OpenAI ``messages`` list — bare, or as ``{"messages": [...]}`` — with ``role`` / ``content`` / ``name`` /
  ``tool_calls`` / ``tool_call_id`` (the legacy ``function`` role is read as ``tool``);
* a Who&When-shaped object (``history``; ``mistake_step`` / ``mistake_agent`` optional): read by
  :func:`causaltrace.collector.whowhen.whowhen_run_from_data`, so a labelled log gets the same id as with
  ``--format whowhen``;
* an AutoGen AgentChat ``TaskResult`` dumped with ``model_dump_json()`` (``messages`` of typed events, ``stop_reason``);
* a smolagents run's steps, ``agent.memory.get_full_steps()`` dumped as JSON.

Mapping (one Step per message or event; framework-specific shapes in :mod:`causaltrace.collector.chatlog_shapes`):
the first user message is the ``task``; later user messages are ``message`` steps of agent ``user``; an assistant
message's text is a ``message`` (agent: its ``name``, else ``assistant``) and each of its tool calls a ``tool_call``
(``tool_name``, ``arguments`` decoded from their JSON string, ``call_id``) ``produced_by`` that message when it has
text; a tool message is a ``tool_response`` (outputs ``{result, is_error}``, agent: the caller) depending
``tool_result_of`` the call it answers. System messages are not steps: they are kept in
``metadata["system_prompts"]``. Only dependencies the log states are recorded (a result's call, a call's message);
the attribution stages recover the rest, as for Who&When logs.

Decisions where the issue is silent:

* Run ids hold a digest of the conversation (``chat-<shape>-<12 hex>``) and ``metadata`` marks the provenance
  (``chat``), the shape and that there is no Recording: see :mod:`causaltrace.collector.chatlog_build`.
* The outcome is ``unknown`` (a log says nothing of success) with the last text an agent wrote as the final answer;
  a Who&When log keeps that importer's ``failure``.
* Tool results that answer no earlier call, a file that is empty, not UTF-8, not JSON, or holds no conversation:
  one :class:`InvalidInputError` naming the file (and the line of a JSON-lines file).
* Speakers are typed by :mod:`causaltrace.collector.speakers` (``metadata["speaker_role"]`` on every step): a
  message whose speaker is a tool / terminal / environment by role, name or the shape of everything it said (a
  ``Computer_terminal`` named in a log) is a ``tool_response`` with no call (the log recorded none).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from causaltrace.collector import chatlog_shapes
from causaltrace.collector.chatlog_build import ChatBuilder, text_of
from causaltrace.collector.speakers import TOOL_ROLES, classify_speaker
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Run

__all__ = ["load_chat", "runs_from_chat_document", "sniff_format"]

_SHAPES = "an OpenAI messages list, a Who&When object, an AutoGen TaskResult or smolagents steps"


# ------------------------------------------------------------------------------------------------ OpenAI messages


def _openai_run(messages: list[Any], where: str, document: Any) -> Run:
    b = ChatBuilder("openai", document, where)
    callers: dict[str, str] = {}
    tools = _tool_speakers(messages)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise InvalidInputError(f"{where}: messages[{i}] is not a message object with a string 'role'")
        role, text = msg["role"], text_of(msg.get("content"))
        name = msg.get("name") if isinstance(msg.get("name"), str) and msg.get("name") else None
        if role in ("system", "developer"):
            b.metadata.setdefault("system_prompts", []).append(text)
        elif name in tools and role not in TOOL_ROLES and not msg.get("tool_calls"):
            b.add("tool_response", name, text, outputs={"result": text, "is_error": False})
        elif role == "user":
            if b.task is None and not b.steps:
                b.add("task", name or "user", text)
            else:
                b.text("message", name or "user", text)
        elif role in TOOL_ROLES:
            call_id = msg.get("tool_call_id") or _legacy_call_id(b, msg)
            b.tool_result([call_id] if call_id else [""], text, agent=callers.get(call_id or ""))
        else:
            agent = name or role
            said = b.text("message", agent, text) if text.strip() else None
            for call in _openai_calls(msg, where, i):
                b.tool_call(agent, call[0], call[1], call[2], said)
                if call[2]:
                    callers[call[2]] = agent
    return b.build()


def _tool_speakers(messages: list[Any]) -> set[str]:
    """Named speakers of non-tool roles that :func:`classify_speaker` types ``tool`` (a terminal, an executor)."""
    said: dict[str, list[str]] = {}
    for msg in messages:
        if isinstance(msg, dict) and isinstance(msg.get("name"), str) and msg.get("role") not in TOOL_ROLES:
            said.setdefault(msg["name"], []).append(text_of(msg.get("content")))
    return {name for name, texts in said.items() if classify_speaker(name, None, texts) == "tool"}


def _openai_calls(msg: dict[str, Any], where: str, i: int) -> Iterator[tuple[str, Any, str | None]]:
    calls = msg.get("tool_calls") or []
    if msg.get("function_call"):
        calls = [{"function": msg["function_call"], "id": None}]
    if not isinstance(calls, list):
        raise InvalidInputError(f"{where}: messages[{i}].tool_calls must be a list")
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise InvalidInputError(f"{where}: messages[{i}].tool_calls[{j}] has no function name")
        yield fn["name"], fn.get("arguments"), call.get("id")


def _legacy_call_id(b: ChatBuilder, msg: dict[str, Any]) -> str | None:
    """A legacy ``function`` message answers the latest call of that name (its call has no id)."""
    for step in reversed(b.steps):
        if step.kind == "tool_call" and step.tool_name == msg.get("name"):
            if step.call_id is None:
                call_id = f"{step.step_id}-call"
                b.calls[call_id] = step
                return call_id
            return step.call_id
    return None


# ------------------------------------------------------------------------------------------------ reading files


def _is_openai_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def runs_from_chat_document(document: Any, where: str, path: Path) -> list[Run]:
    """The Run of one parsed document (shapes in the module docstring); an unknown shape is an InvalidInputError."""
    if _is_openai_list(document):
        return [_openai_run(document, where, document)]
    if isinstance(document, dict):
        if isinstance(document.get("history"), list):
            from causaltrace.collector.whowhen import whowhen_run_from_data

            return [whowhen_run_from_data(document, path, require_labels=False, content_id=True)]
        messages = document.get("messages")
        if _is_openai_list(messages):
            return [_openai_run(messages, where, document)]
        if chatlog_shapes.is_task_result(document):
            return [chatlog_shapes.task_result_run(document, where)]
    if chatlog_shapes.is_smolagents_steps(document):
        return [chatlog_shapes.smolagents_run(document, where)]
    raise InvalidInputError(f"{where}: no conversation found (expected {_SHAPES})")


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    if not text.strip():
        raise InvalidInputError(f"{path}: the file is empty (no conversation to import)")
    return text


def _documents(path: Path, text: str) -> list[tuple[str, Any]]:
    """One whole-file JSON document, else JSON lines (blank lines skipped)."""
    try:
        return [(str(path), json.loads(text))]
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise InvalidInputError(f"{path}: JSON nested too deeply (beyond the recursion limit)") from None
    out: list[tuple[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{n}", json.loads(line)))
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InvalidInputError(f"{path}: not JSON or JSON lines (line {n}: {exc})") from None
    return out


def load_chat(path: Path) -> list[Run]:
    """The Runs of one conversation-log file (module docstring). Raises :class:`InvalidInputError`, one line naming
    the file, for an unreadable, empty, non-UTF-8 or non-JSON file and for a document of no known shape."""
    path = Path(path)
    runs: list[Run] = []
    for where, document in _documents(path, _read_text(path)):
        try:
            runs.extend(runs_from_chat_document(document, where, path))
        except ValueError as exc:  # pydantic's ValidationError: a field of the wrong type
            if isinstance(exc, InvalidInputError):
                raise
            first = str(exc).splitlines()
            raise InvalidInputError(f"{where}: not a valid conversation: {' '.join(first[:3])}") from exc
    return runs


def sniff_format(path: Path) -> str:
    """``"otlp-json"`` for a file that holds OTLP/JSON spans (``resourceSpans`` / ``resource_spans``, or a Jaeger
    ``result`` wrapper), ``"spans"`` for one that names span fields in another shape (rows, records, Phoenix's
    answers: :mod:`causaltrace.collector.span_shapes`), else ``"chat"`` — what ``import --format auto`` picks.
    Reads the first 64 KiB."""
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(65536).decode("utf-8", "replace")
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the file: {exc.strerror or exc}") from exc
    if '"resourceSpans"' in head or '"resource_spans"' in head or head.lstrip().startswith('{"result"'):
        return "otlp-json"
    from causaltrace.collector.span_shapes import looks_like_spans

    return "spans" if looks_like_spans(head) else "chat"
