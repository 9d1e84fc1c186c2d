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

import json
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, NoReturn, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from pydantic_core import PydanticSerializationError

from causaltrace.recording import decode_response

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "CANDIDATE_KINDS", "DEPENDENCY_KINDS", "ERROR_CATEGORIES", "STEP_KINDS", "Annotations", "Candidate",
    "CodeResult", "Cost", "Dependency", "DependencyKind", "Diagnosis", "DiagnosisBasis", "EvidenceItem",
    "FINDING_FAMILIES", "Finding", "FindingEvidence", "FindingFamily", "Intervention", "Outcome", "OutcomeStatus",
    "RecordedCall", "Recording", "RepairPair", "ReplayResult", "Run", "Step", "StepError", "StepKind", "StepSource",
    "StepStatus", "TokenUsage", "Verdict", "VerifiedBy", "action_signature", "utf8_safe", "utf8_safe_value",
]

#: a step's position: the sort key of a run's steps
_BY_INDEX = attrgetter("index")

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


_SURROGATES = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """``text`` with every lone surrogate (text decoded with ``surrogateescape``, a file name from ``os.listdir`` of
    bytes, a broken tool output) replaced by U+FFFD, so it can be written as UTF-8; ``text`` itself when it can.

    A proper pair of surrogates becomes the character it encodes. OTLP (protobuf strings) and JSON in the store
    need valid UTF-8: one such character used to lose a whole span batch or a whole run.
    """
    if text.isascii() or _SURROGATES.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8_safe_value(value: Any) -> Any:
    """:func:`utf8_safe` applied to every text inside a JSON-like value (dict keys included)."""
    if isinstance(value, str):
        return utf8_safe(value)
    if isinstance(value, dict):
        return {utf8_safe_value(k): utf8_safe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [utf8_safe_value(v) for v in value]
    return value


class _Model(BaseModel):
    model_config = _FROZEN

    def model_dump_json(self, **kwargs: Any) -> str:
        """pydantic's JSON, or — when a text holds a lone surrogate, which UTF-8 cannot encode — the same JSON with
        those characters replaced by U+FFFD (:func:`utf8_safe`), never an error that would lose the record."""
        try:
            return super().model_dump_json(**kwargs)
        except PydanticSerializationError as exc:
            if "surrogates not allowed" not in str(exc):
                raise
            indent = kwargs.pop("indent", None)
            data = utf8_safe_value(self.model_dump(mode="json", **kwargs))
            return json.dumps(data, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))


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


class StepSource(_Model):
    """The span an imported step was read from (issue 34 item 3), to find "step 7" again in Jaeger or Phoenix;
    ``span_kind`` is the instrumentor's kind (OpenInference span kind, GenAI operation or OTel kind)."""

    trace_id: str | None = None
    span_id: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    span_kind: str | None = None


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
    #: The span an imported step came from (not unique: one LLM span can give several steps).
    source: StepSource | None = None

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


#: ``json.dumps(…, sort_keys=True, separators=(",", ":"), default=str)``'s encoder made once, not once per signature
_SIGNATURE_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def action_signature(kind: str, target: str | None, payload: Any) -> str:
    """A normalised (kind, tool/target, arguments or text) string that loop detection compares.

    Whitespace is collapsed and case folded; numbers are kept (a loop that changes a number is progress).
    """
    if isinstance(payload, str):
        body = payload[:4000]
    else:
        body = _SIGNATURE_JSON.encode(payload)[:4000]
    body = " ".join(body.split()).casefold()
    return f"{kind}|{target or ''}|{body[:2000]}"


# ---------------------------------------------------------------------------------------------------- outcomes


class Verdict(_Model):
    """A verifier's judgment of an outcome."""

    passed: bool
    reason: str = ""


_NOT_TEXT = (
    "an Outcome is not text: test outcome.final_answer (e.g. `'126' in (outcome.final_answer or '')`), or annotate "
    "the verifier's parameter as str to receive the final answer"
)


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

    # A verifier written as ``lambda answer: "126" in answer`` receives an Outcome: pydantic's field iteration would
    # make that test silently False for every run. Membership and iteration raise instead, naming the field meant.
    def __iter__(self) -> NoReturn:  # type: ignore[override]
        raise TypeError(_NOT_TEXT)

    def __contains__(self, item: object) -> NoReturn:
        raise TypeError(_NOT_TEXT)

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


#: the lookups a Run caches (dropped from its copies: :meth:`Run.model_copy`)
_RUN_CACHES = ("_by_id", "_by_index")


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
        return tuple(sorted(steps, key=_BY_INDEX))  # a C key: no Python call per step (issue 35's call count)

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

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Run:
        """A copy (pydantic's), without the lookups cached on this Run: a copy with other ``steps`` must not answer
        :meth:`step` / :meth:`step_at` from the original's steps."""
        copied = super().model_copy(update=update, deep=deep)
        for name in _RUN_CACHES:
            copied.__dict__.pop(name, None)
        return copied

    @cached_property
    def _by_id(self) -> dict[str, Step]:
        return {s.step_id: s for s in self.steps}

    def step(self, step_id: str) -> Step:
        """The step with this id (KeyError when absent)."""
        return self._by_id[step_id]

    def step_at(self, index: int) -> Step:
        """The step with this index (KeyError when absent)."""
        return self._by_index[index]

    @cached_property
    def _by_index(self) -> dict[int, Step]:
        # built once per (immutable) Run: detectors look steps up by index for every piece of evidence, and a
        # linear search made a 10,000-step run's diagnosis quadratic
        out: dict[int, Step] = {}
        for s in self.steps:
            out.setdefault(s.index, s)
        return out

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


