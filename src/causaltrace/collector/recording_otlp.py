"""The Recording in OTLP: a live run's recorded calls travel on its root span, so that a run rebuilt from a live OTLP
stream or pulled from Jaeger can be replayed by ``repair`` without a model (issue 22 item 4).

Encoding ``causaltrace.recording/json-chunks-v1``: the Recording in the store's own JSON form
(``Recording.model_dump_json()``), cut into chunks of at most the payload policy's attribute limit
(``max_attribute_chars``) characters, written as ONE string-array attribute, ``causaltrace.run.recording.chunks``,
beside ``causaltrace.run.recording.encoding``, ``.chars`` (the length of the whole text) and ``.sha256`` (of its
UTF-8 bytes), all on ONE event of the run's root span, ``causaltrace.run.recording`` (issue 33 item 4: until then
they were the root span's own attributes, and Jaeger's tag list opened with a 12-42 k character blob; the importer
reads both). One array attribute rather than one event per chunk: the SDK caps events per span (128 by default) but
not the length of one attribute's list. An importer joins the chunks, checks the length and the digest, and
validates the Recording.

The payload policy governs it like any content. It is not exported — and the root span says why in
``causaltrace.run.recording.omitted``, which an import copies into the Run's metadata as
``causaltrace.recording_omitted`` — when:

* ``disabled``: ``CAUSALTRACE_EXPORT_RECORDING=false``;
* ``hidden inputs`` / ``hidden outputs``: the policy hides inputs or outputs (a recording holds both);
* ``redacted``: the redaction callback (which sees the whole text under the key ``causaltrace.run.recording``, and
  whose answer is what gets chunked) dropped it or raised;
* ``too large: N bytes > M``: the text is above the ceiling ``CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES`` (default
  2 MiB: an OTLP/gRPC receiver takes 4 MiB per request by default, and the run's other spans share the batch).

An import whose chunks do not add up (a backend that cut them, a missing part) says ``damaged: …`` the same way
instead of failing. Exporting it adds attribute bytes to the root span only: it goes through the same batch
processor, under the same export timeouts, so it never holds a process's exit longer than any span does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from causaltrace import semconv
from causaltrace.recording.long_texts import (
    LONG_TEXT_CHARS,
    json_literal,
    json_pieces_size,
    json_pieces_text,
    model_json_pieces,
)
from causaltrace.schema import Recording

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENCODING",
    "EXPORT_CHUNK_CHARS",
    "OMITTED_METADATA_KEY",
    "RecordingExport",
    "apply_to_run_fields",
    "recording_attributes",
    "recording_from_attributes",
    "take_call_texts",
    "take_for_store",
    "take_literals",
]

logger = logging.getLogger("causaltrace")

ENCODING = "causaltrace.recording/json-chunks-v1"
#: Chunk size of a stored run's Recording in ``causaltrace export`` (the default attribute limit).
EXPORT_CHUNK_CHARS = 16384
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
#: Where an imported Run says why its trace carried no Recording.
OMITTED_METADATA_KEY = "causaltrace.recording_omitted"


@dataclass(frozen=True, slots=True)
class RecordingExport:
    """Whether a live run's Recording is exported on its root span, and the largest one that is."""

    enabled: bool = True
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RecordingExport:
        """``CAUSALTRACE_EXPORT_RECORDING`` (default true) and ``CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES``."""
        env = os.environ if env is None else env
        enabled = (env.get("CAUSALTRACE_EXPORT_RECORDING") or "true").strip().lower() not in ("0", "false", "no", "off")
        raw = (env.get("CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES") or "").strip()
        max_bytes = DEFAULT_MAX_BYTES
        if raw:
            try:
                max_bytes = max(0, int(raw))
            except ValueError:
                logger.warning("causaltrace: CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES=%r is not an integer; using %d",
                               raw, DEFAULT_MAX_BYTES)
        return cls(enabled=enabled, max_bytes=max_bytes)


def _omitted(reason: str) -> dict[str, Any]:
    return {semconv.RECORDING_OMITTED: reason}


