"""Attribution: find the decisive error of a failed run (which agent, which step, why, how sure).

* :func:`diagnose` / :func:`diagnose_sync` — the engine (:mod:`.engine`): methods registered by name, each a small
  composition of shared stages (:mod:`.stages`), returning a :class:`~causaltrace.schema.Diagnosis`.
* :class:`Judge` — the LLM client for any litellm model or ``"local"`` (:mod:`.judge`, :mod:`.local_model`).
* :mod:`.bench` — the Who&When harness behind ``causaltrace bench whowhen``.
* :class:`~causaltrace.testing.judges.FunctionJudge` (in ``causaltrace.testing``) — a function-backed fake model for tests.

Importing this package is light: litellm and llama_cpp are imported only when a model is called.
"""

from causaltrace.attribution.engine import (
    Conclusion,
    DiagnosisContext,
    Method,
    MethodFailed,
    Stage,
    VerificationResult,
    available_methods,
    diagnose,
    diagnose_sync,
    register_verification_hook,
    verification_hook,
)
from causaltrace.attribution.judge import Judge

__all__ = [
    "DiagnosisContext",
    "Conclusion",
    "Judge",
    "Method",
    "MethodFailed",
    "Stage",
    "VerificationResult",
    "available_methods",
    "diagnose",
    "diagnose_sync",
    "register_verification_hook",
    "verification_hook",
]
