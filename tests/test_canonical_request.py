"""The recording's canonical request: the one-pass text implementation agrees with the reference walk.

``canonical_request`` (the hot path) aliases call ids and drops ``created_at`` on the compact JSON text; the
reference ``_canonical_walk`` does it on parsed data. Both must give the same canonical request, and the hash must
be ``request_hash`` of it, for any JSON request — including strings that LOOK like ids inside other strings, escaped
quotes, unicode, empty ids and ids repeated across messages.
"""

from __future__ import annotations

import hashlib
import json
import re
from unittest.mock import patch

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from causaltrace import recording
from causaltrace.instrumentation.smolagents._access import CallIdPattern
from causaltrace.recording import (
    _canonical_text,
    _canonical_walk,
    _orjson_text,
    _plain_json_bytes,
    canonical_json,
    canonical_request,
    canonicalize_request,
    request_hash,
)

PATTERN = re.compile(r"call_[A-Za-z0-9]{3,}")
#: Known ids (the smolagents adapter's pattern): aliased on the JSON text, next to escapes, never inside keys.
KNOWN_IDS = CallIdPattern(["call_1", "ncall_1", "u001f", "c-2", "call_12"])
#: Known ids with a common start (a run's call ids): found with one scan for it (recording._shared_prefix).
SHARED_START_IDS = CallIdPattern(["call_1", "call_12", "call_1x", "call_2-b", "call_é"])

_keys = st.sampled_from(
    ["id", "call_id", "tool_call_id", "created_at", "content", "name", "role", "args", "x", "call_1", "k call_12"]
)
_id_texts = st.lists(
    st.sampled_from(["call_1", "ncall_1", "call_12", "c-2", "u001f", "\n", "\\", "\\n", "\x1f", '"', " ", "x", "-", "é",
                     "call_1x", "call_2-b", "call_é", "_"]),
    max_size=6,
).map("".join)
_texts = st.one_of(
    st.text(max_size=12),
    _id_texts,
    st.sampled_from(['"id":"x"', 'say \\"id\\"', "call_abc1", "see call_zz9 and call_abc1", "", '{"created_at":1}']),
)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, width=32), _texts)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=5)),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(request=_json, pattern=st.sampled_from([None, PATTERN, KNOWN_IDS, SHARED_START_IDS]),
       walk_from=st.sampled_from([65_536, 0]))
def test_text_path_equals_reference_walk(request, pattern, walk_from):
    # walk_from 0: every edited request is made by the walk, as a large one is (the hash still from the edited text)
    with patch.object(recording, "_WALK_MIN_TEXT", walk_from):
        canonical, digest = canonical_request(request, call_id_pattern=pattern)
    assert canonical == _canonical_walk(json.loads(_plain_json_bytes(request)), pattern, ("created_at",))
    assert digest == request_hash(canonical) == hashlib.sha256(canonical_json(canonical).encode()).hexdigest()


def test_a_large_request_keeps_its_long_texts_as_they_are():
    """A 50 MB tool result in a model request is aliased around, not copied: the canonical request holds the very
    text object (parsing the edited text back made a copy per request)."""
    result = "r" * 100_000
    request = {"messages": [{"role": "tool", "tool_call_id": "call_abc", "content": result},
                            {"role": "assistant", "tool_calls": [{"id": "call_abc", "name": "fetch"}]}]}
    canonical, digest = canonical_request(request)
    assert canonical["messages"][0]["content"] is result
    assert canonical["messages"][0]["tool_call_id"] == canonical["messages"][1]["tool_calls"][0]["id"] == "call#0"
    assert digest == request_hash(canonical)


#: Anything JSON-ish the fast writer may meet: every kind of float (orjson formats them differently), integers
#: beyond 64 bits, tuples, control characters, astral and surrogate code points, unusual keys.
_any_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.floats(allow_nan=False),
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x20)),
    st.sampled_from(["\u2028\u2029\x7f", "\ud800", "😀é", '"\\/', "\U0010ffff"]),
)
_any_json = st.recursive(
    _any_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(["\uffff", "😀", "a", "B", "\ud800"])), inner, max_size=5),
    ),
    max_leaves=30,
)


