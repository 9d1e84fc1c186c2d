"""What the diagnosis says about each step: decisive, evidence role, candidate rank, and the propagation path."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from causaltrace.schema import Diagnosis, Run

__all__ = ["Marks", "marks_of"]


@dataclass(frozen=True)
class Marks:
    """Per-step highlights derived from a diagnosis (all empty without one)."""

    decisive: str | None = None
    roles: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    #: Dependency edges (producer id, consumer id) on the propagation path.
    path_edges: frozenset[tuple[str, str]] = frozenset()
    #: Consecutive evidence steps with no dependency path between them (drawn as a dashed "propagation" link).
    path_links: tuple[tuple[str, str], ...] = ()
    #: The verdict is uncertain: its step is the top candidate, never called "decisive" (issue 33 item 7).
    uncertain: bool = False

    @property
    def decisive_word(self) -> str:
        """What the marked step is called on the page."""
        return "top candidate" if self.uncertain else "decisive"

    def on_path(self, step_id: str) -> bool:
        return step_id in self.roles or step_id == self.decisive


def marks_of(run: Run, diagnosis: Diagnosis | None) -> Marks:
    """Read the highlights of ``run`` out of ``diagnosis`` (ids not in the run are ignored)."""
    if diagnosis is None:
        return Marks()
    ids = {s.step_id for s in run.steps}
    index_of = {s.step_id: s.index for s in run.steps}
    decisive = diagnosis.decisive_step_id if diagnosis.decisive_step_id in ids else None
    if decisive is None and diagnosis.decisive_step_index is not None:
        decisive = next((s.step_id for s in run.steps if s.index == diagnosis.decisive_step_index), None)
    roles: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    for item in diagnosis.evidence:
        sid = item.step_id if item.step_id in ids else None
        if sid is None:
            continue
        if item.role not in roles.setdefault(sid, []):
            roles[sid].append(item.role)
        if item.note:
            notes.setdefault(sid, []).append(item.note)
    ranks: dict[str, int] = {}
    scores: dict[str, float] = {}
    for rank, cand in enumerate(diagnosis.candidates, 1):
        if cand.step_id in ids and cand.step_id not in ranks:
            ranks[cand.step_id] = rank
            scores[cand.step_id] = cand.score
    # The path: the evidence steps in index order (the decisive step first when it is not evidence already).
    chain = sorted(roles, key=lambda sid: index_of[sid])
    if decisive is not None and decisive not in roles:
        chain = sorted([decisive, *chain], key=lambda sid: index_of[sid])
    consumers: dict[str, list[str]] = {}
    for step in run.steps:
        for dep in step.depends_on:
            consumers.setdefault(dep.step_id, []).append(step.step_id)
    edges: set[tuple[str, str]] = set()
    links: list[tuple[str, str]] = []
    for a, b in zip(chain, chain[1:], strict=False):
        hops = _shortest(a, b, consumers, index_of)
        if hops is None:
            links.append((a, b))
        else:
            edges.update(zip(hops, hops[1:], strict=False))
    from causaltrace.collector.verdict_text import verdict_view

    uncertain = verdict_view(run, diagnosis).uncertain
    return Marks(decisive, roles, notes, ranks, scores, frozenset(edges), tuple(links), uncertain)


def _shortest(a: str, b: str, consumers: dict[str, list[str]], index_of: dict[str, int]) -> list[str] | None:
    """The shortest producer → consumer path from ``a`` to ``b`` (BFS, deterministic: consumers in index order)."""
    limit = index_of[b]
    prev: dict[str, str | None] = {a: None}
    queue = deque([a])
    while queue:
        cur = queue.popleft()
        if cur == b:
            out: list[str] = []
            node: str | None = cur
            while node is not None:
                out.append(node)
                node = prev[node]
            return out[::-1]
        for nxt in sorted(consumers.get(cur, ()), key=lambda sid: index_of[sid]):
            if nxt not in prev and index_of[nxt] <= limit:
                prev[nxt] = cur
                queue.append(nxt)
    return None
