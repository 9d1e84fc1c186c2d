"""Recording functions: canonical requests, request-local id aliases, response envelopes (ARCHITECTURE "Recording").

What the recording hot path and playback compute over a model or tool request and its response; the data model
these values live in (:class:`~causaltrace.schema.RecordedCall`, :class:`~causaltrace.schema.Recording`) is in
``schema.py``.

* :func:`canonical_request` / :func:`canonicalize_request`: the request as plain JSON, key-sorted, tool-call ids
  replaced by request-local aliases (``call#0``, ``call#1``… by first appearance), ``created_at`` dropped — hashed
  at call time, before the framework mutates it (:func:`request_hash`: SHA-256 of the compact JSON).
* :func:`encode_response` / :func:`decode_response`: a response stored as JSON where possible, else a typed
  envelope (type name + model JSON or base64 pickle), served back as the same type.
* :mod:`causaltrace.recording.long_texts`: long texts in JSON, written once (a 50 MB tool result is measured once,
  cut to the span attribute limit or sized for the Recording's export without its JSON being written whole).

This package imports no other causaltrace module: the trunk's data model imports it, never the other way.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import importlib
import json
import os
import pickle
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, get_args

import orjson
import pydantic_core
from pydantic import BaseModel, JsonValue

from causaltrace.recording.long_texts import LONG_TEXT_CHARS, json_pieces_text, model_json_pieces

__all__ = [
    "canonical_json",
    "canonical_request",
    "canonicalize_request",
    "decode_response",
    "encode_response",
    "request_hash",
]


_CALL_ID_KEYS = ("id", "call_id", "tool_call_id")


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the canonical text that request hashes are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, datetime):
        return value.isoformat()
    return repr(value)


def _plain_json_bytes(value: Any) -> bytes:
    """Compact JSON of ``value`` (pydantic models, dataclasses, containers…), serialised by pydantic-core in Rust.

    The recording hot path: about 8x faster than ``json.dumps`` calling ``model_dump`` per object. Types it does not
    know go through :func:`_json_default`; should that fail, the plain ``json.dumps`` path decides. Sets serialise in
    iteration order here (requests carry none in practice); bytes as URL-safe base64.
    """
    try:
        return pydantic_core.to_json(value, fallback=_json_default, bytes_mode="base64")
    except Exception:  # a serializer raising on an odd object: the slow path handles (or reprs) it
        return canonical_json(value).encode()


def _plain_json(value: Any) -> Any:
    """``value`` as fresh plain JSON data (dicts, lists, str, numbers…), converted by pydantic-core in Rust.

    The same data as parsing :func:`_plain_json_bytes`, without the text round trip; nothing is shared with
    ``value`` (the framework may mutate its objects after the call).
    """
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_json_default, bytes_mode="base64")
    except Exception:  # a serializer raising on an odd object: the slow path handles (or reprs) it
        return json.loads(canonical_json(value))


def _orjson_exact(value: Any) -> bool:
    """True when orjson writes ``value`` exactly as :func:`canonical_json` does: strings, integers, booleans, None,
    dicts, lists and tuples only. orjson formats floats its own way (``1e-7`` where the standard library writes
    ``1e-07``), so any float (or other type) sends the data to the standard encoder; what orjson refuses (integers
    beyond 64 bits, lone surrogates, non-string keys) raises and goes there too. One call per request: the
    containers are walked a level at a time from lists of their own (this walks every request of a run; a call per
    container was ~6 Python calls per framework event, issue 35; a stack of (container, depth) pairs was a pop, a
    push and a tuple per container, ~20 % slower), scalars checked in their container's loop; nesting deeper than
    200 containers is not orjson's."""
    cls = type(value)
    if cls is not dict and cls is not list and cls is not tuple:
        return cls is str or cls is int or cls is bool or value is None
    level: list[Any] = [value]  # the containers at ``depth``, walked a level at a time (no pop, no tuple per one)
    depth = 0
    while level:
        below: list[Any] = []
        push = below.append
        for node in level:
            for item in node.values() if type(node) is dict else node:
                cls = type(item)
                if cls is str or cls is int or cls is bool or item is None:
                    continue
                if (cls is not dict and cls is not list and cls is not tuple) or depth >= 200:
                    return False
                push(item)
        level = below
        depth += 1
    return True


def _orjson_text(plain: Any) -> str | None:
    """:func:`canonical_json` of ``plain`` (JSON data, as :func:`_plain_json` makes it) written by orjson (Rust, ~10x
    faster than the standard library's key-sorting encoder), or None when orjson would not write the same text.
    orjson parses back exactly what it wrote (it reads integers beyond 64 bits as floats, but never writes them)."""
    if not _orjson_exact(plain):
        return None
    try:
        return orjson.dumps(plain, option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, ValueError):  # JSONEncodeError (a TypeError): big integers, lone surrogates, odd keys
        return None


