"""Which steps an agent turn holds, so the report can fold a (sub-)agent's turn into one line.

A step belongs to every ``agent_turn`` on its ``parent_step_id`` chain: a sub-agent's llm response, code and tool
calls sit inside its turn, which sits inside the manager's tool call. Folding a turn hides its members in the graph
or in the step table; the turn itself stays, labelled with how many steps it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from causaltrace.schema import Run

__all__ = ["FOLD_AT", "Turns", "folded_by_default", "turns_of"]

#: Runs longer than this start with their unmarked sub-agent turns folded in the step table.
FOLD_AT = 100


@dataclass(frozen=True)
class Turns:
    """Per step id, the indexes of the agent turns around it (innermost first); per turn id, its member ids."""

    around: dict[str, tuple[int, ...]]
    members: dict[str, tuple[str, ...]]

    def data_turns(self, step_id: str) -> str:
        """The ``data-turns`` attribute of a step's node or row ('' when no turn holds it)."""
        turns = self.around.get(step_id, ())
        return f' data-turns="{" ".join(str(t) for t in turns)}"' if turns else ""


def turns_of(run: Run) -> Turns:
    """Walk each step's parent chain once (a chain that loops back stops where it does)."""
    by_id = {s.step_id: s for s in run.steps}
    around: dict[str, tuple[int, ...]] = {}
    members: dict[str, list[str]] = {}
    for step in run.steps:
        chain: list[int] = []
        seen = {step.step_id}
        parent = by_id.get(step.parent_step_id) if step.parent_step_id else None
        while parent is not None and parent.step_id not in seen:
            seen.add(parent.step_id)
            if parent.kind == "agent_turn":
                chain.append(parent.index)
                members.setdefault(parent.step_id, []).append(step.step_id)
            parent = by_id.get(parent.parent_step_id) if parent.parent_step_id else None
        if chain:
            around[step.step_id] = tuple(chain)
    return Turns(around, {k: tuple(v) for k, v in members.items()})


def folded_by_default(run: Run, turns: Turns, marked: set[str]) -> set[str]:
    """The sub-agent turns (a turn inside another step) the step table folds on load: only in a long run, and
    never one that holds, or is, a marked step (the decisive step, the evidence)."""
    if len(run.steps) <= FOLD_AT:
        return set()
    out: set[str] = set()
    for step in run.steps:
        ids = turns.members.get(step.step_id)
        if step.kind != "agent_turn" or step.parent_step_id is None or not ids:
            continue
        if step.step_id not in marked and not marked.intersection(ids):
            out.add(step.step_id)
    return out
