"""The typed data model every part of causaltrace shares (ARCHITECTURE "Steps", "Shared contracts", "Recording").

Everything persisted, exported or sent to an LLM is a frozen pydantic model with ``extra="forbid"``: a Step, a Run,
its Outcome and Verdict, the Recording of LLM and tool calls, an Intervention, a CodeResult, a ReplayResult, a
Diagnosis and a RepairPair.

Design decisions:

* One ``Step`` class with a ``kind`` literal rather than a discriminated union per kind: the payload of every kind
  lives in ``inputs`` / ``outputs`` (ARCHITECTURE "Where each kind keeps its payload"), so a per-kind class would
  add no field and make importers and the store branch on kind for nothing. Kind-specific rules are validated.
* Sequences are tuples so a frozen model really is immutable; JSON objects stay dicts (they are payload).
* ``Run.graph()`` builds the networkx DiGraph: nodes are step ids with the step's fields, edges go producer →
  consumer with the dependency ``kind``; the parent relation is on each node (``parent_step_id``) and available
  as a separate tree via :meth:`Run.parent_tree`.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import importlib
import json
import pickle
import re
from collections.abc import Iterable
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, get_args

import orjson
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "CANDIDATE_KINDS",
    "DEPENDENCY_KINDS",
    "ERROR_CATEGORIES",
    "STEP_KINDS",
    "Annotations",
    "Candidate",
    "CodeResult",
    "Cost",
    "Dependency",
    "DependencyKind",
    "Diagnosis",
    "EvidenceItem",
    "Intervention",
    "Outcome",
    "OutcomeStatus",
    "RecordedCall",
    "Recording",
    "RepairPair",
    "ReplayResult",
    "Run",
    "Step",
    "StepError",
    "StepKind",
    "StepStatus",
    "TokenUsage",
    "Verdict",
    "VerifiedBy",
    "action_signature",
    "canonical_json",
    "canonical_request",
    "canonicalize_request",
    "decode_response",
    "encode_response",
    "request_hash",
]

StepKind = Literal[
    "task",
    "llm_response",
    "reasoning",
    "message",
    "tool_call",
    "tool_response",
    "code_execution",
    "memory_access",
    "planning",
    "handoff",
    "speaker_selection",
    "final_answer",
    "error",
    "agent_turn",
]
STEP_KINDS: tuple[str, ...] = get_args(StepKind)

DependencyKind = Literal[
    "produced_by",
    "saw",
    "observed",
    "continues",
    "tool_result_of",
    "executes",
    "delegated_by",
    "answer_of",
    "handoff_from",
    "selected_by",
    "memory_read",
    "retry_of",
]
DEPENDENCY_KINDS: tuple[str, ...] = get_args(DependencyKind)

#: Steps that attribution and interventions may choose (ARCHITECTURE "Steps"). An llm_response is a candidate only
#: when it produced no child step; see :meth:`Run.candidate_steps`.
CANDIDATE_KINDS: frozenset[str] = frozenset(
    {
        "tool_call",
        "message",
        "reasoning",
        "handoff",
        "speaker_selection",
        "final_answer",
        "tool_response",
        "code_execution",
        "llm_response",
        # Not in ARCHITECTURE's list, added on purpose: a smolagents planning step is model-written content that a
        # later agent executes (the "plan author vs executor" rule needs it as a candidate).
        "planning",
    }
)

StepStatus = Literal["ok", "error", "unset"]
OutcomeStatus = Literal["success", "failure", "unknown", "incomplete"]
StopReason = Literal["normal", "limit", "error"]
VerifiedBy = Literal["replay", "prediction", "heuristic"]

#: Error categories: MAST's 14 failure modes plus TRAIL's system-execution errors (FACTS.md "Error categories").
ERROR_CATEGORIES: dict[str, str] = {
    "FM-1.1": "Disobey Task Specification",
    "FM-1.2": "Disobey Role Specification",
    "FM-1.3": "Step Repetition",
    "FM-1.4": "Loss of Conversation History",
    "FM-1.5": "Unaware of Termination Conditions",
    "FM-2.1": "Conversation Reset",
    "FM-2.2": "Fail to Ask for Clarification",
    "FM-2.3": "Task Derailment",
    "FM-2.4": "Information Withholding",
    "FM-2.5": "Ignored Other Agent's Input",
    "FM-2.6": "Action-Reasoning Mismatch",
    "FM-3.1": "Premature Termination",
    "FM-3.2": "No or Incorrect Verification",
    "FM-3.3": "Weak Verification",
    "SYS-TOOL-DEFINITION": "Tool Definition Issue",
    "SYS-ENVIRONMENT": "Environment Setup Error",
    "SYS-RATE-LIMIT": "Rate Limiting",
    "SYS-AUTH": "Authentication Error",
    "SYS-SERVICE": "Service Error",
    "SYS-NOT-FOUND": "Resource Not Found",
    "SYS-RESOURCE": "Resource Exhaustion",
    "SYS-TIMEOUT": "Timeout",
}

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class _Model(BaseModel):
    model_config = _FROZEN


# --------------------------------------------------------------------------------------------------------- steps


class Dependency(_Model):
    """An explicit edge: this step depended on ``step_id`` (an earlier step) in the way ``kind`` names."""

    step_id: str
    kind: DependencyKind


class StepError(_Model):
    """What went wrong in a step: the exception type (or error class) and its message."""

    type: str
    message: str = ""


class TokenUsage(_Model):
    """Tokens an LLM call consumed."""

    input_tokens: int = 0
    output_tokens: int = 0


class Step(_Model):
    """One action in a run: an LLM response, a message, a tool call, a code execution, an agent's turn…

    ``content`` is always the human-readable text; structured payload lives in ``inputs`` / ``outputs`` as the
    table in ARCHITECTURE "Where each kind keeps its payload" fixes. ``index`` is assigned when the step starts,
    so a parent precedes its children and every dependency points to a lower index.
    """

    step_id: str
    run_id: str
    index: int = Field(ge=0)
    kind: StepKind
    agent: str = ""
    parent_step_id: str | None = None
    depends_on: tuple[Dependency, ...] = ()
    content: str = ""
    inputs: dict[str, JsonValue] = Field(default_factory=dict)
    outputs: dict[str, JsonValue] = Field(default_factory=dict)
    usage: TokenUsage | None = None
    model: str | None = None
    tool_name: str | None = None
    arguments: dict[str, JsonValue] | None = None
    call_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    status: StepStatus = "unset"
    error: StepError | None = None
    action_signature: str | None = None
    #: True when some field was cut by a payload limit (an import of truncated live-exported spans).
    truncated: bool = False
    #: The OTel span id (16 hex digits) of the step's span, when it was emitted as one.
    span_id: str | None = None
    #: Free-form extras an adapter or importer keeps (e.g. the original speaker name of a log entry).
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Step:
        if self.parent_step_id is not None and self.parent_step_id == self.step_id:
            raise ValueError(f"step {self.step_id!r}: parent_step_id points to itself")
        for dep in self.depends_on:
            if dep.step_id == self.step_id:
                raise ValueError(f"step {self.step_id!r}: depends_on points to itself")
        if self.status == "error" and self.error is None:
            raise ValueError(f"step {self.step_id!r}: status 'error' needs an `error`")
        return self

    @property
    def is_candidate_kind(self) -> bool:
        """Whether the kind alone allows this step to be an attribution / intervention candidate."""
        return self.kind in CANDIDATE_KINDS

    def deps_of_kind(self, *kinds: str) -> list[str]:
        """The step ids this step depends on through one of ``kinds``."""
        return [d.step_id for d in self.depends_on if d.kind in kinds]


def action_signature(kind: str, target: str | None, payload: Any) -> str:
    """A normalised (kind, tool/target, arguments or text) string that loop detection compares.

    Whitespace is collapsed and case folded; numbers are kept (a loop that changes a number is progress).
    """
    if isinstance(payload, str):
        body = payload[:4000]
    else:
        body = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)[:4000]
    body = " ".join(body.split()).casefold()
    return f"{kind}|{target or ''}|{body[:2000]}"


# ---------------------------------------------------------------------------------------------------- outcomes


class Verdict(_Model):
    """A verifier's judgment of an outcome."""

    passed: bool
    reason: str = ""


