"""Colours, shapes and short labels shared by the graph, the timeline and the legend (one place to tune the look)."""

from __future__ import annotations

from html import escape

#: The highlight colour of the decisive step and the propagation path (distinct from the red of error status).
HIGHLIGHT = "#f76707"
ERROR_RED = "#dc2626"
CANDIDATE_BLUE = "#1e3a8a"

#: Per step kind: (fill, stroke, shape, short label).
KIND_STYLE: dict[str, tuple[str, str, str, str]] = {
    "task": ("#e2e8f0", "#475569", "square", "task"),
    "llm_response": ("#dbeafe", "#2563eb", "circle", "llm"),
    "reasoning": ("#e0e7ff", "#4f46e5", "circle-dashed", "reasoning"),
    "message": ("#dcfce7", "#15803d", "speech", "message"),
    "tool_call": ("#fef3c7", "#b45309", "diamond", "tool call"),
    "tool_response": ("#fae8ff", "#a21caf", "hexagon", "tool result"),
    "code_execution": ("#cffafe", "#0e7490", "code", "code"),
    "memory_access": ("#ecfccb", "#4d7c0f", "ellipse", "memory"),
    "planning": ("#f3e8ff", "#7e22ce", "parallelogram", "plan"),
    "handoff": ("#fce7f3", "#be185d", "arrow", "handoff"),
    "speaker_selection": ("#fef9c3", "#a16207", "triangle", "select"),
    "final_answer": ("#d1fae5", "#047857", "double-circle", "answer"),
    "error": ("#fee2e2", "#b91c1c", "octagon", "error"),
    "agent_turn": ("#f8fafc", "#94a3b8", "turn", "turn"),
}
_FALLBACK_KIND = ("#f1f5f9", "#64748b", "circle", "step")

#: Per dependency kind: (colour, dashed?, what it means).
DEP_STYLE: dict[str, tuple[str, bool, str]] = {
    "produced_by": ("#64748b", False, "an LLM response produced this step"),
    "saw": ("#0284c7", False, "it was in the consumer's context"),
    "observed": ("#0d9488", False, "the model observed this tool result"),
    "continues": ("#9ca3af", True, "the same agent's reasoning continues"),
    "tool_result_of": ("#8b5cf6", False, "the result of this tool call"),
    "executes": ("#4f46e5", False, "executes this code or plan"),
    "delegated_by": ("#c026d3", False, "this step delegated the work"),
    "answer_of": ("#16a34a", False, "the final answer comes from it"),
    "handoff_from": ("#db2777", False, "control was handed off from it"),
    "selected_by": ("#ca8a04", True, "the speaker selector chose this agent"),
    "memory_read": ("#65a30d", True, "read from memory"),
    "retry_of": ("#92400e", True, "a retry of it"),
}
_FALLBACK_DEP = ("#94a3b8", False, "dependency")

#: Lane accent colours, one per agent in lane order.
LANE_COLOURS = ("#2563eb", "#16a34a", "#db2777", "#9333ea", "#0891b2", "#ca8a04", "#dc2626", "#4b5563",
                "#0d9488", "#7c3aed")


def kind_style(kind: str) -> tuple[str, str, str, str]:
    """(fill, stroke, shape, short label) of a step kind."""
    return KIND_STYLE.get(kind, _FALLBACK_KIND)


def dep_style(kind: str) -> tuple[str, bool, str]:
    """(colour, dashed, meaning) of a dependency kind."""
    return DEP_STYLE.get(kind, _FALLBACK_DEP)


def e(value: object) -> str:
    """HTML/XML-escape anything (quotes included, so it is safe in attribute values too)."""
    return escape("" if value is None else str(value), quote=True)


