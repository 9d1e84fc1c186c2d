"""The page's inline style sheet and script (one self-contained file: nothing is loaded from the network).

The script is small vanilla JavaScript and only adds to a page that is complete without it: on load it fits a wide
graph to the window (down to 30 %) and scrolls the graph sideways to the decisive step — never the window, whose first
screen is the verdict — centres the decisive step in the window on the "decisive step" button, scrolls the timeline
to its bar,
pulses its halo, draws the visible window on the minimap and scrolls the graph from it, zooms the graph, folds agent
turns in the graph (the folded columns are given back: it lays the graph out again by the rules of report/_graph.py,
from the constants the SVG carries) and in the step table (a long run starts with its unmarked sub-agent turns folded
in the table), and ties graph nodes and timeline bars to their rows.
"""

from __future__ import annotations

__all__ = ["CSS", "JS"]

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
.lane-label{overflow:hidden;display:flex;flex-direction:column;justify-content:center;padding:0 10px;border-left:5px solid;
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
.graph-tools{display:flex;flex-wrap:wrap;align-items:center;gap:6px;margin:0 0 8px}
.graph-tools button,button.fold{font:inherit;font-size:12.5px;background:#fff;border:1px solid #cbd5e1;
border-radius:6px;padding:2px 10px;cursor:pointer;color:var(--ink)}
.graph-tools button:hover,button.fold:hover{background:#f1f5f9}
.graph-tools button.to-decisive{border-color:var(--hl);color:#9a3412;font-weight:600}
.graph-tools .zoom-level{font-size:12px;color:var(--mut);min-width:44px;text-align:center}
svg.minimap{display:block;width:100%;border:1px solid var(--line);border-radius:6px;margin:0 0 8px;
background:#fff;cursor:pointer}
svg.minimap .mm-view{fill:#1d4ed8;fill-opacity:.10;stroke:#1d4ed8;stroke-width:2;vector-effect:non-scaling-stroke}
svg.minimap .mm-decisive{stroke:var(--hl);stroke-width:3;vector-effect:non-scaling-stroke}
svg.graph .step-node.arrived .halo{animation:arrive 1.1s ease-in-out 3}
@keyframes arrive{50%{fill-opacity:.6;stroke-width:7}}
svg.graph .fold-btn{cursor:pointer}
svg.graph .fold-btn text{font-size:12px;font-weight:700;fill:#334155;pointer-events:none}
svg.graph .fold-count{font-size:10px;font-weight:700;fill:#334155;display:none}
svg.graph .step-node.turn-folded .fold-count{display:inline}
svg.graph .is-folded,svg.minimap .is-folded,.grid tr.is-folded{display:none}
pre.code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;white-space:pre;
overflow:auto;max-height:360px;background:#0f172a;color:#e2e8f0;border-radius:6px;padding:8px 10px;margin:4px 0 0;
tab-size:4}
pre.quote{font-family:inherit;margin:4px 0 0;max-height:220px;overflow:auto}
.more-candidates{margin-top:4px}
.candidates{table-layout:fixed}
.calls{margin:6px 0 2px;padding-left:18px;font-size:13px}
.calls li{margin:2px 0}
.calls code del{background:#fecaca;color:#7f1d1d;text-decoration:line-through;border-radius:2px}
.calls code ins{background:#bbf7d0;color:#14532d;text-decoration:none;border-radius:2px}
.diff tr.call td.old,.diff tr.call td.new{font-weight:600}
header{padding:12px 20px}header .blocks{margin-top:8px}.run-meta{margin-top:6px}.run-meta .meta{margin:6px 0 0}
.verdict{border:2px solid var(--hl);background:#fffaf5}.verdict.uncertain{border-color:#f59e0b;background:#fffbeb}
.verdict.none{border-color:var(--line);background:var(--card)}
.verdict-head{display:flex;justify-content:space-between;gap:16px;align-items:flex-start}
.verdict .headline{font-size:19px;font-weight:700}.verdict .source{color:#7c2d12;margin-top:2px}
.verdict.uncertain .source{color:#92400e}
.verdict .confidence{text-align:right}.verdict .conf{font-size:22px;font-weight:700}
.verdict-grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.15fr);gap:18px;margin-top:8px}
.verdict-grid .label{margin-top:8px}
.findings{margin:2px 0;padding-left:18px}.findings li{margin:3px 0}
.findings .family{font-weight:700;color:#9a3412;margin-right:4px}
.chips{display:flex;flex-wrap:wrap;gap:4px;margin-top:2px}
.ev-chip{border:1px solid #fdba74;background:#fff7ed;border-radius:6px;padding:0 6px;font-size:12px}
.ev-chip.ev-source{border-color:#86efac;background:#f0fdf4}.ev-chip.ev-changed{border-color:#fca5a5;background:#fef2f2}
.top3{margin:2px 0;padding-left:22px}
.first-diff{max-height:300px;overflow:auto;border:1px solid var(--line);border-radius:6px;margin-top:4px}
details.tried>summary{cursor:pointer;margin:14px 0 6px}
"""

JS = """
(function () {
  var each = function (list, f) { Array.prototype.forEach.call(list, f); };
  var svg = document.querySelector('svg.graph');
  var nodes = svg ? svg.querySelectorAll('.step-node') : [];
  var scroller = document.querySelector('.graph-scroll');
  document.body.setAttribute('data-rendered-steps', String(nodes.length));
  var count = document.getElementById('js-step-count');
  if (count) { count.textContent = '(' + nodes.length + ' step nodes drawn)'; }
  var base = svg ? [parseFloat(svg.getAttribute('width')), parseFloat(svg.getAttribute('height'))] : [0, 0];
  var zoom = 1, FIT_MIN = 0.3;
  var mm = document.querySelector('svg.minimap'), view = mm && mm.querySelector('.mm-view');

  /* the graph's layout again, for folded turns: the same rules as the Python layout (report/_graph.py) */
  var G = svg && {w: +svg.dataset.colW, pl: +svg.dataset.padL, pr: +svg.dataset.padR, lh: +svg.dataset.laneH,
                  ny: +svg.dataset.nodeY, r: +svg.dataset.r, hop: +svg.dataset.hop, c: +svg.dataset.corner};
  var at = {}, ncols = nodes.length, newCol = [], width0 = base[0];
  each(nodes, function (n) { at[n.dataset.stepIndex] = {col: +n.dataset.col, lane: +n.dataset.lane}; });
  function f(v) { return String(Math.round(v * 10) / 10); }
  function pt(x, y) { return f(x) + ',' + f(y); }
  function X(col) { return G.pl + newCol[col] * G.w + G.w / 2; }
  function Y(lane) { return lane * G.lh + G.ny; }
  function routed(x1, y1, x2, y2, lane, o) {
    var c = G.c, xb = x1 + G.w / 2, yc = lane * G.lh + 17 + 3.5 * ((Math.floor(x1 / G.w) + o) % 4);
    var s = yc > y1 ? 1 : -1;
    return 'M' + pt(x1 + G.r, y1) + ' L' + pt(xb - c, y1) + ' Q' + pt(xb, y1) + ' ' + pt(xb, y1 + s * c) +
      ' L' + pt(xb, yc - s * c) + ' Q' + pt(xb, yc) + ' ' + pt(xb + c, yc) + ' L' + pt(x2 - c, yc) +
      ' Q' + pt(x2, yc) + ' ' + pt(x2, yc + c) + ' L' + pt(x2, y2 - G.r - 3);
  }
  function edgeD(a, b, o) {
    var x1 = X(a.col), y1 = Y(a.lane), x2 = X(b.col), y2 = Y(b.lane), R = G.r, dist = newCol[b.col] - newCol[a.col];
    if (a.lane === b.lane) {
      if (dist === 1 && o === 0) { return 'M' + pt(x1 + R + 1, y1) + ' L' + pt(x2 - R - 3, y2); }
      var h = Math.min(12 + 7 * dist, 44) + 6 * o, sx = x1 + 3, ex = x2 - 3, top = y1 - R - 2;
      return 'M' + pt(sx, top) + ' C' + pt(sx + 6, top - h) + ' ' + pt(ex - 6, top - h) + ' ' + pt(ex, top - 1);
    }
    if (dist > G.hop) { return routed(x1, y1, x2, y2, b.lane, o); }
    var down = y2 > y1 ? 1 : -1, lean = 0.42 * Math.abs(y2 - y1) + 5 * o;
    var px = x1 + R * 0.8, py = y1 + down * R * 0.45, qx = x2 - R - 3, qy = y2 - down * 3;
    return 'M' + pt(px, py) + ' C' + pt(px + 16 + 4 * o, py + down * lean) + ' ' +
      pt(qx - 20 - 4 * o, qy - down * lean) + ' ' + pt(qx, qy);
  }
  function shift(el, col) {
    var dx = (newCol[col] - col) * G.w;
    if (dx) { el.setAttribute('transform', 'translate(' + f(dx) + ',0)'); } else { el.removeAttribute('transform'); }
  }
  /* hidden: the step indexes folded away; their columns go, everything right of them moves left */
  function relayout(hidden) {
    var gone = {}, k = 0, any = false;
    Object.keys(hidden).forEach(function (i) { if (at[i]) { gone[at[i].col] = true; any = true; } });
    for (var p = 0; p < ncols; p++) { newCol[p] = p - k; if (gone[p]) { k++; } }
    each(nodes, function (n) { shift(n, at[n.dataset.stepIndex].col); });
    each(svg.querySelectorAll('.dep-edge, .path-link'), function (e) {
      if (!e.dataset.d) { e.dataset.d = e.getAttribute('d'); }
      var a = at[e.dataset.from], b = at[e.dataset.to];
      if (!any || !a || !b) { e.setAttribute('d', e.dataset.d); e.removeAttribute('transform'); return; }
      if (e.hasAttribute('data-stub')) { shift(e, b.col); return; }
      e.setAttribute('d', edgeD(a, b, +e.dataset.ordinal));
    });
    each(svg.querySelectorAll('.stub-label'), function (t) { shift(t, +t.dataset.at); });
    each(svg.querySelectorAll('.turn-band'), function (band) {
      if (!band.dataset.x) { band.dataset.x = band.getAttribute('x'); band.dataset.w = band.getAttribute('width'); }
      var cols = band.dataset.cols.split(' ').map(Number).filter(function (c) { return !gone[c]; });
      var btn = band.nextElementSibling;
      if (!btn || !btn.classList.contains('fold-btn')) { btn = null; }
      band.classList.toggle('is-folded', !cols.length);  /* a turn inside a folded turn goes with it */
      if (btn) { btn.classList.toggle('is-folded', !cols.length); }
      if (!cols.length) { return; }
      var x0 = G.pl + newCol[Math.min.apply(null, cols)] * G.w + 4;
      var x1 = G.pl + (newCol[Math.max.apply(null, cols)] + 1) * G.w - 4;
      band.setAttribute('x', any ? f(x0) : band.dataset.x);
      band.setAttribute('width', any ? f(x1 - x0) : band.dataset.w);
      if (btn) {
        var dx = x0 - parseFloat(btn.dataset.x);
        if (any && dx) { btn.setAttribute('transform', 'translate(' + f(dx) + ',0)'); }
        else { btn.removeAttribute('transform'); }
      }
    });
    base[0] = any ? G.pl + (ncols - k) * G.w + G.pr : width0;
    svg.setAttribute('viewBox', '0 0 ' + f(base[0]) + ' ' + f(base[1]));
    if (mm) {
      mm.setAttribute('viewBox', '0 0 ' + f(base[0]) + ' ' + f(base[1]));
      each(mm.querySelectorAll('[data-col]'), function (r) {
        shift(r, +r.dataset.col);
        r.classList.toggle('is-folded', !!gone[+r.dataset.col]);
      });
    }
    setZoom(zoom);
  }

  /* folding: nodes and rows carry data-turns (the agent turns around them); graph and table fold separately */
  var folds = {graph: {}, table: {}};
  function applyFolds(scope) {
    var root = scope === 'graph' ? svg : document.querySelector('table.steps');
    if (!root) { return; }
    var state = folds[scope], hidden = {};
    each(root.querySelectorAll('[data-turns]'), function (el) {
      var off = el.getAttribute('data-turns').split(' ').some(function (t) { return state[t]; });
      el.classList.toggle('is-folded', off);
      if (off) { hidden[el.getAttribute('data-step-index')] = true; }
    });
    if (scope === 'graph') {
      each(svg.querySelectorAll('.dep-edge, .path-link'), function (p) {
        p.classList.toggle('is-folded', !!(hidden[p.getAttribute('data-from')] || hidden[p.getAttribute('data-to')]));
      });
    }
    each(root.querySelectorAll('[data-fold]'), function (b) {
      var t = b.getAttribute('data-fold'), on = !!state[t], n = b.getAttribute('data-size');
      b.setAttribute('aria-expanded', String(!on));
      if (scope === 'graph') {
        b.querySelector('.fold-sign').textContent = on ? '+' : '\\u2212';
        var turn = document.getElementById('node-' + t);
        if (turn) { turn.classList.toggle('turn-folded', on); }
      } else {
        b.textContent = (on ? 'show the ' : 'fold the ') + n + ' steps of this turn';
      }
    });
    if (scope === 'graph') { relayout(hidden); }
  }
  function toggleFold(scope, t) { folds[scope][t] = !folds[scope][t]; applyFolds(scope); }
  each(document.querySelectorAll('[data-fold]'), function (b) {
    var scope = b.closest('svg.graph') ? 'graph' : 'table', t = b.getAttribute('data-fold');
    if (b.hasAttribute('data-default-fold')) { folds[scope][t] = true; }
    b.addEventListener('click', function (ev) { ev.stopPropagation(); toggleFold(scope, t); });
    b.addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); toggleFold(scope, t); }
    });
  });

  function jump(i) {
    var row = document.getElementById('step-' + i);
    if (!row) { return; }
    if (row.classList.contains('is-folded')) {
      row.getAttribute('data-turns').split(' ').forEach(function (t) { delete folds.table[t]; });
      applyFolds('table');
    }
    row.scrollIntoView({behavior: 'smooth', block: 'center'});
    row.classList.add('flash');
    setTimeout(function () { row.classList.remove('flash'); }, 1600);
  }
  function mark(i, on) {
    svg.classList.toggle('focus', on);
    var edges = svg.querySelectorAll('.dep-edge[data-from="' + i + '"], .dep-edge[data-to="' + i + '"]');
    each(edges, function (p) {
      p.classList.toggle('hot', on);
      var other = p.getAttribute('data-from') === i ? p.getAttribute('data-to') : p.getAttribute('data-from');
      var n = document.getElementById('node-' + other);
      if (n) { n.classList.toggle('near', on); }
    });
    var self = document.getElementById('node-' + i);
    if (self) { self.classList.toggle('hot', on); }
  }
  each(nodes, function (n) {
    var i = n.getAttribute('data-step-index');
    n.addEventListener('mouseenter', function () { mark(i, true); });
    n.addEventListener('mouseleave', function () { mark(i, false); });
    n.addEventListener('focus', function () { mark(i, true); });
    n.addEventListener('blur', function () { mark(i, false); });
    n.addEventListener('click', function () { jump(i); });
    n.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') { jump(i); } });
  });
  each(document.querySelectorAll('.tl-bar'), function (b) {
    b.addEventListener('click', function () { jump(b.getAttribute('data-step-index')); });
  });
  applyFolds('table');
  if (!svg || !scroller) { return; }

  /* minimap: the same coordinates as the graph, so one ratio maps between them */
  function updateMinimap() {
    if (!view) { return; }
    var total = scroller.scrollWidth || 1;
    view.setAttribute('x', (base[0] * scroller.scrollLeft / total).toFixed(1));
    view.setAttribute('width', Math.max(base[0] * scroller.clientWidth / total, 4).toFixed(1));
  }
  if (mm) {
    var dragging = false;
    var seek = function (ev) {
      var r = mm.getBoundingClientRect();
      scroller.scrollLeft = (ev.clientX - r.left) / r.width * scroller.scrollWidth - scroller.clientWidth / 2;
    };
    mm.addEventListener('mousedown', function (ev) { dragging = true; seek(ev); ev.preventDefault(); });
    window.addEventListener('mousemove', function (ev) { if (dragging) { seek(ev); } });
    window.addEventListener('mouseup', function () { dragging = false; });
  }
  scroller.addEventListener('scroll', updateMinimap);

  /* zoom: the SVG keeps its viewBox, its size (and the lane labels' heights) scale */
  var level = document.querySelector('.zoom-level');
  var labels = document.querySelectorAll('.lane-label'), laneBox = document.querySelector('.lane-labels');
  var laneH = labels.length ? base[1] / labels.length : base[1];
  function setZoom(z) {
    z = Math.max(0.02, Math.min(3, z));
    var centre = (scroller.scrollLeft + scroller.clientWidth / 2) / (parseFloat(svg.getAttribute('width')) || 1);
    zoom = z;
    svg.setAttribute('width', (base[0] * z).toFixed(1));
    svg.setAttribute('height', (base[1] * z).toFixed(1));
    each(labels, function (l) { l.style.height = (laneH * z).toFixed(1) + 'px'; });
    if (laneBox) { laneBox.style.height = (base[1] * z).toFixed(1) + 'px'; }
    scroller.scrollLeft = centre * base[0] * z - scroller.clientWidth / 2;
    if (level) { level.textContent = Math.round(z * 100) + '%'; }
    updateMinimap();
  }
  each(document.querySelectorAll('[data-zoom]'), function (b) {
    b.addEventListener('click', function () {
      var how = b.getAttribute('data-zoom');
      setZoom(how === 'in' ? zoom * 1.25 : how === 'out' ? zoom / 1.25
              : how === 'fit' ? scroller.clientWidth / base[0] : 1);
    });
  });
  applyFolds('graph');

  /* the decisive step: centred in the graph and in the window on load, and on the button */
  var decisive = svg.querySelector('.step-node.decisive');
  function centre(node, smooth) {
    var r = node.getBoundingClientRect(), s = scroller.getBoundingClientRect();
    scroller.scrollLeft += (r.left + r.right) / 2 - (s.left + s.right) / 2;
    r = node.getBoundingClientRect();
    var nav = document.querySelector('nav'), top = nav ? nav.getBoundingClientRect().bottom : 0;
    if (r.top < top || r.bottom > window.innerHeight) {
      window.scrollBy({top: (r.top + r.bottom) / 2 - (top + window.innerHeight) / 2,
                       behavior: smooth ? 'smooth' : 'auto'});
    }
    node.classList.remove('arrived');
    void node.getBBox();
    node.classList.add('arrived');
  }
  var button = document.querySelector('.to-decisive');
  if (decisive) {
    var tl = document.querySelector('.tl-scroll');
    var bar = tl && tl.querySelector('.tl-bar[data-step-index="' + decisive.getAttribute('data-step-index') + '"]');
    if (bar) {  /* the timeline, too, opens on the decisive step's bar */
      var b = bar.getBoundingClientRect(), t = tl.getBoundingClientRect();
      tl.scrollLeft += (b.left + b.right) / 2 - (t.left + t.right) / 2;
    }
    if (button) { button.addEventListener('click', function () { centre(decisive, true); }); }
  }
  /* on load the page answers first (the verdict is at the top): the graph is fitted to the window when it is
     wider, no smaller than FIT_MIN, and scrolled sideways to the decisive step; the window itself never scrolls */
  var section = document.getElementById('graph');
  var above = section ? +section.getAttribute('data-fit-above') : 0;
  if (nodes.length > above && base[0] > scroller.clientWidth) {
    setZoom(Math.max(scroller.clientWidth / base[0], FIT_MIN));
  }
  if (decisive) {
    var r = decisive.getBoundingClientRect(), s = scroller.getBoundingClientRect();
    scroller.scrollLeft += (r.left + r.right) / 2 - (s.left + s.right) / 2;
    decisive.classList.add('arrived');
  }
  updateMinimap();
})();
"""