class Outcome(_Model):
    """How a run ended (ARCHITECTURE "Shared contracts": Outcome).

    With a verifier its verdict decides success or failure, even after a limit stop. Without one an exception or a
    limit stop is a failure and a normal finish is ``unknown``. ``incomplete``: the writer died mid-run.
    """

    status: OutcomeStatus = "unknown"
    final_answer: str | None = None
    stop: StopReason | None = None
    verdict: Verdict | None = None
    reason: str = ""

    @classmethod
    def decide(
        cls,
        *,
        final_answer: str | None,
        stop: StopReason,
        verdict: Verdict | None = None,
        reason: str = "",
    ) -> Outcome:
        """Apply the outcome rules of ARCHITECTURE "Shared contracts" to what the adapter observed."""
        if verdict is not None:
            status: OutcomeStatus = "success" if verdict.passed else "failure"
            why = verdict.reason or reason
        elif stop in ("error", "limit"):
            status, why = "failure", reason or ("the run raised an exception" if stop == "error" else "limit reached")
        else:
            status, why = "unknown", reason
        return cls(status=status, final_answer=final_answer, stop=stop, verdict=verdict, reason=why)


class Annotations(_Model):
    """Ground truth for a benchmark log: the decisive agent / step and why, plus what the labels came with."""

    mistake_agent: str | None = None
    mistake_step: int | None = None
    mistake_reason: str | None = None
    ground_truth: str | None = None
    source: str | None = None
    extra: dict[str, JsonValue] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------------- recording

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


