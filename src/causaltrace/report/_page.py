"""Assemble the report page: header, diagnosis, step graph, timeline, replays and repair, step table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from causaltrace.report._diff import as_text, render_diff
from causaltrace.report._graph import GraphLayout, render_graph, render_legend, short
from causaltrace.report._marks import Marks, marks_of
from causaltrace.report._style import e, kind_style
from causaltrace.report._timeline import render_timeline
from causaltrace.schema import Diagnosis, RepairPair, ReplayResult, Run, Step

__all__ = ["normalize_replays", "render_page"]

_CONTENT_PREVIEW = 400
_CONTENT_MAX = 20_000


# ----------------------------------------------------------------------------------------------------- helpers


def _when(value: datetime | None) -> str:
    return value.isoformat(sep=" ", timespec="milliseconds") if value else "—"


def _duration(a: datetime | None, b: datetime | None) -> str:
    if a is None or b is None:
        return "—"
    s = (b - a).total_seconds()
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def _pill(text: str, cls: str) -> str:
    return f'<span class="pill {e(cls)}">{e(text)}</span>'


def _step_ref(step: Step | None, fallback: str = "—") -> str:
    if step is None:
        return e(fallback)
    return (f'<a class="stepref" href="#step-{step.index}">#{step.index}</a> <span class="kind">{e(step.kind)}</span> '
            f'by <span class="agent">{e(step.agent or "-")}</span>')


def _clip(text: str, limit: int = _CONTENT_PREVIEW) -> str:
    """Escaped text; long text shows its start and folds the rest in a <details>."""
    if len(text) <= limit:
        return f'<div class="content">{e(text)}</div>'
    full = text[:_CONTENT_MAX]
    more = f" (first {_CONTENT_MAX} shown)" if len(text) > _CONTENT_MAX else ""
    return (f'<div class="content">{e(text[:limit])}…</div><details><summary>all {len(text)} characters{more}'
            f'</summary><div class="content">{e(full)}</div></details>')


# ----------------------------------------------------------------------------------------------------- replays


def normalize_replays(items: Iterable[Any]) -> list[dict[str, Any]]:
    """ReplayResults or artifact dicts as uniform dicts (step_id, description, replacement, flipped, status, …)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, ReplayResult):
            out.append({
                "step_id": item.intervention.step_id,
                "description": item.intervention.description,
                "replacement": item.intervention.replacement,
                "source": item.intervention.source,
                "flipped": item.flipped,
                "status": item.outcome.status,
                "replay_run_id": item.run.run_id if item.run is not None else None,
                "replays": f"{item.replays_flipped}/{item.replays_run}" if item.replays_run > 1 else None,
                "verified_by": item.verified_by,
                "note": item.divergence or (f"{item.error.type}: {item.error.message}" if item.error else None),
            })
            continue
        if not isinstance(item, Mapping):
            continue
        outcome = item.get("outcome")
        status = item.get("status") or item.get("outcome_status")
        if status is None and isinstance(outcome, Mapping):
            status = outcome.get("status")
        elif status is None and isinstance(outcome, str):
            status = outcome
        intervention = item.get("intervention") if isinstance(item.get("intervention"), Mapping) else {}
        assert isinstance(intervention, Mapping)
        runs, flips = item.get("replays_run"), item.get("replays_flipped")
        out.append({
            "step_id": item.get("step_id") or intervention.get("step_id"),
            "description": item.get("description") or intervention.get("description") or "",
            "replacement": item.get("replacement", intervention.get("replacement")),
            "source": item.get("source") or intervention.get("source"),
            "flipped": bool(item.get("flipped")),
            "status": str(status) if status is not None else "—",
            "replay_run_id": item.get("replay_run_id"),
            "replays": f"{flips}/{runs}" if isinstance(runs, int) and runs > 1 else None,
            "verified_by": item.get("verified_by"),
            "note": item.get("divergence") or item.get("error"),
        })
    return out


