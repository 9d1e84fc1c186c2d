"""Long texts in JSON, written once (issue 35 "Bad input").

A 50 MB tool result stands in several JSON texts: the span attributes that show it (cut to the attribute limit),
the root's outcome, the recorded call's response and the store's chunk of it, the Recording's export (measured
against its ceiling). Writing each whole cost five serialisations of the payload on the agent's thread. Here:

* :func:`json_pieces` / :func:`model_json_pieces` cut a value's JSON at its long strings, ``[json, text, json, …]``,
  serialising only what is around them (each long string replaced by a stand-in that is then found again);
* a long string's literal is written by orjson, which escapes every character as pydantic-core does (a test
  checks every code point), a slice at a time (:func:`json_literal`); its size is measured once per string object
  for the run (:func:`literal_size`, forgotten at the run's end: :func:`forget_long_texts`);
* from the pieces: the whole text (:func:`json_pieces_text`), its size (:func:`json_pieces_size`), its head
  (:func:`json_pieces_head`), or its head cut as the payload policy cuts a span attribute (:func:`cut_json`,
  :func:`attribute_json`: a :class:`CutText`).

This module imports no other causaltrace module.
"""

from __future__ import annotations

import json
import secrets
import threading
import weakref
from typing import Any

import orjson
import pydantic_core
from pydantic import BaseModel, JsonValue

__all__ = [
    "LONG_TEXT_CHARS",
    "CutText",
    "attribute_json",
    "cut_json",
    "forget_long_texts",
    "json_literal",
    "json_pieces",
    "json_pieces_head",
    "json_pieces_size",
    "json_pieces_text",
    "literal_size",
    "model_json_pieces",
    "note_no_long_text",
    "small_json",
]

#: From how many characters a string's literal size is remembered (shorter ones are measured again when asked).
_REMEMBER_MIN_CHARS = 4096

#: From how many characters a string of a response model is written by :func:`json_pieces_text` (and its literal's
#: size remembered): below this, cutting the JSON apart costs more than it saves.
LONG_TEXT_CHARS = 65_536
#: How many long texts' literal sizes are remembered at a time (each entry holds its text alive: see
#: :func:`forget_long_texts`).
_LITERALS_KEPT = 8
_literals: dict[int, tuple[str, int, int]] = {}
_literals_lock = threading.Lock()
#: Stand-ins for long strings in a value's JSON: unguessable, so the JSON around them cannot hold one by chance.
_TOKEN = f"causaltrace-long-{secrets.token_hex(8)}-"


#: A long text's literal is written this many characters at a time: orjson reserves about ten bytes per character
#: for its output (a 50 MB text's literal held half a gigabyte of address space, 52 MB of it written), so a slice's
#: reservation is small and short-lived (escapes are per character: the slices' literals join into the text's).
_LITERAL_SLICE = 65_536


def json_literal(text: str, *, remember: bool = True) -> bytes | bytearray:
    """``text`` as a JSON string literal: the very bytes ``pydantic_core.to_json(text)`` writes, by orjson — which
    escapes every character as pydantic-core does (tests/test_recording_long_texts.py checks every code point) at
    about twice the speed, a long text :data:`_LITERAL_SLICE` characters at a time (a ``bytearray`` then). Its size
    is remembered (:func:`literal_size`) unless ``remember`` is false (the store's writer: it writes after the
    run's end, which forgets them). A lone surrogate raises ``TypeError``, as pydantic-core raises (its
    ``PydanticSerializationError`` is a ``ValueError``)."""
    literal: bytes | bytearray
    if len(text) <= _LITERAL_SLICE:
        literal = orjson.dumps(text)
    else:
        literal = bytearray(b'"')
        for start in range(0, len(text), _LITERAL_SLICE):
            literal += memoryview(orjson.dumps(text[start : start + _LITERAL_SLICE]))[1:-1]
        literal += b'"'
    if remember and len(text) >= _REMEMBER_MIN_CHARS:
        _remember(text, len(literal))
    return literal


def literal_size(text: str) -> tuple[int, int]:
    """(characters, UTF-8 bytes) of ``text``'s JSON literal (:func:`json_literal`), measured once per string object
    while it is one of the last few long texts measured: a tool result is one object in the call's response, the
    steps that show it and the run's outcome. Raises as :func:`json_literal` does."""
    known = _literals.get(id(text))
    if known is not None and known[0] is text:
        return known[1], known[2]
    size = 2 + sum(len(orjson.dumps(text[start : start + _LITERAL_SLICE])) - 2
                   for start in range(0, len(text), _LITERAL_SLICE))
    return _remember(text, size) if len(text) >= _REMEMBER_MIN_CHARS else _sizes(text, size)