def _orjson_exact(value: Any, depth: int = 0) -> bool:
    """True when orjson writes ``value`` exactly as :func:`canonical_json` does: strings, integers, booleans, None,
    dicts, lists and tuples only. orjson formats floats its own way (``1e-7`` where the standard library writes
    ``1e-07``), so any float (or other type) sends the data to the standard encoder; what orjson refuses (integers
    beyond 64 bits, lone surrogates, non-string keys) raises and goes there too."""
    cls = type(value)
    if cls is str or cls is int or cls is bool or value is None:
        return True
    if depth > 200:
        return False
    if cls is dict:
        for item in value.values():
            if not _orjson_exact(item, depth + 1):
                return False
        return True
    if cls is list or cls is tuple:
        for item in value:
            if not _orjson_exact(item, depth + 1):
                return False
        return True
    return False


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
    while quote != -1 and _escaped(text, quote):
        quote = text.find('"', quote + 1)
    return quote + 1 if quote != -1 else -1


@functools.lru_cache(maxsize=64)
def _ids_editable(ids: tuple[str, ...]) -> bool:
    r"""Whether known ids can be aliased on the JSON text: each a plain ``[\w-]+`` token (written the same in the
    text as in the decoded strings) that cannot be mistaken for a bare JSON token (a number, true/false/null)."""
    return all(_ID_TOKEN.fullmatch(i) and not _BARE_TOKEN.fullmatch(i) for i in ids)


