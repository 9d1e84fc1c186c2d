"""Long texts in JSON, written once (recording.long_texts, issue 35 "Bad input"): a value's JSON cut at
its long strings stands for exactly the JSON pydantic writes — whole, measured, or cut to a limit — and whatever
could make it differ (a lone surrogate, a serializer of the model's own) sends the caller back to the whole JSON."""

from __future__ import annotations

import tracemalloc

import orjson
import pydantic_core
import pytest
from pydantic import BaseModel, computed_field, field_serializer

from causaltrace.recording import encode_response
from causaltrace.recording.long_texts import (
    forget_long_texts,
    json_literal,
    json_pieces,
    json_pieces_head,
    json_pieces_size,
    json_pieces_text,
    literal_size,
    model_json_pieces,
)
from causaltrace.schema import Outcome

#: Every kind of character JSON treats apart: quotes, backslashes, control characters, DEL, non-ASCII (2, 3 and 4
#: UTF-8 bytes).
MIXED = 'a"b\\c\nd\te\x01f\x1fg\x7fh é ☃ 𝄞 ' * 3000


def _dumps(value):
    return pydantic_core.to_json(value, fallback=str).decode()


def test_orjson_escapes_every_code_point_as_pydantic_core_does():
    # the splice writes long strings with orjson where pydantic-core would have written them: the same bytes for
    # every character (escapes are per character, so for every string)
    for start in range(0, 0x110000, 0x4000):
        text = "".join(chr(c) for c in range(start, min(start + 0x4000, 0x110000)) if not 0xD800 <= c <= 0xDFFF)
        assert orjson.dumps(text) == pydantic_core.to_json(text) == json_literal(text)


@pytest.mark.parametrize("text", ["0123456789abcdef" * 8000, MIXED], ids=["ascii", "mixed"])
def test_pieces_stand_for_the_whole_json_exactly(text):
    value = {"result": text, "is_error": False, "nested": [{"a": text[:100]}, {"b": MIXED[::-1]}], "n": 1.5e-7}
    whole = _dumps(value)
    pieces = json_pieces(value, _dumps, 5000)
    assert pieces is not None and len(pieces) == 5  # two long strings cut out
    assert json_pieces_text(pieces) == whole
    assert json_pieces_size(pieces) == (len(whole), len(whole.encode()))
    for n in (1, 10, 11, 12, 13, 16384, len(whole) - 1):
        assert json_pieces_head(pieces, n) == whole[:n]  # a cut may fall inside an escape or a character's bytes
    assert value["result"] is text  # the caller's value is left alone


def test_a_value_without_long_strings_or_with_a_lone_surrogate_is_left_to_the_whole_json():
    assert json_pieces({"a": "short", "b": [1, 2]}, _dumps, 5000) is None
    assert json_pieces({"a": "x" * 6000 + "\udc80"}, _dumps, 5000) is None
    shared = {"t": "x" * 6000}
    assert json_pieces({"a": shared, "b": shared}, _dumps, 5000) is None  # a part met twice: written whole


def test_literal_sizes_count_characters_and_bytes_and_are_forgotten():
    chars, size = literal_size(MIXED)
    literal = pydantic_core.to_json(MIXED)
    assert (chars, size) == (len(literal.decode()), len(literal)) and json_literal(MIXED) == literal
    forget_long_texts()
    assert literal_size(MIXED) == (chars, size)


class ToolResult(BaseModel):
    content: str
    name: str
    is_error: bool = False


class Shouting(BaseModel):
    content: str

    @field_serializer("content")
    def _loud(self, value: str) -> str:
        return value[:10]


class Measured(BaseModel):
    content: str

    @computed_field
    def size(self) -> int:
        return len(self.content)


def test_a_model_is_cut_at_its_plain_text_fields_only():
    result = ToolResult(content=MIXED, name="fetch")
    pieces = model_json_pieces(result, 5000)
    assert pieces is not None and json_pieces_text(pieces) == result.model_dump_json()
    outcome = Outcome(status="failure", final_answer=MIXED, stop="normal", reason="r" * 6000)
    pieces = model_json_pieces(outcome, 5000)
    assert pieces is not None and json_pieces_text(pieces) == outcome.model_dump_json()
    # a serializer or a computed field of the model's own would see a stand-in: such models are written whole
    assert model_json_pieces(Shouting(content=MIXED), 5000) is None
    assert model_json_pieces(Measured(content=MIXED), 5000) is None
    assert model_json_pieces(ToolResult(content="short", name="f"), 5000) is None