# ------------------------------------------------------------------------------------------------- findings

#: The finding families (ARCHITECTURE "Verdict rules") and the MAST mode each maps to where one fits (None: none
#: does; an unrecovered error keeps its SYS-* category): a value changed relative to its source, one taken from a
#: superseded observation, an omitted item, an unfit routing choice, a plan about another task, made-up data, an
#: unchecked approval, an unrecovered error, a loop without progress, an ignored instruction, an unsupported value.
FINDING_FAMILIES: dict[str, str | None] = {
    "value_changed": "FM-2.6", "superseded_value": "FM-2.5", "omission": "FM-3.1", "unfit_routing": "FM-1.2",
    "task_drift": "FM-2.3", "made_up_data": None, "unchecked_approval": "FM-3.2", "unrecovered_error": None,
    "loop_no_progress": "FM-1.3", "ignored_instruction": "FM-1.1", "unsupported_value": None,
}
FindingFamily = Literal["value_changed", "superseded_value", "omission", "unfit_routing", "task_drift",
                        "made_up_data", "unchecked_approval", "unrecovered_error", "loop_no_progress",
                        "ignored_instruction", "unsupported_value"]
FindingRole = Literal["source", "changed", "superseded_by", "omitted_item", "chosen_agent", "request", "error",
                      "repeat", "opening", "marker", "approved", "unchecked"]


class FindingEvidence(_Model):
    """A pointer of a finding to what the run shows: a step (``index`` -1: the task), its value, and its role
    (``source``: what the step should have carried; ``superseded_by``: the later observation; …)."""

    step_id: str | None = None
    index: int
    value: JsonValue = None
    role: FindingRole


class Finding(_Model):
    """A typed anomaly at one step with pointers to its evidence: the unit of blame (ARCHITECTURE "Verdict rules").
    Detectors (``attribution.findings``) read kinds, edges and values only, never speaker names or the outcome.
    ``claim`` names the steps and values compared; ``strength`` is 1 when the finding reaches the failure."""

    family: FindingFamily
    step_id: str
    index: int
    category: str | None = None
    claim: str
    evidence: tuple[FindingEvidence, ...] = ()
    strength: float = 1.0


# ----------------------------------------------------------------------------------------- replay and repair


class Intervention(_Model):
    """A corrected step: for llm_response / message / reasoning the new text (or new tool calls, name + arguments),
    for a tool_call the new arguments, for a tool_response the new result, for a code-bearing step the new code."""

    step_id: str
    replacement: JsonValue
    description: str = ""
    source: Literal["llm", "mutation", "user"] = "user"
    #: ``correction``: derived from ``finding`` (restore the source's value, …); else an ``alternative``
    basis: Literal["correction", "alternative"] = "alternative"
    finding: Finding | None = None


class CodeResult(_Model):
    """What sandboxed code did: its exit code, output, and whether the wall-clock limit killed it."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_s: float = 0.0


class Critique(_Model):
    """One critic's verdict on a predicted causal claim (CausalFlow's critique, SEEDS §4.4); a failed call is
    ``DISAGREE`` with confidence 0 and its ``error``."""

    role: Literal["critic", "meta_critic"]
    agreement: Literal["AGREE", "PARTIAL", "DISAGREE"]
    confidence: float = 0.0
    reasoning: str = ""
    alternative_explanation: str = ""
    evidence_strength: Literal["STRONG", "MODERATE", "WEAK"] | None = None
    error: str | None = None


class Consensus(_Model):
    """The critic / meta-critic consensus on a step whose correction was PREDICTED to flip the run (a CRS-flagged
    step on the predictive path; :mod:`causaltrace.replay.consensus`): confirmed when ``score >= tau``."""

    step_id: str
    crs: float
    score: float
    tau: float = 0.5
    formula: Literal["paper", "code"] = "paper"
    confirmed: bool
    critiques: tuple[Critique, ...] = ()


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
    #: the critics' consensus on a predicted flip (None for a replay-verified result: it skips the consensus)
    consensus: Consensus | None = None


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
    #: ``alternative``: the flip came from an edit no finding derives (not exported unless asked)
    basis: Literal["correction", "alternative"] = "correction"


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
    #: the families of the findings at this step; empty: "no evidence" (ordered by relevance and position only)
    findings: tuple[str, ...] = ()


DiagnosisBasis = Literal["correction", "alternative", "finding", "none"]


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
    #: what the decisive step is: an agent's decision (``agent``) or the environment's output (``environment``: a
    #: tool result whose correction flips the run — a tool / data fault, with no agent named); None when unknown
    fault_source: Literal["agent", "environment"] | None = None
    failed: bool = False
    failure_reason: str | None = None
    artifacts: dict[str, JsonValue] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    created_at: datetime | None = None
    #: every finding of the run, in step order (the decisive step's: :attr:`top_findings`)
    findings: tuple[Finding, ...] = ()
    #: what the verdict rests on (a replay-verified ``correction`` / ``alternative``, a ``finding`` at the step, or
    #: ``none``: uncertain); None: stored before findings existed
    basis: DiagnosisBasis | None = None

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

    @property
    def top_findings(self) -> tuple[Finding, ...]:
        """The findings at the decisive step (what its blame rests on)."""
        return tuple(f for f in self.findings if f.step_id == self.decisive_step_id)

    @property
    def no_evidence(self) -> bool:
        """Nothing the run shows singles out the decisive step (uncertain whatever the confidence)."""
        return self.basis == "none"
