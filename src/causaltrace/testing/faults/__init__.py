"""The fault-injection suite (issue 7 "Proof"; ``causaltrace bench faults --json OUT``).

Scripted runs across smolagents and AutoGen, driven by REACTIVE scripted models (ARCHITECTURE decision 8), each
with ONE planted decisive error of one of five types — a wrong tool argument, a boundary bug in code, a wrong
fact one agent states and another carries forward, a loop that never converges, a wrong handoff — and a recovered
tool error as a distractor (a flaky tool fails once, the agent retries). Offline (no model: the ``graph``
method's deterministic stages, the mutation proposals of decision 9 and replay), the suite checks that
causaltrace localises the decisive step (the earliest step whose correction flips the run) and repairs the run.

Issue 20 grows it into a failure ZOO (:mod:`.cases_zoo` on the teams of :mod:`.zoo_smolagents` and
:mod:`.zoo_autogen`, continued in :mod:`.zoo_smolagents_more` and :mod:`.zoo_autogen_more`; the cases of
:mod:`.cases_zoo_blind`, on :mod:`.zoo_smolagents_blind` and :mod:`.zoo_autogen_blind`, were written blind to the
attribution and come last in suite order): 15 failure types, at least 60 cases, every second case of each type held out of all tuning (``FaultCase.held_out``), and localisation scored on the diagnosis alone for ``graph``, the rule baselines and
random (:mod:`.scoring`) before repair's replay-verified answer (``bench faults --no-repair`` skips repair).

Layout: :mod:`.cases` (what a case is, rule helpers, strict verifiers); :mod:`.cases_smolagents` and
:mod:`.cases_autogen` (the cases of each framework) on the scripted teams of :mod:`.teams_smolagents` and
:mod:`.teams_autogen`; :mod:`.runner` (record → diagnose → repair → report, and ``causaltrace bench faults``).
The benchmark lives in ``testing`` because it drives both the instrumentation and replay (ARCHITECTURE: only
``testing`` and ``demo`` may import anything). Frameworks are imported lazily: this package loads without them; a
framework's case list imports its team module (and so the framework) when it is first asked for.
"""

from causaltrace.testing.faults.cases import FAULT_TYPES, FaultCase
from causaltrace.testing.faults.runner import CaseResult, all_cases, render_table, run_case, run_suite, summarize

__all__ = ["FAULT_TYPES", "CaseResult", "FaultCase", "all_cases", "render_table", "run_case", "run_suite",
           "summarize"]
