"""Assemble the report page: header, diagnosis, step graph, timeline, replays and repair, step table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from causaltrace.report._assets import CSS, JS
from causaltrace.report._diff import as_text, original_of, render_diff, render_pair_diff
from causaltrace.report._graph import GraphLayout, render_graph, render_legend, short
from causaltrace.report._marks import Marks, marks_of
from causaltrace.report._minimap import render_minimap
from causaltrace.report._style import e, kind_style
from causaltrace.report._timeline import render_timeline
from causaltrace.report._turns import Turns, folded_by_default, turns_of
from causaltrace.report._verdict import render_verdict_card
from causaltrace.schema import Diagnosis, RepairPair, ReplayResult, Run, Step

__all__ = ["FIT_ABOVE_STEPS", "normalize_replays", "render_page"]

_CONTENT_PREVIEW = 400
_CONTENT_MAX = 20_000
#: The decisive step's card quotes this much text; code shows up to _CODE_LINES lines before folding the rest.
_EXCERPT = 600
_CODE_LINES = 40
#: Candidates shown before the rest fold away.
_CANDIDATES_SHOWN = 5
#: A graph of more steps than this opens fitted to the window (zoomed out, no lower than the script's FIT_MIN);
#: a smaller one opens at 100 % (the script fits it too when it is wider than the window)
FIT_ABOVE_STEPS = 12


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
        diff = render_diff(original_of(step, r["replacement"]), r["replacement"], right="replacement")
        change = (f'<div>{e(r["description"]) or "<i>no description</i>"}</div>'
                  f"<details><summary>diff</summary>{diff}</details>")
        rows.append(
            f'<tr class="{"flip" if r["flipped"] else ""}"><td>{n}</td><td>{_step_ref(step, str(r["step_id"]))}</td>'
            f"<td>{change}</td><td>{result}<div class=\"small muted\">{' · '.join(extra)}</div></td>"
            f'<td class="mono small">{e(r["replay_run_id"] or "—")}</td></tr>'
        )
    return ('<table class="grid replays"><thead><tr><th>#</th><th>step</th><th>change tried</th><th>outcome</th>'
            f'<th>replay run</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _tried_html(run: Run, replays: list[dict[str, Any]]) -> str:
    """The replays tried, folded (a search may try dozens; the one that flipped is in the repair above)."""
    if not replays:
        return '<h3>replays tried</h3><p class="muted">No replays were tried for this run.</p>'
    flips = sum(1 for r in replays if r["flipped"])
    return (f'<details class="tried"><summary><b>replays tried: {len(replays)}</b> ({flips} flipped the run)'
            f"</summary>{_replays_html(run, replays)}</details>")


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
            f"{render_pair_diff(p.rejected, p.chosen)}"
            f"<details><summary>the prompt at this step ({len(prompt)} characters)</summary>"
            f'<pre class="content">{e(prompt[:_CONTENT_MAX])}</pre></details></div>'
        )
    if blocks:
        return "".join(blocks)
    flipped = next((r for r in replays if r["flipped"]), None)
    if flipped is not None:
        step = by_id.get(str(flipped["step_id"]))
        diff = render_diff(original_of(step, flipped["replacement"]), flipped["replacement"], right="replacement")
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
    parts.append(_facts_html(d, by_id.get(marks.decisive) if marks.decisive else None, marks.decisive_word))
    if d.explanation:
        parts.append(f'<h3>why</h3><p class="explanation">{e(d.explanation)}</p>')
    parts.append(_evidence_html(d, by_id))
    parts.append(_candidates_html(d, by_id, marks))
    c = d.cost
    stages = ", ".join(f"{e(k)}: {v}" for k, v in c.calls_by_stage.items())
    money = f" · ${c.usd:.4f}" if c.usd is not None else ""
    cached = f", {c.cached_calls} from cache" if c.cached_calls else ""
    parts.append(f'<div class="cost small muted">cost: {c.llm_calls} LLM call(s){f" ({stages})" if stages else ""}'
                 f"{cached} · {c.input_tokens} in / {c.output_tokens} out tokens · {c.seconds:.2f} s{money}</div>")
    return "".join(parts)


def code_of(step: Step) -> str | None:
    """The code a step carries (a code execution's input, a code tool call's argument), shown as code."""
    code = step.inputs.get("code")
    if isinstance(code, str) and code.strip():
        return code
    if step.kind == "tool_call" and step.arguments:
        for key in ("code", "source", "script"):
            value = step.arguments.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def _code_block(code: str, limit_lines: int = _CODE_LINES) -> str:
    """Code as code: a ``<pre>`` keeping newlines and indentation; a long listing folds its tail."""
    lines = code.splitlines()
    if len(lines) <= limit_lines:
        return f'<pre class="code">{e(code)}</pre>'
    head = "\n".join(lines[:limit_lines])
    return (f'<pre class="code">{e(head)}</pre><details><summary>all {len(lines)} lines</summary>'
            f'<pre class="code">{e(code[:_CONTENT_MAX])}</pre></details>')


def _excerpt(step: Step | None) -> str:
    """The decisive step's card body: its code as code, else its text with its line breaks kept."""
    if step is None:
        return ""
    code = code_of(step)
    if code is not None:
        return _code_block(code)
    text = step.content or (step.error.message if step.error else "")
    if not text:
        return ""
    clipped = text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"
    return f'<pre class="quote">{e(clipped)}</pre>'


