"""Who a speaker of an imported log is: an agent, a tool / terminal / environment, a human, or system context
(issue 20 item 5: generic conventions for imported logs, one typing module for the importers and attribution).

A speaker is typed, first rule that holds:

1. by the entry's ROLE: ``tool`` / ``function`` / ``ipython`` → ``tool``; ``system`` / ``developer`` → ``system``;
2. by NAME: the Who&When terminals (``Computer_terminal``, ``ComputerTerminal``) are one case of the tool-name
   patterns (``Tool``, ``Terminal``, ``Executor``, ``Code_executor``, ``Python``, ``Shell``, ``Environment``,
   ``Function``, ``Observation``… in any case, ``_`` / ``-`` / space separated); ``system`` → ``system``;
3. by CONTENT SHAPE, when every message of the speaker looks like a program's output (an exit code line, a Python
   traceback, a JSON object or array) → ``tool``;
4. otherwise an ``agent``.

Humans are a separate choice: who counts as a human that cannot be at fault is an OPTION (``human_speakers``), by
default the task giver only — so a simulated user (an agent playing the user) can be blamed. A ``system`` speaker
(a system prompt, a policy) is context: never a candidate and never a relevance sink.

The type lands on each imported step as ``metadata["speaker_role"]``; attribution reads it there
(:mod:`causaltrace.attribution.stages.view`) and never types a speaker by its name itself (issue 32 item 1: a run
stored before the typing is brought up to date by its importer, e.g. :func:`causaltrace.collector.whowhen.current_form`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Literal

from causaltrace.schema import Run, Step

__all__ = [
    "SYSTEM_ROLES",
    "TOOL_ROLES",
    "SpeakerRole",
    "classify_speaker",
    "is_context",
    "is_tool_name",
    "looks_like_tool_output",
    "mark_human_speakers",
    "task_giver",
]

SpeakerRole = Literal["agent", "tool", "human", "system"]

TOOL_ROLES = frozenset({"tool", "function", "ipython"})
SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_WORDS = (r"computer[ _-]?terminal|terminal|tools?|function|functions|executor|code[ _-]?executor|"
               r"python|ipython|shell|bash|environment|env|observation|tool[ _-]?(?:output|result|response)s?")
_TOOL_NAME = re.compile(rf"^(?:{_TOOL_WORDS})(?:[ _-]?\d+)?$", re.IGNORECASE)
_EXIT_CODE = re.compile(r"exit\s?code[:\s]+-?\d+", re.IGNORECASE)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")


def is_tool_name(name: str) -> bool:
    """Whether ``name`` (its base, before ``" ("``) is a tool / terminal / environment speaker name."""
    return bool(_TOOL_NAME.match(name.split(" (", 1)[0].strip()))


def looks_like_tool_output(text: str) -> bool:
    """A program's output: text that STARTS with an exit code line or a Python traceback, or is a JSON object /
    array (an agent that quotes a traceback mid-message is still an agent)."""
    stripped = text.strip()
    if not stripped:
        return False
    if _EXIT_CODE.match(stripped) or _TRACEBACK.match(stripped):
        return True
    if stripped[0] in "[{" and stripped[-1] in "]}":
        try:
            json.loads(stripped)
        except ValueError:
            return False
        return True
    return False


def classify_speaker(name: str, role: str | None = None, contents: Iterable[str] = ()) -> SpeakerRole:
    """The type of a speaker (module docstring; humans are an option, see :func:`mark_human_speakers`)."""
    role_key = (role or "").strip().lower()
    if role_key in TOOL_ROLES:
        return "tool"
    if role_key in SYSTEM_ROLES or name.strip().lower() == "system":
        return "system"
    if is_tool_name(name):
        return "tool"
    texts = [t for t in contents if t and t.strip()]
    if texts and all(looks_like_tool_output(t) for t in texts):
        return "tool"
    return "agent"


def is_context(step: Step) -> bool:
    """A system prompt or policy text (typed ``system``): context, never a candidate, never a relevance sink."""
    return step.metadata.get("speaker_role") == "system" or step.kind == "system"


def task_giver(steps: Iterable[Step]) -> str | None:
    """The speaker of the run's task (its first ``task`` step), the default and only human."""
    for step in steps:
        if step.kind == "task":
            value = step.metadata.get("speaker")
            return value if isinstance(value, str) and value else (step.agent or None)
    return None


def mark_human_speakers(run: Run, human_speakers: Iterable[str] | None = None) -> Run:
    """A copy of ``run`` whose steps say who is a human that cannot be at fault: the speakers named in
    ``human_speakers`` (case-insensitive, base names), or by default only the task giver. Other steps typed
    ``human`` become ``agent`` (a simulated user can be blamed); tool and system typing is kept."""
    giver = task_giver(run.steps)
    names = {n.strip().lower() for n in human_speakers} if human_speakers is not None else set()
    if human_speakers is None and giver:
        names.add(giver.split(" (", 1)[0].strip().lower())
    steps = []
    changed = False
    for step in run.steps:
        name = str(step.metadata.get("speaker") or step.agent or "").split(" (", 1)[0].strip().lower()
        current = step.metadata.get("speaker_role")
        if name in names:
            role: str | None = "human"
        elif current == "human" or (current is None and name in ("human", "user")):
            role = "agent"
        else:
            role = current if isinstance(current, str) else None
        if step.kind == "task" or role is None or role == current:
            steps.append(step)
        else:
            changed = True
            steps.append(step.model_copy(update={"metadata": {**step.metadata, "speaker_role": role}}))
    return run.model_copy(update={"steps": steps}) if changed else run
