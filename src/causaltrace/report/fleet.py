"""The report's fleet page: what fails most across many runs (issue 23 item 3: ``causaltrace report --fleet --html
OUT [--since …]``).

Usage::

    from causaltrace.collector.fleet_stats import fleet_stats
    from causaltrace.report.fleet import write_fleet_report

    with Store() as store:
        write_fleet_report(fleet_stats(store, since=since), "fleet.html")

One self-contained, offline HTML file like the run report (inline CSS, no script, nothing from the network): a
header with the counts (runs, failed, diagnosed, not yet diagnosed), then one table per grouping of
:data:`causaltrace.collector.fleet_stats.GROUPS` — by agent, decisive step kind, error category, framework — each
row with its count, a bar of its share and up to three example run ids, each a link to that run's own report
(``<run id>.html`` beside the page: :func:`report_file_name`; ``causaltrace report --fleet`` writes them), its
verdict and source in the link's title; then the example runs' verdicts (issue 33 item 7: every surface states the
run's verdict, ``Store.verdict``, with its source). Everything taken from the store is HTML-escaped; the same stats
give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from pathlib import Path

from causaltrace.collector.fleet_stats import GROUPS, Bucket, FleetStats

__all__ = ["example_run_ids", "render_fleet_html", "report_file_name", "write_fleet_report"]

#: a run's verdict on the page: (headline, source), as :mod:`causaltrace.collector.verdict_text` words them
Verdicts = Mapping[str, tuple[str, str]]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#1f2933;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#52606d;margin:0 0 16px}
.counts{display:flex;gap:12px;flex-wrap:wrap}
.count{border:1px solid #d9e2ec;border-radius:8px;padding:8px 14px;min-width:120px}
.count b{display:block;font-size:20px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e4e7eb;vertical-align:top}
th{font-weight:600;color:#52606d;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
td.n{text-align:right;width:70px;font-variant-numeric:tabular-nums}
td.bar{width:260px}
.track{background:#f0f4f8;border-radius:3px;height:12px;position:relative}
.fill{background:#f76707;border-radius:3px;height:12px}
.pct{font-size:12px;color:#52606d}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f0f4f8;padding:1px 4px;border-radius:3px}
.empty{color:#7b8794;font-style:italic}
a code{color:#1d4ed8}.src{color:#52606d;font-size:12px}
"""


def report_file_name(run_id: str) -> str:
    """The file a run's report has beside the fleet page (characters other than letters, digits, ``.-_`` become
    ``_``, so an imported id never names a path)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", run_id).lstrip(".") + ".html"


def example_run_ids(stats: FleetStats) -> list[str]:
    """Every run id the page links to, in the page's order, once each."""
    seen: dict[str, None] = {}
    for name, _ in GROUPS:
        for bucket in getattr(stats, name):
            seen.update(dict.fromkeys(bucket.examples))
    return list(seen)


def _count(label: str, value: int) -> str:
    return f'<div class="count"><b>{value}</b>{escape(label)}</div>'


def _example(run_id: str, verdicts: Verdicts) -> str:
    headline, source = verdicts.get(run_id, ("", ""))
    title = f"{headline} — {source}" if headline else f"causaltrace report {run_id} --html {report_file_name(run_id)}"
    return (f'<a href="{escape(report_file_name(run_id))}" title="{escape(title)}"><code>{escape(run_id)}</code>'
            "</a>")


def _row(bucket: Bucket, verdicts: Verdicts) -> str:
    width = max(0.0, min(100.0, bucket.share * 100))
    examples = " ".join(_example(r, verdicts) for r in bucket.examples)
    return (f"<tr><td>{escape(bucket.key)}</td><td class=\"n\">{bucket.count}</td>"
            f'<td class="bar"><div class="track"><div class="fill" style="width:{width:.1f}%"></div></div>'
            f'<span class="pct">{width:.1f}%</span></td><td>{examples}</td></tr>')


def _table(heading: str, buckets: list[Bucket], verdicts: Verdicts) -> str:
    if not buckets:
        body = '<tr><td colspan="4" class="empty">no diagnosed failures</td></tr>'
    else:
        body = "".join(_row(b, verdicts) for b in buckets)
    return (f"<section><h2>Failures by {escape(heading)}</h2><table><thead><tr><th>{escape(heading)}</th>"
            f"<th>runs</th><th>share of diagnosed</th><th>examples</th></tr></thead><tbody>{body}</tbody></table>"
            "</section>")


def _verdicts_table(stats: FleetStats, verdicts: Verdicts) -> str:
    rows = "".join(f"<tr><td>{_example(r, verdicts)}</td><td>{escape(verdicts[r][0])}<div class=\"src\">"
                   f"{escape(verdicts[r][1])}</div></td></tr>" for r in example_run_ids(stats) if r in verdicts)
    if not rows:
        return ""
    return ("<section><h2>The example runs' verdicts</h2><table><thead><tr><th>run</th><th>verdict (and what it "
            f"rests on)</th></tr></thead><tbody>{rows}</tbody></table></section>")


def render_fleet_html(stats: FleetStats, *, title: str = "causaltrace — fleet", verdicts: Verdicts | None = None) -> str:
    """The fleet page of ``stats`` as one HTML document (module docstring); ``verdicts``: each example run's verdict
    (headline, source)."""
    verdicts = verdicts or {}
    since = f"runs started since {stats.since.isoformat()}" if stats.since else "every stored run"
    counts = "".join([_count("runs", stats.runs), _count("failed", stats.failed), _count("diagnosed", stats.diagnosed),
                      _count("diagnosis failed or uncertain", stats.diagnosis_failed),
                      _count("failed, not yet diagnosed", stats.undiagnosed)])
    tables = "".join(_table(heading, getattr(stats, name), verdicts) for name, heading in GROUPS)
    tables += _verdicts_table(stats, verdicts)
    hint = ""
    if stats.undiagnosed:
        hint = (f'<p class="sub">{stats.undiagnosed} failed run{"s" if stats.undiagnosed != 1 else ""} without a '
                "diagnosis: <code>causaltrace diagnose --all --failed --jobs 2</code></p>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1><p class=\"sub\">{escape(since)}</p>"
            f"<div class=\"counts\">{counts}</div>{hint}{tables}</body></html>\n")


def write_fleet_report(stats: FleetStats, path: str | Path, *, title: str = "causaltrace — fleet",
                       verdicts: Verdicts | None = None) -> Path:
    """Write :func:`render_fleet_html` to ``path`` (UTF-8, parent folders created) and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_fleet_html(stats, title=title, verdicts=verdicts), encoding="utf-8")
    return out