def test_a_long_tool_result_is_recorded_exactly_as_its_own_json():
    result = ToolResult(content=MIXED * 3, name="fetch")  # above LONG_TEXT_CHARS: written by the splice
    envelope, type_name = encode_response(result)
    assert envelope == {"type": type_name, "json": result.model_dump_json()}


def test_a_long_literal_is_written_without_reserving_ten_times_its_size():
    # orjson reserves about ten bytes per character for its output: a 50 MB tool result's literal held half a
    # gigabyte of address space; written a slice at a time, the literal costs about its own size
    text = "0123456789abcdef" * 400_000  # 6.4 MB
    tracemalloc.start()
    try:
        literal = json_literal(text, remember=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert literal == orjson.dumps(text) and peak < 2 * len(text)


def test_a_recorded_call_measured_short_is_not_looked_into_again():
    """A call whose canonical request was short and whose response and settings are small is noted at its finish
    (issue 35 item 2): the Recording's export does not walk its request again; one holding a long text is not."""
    from causaltrace.collector.recording_otlp import RecordingExport, recording_attributes
    from causaltrace.instrumentation.calls import CallLog
    from causaltrace.recording.long_texts import LONG_TEXT_CHARS, _no_long_text, small_json

    log = CallLog("run-1")
    short = log.begin("a", "llm", {"messages": [{"role": "user", "content": "hi"}]}, ordinal=None,
                      settings={"model": "m", "info": {"vision": False}}, step_id=None, call_id_pattern=None)
    short.finish({"text": "hello"})
    long = log.begin("a", "llm", {"messages": [{"role": "user", "content": "x" * LONG_TEXT_CHARS}]}, ordinal=None,
                     settings={}, step_id=None, call_id_pattern=None)
    long.finish({"text": "hello"})
    def noted(model) -> bool:  # the entry's model itself: a dead model's stale entry may hold a reused id
        ref = _no_long_text.get(id(model))
        return ref is not None and ref() is model

    assert noted(short.call) and not noted(long.call)
    assert model_json_pieces(short.call, LONG_TEXT_CHARS, deep=True) is None
    assert json_pieces_text(model_json_pieces(long.call, LONG_TEXT_CHARS, deep=True)) == long.call.model_dump_json()
    recording = log.recording()
    attrs = recording_attributes(recording, settings=RecordingExport(max_bytes=10**8), chunk_chars=1 << 20)
    assert "".join(attrs["causaltrace.run.recording.chunks"]) == recording.model_dump_json()
    assert small_json({"a": {"b": 1}}) and not small_json({"a": {"b": {"c": 1}}}) and not small_json([1])


def test_the_notes_of_models_gone_are_dropped_and_never_stand_for_a_new_model(monkeypatch):
    """note_no_long_text keeps a weak reference per model, without a callback (issue 35): the entries of models
    gone are dropped when the table fills, and an entry whose model is gone never answers for another model (a
    reused id)."""
    from pydantic import BaseModel

    from causaltrace.recording import long_texts
    from causaltrace.recording.long_texts import LONG_TEXT_CHARS

    class Holder(BaseModel):
        text: str

    monkeypatch.setattr(long_texts, "_no_long_text", {})
    monkeypatch.setattr(long_texts, "_PRUNE_AT", 8)
    kept = [Holder(text="short") for _ in range(5)]
    for model in kept:
        long_texts.note_no_long_text(model)
    for _ in range(20):  # noted, then gone: the table is pruned, never more than the live ones and the bound
        long_texts.note_no_long_text(Holder(text="short"))
    table = long_texts._no_long_text
    assert len(table) <= long_texts._PRUNE_AT <= 16 and all(id(model) in table for model in kept)
    assert all(model_json_pieces(model, LONG_TEXT_CHARS) is None for model in kept)  # noted: not looked into
    gone = Holder(text="short")
    long_texts.note_no_long_text(gone)
    dead = table.pop(id(gone))
    del gone
    assert dead() is None
    long = Holder(text="x" * LONG_TEXT_CHARS)
    table[id(long)] = dead  # as if the model gone had had this one's id: its entry answers for no other model
    assert model_json_pieces(long, LONG_TEXT_CHARS) is not None