def _sizes(text: str, size: int) -> tuple[int, int]:
    """(characters, bytes) of the literal of ``text`` whose UTF-8 length is ``size``: the escapes are ASCII, every
    other character is one character of the literal, however many bytes it takes."""
    if text.isascii():
        return size, size
    extra = sum(len(text[start : start + _LITERAL_SLICE].encode()) for start in range(0, len(text), _LITERAL_SLICE))
    return size - extra + len(text), size


def _remember(text: str, size: int) -> tuple[int, int]:
    sizes = _sizes(text, size)
    with _literals_lock:
        while len(_literals) >= _LITERALS_KEPT:
            _literals.pop(next(iter(_literals)), None)
        _literals[id(text)] = (text, *sizes)
    return sizes


def forget_long_texts() -> None:
    """Forget the remembered literal sizes, and so let their texts go: called when a run ends (the sizes are only
    worth keeping while the run that carries the text writes it)."""
    with _literals_lock:
        _literals.clear()


def _check_writable(text: str) -> None:
    """Raise ``TypeError`` when ``text`` holds a lone surrogate, which the serializers write their own way (or refuse):
    such a text is never cut out (an ASCII text holds none: known without a look)."""
    if not text.isascii():
        literal_size(text)


def _holds_long(value: dict[Any, Any] | list[Any], min_chars: int) -> bool:
    """Whether a string of at least ``min_chars`` is anywhere inside ``value``'s dicts and lists (one loop, no call
    per value: it looks at every request of a run when the Recording is exported). False as well when a dict or
    list is met twice (a shared or circular part: such data is serialized whole, as it always was)."""
    stack: list[Any] = [value]
    seen = {id(value)}
    found = False
    while stack:
        node = stack.pop()
        for item in node.values() if type(node) is dict else node:
            kind = type(item)
            if kind is str:
                if len(item) >= min_chars:
                    found = True
            elif kind is dict or kind is list:
                if id(item) in seen:
                    return False
                seen.add(id(item))
                stack.append(item)
    return found


def _swap_long(value: Any, min_chars: int, texts: list[str]) -> Any:
    """``value`` with every string of at least ``min_chars`` inside its dicts and lists replaced by a stand-in
    (``_TOKEN`` + its index in ``texts``, where the string is appended), or ``value`` itself when it holds none;
    its dicts and lists are copied, the strings shared."""
    cls = type(value)
    if cls is str:
        if len(value) < min_chars:
            return value
        texts.append(value)
        return f"{_TOKEN}{len(texts) - 1}"
    if (cls is not dict and cls is not list) or not _holds_long(value, min_chars):
        return value
    root = dict(value) if cls is dict else list(value)
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        for key, item in node.items() if type(node) is dict else enumerate(node):
            kind = type(item)
            if kind is str:
                if len(item) >= min_chars:
                    texts.append(item)
                    node[key] = f"{_TOKEN}{len(texts) - 1}"
            elif kind is dict or kind is list:
                node[key] = child = dict(item) if kind is dict else list(item)
                stack.append(child)
    return root


def _pieces(skeleton: str, texts: list[str]) -> list[str] | None:
    """The JSON ``skeleton`` split at each stand-in's literal: ``[json, text, json, …]``, or None when a stand-in
    is not there exactly once (the serializer changed it, or left it out)."""
    found: list[tuple[int, int]] = []
    for index in range(len(texts)):
        mark = f'"{_TOKEN}{index}"'
        at = skeleton.find(mark)
        if at < 0 or skeleton.find(mark, at + 1) >= 0:
            return None
        found.append((at, index))
    found.sort()
    pieces: list[str] = []
    last = 0
    for at, index in found:
        pieces.append(skeleton[last:at])
        pieces.append(texts[index])
        last = at + len(_TOKEN) + len(str(index)) + 2
    pieces.append(skeleton[last:])
    return pieces


def json_pieces(value: Any, serialize: Any, min_chars: int) -> list[str] | None:
    """``serialize(value)`` — a JSON serializer that writes strings as pydantic-core does — cut at the long strings
    (``min_chars`` or more characters) inside ``value``'s dicts, lists and tuples: ``[json, text, json, text, …,
    json]``, the JSON around them with each long string between (to be written as its literal), the long strings
    never serialized here. None when ``value`` holds no long string, or when the pieces could not stand for
    ``serialize(value)`` exactly: a long string with a lone surrogate, a serializer that raised or changed a
    stand-in (the caller then serializes the whole)."""
    texts: list[str] = []
    try:
        swapped = _swap_long(value, min_chars, texts)
        if not texts:
            return None
        for text in texts:
            _check_writable(text)
        return _pieces(serialize(swapped), texts)
    except (TypeError, ValueError, RecursionError):
        return None


