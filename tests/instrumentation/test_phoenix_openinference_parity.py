"""Phoenix users see what OpenInference shows them, and more (issue 33 item 2), checked in a real Phoenix.

Both example teams (examples/autogen_team.py, the manager CodeAgent of examples/smolagents_agents.py with its
managed ToolCallingAgent) run ONCE on the real OpenAI client classes over ``causaltrace.testing.openai_wire``,
traced at the same time by causaltrace (store off, recording on: the default) and by OpenInference's own
instrumentor (openinference-instrumentation-autogen-agentchat / -smolagents, its own provider). Both span sets go
to one Phoenix project (one execution: one trace) and come back through Phoenix's REST API; per OpenInference span
kind, every attribute key OpenInference fills must be filled by causaltrace too (indices stripped), and every LLM
call's messages — roles, texts, tool-call names, arguments and ids — must agree (tests/_oi_parity.py says how
OpenInference's framework-specific shapes map to the OpenAI roles causaltrace writes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.common")
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from _example_spans import EXAMPLES, traced
from _oi_parity import conversation_mismatches, key_table, messages_of, missing_keys
from _otlp_send import post_otlp
from _phoenix import phoenix_python, running_phoenix
from causaltrace import semconv
from causaltrace.config import TraceConfig
from conftest import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collector"))
from _fidelity import TEAMS, traced_both


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    python = phoenix_python()
    require(python is not None, "Phoenix is not installed (run scripts/install_phoenix.sh)")
    with running_phoenix(python, tmp_path_factory.mktemp("phoenix")) as instance:
        yield instance


def _traced(framework: str) -> tuple[list, list]:
    """(OpenInference's spans, causaltrace's spans) of one execution of the framework's example team."""
    pytest.importorskip(f"openinference.instrumentation.{'autogen_agentchat' if framework == 'autogen' else framework}")
    with traced(framework, TraceConfig(store=False)) as (exporter, runs):
        _, oi = traced_both(TEAMS[EXAMPLES[framework]], lambda: runs)
    return oi, list(exporter.get_finished_spans())


def _in_phoenix(phoenix, project: str, spans: list, timeout: float = 90.0) -> list[dict]:
    post_otlp(phoenix.otlp_http_traces_url, encode_spans(spans), {semconv.PROJECT_NAME: project})
    deadline = time.monotonic() + timeout
    held: list[dict] = []
    while time.monotonic() < deadline:
        try:
            held = phoenix.spans(project)
        except OSError:  # the project does not exist yet
            held = []
        if len(held) >= len(spans):
            return held
        time.sleep(0.5)
    raise AssertionError(f"Phoenix holds {len(held)} of the {len(spans)} spans sent to {project!r}")


@pytest.mark.parametrize("framework", sorted(EXAMPLES))
def test_phoenix_shows_what_openinference_shows(phoenix, framework):
    oi, ct = _traced(framework)
    held = _in_phoenix(phoenix, f"parity-{framework}", oi + ct)
    ours = [s for s in held if semconv.RUN_ID in s["attributes"] or semconv.STEP_ID in s["attributes"]]
    theirs = [s for s in held if s not in ours]
    assert len(ours) == len(ct) and len(theirs) == len(oi)
    print(f"\n{EXAMPLES[framework]}: attribute keys per span kind (indices stripped), in Phoenix")
    print(f"  {'kind':6} {'OpenInference':>14} {'causaltrace':>12} {'OI fills, ct not':>17}")
    for kind, n_oi, n_ct, n_missing in key_table(theirs, ours):
        print(f"  {kind:6} {n_oi:>14} {n_ct:>12} {n_missing:>17}")
    assert missing_keys(theirs, ours) == {"LLM": [], "TOOL": [], "AGENT": [], "CHAIN": []}
    assert conversation_mismatches(theirs, ours) == []
    # recording on, and still the prompt: roles, and tool calls with the framework's real ids (not "call#0")
    llm = [s["attributes"] for s in ours if s["span_kind"] == "LLM"]
    assert llm and all(a[semconv.OI_INPUT_VALUE].startswith('{"messages"') for a in llm)
    assert all(semconv.STEP_INPUTS in a and "recording" in a[semconv.STEP_INPUTS] for a in llm)
    roles = {m["role"] for a in llm for m in messages_of(a, "llm.input_messages")}
    assert {"system", "user", "assistant", "tool"} <= roles, roles
    ids = [c[2] for a in llm for m in messages_of(a, "llm.output_messages") for c in m["tool_calls"]]
    assert ids and all(i and not i.startswith("call#") for i in ids)
    if framework == "autogen":  # the source agent of each message
        names = {a.get(f"llm.input_messages.{i}.message.name") for a in llm for i in range(20)} - {None}
        assert {"user", "planner"} <= names, names
    tools = [s["attributes"] for s in ours if s["span_kind"] == "TOOL" and semconv.RESULT_ID in s["attributes"]]
    assert tools and all(a.get(semconv.OI_OUTPUT_VALUE) is not None for a in tools)


def test_the_recording_event_comes_back_from_phoenix(phoenix):
    """The Recording rides on the root span's ``causaltrace.run.recording`` event (issue 33 item 4): Phoenix keeps
    it, and ``pull --phoenix`` gives the run back with its recorded calls (pull-then-repair needs them)."""
    pytest.importorskip("autogen_agentchat")
    import asyncio

    import causaltrace
    from _autogen import example
    from causaltrace.collector.phoenix import pull_from_phoenix

    async def run():
        async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
            await example.build().run(task=example.TASK)
        return handle

    with traced("autogen", TraceConfig(store=False)) as (exporter, _):
        handle = asyncio.run(run())
    spans = list(exporter.get_finished_spans())
    held = _in_phoenix(phoenix, "recording-event", spans)
    (root,) = [s for s in held if semconv.is_root_span_name(s["name"])]
    assert semconv.RECORDING_CHUNKS not in root["attributes"]  # the root's tags are the run's
    assert [e["name"] for e in root["events"]] == [semconv.RECORDING_EVENT]
    (back,) = pull_from_phoenix(phoenix.url, "recording-event").runs
    assert handle.run.recording is not None and back.recording == handle.run.recording
