"""How attribution sees a run's steps: speakers, agents, user input, terminals, instructions, rendering.

Decisions (ARCHITECTURE "Steps", FACTS.md "Who&When"):

* The **view** of a run is every step except ``agent_turn`` containers, in index order. For an imported log that is
  one step per log entry (view position = step index); for a live run the step index is kept as the step number
  shown to a model, so prompts and labels use the same numbers.
* The **speaker** is the log's original speaker (``metadata["speaker"]``: ``"Orchestrator (-> WebSurfer)"``) when
  the importer kept it, else the step's agent. The **agent** of a step is the speaker's base name (the text before
  ``" ("``), as Who&When labels it.
* **User input**: ``task`` steps, steps flagged ``metadata["user_input"]``, and speakers named ``human`` / ``user``.
  **Code-execution terminals**: speakers an importer typed ``tool`` (:mod:`causaltrace.collector.speakers`), the
  Who&When ``Computer_terminal`` / ``ComputerTerminal`` as one case; **system context** (typed ``system``) is left
  out of the view. An **instruction** is a step
  whose speaker addresses another agent (``"X (-> Y)"``), a handoff (``outputs.target``) or a speaker selection
  (``outputs.selected``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from causaltrace.schema import Run, Step

__all__ = [
    "HUMAN_SPEAKERS",
    "TERMINAL_SPEAKERS",
    "addressee",
    "agents_of",
    "base_agent",
    "candidate_steps",
    "content_of",
    "has_explicit_dependencies",
    "is_execution_output",
    "is_instruction",
    "is_context",
    "is_terminal",
    "is_user_input",
    "speaker_role",
    "render_lines",
    "speaker",
    "view_steps",
]

TERMINAL_SPEAKERS = frozenset({"Computer_terminal", "ComputerTerminal"})
HUMAN_SPEAKERS = frozenset({"human", "user"})
_ADDRESSED = re.compile(r"^(?P<base>.*?) \(-> (?P<target>.+)\)$")


def speaker(step: Step) -> str:
    """The original speaker label of a step (``metadata["speaker"]``), else its agent."""
    value = step.metadata.get("speaker")
    return value if isinstance(value, str) and value else (step.agent or "")


def base_agent(name: str) -> str:
    """The base name of a speaker: the text before ``" ("``."""
    return name.split(" (", 1)[0]


def speaker_role(step: Step) -> str | None:
    """The speaker's type an importer gave the step (``metadata["speaker_role"]``: agent / tool / human /
    system; :mod:`causaltrace.collector.speakers`), or None."""
    value = step.metadata.get("speaker_role")
    return value if isinstance(value, str) else None


def is_user_input(step: Step) -> bool:
    """Task steps, user-input steps and human speakers: typed ``human`` by the importer (by default the task giver
    only; ``human_speakers=`` names others), else — a step with no type — a ``human`` / ``user`` speaker."""
    if step.kind == "task" or step.metadata.get("user_input") is True:
        return True
    role = speaker_role(step)
    if role is not None:
        return role == "human"
    return speaker(step).strip().lower() in HUMAN_SPEAKERS


def is_context(step: Step) -> bool:
    """A system prompt or policy text (typed ``system``): context, never a candidate, never a relevance sink."""
    return speaker_role(step) == "system" or step.kind == "system"


def is_terminal(step: Step) -> bool:
    """A tool / terminal / environment speaker: typed ``tool`` by the importer (by role, name pattern or content
    shape: :mod:`causaltrace.collector.speakers`), else — a step with no type, e.g. of a run stored before the
    typing — the Who&When terminal names. Live runs need neither: their tool and code outputs have their own kinds."""
    role = speaker_role(step)
    if role is not None:
        return role == "tool"
    return speaker(step) in TERMINAL_SPEAKERS or base_agent(speaker(step)) in TERMINAL_SPEAKERS


def is_execution_output(step: Step) -> bool:
    """A step that reports what running something produced: a tool response, a code execution, a terminal."""
    return step.kind in ("tool_response", "code_execution") or is_terminal(step)


def addressee(step: Step) -> str | None:
    """The agent an instruction addresses: ``"X (-> Y)"`` → ``Y``; a handoff's target; a selected speaker."""
    m = _ADDRESSED.match(speaker(step))
    if m:
        return m.group("target")
    for key in ("target", "selected"):
        value = step.outputs.get(key)
        if step.kind in ("handoff", "speaker_selection") and isinstance(value, str) and value:
            return value
    return None


def is_instruction(step: Step) -> bool:
    """Whether the step addresses another agent (an orchestrator instruction, a handoff, a speaker selection)."""
    return addressee(step) is not None


def view_steps(run: Run) -> list[Step]:
    """Every step except ``agent_turn`` containers and system context, in index order."""
    return [s for s in run.steps if s.kind != "agent_turn" and not is_context(s)]


def candidate_steps(run: Run) -> list[Step]:
    """Attribution candidates: the run's content steps (``Run.candidate_steps``) that are neither user input nor
    system context."""
    return [s for s in run.candidate_steps() if not is_user_input(s) and not is_context(s)]


def agents_of(run: Run) -> list[str]:
    """The run's agents (base names, first appearance first), without users."""
    names: list[str] = []
    for step in view_steps(run):
        if is_user_input(step):
            continue
        name = base_agent(step.agent or speaker(step))
        if name and name not in names:
            names.append(name)
    for name in run.agents:
        if name and name not in names and name.lower() not in HUMAN_SPEAKERS:
            names.append(name)
    return names


def has_explicit_dependencies(run: Run) -> bool:
    """Whether the run carries dependencies recorded by instrumentation."""
    return any(s.depends_on for s in run.steps)


def content_of(step: Step) -> str:
    """The human-readable text of a step; for a step with no content, its payload or error."""
    if step.content:
        return step.content
    if step.kind == "tool_call":
        return f"{step.tool_name or 'tool'}({step.arguments or {}})"
    if step.error is not None:
        return f"{step.error.type}: {step.error.message}"
    for key in ("text", "result", "stdout", "selected", "target"):
        value = step.outputs.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def render_lines(
    steps: Iterable[Step],
    texts: Mapping[int, str] | None = None,
    *,
    numbered: bool = False,
    sep: str = "\n",
) -> str:
    """``speaker: content`` per step (Who&When's rendering); ``Step {index} - speaker: content`` when numbered.

    ``texts`` overrides a step's content (e.g. a compressed version) by step index.
    """
    lines = []
    for step in steps:
        text = texts.get(step.index, content_of(step)) if texts is not None else content_of(step)
        who = speaker(step) or step.kind
        lines.append(f"Step {step.index} - {who}: {text}" if numbered else f"{who}: {text}")
    return sep.join(lines)
