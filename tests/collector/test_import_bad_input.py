"""Issue 23's "Bad input" list against the real CLI: a trace mixing conventions, spans with missing parents, a trace
with no agent at all, a large file, non-UTF-8, an unreachable Jaeger / Phoenix. Each is one clear line and exit 2, or
an import of what there is; either way, what the store already held does not change.

(A conversation with tool results but no calls, and a non-UTF-8 chat log, are in test_import_chat.py; a Phoenix trace
whose root span never reached Phoenix is in test_pull_phoenix.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from causaltrace.cli import main
from causaltrace.collector.chatlog_build import PROVENANCE_KEY
from causaltrace.collector.otlp import run_to_otlp
from causaltrace.collector.store import Store

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample_run.otlp.jsonl"  # a causaltrace run: turns, a tool call and its result


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def snapshot() -> dict[str, Any]:
    """Every stored run with its diagnoses, to compare before and after a refused input."""
    with Store() as store:
        return {row["run_id"]: (store.get_run(row["run_id"]), store.diagnoses(row["run_id"]))
                for row in store.list_runs()}


@pytest.fixture
def stored(capsys) -> dict[str, Any]:
    """The store holds the sample run, diagnosed."""
    code, out, err = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    assert code == 0, err
    assert run_cli(capsys, "diagnose", out.strip(), "--force")[0] == 0
    return snapshot()


def assert_one_line_and_unchanged(capsys, stored, argv: tuple[str, ...], *needles: str) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and all(n in err for n in needles), err
    assert snapshot() == stored
    return err


def attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
            for k, v in values.items()]


def span(trace: str, span_id: int, name: str, values: dict[str, Any], parent: int | None = None,
         start: int = 1, status: int = 0) -> dict[str, Any]:
    out = {"traceId": trace * 32, "spanId": f"{span_id:016x}", "name": name, "startTimeUnixNano": str(start),
           "endTimeUnixNano": str(start + 10_000 - span_id), "attributes": attrs(values), "status": {"code": status}}
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def write(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n")
    return path


def imported(capsys, path: Path):
    code, out, err = run_cli(capsys, "import", str(path), "--format", "auto")
    assert code == 0, err
    (run_id,) = out.split()
    with Store() as store:
        return store.get_run(run_id)


def shape(run) -> list[str]:
    by_id = {s.step_id: s for s in run.steps}
    return [f"{s.index} {s.kind} {s.agent}" + (f" ^{by_id[s.parent_step_id].index}" if s.parent_step_id else "")
            + "".join(f" {d.kind}:{by_id[d.step_id].index}" for d in s.depends_on) for s in run.steps]


# ------------------------------------------------------------------------------------------- mixed conventions


def test_a_trace_mixing_openinference_and_genai_spans_is_one_run_each_call_once(tmp_path, capsys, stored):
    """autogen-core's GenAI spans wrap (invoke_agent) or sit under (execute_tool) the instrumentor's spans of the same
    role and add nothing twice; a GenAI span no OpenInference span covers (a tool only autogen-core traced) is read
    into the same run; a plain HTTP span is no step."""
    spans = [
        span("d", 1, "RoundRobinGroupChat.run_stream", {"openinference.span.kind": "CHAIN", "input.value": "add 2 and 3"}),
        span("d", 2, "invoke_agent solver", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "solver"},
             parent=1, start=2),
        span("d", 3, "solver.on_messages_stream", {"openinference.span.kind": "AGENT", "graph.node.id": "solver"},
             parent=2, start=3),
        span("d", 4, "solver.add", {"openinference.span.kind": "TOOL", "tool.name": "add", "input.value": '{"a": 2}',
                                    "output.value": "6"}, parent=3, start=4),
        span("d", 5, "execute_tool add", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
                                          "gen_ai.tool.call.id": "c1"}, parent=4, start=5),
        span("d", 6, "execute_tool lookup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                                             "gen_ai.tool.call.id": "c2", "gen_ai.tool.call.result": "no entry"},
             parent=3, start=6, status=2),
        span("d", 7, "GET", {"http.request.method": "GET"}, parent=6, start=7),
    ]
    run = imported(capsys, write(tmp_path / "mixed.json", spans))
    assert run.metadata[PROVENANCE_KEY] == "openinference"
    assert shape(run) == ["0 task user", "1 agent_turn solver", "2 tool_call solver ^1", "3 tool_response solver ^1 "
                          "tool_result_of:2", "4 tool_call solver ^1", "5 tool_response solver ^1 tool_result_of:4"]
    add, lookup = run.step_at(3), run.step_at(5)
    assert (add.tool_name, add.content, add.status) == ("add", "6", "ok")
    assert (lookup.tool_name, lookup.call_id, lookup.content, lookup.status) == ("lookup", "c2", "no entry", "error")
    assert set(snapshot()) == {*stored, run.run_id}


def test_other_instrumentors_spans_in_a_causaltrace_trace_leave_its_run_as_it_is(tmp_path, capsys):
    """A trace holding causaltrace's spans is read from them alone: an OpenInference or GenAI instrumentor that ran
    beside causaltrace (its spans in the same trace) adds no step."""
    with Store() as store:
        code, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
        native = store.get_run(out.strip())
    request = run_to_otlp(native)
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    trace = spans[0]["traceId"]
    spans.append({**span("0", 901, "OpenAIChatCompletionClient.create", {"openinference.span.kind": "LLM",
                                                                           "llm.output_messages.0.message.content": "x"}),
                  "traceId": trace, "parentSpanId": spans[0]["spanId"]})
    spans.append({**span("0", 902, "execute_tool add", {"gen_ai.operation.name": "execute_tool",
                                                        "gen_ai.tool.name": "add"}), "traceId": trace})
    path = tmp_path / "beside.json"
    path.write_text(json.dumps(request))
    assert imported(capsys, path) == native


# --------------------------------------------------------------------------------------------- missing parents


def _sample_without(kind: str) -> str:
    lines = []
    for line in SAMPLE.read_text().splitlines():
        doc = json.loads(line)
        for resource in doc["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = [s for s in scope["spans"] if {"key": "causaltrace.step.kind",
                                                                 "value": {"stringValue": kind}} not in s["attributes"]]
        lines.append(json.dumps(doc))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("dropped", "needle"), [("agent_turn", "parent_step_id"), ("tool_call", "depends_on")])
def test_causaltrace_spans_whose_parent_or_dependency_is_missing_are_one_line(tmp_path, capsys, stored, dropped,
                                                                              needle):
    """Part of a causaltrace trace (a span lost on the way): the steps cannot form the run, said in one line naming
    the file, exit 2 (it was an internal error, exit 1) — and a good file beside it is not stored either."""
    bad = tmp_path / f"without-{dropped}.jsonl"
    bad.write_text(_sample_without(dropped))
    good = write(tmp_path / "good.json", [span("a", 1, "ChatCompletion", {"openinference.span.kind": "LLM",
                                                                          "llm.output_messages.0.message.content": "5"})])
    for fmt in ("otlp-json", "auto"):
        assert_one_line_and_unchanged(capsys, stored, ("import", str(good), str(bad), "--format", fmt),
                                      str(bad), "the spans do not form a run", needle)


def test_foreign_spans_whose_parents_are_missing_still_import(tmp_path, capsys, stored):
    """GenAI spans cut out of a bigger trace (their parents elsewhere): the tool call is recovered from the span."""
    spans = [span("c", 1, "execute_tool add", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
                                               "gen_ai.tool.call.id": "x1", "gen_ai.tool.call.arguments": '{"a": 1}',
                                               "gen_ai.tool.call.result": "2"}, parent=99),
             span("c", 2, "chat", {"gen_ai.operation.name": "chat", "gen_ai.agent.name": "solver"}, parent=98, start=2)]
    run = imported(capsys, write(tmp_path / "orphans.json", spans))
    assert shape(run) == ["0 tool_call agent", "1 tool_response agent tool_result_of:0", "2 llm_response solver"]
    assert run.step_at(0).metadata["recovered_from"] == "tool span" and run.step_at(1).content == "2"


# --------------------------------------------------------------------------------------------- no agent at all


def test_a_trace_with_no_agent_imports_and_is_diagnosed(tmp_path, capsys, stored):
    """One LLM call and nothing else: a run of an unnamed agent that ``diagnose`` still answers."""
    spans = [span("b", 1, "ChatCompletion", {"openinference.span.kind": "LLM",
                                             "llm.input_messages.0.message.role": "user",
                                             "llm.input_messages.0.message.content": "What is 2 + 2?",
                                             "llm.output_messages.0.message.role": "assistant",
                                             "llm.output_messages.0.message.content": "5"})]
    run = imported(capsys, write(tmp_path / "no-agent.json", spans))
    assert shape(run) == ["0 llm_response agent", "1 message agent produced_by:0"]
    code, out, err = run_cli(capsys, "diagnose", run.run_id, "--json")
    assert code == 0 and json.loads(out)["decisive_step_index"] is not None, err


def test_a_trace_with_no_agent_llm_or_tool_span_is_one_line(tmp_path, capsys, stored):
    path = write(tmp_path / "chain-only.json", [span("f", 1, "pipeline", {"openinference.span.kind": "CHAIN",
                                                                         "input.value": "hello"})])
    assert_one_line_and_unchanged(capsys, stored, ("import", str(path), "--format", "auto"),
                                  "read 1 span in 1 trace, but none forms a run", "OpenInference")


# ------------------------------------------------------------------------------------------ size, text encoding


def test_a_file_of_many_spans_of_no_known_convention_is_one_line_with_the_count(tmp_path, capsys, stored):
    """20,000 spans (issue 23 says 100k: benchmarks/bench_fleet.py --big-trace times that size) in 20 traces."""
    spans = [{"traceId": f"{i // 1000 + 1:032x}", "spanId": f"{i + 1:016x}", "name": "GET", "attributes": []}
             for i in range(20_000)]
    path = write(tmp_path / "http.json", spans)
    assert_one_line_and_unchanged(capsys, stored, ("import", str(path), "--format", "auto"),
                                  "read 20000 spans in 20 traces, but none forms a run")


def test_a_non_utf8_trace_file_is_one_line(tmp_path, capsys, stored):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(SAMPLE.read_text().replace("user", "usér").encode("latin-1"))
    for fmt in ("otlp-json", "auto"):
        assert_one_line_and_unchanged(capsys, stored, ("import", str(path), "--format", fmt), str(path), "UTF-8")


# ------------------------------------------------------------------------------------------ unreachable servers


@pytest.mark.parametrize(("argv", "needle"), [
    (("pull", "0af7651916cd43dd8448eb211c80319c", "--jaeger", "http://127.0.0.1:9"), "cannot reach Jaeger at"),
    (("pull", "--jaeger", "http://127.0.0.1:9", "--service", "s"), "cannot reach Jaeger at"),
    (("pull", "--phoenix", "http://127.0.0.1:9", "--project", "p"), "cannot reach Phoenix at http://127.0.0.1:9"),
])
def test_an_unreachable_server_is_one_line_and_changes_nothing(capsys, stored, argv, needle):
    assert_one_line_and_unchanged(capsys, stored, (*argv, "--timeout", "2"), needle)
