"""The built-in attribution methods; importing this package registers them (``causaltrace.protocols``).

=====================  =========  ==========================================================================
method                 model      stages (SEEDS §8)
=====================  =========  ==========================================================================
``graph`` (default)    no         dependency_graph, failure_anchor, error_signals, loop_detect, relevance, rank,
                                  replay_verify (issue 6 adds its LLM stages)
``all-at-once``        needed     judge: 1 call
``step-by-step``       needed     step_check: ≤ n calls
``binary-search``      needed     halve: ⌊log2 n⌋ … ⌈log2 n⌉ calls
``first-agent-step``   no         —
``most-active-agent``  no         —
=====================  =========  ==========================================================================
"""

from causaltrace.attribution.methods.baselines import AllAtOnce, BinarySearch, StepByStep
from causaltrace.attribution.methods.graph import GraphMethod
from causaltrace.attribution.methods.heuristics import FirstAgentStep, MostActiveAgent
from causaltrace.protocols import register_method

__all__ = ["AllAtOnce", "BinarySearch", "FirstAgentStep", "GraphMethod", "MostActiveAgent", "StepByStep"]

for _method in (GraphMethod, AllAtOnce, StepByStep, BinarySearch, FirstAgentStep, MostActiveAgent):
    register_method(_method.name, _method)
