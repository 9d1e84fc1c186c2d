"""What the foreign-span importers (``openinference``, ``genai``) share: the span shape they read, the trace's tree,
and the recovery of an LLM call's dependencies from the messages it was sent.

Dependencies are recovered, never invented (issue 23 item 1): an LLM span's input messages hold earlier outputs
verbatim, so an input message whose text equals an earlier task / message step's content is a ``saw`` edge, one
that returns a tool result (by its call id, else its exact text) an ``observed`` edge, and an assistant message
carrying the same agent's earlier tool calls (by call id) or text is a ``continues`` edge to that llm_response. As
in the native adapters, ``saw`` / ``observed`` keep only what arrived since the continued llm_response, so the graph
stays linear in the length of the run. A message that matches nothing adds no edge.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from causaltrace.collector.chatlog_build import ChatBuilder, text_of
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Dependency, Step, StepError, StepSource

__all__ = [
    "InputMessage",
    "MessageIndex",
    "SpanLike",
    "TraceTree",
    "add_llm_output",
    "call_key",
    "indexed",
    "json_or_text",
    "message_text",
    "one_line",
    "read_span",
    "source_of",
    "step_error",
    "step_status",
]

STATUS_UNSET, STATUS_ERROR = 0, 2
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SpanLike(Protocol):
    """One decoded span, as ``collector.otlp`` hands it over (ids hex, times integer nanoseconds)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    status_code: int
    status_message: str
    events: Sequence[Any]  # each with ``name`` and ``attrs`` (``otlp_decode.DecodedEvent``)


def _exception(span: SpanLike) -> Mapping[str, Any] | None:
    """The attributes of the span's first ``exception`` event (OTel's ``record_exception``), or None."""
    for event in getattr(span, "events", None) or ():
        if event.name == "exception":
            return event.attrs
    return None


def step_status(span: SpanLike) -> str:
    """The status of a span's step: ``error`` when the span's status is ERROR, or UNSET with an exception event
    (an exception recorded and nothing said it was handled); else ``ok``."""
    if span.status_code == STATUS_ERROR:
        return "error"
    return "error" if span.status_code == STATUS_UNSET and _exception(span) is not None else "ok"


def step_error(span: SpanLike) -> StepError | None:
    """The StepError of a span whose step is an error (:func:`step_status`): the type of its exception event (else
    ``SpanError``), the text of its status message, else of the event's ``exception.message``; cut to 2,000
    characters. None for a step that is not an error."""
    if step_status(span) != "error":
        return None
    exception = _exception(span) or {}
    kind = exception.get("exception.type")
    message = span.status_message or exception.get("exception.message") or ""
    return StepError(type=str(kind) if kind else "SpanError", message=str(message)[:2000])


def source_of(span: SpanLike) -> StepSource:
    """Where a step read from ``span`` came from (issue 34 item 3): its trace and span ids, times and kind (the
    OpenInference kind, else the GenAI operation)."""
    kind = span.attrs.get("openinference.span.kind") or span.attrs.get("gen_ai.operation.name")
    return StepSource(trace_id=span.trace_id, span_id=span.span_id, start_time=_time(span.start),
                      end_time=_time(span.end), span_kind=str(kind) if kind else None)