#: (model class, field names) → whether those fields can be cut out of the class's JSON (decided once).
_PLAIN_FIELDS: dict[tuple[type, tuple[str, ...]], bool] = {}
#: The field types whose values pydantic writes as they are: texts, and JSON data (a recorded call's request).
_PLAIN_TYPES = (str, str | None, JsonValue)


def _plain_fields(cls: type[BaseModel], names: tuple[str, ...]) -> bool:
    """Whether pydantic writes the values of ``names`` as they are: fields annotated ``str``, ``str | None`` or
    ``JsonValue`` without constraints or serializers, in a model with no model serializer and no computed field
    (which might read them)."""
    key = (cls, names)
    known = _PLAIN_FIELDS.get(key)
    if known is None:
        try:
            decorators = cls.__pydantic_decorators__
            serialized = {f for d in decorators.field_serializers.values() for f in d.info.fields}
            fields = cls.model_fields
            known = (not decorators.model_serializers and not cls.model_computed_fields
                     and not serialized & {*names, "*"}
                     and all(fields[n].annotation in _PLAIN_TYPES and not fields[n].metadata for n in names))
        except Exception:  # a class that does not answer like a pydantic model
            known = False
        _PLAIN_FIELDS[key] = known
    return known


#: Models known to hold no text of :data:`LONG_TEXT_CHARS` characters or more anywhere (a recorded call whose
#: request's canonical JSON was shorter than that, its response and settings small: ``instrumentation.calls``):
#: id → a weak reference. :func:`model_json_pieces` does not look inside them — the Recording's export at a run's
#: end walked every request again, and each request carries the whole conversation so far (issue 35 item 2: what
#: was measured once is not walked again). An entry is looked up by its model's id and holds only if its reference
#: is still that model; the entries of models gone are dropped when the table reaches :data:`_PRUNE_AT` entries (no
#: callback per model: a weak reference's callback was a Python call per recorded call, issue 35).
_no_long_text: dict[int, weakref.ref[Any]] = {}
_PRUNE_AT = 4096


def note_no_long_text(model: BaseModel) -> None:
    """Say that no text in ``model`` has :data:`LONG_TEXT_CHARS` characters or more (never raises; a model that
    takes no weak reference is not noted)."""
    try:
        ref = weakref.ref(model)
    except TypeError:
        return
    if len(_no_long_text) >= _PRUNE_AT:
        _prune_no_long_text()
    _no_long_text[id(model)] = ref


def _prune_no_long_text() -> None:
    """Drop the entries of models gone; with most still alive, the table may grow to twice their number first."""
    global _PRUNE_AT
    for key, ref in list(_no_long_text.items()):  # a snapshot: other threads note models meanwhile
        if ref() is None and _no_long_text.get(key) is ref:
            _no_long_text.pop(key, None)
    _PRUNE_AT = max(4096, 2 * len(_no_long_text))


def small_json(value: Any, depth: int = 2) -> bool:
    """Whether ``value`` is a scalar, a text shorter than :data:`LONG_TEXT_CHARS`, or a dict of those nested at
    most ``depth`` deep (a response envelope, a call's settings): it then holds no long text. Anything else is not
    looked into (False)."""
    cls = type(value)
    if cls is str:
        return len(value) < LONG_TEXT_CHARS
    if cls is not dict:
        return cls is int or cls is float or cls is bool or value is None
    for item in value.values():
        cls = type(item)
        if cls is str:
            if len(item) >= LONG_TEXT_CHARS:
                return False
        elif cls is dict:
            if depth <= 1 or not small_json(item, depth - 1):
                return False
        elif cls is not int and cls is not float and cls is not bool and item is not None:
            return False
    return True


