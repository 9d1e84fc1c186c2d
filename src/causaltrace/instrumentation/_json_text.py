"""json's work with fewer Python frames, for the hooks' per-call JSON.

``encoder.encode(value)`` with no Python call: what :meth:`json.JSONEncoder.encode` does for a container
(``encode`` → ``iterencode`` → json's C encoder, two Python frames each time), done by the caller in one line::

    _ARGS = one_shot_args(_ENCODER)
    text = "".join(C_MAKE_ENCODER({}, *_ARGS)(value, 0)) if _ARGS is not None else _ENCODER.encode(value)

The C encoder is made with a fresh markers dict each time (the circular-reference check, as ``iterencode`` does:
a shared dict would not be safe across threads), and gives the same text as ``encode`` for every value, a str
included.
"""

from __future__ import annotations

import json
import json.decoder
import json.encoder
from typing import Any

__all__ = ["C_MAKE_ENCODER", "SCAN", "WHITESPACE", "one_shot_args"]

#: json's C encoder class (None on an interpreter without ``_json``).
C_MAKE_ENCODER: Any = json.encoder.c_make_encoder


def one_shot_args(encoder: json.JSONEncoder) -> tuple[Any, ...] | None:
    """The arguments after the markers ``encoder.iterencode(value, _one_shot=True)`` makes json's C encoder with;
    None when it would not use the C encoder (none here, an indent) or checks no circular references (markers
    None): call ``encoder.encode`` then."""
    if C_MAKE_ENCODER is None or encoder.indent is not None or not encoder.check_circular:
        return None
    basestring = json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring
    return (encoder.default, basestring, encoder.indent, encoder.key_separator, encoder.item_separator,
            encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)


#: ``json.loads``' work on a str, done by its caller with no Python frame of json's (``loads`` → ``decode`` →
#: ``raw_decode``: three per text)::
#:
#:     if not text.startswith("\ufeff"):
#:         value, end = SCAN(text, WHITESPACE(text, 0).end())  # StopIteration / ValueError: no JSON
#:         if WHITESPACE(text, end).end() != len(text): ...     # extra data: no JSON
#:
#: with the scanner of a decoder configured as ``json.loads``' own (json's C scanner when there is one: it clears
#: its memo after each text) and the whitespace matcher its ``decode`` skips with.
SCAN = json.decoder.JSONDecoder().scan_once
WHITESPACE = json.decoder.WHITESPACE.match
