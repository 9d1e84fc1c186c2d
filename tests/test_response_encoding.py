"""Recorded responses: plain JSON as is, pydantic models as readable JSON (when their class round-trips), the rest
pickled — each served back as the same type, a fresh object every time."""

from __future__ import annotations

import fractions

import pytest
from pydantic import BaseModel, Field, PrivateAttr

from causaltrace.recording import decode_response, encode_response


class Call(BaseModel):
    id: str
    name: str


class Result(BaseModel):
    content: list[Call] | str
    cached: bool = False


class Lossy(BaseModel):
    """Loses a field in JSON: must not be stored as JSON."""

    text: str
    secret: str = Field(default="", exclude=True)


class WithState(BaseModel):
    text: str
    _hits: int = PrivateAttr(default=0)


def test_a_pydantic_response_is_stored_as_readable_json_and_served_back_as_the_same_type():
    value = Result(content=[Call(id="c1", name="add")])
    envelope, type_name = encode_response(value)
    assert type_name == f"{__name__}.Result"
    assert envelope == {"type": type_name, "json": '{"content":[{"id":"c1","name":"add"}],"cached":false}'}
    first, second = decode_response(envelope, type_name), decode_response(envelope, type_name)
    assert first == value and type(first) is Result and type(first.content[0]) is Call
    assert first is not second and first.content is not second.content  # fresh copies: agents mutate them


def test_models_that_lose_data_in_json_and_other_objects_are_pickled():
    lossy = Lossy(text="t", secret="s")
    envelope, type_name = encode_response(lossy)
    assert "pickle_b64" in envelope and "json" not in envelope
    assert decode_response(envelope, type_name).secret == "s"
    state = WithState(text="t")
    state._hits = 3
    envelope, type_name = encode_response(state)
    assert "pickle_b64" in envelope  # private state differs after a JSON round trip (checked on the first seen)
    envelope, type_name = encode_response(fractions.Fraction(1, 3))
    assert decode_response(envelope, type_name) == fractions.Fraction(1, 3)


def test_plain_json_stays_plain_and_an_unknown_envelope_is_refused():
    assert encode_response({"a": [1, "x"]}) == ({"a": [1, "x"]}, None)
    assert encode_response("text") == ("text", None)
    with pytest.raises(ValueError, match="no pickle_b64 or json envelope"):
        decode_response({"type": "x.Y"}, "x.Y")


class Inner(BaseModel):
    text: str
    _cache: dict = PrivateAttr(default_factory=dict)


class Outer(BaseModel):
    items: list[Inner]


def test_a_model_holding_a_model_with_private_state_is_pickled_even_when_the_first_instance_has_none():
    value = Outer(items=[Inner(text="a")])
    envelope, type_name = encode_response(value)
    assert "pickle_b64" in envelope
    assert decode_response(envelope, type_name) == value


def test_the_autogen_create_result_is_stored_as_json():
    from autogen_core import FunctionCall, models

    value = models.CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="c1", name="add", arguments='{"a": 1}')],
        usage=models.RequestUsage(prompt_tokens=3, completion_tokens=2),
        cached=False,
    )
    envelope, type_name = encode_response(value)
    assert "json" in envelope
    back = decode_response(envelope, type_name)
    assert back == value and type(back.content[0]) is FunctionCall


class Reading(BaseModel):
    text: str


def test_a_first_instance_that_does_not_round_trip_is_pickled_alone_never_its_whole_class():
    # a tool's text with a lone surrogate (bytes that were not UTF-8) cannot come back from JSON: that value is
    # pickled — and the next, ordinary reading is still stored as readable JSON (it used to pin the class to pickle,
    # so a run's recording depended on what the process had recorded before)
    odd, type_name = encode_response(Reading(text="caf\udce9"))
    assert "pickle_b64" in odd and decode_response(odd, type_name) == Reading(text="caf\udce9")
    plain, _ = encode_response(Reading(text="café"))
    assert "json" in plain