def _recording_json(recording: Recording, max_bytes: int | None, literals: dict[int, tuple[str, bytes | bytearray]] | None = None
                    ) -> tuple[str | None, int]:
    """``(recording.model_dump_json(), its UTF-8 length)`` built one call at a time; the text is None once the
    length passes ``max_bytes`` (the rest is only measured, one call's JSON at a time). A run whose tool returned
    20 MB carries it in every later request: building the whole text (then its bytes) only to find it above the
    ceiling cost the process about twice the recording's size in memory at the end of every such run (issue 21
    item 14). A call holding a long text (a 50 MB tool result) is measured without its JSON being written, and
    written only if the recording stays under the ceiling (issue 35 "Bad input"); the long texts' JSON literals
    go to ``literals`` (id -> (text, literal)) when given: the store's chunks are those very literals."""
    head = Recording(run_id=recording.run_id).model_dump_json()  # {"run_id":…,"calls":[]}: the calls go between
    size = len(head.encode("utf-8", "surrogatepass")) + max(0, len(recording.calls) - 1)  # and the commas
    parts: list[str] | None = []
    for call in recording.calls:
        pieces = model_json_pieces(call, LONG_TEXT_CHARS, deep=True)
        if pieces is None:
            text: str | None = call.model_dump_json()
            size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))  # type: ignore[union-attr]
        else:
            text = None
            if literals is not None:
                for long in pieces[1::2]:  # a text later requests carry again is one object: written once
                    if id(long) not in literals:
                        literals[id(long)] = (long, json_literal(long))
            size += json_pieces_size(pieces)[1]
        if parts is not None:
            if max_bytes is not None and size > max_bytes:
                parts = None  # too large: what is held so far goes, the rest is only measured
            else:
                parts.append(text if text is not None else json_pieces_text(pieces))  # type: ignore[arg-type]
    if parts is None:
        return None, size
    if size <= _KEPT_MAX_BYTES:
        _keep(_TEXTS, recording, tuple(parts))
    return head[:-2] + ",".join(parts) + "]}", size


# The calls' JSON, made once (issue 35 item 2): the export above writes every recorded call's JSON at the run's end;
# the store's writer, which writes each call as a row of that very JSON (``recording_chunks.split_calls``), takes it
# from here instead of serializing the calls again — and, for a recording with long texts, the JSON literals of
# those texts, which the store keeps as chunks. Kept per Recording object only while that object lives (a weak
# reference drops the entry with it), for a few recordings at a time, and taken — removed — by the store.
_KEPT_MAX_BYTES = 4 * 1024 * 1024
_KEPT_MAX_RECORDINGS = 16
_TEXTS, _LITERALS = "texts", "literals"
_kept: dict[tuple[str, int], tuple[weakref.ref[Recording], Any]] = {}
_kept_lock = threading.Lock()


def _keep(kind: str, recording: Recording, value: Any) -> None:
    """Keep ``value`` for the store (never raises: the export does not depend on it)."""
    key = (kind, id(recording))
    try:
        ref = weakref.ref(recording, lambda _, key=key: _kept.pop(key, None))  # type: ignore[misc]
        with _kept_lock:
            while len(_kept) >= _KEPT_MAX_RECORDINGS:
                _kept.pop(next(iter(_kept)), None)
            _kept[key] = (ref, value)
    except Exception:  # a weak reference's callback (a Recording collected meanwhile) changed the table: not kept
        logger.debug("causaltrace: the %s of run %s are not kept for the store", kind, recording.run_id, exc_info=True)


def _take(kind: str, recording: Recording) -> Any:
    with _kept_lock:
        entry = _kept.pop((kind, id(recording)), None)
    return None if entry is None or entry[0]() is not recording else entry[1]


def take_call_texts(recording: Recording) -> tuple[str, ...] | None:
    """The JSON of each of ``recording``'s calls (``call.model_dump_json()``, in order) when the export already made
    it, else None; taken once (the entry is removed)."""
    texts = _take(_TEXTS, recording)
    return texts if texts is not None and len(texts) == len(recording.calls) else None


def take_for_store(recording: Recording) -> tuple[tuple[str, ...] | None,
                                                  dict[int, tuple[str, bytes | bytearray]] | None]:
    """:func:`take_call_texts` and :func:`take_literals` at once (the store's writer takes both for each run: one
    look under the lock instead of two calls each)."""
    key = id(recording)
    with _kept_lock:
        texts = _kept.pop((_TEXTS, key), None)
        literals = _kept.pop((_LITERALS, key), None)
    texts = None if texts is None or texts[0]() is not recording else texts[1]
    return (texts if texts is not None and len(texts) == len(recording.calls) else None,
            None if literals is None or literals[0]() is not recording else literals[1])


def take_literals(recording: Recording) -> dict[int, tuple[str, bytes | bytearray]] | None:
    """The JSON literals of ``recording``'s long texts (id of the text -> (text, literal)) the export wrote while it
    measured them (``recording_attributes(for_store=True)``), else None; taken once."""
    return _take(_LITERALS, recording)