def model_json_pieces(model: BaseModel, min_chars: int, *, deep: bool = False) -> list[str] | None:
    """pydantic's JSON of ``model`` (``BaseModel.model_dump_json``) as :func:`json_pieces`, cut at the long texts
    (``min_chars`` or more characters) of its own text fields (a tool result's ``content``, an outcome's
    ``final_answer``) and, when ``deep``, inside its dict and list fields (a recorded call's request and response);
    None when it has none (a model :func:`note_no_long_text` noted has none from :data:`LONG_TEXT_CHARS` up: not
    looked into), or when they are not written as they are (:func:`_plain_fields`)."""
    if min_chars >= LONG_TEXT_CHARS:
        noted = _no_long_text.get(id(model))
        if noted is not None and noted() is model:
            return None
    cls = type(model)
    texts: list[str] = []
    update: dict[str, Any] = {}
    for name in cls.model_fields:
        value = getattr(model, name, None)
        kind = type(value)
        if kind is str:
            if len(value) >= min_chars:
                texts.append(value)
                update[name] = f"{_TOKEN}{len(texts) - 1}"
        elif deep and (kind is dict or kind is list):
            swapped = _swap_long(value, min_chars, texts)
            if swapped is not value:
                update[name] = swapped
    if not update or not _plain_fields(cls, tuple(update)):
        return None
    try:
        for text in texts:
            _check_writable(text)
        skeleton = BaseModel.model_dump_json(model.model_copy(update=update))
    except (TypeError, ValueError):
        return None
    return _pieces(skeleton, texts)


def json_pieces_text(pieces: list[str]) -> str:
    """The whole JSON :func:`json_pieces` stands for, each long string written as its literal once — a slice at a
    time, each slice's literal decoded while it is small, then all joined once (a 50 MB text: 42 ms, against 47
    for one orjson call and its decoding, and 60 for the slices joined as bytes first)."""
    out: list[str] = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            out.append(piece)
            continue
        start = len(out)
        out.append('"')
        out.extend(orjson.dumps(piece[at : at + _LITERAL_SLICE]).decode()[1:-1]
                   for at in range(0, len(piece), _LITERAL_SLICE))
        out.append('"')
        if piece.isascii() and len(piece) >= _REMEMBER_MIN_CHARS:
            _remember(piece, sum(map(len, out[start:])))
    return "".join(out)


def json_pieces_size(pieces: list[str]) -> tuple[int, int]:
    """(characters, UTF-8 bytes) of the JSON :func:`json_pieces` stands for, without writing it."""
    chars = size = 0
    for i, piece in enumerate(pieces):
        if i % 2:
            c, b = literal_size(piece)
        else:
            c = len(piece)
            b = c if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
        chars += c
        size += b
    return chars, size


class CutText(str):
    """A JSON text already cut as the payload policy cuts a span attribute — its first ``limit`` characters and the
    marker — made without writing the whole JSON (:func:`cut_json`): the emitter takes it as cut and exports it as
    a plain ``str``."""

    __slots__ = ()


def cut_json(pieces: list[str] | None, limit: int, marker: str) -> CutText | None:
    """The JSON ``pieces`` stand for (:func:`json_pieces`, :func:`model_json_pieces`; None passes through) cut to
    ``limit`` characters, followed by ``marker`` formatted with ``n``, the number of characters cut."""
    if pieces is None:
        return None
    return CutText(json_pieces_head(pieces, limit) + marker.format(n=json_pieces_size(pieces)[0] - limit))


def json_pieces_head(pieces: list[str], n: int) -> str:
    """The first ``n`` characters of the JSON :func:`json_pieces` stands for (a long string's literal is written
    for as many characters as are wanted: escapes are per character, so its first ``n`` characters are those of the
    literal of the string's first ``n``)."""
    out: list[str] = []
    left = n
    for i, piece in enumerate(pieces):
        if left <= 0:
            break
        part = piece[:left] if i % 2 == 0 else orjson.dumps(piece[:left]).decode()[:left]
        out.append(part)
        left -= len(part)
    return "".join(out)


def attribute_json(value: Any, limit: int | None = None, *, marker: str) -> str:
    """A structured span attribute as compact JSON text, keys in insertion order (pydantic-core: this runs for every
    step); what JSON cannot hold is written as its ``str``.

    With ``limit``, a dict holding a longer text directly under one of its keys (where the adapters put a tool's
    result or a message's text) comes cut to ``limit`` as the payload policy cuts it, followed by ``marker``
    (a :class:`CutText`): the long texts are measured, never written whole (issue 35 "Bad input": a 50 MB tool
    result was written as JSON three times per run only to be cut to 16 K). A long text deeper down is written
    whole and cut afterwards."""
    if limit is not None and type(value) is dict:
        for item in value.values():
            if type(item) is str and len(item) > limit:
                cut = cut_json(json_pieces(value, _attribute_json, limit + 1), limit, marker)
                if cut is not None:
                    return cut
                break
    try:
        return pydantic_core.to_json(value, fallback=str).decode()
    except Exception:  # a value whose own serialiser raises: the standard library decides (or strs it)
        return json.dumps(value, ensure_ascii=False, default=str)


def _attribute_json(value: Any) -> str:
    """:func:`attribute_json`'s JSON, or an error where it would take the standard library's way."""
    return pydantic_core.to_json(value, fallback=str).decode()