def _facts_html(d: Diagnosis, decisive: Step | None, word: str = "decisive") -> str:
    category = (f'<b>{e(d.category)}</b> {e(d.category_name or "")}' if d.category
                else '<span class="muted">not categorised</span>')
    conf = f"{d.confidence:.2f}" if d.confidence is not None else "—"
    vb_cls = {"replay": "ok", "prediction": "warn", "heuristic": "muted-pill"}.get(d.verified_by, "muted-pill")
    return (
        '<div class="facts">'
        f'<div class="fact decisive-fact"><div class="label">{word} step</div><div class="value">'
        f"{_step_ref(decisive) if decisive is not None else '<span class=muted>none</span>'}</div>"
        f"{_excerpt(decisive)}</div>"
        f'<div class="fact"><div class="label">error category</div><div class="value">{category}</div></div>'
        f'<div class="fact"><div class="label">verified by</div><div class="value">{_pill(d.verified_by, vb_cls)}'
        f'</div></div><div class="fact"><div class="label">confidence</div><div class="value">{conf}</div></div>'
        "</div>"
    )


def _evidence_html(d: Diagnosis, by_id: Mapping[str, Step]) -> str:
    if not d.evidence:
        return ""
    chips = []
    for item in d.evidence:
        step = by_id.get(item.step_id)
        label = f"#{item.index}" + (f" {step.kind} · {step.agent or '-'}" if step is not None else "")
        note = f'<span class="ev-note">{e(item.note)}</span>' if item.note else ""
        chips.append(f'<a class="ev ev-{e(item.role)}" href="#step-{item.index}"><span class="ev-role">'
                     f'{e(item.role)}</span><span class="ev-step">{e(label)}</span>{note}</a>')
    return ('<h3>propagation path (evidence)</h3><div class="ev-path">'
            + '<span class="ev-arrow">→</span>'.join(chips) + "</div>")


_CANDIDATE_COLS = ('<colgroup><col style="width:64px"><col style="width:70px"><col style="width:150px">'
                   '<col style="width:150px"><col style="width:170px"><col></colgroup>')


def _candidates_html(d: Diagnosis, by_id: Mapping[str, Step], marks: Marks) -> str:
    """The ranked candidates: the first :data:`_CANDIDATES_SHOWN` in a table, the rest folded under it (same
    columns), so a long list never pushes the graph off the first screen."""
    if not d.candidates:
        return ""
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
    head = ('<thead><tr><th>rank</th><th>step</th><th>kind</th><th>agent</th><th>score</th><th>reasons</th></tr>'
            "</thead>")
    shown, rest = rows[:_CANDIDATES_SHOWN], rows[_CANDIDATES_SHOWN:]
    title = "ranked candidates"
    if d.candidates[0].index != d.decisive_step_index and d.decisive_step_index is not None:
        proved = "replay proved" if d.verified_by == "replay" else "the verdict names"
        title += (f" (as ranked{' before replay' if d.verified_by == 'replay' else ''}: #{d.candidates[0].index} "
                  f"first; {proved} #{d.decisive_step_index})")
    out = (f'<h3>{e(title)}</h3><table class="grid candidates">' + _CANDIDATE_COLS + head + "<tbody>"
           + "".join(shown) + "</tbody></table>")
    if rest:
        out += (f'<details class="more-candidates"><summary>show the other {len(rest)} candidates (of '
                f'{len(rows)})</summary><table class="grid candidates">{_CANDIDATE_COLS}<tbody>{"".join(rest)}'
                "</tbody></table></details>")
    return out


