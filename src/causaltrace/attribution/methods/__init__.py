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
``defa``               needed     normalise, protocol_rules, summarise, semantic_deps, recall, propagation,
                                  adjudicate (SEEDS §3, :mod:`.defa`)
``emfa``               needed     success_spec, final_step, structure, annotate, loops, screen_propagation,
                                  screen_loops, verify (SEEDS §2, :mod:`.emfa`)
``dcfa``               needed     mdi, cgc, hypothesis, [success_spec], correct, simulate, decide (SEEDS §1,
                                  :mod:`.dcfa`)
=====================  =========  ==========================================================================
"""

from causaltrace.attribution.methods.baselines import AllAtOnce, BinarySearch, StepByStep
from causaltrace.attribution.methods.dcfa import DCFA
from causaltrace.attribution.methods.defa import DeFA
from causaltrace.attribution.methods.emfa import EMFA
from causaltrace.attribution.methods.graph import GraphMethod
from causaltrace.attribution.methods.heuristics import FirstAgentStep, MostActiveAgent
from causaltrace.protocols import register_method

__all__ = ["AllAtOnce", "BinarySearch", "DCFA", "DeFA", "EMFA", "FirstAgentStep", "GraphMethod", "MostActiveAgent", "StepByStep"]

for _method in (GraphMethod, AllAtOnce, StepByStep, BinarySearch, FirstAgentStep, MostActiveAgent, DeFA, EMFA,
                DCFA):
    register_method(_method.name, _method)