@settings(max_examples=1000, deadline=None)
@given(value=_any_json)
def test_fast_canonical_text_is_canonical_json(value):
    """The orjson-written text is byte for byte the standard library's (or the standard library writes it)."""
    try:
        expected = canonical_json(value)
    except (TypeError, ValueError):
        return
    assert _canonical_text(value)[0] == expected
    fast = _orjson_text(value)
    if fast is not None:  # what orjson wrote, it parses back as the standard library does
        assert fast == expected
        assert orjson.loads(fast) == json.loads(fast)


def test_orjson_writes_float_free_requests_and_leaves_floats_to_the_standard_library():
    request = {"messages": [{"content": "é \u2028 \x01 \"q\"", "role": "user"}], "n": 2**64 - 1, "tools": ()}
    assert _orjson_text(request) == canonical_json(request)  # the fast path is taken, and exact
    assert _orjson_text({"temperature": 1e-7}) is None  # orjson would write 1e-7, the definition 1e-07
    assert _canonical_text({"temperature": 1e-7}) == ('{"temperature":1e-07}', False)
    assert _orjson_text({"n": 2**64}) is None  # beyond orjson's integers


def test_orjson_takes_no_float_anywhere_and_no_nesting_beyond_its_depth():
    """``_orjson_exact`` (a level at a time): a float, or another type, at any depth or place sends the request to the
    standard library; 201 nested containers are orjson's, a container inside the 201st is not."""
    from causaltrace.recording import _orjson_exact

    assert _orjson_exact({"a": [{"b": ("c", 1, True, None)}, {}], "d": []})
    for bad in (1.5, float("nan"), b"x", object()):
        assert not _orjson_exact({"a": [{"b": ["c", bad]}]})
        assert not _orjson_exact([{"x": 1}, {"y": [2, {"z": bad}]}])

    def nested(depth: int, leaf: object) -> object:
        value = leaf
        for _ in range(depth):
            value = [value]
        return value

    assert _orjson_exact(nested(201, 1)) and _orjson_exact(nested(200, []))
    assert not _orjson_exact(nested(201, [])) and not _orjson_exact(nested(202, 1))


def test_an_id_that_json_escapes_is_aliased_as_the_walk_does():
    """An id holding a quote is written escaped in the JSON text, so the text scan cannot find it: the request must
    go to the walk (it used to be left unaliased)."""
    pattern = CallIdPattern(['x"1'])
    canonical, _ = canonical_request({"content": 'see x"1 now'}, call_id_pattern=pattern)
    assert canonical == {"content": "see call#0 now"}


class _Call(BaseModel):
    id: str
    name: str
    arguments: str


class _Msg(BaseModel):
    content: list[_Call] | str
    source: str


def test_aliases_are_request_local_and_in_key_order():
    request = {
        "messages": [
            _Msg(content=[_Call(id="toolu_9", name="add", arguments='{"a": 1}')], source="solver"),
            {"call_id": "toolu_9", "content": "2", "created_at": "2026-01-01T00:00:00Z"},
            {"tool_call_id": "other", "content": 'quoted "id":"fake" stays'},
        ]
    }
    canonical = canonicalize_request(request)
    assert canonical["messages"][0]["content"][0]["id"] == "call#0"
    assert canonical["messages"][1] == {"call_id": "call#0", "content": "2"}
    assert canonical["messages"][2] == {"content": 'quoted "id":"fake" stays', "tool_call_id": "call#1"}
    # the same request with other live ids hashes the same (playback matches it)
    again = {
        "messages": [
            _Msg(content=[_Call(id="toolu_X", name="add", arguments='{"a": 1}')], source="solver"),
            {"call_id": "toolu_X", "content": "2", "created_at": "2027-05-05T00:00:00Z"},
            {"tool_call_id": "zzz", "content": 'quoted "id":"fake" stays'},
        ]
    }
    assert canonical_request(again)[1] == canonical_request(request)[1]


def test_a_dropped_key_holding_an_object_falls_back_to_the_walk():
    request = {"created_at": {"when": "now", "id": "a"}, "messages": [{"id": "a", "content": "hi"}]}
    canonical, digest = canonical_request(request)
    assert canonical == {"messages": [{"content": "hi", "id": "call#0"}]}
    assert digest == request_hash(canonical)
