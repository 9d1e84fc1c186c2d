"""The step graph as an inline SVG: one horizontal lane per agent, steps left → right by index, dependency curves.

The layout is computed here, deterministically: step ``p`` (its position in index order) sits in column ``p`` of
its agent's lane, so reading left to right is reading the run in order and a lane shows what one agent did. A
dependency inside a lane is a straight arrow (next column) or an arc above the lane; between lanes it is an S
curve leaving the producer's right side and entering the consumer's left side. Every node is a ``<g
class="step-node" data-step-index=…>`` with a ``<title>`` tooltip; every dependency one ``<path class="dep-edge">``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from causaltrace.report._marks import Marks
from causaltrace.report._style import (
    CANDIDATE_BLUE,
    ERROR_RED,
    HIGHLIGHT,
    LANE_COLOURS,
    dep_style,
    e,
    fmt,
    kind_style,
    shape_svg,
)
from causaltrace.report._turns import Turns, turns_of
from causaltrace.schema import Run, Step

__all__ = ["GraphLayout", "lane_order", "render_graph", "render_legend", "short"]

COL_W = 60.0
#: A short run spreads its columns up to this width (the graph area of a 1600-pixel-wide window).
FILL_W = 1280.0
MAX_COL_W = 92.0
LANE_H = 132.0
NODE_Y = 62.0
R = 15.0
PAD_L = 18.0
PAD_R = 30.0
#: Edges between lanes that span more columns than this are routed (see :func:`_routed`), shorter ones are S curves.
SHORT_HOP = 3
CORNER = 9.0
#: Edges spanning more columns than this (and not on the propagation path) are drawn as a short labelled stub
#: into the consumer ("#0 ↘"), like an off-page connector: a long run's picture would otherwise be a web of lines.
FAR = 12


def short(text: str | None, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def lane_order(run: Run) -> list[str]:
    """The agents that own steps, in order of their first step (the task's lane comes first)."""
    present: dict[str, None] = {}
    for step in run.steps:
        present.setdefault(step.agent, None)
    return list(present)


def lane_label(agent: str) -> str:
    return agent or "(no agent)"


@dataclass(frozen=True)
class GraphLayout:
    """Where each step sits: its column, its lane, and the pixel centre of its node."""

    lanes: list[str]
    column: dict[str, int]
    lane_of: dict[str, int]
    width: float
    height: float
    col_w: float = COL_W

    @classmethod
    def of(cls, run: Run) -> GraphLayout:
        lanes = lane_order(run)
        lane_index = {a: i for i, a in enumerate(lanes)}
        column = {s.step_id: p for p, s in enumerate(run.steps)}
        lane_of = {s.step_id: lane_index[s.agent] for s in run.steps}
        n = max(len(run.steps), 1)
        col_w = min(MAX_COL_W, max(COL_W, (FILL_W - PAD_L - PAD_R) / n))
        width = PAD_L + n * col_w + PAD_R
        height = max(len(lanes), 1) * LANE_H
        return cls(lanes, column, lane_of, width, height, col_w)

    def xy(self, step_id: str) -> tuple[float, float]:
        return PAD_L + self.column[step_id] * self.col_w + self.col_w / 2, self.lane_of[step_id] * LANE_H + NODE_Y


def tooltip(step: Step, marks: Marks) -> str:
    """The node's tooltip: kind, agent, index, status, marks, then the first 200 characters of the content."""
    head = f"#{step.index} {step.kind} · agent {step.agent or '-'}"
    if step.tool_name:
        head += f" · tool {step.tool_name}"
    lines = [head, f"status: {step.status}"]
    if step.error is not None:
        lines.append(f"error: {short(step.error.type + ': ' + step.error.message, 160)}")
    if step.step_id == marks.decisive:
        lines.append(f"★ the {marks.decisive_word} step")
    if step.step_id in marks.roles:
        lines.append("evidence: " + ", ".join(marks.roles[step.step_id]))
    if step.step_id in marks.ranks:
        lines.append(f"candidate rank {marks.ranks[step.step_id]} (score {marks.scores[step.step_id]:.3f})")
    text = step.content or (step.error.message if step.error else "")
    if text:
        lines.append("")
        lines.append(text[:200] + ("…" if len(text) > 200 else ""))
    return "\n".join(lines)


def _edge_d(layout: GraphLayout, src: str, dst: str, ordinal: int) -> str:
    (x1, y1), (x2, y2) = layout.xy(src), layout.xy(dst)
    if layout.lane_of[src] == layout.lane_of[dst]:
        dist = layout.column[dst] - layout.column[src]
        if dist == 1 and ordinal == 0:
            return f"M{fmt(x1 + R + 1)},{fmt(y1)} L{fmt(x2 - R - 3)},{fmt(y2)}"
        h = min(12.0 + 7.0 * dist, 44.0) + 6.0 * ordinal
        sx, ex = x1 + 3, x2 - 3
        top = y1 - R - 2
        return (f"M{fmt(sx)},{fmt(top)} C{fmt(sx + 6)},{fmt(top - h)} {fmt(ex - 6)},{fmt(top - h)} "
                f"{fmt(ex)},{fmt(top - 1)}")
    down = 1.0 if y2 > y1 else -1.0
    dist = layout.column[dst] - layout.column[src]
    if dist > SHORT_HOP:
        return _routed(layout, x1, y1, x2, y2, layout.lane_of[dst], ordinal)
    dy = abs(y2 - y1)
    lean = 0.42 * dy + 5.0 * ordinal
    sx, sy = x1 + R * 0.8, y1 + down * R * 0.45
    ex, ey = x2 - R - 3, y2 - down * 3.0
    return (f"M{fmt(sx)},{fmt(sy)} C{fmt(sx + 16 + 4 * ordinal)},{fmt(sy + down * lean)} "
            f"{fmt(ex - 20 - 4 * ordinal)},{fmt(ey - down * lean)} {fmt(ex)},{fmt(ey)}")


def _routed(layout: GraphLayout, x1: float, y1: float, x2: float, y2: float, lane: int, ordinal: int) -> str:
    """A long edge between lanes: right out of the source, along the column boundary (never a node there) to the
    target lane's channel above its nodes, along it, and down into the target from above."""
    c = CORNER
    xb = x1 + layout.col_w / 2
    yc = lane * LANE_H + 17.0 + 3.5 * ((int(x1 / layout.col_w) + ordinal) % 4)
    s = 1.0 if yc > y1 else -1.0
    return (f"M{fmt(x1 + R)},{fmt(y1)} L{fmt(xb - c)},{fmt(y1)} Q{fmt(xb)},{fmt(y1)} {fmt(xb)},{fmt(y1 + s * c)} "
            f"L{fmt(xb)},{fmt(yc - s * c)} Q{fmt(xb)},{fmt(yc)} {fmt(xb + c)},{fmt(yc)} L{fmt(x2 - c)},{fmt(yc)} "
            f"Q{fmt(x2)},{fmt(yc)} {fmt(x2)},{fmt(yc + c)} L{fmt(x2)},{fmt(y2 - R - 3)}")


def _marker(mid: str, colour: str, size: float) -> str:
    return (f'<marker id="{mid}" viewBox="0 0 10 10" refX="8.5" refY="5" markerWidth="{fmt(size)}" '
            f'markerHeight="{fmt(size)}" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,1 L10,5 L0,9 z" fill="{colour}"/></marker>')


def render_graph(run: Run, marks: Marks, layout: GraphLayout | None = None,
                 turns: Turns | None = None) -> tuple[str, str]:
    """``(lane labels HTML, SVG)`` of the step graph."""
    layout = layout or GraphLayout.of(run)
    turns = turns or turns_of(run)
    w, h = layout.width, layout.height
    out = [f'<svg class="graph" width="{fmt(w)}" height="{fmt(h)}" viewBox="0 0 {fmt(w)} {fmt(h)}" '
           f'role="img" aria-label="step graph of run {e(run.run_id)}" {_geometry(layout)}>', _defs(run),
           _lanes(layout),
           _turn_bands(run, layout, turns), _edges(run, marks, layout), '<g class="nodes">']
    out.extend(_node(step, marks, layout, turns) for step in run.steps)
    out.append("</g></svg>")
    return _lane_labels(run, marks, layout), "\n".join(out)


def _geometry(layout: GraphLayout) -> str:
    """The layout's constants as data attributes of the SVG: the page's script lays the graph out again with them
    when a folded turn gives its columns back (the same rules as :func:`_edge_d`)."""
    return (f'data-col-w="{layout.col_w:.6g}" data-pad-l="{fmt(PAD_L)}" data-pad-r="{fmt(PAD_R)}" '
            f'data-lane-h="{fmt(LANE_H)}" data-node-y="{fmt(NODE_Y)}" data-r="{fmt(R)}" data-hop="{SHORT_HOP}" '
            f'data-corner="{fmt(CORNER)}"')


def _defs(run: Run) -> str:
    """The arrow heads: one per dependency kind in the run, and the highlight's."""
    dep_kinds = sorted({d.kind for s in run.steps for d in s.depends_on})
    heads = [_marker(f"arr-{kind}", dep_style(kind)[0], 7) for kind in dep_kinds]
    return "<defs>" + "".join(heads) + _marker("arr-hl", HIGHLIGHT, 10) + "</defs>"


def _lanes(layout: GraphLayout) -> str:
    """One striped background band per agent, with a faint guide line through its nodes."""
    out: list[str] = []
    w = layout.width
    for i in range(len(layout.lanes)):
        colour = LANE_COLOURS[i % len(LANE_COLOURS)]
        y = i * LANE_H
        fill = "#f8fafc" if i % 2 == 0 else "#ffffff"
        out.append(f'<rect class="lane" x="0" y="{fmt(y)}" width="{fmt(w)}" height="{fmt(LANE_H)}" fill="{fill}"/>')
        out.append(f'<line x1="0" y1="{fmt(y + NODE_Y)}" x2="{fmt(w)}" y2="{fmt(y + NODE_Y)}" stroke="{colour}" '
                   f'stroke-opacity=".18" stroke-width="1" stroke-dasharray="2 6"/>')
        if i:
            out.append(f'<line x1="0" y1="{fmt(y)}" x2="{fmt(w)}" y2="{fmt(y)}" stroke="#e2e8f0"/>')
    return "\n".join(out)


def _turn_bands(run: Run, layout: GraphLayout, turns: Turns) -> str:
    """A faint band around each agent turn and its same-lane children; a turn that holds steps gets a fold button
    (the page's script hides its members and labels the turn with how many it holds)."""
    kids: dict[str, list[Step]] = {}
    for step in run.steps:
        if step.parent_step_id is not None:
            kids.setdefault(step.parent_step_id, []).append(step)
    out: list[str] = []
    for step in run.steps:
        if step.kind != "agent_turn":
            continue
        members = [step.step_id] + [c.step_id for c in kids.get(step.step_id, ()) if c.agent == step.agent]
        cols = [layout.column[m] for m in members]
        lane = layout.lane_of[step.step_id]
        colour = LANE_COLOURS[lane % len(LANE_COLOURS)]
        x0 = PAD_L + min(cols) * layout.col_w + 4
        x1 = PAD_L + (max(cols) + 1) * layout.col_w - 4
        y0 = lane * LANE_H + NODE_Y - R - 14
        out.append(f'<rect class="turn-band" data-cols="{" ".join(str(c) for c in cols)}" x="{fmt(x0)}" '
                   f'y="{fmt(y0)}" width="{fmt(x1 - x0)}" '
                   f'height="{fmt(2 * R + 14 + 46)}" rx="12" fill="{colour}" fill-opacity=".055" stroke="{colour}" '
                   f'stroke-opacity=".35" stroke-dasharray="4 3"><title>turn #{step.index} of '
                   f'{e(lane_label(step.agent))}</title></rect>')
        size = len(turns.members.get(step.step_id, ()))
        if size:
            out.append(f'<g class="fold-btn" data-fold="{step.index}" data-size="{size}" data-x="{fmt(x0)}" '
                       'role="button" '
                       f'tabindex="0" aria-expanded="true"><title>fold the {size} steps of turn #{step.index}'
                       f'</title><rect x="{fmt(x0 - 6)}" y="{fmt(y0 - 8)}" width="16" height="16" rx="4" '
                       f'fill="#fff" stroke="{colour}"/><text class="fold-sign" x="{fmt(x0 + 2)}" '
                       f'y="{fmt(y0 + 4.2)}" text-anchor="middle">−</text></g>')
    return "\n".join(out)


def _edge_title(run_by_id: dict[str, Step], src: str, dst: Step, kind: str, hot: bool) -> str:
    title = f"#{run_by_id[src].index} → #{dst.index} · {kind}: {dep_style(kind)[2]}"
    return title + " · on the propagation path" if hot else title


def _edges(run: Run, marks: Marks, layout: GraphLayout) -> str:
    """One path per Dependency (long ones as labelled stubs), the propagation path drawn last, on top."""
    by_id = {s.step_id: s for s in run.steps}
    seen: dict[tuple[str, str], int] = {}
    normal: list[str] = []
    on_path: list[str] = []
    stubs: dict[str, list[int]] = {}
    for step in run.steps:
        for dep in step.depends_on:
            pair = (dep.step_id, step.step_id)
            ordinal = seen.get(pair, 0)
            seen[pair] = ordinal + 1
            hot = pair in marks.path_edges
            src_idx = by_id[dep.step_id].index
            title = _edge_title(by_id, dep.step_id, step, dep.kind, hot)
            stub = layout.column[step.step_id] - layout.column[dep.step_id] > FAR and not hot
            if stub:
                d = _stub_d(layout, step.step_id)
                stubs.setdefault(step.step_id, []).append(src_idx)
                title += " (a long edge: drawn as a stub, the label names the producer)"
            else:
                d = _edge_d(layout, dep.step_id, step.step_id, ordinal)
            attrs = (f'data-kind="{e(dep.kind)}" data-from="{src_idx}" data-to="{step.index}" '
                     f'data-ordinal="{ordinal}"{" data-stub" if stub else ""} d="{d}" fill="none"')
            if hot:
                on_path.append(f'<path class="dep-edge dep-{e(dep.kind)} on-path" {attrs} stroke="{HIGHLIGHT}" '
                               'stroke-width="3.6" stroke-linecap="round" marker-end="url(#arr-hl)">'
                               f"<title>{e(title)}</title></path>")
                continue
            colour, dashed, _ = dep_style(dep.kind)
            dash = ' stroke-dasharray="5 3"' if dashed else ""
            normal.append(f'<path class="dep-edge dep-{e(dep.kind)}" {attrs} stroke="{colour}" stroke-width="1.5" '
                          f'stroke-opacity=".8"{dash} marker-end="url(#arr-{e(dep.kind)})"><title>{e(title)}'
                          "</title></path>")
    out = ['<g class="edges">', *normal, *_stub_labels(layout, stubs), "</g>", '<g class="path-edges">', *on_path]
    for a, b in marks.path_links:
        out.append(f'<path class="path-link" data-from="{by_id[a].index}" data-to="{by_id[b].index}" '
                   'data-ordinal="2" '
                   f'd="{_edge_d(layout, a, b, 2)}" fill="none" stroke="{HIGHLIGHT}" stroke-width="2.6" '
                   f'stroke-dasharray="7 5" marker-end="url(#arr-hl)"><title>propagation #{by_id[a].index} → '
                   f'#{by_id[b].index} (no recorded dependency path)</title></path>')
    out.append("</g>")
    return "\n".join(out)


def _stub_d(layout: GraphLayout, step_id: str) -> str:
    x2, y2 = layout.xy(step_id)
    top = y2 - R - 3
    return f"M{fmt(x2 - 17)},{fmt(top - 15)} Q{fmt(x2)},{fmt(top - 15)} {fmt(x2)},{fmt(top)}"


def _stub_labels(layout: GraphLayout, stubs: dict[str, list[int]]) -> list[str]:
    out: list[str] = []
    for sid, sources in stubs.items():
        x2, y2 = layout.xy(sid)
        names = sorted(set(sources))
        text = " ".join(f"#{i}" for i in names[:3]) + (" …" if len(names) > 3 else "")
        out.append(f'<text class="stub-label" data-at="{layout.column[sid]}" x="{fmt(x2 - 19)}" '
                   f'y="{fmt(y2 - R - 15.5)}" text-anchor="end">'
                   f"{e(text)}<title>{e('long-range inputs from ' + ', '.join(f'#{i}' for i in names))}</title></text>")
    return out


def _lane_labels(run: Run, marks: Marks, layout: GraphLayout) -> str:
    """The HTML column left of the graph: each lane's agent, step count, errors, and whether it holds the decisive
    step."""
    by_id = {s.step_id: s for s in run.steps}
    labels = ['<div class="lane-labels" style="height:' + fmt(layout.height) + 'px">']
    for i, agent in enumerate(layout.lanes):
        colour = LANE_COLOURS[i % len(LANE_COLOURS)]
        steps = [s for s in run.steps if s.agent == agent]
        errors = sum(1 for s in steps if s.status == "error")
        flags = ""
        if marks.decisive is not None and by_id[marks.decisive].agent == agent:
            flags = f'<span class="lane-flag">{marks.decisive_word}</span>'
        extra = f' · <span class="err">{errors} error{"s" if errors != 1 else ""}</span>' if errors else ""
        labels.append(
            f'<div class="lane-label" style="height:{fmt(LANE_H)}px;border-left-color:{colour}">'
            f'<span class="lane-name" title="{e(lane_label(agent))}">{e(short(lane_label(agent), 22))}</span>'
            f'<span class="lane-meta">{len(steps)} step{"s" if len(steps) != 1 else ""}{extra}</span>{flags}</div>'
        )
    labels.append("</div>")
    return "".join(labels)


def _node(step: Step, marks: Marks, layout: GraphLayout, turns: Turns) -> str:
    x, y = layout.xy(step.step_id)
    fill, stroke, shape, label = kind_style(step.kind)
    classes = ["step-node", f"kind-{step.kind}"]
    parts: list[str] = [f"<title>{e(tooltip(step, marks))}</title>"]
    decisive = step.step_id == marks.decisive
    roles = marks.roles.get(step.step_id, [])
    if decisive:
        classes.append("decisive")
        parts.append(f'<circle class="halo" cx="{fmt(x)}" cy="{fmt(y)}" r="{fmt(R + 11)}" fill="{HIGHLIGHT}" '
                     f'fill-opacity=".22" stroke="{HIGHLIGHT}" stroke-width="3"/>')
    elif roles:
        parts.append(f'<circle class="ring" cx="{fmt(x)}" cy="{fmt(y)}" r="{fmt(R + 8)}" fill="{HIGHLIGHT}" '
                     f'fill-opacity=".10" stroke="{HIGHLIGHT}" stroke-width="2.4"/>')
    if roles:
        classes.append("evidence")
    width = 1.6
    edge = stroke
    if step.status == "error":
        classes.append("status-error")
        edge, width = ERROR_RED, 3.2
    elif decisive or roles:
        width = 2.2
    parts.append(shape_svg(shape, x, y, R, fill, edge, width=width))
    text_y = y + (4.5 if shape == "triangle" else 3.6)
    parts.append(f'<text class="idx" x="{fmt(x)}" y="{fmt(text_y)}" text-anchor="middle">{step.index}</text>')
    if step.status == "error":
        parts.append(f'<circle cx="{fmt(x - R)}" cy="{fmt(y + R - 2)}" r="6.5" fill="{ERROR_RED}"/>'
                     f'<text class="badge" x="{fmt(x - R)}" y="{fmt(y + R + 1.4)}" text-anchor="middle">!</text>')
    rank = marks.ranks.get(step.step_id)
    if rank is not None:
        classes.append("candidate")
        parts.append(f'<g class="rank"><circle cx="{fmt(x + R + 1)}" cy="{fmt(y - R)}" r="8" fill="{CANDIDATE_BLUE}" '
                     f'stroke="#fff" stroke-width="1.5"/><text class="badge" x="{fmt(x + R + 1)}" '
                     f'y="{fmt(y - R + 3.2)}" text-anchor="middle">{rank}</text></g>')
    ly = y + R + 15
    parts.append(f'<text class="kind-label" x="{fmt(x)}" y="{fmt(ly)}" text-anchor="middle">{e(label)}</text>')
    sub = step.tool_name or (step.model if step.kind == "llm_response" and step.model else None)
    if sub:
        ly += 11
        parts.append(f'<text class="sub-label" x="{fmt(x)}" y="{fmt(ly)}" text-anchor="middle">'
                     f"{e(short(sub, 11))}</text>")
    tag = marks.decisive_word if decisive else (roles[0] if roles else None)
    if tag:
        ly += 12
        parts.append(f'<text class="role-label" x="{fmt(x)}" y="{fmt(ly)}" text-anchor="middle">{e(tag)}</text>')
    size = len(turns.members.get(step.step_id, ()))
    if size:
        parts.append(f'<text class="fold-count" x="{fmt(x + R + 4)}" y="{fmt(y + 4)}">+{size}</text>')
    cls = " ".join(classes)
    return (f'<g class="{cls}" id="node-{step.index}" data-step-index="{step.index}" data-step-id="{e(step.step_id)}" '
            f'data-kind="{e(step.kind)}" data-col="{layout.column[step.step_id]}" '
            f'data-lane="{layout.lane_of[step.step_id]}"{turns.data_turns(step.step_id)} tabindex="0">'
            f'{"".join(parts)}</g>')


def render_legend(run: Run, *, with_marks: bool, decisive_word: str = "decisive") -> str:
    """The legend of the node kinds and dependency kinds used in ``run`` (and of the highlights)."""
    kinds = sorted({s.kind for s in run.steps}, key=lambda k: list(KIND_ORDER).index(k) if k in KIND_ORDER else 99)
    items: list[str] = []
    for kind in kinds:
        fill, stroke, shape, label = kind_style(kind)
        icon = shape_svg(shape, 13, 12, 8.5, fill, stroke, width=1.4)
        items.append(f'<span class="lg"><svg width="26" height="24" aria-hidden="true">{icon}</svg>{e(kind)}</span>')
    dep_items: list[str] = []
    for kind in sorted({d.kind for s in run.steps for d in s.depends_on}):
        colour, dashed, meaning = dep_style(kind)
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        dep_items.append(
            f'<span class="lg" title="{e(meaning)}"><svg width="34" height="14" aria-hidden="true">'
            f'<line x1="2" y1="7" x2="26" y2="7" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<path d="M25,3 L33,7 L25,11 z" fill="{colour}"/></svg>{e(kind)}</span>'
        )
    marks: list[str] = [
        f'<span class="lg"><svg width="26" height="24" aria-hidden="true"><circle cx="13" cy="12" r="8" '
        f'fill="#fff" stroke="{ERROR_RED}" stroke-width="3"/></svg>status error</span>'
    ]
    if with_marks:
        marks += [
            f'<span class="lg"><svg width="26" height="24" aria-hidden="true"><circle cx="13" cy="12" r="11" '
            f'fill="{HIGHLIGHT}" fill-opacity=".22" stroke="{HIGHLIGHT}" stroke-width="2.5"/><circle cx="13" '
            f'cy="12" r="5.5" fill="#fff" stroke="#64748b"/></svg>{decisive_word} step</span>',
            f'<span class="lg"><svg width="34" height="14" aria-hidden="true"><line x1="2" y1="7" x2="25" y2="7" '
            f'stroke="{HIGHLIGHT}" stroke-width="3.6"/><path d="M24,2 L34,7 L24,12 z" fill="{HIGHLIGHT}"/></svg>'
            "propagation path (evidence)</span>",
            f'<span class="lg"><svg width="22" height="22" aria-hidden="true"><circle cx="11" cy="11" r="8" '
            f'fill="{CANDIDATE_BLUE}"/><text class="badge" x="11" y="14.2" text-anchor="middle">1</text></svg>'
            "candidate rank</span>",
        ]
    rows = [
        f'<div class="legend-row"><b>steps</b>{"".join(items)}</div>',
        f'<div class="legend-row"><b>dependencies</b>{"".join(dep_items) or "<i>none recorded</i>"}</div>',
        f'<div class="legend-row"><b>marks</b>{"".join(marks)}</div>',
    ]
    return '<div class="legend">' + "".join(rows) + "</div>"


KIND_ORDER: Sequence[str] = (
    "task", "agent_turn", "llm_response", "reasoning", "planning", "message", "tool_call", "tool_response",
    "code_execution", "memory_access", "handoff", "speaker_selection", "final_answer", "error",
)