def _original_of(step: Step | None, replacement: Any) -> Any:
    """What a replacement replaces: tool arguments, the code, or the step's text."""
    if step is None:
        return ""
    if isinstance(replacement, dict) and step.arguments is not None:
        return step.arguments
    code = step.inputs.get("code")
    if isinstance(code, str) and isinstance(replacement, str) and step.kind == "code_execution":
        return code
    if isinstance(replacement, str) and step.kind == "tool_call" and step.arguments:
        for key in ("code", "source", "script"):
            value = step.arguments.get(key)
            if isinstance(value, str):
                return value
    return step.content


def _replays_html(run: Run, replays: list[dict[str, Any]]) -> str:
    if not replays:
        return '<p class="muted">No replays were tried for this run.</p>'
    by_id = {s.step_id: s for s in run.steps}
    rows = []
    for n, r in enumerate(replays, 1):
        step = by_id.get(str(r["step_id"])) if r["step_id"] is not None else None
        result = (_pill("flipped → " + r["status"], "ok") if r["flipped"]
                  else _pill("no flip · " + r["status"], "muted-pill"))
        extra = []
        if r.get("replays"):
            extra.append(f"{e(r['replays'])} replays flipped")
        if r.get("verified_by"):
            extra.append(f"verified by {e(r['verified_by'])}")
        if r.get("source"):
            extra.append(f"proposed by {e(r['source'])}")
        if r.get("note"):
            extra.append(e(short(str(r["note"]), 160)))
        diff = render_diff(_original_of(step, r["replacement"]), r["replacement"], right="replacement")
        change = (f'<div>{e(r["description"]) or "<i>no description</i>"}</div>'
                  f"<details><summary>diff</summary>{diff}</details>")
        rows.append(
            f'<tr class="{"flip" if r["flipped"] else ""}"><td>{n}</td><td>{_step_ref(step, str(r["step_id"]))}</td>'
            f"<td>{change}</td><td>{result}<div class=\"small muted\">{' · '.join(extra)}</div></td>"
            f'<td class="mono small">{e(r["replay_run_id"] or "—")}</td></tr>'
        )
    return ('<table class="grid replays"><thead><tr><th>#</th><th>step</th><th>change tried</th><th>outcome</th>'
            f'<th>replay run</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _repair_html(run: Run, pairs: list[RepairPair], replays: list[dict[str, Any]]) -> str:
    by_id = {s.step_id: s for s in run.steps}
    blocks = []
    for p in pairs:
        step = by_id.get(p.step_id)
        facts = [f"verified by <b>{e(p.verified_by)}</b>"]
        if p.replays_run:
            facts.append(f"{p.replays_succeeded}/{p.replays_run} replays succeeded")
        for name in ("minimality", "crs", "consensus"):
            value = getattr(p, name)
            if value is not None:
                facts.append(f"{name} {value:.3f}")
        if p.replay_run_id:
            facts.append(f'replay run <span class="mono">{e(p.replay_run_id)}</span>')
        ref = _step_ref(step) if step is not None else f"#{p.step_index} {e(p.step_kind)} by {e(p.agent)}"
        prompt = as_text(p.prompt)
        blocks.append(
            f'<div class="repair"><div class="repair-head">repair of {ref} · <span class="mono small">'
            f'{e(p.pair_id)}</span></div><div class="small muted">{" · ".join(facts)}</div>'
            f"{render_diff(p.rejected, p.chosen, left='original (rejected)', right='corrected (chosen)')}"
            f"<details><summary>the prompt at this step ({len(prompt)} characters)</summary>"
            f'<pre class="content">{e(prompt[:_CONTENT_MAX])}</pre></details></div>'
        )
    if blocks:
        return "".join(blocks)
    flipped = next((r for r in replays if r["flipped"]), None)
    if flipped is not None:
        step = by_id.get(str(flipped["step_id"]))
        diff = render_diff(_original_of(step, flipped["replacement"]), flipped["replacement"], right="replacement")
        return (f'<p class="muted">No repair pair stored; the first replay that flipped the outcome changed '
                f"{_step_ref(step, str(flipped['step_id']))}:</p>{diff}")
    return '<p class="muted">No repair yet (no replay flipped the outcome, or none was tried).</p>'


# --------------------------------------------------------------------------------------------------- diagnosis


def _diagnosis_html(run: Run, d: Diagnosis | None, marks: Marks) -> str:
    if d is None:
        return (f'<div class="note">no diagnosis yet: run <code>causaltrace diagnose {e(run.run_id)}</code></div>')
    by_id = {s.step_id: s for s in run.steps}
    head = [f"method <b>{e(d.method)}</b>"]
    if d.model:
        head.append(f"model <b>{e(d.model)}</b>")
    if d.created_at:
        head.append(f"at {e(_when(d.created_at))}")
    parts = [f'<div class="small muted">{" · ".join(head)}</div>']
    if d.failed:
        parts.append(f'<div class="note bad">the diagnosis failed: {e(d.failure_reason or "no reason given")}</div>')
    decisive = by_id.get(marks.decisive) if marks.decisive else None
    category = (f'<b>{e(d.category)}</b> {e(d.category_name or "")}' if d.category
                else '<span class="muted">not categorised</span>')
    conf = f"{d.confidence:.2f}" if d.confidence is not None else "—"
    vb_cls = {"replay": "ok", "prediction": "warn", "heuristic": "muted-pill"}.get(d.verified_by, "muted-pill")
    excerpt = ""
    if decisive is not None and (decisive.content or decisive.error):
        text = decisive.content or (decisive.error.message if decisive.error else "")
        excerpt = f'<div class="quote">{e(short(text, 240))}</div>'
    parts.append(
        '<div class="facts">'
        f'<div class="fact decisive-fact"><div class="label">decisive step</div><div class="value">'
        f"{_step_ref(decisive) if decisive is not None else '<span class=muted>none</span>'}</div>{excerpt}</div>"
        f'<div class="fact"><div class="label">error category</div><div class="value">{category}</div></div>'
        f'<div class="fact"><div class="label">verified by</div><div class="value">{_pill(d.verified_by, vb_cls)}'
        f'</div></div><div class="fact"><div class="label">confidence</div><div class="value">{conf}</div></div>'
        "</div>"
    )
    if d.explanation:
        parts.append(f'<h3>why</h3><p class="explanation">{e(d.explanation)}</p>')
    if d.evidence:
        chips = []
        for item in d.evidence:
            step = by_id.get(item.step_id)
            label = f"#{item.index}" + (f" {step.kind} · {step.agent or '-'}" if step is not None else "")
            note = f'<span class="ev-note">{e(item.note)}</span>' if item.note else ""
            chips.append(f'<a class="ev ev-{e(item.role)}" href="#step-{item.index}"><span class="ev-role">'
                         f'{e(item.role)}</span><span class="ev-step">{e(label)}</span>{note}</a>')
        parts.append('<h3>propagation path (evidence)</h3><div class="ev-path">'
                     + '<span class="ev-arrow">→</span>'.join(chips) + "</div>")
    if d.candidates:
        top = max((c.score for c in d.candidates), default=1.0) or 1.0
        rows = []
        for rank, c in enumerate(d.candidates, 1):
            step = by_id.get(c.step_id)
            kind = step.kind if step is not None else "?"
            pct = max(0.0, min(100.0, 100.0 * c.score / top))
            reasons = "".join(f"<li>{e(r)}</li>" for r in c.reasons) or '<li class="muted">—</li>'
            cls = ' class="is-decisive"' if c.step_id == marks.decisive else ""
            rows.append(
                f'<tr{cls}><td><span class="rank-badge">{rank}</span></td><td><a href="#step-{c.index}">#{c.index}'
                f"</a></td><td>{e(kind)}</td><td>{e(c.agent or '-')}</td><td class=\"score\"><div class=\"bar\">"
                f'<span style="width:{pct:.1f}%"></span></div>{c.score:.3f}</td><td><ul class="reasons">{reasons}'
                "</ul></td></tr>"
            )
        parts.append('<h3>ranked candidates</h3><table class="grid candidates"><thead><tr><th>rank</th><th>step</th>'
                     '<th>kind</th><th>agent</th><th>score</th><th>reasons</th></tr></thead><tbody>'
                     + "".join(rows) + "</tbody></table>")
    c = d.cost
    stages = ", ".join(f"{e(k)}: {v}" for k, v in c.calls_by_stage.items())
    money = f" · ${c.usd:.4f}" if c.usd is not None else ""
    cached = f", {c.cached_calls} from cache" if c.cached_calls else ""
    parts.append(f'<div class="cost small muted">cost: {c.llm_calls} LLM call(s){f" ({stages})" if stages else ""}'
                 f"{cached} · {c.input_tokens} in / {c.output_tokens} out tokens · {c.seconds:.2f} s{money}</div>")
    return "".join(parts)


# ------------------------------------------------------------------------------------------------- step table


def _steps_html(run: Run, marks: Marks) -> str:
    by_id = {s.step_id: s for s in run.steps}
    rows = []
    t0 = min((s.started_at for s in run.steps if s.started_at is not None), default=None)
    for s in run.steps:
        fill, stroke, _, _ = kind_style(s.kind)
        deps = ", ".join(f"{e(d.kind)} ← <a href=\"#step-{by_id[d.step_id].index}\">#{by_id[d.step_id].index}</a>"
                         for d in s.depends_on)
        flags = []
        cls = []
        if s.step_id == marks.decisive:
            flags.append('<span class="flag hl">decisive</span>')
            cls.append("is-decisive")
        for role in marks.roles.get(s.step_id, []):
            if not (role == "introduced" and s.step_id == marks.decisive):
                flags.append(f'<span class="flag hl-soft">{e(role)}</span>')
            cls.append("is-evidence")
        if s.step_id in marks.ranks:
            flags.append(f'<span class="flag cand">candidate {marks.ranks[s.step_id]}</span>')
        at = "—"
        if s.started_at is not None and t0 is not None:
            at = f"+{(s.started_at - t0).total_seconds() * 1000:.1f} ms"
        text = s.content
        body = _clip(text) if text else ""
        if s.error is not None:
            body += f'<div class="err small">{e(s.error.type)}: {e(short(s.error.message, 400))}</div>'
        if s.truncated:
            body += '<div class="small muted">(payload truncated at capture)</div>'
        status = _pill(s.status, {"ok": "ok", "error": "bad"}.get(s.status, "muted-pill"))
        rows.append(
            f'<tr id="step-{s.index}" class="{" ".join(cls)}"><td class="num">{s.index}</td>'
            f'<td><span class="kind-chip" style="background:{fill};border-color:{stroke}">{e(s.kind)}</span>'
            f'{"".join(flags)}</td><td>{e(s.agent or "-")}</td><td>{status}</td><td>{e(s.tool_name or "")}</td>'
            f'<td class="small">{deps}</td><td class="small nowrap">{at}<br>{_duration(s.started_at, s.ended_at)}</td>'
            f"<td>{body}</td></tr>"
        )
    return ('<table class="grid steps"><thead><tr><th>#</th><th>kind</th><th>agent</th><th>status</th><th>tool</th>'
            '<th>depends on</th><th>start / took</th><th>content</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


# ------------------------------------------------------------------------------------------------------- page


def _header(run: Run, d: Diagnosis | None) -> str:
    o = run.outcome
    status_cls = {"success": "ok", "failure": "bad", "unknown": "warn", "incomplete": "warn"}.get(o.status, "warn")
    title = run.name or run.task or run.run_id
    meta = [
        ("run id", f'<span class="mono">{e(run.run_id)}</span>'),
        ("trace id", f'<span class="mono">{e(run.trace_id or "—")}</span>'),
        ("framework", e(run.framework)),
        ("agents", e(", ".join(run.agents) or "—")),
        ("steps", str(len(run.steps))),
        ("started", e(_when(run.started_at))),
        ("took", e(_duration(run.started_at, run.ended_at))),
        ("stop", e(o.stop or "—")),
    ]
    if o.verdict is not None:
        meta.append(("verdict", f"{'passed' if o.verdict.passed else 'failed'}: {e(o.verdict.reason)}"))
    if run.annotations is not None and run.annotations.mistake_step is not None:
        meta.append(("labelled decisive", f"step {run.annotations.mistake_step} by "
                                          f"{e(run.annotations.mistake_agent or '-')}"))
    dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in meta)
    blocks = []
    if run.task:
        blocks.append(f'<div class="block"><div class="label">task</div>{_clip(run.task, 600)}</div>')
    answer = o.final_answer if o.final_answer is not None else "(no final answer)"
    blocks.append(f'<div class="block"><div class="label">final answer</div>{_clip(answer, 600)}</div>')
    if o.reason:
        blocks.append(f'<div class="block"><div class="label">outcome reason</div>{_clip(o.reason, 600)}</div>')
    return (f'<header><div class="title-row"><h1>{e(short(title, 120))}</h1>{_pill(o.status, status_cls)}'
            f'</div><dl class="meta">{dl}</dl><div class="blocks">{"".join(blocks)}</div></header>')


def render_page(run: Run, diagnosis: Diagnosis | None, replays: Iterable[Any], pairs: Iterable[RepairPair],
                *, version: str) -> str:
    """The whole HTML document."""
    marks = marks_of(run, diagnosis)
    tried = normalize_replays(replays)
    if not tried and diagnosis is not None:
        artifact = diagnosis.artifacts.get("replays")
        if isinstance(artifact, list):
            tried = normalize_replays(artifact)
    pair_list = list(pairs)
    layout = GraphLayout.of(run)
    labels, svg = render_graph(run, marks, layout)
    n_edges = sum(len(s.depends_on) for s in run.steps)
    graph_note = (f"{len(run.steps)} steps in {len(layout.lanes)} lane(s), {n_edges} dependencies. Hover a node "
                  "to follow its edges, click it to jump to its row.")
    nav = ('<nav><a href="#diagnosis">diagnosis</a><a href="#graph">step graph</a><a href="#timeline">timeline</a>'
           '<a href="#repair">replays &amp; repair</a><a href="#steps">steps</a></nav>')
    body = [
        _header(run, diagnosis),
        nav,
        f'<section id="diagnosis"><h2>Diagnosis</h2>{_diagnosis_html(run, diagnosis, marks)}</section>',
        f'<section id="graph"><h2>Step graph</h2><p class="small muted">{e(graph_note)} '
        '<span id="js-step-count"></span></p>'
        f'<div class="graph-wrap">{labels}<div class="graph-scroll">{svg}</div></div>'
        f"{render_legend(run, with_marks=diagnosis is not None)}</section>",
        f'<section id="timeline"><h2>Timeline</h2><div class="tl-scroll">{render_timeline(run, marks)}</div></section>',
        f'<section id="repair"><h2>Replays tried</h2>{_replays_html(run, tried)}'
        f"<h2>Repair</h2>{_repair_html(run, pair_list, tried)}</section>",
        f'<section id="steps"><h2>All steps</h2>{_steps_html(run, marks)}</section>',
        f'<footer>causaltrace {e(version)} · run <span class="mono">{e(run.run_id)}</span> · '
        "this file is self-contained and works offline</footer>",
    ]
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, '
        f'initial-scale=1"><title>causaltrace · {e(short(title_of(run), 80))}</title><style>{CSS}</style></head>'
        f'<body data-step-count="{len(run.steps)}"><main>{"".join(body)}</main><script>{JS}</script></body></html>\n'
    )