def _id_matches(text: str, ids: tuple[str, ...]) -> list[tuple[int, int, str | None]]:
    """``(start, end, key)`` of each candidate id on compact JSON text, left to right, none overlapping.

    A candidate is either a string under an id key (``key`` names it; ``start`` is the key's opening quote) or a
    known id not followed by a word character (``key`` None). Found with one ``str.find`` scan per id and one for
    the id keys (the ``id":"`` they all end with) rather than one alternation regex, which Python's regex engine
    tries at every ``"`` of the text: ~5x faster on a 10 KB request. Overlaps resolve as that regex would: the
    leftmost candidate wins, and of several ids at one place the longest.
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
    for ident in ids:
        pos = text.find(ident)
        while pos != -1:
            end = pos + len(ident)
            if end == len(text) or not _is_word(text[end]):
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
    ids = tuple(i for i in ids if i)
    if ids and not _ids_editable(ids):
        return None
    if drop and any(f'"{key}":' in text for key in drop):
        text = _drop_regex(drop).sub("", text)
        if any(f'"{key}":' in text for key in drop):
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
            if _is_word(before):
                # A word character before: in the decoded string too, unless it ends an escape (``\n``, ``\uXXXX``).
                # Every character of the match is a word character, so no decoded match starts inside it either.
                at = start - 2 if before in _WORD_ESCAPES and text[start - 2] == "\\" else start - 6
                if text[at] != "\\" or _escaped(text, at) or (at == start - 6 and text[at + 1] != "u"):
                    continue
            elif _escaped(text, start):  # starts inside an escape (``\n`` + an id beginning with "n")
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


def canonical_request(
    request: Any,
    *,
    call_id_pattern: Any = None,
    drop_keys: Iterable[str] = ("created_at",),
) -> tuple[Any, str]:
    """``(canonicalize_request(request), request_hash(...))`` in one pass: the recording hot path.

    The request becomes plain JSON data once (pydantic-core), its key-sorted compact text is edited in place and
    hashed; the data is parsed back only when the text changed. A ``call_id_pattern`` that names its ``ids`` (the
    smolagents adapter's) is applied on the text too; any other pattern (a bare regex) makes the data walked.
    """
    drop = tuple(drop_keys)
    plain = _plain_json(request)
    text, by_orjson = _canonical_text(plain)
    ids = () if call_id_pattern is None else getattr(call_id_pattern, "ids", None)
    edited = None if ids is None else _edit_canonical_text(text, drop, tuple(ids))
    if edited is None:
        canonical = _canonical_walk(plain, call_id_pattern, drop)
        return canonical, request_hash(canonical)
    if edited is not text:
        plain = orjson.loads(edited) if by_orjson else json.loads(edited)
    return plain, hashlib.sha256(edited.encode()).hexdigest()


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
    if isinstance(value, BaseModel) and _json_round_trips(cls, value):
        try:
            return {"type": type_name, "json": value.model_dump_json()}, type_name
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
    importable by name, and the first instance seen coming back equal from its own JSON."""
    known = _ROUND_TRIPS.get(cls)
    if known is None:
        try:
            known = (
                _json_complete(cls, set())
                and _class_named(f"{cls.__module__}.{cls.__qualname__}") is cls
                and cls.model_validate_json(sample.model_dump_json()) == sample
            )
        except Exception:
            known = False
        _ROUND_TRIPS[cls] = known
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


class RecordedCall(_Model):
    """One recorded LLM or tool call (ARCHITECTURE "Recording").

    Matching during playback is by ``(agent_key, kind, ordinal, request_hash)``, never by a global order.
    """

    run_id: str
    step_id: str | None = None
    agent_key: str
    kind: Literal["llm", "tool"]
    ordinal: int = Field(ge=0)
    request: JsonValue
    request_hash: str
    response: JsonValue = None
    response_type: str | None = None
    settings: dict[str, JsonValue] = Field(default_factory=dict)
    start_order: int = Field(ge=0)
    finish_order: int | None = None
    live_only: bool = False
    error: StepError | None = None

    def decoded_response(self) -> Any:
        """The response as the framework returned it (a fresh copy)."""
        return decode_response(self.response, self.response_type)

    @property
    def key(self) -> tuple[str, str, int]:
        """``(agent_key, kind, ordinal)``: where this call sits among its agent's calls of its kind."""
        return (self.agent_key, self.kind, self.ordinal)


class Recording(_Model):
    """All recorded calls of one run, in start order."""

    run_id: str
    calls: tuple[RecordedCall, ...] = ()

    def find(self, agent_key: str, kind: str, ordinal: int) -> RecordedCall | None:
        """The recorded call at ``(agent_key, kind, ordinal)``, if any."""
        return self._by_key.get((agent_key, kind, ordinal))

    @cached_property
    def _by_key(self) -> dict[tuple[str, str, int], RecordedCall]:
        return {c.key: c for c in self.calls}

    def signature(self) -> list[tuple[str, str, int, str]]:
        """The ``(agent_key, kind, ordinal, request_hash)`` list, sorted — equal across identical fresh runs."""
        return sorted((c.agent_key, c.kind, c.ordinal, c.request_hash) for c in self.calls)


# ------------------------------------------------------------------------------------------------------- runs


class Run(_Model):
    """One run of a team or agent: its steps, how it ended, and what was recorded for replay."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    run_id: str
    trace_id: str | None = None
    framework: str = "unknown"
    name: str | None = None
    task: str | None = None
    agents: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: Outcome = Field(default_factory=Outcome)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    annotations: Annotations | None = None
    recording: Recording | None = None

    @field_validator("steps")
    @classmethod
    def _sorted_steps(cls, steps: tuple[Step, ...]) -> tuple[Step, ...]:
        return tuple(sorted(steps, key=lambda s: s.index))

    @model_validator(mode="after")
    def _check_graph(self) -> Run:
        from causaltrace.exceptions import CycleInTraceError, OrphanStepError

        index_of: dict[str, int] = {}
        for step in self.steps:
            if step.run_id != self.run_id:
                raise ValueError(f"step {step.step_id!r} has run_id {step.run_id!r}, expected {self.run_id!r}")
            if step.step_id in index_of:
                raise ValueError(f"duplicate step_id {step.step_id!r}")
            index_of[step.step_id] = step.index
        seen_index: set[int] = set()
        for step in self.steps:
            if step.index in seen_index:
                raise ValueError(f"duplicate step index {step.index} (step {step.step_id!r})")
            seen_index.add(step.index)
            if step.parent_step_id is not None and step.parent_step_id not in index_of:
                raise OrphanStepError(f"step {step.step_id!r}: parent_step_id {step.parent_step_id!r} is not in run")
            for dep in step.depends_on:
                target = index_of.get(dep.step_id)
                if target is None:
                    raise OrphanStepError(f"step {step.step_id!r}: depends_on {dep.step_id!r} is not in the run")
                if target >= step.index:
                    raise CycleInTraceError(
                        f"step {step.step_id!r} (index {step.index}) depends on {dep.step_id!r} (index {target}):"
                        " a dependency must point to an earlier step"
                    )
        return self

    # -- lookups -------------------------------------------------------------------------------------------------

    @cached_property
    def _by_id(self) -> dict[str, Step]:
        return {s.step_id: s for s in self.steps}

    def step(self, step_id: str) -> Step:
        """The step with this id (KeyError when absent)."""
        return self._by_id[step_id]

    def step_at(self, index: int) -> Step:
        """The step with this index (KeyError when absent)."""
        for s in self.steps:
            if s.index == index:
                return s
        raise KeyError(index)

    def children(self, step_id: str) -> list[Step]:
        """Steps whose parent is ``step_id``, in index order."""
        return [s for s in self.steps if s.parent_step_id == step_id]

    def candidate_steps(self) -> list[Step]:
        """Steps attribution and interventions may choose (ARCHITECTURE "Steps").

        Content kinds only; an llm_response that produced child steps is excluded (an intervention goes on the
        child); ``agent_turn``, ``task`` and user input never are.
        """
        producers = {d.step_id for s in self.steps for d in s.depends_on if d.kind == "produced_by"}
        out = []
        for s in self.steps:
            if not s.is_candidate_kind:
                continue
            if s.kind == "llm_response" and s.step_id in producers:
                continue
            if s.metadata.get("user_input") is True:
                continue
            out.append(s)
        return out

    # -- graphs --------------------------------------------------------------------------------------------------

    def graph(self) -> nx.DiGraph[str]:
        """The dependency graph: nodes = step ids with the step's fields, edges producer → consumer with ``kind``.

        The parent relation is kept on each node as ``parent_step_id``; :meth:`parent_tree` gives it as a graph.
        """
        import networkx as nx

        g: nx.DiGraph[str] = nx.DiGraph(run_id=self.run_id, framework=self.framework)
        for s in self.steps:
            g.add_node(
                s.step_id,
                index=s.index,
                kind=s.kind,
                agent=s.agent,
                parent_step_id=s.parent_step_id,
                status=s.status,
                content=s.content,
            )
        for s in self.steps:
            for d in s.depends_on:
                if g.has_edge(d.step_id, s.step_id):
                    kinds = g.edges[d.step_id, s.step_id]["kinds"]
                    if d.kind not in kinds:
                        kinds.append(d.kind)
                else:
                    g.add_edge(d.step_id, s.step_id, kind=d.kind, kinds=[d.kind])
        return g

    def parent_tree(self) -> nx.DiGraph[str]:
        """The containment tree: edges parent → child (agent_turn → the steps of that turn)."""
        import networkx as nx

        g: nx.DiGraph[str] = nx.DiGraph()
        g.add_nodes_from(s.step_id for s in self.steps)
        g.add_edges_from((s.parent_step_id, s.step_id) for s in self.steps if s.parent_step_id)
        return g

    def summary(self) -> dict[str, Any]:
        """The short form `runs --json` lists."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "framework": self.framework,
            "status": self.outcome.status,
            "steps": len(self.steps),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "task": self.task,
        }