def fmt(value: float) -> str:
    """A coordinate with at most one decimal (compact and deterministic)."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def shape_svg(shape: str, cx: float, cy: float, r: float, fill: str, stroke: str, *, width: float = 1.6,
              extra: str = "") -> str:
    """One node shape centred on (cx, cy) of radius about ``r`` (class ``shape``)."""
    common = f'class="shape" fill="{fill}" stroke="{stroke}" stroke-width="{fmt(width)}"{extra}'

    def poly(points: list[tuple[float, float]]) -> str:
        pts = " ".join(f"{fmt(x)},{fmt(y)}" for x, y in points)
        return f'<polygon points="{pts}" {common} stroke-linejoin="round"/>'

    if shape == "circle":
        return f'<circle cx="{fmt(cx)}" cy="{fmt(cy)}" r="{fmt(r)}" {common}/>'
    if shape == "circle-dashed":
        return f'<circle cx="{fmt(cx)}" cy="{fmt(cy)}" r="{fmt(r)}" {common} stroke-dasharray="4 2.5"/>'
    if shape == "double-circle":
        return (f'<circle cx="{fmt(cx)}" cy="{fmt(cy)}" r="{fmt(r + 2)}" {common}/>'
                f'<circle cx="{fmt(cx)}" cy="{fmt(cy)}" r="{fmt(r - 2.5)}" fill="none" stroke="{stroke}" '
                f'stroke-width="1.2"/>')
    if shape == "square":
        s = r * 0.92
        return (f'<rect x="{fmt(cx - s)}" y="{fmt(cy - s)}" width="{fmt(2 * s)}" height="{fmt(2 * s)}" rx="3" '
                f'{common}/>')
    if shape == "code":
        s = r * 0.92
        return (f'<rect x="{fmt(cx - s)}" y="{fmt(cy - s)}" width="{fmt(2 * s)}" height="{fmt(2 * s)}" rx="1" '
                f'{common} stroke-dasharray="6 1.5"/>')
    if shape == "turn":
        s = r * 0.78
        return (f'<rect x="{fmt(cx - s)}" y="{fmt(cy - s)}" width="{fmt(2 * s)}" height="{fmt(2 * s)}" rx="6" '
                f'{common} stroke-dasharray="3 2"/>')
    if shape == "speech":
        w, h = r * 1.15, r * 0.85
        return (f'<rect x="{fmt(cx - w)}" y="{fmt(cy - h)}" width="{fmt(2 * w)}" height="{fmt(2 * h)}" rx="7" '
                f'{common}/>')
    if shape == "ellipse":
        return f'<ellipse cx="{fmt(cx)}" cy="{fmt(cy)}" rx="{fmt(r * 1.15)}" ry="{fmt(r * 0.8)}" {common}/>'
    if shape == "diamond":
        d = r * 1.22
        return poly([(cx, cy - d), (cx + d, cy), (cx, cy + d), (cx - d, cy)])
    if shape == "hexagon":
        w, h = r * 1.12, r * 0.92
        return poly([(cx - w, cy), (cx - w / 2, cy - h), (cx + w / 2, cy - h), (cx + w, cy), (cx + w / 2, cy + h),
                     (cx - w / 2, cy + h)])
    if shape == "octagon":
        a, b = r * 1.02, r * 0.42
        return poly([(cx - b, cy - a), (cx + b, cy - a), (cx + a, cy - b), (cx + a, cy + b), (cx + b, cy + a),
                     (cx - b, cy + a), (cx - a, cy + b), (cx - a, cy - b)])
    if shape == "parallelogram":
        w, h, k = r * 1.05, r * 0.8, r * 0.35
        return poly([(cx - w + k, cy - h), (cx + w + k, cy - h), (cx + w - k, cy + h), (cx - w - k, cy + h)])
    if shape == "arrow":
        w, h = r * 1.1, r * 0.82
        return poly([(cx - w, cy - h), (cx + w * 0.55, cy - h), (cx + w * 1.1, cy), (cx + w * 0.55, cy + h),
                     (cx - w, cy + h)])
    if shape == "triangle":
        d = r * 1.25
        return poly([(cx, cy - d), (cx + d, cy + d * 0.72), (cx - d, cy + d * 0.72)])
    return f'<circle cx="{fmt(cx)}" cy="{fmt(cy)}" r="{fmt(r)}" {common}/>'
