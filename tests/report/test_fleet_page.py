"""The report's fleet page (issue 23 item 3): one offline HTML file with the counts and a table per grouping, every
value from the store escaped, the same stats giving the same bytes."""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser

from causaltrace.collector.fleet_stats import Bucket, FleetStats
from causaltrace.report.fleet import render_fleet_html, write_fleet_report


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _stats() -> FleetStats:
    evil = '<script>alert("x")</script>'
    return FleetStats(since=datetime(2026, 12, 1, 20, tzinfo=UTC), runs=12, failed=9, diagnosed=8, diagnosis_failed=1,
                      undiagnosed=2,
                      by_agent=[Bucket("solver", 6, 0.75, ("r1", "r2", "r3")), Bucket(evil, 2, 0.25, ("r<9>",))],
                      by_step_kind=[Bucket("tool_call", 8, 1.0, ("r1",))],
                      by_category=[Bucket("FM-1.1 Disobey Task Specification", 8, 1.0, ("r1",))],
                      by_framework=[])


def test_the_fleet_page_shows_counts_tables_and_escapes_the_store(tmp_path):
    html = render_fleet_html(_stats())
    parser = _Text()
    parser.feed(html)
    text = " ".join(" ".join(parser.text).split())
    assert "script" not in parser.tags and "<script>" not in html  # an agent name is data, never markup
    assert '<script>alert("x")</script>' in text and "r<9>" in text
    for heading in ("Failures by agent", "Failures by decisive step kind", "Failures by error category",
                    "Failures by framework"):
        assert heading in text
    assert "12 runs" in text and "9 failed" in text and "8 diagnosed" in text and "2 failed, not yet diagnosed" in text
    assert "solver 6 75.0%" in text and "FM-1.1 Disobey Task Specification 8 100.0%" in text
    assert "no diagnosed failures" in text  # the empty framework table says so
    assert "causaltrace diagnose --all" in text  # how to fill in the two undiagnosed runs
    assert 'style="width:75.0%"' in html and "http" not in html.replace("http-equiv", "")  # offline
    path = write_fleet_report(_stats(), tmp_path / "out" / "fleet.html")
    assert path.read_text(encoding="utf-8") == html == render_fleet_html(_stats())  # deterministic