def recording_attributes(
    recording: Recording | None,
    *,
    settings: RecordingExport,
    chunk_chars: int,
    hide_inputs: bool = False,
    hide_outputs: bool = False,
    redact: Callable[[str, Any], Any] | None = None,
    for_store: bool = False,
) -> dict[str, Any]:
    """The root span attributes that carry ``recording`` (see the module docstring), or say why they do not.

    Empty for a run without a recording (recording off). Never raises: a failure to encode is an omission.
    ``for_store``: the run is stored next, so the JSON literals of its long texts, written here to measure them,
    are kept for the store's chunks (:func:`take_literals`).
    """
    if recording is None:
        return {}
    if not settings.enabled:
        return _omitted("disabled")
    if hide_inputs or hide_outputs:
        return _omitted("hidden inputs" if hide_inputs else "hidden outputs")
    try:
        # with a redaction callback the whole text is needed whatever its size: the callback's answer is the one sent
        literals: dict[int, tuple[str, bytes | bytearray]] | None = {} if for_store else None
        whole, size = _recording_json(recording, settings.max_bytes if redact is None else None, literals)
        if literals:
            _keep(_LITERALS, recording, literals)
        if whole is None:
            return _omitted(f"too large: {size} bytes > {settings.max_bytes}")
        text: Any = whole
    except Exception:  # a recording that cannot be encoded is not exported (it is still stored)
        logger.warning("causaltrace: the recording of run %s could not be encoded", recording.run_id, exc_info=True)
        return _omitted("unencodable")
    if redact is not None:
        try:
            text = redact(semconv.RUN_RECORDING, text)
        except Exception:
            logger.warning("causaltrace: redaction callback failed on %s; not exported", semconv.RUN_RECORDING,
                           exc_info=True)
            return _omitted("redacted")
        if text is None:
            return _omitted("redacted")
        text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > settings.max_bytes:
        return _omitted(f"too large: {len(data)} bytes > {settings.max_bytes}")
    step = max(1, chunk_chars)
    return {
        semconv.RECORDING_ENCODING: ENCODING,
        semconv.RECORDING_CHARS: len(text),
        semconv.RECORDING_SHA256: hashlib.sha256(data).hexdigest(),
        semconv.RECORDING_CHUNKS: [text[i : i + step] for i in range(0, len(text), step)] or [""],
    }


def _chunks(raw: Any) -> list[str] | None:
    """The chunk list as written, or as a backend that stores arrays as JSON text gives it back."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return None
    if isinstance(raw, (list, tuple)) and all(isinstance(c, str) for c in raw):
        return list(raw)
    return None


def recording_from_attributes(attrs: Mapping[str, Any]) -> tuple[Recording | None, str | None]:
    """(the Recording a root span carries, None) or (None, why it carries none); (None, None) when the span says
    nothing about a recording (recording off, or a trace written before this encoding)."""
    if semconv.RECORDING_CHUNKS not in attrs:
        omitted = attrs.get(semconv.RECORDING_OMITTED)
        return None, str(omitted) if omitted else None
    encoding = attrs.get(semconv.RECORDING_ENCODING)
    if encoding != ENCODING:
        return None, f"damaged: unknown encoding {encoding!r}"
    chunks = _chunks(attrs.get(semconv.RECORDING_CHUNKS))
    if chunks is None:
        return None, "damaged: the chunks are not a list of texts"
    text = "".join(chunks)
    try:
        expected = int(attrs.get(semconv.RECORDING_CHARS, -1))
    except (TypeError, ValueError):
        expected = -1
    if len(text) != expected:
        return None, f"damaged: {len(text)} characters arrived, {expected} were sent"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if digest != attrs.get(semconv.RECORDING_SHA256):
        return None, "damaged: the sha256 digest does not match"
    try:
        return Recording.model_validate_json(text), None
    except ValueError as exc:  # redacted into something else, or not a Recording
        return None, f"damaged: not a recording ({str(exc).splitlines()[0]})"


def apply_to_run_fields(fields: dict[str, Any], attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Give the Run fields read from a root span (``semconv.run_fields_from_attributes``) the Recording its chunks
    carry, or note in its metadata why there is none; a recording already in the fields (a stored run's export,
    ``causaltrace.run.recording``) wins. Returns ``fields``."""
    if fields.get("recording") is not None:
        return fields
    recording, omitted = recording_from_attributes(attrs)
    if recording is not None:
        if recording.run_id != fields.get("run_id"):
            omitted = f"damaged: the recording is of run {recording.run_id!r}"
        else:
            fields["recording"] = recording
            return fields
    if omitted:
        fields["metadata"] = {**(fields.get("metadata") or {}), OMITTED_METADATA_KEY: omitted}
    return fields
