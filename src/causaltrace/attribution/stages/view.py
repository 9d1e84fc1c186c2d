"""How attribution sees a run's steps: agents, user input, tool outputs, instructions, rendering.

Decisions (ARCHITECTURE "Steps"; issue 32 item 1 — attribution reads kinds, dependencies and values, never a
speaker's name: a format's naming conventions are mapped by its importer, :mod:`causaltrace.collector`):

* The **view** of a run is every step except ``agent_turn`` containers and system context, in index order. For an
  imported log that is one step per log entry (view position = step index); for a live run the step index is kept
  as the step number shown to a model, so prompts and labels use the same numbers.
* The **agent** of a step is ``Step.agent`` (an importer gives it the agent's own name), else its speaker label;
  the **speaker** (``metadata["speaker"]``, a log's original label) is shown to models, never parsed.
* **User input**: ``task`` steps, steps flagged ``metadata["user_input"]``, and steps typed ``human`` (who is a
  human is the ``human_speakers`` option: :func:`causaltrace.collector.speakers.mark_human_speakers`).
  **Tool outputs**: ``tool_response`` / ``code_execution`` steps and steps an importer typed ``tool``; **system
  context** (typed ``system``) is left out of the view. An **instruction** is a step that addresses an agent —
  a handoff (``outputs.target``), a speaker selection (``outputs.selected``), an addressed message
  (``outputs.target``, as importers write a log's ``"X (-> Y)"``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from causaltrace.collector.protocol_rules import addressee, agent_of, dependencies_derived, speaker
from causaltrace.collector.speakers import is_context
from causaltrace.schema import Run, Step

__all__ = [
    "addressee",
    "agent_of",
    "agents_of",
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
    "split_producers",
    "view_steps",
]


def __getattr__(name: str) -> Any:
    if name == "base_agent":  # issue 32: a speaker label's agent is the importer's business (Step.agent)
        from causaltrace.collector.whowhen import agent_name

        warnings.warn("view.base_agent is deprecated: read Step.agent (view.agent_of); Who&When's label rule is "
                      "causaltrace.collector.whowhen.agent_name", DeprecationWarning, stacklevel=2)
        return agent_name
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def speaker_role(step: Step) -> str | None:
    """The speaker's type an importer gave the step (``metadata["speaker_role"]``: agent / tool / human /
    system; :mod:`causaltrace.collector.speakers`), or None."""
    value = step.metadata.get("speaker_role")
    return value if isinstance(value, str) else None


def is_user_input(step: Step) -> bool:
    """Task steps, user-input steps and steps typed ``human`` (by default the task giver only; ``human_speakers=``
    names others)."""
    return step.kind == "task" or step.metadata.get("user_input") is True or speaker_role(step) == "human"


def is_terminal(step: Step) -> bool:
    """A step of a tool / terminal / environment speaker, as its importer typed it (``tool``: by role, name pattern
    or content shape, :mod:`causaltrace.collector.speakers`). Live runs need no typing: their tool and code outputs
    have their own kinds."""
    return speaker_role(step) == "tool"


def is_execution_output(step: Step) -> bool:
    """A step that reports what running something produced: a tool response, a code execution, a terminal."""
    return step.kind in ("tool_response", "code_execution") or is_terminal(step)


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
    """The run's agents (first appearance first), without the humans (the agents of user-input steps)."""
    names: list[str] = []
    humans: set[str] = set()
    for step in view_steps(run):
        name = agent_of(step)
        if is_user_input(step):
            humans.add(name.lower())
        elif name and name not in names:
            names.append(name)
    for name in run.agents:
        if name and name not in names and name.lower() not in humans:
            names.append(name)
    return names


def split_producers(run: Run) -> set[str]:
    """Ids of the steps whose output was split into steps they produced (``produced_by``: a model reply into its
    tool calls, a code run into its calls): the children carry the producer's content. An imported log's steps are
    whole log entries, none split — but a chat log's assistant message is split into its text and its tool calls —
    so a run whose importer derived its dependencies has only those (its other ``produced_by``, a thought → its
    instruction, is a protocol relation the dependency graph carries)."""
    if dependencies_derived(run):
        return {d.step_id for s in run.steps if s.kind == "tool_call" for d in s.depends_on if d.kind == "produced_by"}
    return {d.step_id for s in run.steps for d in s.depends_on if d.kind == "produced_by"}


def has_explicit_dependencies(run: Run) -> bool:
    """Whether the run carries dependencies recorded by instrumentation (a live run), not derived by an importer."""
    return any(s.depends_on for s in run.steps) and not dependencies_derived(run)


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
