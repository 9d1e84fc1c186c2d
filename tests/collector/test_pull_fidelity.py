"""Backends filled by OpenInference's instrumentors, not by causaltrace (issue 34 item 5): each example team of
test_import_fidelity.py, traced by OpenInference and causaltrace at once, has its OpenInference spans sent to the
REAL Phoenix (and, for two teams, the REAL Jaeger); ``pull --phoenix`` / ``pull --jaeger`` give back the run the same
spans give from a file, with the same fidelity against causaltrace's own run of the execution.
"""

from __future__ import annotations

import json
import re
import time

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")
pytest.importorskip("openinference.instrumentation.smolagents")
pytest.importorskip("openinference.instrumentation.autogen_agentchat")

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from _fidelity import TEAMS, fidelity, traced_both
from _otlp_send import post_otlp
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.phoenix import pull_from_phoenix
from test_import_fidelity import native_runs  # noqa: F401  (the fixture)
from test_pull_phoenix import phoenix, wait_for  # noqa: F401  (the fixture: a running Phoenix)


@pytest.mark.parametrize("team", list(TEAMS))
def test_a_team_pulled_from_phoenix_is_the_team_imported_from_a_file(team, phoenix, native_runs):  # noqa: F811
    native, spans = traced_both(TEAMS[team], native_runs)
    project = re.sub(r"[^a-z0-9]+", "-", team.lower())
    post_otlp(phoenix.otlp_http_traces_url, encode_spans(spans), {"openinference.project.name": project})
    wait_for(phoenix, project, len(spans))
    (pulled,) = pull_from_phoenix(phoenix.url, project).runs
    (from_file,) = load_otlp_json(json.dumps(MessageToDict(encode_spans(spans))))
    assert [(s.kind, s.agent, s.content, s.status, s.depends_on) for s in pulled.steps] == \
        [(s.kind, s.agent, s.content, s.status, s.depends_on) for s in from_file.steps]
    assert fidelity(native, pulled) == fidelity(native, from_file)


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory):
    from _jaeger import running_jaeger

    with running_jaeger(tmp_path_factory.mktemp("jaeger")) as instance:
        yield instance


@pytest.mark.parametrize("team", ["smolagents CodeAgent", "autogen Swarm"])
def test_a_team_pulled_from_jaeger_is_the_team_imported_from_a_file(team, jaeger, native_runs):  # noqa: F811
    """The same through ``pull --jaeger``: Jaeger's /api/v3 answer goes through the same readers."""
    from causaltrace.collector.jaeger import pull_from_jaeger

    native, spans = traced_both(TEAMS[team], native_runs)
    post_otlp(jaeger.otlp_http_traces_url, encode_spans(spans), {"service.name": "fidelity"})
    trace_id = f"{spans[0].context.trace_id:032x}"
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = jaeger.get_json(f"/api/v3/traces/{trace_id}")
            held = sum(len(ss.get("spans", [])) for rs in answer.get("result", {}).get("resourceSpans", [])
                       for ss in rs.get("scopeSpans", []))
        except Exception:  # 404 until the trace is indexed
            held = 0
        if held >= len(spans) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    (pulled,) = pull_from_jaeger(trace_id, jaeger.query_url)
    (from_file,) = load_otlp_json(json.dumps(MessageToDict(encode_spans(spans))))
    assert [(s.kind, s.agent, s.content, s.status, s.depends_on) for s in pulled.steps] == \
        [(s.kind, s.agent, s.content, s.status, s.depends_on) for s in from_file.steps]
    assert fidelity(native, pulled) == fidelity(native, from_file)
