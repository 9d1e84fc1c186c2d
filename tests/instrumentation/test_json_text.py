"""instrumentation._json_text: json's C encoder made with ``one_shot_args(encoder)`` gives exactly
``encoder.encode(value)`` — for the encoders the hooks use and any value — and a circular value is refused alike."""

from __future__ import annotations

import json
import math

import pytest

from causaltrace.instrumentation._json_text import C_MAKE_ENCODER, one_shot_args

ENCODERS = [
    json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str),  # smolagents' call_text
    json.JSONEncoder(ensure_ascii=False, default=str),  # smolagents' tool parameters
    json.JSONEncoder(sort_keys=True),  # AutoGen's tool-call display
]


class Thing:
    def __str__(self) -> str:
        return "thing ✓"


VALUES = [
    {"b": 1, "a": [1.5, 2, None, True, "x"], "ü": "naïve \"quoted\" \n"},
    {"nested": {"z": {"y": [{"x": 0.1 + 0.2}]}}, "big": 10**30, "neg": -0.0},
    "a plain string ✓ with \u2028",
    3.25,
    [],
    {},
    {"nan": math.nan, "inf": math.inf},
    {1: "int key", "s": "k"},
]


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("value", VALUES)
def test_the_c_encoder_made_from_the_arguments_gives_what_encode_gives(encoder, value):
    args = one_shot_args(encoder)
    assert args is not None and C_MAKE_ENCODER is not None
    assert _outcome(lambda: "".join(C_MAKE_ENCODER({}, *args)(value, 0))) == _outcome(lambda: encoder.encode(value))


def _outcome(encode):
    """The text, or the exception's type and message (mixed keys cannot be sorted: a TypeError either way)."""
    try:
        return encode()
    except Exception as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("encoder", ENCODERS[:2])
def test_default_str_is_used_alike(encoder):
    value = {"thing": Thing(), "items": [Thing()]}
    assert "".join(C_MAKE_ENCODER({}, *one_shot_args(encoder))(value, 0)) == encoder.encode(value)


def test_a_circular_value_is_refused_alike():
    encoder = ENCODERS[0]
    value: dict = {}
    value["self"] = value
    with pytest.raises(ValueError, match="Circular") as expected:
        encoder.encode(value)
    with pytest.raises(ValueError, match="Circular") as got:
        "".join(C_MAKE_ENCODER({}, *one_shot_args(encoder))(value, 0))
    assert str(got.value) == str(expected.value)


def test_encoders_it_cannot_stand_for_are_left_to_encode():
    assert one_shot_args(json.JSONEncoder(indent=2)) is None
    assert one_shot_args(json.JSONEncoder(check_circular=False)) is None


def test_the_hooks_encoders_take_the_c_path():
    from causaltrace.instrumentation.autogen import _model_calls
    from causaltrace.instrumentation.smolagents import _state, _tools

    assert None not in (_state._CALL_JSON_ARGS, _tools._INPUTS_JSON_ARGS, _model_calls._ARGUMENTS_JSON_ARGS)
    assert _state.call_text("f", {"b": "é", "a": 1}) == 'f({"a": 1, "b": "é"})'


TEXTS = ['{"a": 1, "b": [1.5, null, true, "\\u00e9"]}', '  {"a": 1}  \n', "[]", '"s"', "12", "1e400", "NaN",
         '{"a": 1} x', "", "   ", "\ufeff{}", '{"a": }', '{"a": 1, "a": 2}', '{"deep": ' * 50 + "1" + "}" * 50, "{"]


def _json_loads_reference(text):
    try:
        return ("ok", json.loads(text))
    except ValueError:
        return ("no JSON", None)


@pytest.mark.parametrize("text", TEXTS)
def test_the_hooks_read_argument_text_as_json_loads_reads_it(text):
    """AutoGen's parse_arguments and smolagents' message_tool_calls read JSON with the scanner inline."""
    from types import SimpleNamespace as NS

    from causaltrace.instrumentation.autogen._access import parse_arguments
    from causaltrace.instrumentation.smolagents._access import message_tool_calls

    kind, value = _json_loads_reference(text)
    parsed = parse_arguments(text)
    if kind == "no JSON":
        assert parsed == {"raw": text}
    else:
        assert repr(parsed) == repr(value if isinstance(value, dict) else {"value": value})  # NaN != NaN
    [call] = message_tool_calls(NS(tool_calls=[NS(id="c1", function=NS(name="f", arguments=text))]))
    expected = text if kind == "no JSON" else value
    assert repr(call["arguments"]) == repr(expected)