def _canonical_text(plain: Any) -> tuple[str, bool]:
    """:func:`canonical_json` of plain JSON data, the same text, written by orjson when that is exact; and whether
    orjson wrote it (then orjson may parse it back)."""
    text = _orjson_text(plain)
    return (canonical_json(plain), False) if text is None else (text, True)


_JSON_STRING_BODY = r'(?:[^"\\]|\\.)*'


@functools.lru_cache(maxsize=16)
def _drop_regex(keys: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(key) for key in keys)
    scalar = rf'(?:"{_JSON_STRING_BODY}"|[-+\w.]+)(?=[,}}])'
    return re.compile(rf'(?<=\{{)"(?:{names})":{scalar},?|,"(?:{names})":{scalar}')


@functools.lru_cache(maxsize=16)
def _key_markers(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``"key":`` of each key: how a key stands in compact JSON text."""
    return tuple(f'"{key}":' for key in keys)


#: A whole JSON string literal from its opening quote's end: where a candidate id's literal ends (a key if ``:`` follows).
_STRING_TAIL = re.compile(r'(?:[^"\\]|\\.)*"')
#: The escapes :func:`canonical_json` writes before a character that is not a word character in the decoded text.
_WORD_ESCAPES = frozenset("bfnrt")
#: Ids that could also match a bare JSON token (a number, true/false/null): these requests are walked instead.
_BARE_TOKEN = re.compile(r"[-+.0-9eE]+|true|false|null")
_ID_TOKEN = re.compile(r"[\w-]+")


def _is_word(char: str) -> bool:
    r"""``char`` matches ``[\w-]`` (a character an id token is made of)."""
    return char.isalnum() or char in "_-"


def _escaped(text: str, pos: int) -> bool:
    """True when the character at ``pos`` follows an odd run of backslashes (it is part of an escape)."""
    run = 0
    while pos - run - 1 >= 0 and text[pos - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _string_end(text: str, pos: int) -> int:
    """The index just past the closing quote of the JSON string literal that ``pos`` is inside (-1 if none): the
    first ``"`` from ``pos`` that no backslash escapes, found with ``str.find`` (ids sit in long message texts)."""
    quote = text.find('"', pos)
    while quote != -1 and text[quote - 1] == "\\" and _escaped(text, quote):  # no backslash before: no call
        quote = text.find('"', quote + 1)
    return quote + 1 if quote != -1 else -1


@functools.lru_cache(maxsize=64)
def _ids_editable(ids: tuple[str, ...]) -> bool:
    r"""Whether known ids can be aliased on the JSON text: each a plain ``[\w-]+`` token (written the same in the
    text as in the decoded strings) that cannot be mistaken for a bare JSON token (a number, true/false/null)."""
    return all(_ID_TOKEN.fullmatch(i) and not _BARE_TOKEN.fullmatch(i) for i in ids)


@functools.lru_cache(maxsize=64)
def _shared_prefix(ids: tuple[str, ...]) -> tuple[str, frozenset[str] | None]:
    r"""(the start several ids share, the ids) when it is long enough to scan for (4 characters or more), else
    ("", None). The ids are editable (:func:`_ids_editable`: ``[\w-]+`` tokens), so an id stands at a place of the
    text exactly when the run of word characters (``[\w-]``, :func:`_is_word`'s) from there is that id."""
    prefix = os.path.commonprefix(ids) if len(ids) > 1 else ""
    return (prefix, frozenset(ids)) if len(prefix) >= 4 else ("", None)


def _id_matches(text: str, ids: tuple[str, ...]) -> list[tuple[int, int, str | None]]:
    """``(start, end, key)`` of each candidate id on compact JSON text, left to right, none overlapping.

    A candidate is either a string under an id key (``key`` names it; ``start`` is the key's opening quote) or a
    known id not followed by a word character (``key`` None). Found with one ``str.find`` scan per id and one for
    the id keys (the ``id":"`` they all end with) rather than one alternation regex, which Python's regex engine
    tries at every ``"`` of the text: ~5x faster on a 10 KB request; ids that share a start (a run's call ids, which
    grow with its tool calls: one scan each of every later request) are found with one scan for that start
    (:func:`_shared_prefix`). Overlaps resolve as that regex would: the leftmost candidate wins, and of several ids
    at one place the longest.
    """
    found: list[tuple[int, int, int, str | None]] = []  # (start, -length, end, key): sorts leftmost, longest first
    pos = text.find('id":"')
    while pos != -1:
        for key in _CALL_ID_KEYS:
            begin = pos + 1 - len(key)  # the opening quote of the key, if it is this key
            if begin >= 0 and text[begin] == '"' and text.startswith(key, begin + 1):
                tail = _STRING_TAIL.match(text, pos + 5)
                if tail is not None:
                    found.append((begin, begin - tail.end(), tail.end(), key))
                break
        pos = text.find('id":"', pos + 1)
    prefix, known = _shared_prefix(ids)
    if known is not None:  # ids with a common start (a run's call ids): one scan for it, not one per id
        pos = text.find(prefix)
        while pos != -1:
            token = _ID_TOKEN.match(text, pos)  # its word characters: an id here is all of them (none follows)
            if token is not None and token.group() in known:
                found.append((pos, pos - token.end(), token.end(), None))
            pos = text.find(prefix, pos + 1)
    else:
        for ident in ids:
            pos = text.find(ident)
            while pos != -1:
                end = pos + len(ident)
                if end == len(text) or not (text[end].isalnum() or text[end] in "_-"):  # _is_word, inline
                    found.append((pos, -len(ident), end, None))
                pos = text.find(ident, pos + 1)
    found.sort()
    matches: list[tuple[int, int, str | None]] = []
    cursor = 0
    for start, _, end, key in found:
        if start >= cursor:
            matches.append((start, end, key))
            cursor = end
    return matches


def _edit_canonical_text(text: str, drop: tuple[str, ...], ids: tuple[str, ...] = ()) -> str | None:
    r"""Alias call ids and drop ``drop`` keys on compact, key-sorted JSON text (the recording hot path).

    In compact JSON an unescaped ``"`` only ever bounds a string, so a key and its string value are found exactly.
    ``ids`` are known call ids to alias wherever they occur as whole tokens inside string values (smolagents writes
    them into message text); keys are left alone, as the walk does. Returns ``text`` itself when there is nothing to
    do, None when the text cannot be edited exactly (a dropped key holds an object or array, an id is not a plain
    token (:func:`_ids_editable`), or a match stands for something else in the decoded strings): the caller walks
    the data instead.
    """
    ids = tuple(filter(None, ids))
    if ids and not _ids_editable(ids):
        return None
    if drop and any(map(text.__contains__, _key_markers(drop))):
        text = _drop_regex(drop).sub("", text)
        if any(map(text.__contains__, _key_markers(drop))):
            return None
    aliases: dict[str, str] = {}
    pieces: list[str] = []
    last = 0
    for start, end, key in _id_matches(text, ids):
        if key is not None:  # a string under an id key: the whole value
            value = text[start + len(key) + 4 : end - 1]
            if not value:
                continue
            replacement = f'"{key}":"{aliases.setdefault(value, f"call#{len(aliases)}")}"'
        else:
            before = text[start - 1]
            if before.isalnum() or before in "_-":  # _is_word, inline (every candidate id)
                # A word character before: in the decoded string too, unless it ends an escape (``\n``, ``\uXXXX``).
                # Every character of the match is a word character, so no decoded match starts inside it either.
                at = start - 2 if before in _WORD_ESCAPES and text[start - 2] == "\\" else start - 6
                if text[at] != "\\" or _escaped(text, at) or (at == start - 6 and text[at + 1] != "u"):
                    continue
            elif before == "\\" and _escaped(text, start):  # starts inside an escape (``\n`` + an id beginning with "n")
                return None
            closed = _string_end(text, end)
            if closed == -1 or text.startswith(":", closed):  # inside a key
                return None
            ident = text[start:end]
            replacement = aliases.setdefault(ident, f"call#{len(aliases)}")
        pieces.append(text[last:start])
        pieces.append(replacement)
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def _canonical_walk(plain: Any, call_id_pattern: Any, drop: tuple[str, ...]) -> Any:
    """:func:`canonicalize_request` on parsed JSON data (the reference implementation, and the fallback)."""
    aliases: dict[str, str] = {}
    dropped = set(drop)

    def alias(value: str) -> str:
        if value not in aliases:
            aliases[value] = f"call#{len(aliases)}"
        return aliases[value]

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key in sorted(node):
                if key in dropped:
                    continue
                val = node[key]
                if key in _CALL_ID_KEYS and isinstance(val, str) and val:
                    out[key] = alias(val)
                else:
                    out[key] = walk(val)
            return out
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, str) and call_id_pattern is not None:
            return call_id_pattern.sub(lambda m: alias(m.group(0)), node)
        return node

    return walk(plain)