def title_of(run: Run) -> str:
    return run.name or run.task or run.run_id


CSS = """
:root{--hl:#f76707;--bad:#dc2626;--ok:#15803d;--ink:#0f172a;--mut:#64748b;--line:#e2e8f0;--bg:#f1f5f9;
--card:#fff;--cand:#1e3a8a}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
main{max-width:1560px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 12px 0 0}
h2{font-size:17px;margin:0 0 10px;letter-spacing:.01em}
h3{font-size:13px;text-transform:uppercase;letter-spacing:.06em;color:var(--mut);margin:18px 0 6px}
a{color:#1d4ed8;text-decoration:none}a:hover{text-decoration:underline}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.small{font-size:12px}.muted{color:var(--mut)}.nowrap{white-space:nowrap}.err{color:var(--bad)}
header,section{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:16px 20px;
margin-bottom:16px;box-shadow:0 1px 2px rgba(15,23,42,.04)}
.title-row{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.meta{display:flex;flex-wrap:wrap;gap:6px 28px;margin:12px 0}
.meta div{min-width:0}.meta dt{font-size:11px;color:var(--mut);text-transform:uppercase;letter-spacing:.05em}
.meta dd{margin:0}
.blocks{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:10px}
.block{background:#f8fafc;border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.label{font-size:11px;color:var(--mut);text-transform:uppercase;letter-spacing:.05em;margin-bottom:2px}
.content{white-space:pre-wrap;word-break:break-word;margin:0}
pre.content{max-height:360px;overflow:auto;background:#f8fafc;padding:8px;border-radius:6px}
.pill{display:inline-block;padding:1px 10px;border-radius:999px;font-size:12px;font-weight:600;
border:1px solid transparent}
.pill.ok{background:#dcfce7;color:#166534;border-color:#86efac}.pill.bad{background:#fee2e2;color:#991b1b;
border-color:#fca5a5}.pill.warn{background:#fef3c7;color:#92400e;border-color:#fcd34d}
.pill.muted-pill{background:#f1f5f9;color:#475569;border-color:#cbd5e1}
nav{display:flex;gap:6px;margin:-4px 0 14px;position:sticky;top:0;z-index:5;background:var(--bg);padding:6px 0}
nav a{background:var(--card);border:1px solid var(--line);border-radius:999px;padding:3px 12px;font-size:13px}
.note{background:#fff7ed;border:1px solid #fdba74;border-radius:8px;padding:10px 14px}
.note.bad{background:#fef2f2;border-color:#fca5a5}
.facts{display:grid;grid-template-columns:2fr 1.3fr 1fr 1fr;gap:10px;margin-top:10px}
.fact{border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.fact .value{font-size:15px}
.decisive-fact{border:2px solid var(--hl);background:#fff7ed}
.quote{margin-top:4px;font-size:12.5px;color:#334155;border-left:3px solid var(--hl);padding-left:8px;
white-space:pre-wrap;word-break:break-word}
.kind{color:#475569;font-weight:600}.agent{font-weight:600}
.stepref{font-weight:700}
.explanation{margin:0;max-width:110ch}
.ev-path{display:flex;flex-wrap:wrap;align-items:stretch;gap:6px}
.ev{display:flex;flex-direction:column;border:2px solid var(--hl);border-radius:8px;padding:4px 10px;
background:#fff7ed;color:var(--ink);max-width:320px}
.ev:hover{text-decoration:none;background:#ffedd5}
.ev-role{font-size:11px;font-weight:700;text-transform:uppercase;color:var(--hl);letter-spacing:.05em}
.ev-step{font-weight:600}.ev-note{font-size:12px;color:var(--mut)}
.ev-arrow{align-self:center;color:var(--hl);font-weight:700;font-size:18px}
.grid{border-collapse:collapse;width:100%}
.grid th{text-align:left;font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--mut);
border-bottom:1px solid var(--line);padding:6px 8px;background:#f8fafc;position:sticky;top:38px}
.grid td{border-bottom:1px solid var(--line);padding:6px 8px;vertical-align:top}
.grid tr.is-decisive td{background:#fff7ed}.grid tr.is-evidence td{background:#fffbf5}
.grid tr.flip td{background:#f0fdf4}
.grid tr.flash td{background:#fde68a;transition:background .3s}
.num{font-weight:700;text-align:right}
.rank-badge{display:inline-block;min-width:22px;text-align:center;background:var(--cand);color:#fff;
border-radius:999px;font-weight:700;font-size:12px;padding:1px 6px}
.score{width:170px;white-space:nowrap}.bar{display:inline-block;width:90px;height:8px;background:#e2e8f0;
border-radius:4px;margin-right:8px;vertical-align:middle;overflow:hidden}
.bar span{display:block;height:100%;background:var(--cand)}
.reasons{margin:0;padding-left:16px}
.cost{margin-top:10px}
.kind-chip{display:inline-block;border:1px solid;border-radius:6px;padding:0 6px;font-size:12px;margin-right:4px}
.flag{display:inline-block;font-size:11px;border-radius:4px;padding:0 5px;margin:1px 3px 1px 0;font-weight:600}
.flag.hl{background:var(--hl);color:#fff}.flag.hl-soft{background:#ffedd5;color:#9a3412}
.flag.cand{background:#dbeafe;color:var(--cand)}
.steps td:last-child{max-width:720px}
.graph-wrap{display:flex;border:1px solid var(--line);border-radius:8px;overflow:hidden;background:#fff}
.lane-labels{flex:0 0 168px;border-right:1px solid var(--line);background:#fff;z-index:1}
.lane-label{display:flex;flex-direction:column;justify-content:center;padding:0 10px;border-left:5px solid;
border-bottom:1px solid var(--line)}
.lane-label:last-child{border-bottom:0}
.lane-name{font-weight:700;font-size:14px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lane-meta{font-size:12px;color:var(--mut)}
.lane-flag{align-self:flex-start;margin-top:3px;font-size:10.5px;font-weight:700;color:#fff;background:var(--hl);
border-radius:4px;padding:0 5px;text-transform:uppercase;letter-spacing:.04em}
.graph-scroll{overflow-x:auto;flex:1 1 auto}
svg.graph{display:block}
svg.graph text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
svg.graph .idx{font-size:11px;font-weight:700;fill:#0f172a}
svg.graph .badge{font-size:10px;font-weight:700;fill:#fff}
svg.graph .kind-label{font-size:10px;fill:#334155;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg.graph .sub-label{font-size:9.5px;font-style:italic;fill:#64748b;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg.graph .role-label{font-size:10px;font-weight:700;fill:var(--hl);paint-order:stroke;stroke:#fff;
stroke-width:3px;text-transform:uppercase;letter-spacing:.03em}
svg.graph .stub-label{font-size:9.5px;fill:#475569;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg.graph .step-node{cursor:pointer}
svg.graph .step-node:hover .shape,svg.graph .step-node:focus .shape{filter:brightness(.93)}
svg.graph .step-node:focus{outline:none}
svg.graph .dep-edge{transition:opacity .15s}
svg.graph.focus .dep-edge:not(.hot),svg.graph.focus .path-link{opacity:.08}
svg.graph.focus .dep-edge.hot{stroke-width:3;opacity:1}
svg.graph.focus .step-node:not(.hot):not(.near){opacity:.45}
.legend{margin-top:10px;display:flex;flex-direction:column;gap:4px}
.legend-row{display:flex;flex-wrap:wrap;align-items:center;gap:2px 14px;font-size:12.5px}
.legend-row b{min-width:96px;font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--mut)}
.lg{display:inline-flex;align-items:center;gap:4px}
.lg svg{display:block}
.lg .badge{font-size:10px;font-weight:700;fill:#fff}
.tl-scroll{overflow-x:auto;border:1px solid var(--line);border-radius:8px}
svg.timeline{display:block}
svg.timeline text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
svg.timeline .tick{font-size:10.5px;fill:#64748b}
svg.timeline .axis-name{font-size:11px;fill:#64748b;font-style:italic}
svg.timeline .tl-lane{font-size:13px;font-weight:700;fill:#0f172a}
svg.timeline .bar-label{font-size:10px;fill:#0f172a;pointer-events:none}
svg.timeline .tl-bar{cursor:pointer}
svg.timeline .tl-bar:hover rect{filter:brightness(.9)}
.diff{border-collapse:collapse;width:100%;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:12.5px;margin:8px 0;border:1px solid var(--line);table-layout:fixed}
.diff th{background:#f8fafc;text-align:left;font-family:system-ui,sans-serif;font-size:11px;
text-transform:uppercase;letter-spacing:.05em;color:var(--mut);padding:4px 8px}
.diff th:nth-child(odd),.diff td.ln{width:38px}
.diff td{padding:1px 8px;white-space:pre-wrap;word-break:break-word;vertical-align:top}
.diff td.ln{color:#94a3b8;text-align:right;user-select:none;border-right:1px solid var(--line)}
.diff tr.chg td.old,.diff tr.del td.old{background:#fef2f2}.diff tr.chg td.new,.diff tr.add td.new{background:#f0fdf4}
.diff del{background:#fecaca;color:#7f1d1d;text-decoration:line-through;border-radius:2px}
.diff ins{background:#bbf7d0;color:#14532d;text-decoration:none;border-radius:2px}
.diff tr.skip td{color:#94a3b8;text-align:center;background:#f8fafc}
.diff tfoot td{font-family:system-ui,sans-serif;font-size:11px;color:var(--mut);padding:3px 8px}
.repair{border:1px solid var(--line);border-left:4px solid var(--ok);border-radius:8px;padding:10px 14px;
margin-bottom:10px}
.repair-head{font-weight:600}
details summary{cursor:pointer;color:#1d4ed8;font-size:12px}
#repair h2:not(:first-child){margin-top:22px}
footer{color:var(--mut);font-size:12px;text-align:center;margin-top:8px}
@media (max-width:900px){.facts{grid-template-columns:1fr 1fr}}
"""

