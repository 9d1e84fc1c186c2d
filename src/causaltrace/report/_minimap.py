"""The graph's minimap: the whole run as one strip above the graph, with the visible window drawn on it.

It shares the graph's coordinates (its ``viewBox`` is the graph's full size, squeezed to the strip with
``preserveAspectRatio="none"``), so the page's script maps a click on it to a scroll position of the graph, and the
graph's scroll position to the window rectangle, with one ratio. A node is a small bar in its lane's colour; the
decisive step is a full-height line in the highlight colour and the evidence steps are bars in it, so where the
failure happened is visible at a glance however long the run.
"""

from __future__ import annotations

from causaltrace.report._graph import FILL_W, LANE_H, NODE_Y, GraphLayout
from causaltrace.report._marks import Marks
from causaltrace.report._style import HIGHLIGHT, LANE_COLOURS, fmt
from causaltrace.schema import Run

__all__ = ["needs_minimap", "render_minimap"]

#: The strip's height per lane, in pixels on the page.
PX_PER_LANE = 9.0


def needs_minimap(layout: GraphLayout) -> bool:
    """Only a graph wider than a window scrolls, and only then is an overview worth its space."""
    return layout.width > FILL_W + 60


def render_minimap(run: Run, marks: Marks, layout: GraphLayout) -> str:
    """The minimap ``<svg class="minimap">`` (empty when the graph fits a window)."""
    if not needs_minimap(layout):
        return ""
    w, h = layout.width, layout.height
    height = max(len(layout.lanes) * PX_PER_LANE, 24.0)
    out = [f'<svg class="minimap" viewBox="0 0 {fmt(w)} {fmt(h)}" preserveAspectRatio="none" height="{fmt(height)}" '
           'role="img" aria-label="minimap of the whole graph: click or drag to move the graph there">']
    for i in range(len(layout.lanes)):
        fill = "#f1f5f9" if i % 2 == 0 else "#ffffff"
        out.append(f'<rect x="0" y="{fmt(i * LANE_H)}" width="{fmt(w)}" height="{fmt(LANE_H)}" fill="{fill}"/>')
    bar_w = layout.col_w * 0.7
    for step in run.steps:
        x, _ = layout.xy(step.step_id)
        lane = layout.lane_of[step.step_id]
        marked = step.step_id in marks.roles or step.step_id == marks.decisive
        colour = HIGHLIGHT if marked else LANE_COLOURS[lane % len(LANE_COLOURS)]
        opacity = "1" if marked else ".55"
        out.append(f'<rect class="mm-step" data-col="{layout.column[step.step_id]}" x="{fmt(x - bar_w / 2)}" '
                   f'y="{fmt(lane * LANE_H + NODE_Y - 40)}" width="{fmt(bar_w)}" '
                   f'height="80" fill="{colour}" fill-opacity="{opacity}"/>')
    if marks.decisive is not None:
        x, _ = layout.xy(marks.decisive)
        out.append(f'<line class="mm-decisive" data-col="{layout.column[marks.decisive]}" x1="{fmt(x)}" y1="0" '
                   f'x2="{fmt(x)}" y2="{fmt(h)}"/>')
    out.append(f'<rect class="mm-view" x="0" y="0" width="{fmt(min(w, FILL_W))}" height="{fmt(h)}"/></svg>')
    return "\n".join(out)