#: From how many characters of text an edited canonical request is made by walking its data, not parsed back.
_WALK_MIN_TEXT = 65_536
#: A canonical request's text from which its long strings are shared (``canonical_request(shared=...)``), and how
#: long such a string is: below these, looking costs more than it could save.
_SHARE_MIN_TEXT = 65_536
_SHARE_MIN_CHARS = 4096


def _share_long_strings(node: Any, shared: dict[str, str]) -> None:
    """Replace, in place, every long string inside ``node`` (fresh JSON data) by the equal string object ``shared``
    already holds (adding the new ones): one object for a text that many requests carry."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        if isinstance(value, str):
            if len(value) >= _SHARE_MIN_CHARS:
                node[key] = shared.setdefault(value, value)
        elif isinstance(value, (dict, list)):
            _share_long_strings(value, shared)


def canonical_request(
    request: Any,
    *,
    call_id_pattern: Any = None,
    drop_keys: Iterable[str] = ("created_at",),
    shared: dict[str, str] | None = None,
    sizes: list[int] | None = None,
) -> tuple[Any, str]:
    """``(canonicalize_request(request), request_hash(...))`` in one pass: the recording hot path.

    The request becomes plain JSON data once (pydantic-core), its key-sorted compact text is edited in place and
    hashed; the data is parsed back only when the text changed. A ``call_id_pattern`` that names its ``ids`` (the
    smolagents adapter's) is applied on the text too; any other pattern (a bare regex) makes the data walked.

    ``shared`` (one dict per run: ``CallLog``) makes the long strings of a large request (64 K characters of text or
    more) the same objects as the equal strings of earlier requests: a model request carries the whole
    conversation, so a 20 MB tool result would otherwise be held once per later request (issue 21 item 14).

    ``sizes``: the length of the canonical JSON text is appended to it (no text inside the request is longer: a
    caller can tell, without a walk, that the request holds no long text).
    """
    drop = tuple(drop_keys)
    try:  # _plain_json, inline (every recorded call)
        plain = pydantic_core.to_jsonable_python(request, fallback=_json_default, bytes_mode="base64")
    except Exception:  # a serializer raising on an odd object: the slow path handles (or reprs) it
        plain = json.loads(canonical_json(request))
    text = None  # _canonical_text and _orjson_text, inline
    if _orjson_exact(plain):
        try:
            text = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS).decode()
        except (TypeError, ValueError):  # JSONEncodeError (a TypeError): big integers, lone surrogates, odd keys
            pass
    by_orjson = text is not None
    if text is None:
        text = canonical_json(plain)
    ids = () if call_id_pattern is None else getattr(call_id_pattern, "ids", None)
    edited = None if ids is None else _edit_canonical_text(text, drop, tuple(ids))
    if edited is None:
        canonical = _canonical_walk(plain, call_id_pattern, drop)
        written = _canonical_text(canonical)[0]  # request_hash, inline: its text's length is wanted too
        digest = hashlib.sha256(written.encode()).hexdigest()
        if sizes is not None:
            sizes.append(len(written))
    else:
        if edited is not text and call_id_pattern is None and len(text) >= _WALK_MIN_TEXT:
            # a large request is aliased on its data: the walk visits its containers and shares its texts, where
            # parsing the edited text back copied every one (a 50 MB tool result, once per later model request)
            plain = _canonical_walk(plain, None, drop)
        elif edited is not text:
            plain = orjson.loads(edited) if by_orjson else json.loads(edited)
        canonical, digest = plain, hashlib.sha256(edited.encode()).hexdigest()
        if sizes is not None:
            sizes.append(len(edited))
    if shared is not None and len(text) >= _SHARE_MIN_TEXT:
        _share_long_strings(canonical, shared)
    return canonical, digest


def canonicalize_request(
    request: Any,
    *,
    call_id_pattern: Any = None,
    drop_keys: Iterable[str] = ("created_at",),
) -> Any:
    """Return a JSON-able copy of ``request`` with tool-call ids replaced by request-local aliases.

    ARCHITECTURE "Recording": ids found under ``id`` / ``call_id`` / ``tool_call_id`` keys (and, when
    ``call_id_pattern`` is given, occurrences of that pattern inside strings — smolagents puts ids in message text)
    become ``call#0``, ``call#1``… numbered by first appearance within this request (in key-sorted order);
    ``created_at`` is dropped. A message ``id`` (AutoGen's uuid) never reaches a model request, so every ``id``
    value is treated as a call id.
    """
    return canonical_request(request, call_id_pattern=call_id_pattern, drop_keys=drop_keys)[0]


def request_hash(canonical_request: Any) -> str:
    """SHA-256 (hex) of the compact, key-sorted JSON of an already canonicalised request."""
    return hashlib.sha256(_canonical_text(canonical_request)[0].encode()).hexdigest()


def encode_response(value: Any) -> tuple[JsonValue, str | None]:
    """Encode a response for the Recording: ``(json, None)`` when it is plain JSON, else a typed envelope.

    A pydantic model whose class survives a JSON round trip (checked once per class) is stored readable, as
    ``{"type": "<module>.<qualname>", "json": "<model JSON>"}``; anything else as ``{"type": …, "pickle_b64": …}``.
    The second element names the type; :func:`decode_response` serves it back as the same type. Raises ``TypeError``
    when it cannot be encoded at all (the caller then marks the entry ``live_only``).
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        return value, None
    if isinstance(value, (list, dict)):
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            pass
        else:
            return json.loads(text), None
    cls = type(value)
    type_name = f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(value, BaseModel) and (_ROUND_TRIPS.get(cls) or (cls not in _ROUND_TRIPS and _json_round_trips(cls, value))):
        try:  # its model_dump_json(), its long text fields (a 50 MB tool result) written by orjson when the class
            # leaves its JSON to pydantic (model_json_pieces)
            pieces = model_json_pieces(value, LONG_TEXT_CHARS) if cls.model_dump_json is BaseModel.model_dump_json \
                else None
            return {"type": type_name, "json": value.model_dump_json() if pieces is None else json_pieces_text(
                pieces)}, type_name
        except Exception:  # a field whose serialiser fails on this value: pickle it
            pass
    try:
        blob = pickle.dumps(value)
    except Exception as exc:  # pickling user objects can raise anything
        raise TypeError(f"cannot record a {type_name}: {exc}") from exc
    return {"type": type_name, "pickle_b64": base64.b64encode(blob).decode()}, type_name


#: Pydantic model classes → whether their instances are stored as JSON (decided once per class).
_ROUND_TRIPS: dict[type, bool] = {}


def _json_round_trips(cls: type[BaseModel], sample: BaseModel) -> bool:
    """Whether ``cls`` instances can be stored as JSON: no state JSON leaves out anywhere in the class or the models
    and dataclasses its fields hold (private attributes, excluded fields, fields outside ``__init__``), the class
    importable by name, and an instance coming back equal from its own JSON (the first that does decides for the
    class; one that does not is pickled alone)."""
    known = _ROUND_TRIPS.get(cls)
    if known is None:
        try:
            complete = _json_complete(cls, set()) and _class_named(f"{cls.__module__}.{cls.__qualname__}") is cls
        except Exception:
            complete = False
        if not complete:
            _ROUND_TRIPS[cls] = False
            return False
        try:
            known = cls.model_validate_json(sample.model_dump_json()) == sample
        except Exception:
            known = False
        if known:  # a sample that fails (a lone surrogate in a text) decides only for itself, never for the class:
            _ROUND_TRIPS[cls] = True  # the first sample seen used to pin every later instance to pickle
    return known


def _json_complete(tp: Any, seen: set[int]) -> bool:
    """True when nothing of a ``tp`` value is lost in its JSON, as far as the type itself tells."""
    if id(tp) in seen:
        return True
    seen.add(id(tp))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp.__private_attributes__ or any(f.exclude for f in tp.model_fields.values()):
            return False
        return all(_json_complete(f.annotation, seen) for f in tp.model_fields.values())
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        fields = dataclasses.fields(tp)
        return all(f.init for f in fields) and all(_json_complete(f.type, seen) for f in fields)
    return all(_json_complete(arg, seen) for arg in get_args(tp))


def _class_named(type_name: str) -> Any:
    """The class a ``<module>.<qualname>`` names (the longest importable module prefix, then attributes)."""
    parts = type_name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no module for {type_name!r}")


def decode_response(value: JsonValue, response_type: str | None) -> Any:
    """Inverse of :func:`encode_response`: a fresh object each call (agents mutate what they get back)."""
    if response_type is None:
        return json.loads(json.dumps(value))
    if isinstance(value, dict) and isinstance(value.get("json"), str):
        return _class_named(response_type).model_validate_json(value["json"])
    if not isinstance(value, dict) or not isinstance(value.get("pickle_b64"), str):
        raise ValueError(f"recorded {response_type} response has no pickle_b64 or json envelope")
    return pickle.loads(base64.b64decode(value["pickle_b64"]))
