"""What smolagents' own texts say, for the OpenInference reader (issue 34 "Why": smolagents' fidelity).

OpenInference's smolagents instrumentor writes an AGENT span per run (``<name>.run``), a CHAIN span per step
(``Step N``: ``input.value`` the memory step, ``output.value`` its observations, ERROR when the step failed), an LLM
span per model call and a TOOL span per tool call (``input.value`` = ``{"args": [...], "kwargs": {...}}``). What a
step did lives in smolagents' texts, read here:

* a CodeAgent's model output carries its code between ``<code>`` / ``</code>`` (or in a ```` ```py ```` block): the
  text before it is the thought, the code is a ``python_interpreter`` call;
* the step's observations are ``Execution logs:\\n<stdout>\\nLast output from code snippet:\\n<value>``;
* the messages the next model call is sent: ``tool-call`` messages (``Calling tools:\\n[{'id': 'call_1', …}]``)
  carry the call ids, ``tool-response`` messages (``Call id: call_1\\nObservation:\\n…`` or ``Observation:\\n…``)
  the results, ``user`` messages the task behind ``New task:\\n``;
* a managed agent's task is smolagents' prompt ``You're a helpful agent named '<name>'. … Task:\\n<task>\\n---``.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["STEP_SPAN", "code_of", "managed_agent", "managed_task", "observation_parts", "positional_arguments",
           "smolagents_message"]

STEP_SPAN = re.compile(r"Step \d+")
_CODE = re.compile(r"<code>\s*\n?(.*?)\n?\s*</code>|```(?:py|python)?\s*\n(.*?)\n?```", re.DOTALL)
_LOGS = re.compile(r"Execution logs:\n(.*?)(?:\n?Last output from code snippet:\n(.*))?\Z", re.DOTALL)
_CALL_IDS = re.compile(r"""['"]id['"]\s*:\s*['"]([^'"]+)['"]""")
_CALL_ID_LINE = re.compile(r"Call id:\s*(\S+)\s*\n")
_NAMED = re.compile(r"You're a helpful agent named '([^']+)'")
_TASK = re.compile(r"\nTask:\n(.*?)\n---", re.DOTALL)
_PREFIXES = ("New task:\n", "Observation:\n")


def code_of(text: str) -> tuple[str, str] | None:
    """``(thought, code)`` of a CodeAgent's model output, or None when it holds no code block."""
    match = _CODE.search(text)
    if match is None:
        return None
    code = match.group(1) if match.group(1) is not None else match.group(2)
    return text[:match.start()].strip(), code.strip()


def observation_parts(text: str) -> tuple[str, str | None]:
    """``(stdout, last output)`` of a code step's observations (the whole text as stdout when not in that form)."""
    match = _LOGS.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        return (text or "").strip(), None
    return match.group(1).strip(), match.group(2).strip() if match.group(2) is not None else None


def managed_agent(task: Any) -> str | None:
    """The agent name smolagents' managed-agent prompt gives (``You're a helpful agent named 'x'``), or None."""
    match = _NAMED.search(task) if isinstance(task, str) else None
    return match.group(1) if match else None


def managed_task(prompt: str) -> str:
    """The task a manager gave, inside smolagents' managed-agent prompt (the prompt itself when not found)."""
    match = _TASK.search(prompt)
    return match.group(1).strip() if match else prompt


def smolagents_message(role: str, text: str) -> tuple[str, str, tuple[str, ...], str | None]:
    """A smolagents message as ``(role, text, call ids, answered call id)``: a ``tool-call`` message is the
    assistant's calls (ids from its text), a ``tool-response`` message a tool result (its ``Call id`` when given),
    and the ``New task:`` / ``Observation:`` prefixes are dropped, so the text is what the producing step holds."""
    if role == "tool-call":
        return "assistant", "", tuple(_CALL_IDS.findall(text)), None
    result_of = None
    if role == "tool-response":
        match = _CALL_ID_LINE.match(text)
        if match:
            result_of, text = match.group(1), text[match.end():]
        role = "tool"
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    return role, text, (), result_of


def positional_arguments(value: Any, parameters: Any) -> Any:
    """A TOOL span's ``{"args": [...], "kwargs": {...}}`` as one arguments object: positional arguments named by the
    tool's parameters in order (``tool.parameters``), else kept under ``args``; anything else as it is."""
    if not (isinstance(value, dict) and isinstance(value.get("kwargs"), dict)):
        return value
    args = value.get("args") or []
    if not isinstance(args, list) or not args:
        return value["kwargs"]
    names: list[str] = []
    if isinstance(parameters, str):
        try:
            parameters = json.loads(parameters)
        except json.JSONDecodeError:
            parameters = None
    if isinstance(parameters, dict):
        names = [str(k) for k in parameters]
    if len(names) >= len(args):
        return {**dict(zip(names, args, strict=False)), **value["kwargs"]}
    return {"args": args, **value["kwargs"]}
