"""The OTLP/JSON codec's fast paths agree with google.protobuf.json_format (issue 24 item 1 and "Measured"), and
the import reads JSON lines the way files hold them (U+2028 inside a string, one line at a time).

The codec writes and reads the common attribute values itself (see collector/otlp.py and otlp_decode.py,
"Speed"); these tests hold it to the library: every value it writes is what ``MessageToDict`` writes for the same
AnyValue, every value it reads is what ``ParseDict`` reads (and whatever ``ParseDict`` refuses it leaves to
``ParseDict``), and a whole export is exactly what json_format prints for the request it parses back to.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from _builders import RunBuilder
from causaltrace import semconv
from causaltrace.collector.otlp import _any_value, _value_json, load_otlp_json, run_to_otlp, runs_from_otlp
from causaltrace.collector.otlp_decode import NOT_FAST, _fast_value, _value, documents_of_file
from causaltrace.exceptions import InvalidInputError
from test_importers import rich_run

# ------------------------------------------------------------------------------------------------ export values

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_SCALARS = st.one_of(
    st.text(), st.booleans(), _INT64, st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.just(""), st.just(-0.0), st.just(2**63), st.just(-(2**63) - 1),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=12,
)


def _library_json(value: Any) -> Any:
    try:
        return json_format.MessageToDict(_any_value(value), use_integers_for_enums=True)
    except (ValueError, TypeError) as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_a_value_is_written_as_message_to_dict_writes_it(value: Any) -> None:
    try:
        written = _value_json(value)
    except (ValueError, TypeError) as exc:
        written = type(exc)
    expected = _library_json(value)
    assert json.dumps(written, sort_keys=True, default=repr) == json.dumps(expected, sort_keys=True, default=repr)


# ------------------------------------------------------------------------------------------------ import values

_KEYS = ["stringValue", "string_value", "boolValue", "bool_value", "intValue", "int_value", "doubleValue",
         "double_value", "bytesValue", "weird"]
_RAW = st.one_of(
    st.text(max_size=8), st.booleans(), st.integers(), st.integers(min_value=-(2**64), max_value=2**64).map(str),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["1.5", "1e3", " 7", "+7", "007", "-0", "",
                                                                     "NaN", "Infinity", "1_000", "١٢", "0x1f"]),
    st.none(),
)
_EXACT = st.one_of(  # the shapes encoders write, which the fast path takes
    st.builds(lambda v: {"stringValue": v}, st.text()), st.builds(lambda v: {"boolValue": v}, st.booleans()),
    st.builds(lambda v: {"intValue": str(v)}, _INT64), st.builds(lambda v: {"intValue": v}, _INT64),
    st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False, allow_infinity=False)),
)
_SCALAR_JSON = st.one_of(
    _EXACT,
    st.builds(lambda k, v: {k: v}, st.sampled_from(_KEYS), _RAW),
    st.builds(lambda k, v, k2, v2: {k: v, k2: v2}, st.sampled_from(_KEYS), _RAW, st.sampled_from(_KEYS), _RAW),
    st.just({}),
)
_ANY_JSON = st.one_of(
    _SCALAR_JSON,
    st.builds(lambda items: {"arrayValue": {"values": items}}, st.lists(_SCALAR_JSON, max_size=4)),
    st.builds(lambda items: {"array_value": {"values": items}}, st.lists(_SCALAR_JSON, max_size=2)),
    st.just({"arrayValue": {}}),
    st.just({"arrayValue": {"values": [{"arrayValue": {"values": [{"intValue": "1"}]}}]}}),
)


@settings(max_examples=600, deadline=None)
@given(_ANY_JSON)
def test_a_value_read_fast_is_what_parse_dict_reads(raw: dict[str, Any]) -> None:
    fast = _fast_value(raw)
    if fast is NOT_FAST:
        return  # json_format decides (tested through the importers' malformed-field cases)
    parsed = _value(json_format.ParseDict(raw, AnyValue()))  # must not raise: the fast path read it
    assert type(fast) is type(parsed)
    assert fast == parsed or (isinstance(fast, float) and math.isnan(fast) and math.isnan(parsed))
    if isinstance(fast, list):
        assert [type(v) for v in fast] == [type(v) for v in parsed]


def test_the_common_shapes_take_the_fast_path() -> None:
    assert _fast_value({"stringValue": "a"}) == "a"
    assert _fast_value({"intValue": "-12"}) == -12 and _fast_value({"intValue": 12}) == 12
    assert _fast_value({"arrayValue": {"values": [{"stringValue": "a"}, {"boolValue": True}]}}) == ["a", True]
    for odd in ({"intValue": "1.5"}, {"intValue": True}, {"doubleValue": 1}, {"doubleValue": "NaN"},
                {"intValue": str(2**63)}, {"stringValue": "a", "intValue": "1"}, {}, {"kvlistValue": {}}):
        assert _fast_value(odd) is NOT_FAST, odd


# -------------------------------------------------------------------------------------------------- whole export


def _b64(node: Any) -> Any:
    """OTLP/JSON's hex ids as protobuf's JSON mapping writes bytes (base64), for the library to parse."""
    if isinstance(node, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
                else _b64(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_b64(v) for v in node]
    return node


def _hex_and_times(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_and_times(v)
               for k, v in node.items()}
        if "spanId" in out and "name" in out:  # a span: OTLP/JSON writes its times even when 0
            out.setdefault("startTimeUnixNano", "0")
            out.setdefault("endTimeUnixNano", "0")
        return out
    if isinstance(node, list):
        return [_hex_and_times(v) for v in node]
    return node


def _odd_values(attrs: Any) -> dict[str, Any]:
    """A policy adding values the fast path leaves to json_format: a map, nested and empty lists, NaN, -inf."""
    return {**semconv.openinference_attributes(dict(attrs)), "x.map": {"a": 1, "b": [True, 2.5]},
            "x.nested": [[1], "a"], "x.empty": [], "x.nan": float("nan"), "x.inf": -math.inf, "x.mixed": [1, "a"]}


@pytest.mark.parametrize(("run", "policy"), [(rich_run(), None), (RunBuilder("tiny").build(), None),
                                             (rich_run(), _odd_values)], ids=["rich", "tiny", "odd-values"])
def test_the_export_is_what_json_format_prints_for_its_own_request(run: Any, policy: Any) -> None:
    document = run_to_otlp(run, attribute_policy=policy)
    request = json_format.ParseDict(_b64(document), ExportTraceServiceRequest())
    printed = _hex_and_times(json_format.MessageToDict(request, use_integers_for_enums=True))
    assert json.dumps(document, sort_keys=True) == json.dumps(printed, sort_keys=True)
    assert runs_from_otlp(json.loads(json.dumps(document))) == [run]


# ------------------------------------------------------------------------------------------------------ files


def test_json_lines_with_u2028_inside_a_string_read_back(tmp_path: Path) -> None:
    """``json.dumps(ensure_ascii=False)`` (what ``causaltrace export`` writes) leaves U+2028 / U+0085 raw; a file
    or text of several such lines still reads line by line (str.splitlines would cut the second one)."""
    plain = RunBuilder("plain").task("add 2 and 3").build()
    odd = RunBuilder("odd").task("one\u2028two\x85three\u2029").build()
    text = "".join(json.dumps(run_to_otlp(r), ensure_ascii=False) + "\n" for r in (plain, odd))
    assert load_otlp_json(text) == [plain, odd]
    path = tmp_path / "runs.jsonl"
    path.write_text(text, encoding="utf-8")
    assert load_otlp_json(path) == [plain, odd]


def test_a_file_of_json_lines_is_read_one_line_at_a_time(tmp_path: Path) -> None:
    """The documents of a JSON-lines file come one by one: the first is given while a byte that is not UTF-8
    sits a megabyte further on, and that byte is then one line naming the file."""
    run = RunBuilder("lazy").task("t").build()
    line = json.dumps(run_to_otlp(run)) + "\n"
    path = tmp_path / "big.jsonl"
    path.write_bytes(line.encode() + b" " * 1_000_000 + b"\n" + b'{"resourceSpans": "\xff"}\n')
    documents = documents_of_file(path)
    where, first = next(documents)
    assert where == "line 1" and runs_from_otlp(first) == [run]
    with pytest.raises(InvalidInputError) as info:
        load_otlp_json(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text") and "\n" not in str(info.value)


def test_a_pretty_printed_file_and_a_cut_last_line(tmp_path: Path) -> None:
    run = RunBuilder("pretty").task("t").build()
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(run_to_otlp(run), indent=2))
    assert load_otlp_json(pretty) == [run]
    cut = tmp_path / "cut.jsonl"
    line = json.dumps(run_to_otlp(run))
    cut.write_text(line + "\n" + line[: len(line) // 2])  # a file exporter killed mid-write
    with pytest.raises(InvalidInputError, match=rf"^{cut}: line 2: not valid JSON"):
        load_otlp_json(cut)


# ------------------------------------------------------------------------------------------------------ enums


def _last_span_without_status_attribute(run: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    document = run_to_otlp(run)
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][-1]
    span["attributes"] = [a for a in span["attributes"] if a["key"] != semconv.STEP_STATUS]
    return document, span


@pytest.mark.parametrize(("code", "status"), [(2, "error"), ("STATUS_CODE_ERROR", "error"), ("ERROR", "error"),
                                              (1, "ok"), ("OK", "ok"), ("STATUS_CODE_UNSET", "unset"),
                                              (7, "unset")])
def test_a_status_code_as_integer_or_name(code: Any, status: str) -> None:
    run = RunBuilder("enums").task("t").llm("solver", "5").build()
    document, span = _last_span_without_status_attribute(run)
    span["status"] = {"code": code, "message": "boom"}
    span["kind"] = "SPAN_KIND_CLIENT"
    (back,) = runs_from_otlp(document)
    assert back.steps[-1].status == status


@pytest.mark.parametrize(("field", "value", "words"), [
    ("kind", "SPAN_KIND_BOGUS", "kind 'SPAN_KIND_BOGUS' is not one of SPAN_KIND_UNSPECIFIED"),
    ("status", {"code": "BROKEN"}, "status.code 'BROKEN' is not one of STATUS_CODE_UNSET"),
])
def test_an_unknown_enum_name_is_one_line_naming_the_span(field: str, value: Any, words: str) -> None:
    run = RunBuilder("enums").task("t").llm("solver", "5").build()
    document, span = _last_span_without_status_attribute(run)
    span[field] = value
    with pytest.raises(InvalidInputError) as info:
        runs_from_otlp(document)
    message = str(info.value)
    assert message.startswith(f"document 1: span {span['spanId']} (") and words in message and "\n" not in message


def test_many_concatenated_documents_name_their_lines() -> None:
    """Pretty-printed documents one after another (not JSON lines): each is read, and a bad one names its line
    (counted from the document before it: linear in the number of documents)."""
    runs = [RunBuilder(f"cat-{i}").task(f"t{i}").build() for i in range(300)]
    text = "".join(json.dumps(run_to_otlp(r), indent=1) + "\n" for r in runs)
    assert load_otlp_json(text) == runs
    lines = text.count("\n")
    with pytest.raises(InvalidInputError, match=rf"^line {lines + 2}: not valid JSON"):
        load_otlp_json(text + "\n" + '{"resourceSpans": [}')


def test_importing_a_cut_file_is_one_line_exit_2_and_stores_nothing(capsys, tmp_path: Path) -> None:
    """``causaltrace import`` of a JSON-lines file whose last line a killed exporter cut: one line naming the
    file and the line, exit 2, and the good runs before it are not half-stored."""
    from causaltrace.cli import main

    lines = [json.dumps(run_to_otlp(RunBuilder(f"cut-{i}").task("t").build())) for i in range(3)]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:100], encoding="utf-8")
    db = tmp_path / "store.db"
    code = main(["--db", str(db), "import", str(path), "--format", "otlp-json"])
    err = capsys.readouterr().err
    assert code == 2 and f"{path}: line 3: not valid JSON" in err and len(err.strip().splitlines()) == 1
    assert main(["--db", str(db), "runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out or "[]") == []