def _time(nanos: int) -> datetime | None:
    """Nanoseconds as a datetime, rounded to the microsecond (as Phoenix rounds them: a pulled span's times match)."""
    return _EPOCH + timedelta(microseconds=(nanos + 500) // 1000) if nanos else None


@contextmanager
def read_span(span: SpanLike) -> Iterator[None]:
    """Turn any failure to read ``span`` into one InvalidInputError line naming it (where, span id, name): a span a
    reader cannot map is the input's fault, never an internal error."""
    try:
        yield
    except InvalidInputError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        where = getattr(span, "where", "")
        label = f"{where + ': ' if where else ''}span {span.span_id} ({span.name!r})"
        raise InvalidInputError(f"{label}: cannot be read as a step: {one_line(exc)}") from exc


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (a pydantic ValidationError: its first error's field and message)."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        field_name = ".".join(str(p) for p in first.get("loc", ()))
        return f"{field_name + ': ' if field_name else ''}{first.get('msg', '')}"
    return " ".join(str(exc).split()) or type(exc).__name__


def json_or_text(value: Any) -> Any:
    """A JSON attribute value decoded (``input.value`` and the like), else the value itself."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


class TraceTree:
    """The spans of one trace in start order (a parent before a child that starts with it), with parent lookups."""

    def __init__(self, spans: Iterable[SpanLike]) -> None:
        self.spans: list[SpanLike] = sorted(spans, key=lambda s: (s.start, -s.end))
        self.by_id: dict[str, SpanLike] = {s.span_id: s for s in self.spans}
        self.children: dict[str, list[SpanLike]] = {}
        for span in self.spans:
            if span.parent_span_id:
                self.children.setdefault(span.parent_span_id, []).append(span)

        self.adopted: dict[str, SpanLike] = {}

    def adopt(self, holders: Callable[[SpanLike], bool],
              owner: Callable[[SpanLike, list[SpanLike]], SpanLike | None] | None = None) -> None:
        """Give each span whose parent is missing (another instrumentor's span, traced at once; or lost) a parent
        its ancestry goes on from: among the spans ``holders`` accepts that enclose it in time, the one ``owner``
        picks (what the span itself says), else the innermost (spans running in parallel overlap: the latest
        started encloser is taken)."""
        candidates = [s for s in self.spans if holders(s)]  # in start order, as self.spans is
        open_holders: list[SpanLike] = []  # holders started before the span and not ended before it started
        taken = 0
        for span in self.spans:  # a sweep in start order: linear in the trace times the nesting depth
            while taken < len(candidates) and (candidates[taken].start, -candidates[taken].end) < (span.start,
                                                                                                  -span.end):
                open_holders.append(candidates[taken])
                taken += 1
            open_holders = [h for h in open_holders if not h.end or h.end >= span.start]
            if not span.parent_span_id or span.parent_span_id in self.by_id:
                continue
            around = [h for h in open_holders if h.span_id != span.span_id and (not h.end or (span.end and
                                                                                              span.end <= h.end))]
            chosen = owner(span, around) if owner is not None and around else None
            if chosen is not None or around:
                self.adopted[span.span_id] = chosen or max(around, key=lambda c: (c.start, -c.end))

    def parent(self, span: SpanLike) -> SpanLike | None:
        """The span's parent, else the span :meth:`adopt` gave it, else None."""
        return self.by_id.get(span.parent_span_id or "") or self.adopted.get(span.span_id)

    def ancestors(self, span: SpanLike) -> Iterable[SpanLike]:
        """The span's ancestors, nearest first (a missing, unadopted parent ends the walk; a cycle is cut)."""
        seen = {span.span_id}
        parent = self.parent(span)
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            yield parent
            parent = self.parent(parent)


def call_key(agent: str, call_id: str) -> str:
    """The key of a call in the builder and the index: its agent and id (two agents' models may give one id)."""
    return f"{agent}\u241f{call_id}"


@dataclass
class InputMessage:
    """One message an LLM span was sent, in a convention-neutral shape."""

    role: str
    text: str = ""
    tool_call_ids: tuple[str, ...] = ()
    result_of: str | None = None  # the call id a tool / function message answers
    is_error: bool = False  # a tool result the framework told the model had failed


@dataclass
class MessageIndex:
    """Earlier steps by what an LLM's input can quote of them: texts, tool results, call ids, llm outputs."""

    texts: dict[str, Step] = field(default_factory=dict)
    results: dict[str, Step] = field(default_factory=dict)
    result_texts: dict[str, Step] = field(default_factory=dict)
    producers: dict[str, Step] = field(default_factory=dict)  # call id or message step id -> its llm_response
    recent: list[Step] = field(default_factory=list)  # results in order (the last few are searched inside texts)
    said: list[Step] = field(default_factory=list)  # texts in order (the last few are searched inside prompts)

    def note(self, step: Step, by: Step | None = None) -> None:
        """Remember a step an input message may quote (``by``: the llm_response that produced it)."""
        key = step.content.strip()
        if step.kind in ("tool_response", "code_execution"):
            if step.call_id and step.kind == "tool_response":
                self.results[call_key(step.agent, step.call_id)] = step
            if key:
                self.result_texts[key] = step
                self.recent.append(step)
        elif step.kind in ("task", "message", "final_answer", "handoff", "planning") and key:
            self.texts[key] = step
            self.said.append(step)
        if by is not None:
            self.producers[call_key(by.agent, step.call_id) if step.call_id else step.step_id] = by

    def dependencies(self, agent: str, messages: Sequence[InputMessage], before: int) -> tuple[Dependency, ...]:
        """The recovered edges of an llm_response of ``agent`` sent ``messages`` (producers before index
        ``before``): module docstring."""
        found: list[Step] = []
        for message in messages:
            producer = self._producer(message, agent)
            if producer is not None and producer.index < before:
                found.append(producer)
            if message.role in ("tool", "function"):
                found.extend(self._quoted(message.text, agent, before))
            elif message.role == "user" and producer is None:  # a prompt quoting the conversation (a selector's)
                found.extend(s for s in self.said[-20:] if s.index < before and len(s.content.strip()) > 1
                             and s.content.strip() in message.text)
        own = [p for p in found if p.kind == "llm_response" and p.agent == agent]
        continued = max(own, key=lambda s: s.index) if own else None
        deps = [Dependency(step_id=continued.step_id, kind="continues")] if continued else []
        floor = continued.index if continued else -1
        seen = {continued.step_id} if continued else set()
        for step in sorted((p for p in found if p.kind != "llm_response"), key=lambda s: s.index):
            if step.index > floor and step.step_id not in seen:
                seen.add(step.step_id)
                observed = step.kind in ("tool_response", "code_execution")
                deps.append(Dependency(step_id=step.step_id, kind="observed" if observed else "saw"))
        return tuple(deps)

    def _quoted(self, text: str, agent: str, before: int) -> list[Step]:
        """The agent's latest results (up to 20) whose whole text a tool message quotes inside its own — a code
        step's observations hold what the tools and managed agents it called returned."""
        return [s for s in self.recent[-20:] if s.index < before and s.agent == agent and len(s.content.strip()) > 1
                and s.content.strip() != text.strip() and s.content.strip() in text]

    def _producer(self, message: InputMessage, agent: str) -> Step | None:
        if message.role in ("system", "developer"):
            return None
        if message.result_of is not None or message.role in ("tool", "function"):
            return (self.results.get(call_key(agent, message.result_of or "")) or
                    self.result_texts.get(message.text.strip()))
        for call_id in message.tool_call_ids:
            if call_key(agent, call_id) in self.producers:
                return self.producers[call_key(agent, call_id)]
        step = self.texts.get(message.text.strip()) if message.text.strip() else None
        llm = self.producers.get(step.step_id) if step is not None and message.role == "assistant" else None
        return llm if llm is not None and llm.agent == agent else step


def add_llm_output(b: ChatBuilder, index: MessageIndex, llm: Step, agent: str, text: str,
                   calls: Sequence[tuple[str, Any, str | None]], parent: str | None) -> None:
    """The steps an llm_response produced: a message of its text, a tool_call per call (``produced_by`` it)."""
    if text.strip():
        index.note(b.text("message", agent, text, parent_step_id=parent, status="ok",
                          depends_on=(Dependency(step_id=llm.step_id, kind="produced_by"),)), llm)
    for name, arguments, call_id in calls:
        index.note(b.tool_call(agent, name, arguments, call_id, llm, parent_step_id=parent, status="ok",
                               key=call_key(agent, call_id) if call_id else None), llm)


def message_text(content: Any) -> str:
    """A message's text content (string or content parts)."""
    return text_of(json_or_text(content) if isinstance(content, str) and content[:1] == "[" else content)


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference's flattened lists: ``prefix.<i>.<rest>`` attributes as one dict of ``rest`` per ``i``."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        head, _, rest = key[len(prefix):].partition(".")
        if head.isdigit() and rest:
            out.setdefault(int(head), {})[rest] = value
    return [out[i] for i in sorted(out)]