# ------------------------------------------------------------------------------------------------- step table


def _steps_html(run: Run, marks: Marks, turns: Turns) -> str:
    by_id = {s.step_id: s for s in run.steps}
    t0 = min((s.started_at for s in run.steps if s.started_at is not None), default=None)
    marked = set(marks.roles) | ({marks.decisive} if marks.decisive else set())
    folded = folded_by_default(run, turns, marked)
    rows = [_step_row(s, by_id, marks, turns, t0, s.step_id in folded) for s in run.steps]
    return ('<table class="grid steps"><thead><tr><th>#</th><th>kind</th><th>agent</th><th>status</th><th>tool</th>'
            '<th>depends on</th><th>start / took</th><th>content</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _step_row(s: Step, by_id: Mapping[str, Step], marks: Marks, turns: Turns, t0: datetime | None,
              fold: bool) -> str:
    """One row of the step table; an agent turn that holds steps gets its fold button."""
    fill, stroke, _, _ = kind_style(s.kind)
    deps = ", ".join(f"{e(d.kind)} ← <a href=\"#step-{by_id[d.step_id].index}\">#{by_id[d.step_id].index}</a>"
                     for d in s.depends_on)
    flags = []
    cls = []
    if s.step_id == marks.decisive:
        flags.append(f'<span class="flag hl">{marks.decisive_word}</span>')
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
    code = code_of(s)
    body = _clip(s.content) if s.content and s.content != code else ""
    if code is not None:
        body += _code_block(code)
    if s.error is not None:
        body += f'<div class="err small">{e(s.error.type)}: {e(short(s.error.message, 400))}</div>'
    if s.truncated:
        body += '<div class="small muted">(payload truncated at capture)</div>'
    if s.source is not None and s.source.span_id:  # an imported step: the span it was read from (issue 34)
        kind = f" ({e(s.source.span_kind)})" if s.source.span_kind else ""
        body += (f'<div class="small muted">from span <span class="mono">{e(s.source.span_id)}</span>{kind} of '
                 f'trace <span class="mono">{e(s.source.trace_id or "—")}</span></div>')
    size = len(turns.members.get(s.step_id, ()))
    if size:
        default = " data-default-fold" if fold else ""
        body += (f'<div><button class="fold" type="button" data-fold="{s.index}" data-size="{size}"{default} '
                 f'aria-expanded="true">fold the {size} steps of this turn</button></div>')
    status = _pill(s.status, {"ok": "ok", "error": "bad"}.get(s.status, "muted-pill"))
    return (
        f'<tr id="step-{s.index}" class="{" ".join(cls)}" data-step-index="{s.index}"{turns.data_turns(s.step_id)}>'
        f'<td class="num">{s.index}</td>'
        f'<td><span class="kind-chip" style="background:{fill};border-color:{stroke}">{e(s.kind)}</span>'
        f'{"".join(flags)}</td><td>{e(s.agent or "-")}</td><td>{status}</td><td>{e(s.tool_name or "")}</td>'
        f'<td class="small">{deps}</td><td class="small nowrap">{at}<br>{_duration(s.started_at, s.ended_at)}</td>'
        f"<td>{body}</td></tr>"
    )


# ------------------------------------------------------------------------------------------------------- page


