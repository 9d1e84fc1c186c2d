"""Phoenix's own exports of a trace (issue 34 item 1), produced by the REAL Phoenix from its own venv: the REST
answers of ``/v1/projects/{p}/spans`` and ``/spans/otlpv1``, and ``phoenix.client.Client(...).spans
.get_spans_dataframe(project_identifier=p)`` written with ``to_json(orient="records")`` with and without
``lines=True`` — each imports as the run the trace's OTLP JSON gives.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from _otlp_send import post_otlp, request_of
from _phoenix import phoenix_python, running_phoenix
from causaltrace.cli import main
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.span_links import Linker
from causaltrace.collector.span_shapes import load_spans
from conftest import require

OTLP = Path(__file__).resolve().parents[1] / "fixtures" / "spans" / "failed_agent.otlp.json"
PROJECT = "span-shapes"
DATAFRAME = """
import sys
from phoenix.client import Client
frame = Client(base_url=sys.argv[1]).spans.get_spans_dataframe(project_identifier=sys.argv[2])
frame.to_json(sys.argv[3], orient="records")
frame.to_json(sys.argv[4], orient="records", lines=True)
"""


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """A running Phoenix holding the trace of failed_agent.otlp.json in project ``span-shapes``."""
    python = phoenix_python()
    require(python is not None, "Phoenix is not installed (run scripts/install_phoenix.sh)")
    with running_phoenix(python, tmp_path_factory.mktemp("phoenix")) as phoenix:
        post_otlp(phoenix.otlp_http_traces_url, request_of(json.loads(OTLP.read_text())),
                  {"openinference.project.name": PROJECT})
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if len(phoenix.spans(PROJECT)) >= 3:
                    break
            except OSError:  # the project does not exist yet
                pass
            time.sleep(0.5)
        yield phoenix


@pytest.fixture(scope="module")
def exports(phoenix, tmp_path_factory):
    """What Phoenix answers for the trace, one file per shape (the dataframe written by Phoenix's own Python)."""
    folder = tmp_path_factory.mktemp("phoenix-exports")
    query = urllib.parse.urlencode({"limit": "1000"})
    for name, path in (("spans.json", f"/v1/projects/{PROJECT}/spans?{query}"),
                       ("otlpv1.json", f"/v1/projects/{PROJECT}/spans/otlpv1?{query}")):
        (folder / name).write_text(json.dumps(phoenix.get_json(path)))
    done = subprocess.run([str(phoenix_python()), "-c", DATAFRAME, phoenix.url, PROJECT, str(folder / "frame.json"),
                           str(folder / "frame.jsonl")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


@pytest.mark.parametrize("name", ["spans.json", "otlpv1.json", "frame.json", "frame.jsonl"])
def test_phoenix_exports_import_as_the_otlp_json_run(exports, name, capsys):
    (expected,) = load_otlp_json(OTLP)
    assert load_spans(exports / name) == [expected]
    assert main(["import", str(exports / name), "--format", "auto"]) == 0
    assert capsys.readouterr().out.split() == [expected.run_id]


def test_links_lead_to_the_span_in_phoenix(phoenix, monkeypatch):
    """``phoenix:URL`` is Phoenix's redirect from the OTel span id (it answers with the span's page in its project
    and trace); a template's {project_id} is looked up once through /v1/projects."""
    (run,) = load_otlp_json(OTLP)
    llm = next(s for s in run.steps if s.kind == "llm_response")
    url = Linker.parse(f"phoenix:{phoenix.url}").link(llm.source)
    assert url == f"{phoenix.url}/redirects/spans/{llm.source.span_id}"
    with urllib.request.urlopen(url, timeout=30) as page:  # the UI's redirect page…
        assert page.status == 200 and "html" in page.headers.get("content-type", "")
    query = "{ getSpanByOtelId(spanId: \"" + llm.source.span_id + "\") { spanId trace { traceId } } }"
    found = phoenix.graphql(query)
    span = found["data"]["getSpanByOtelId"]  # …resolves the OTel span id through this query
    assert span == {"spanId": llm.source.span_id, "trace": {"traceId": llm.source.trace_id}}
    monkeypatch.setenv("CAUSALTRACE_PHOENIX_URL", phoenix.url)
    monkeypatch.setenv("CAUSALTRACE_PROJECT", PROJECT)
    (project,) = [p for p in phoenix.get_json("/v1/projects")["data"] if p["name"] == PROJECT]
    linker = Linker.parse(phoenix.url + "/projects/{project_id}/traces/{trace_id}")
    assert linker.link(llm.source) == f"{phoenix.url}/projects/{project['id']}/traces/{llm.source.trace_id}"

