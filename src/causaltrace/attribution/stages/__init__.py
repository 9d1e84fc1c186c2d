"""The shared stages every attribution method is composed of (issue 5; ARCHITECTURE "The default attribution method").

Deterministic (no model; memoised per diagnosis so methods share one computation):

=====================  ===============================================================================
stage id               what it computes
=====================  ===============================================================================
``dependency_graph``   explicit dependencies, or protocol relations recovered by rules (:mod:`.dependencies`)
``failure_anchor``     the final failure step (:mod:`.anchor`)
``error_signals``      steps exposing errors, who introduced them, category, recovered? (:mod:`.errors`)
``loop_detect``        action loops (same call, same arguments, no new information), re-issued instructions
                       (:mod:`.loops`)
``relevance``          backward relevance from the anchor over the graph and shared information (:mod:`.relevance`)
``provenance``         where each value came from, what reaches the failure, what a step changed (:mod:`.provenance`,
                       the facade of its parts: :mod:`.provenance_record`, :mod:`.provenance_walk`,
                       :mod:`.provenance_derive`, :mod:`.provenance_changes`, :mod:`.provenance_reach`,
                       :mod:`.provenance_passes`)
``task_drift``         the run's opening plan is about another task (:mod:`.drift`)
``fabrication``        the first step that made its data up (:mod:`.fabrication`)
``segment``            segments within a share of the model's window, oversize steps compressed (:mod:`.segment`)
``evidence``           per candidate, what the stages above found, as lines for the LLM stages (:mod:`.evidence`)
=====================  ===============================================================================

Shared by several methods (issue 18: stage-level modules with public names, so no method imports another and
``attribution.stages`` never imports ``attribution.methods``):

=====================  ===============================================================================
module                 what it holds
=====================  ===============================================================================
:mod:`.adjudicate`     the ``adjudicate`` stage (DeFA §3.8; ``defa`` and ``graph``), ``DepEdge``
:mod:`.success_spec`   the ``success_spec`` stage (EMFA's C_success; ``emfa`` and ``dcfa``)
:mod:`.simulation`     the similarity S and the ΔS record of counterfactual simulation (``dcfa``, ``refine``)
:mod:`.prompting`      prompt fitting, the shared system messages, the "steps or fail" view, the schema tail
:mod:`.values`         the typed values provenance traces (numbers, units, entities, operators, targets)
:mod:`.tokens`         the salient tokens the deterministic stages compare steps by
:mod:`.view`           the run as the stages see it (speakers, contents, candidates)
=====================  ===============================================================================

LLM stages call :meth:`causaltrace.attribution.context.DiagnosisContext.ask` with their own stage id and a pydantic
output model whose schema constrains step indices and agent names (:func:`~causaltrace.attribution.judge.step_index`,
:func:`~causaltrace.attribution.judge.agent_name`). ``graph``'s LLM stages are :mod:`.candidate_recall` (``recall``)
and :mod:`.refine` (``refine``).
"""

from typing import Any

from causaltrace.attribution.stages.anchor import FailureAnchor, FailureAnchorStage, find_failure_anchor
from causaltrace.attribution.stages.dependencies import (
    CONVERSATION_RULES,
    PROTOCOL_KINDS,
    DependencyGraph,
    DependencyGraphStage,
    Edge,
    ProtocolRule,
    StepMatch,
    build_dependency_graph,
    interpret_rules,
)
from causaltrace.attribution.stages.errors import ErrorSignal, ErrorSignalsStage, categorise_error, detect_error_signals
from causaltrace.attribution.stages.loops import Loop, LoopDetectStage, detect_loops
from causaltrace.attribution.stages.relevance import Relevance, RelevanceStage, backward_relevance, salient_tokens
from causaltrace.attribution.stages.segment import (
    Segment,
    SegmentPlan,
    SegmentStage,
    compress_text,
    fit_texts,
    plan_segments,
    step_line,
)

__all__ = [
    "CONVERSATION_RULES",
    "PROTOCOL_KINDS",
    "DependencyGraph",
    "DependencyGraphStage",
    "Edge",
    "ErrorSignal",
    "ErrorSignalsStage",
    "FailureAnchor",
    "FailureAnchorStage",
    "Loop",
    "LoopDetectStage",
    "ProtocolRule",
    "Relevance",
    "RelevanceStage",
    "Segment",
    "SegmentPlan",
    "SegmentStage",
    "StepMatch",
    "backward_relevance",
    "build_dependency_graph",
    "categorise_error",
    "compress_text",
    "detect_error_signals",
    "detect_loops",
    "find_failure_anchor",
    "fit_texts",
    "interpret_rules",
    "plan_segments",
    "salient_tokens",
    "step_line",
]


def __getattr__(name: str) -> Any:
    if name == "LOG_RULES":  # deprecated (issue 32): the dependencies module warns and names the replacement
        from causaltrace.attribution.stages import dependencies

        return dependencies.LOG_RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