def _header(run: Run, d: Diagnosis | None) -> str:
    """The task and how the run ended, first; the run's facts in one small line, the rest folded."""
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
        meta.append(("verifier", f"{'passed' if o.verdict.passed else 'failed'}: {e(o.verdict.reason)}"))
    if run.annotations is not None and run.annotations.mistake_step is not None:
        meta.append(("labelled decisive", f"step {run.annotations.mistake_step} by "
                                          f"{e(run.annotations.mistake_agent or '-')}"))
    dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in meta)
    line = " · ".join([e(run.framework), f"{len(run.steps)} steps", e(", ".join(run.agents) or "no agents"),
                       e(_duration(run.started_at, run.ended_at))])
    blocks = []
    if run.task:
        blocks.append(f'<div class="block"><div class="label">task</div>{_clip(run.task, 300)}</div>')
    answer = o.final_answer if o.final_answer is not None else "(no final answer)"
    outcome = _clip(answer, 200)
    if o.reason:
        outcome += f'<div class="small muted">{e(short(o.reason, 200))}</div>'
    blocks.append(f'<div class="block"><div class="label">final answer</div>{outcome}</div>')
    return (f'<header><div class="title-row"><h1>{e(short(title, 120))}</h1>{_pill(o.status, status_cls)}'
            f'<span class="small muted">{line}</span></div><div class="blocks">{"".join(blocks)}</div>'
            f'<details class="run-meta"><summary class="small muted">run details</summary><dl class="meta">{dl}</dl>'
            "</details></header>")


def _graph_section(run: Run, marks: Marks, with_marks: bool) -> str:
    """The step graph with its tools (zoom, the decisive step), its minimap, and its legend."""
    layout = GraphLayout.of(run)
    turns = turns_of(run)
    labels, svg = render_graph(run, marks, layout, turns)
    n_edges = sum(len(s.depends_on) for s in run.steps)
    graph_note = (f"{len(run.steps)} steps in {len(layout.lanes)} lane(s), {n_edges} dependencies. Hover a node "
                  "to follow its edges, click it to jump to its row.")
    decisive = next((s for s in run.steps if s.step_id == marks.decisive), None)
    tools = ['<div class="graph-tools"><button type="button" data-zoom="out" title="zoom out">−</button>'
             '<span class="zoom-level">100%</span><button type="button" data-zoom="in" title="zoom in">+</button>'
             '<button type="button" data-zoom="fit" title="the whole run in the window">fit</button>'
             '<button type="button" data-zoom="1">100%</button>']
    if decisive is not None:
        tools.append(f'<button type="button" class="to-decisive">go to the {marks.decisive_word} step #{decisive.index}'
                     "</button>")
    if turns.members:
        tools.append(f'<span class="small muted">{len(turns.members)} agent turn(s): the − on a turn folds its '
                     "steps</span>")
    tools.append("</div>")
    return (f'<section id="graph"><h2>Step graph</h2><p class="small muted">{e(graph_note)} '
            '<span id="js-step-count"></span></p>' + "".join(tools) + render_minimap(run, marks, layout)
            + f'<div class="graph-wrap">{labels}<div class="graph-scroll">{svg}</div></div>'
            f"{render_legend(run, with_marks=with_marks, decisive_word=marks.decisive_word)}</section>")


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
    nav = ('<nav><a href="#verdict">verdict</a><a href="#graph">step graph</a><a href="#diagnosis">diagnosis</a>'
           '<a href="#timeline">timeline</a><a href="#repair">repair &amp; replays</a><a href="#steps">steps</a></nav>')
    fold = f' data-fit-above="{FIT_ABOVE_STEPS}"'
    body = [
        _header(run, diagnosis),
        render_verdict_card(run, diagnosis, pair_list, tried),
        nav,
        _graph_section(run, marks, diagnosis is not None).replace('<section id="graph"', '<section id="graph"' + fold, 1),
        f'<section id="diagnosis"><h2>Diagnosis</h2>{_diagnosis_html(run, diagnosis, marks)}</section>',
        f'<section id="timeline"><h2>Timeline</h2><div class="tl-scroll">{render_timeline(run, marks)}</div></section>',
        f'<section id="repair"><h2>Repair</h2>{_repair_html(run, pair_list, tried)}'
        f"{_tried_html(run, tried)}</section>",
        f'<section id="steps"><h2>All steps</h2>{_steps_html(run, marks, turns_of(run))}</section>',
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