JS = """
(function () {
  var svg = document.querySelector('svg.graph');
  var nodes = svg ? svg.querySelectorAll('.step-node') : [];
  document.body.setAttribute('data-rendered-steps', String(nodes.length));
  var count = document.getElementById('js-step-count');
  if (count) { count.textContent = '(' + nodes.length + ' step nodes drawn)'; }
  function jump(i) {
    var row = document.getElementById('step-' + i);
    if (!row) { return; }
    row.scrollIntoView({behavior: 'smooth', block: 'center'});
    row.classList.add('flash');
    setTimeout(function () { row.classList.remove('flash'); }, 1600);
  }
  function mark(i, on) {
    svg.classList.toggle('focus', on);
    var edges = svg.querySelectorAll('.dep-edge[data-from="' + i + '"], .dep-edge[data-to="' + i + '"]');
    Array.prototype.forEach.call(edges, function (p) {
      p.classList.toggle('hot', on);
      var other = p.getAttribute('data-from') === i ? p.getAttribute('data-to') : p.getAttribute('data-from');
      var n = document.getElementById('node-' + other);
      if (n) { n.classList.toggle('near', on); }
    });
    var self = document.getElementById('node-' + i);
    if (self) { self.classList.toggle('hot', on); }
  }
  Array.prototype.forEach.call(nodes, function (n) {
    var i = n.getAttribute('data-step-index');
    n.addEventListener('mouseenter', function () { mark(i, true); });
    n.addEventListener('mouseleave', function () { mark(i, false); });
    n.addEventListener('focus', function () { mark(i, true); });
    n.addEventListener('blur', function () { mark(i, false); });
    n.addEventListener('click', function () { jump(i); });
    n.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') { jump(i); } });
  });
  Array.prototype.forEach.call(document.querySelectorAll('.tl-bar'), function (b) {
    b.addEventListener('click', function () { jump(b.getAttribute('data-step-index')); });
  });
})();
"""