# ----------------------------------------------------------------------------------------- replay and repair


class Intervention(_Model):
    """A corrected step: for llm_response / message / reasoning the new text (or new tool calls, name + arguments),
    for a tool_call the new arguments, for a tool_response the new result, for a code-bearing step the new code."""

    step_id: str
    replacement: JsonValue
    description: str = ""
    source: Literal["llm", "mutation", "user"] = "user"


class CodeResult(_Model):
    """What sandboxed code did: its exit code, output, and whether the wall-clock limit killed it."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_s: float = 0.0


class ReplayResult(_Model):
    """The outcome of one replay with an intervention, and the run it produced."""

    original_run_id: str
    intervention: Intervention
    run: Run | None = None
    outcome: Outcome
    flipped: bool
    verified_by: VerifiedBy = "replay"
    served_calls: int = 0
    live_calls: int = 0
    live_calls_before_intervention: int = 0
    #: Replays run for this intervention, and how many of them flipped the outcome (r of R with live calls).
    replays_run: int = 1
    replays_flipped: int = 0
    divergence: str | None = None
    error: StepError | None = None


class RepairPair(_Model):
    """A validated fix: the (wrong step, corrected step) pair at one LLM request, for DPO / reward-model training."""

    pair_id: str
    run_id: str
    step_id: str
    step_index: int
    step_kind: StepKind
    agent: str
    prompt: JsonValue
    chosen: JsonValue
    rejected: JsonValue
    tools: JsonValue = None
    task_id: str | None = None
    minimality: float | None = None
    crs: float | None = None
    consensus: float | None = None
    verified_by: VerifiedBy = "replay"
    replays_run: int = 0
    replays_succeeded: int = 0
    replay_run_id: str | None = None
    created_at: datetime | None = None


# -------------------------------------------------------------------------------------------------- diagnosis


class Cost(_Model):
    """What a diagnosis cost: LLM calls (total and by stage), tokens, seconds, and money when the price is known."""

    llm_calls: int = 0
    calls_by_stage: dict[str, int] = Field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    usd: float | None = None
    #: How many of ``llm_calls`` were answered from the on-disk response cache (no request was made).
    cached_calls: int = 0


class EvidenceItem(_Model):
    """One step on the propagation path and its role in it."""

    step_id: str
    index: int
    role: Literal["introduced", "carried", "exposed"]
    note: str = ""


class Candidate(_Model):
    """A ranked candidate for the decisive error."""

    step_id: str
    index: int
    agent: str
    score: float
    reasons: tuple[str, ...] = ()


class Diagnosis(_Model):
    """Which agent made the decisive error, at which step, why, and how sure we are."""

    run_id: str
    method: str
    model: str | None = None
    decisive_step_id: str | None = None
    decisive_step_index: int | None = None
    agent: str | None = None
    category: str | None = None
    explanation: str = ""
    evidence: tuple[EvidenceItem, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    confidence: float | None = None
    verified_by: VerifiedBy = "heuristic"
    failed: bool = False
    failure_reason: str | None = None
    artifacts: dict[str, JsonValue] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    created_at: datetime | None = None

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str | None) -> str | None:
        if value is not None and value not in ERROR_CATEGORIES:
            raise ValueError(f"unknown error category {value!r}; expected one of {sorted(ERROR_CATEGORIES)}")
        return value

    @property
    def category_name(self) -> str | None:
        """The human name of the error category."""
        return ERROR_CATEGORIES.get(self.category) if self.category else None
