"""Every imported step keeps where it came from (issue 34 item 3): ``Step.source`` (trace id, span id, start, end,
span kind) from the span it was read from, exported again as ``causaltrace.source.*`` and read back, shown by
``show`` (with ``--link``: Jaeger, Phoenix or a template) and in ``diagnose --json``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from causaltrace import semconv
from causaltrace.cli import main
from causaltrace.collector.otlp import load_otlp_json, run_to_otlp
from causaltrace.collector.span_links import Linker
from causaltrace.config import BackendSettings
from causaltrace.exceptions import UserError

OTLP = Path(__file__).resolve().parents[1] / "fixtures" / "spans" / "failed_agent.otlp.json"
TRACE, AGENT, LLM, TOOL = "ab" * 16, "a1" * 8, "b2" * 8, "c3" * 8


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_each_step_keeps_its_span_and_the_source_travels_through_export():
    (run,) = load_otlp_json(OTLP)
    sources = {s.kind: s.source for s in run.steps}
    assert {k: (v.span_id, v.span_kind) for k, v in sources.items()} == {
        "task": (AGENT, "AGENT"), "agent_turn": (AGENT, "AGENT"), "llm_response": (LLM, "LLM"),
        "message": (LLM, "LLM"), "tool_call": (LLM, "LLM"), "tool_response": (TOOL, "TOOL")}
    llm = sources["llm_response"]
    assert llm.trace_id == TRACE and llm.start_time == datetime(2024, 12, 6, 15, 46, 41, tzinfo=UTC)
    assert (llm.end_time - llm.start_time).total_seconds() == 1
    assert all(s.span_id is None for s in run.steps)  # Step.span_id stays the id causaltrace exports
    document = run_to_otlp(run)
    spans = [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    keys = {a["key"] for s in spans for a in s["attributes"]}
    assert {semconv.SOURCE_TRACE_ID, semconv.SOURCE_SPAN_ID, semconv.SOURCE_SPAN_KIND,
            semconv.SOURCE_START_TIME, semconv.SOURCE_END_TIME} <= keys
    (back,) = load_otlp_json(json.dumps(document))
    assert [s.source for s in back.steps] == [s.source for s in run.steps]


def test_show_and_diagnose_name_each_steps_span_and_link_it(capsys):
    code, out, err = run_cli(capsys, "import", str(OTLP), "--format", "auto")
    assert code == 0, err
    (run_id,) = out.split()
    code, out, err = run_cli(capsys, "show", run_id, "--link", "jaeger:http://jaeger.local:16686/")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("#2 "))
    assert f"span {LLM} LLM" in line and f"http://jaeger.local:16686/trace/{TRACE}?uiFind={LLM}" in line
    code, out, err = run_cli(capsys, "show", run_id, "--json", "--link", "https://ui.example/t/{trace_id}/s/{span_id}")
    steps = json.loads(out)["steps"]
    assert steps[5]["source"]["span_id"] == TOOL and steps[5]["link"] == f"https://ui.example/t/{TRACE}/s/{TOOL}"
    code, out, err = run_cli(capsys, "diagnose", run_id, "--json", "--link", "phoenix:http://phoenix.local:6006")
    assert code == 0, err
    diagnosis = json.loads(out)
    blamed = diagnosis["candidates"][0]["step_id"]
    assert diagnosis["sources"][blamed]["link"].startswith("http://phoenix.local:6006/redirects/spans/")


@pytest.mark.parametrize("spec", ["jaeger:localhost", "https://x/{nope}", "no fields at all", "https://x/{"])
def test_a_bad_link_spec_is_one_line(spec, capsys):
    with pytest.raises(UserError, match="--link"):
        Linker.parse(spec)


def test_a_project_id_template_needs_the_phoenix_settings():
    (run,) = load_otlp_json(OTLP)
    linker = Linker.parse("http://p/projects/{project_id}/traces/{trace_id}", BackendSettings())
    with pytest.raises(UserError, match="CAUSALTRACE_PHOENIX_URL and CAUSALTRACE_PROJECT"):
        linker.link(run.steps[0].source)
    assert BackendSettings.from_env({"CAUSALTRACE_PHOENIX_URL": " http://p ", "PHOENIX_API_KEY": "k"}) == \
        BackendSettings(phoenix_url="http://p", phoenix_api_key="k", project="causaltrace")
    assert BackendSettings.from_env({"OTEL_SERVICE_NAME": "nightly"}).project == "nightly"  # as the exporter


def test_the_report_names_each_imported_steps_span(tmp_path, capsys):
    code, out, err = run_cli(capsys, "import", str(OTLP), "--format", "auto")
    assert code == 0, err
    page = tmp_path / "report.html"
    code, _, err = run_cli(capsys, "report", out.split()[0], "--html", str(page))
    assert code == 0, err
    html = page.read_text()
    assert f'from span <span class="mono">{TOOL}</span> (TOOL) of trace <span class="mono">{TRACE}</span>' in html
