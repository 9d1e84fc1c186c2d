"""The timeline: one lane per agent, each step a bar from ``started_at`` to ``ended_at``.

Overlapping bars in a lane (an agent_turn and the steps inside it) are packed into sub-rows. When no step has times
the x axis is the step index instead (an agent_turn then spans its children). A step without times in a timed run
is placed right after the previous timed step and drawn hollow and dashed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from causaltrace.report._graph import lane_label, lane_order, short
from causaltrace.report._marks import Marks
from causaltrace.report._style import ERROR_RED, HIGHLIGHT, LANE_COLOURS, e, fmt, kind_style
from causaltrace.schema import Run, Step

__all__ = ["render_timeline"]

LABEL_W = 150.0
BAR_H = 13.0
ROW_GAP = 4.0
LANE_PAD = 9.0
AXIS_H = 26.0
MAX_ROWS = 8


def _interval_mode(run: Run) -> str:
    timed = [s for s in run.steps if s.started_at is not None and s.ended_at is not None]
    return "time" if timed else "index"


def _intervals(run: Run) -> tuple[str, dict[str, tuple[float, float, bool]], float, float]:
    """Mode and, per step, ``(start, end, estimated)`` in axis units (seconds from the start, or index slots)."""
    mode = _interval_mode(run)
    out: dict[str, tuple[float, float, bool]] = {}
    if mode == "index":
        pos = {s.step_id: p for p, s in enumerate(run.steps)}
        last_kid: dict[str, int] = {}
        for step in run.steps:
            if step.parent_step_id is not None:
                last_kid[step.parent_step_id] = max(last_kid.get(step.parent_step_id, 0), pos[step.step_id])
        for p, step in enumerate(run.steps):
            end = float(max(p, last_kid.get(step.step_id, p)) + 1) if step.kind == "agent_turn" else p + 1.0
            out[step.step_id] = (float(p), end, False)
        return mode, out, 0.0, float(max(len(run.steps), 1))
    starts = [s.started_at for s in run.steps if s.started_at is not None]
    t0: datetime = min(starts)
    ends = [s.ended_at for s in run.steps if s.ended_at is not None] + starts
    t1: datetime = max(ends)
    span = max((t1 - t0).total_seconds(), 1e-6)
    cursor = 0.0
    for step in run.steps:
        if step.started_at is not None:
            a = (step.started_at - t0).total_seconds()
            b = (step.ended_at - t0).total_seconds() if step.ended_at is not None else a
            out[step.step_id] = (a, max(a, b), step.ended_at is None)
            cursor = max(a, b) if step.kind != "agent_turn" else a
        else:
            out[step.step_id] = (cursor, cursor, True)
    return mode, out, 0.0, span


def _ticks(span: float, mode: str) -> list[tuple[float, str]]:
    if mode == "index":
        want = max(1, int(round(span / 12)))
        every = next((n for n in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500) if n >= want), want)
        return [(float(i), f"#{i}") for i in range(0, int(span) + 1, every)]
    raw = span / 8
    nice = next(f * 10.0 ** k for k in range(-6, 6) for f in (1, 2, 5) if f * 10.0 ** k >= raw)
    unit, name = (1e-6, "µs") if span < 2e-3 and nice < 1e-3 else (1e-3, "ms") if span < 2 else (1.0, "s")
    if span >= 300:
        unit, name = 60.0, "min"
        nice = next((n * 60.0 for n in (1, 2, 5, 10, 15, 30, 60, 120, 240, 480) if n * 60.0 >= raw), raw)
    out = []
    k = 0
    while k * nice <= span * 1.0001:
        out.append((k * nice, f"{k * nice / unit:.4g} {name}"))
        k += 1
    return out


def _bar_w(x0: float, x1: float, estimated: bool) -> float:
    return max(x1 - x0, 10.0 if estimated else 3.0)


def render_timeline(run: Run, marks: Marks) -> str:
    """The timeline SVG (``class="timeline"``)."""
    if not run.steps:
        return '<p class="muted">no steps</p>'
    mode, spans, lo, hi = _intervals(run)
    lanes = lane_order(run)
    width = max(1420.0, min(LABEL_W + 16.0 * len(run.steps) + 60, 4800.0))
    scale = (width - LABEL_W - 56) / (hi - lo or 1.0)

    def px(v: float) -> float:
        return LABEL_W + (v - lo) * scale

    rows_of, lane_rows = _pack(run, lanes, spans, px)
    lane_h = [LANE_PAD * 2 + n * BAR_H + (n - 1) * ROW_GAP for n in lane_rows]
    height = AXIS_H + sum(lane_h) + 6
    out = [f'<svg class="timeline" width="{fmt(width)}" height="{fmt(height)}" viewBox="0 0 {fmt(width)} '
           f'{fmt(height)}" role="img" aria-label="timeline">', _axis(mode, lo, hi, px, height)]
    lane_top: dict[str, float] = {}
    y = AXIS_H
    for i, agent in enumerate(lanes):
        out.append(_lane_band(i, agent, y, width, lane_h[i]))
        lane_top[agent] = y
        y += lane_h[i]
    for step in run.steps:
        a, b, estimated = spans[step.step_id]
        by = lane_top[step.agent] + LANE_PAD + rows_of[step.step_id] * (BAR_H + ROW_GAP)
        out.append(_bar(step, marks, mode, px(a), px(b), by, estimated))
    out.append("</svg>")
    return "\n".join(out)


def _pack(run: Run, lanes: list[str], spans: dict[str, tuple[float, float, bool]],
          px: Callable[[float], float]) -> tuple[dict[str, int], list[int]]:
    """Each lane's bars packed into sub-rows (first row free at the bar's start, at most MAX_ROWS): the row of each
    step and the number of rows of each lane."""
    rows_of: dict[str, int] = {}
    lane_rows: list[int] = []
    for agent in lanes:
        ends: list[float] = []
        for step in sorted((s for s in run.steps if s.agent == agent), key=lambda s: (spans[s.step_id][0], s.index)):
            a, b, estimated = spans[step.step_id]
            a_px = px(a)
            b_px = a_px + _bar_w(a_px, px(b), estimated)
            row = next((i for i, end in enumerate(ends) if end <= a_px + 0.01), None)
            if row is None:
                row = min(len(ends), MAX_ROWS - 1)
                if row == len(ends):
                    ends.append(b_px)
            ends[row] = max(ends[row], b_px)
            rows_of[step.step_id] = row
        lane_rows.append(max(len(ends), 1))
    return rows_of, lane_rows


def _axis(mode: str, lo: float, hi: float, px: Callable[[float], float], height: float) -> str:
    out: list[str] = []
    for value, text in _ticks(hi - lo, mode):
        x = px(value)
        anchor = "start" if value == 0 else "middle"
        out.append(f'<line x1="{fmt(x)}" y1="{fmt(AXIS_H - 6)}" x2="{fmt(x)}" y2="{fmt(height)}" stroke="#e2e8f0"/>'
                   f'<text class="tick" x="{fmt(x)}" y="{fmt(AXIS_H - 10)}" text-anchor="{anchor}">{e(text)}</text>')
    axis_name = "time →" if mode == "time" else "step index → (no times)"
    out.append(f'<text class="axis-name" x="8" y="{fmt(AXIS_H - 10)}">{e(axis_name)}</text>')
    return "\n".join(out)


def _lane_band(i: int, agent: str, y: float, width: float, height: float) -> str:
    colour = LANE_COLOURS[i % len(LANE_COLOURS)]
    fill = "#f8fafc" if i % 2 == 0 else "#ffffff"
    return (f'<rect x="0" y="{fmt(y)}" width="{fmt(width)}" height="{fmt(height)}" fill="{fill}" '
            f'fill-opacity=".85"/><rect x="0" y="{fmt(y)}" width="4" height="{fmt(height)}" fill="{colour}"/>'
            f'<text class="tl-lane" x="12" y="{fmt(y + height / 2 + 4)}">{e(short(lane_label(agent), 20))}</text>')


def _bar(step: Step, marks: Marks, mode: str, x0: float, x1: float, by: float, estimated: bool) -> str:
    """One step's bar with its tooltip and, when it fits, its index and kind."""
    w = _bar_w(x0, x1, estimated)
    fill, stroke, _, label = kind_style(step.kind)
    edge, sw = stroke, 1.0
    if step.status == "error":
        edge, sw = ERROR_RED, 2.2
    if step.step_id == marks.decisive or step.step_id in marks.roles:
        edge, sw = HIGHLIGHT, 2.6
    extra = ' stroke-dasharray="3 2" fill-opacity=".4"' if estimated else ""
    if step.kind == "agent_turn":
        extra += ' fill-opacity=".6"'
    dur = ""
    if step.started_at is not None and step.ended_at is not None:
        dur = f" · {(step.ended_at - step.started_at).total_seconds() * 1000:.2f} ms"
    elif mode == "time":
        dur = " · no times recorded: placed after the previous step"
    title = f"#{step.index} {step.kind} · {step.agent or '-'}{dur}\n{short(step.content, 200)}"
    out = [f'<g class="tl-bar" data-step-index="{step.index}"><title>{e(title)}</title>'
           f'<rect x="{fmt(x0)}" y="{fmt(by)}" width="{fmt(w)}" height="{fmt(BAR_H)}" rx="3" fill="{fill}" '
           f'stroke="{edge}" stroke-width="{fmt(sw)}"{extra}/>']
    text = ""
    if w >= 34 + 5.6 * len(label):
        text = f"#{step.index} {label}"
    elif w >= 12 + 6.2 * len(str(step.index)):
        text = f"#{step.index}"
    if text:
        out.append(f'<text class="bar-label" x="{fmt(x0 + 4)}" y="{fmt(by + BAR_H - 3.2)}">{e(text)}</text>')
    out.append("</g>")
    return "\n".join(out)
