"""Recorded calls: every LLM and tool call of a live run, kept for replay (ARCHITECTURE "Recording").

A run's :class:`CallLog` numbers the calls (``ordinal`` per (agent_key, kind); start and finish order) and keeps
them; ``call = ctx.begin_call(agent_key, "llm"|"tool", request)`` hashes the request at call time, before the
framework mutates it, and ``call.finish(response)`` stores the response (or marks the call ``live_only`` when it
cannot be encoded).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from causaltrace.instrumentation._emitter import internal_error
from causaltrace.instrumentation.steps import as_json, construct, error_of
from causaltrace.recording import canonical_request, encode_response
from causaltrace.recording.long_texts import LONG_TEXT_CHARS, note_no_long_text, small_json
from causaltrace.schema import RecordedCall, Recording

__all__ = ["CallHandle", "CallLog"]

logger = logging.getLogger("causaltrace")


class CallLog:
    """The recorded calls of one run: ordinals per (agent_key, kind), start / finish order, the finished calls."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._lock = threading.Lock()
        self._ordinals: dict[tuple[str, str], int] = {}
        self._start_order = 0
        self._finish_order = 0
        self._calls: list[RecordedCall] = []
        #: The long strings of this run's requests, one object each (``canonical_request(shared=...)``).
        self._shared: dict[str, str] = {}

    def reserve_ordinals(self, agent_key: str, kind: str, count: int) -> list[int]:
        """Reserve ``count`` consecutive ordinals (tool calls numbered in the model's response order)."""
        with self._lock:
            first = self._ordinals.get((agent_key, kind), 0)
            self._ordinals[(agent_key, kind)] = first + count
        return list(range(first, first + count))

    def begin(
        self,
        agent_key: str,
        kind: str,
        request: Any,
        *,
        ordinal: int | None,
        settings: Mapping[str, Any] | None,
        step_id: str | None,
        call_id_pattern: re.Pattern[str] | None,
    ) -> CallHandle:
        """Start recording a call: canonicalise and hash the request now, number the call."""
        if kind not in ("llm", "tool"):
            raise ValueError(f"unknown recorded call kind {kind!r}")
        sizes: list[int] = []
        canonical, digest = canonical_request(request, call_id_pattern=call_id_pattern, shared=self._shared,
                                              sizes=sizes)
        with self._lock:
            if ordinal is None:
                ordinal = self._ordinals.get((agent_key, kind), 0)
                self._ordinals[(agent_key, kind)] = ordinal + 1
            start_order = self._start_order
            self._start_order += 1
        handle = _new_object(CallHandle)  # CallHandle(...) without its dataclass __init__: every field given
        handle.__dict__ = {
            "log": self, "agent_key": agent_key, "kind": kind, "ordinal": ordinal, "request": canonical,
            "request_hash": digest, "start_order": start_order, "settings": dict(settings or {}), "step_id": step_id,
            "call": None, "short_request": bool(sizes) and sizes[0] < LONG_TEXT_CHARS,
        }
        return handle

    def add(self, call: RecordedCall) -> None:
        """Keep a finished call, numbered in finish order (calls finish in any order, on any thread): its
        ``finish_order`` is set here (a call built by :meth:`CallHandle.finish`, not yet shared)."""
        with self._lock:
            call.__dict__["finish_order"] = self._finish_order
            self._finish_order += 1
            self._calls.append(call)

    def recording(self) -> Recording:
        """The calls recorded so far, in start order."""
        with self._lock:
            return Recording(run_id=self.run_id, calls=tuple(sorted(self._calls, key=_START_ORDER)))


_new_object = object.__new__
_set_attr = object.__setattr__
_START_ORDER = attrgetter("start_order")
#: A RecordedCall's fields: the fields-set every call built with all of them shares (as ``steps.construct``'s).
_CALL_FIELDS = set(RecordedCall.model_fields)


#: The scalar types a validated RecordedCall's response holds as they are.
_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_scalar(value: str | int | float) -> str | int | float:
    """A response that is an instance of a str / int / float subclass (smolagents' ``AgentText``) as the plain
    value a validated RecordedCall holds (the call is built without a validation; the framework's object, which may
    carry more state, is not kept)."""
    if isinstance(value, str):
        return str.__str__(value)
    return int(value) if isinstance(value, int) else float(value)


@dataclass
class CallHandle:
    """A recorded LLM or tool call in flight; :meth:`finish` stores its response."""

    log: CallLog
    agent_key: str
    kind: str
    ordinal: int
    request: Any
    request_hash: str
    start_order: int
    settings: dict[str, Any] = field(default_factory=dict)
    step_id: str | None = None
    call: RecordedCall | None = None
    #: The request's canonical JSON is shorter than LONG_TEXT_CHARS: no text in it is long (the Recording's export
    #: need not look for one: ``long_texts.note_no_long_text``).
    short_request: bool = False

    def finish(self, response: Any = None, *, error: BaseException | None = None, step_id: str | None = None) -> None:
        """Record the response (or the error) of this call. A response that cannot be encoded is ``live_only``."""
        try:
            if self.call is not None:
                return
            live_only = False
            try:
                encoded, response_type = encode_response(response)
            except TypeError as exc:
                logger.info("causaltrace: call %s/%s#%d not recordable: %s", self.agent_key, self.kind, self.ordinal, exc)
                encoded, response_type, live_only = None, None, True
            if type(encoded) not in _PLAIN_SCALARS and isinstance(encoded, (str, int, float)):
                encoded = _plain_scalar(encoded)
            # Built without a pydantic validation (the hot path; JsonValue checks walk every node in Python): the
            # request is canonical JSON, the response was just encoded, the settings are made JSON-safe here.
            settings = self.settings
            values = {
                "run_id": self.log.run_id,
                "step_id": step_id or self.step_id,
                "agent_key": self.agent_key,
                "kind": self.kind,
                "ordinal": self.ordinal,
                "request": self.request,
                "request_hash": self.request_hash,
                "response": encoded,
                "response_type": response_type,
                "settings": as_json(settings) if settings else settings,  # {} is JSON as it is
                "start_order": self.start_order,
                "finish_order": -1,  # numbered when it is kept (below: one lock for both)
                "live_only": live_only,
                "error": None if error is None else error_of(error),
            }
            if len(values) == len(_CALL_FIELDS):  # construct(RecordedCall, values), inline: every field is there
                call = _new_object(RecordedCall)
                _set_attr(call, "__dict__", values)
                _set_attr(call, "__pydantic_fields_set__", _CALL_FIELDS)
                _set_attr(call, "__pydantic_extra__", None)
                _set_attr(call, "__pydantic_private__", None)
            else:
                call = construct(RecordedCall, values)
            self.call = call
            log = self.log
            with log._lock:  # log.add(call), inline (every recorded call): numbered in finish order, kept
                call.__dict__["finish_order"] = log._finish_order
                log._finish_order += 1
                log._calls.append(call)
            settings = call.settings
            if self.short_request and small_json(encoded) and (not settings or small_json(settings)):
                note_no_long_text(self.call)  # the Recording's export need not look for a long text in it
        except Exception:
            internal_error("CallHandle.finish")
            return None
