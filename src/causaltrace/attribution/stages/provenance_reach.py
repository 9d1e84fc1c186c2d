"""Reach (:mod:`.provenance`'s docstring, 4): backward from the failure anchor, latest first, how strongly what each
step decided reaches the failing answer — through the introducers of the values a reached step used, a derived
number's operands, its protocol producers and the instructions it answered (0.97 per hop), and more weakly (0.5 per
hop) through what an agent step merely observed or saw — and the answer's content lineage (the steps reached by
values, requests and instructions alone).

Split from :mod:`.provenance`: reach reads only the record the walk filled and the dependency graph; repair prunes
and orders by it (a step with reach 0 is one repair may skip).
"""

from __future__ import annotations

from causaltrace.attribution.stages.dependencies import PROTOCOL_KINDS, DependencyGraph
from causaltrace.attribution.stages.provenance_record import TASK, Provenance

__all__ = ["INSTRUCTION_KINDS", "backward_reach"]

#: dependencies by which a step answers an instruction (followed as requests, like the protocol's)
INSTRUCTION_KINDS = frozenset({"handoff_from", "selected_by", "delegated_by"})
_DECAY = 0.97
_OBSERVED = 0.5
_OBSERVATION_KINDS = frozenset({"observed", "saw", "continues"})


def backward_reach(prov: Provenance, graph: DependencyGraph, order: list[int], outputs: set[int],
                   verdicts: frozenset[int] = frozenset()) -> None:
    """Backward reach from the anchor (the module docstring); ``outputs`` are the execution outputs (they depend on
    their call only). An observed or seen ``verdicts`` step (an approval) is followed as a request, not as a mere
    observation: the step after it acted on it (an answer is released because it was approved) — for reach only,
    not for the content lineage (an approval carries no value into the answer)."""
    reach = prov.reach
    reach[prov.anchor] = 1.0
    prov.lineage.add(prov.anchor)
    for k in reversed(order):
        r = reach.get(k, 0.0)
        if r <= 0:
            continue
        sources: set[int] = set(prov.origins.get(k, {}).values())
        for ops in prov.derived.get(k, {}).values():
            sources.update(ops)
        seen: set[int] = set()
        gates: set[int] = set()
        if k in prov.addressed_by:
            sources.add(prov.addressed_by[k])
        for e in graph.incoming(k):
            if e.kind in PROTOCOL_KINDS or e.kind in INSTRUCTION_KINDS or e.rule == "instruction→reply":
                sources.add(e.producer)
            elif e.kind in _OBSERVATION_KINDS and k not in outputs:
                (gates if e.producer in verdicts else seen).add(e.producer)
        if k in prov.lineage:
            prov.lineage.update(j for j in sources if j != TASK)
        for j, hop in [*((j, _DECAY) for j in sources | gates), *((j, _OBSERVED) for j in seen - sources)]:
            if j == k or j == TASK:
                continue
            if r * hop > reach.get(j, 0.0):
                reach[j] = r * hop
                prov.via[j] = k
