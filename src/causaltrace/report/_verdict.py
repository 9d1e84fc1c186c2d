"""The report's first screen answers (issue 33 item 7): the run's verdict with its source, its evidence and its
confidence, and the repair diff — above the graph, which comes second.

The verdict is the one ``Store.verdict`` returns (``causaltrace report`` passes it), worded as every surface words it
(:mod:`causaltrace.collector.verdict_text`): a headline (``decisive error: #6 tool_call by solver``, or
``uncertain: …`` with the top 3 candidates instead of one step), the source line (its level, method, how it was
verified and its basis), the confidence, the findings' claims with their source / changed values as chips linking
to their steps, and the repair that flipped the run (the stored pair's diff, else the first flipped replay's), in a
box of bounded height so the screen keeps all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from causaltrace.collector.verdict_text import VerdictView, finding_line, short_value, verdict_findings, verdict_view
from causaltrace.report._diff import original_of, render_diff, render_pair_diff
from causaltrace.report._style import e
from causaltrace.schema import Diagnosis, Finding, RepairPair, Run, Step

__all__ = ["render_verdict_card"]

_VALUE_CHARS = 80


def _ref(index: int) -> str:
    return "the task" if index < 0 else f'<a href="#step-{index}">#{index}</a>'


def _finding_html(f: Finding) -> str:
    """A finding: its claim, then one chip per pointer (role, step, value)."""
    chips = []
    for ev in f.evidence:
        value = "" if ev.value in (None, "", [], {}) else f' <code>{e(short_value(repr(ev.value), _VALUE_CHARS))}</code>'
        chips.append(f'<span class="ev-chip ev-{e(ev.role)}"><b>{e(ev.role)}</b> {_ref(ev.index)}{value}</span>')
    return (f'<li title="{e(finding_line(f))}"><span class="family">{e(f.family)}</span> {e(f.claim)}'
            f'<div class="chips">{"".join(chips)}</div></li>')


def _evidence_html(d: Diagnosis) -> str:
    found = verdict_findings(d)
    if not found:
        return '<p class="small muted">no finding: nothing the run shows singles out a step.</p>'
    return f'<ul class="findings">{"".join(_finding_html(f) for f in found)}</ul>'


def _top3_html(view: VerdictView) -> str:
    items = []
    for c in view.diagnosis.candidates[:3]:
        label = ", ".join(c.findings) if c.findings else "no evidence"
        items.append(f'<li><a href="#step-{c.index}">#{c.index}</a> by <b>{e(c.agent or "-")}</b> '
                     f'<span class="small muted">({e(label)}; score {c.score:.3f})</span></li>')
    return f'<div class="label">the top 3</div><ol class="top3">{"".join(items)}</ol>' if items else ""


def _repair_html(run: Run, pairs: list[RepairPair], replays: list[dict[str, Any]]) -> str:
    """The repair that flipped the run: the first stored pair's diff, else the first flipped replay's change."""
    by_id: Mapping[str, Step] = {s.step_id: s for s in run.steps}
    if pairs:
        p = pairs[0]
        head = (f'repair of <a href="#step-{p.step_index}">#{p.step_index}</a> {e(p.step_kind)} by {e(p.agent)} · '
                f"verified by {e(p.verified_by)}")
        return (f'<div class="label">repair</div><div class="small">{head} '
                f'<a href="#repair">(details)</a></div><div class="first-diff">'
                f"{render_pair_diff(p.rejected, p.chosen)}</div>")
    flipped = next((r for r in replays if r.get("flipped")), None)
    if flipped is None:
        return '<div class="label">repair</div><p class="small muted">no repair yet (no replay flipped the run).</p>'
    step = by_id.get(str(flipped["step_id"]))
    where = f'<a href="#step-{step.index}">#{step.index}</a>' if step is not None else e(str(flipped["step_id"]))
    diff = render_diff(original_of(step, flipped["replacement"]), flipped["replacement"], right="replacement")
    return (f'<div class="label">repair</div><div class="small">the first replay that flipped the run changed '
            f'{where}: {e(flipped.get("description") or "")} <a href="#repair">(details)</a></div>'
            f'<div class="first-diff">{diff}</div>')


def render_verdict_card(run: Run, d: Diagnosis | None, pairs: list[RepairPair], replays: list[dict[str, Any]]) -> str:
    """The verdict section (module docstring)."""
    if d is None:
        return (f'<section id="verdict" class="verdict none"><div class="headline">no diagnosis yet</div>'
                f'<p class="small muted">run <code>causaltrace diagnose {e(run.run_id)}</code></p></section>')
    view = verdict_view(run, d)
    cls = "uncertain" if view.uncertain else "decisive"
    conf = view.confidence
    step_html = ""
    if view.step is not None and not view.uncertain:
        text = view.step.content or (view.step.error.message if view.step.error else "")
        step_html = f'<pre class="quote">{e(short_value(text, 300))}</pre>' if text else ""
    body = _top3_html(view) if view.uncertain else step_html
    return (
        f'<section id="verdict" class="verdict {cls}"><div class="verdict-head"><div>'
        f'<div class="label">the run\'s verdict</div><div class="headline">{e(view.headline)}</div>'
        f'<div class="source small">{e(view.source)}</div></div>'
        f'<div class="confidence"><div class="label">confidence</div><div class="conf">{e(conf)}</div></div></div>'
        f'<div class="verdict-grid"><div>{body}<div class="label">evidence</div>{_evidence_html(d)}'
        + (f'<div class="label">why</div><p class="explanation small">{e(short_value(d.explanation, 600))}</p>'
           if d.explanation else "")
        + f'</div><div>{_repair_html(run, pairs, replays)}</div></div></section>'
    )
