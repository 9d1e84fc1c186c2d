"""Small builders that make test runs read like the runs they stand for (issue 18 item 9).

``RunBuilder`` assigns step ids, indexes and times in order and turns ``deps=[("llm-1", "saw")]`` into dependencies,
so a test states only what it is about::

    run = (RunBuilder("r").task("add 2 and 3")
           .llm("solver", "I will call add.", tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 3}}],
                deps=[("task", "saw")])
           .tool_call("solver", "add", {"a": 2, "b": 3}, deps=[("llm-1", "produced_by")])
           .build(outcome=Outcome(status="failure")))

Every shortcut takes any other :class:`~causaltrace.schema.Step` field as a keyword (``status``, ``error``,
``metadata``…), and ``step(kind, ...)`` builds any kind. Ids default to ``<kind>-<n>`` (``llm-1``, ``call-1``…);
pass ``step_id=`` to name one. Times start at ``t0`` and advance one second per step unless given.

``recorded(kind, request, agent_key=...)`` adds a recorded call (its ordinal among that agent's calls of that kind,
its start / finish order and its request hash worked out as the recorder does); ``build()`` gives the run a
recording when any call was added.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from causaltrace.recording import request_hash
from causaltrace.schema import Dependency, RecordedCall, Recording, Run, Step

__all__ = ["RunBuilder", "capture_spans"]

_PREFIX = {"llm_response": "llm", "tool_call": "call", "tool_response": "resp", "code_execution": "code",
           "agent_turn": "turn", "final_answer": "final"}


class RunBuilder:
    """A fluent builder of :class:`~causaltrace.schema.Run` objects for tests (module docstring)."""

    def __init__(self, run_id: str = "run", *, t0: datetime | None = None) -> None:
        self.run_id = run_id
        self.t0 = t0 or datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
        self.steps: list[Step] = []
        self._counts: dict[str, int] = {}
        self._parent: str | None = None
        self.calls: list[RecordedCall] = []

    # -- the generic step ------------------------------------------------------------------------------------------

    def step(self, kind: str, agent: str = "", *, deps: Iterable[tuple[str, str]] = (), **fields: Any) -> RunBuilder:
        """Append a step of ``kind`` by ``agent`` (the next index; the open turn as parent unless given)."""
        prefix = _PREFIX.get(kind, kind)
        self._counts[prefix] = self._counts.get(prefix, 0) + 1
        index = fields.pop("index", len(self.steps))
        fields.setdefault("step_id", prefix if kind == "task" else f"{prefix}-{self._counts[prefix]}")
        fields.setdefault("started_at", self.t0 + timedelta(seconds=index))
        if self._parent is not None and kind not in ("agent_turn", "task"):
            fields.setdefault("parent_step_id", self._parent)
        depends = tuple(Dependency(step_id=s, kind=k) for s, k in deps)  # type: ignore[arg-type]
        self.steps.append(Step(run_id=self.run_id, index=index, kind=kind, agent=agent, depends_on=depends,
                               **fields))
        return self

    # -- shortcuts, one per kind a test usually needs -------------------------------------------------------------

    def task(self, text: str, agent: str = "user", **fields: Any) -> RunBuilder:
        return self.step("task", agent, content=text, **fields)

    def turn(self, agent: str, **fields: Any) -> RunBuilder:
        """Open an ``agent_turn``: the steps that follow are its children until :meth:`end_turn`."""
        self.step("agent_turn", agent, **fields)
        self._parent = self.steps[-1].step_id
        return self

    def end_turn(self) -> RunBuilder:
        self._parent = None
        return self

    def llm(self, agent: str, text: str = "", *, tool_calls: list[dict[str, Any]] | None = None,
            **fields: Any) -> RunBuilder:
        outputs = {"text": text, **({"tool_calls": tool_calls} if tool_calls is not None else {})}
        fields.setdefault("outputs", outputs)
        return self.step("llm_response", agent, content=fields.pop("content", text), **fields)

    def tool_call(self, agent: str, tool: str, arguments: dict[str, Any], **fields: Any) -> RunBuilder:
        return self.step("tool_call", agent, tool_name=tool, arguments=arguments, **fields)

    def tool_response(self, agent: str, result: Any, *, is_error: bool = False, **fields: Any) -> RunBuilder:
        fields.setdefault("outputs", {"result": result, "is_error": is_error})
        return self.step("tool_response", agent, content=fields.pop("content", str(result)), **fields)

    def message(self, agent: str, text: str, **fields: Any) -> RunBuilder:
        fields.setdefault("outputs", {"text": text})
        return self.step("message", agent, content=text, **fields)

    def final_answer(self, agent: str, text: str, **fields: Any) -> RunBuilder:
        fields.setdefault("outputs", {"text": text})
        return self.step("final_answer", agent, content=text, **fields)

    # -- the recording ---------------------------------------------------------------------------------------------

    def recorded(self, kind: str, request: Any, *, agent_key: str, **fields: Any) -> RunBuilder:
        """Append a recorded ``llm`` / ``tool`` call: ``ordinal`` counts ``agent_key``'s earlier calls of ``kind``,
        ``start_order`` all earlier calls, ``finish_order`` is ``start_order`` unless the call is ``live_only`` (never
        finished in the recording), ``request_hash`` is the request's own; any of them can be given."""
        fields.setdefault("ordinal", sum(c.agent_key == agent_key and c.kind == kind for c in self.calls))
        fields.setdefault("start_order", len(self.calls))
        fields.setdefault("finish_order", None if fields.get("live_only") else fields["start_order"])
        fields.setdefault("request_hash", request_hash(request))
        self.calls.append(RecordedCall(run_id=self.run_id, agent_key=agent_key, kind=kind, request=request,
                                       **fields))
        return self

    def build(self, **run_fields: Any) -> Run:
        """The Run: its agents default to the steps' agents (task giver excluded) in order of appearance; its
        recording holds the :meth:`recorded` calls, if any."""
        if self.calls:
            run_fields.setdefault("recording", Recording(run_id=self.run_id, calls=tuple(self.calls)))
        agents = [s.agent for s in self.steps if s.agent and s.kind != "task"]
        run_fields.setdefault("agents", tuple(dict.fromkeys(agents)))
        run_fields.setdefault("started_at", self.t0)
        return Run(run_id=self.run_id, steps=tuple(self.steps), **run_fields)


def capture_spans(*, sampler: Any = None, resource: Any = None, before: Iterable[Any] = ()) -> tuple[Any, Any]:
    """A ``TracerProvider`` writing to an ``InMemorySpanExporter``: the one span capture the tests share (the
    ``span_capture`` fixture of conftest.py uses it).

    ``sampler`` and ``resource`` go to the provider; ``before`` are span processors added ahead of the in-memory one
    (a live exporter the copy is compared with, a processor that raises), in order.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    options = {k: v for k, v in (("sampler", sampler), ("resource", resource)) if v is not None}
    provider = TracerProvider(**options)
    for processor in before:
        provider.add_span_processor(processor)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter
