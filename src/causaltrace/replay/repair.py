"""Repair: prove a diagnosis by intervention and keep the fix (CausalFlow §4: CRS, minimal repairs, repair pairs).

For each candidate step — the diagnosis's candidates, or every candidate step of the run — in step order:

1. proposals: K corrections from an LLM (when a model is given) plus the deterministic mutations of ARCHITECTURE
   decision 9, ranked by minimality (CausalFlow Eq. 2, or the edit-distance variant) — and, guided by provenance,
   the edits of the values provenance finds suspicious in that step first (below);
2. each proposal is replayed (recorded calls before the step, live after it); CRS(step) = 1 if any proposal flips
   the outcome from failure to success. Because proposals are tried most-minimal first (within provenance's
   rank), the first flip is the most minimal flipping proposal of its rank (without provenance ordering:
   CausalFlow's argmax of minimality over successful repairs);
3. the decisive error is the EARLIEST step with CRS = 1 (Who&When's "earliest decisive error"); the search stops
   there unless ``exhaustive=True``.

Agent decisions first (ARCHITECTURE decision 9, issue 19): tool results are the environment's output, not an
agent's decision, so they are not candidates for the decisive error. The search runs over the agents' steps
(messages, tool calls, code, handoffs, selections, answers); only when none of their corrections flips the run does
a separate, labelled last phase edit tool results. A flip found there is a tool / data fault — "the run succeeds if
tool X had returned Y", category ``SYS-ENVIRONMENT``, ``fault_source="environment"``, no agent named as the author —
and yields no repair pair. The phase is ON by default: a wrong or stale tool result IS a common cause of failure,
it costs replays only after every agent correction failed, and its answer is reported for what it is. Without that
order a correct tool result could be "repaired" to cancel an agent's later error (a price lowered by one so that
the analyst's +1 restatement comes out right) and be reported, verified by replay, as the agent's decisive error.

Provenance prunes (issue 19 item 3): before the search, value / word provenance along the run's dependency edges
(:func:`causaltrace.attribution.stages.provenance.reaches_answer`, the attribution stage repair shares) scores how
strongly what each step decided reaches the failing answer. A step whose reach is 0 — no value it introduced, no
request or instruction it made, nothing that observed it leads to the failure anchor — cannot change that answer,
so no correction of it can flip the run: it is not tried (``RepairResult.pruned``, said in the explanation and by
the CLI). Only reach 0 is pruned (a low reach still has an observation path); a step provenance does not score is
kept; a provenance failure prunes nothing. The decisive step is unchanged on the fault suite
(``benchmarks/bench_repair_order.py`` compares the pruned and unpruned searches case by case). ``prune=False`` and
``--method causalflow`` (every step a candidate, the published method) try every step.

Provenance orders (issue 19 item 3): within a step, a proposal that edits a value provenance marks as suspicious
for that step — a value it changed relative to its source (a restatement, a copy slip, a substituted unit or
target), best when the edit puts the source's value back, then a value it introduced that reaches the answer — is
tried before the others, ties in minimality order (:mod:`causaltrace.replay.suspicion`). Every proposal of a step
is still tried until one flips, so which steps flip, and the decisive step, do not change; the flip is found after
fewer replays. ``order_proposals=False`` keeps the minimality order; by default provenance orders when it prunes
(``prune=False``, as ``--method causalflow`` and ``--no-prune`` pass, uses no provenance at all).

Not done, by measurement: trying the diagnosis' top step first and, once it flips, only the earlier steps whose
values reach IT (provenance with the top step as anchor). On 9 repaired cases of the fault suite the rule rules out
one earlier step in one case (6 of smol-landmark-height's 29 replays): nearly every earlier step reaches the top step
at least by observation (reach 0.2-0.5), and the top step is not the earliest flipping step in 3 of the 9 (trying it
first only adds its replays). A stricter rule (content lineage only, no observation paths) would have skipped the
earliest flipping step of ag-review-lamps (#15 reaches the top step #18 only by observation).

The search is bounded: ``max_replays`` (default 200) and ``max_seconds`` (default 600) are on by default; when
either runs out the search stops and the result says so (``budget_exhausted``). The replays after the corrections'
pass (alternatives, then tool results) have a bound of their own, ``max_alternatives`` (default 12, exhausted
``"alternatives"``): such a flip proves no error (issue 32 item 5); on the fault suite the searches that found
nothing spent 84-290 replays there, the costliest repairs by far, while each alternative that flipped at the planted
step of a tuning-half case did so within its first 12. ``corrections_untried`` counts what a budget left.
On the predictive path (a run with no recording) each predicted outcome is a model call standing in for a replay and
counts as one against ``max_replays``: the budget bounds replays and predictions alike. What the framework prints
during a replay (AutoGen tracebacks, smolagents' rich panels) is captured per replay — kept with the replay's record
(``output_lines`` and the last lines in ``artifacts["replays"]``) — and never reaches the user's terminal.

Bad input is a marked replay (``ReplayResult.error``, also in ``artifacts["replays"]``) and the search goes on: a
factory that raises (the exception's type), a verifier that raises or returns neither a Verdict nor a bool
(``VerifierError``; the run marking counts it as a failed verification), a proposal after which the framework raises
(the run ended by an exception: that exception's type), an intervention the adapter refuses
(``InterventionRefused``), a replay that outlives ``replay_timeout_s`` (``ReplayTimeout``, or ``FactoryTimeout`` /
``VerifierTimeout`` naming what hung), user code raising ``SystemExit`` / ``KeyboardInterrupt`` (that type). The
budgets hold whatever user code does (issue 36 item 3): every replay and the probe run on a loop of their own in a
worker thread, the factory and a synchronous verifier in threads of their own (:mod:`causaltrace.replay.guarded`),
and each replay's timeout is cut to what is left of ``max_seconds``; the result names what hung
(``RepairResult.hung``).

A flip is evidence only when it reproduces (issue 36 item 2, :func:`_reproduce`): before a replayed flip becomes the
result, the UNEDITED run is replayed with every call after the step live (it must still not succeed: a replay served
from the recording would never exercise a noisy tool or model) and the flipping edit once more (it must flip again);
when the unedited replay shows a call answering its recorded request differently, both are repeated up to the
policy's ``attempts``. Otherwise the search stops: the run is nondeterministic (``RepairResult.nondeterministic``), the
guiding diagnosis stands marked so, with no pair and no "replay" label. Cost: two replays per accepted flip (a
deterministic run), six when a call answered differently.

``agent_first=False`` keeps CausalFlow's published search (every candidate step in step order, SEEDS §7.5), which
``--method causalflow`` uses as a benchmark baseline.

The result updates the run's Diagnosis (``verified_by="replay"``, the replays tried in ``artifacts["replays"]``)
and yields a (wrong step, corrected step) :class:`RepairPair` whose prompt is the exact recorded LLM request at the
corrected step. Both are stored with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from causaltrace.exceptions import UserError
from causaltrace.protocols import Factory, RunStore, Sandbox
from causaltrace.replay.concurrency import (
    UserCodeExit,
    default_concurrency,
    in_order,
    in_own_loop,
    on_interrupt,
    routed_output,
)
from causaltrace.replay.consensus import confirm_flagged
from causaltrace.replay.corrections import classify, corrections_for, findings_of
from causaltrace.replay.edits import edit_key, original_value, replacement_kind
from causaltrace.replay.executor import ReplayPolicy, answered_differently, default_sandbox, has_recording
from causaltrace.replay.guarded import UserCodeTimeout, Watch, captured_output, guarded_replay, watched_factory
from causaltrace.replay.minimality import minimality
from causaltrace.replay.probe import probe_models
from causaltrace.replay.proposals import proposals_for
from causaltrace.replay.repair_diagnosis import updated_diagnosis
from causaltrace.replay.turns import assistant_turn, corrected_turn, producing_llm
from causaltrace.schema import Diagnosis, Finding, RepairPair, ReplayResult, Run, Step

if TYPE_CHECKING:  # provenance loads where repair runs (``import causaltrace`` stays light)
    from causaltrace.attribution.stages.provenance import Provenance
    from causaltrace.replay.suspicion import StepSuspicion, SuspicionIndex

__all__ = ["RepairResult", "StepAttempt", "build_repair_pair", "is_environment_step", "repair",
           "repair_pair_or_reason", "repair_sync"]

logger = logging.getLogger("causaltrace")


#: The search's default bound: most repairs of the fault suite need a few dozen replays; a run that needs more
#: should be repaired with a model's proposals or a narrower ``candidates`` list, not by brute force.
DEFAULT_MAX_REPLAYS = 200
DEFAULT_MAX_SECONDS = 600.0
#: The replays after the corrections' pass (alternatives, then tool results): their flips prove no error.
DEFAULT_MAX_ALTERNATIVES = 12
#: A replay that takes longer is stopped and marked (a proposal that makes a team loop until a limit it lacks).
DEFAULT_REPLAY_TIMEOUT_S = 120.0


@dataclass
class StepAttempt:
    """What the search did at one candidate step."""

    step_id: str
    index: int
    #: ``agent`` (an agent's decision) or ``environment`` (a tool result, tried in the last phase)
    phase: str = "agent"
    #: which proposals were tried: ``correction`` (derived from findings), ``alternative`` or ``any`` (the
    #: published every-proposal search of ``agent_first=False``)
    basis: str = "any"
    crs: float = 0.0
    replays: list[ReplayResult] = field(default_factory=list)
    best: ReplayResult | None = None
    minimality: float | None = None
    #: what the framework printed during each replay (stdout and stderr, captured), parallel to ``replays``
    outputs: list[str] = field(default_factory=list)
    #: the replays that checked the flip reproduces (issue 36 item 2): the unedited run, the edit again
    checks: list[ReplayResult] = field(default_factory=list)
    check_outputs: list[str] = field(default_factory=list)
    #: why the flip is not evidence ("" when it reproduced, or was not checked)
    unreproduced: str = ""


@dataclass
class RepairResult:
    """The outcome of a repair search: the decisive step (if any flip was found), its fix, and every replay tried."""

    run_id: str
    attempts: list[StepAttempt]
    decisive: StepAttempt | None
    diagnosis: Diagnosis
    pair: RepairPair | None
    replays: int
    seconds: float
    #: why a flip yielded no repair pair (the correction cannot be written as the producing model's turn)
    pair_reason: str = ""
    #: ``"replays"`` or ``"seconds"`` when the search stopped because that budget ran out
    budget_exhausted: str = ""
    #: what the model probe before the first replay found (:mod:`causaltrace.replay.probe`), "" when not run
    probe: str = ""
    #: predicted outcomes tried (the predictive path: a run without a recording); ``replays`` counts replays only
    predictions: int = 0
    #: indices of the candidate steps provenance ruled out (reach 0: nothing they decided reaches the answer)
    pruned: list[int] = field(default_factory=list)
    #: the pair of a flip by an ALTERNATIVE (stored with ``basis="alternative"``, exported only when asked)
    alternative_pair: RepairPair | None = None
    #: corrections the search had not tried when its budget ran out
    corrections_untried: int = 0
    #: why the run is nondeterministic ("" unless a flip did not reproduce: then nothing is verified, no pair)
    nondeterministic: str = ""
    #: replays spent checking that flips reproduce (counted in ``replays`` too)
    check_replays: int = 0
    #: what the last replay that ran out of time was stuck in (``the factory did not return within 3 s``), or ""
    hung: str = ""

    @property
    def repaired(self) -> bool:
        return self.decisive is not None

    @property
    def live_calls_before_intervention(self) -> int:
        return sum(r.live_calls_before_intervention for a in self.attempts for r in a.replays)


# ------------------------------------------------------------------------------------------------ repair pairs


def build_repair_pair(run: Run, result: ReplayResult, *, crs: float, minimality_score: float) -> RepairPair | None:
    """The (wrong step, corrected step) pair of a flipping replay, or None when the correction cannot be written
    as the producing model's turn (:func:`repair_pair_or_reason` says why)."""
    return repair_pair_or_reason(run, result, crs=crs, minimality_score=minimality_score)[0]


def repair_pair_or_reason(run: Run, result: ReplayResult, *, crs: float, minimality_score: float
                          ) -> tuple[RepairPair | None, str]:
    """The pair of a flipping replay — ``chosen`` is the producing model's turn with only the corrected part changed
    (:mod:`causaltrace.replay.turns`) — or None and the reason no pair can be made."""
    step = run.step(result.intervention.step_id)
    llm = producing_llm(run, step)
    if llm is None:
        return None, f"step #{step.index} ({step.kind}) was not written by a model"
    edit = corrected_turn(run, step, result.intervention.replacement)
    if edit.turn is None:
        return None, edit.reason
    prompt: Any = None
    tools: Any = None
    ref = llm.inputs.get("recording")
    if isinstance(ref, dict) and run.recording is not None:
        call = run.recording.find(str(ref.get("agent_key")), "llm", int(ref.get("ordinal", -1)))
        if call is not None and isinstance(call.request, dict):
            prompt = call.request.get("messages")
            tools = call.request.get("tools") or call.request.get("tools_to_call_from")
    if prompt is None:
        prompt = llm.inputs.get("messages")
    pair = RepairPair(
        pair_id=uuid.uuid4().hex,
        run_id=run.run_id,
        step_id=step.step_id,
        step_index=step.index,
        step_kind=step.kind,
        agent=step.agent,
        prompt=prompt,
        chosen=edit.turn,
        rejected=assistant_turn(llm),
        tools=tools,
        task_id=str(run.metadata.get("task_id")) if run.metadata.get("task_id") else None,
        minimality=minimality_score,
        crs=crs,
        consensus=result.consensus.score if result.consensus is not None else None,
        verified_by=result.verified_by,
        replays_run=result.replays_run,
        replays_succeeded=result.replays_flipped,
        replay_run_id=result.run.run_id if result.run is not None else None,
        created_at=datetime.now(UTC),
    )
    return pair, ""


# ------------------------------------------------------------------------------------------------------ search


def _resolve_candidates(run: Run, candidates: Iterable[str | int | Step] | None, diagnosis: Diagnosis | None) -> list[Step]:
    allowed = {s.step_id for s in run.candidate_steps()}
    if candidates is None and diagnosis is not None and diagnosis.candidates:
        candidates = [c.step_id for c in diagnosis.candidates]
    if candidates is None:
        steps = run.candidate_steps()
    else:
        steps = []
        for c in candidates:
            if isinstance(c, Step):
                step = c
            elif isinstance(c, int):
                step = run.step_at(c)
            else:
                step = run.step(c)
            if step.step_id not in allowed:
                raise UserError(f"step #{step.index} ({step.kind}) of run {run.run_id} cannot be intervened on")
            steps.append(step)
    return sorted({s.step_id: s for s in steps}.values(), key=lambda s: s.index)


async def repair(
    run: Run,
    factory: Factory,
    verify: Any,
    candidates: Iterable[str | int | Step] | None = None,
    k: int = 3,
    *,
    model: str | Any = None,
    diagnosis: Diagnosis | None = None,
    sandbox: Sandbox | None = None,
    policy: ReplayPolicy | None = None,
    mutation_budget: int = 30,
    measure: str = "positional",
    exhaustive: bool = False,
    store: RunStore | bool = True,
    on_replay: Callable[[Step, ReplayResult], None] | None = None,
    agent_first: bool = True,
    environment: bool = True,
    max_replays: int | None = DEFAULT_MAX_REPLAYS,
    max_seconds: float | None = DEFAULT_MAX_SECONDS,
    replay_timeout_s: float | None = DEFAULT_REPLAY_TIMEOUT_S,
    max_alternatives: int | None = DEFAULT_MAX_ALTERNATIVES,
    probe: bool = True,
    concurrency: int | None = None,
    prune: bool = True,
    order_proposals: bool | None = None,
    corrections: bool = True,
) -> RepairResult:
    """Search for the earliest step whose minimal correction flips the run (module docstring); store the result.

    ``store`` is True (the default store), False (nothing is stored), or a :class:`~causaltrace.protocols.RunStore`.
    ``on_replay`` is called after every replay (progress). ``agent_first`` searches the agents' decisions before
    tool results; ``environment=False`` skips the tool-result phase altogether; ``max_replays`` / ``max_seconds``
    bound the search, ``max_alternatives`` the replays after the corrections' pass and ``replay_timeout_s`` each
    replay (None: unbounded) (module docstring). ``probe`` checks, before the first replay, that the factory's
    models answer the conversation rather than recite a fixed list (:mod:`causaltrace.replay.probe`; a ``UserError``
    when they do not). ``concurrency`` replays of one step's proposals run at once (default
    :func:`default_concurrency`); the result is that of one at a time (:mod:`causaltrace.replay.concurrency`).
    ``prune`` skips the candidate steps provenance rules out (reach 0; module docstring); ``order_proposals`` tries
    each step's suspicious edits first (module docstring; None: as ``prune`` — provenance guides both or neither).
    ``corrections=False`` skips the corrections' pass (every proposal is then an alternative: a flip proves none).
    """
    judge = _repairable(run, model)
    started = time.perf_counter()
    store_obj = _open_store(store)
    if diagnosis is None and store_obj is not None:
        diagnosis = _guide(store_obj, run.run_id)
    findings = findings_of(run, diagnosis.findings if diagnosis is not None else None) if corrections else []
    steps, pruned, suspicion = _guided(run, _resolve_candidates(run, candidates, diagnosis), prune,
                                       prune if order_proposals is None else order_proposals,
                                       keep=_ends_work_before_an_omission(run, findings))
    budget = _Budget(max_replays, max_seconds, started, replay_timeout_s,
                     max(1, default_concurrency() if concurrency is None else concurrency), max_alternatives)
    tried = _Tried(on_replay, store_obj, run, diagnosis, started, pruned)
    from causaltrace.replay.sandbox.spares import spare_workers  # the sandbox package loads where repair runs
    with routed_output(), on_interrupt(tried.save), spare_workers():  # a CodeAgent's worker started ahead
        probed = await _probe(run, factory, sandbox, budget.timeout()) if probe and has_recording(run) else ""
        attempts, decisive, spent = await _search(
            run, steps, factory, verify, agent_first=agent_first, environment=environment, exhaustive=exhaustive,
            budget=budget, judge=judge, k=k, sandbox=sandbox, policy=policy, mutation_budget=mutation_budget,
            measure=measure, on_replay=tried, suspicion=suspicion, findings=findings,
        )
    pair, alternative_pair, pair_reason = _pairs(run, decisive)
    replays, predictions = _counts(attempts)
    unproven = next((a for a in attempts if a.unreproduced), None)
    cut = unproven is not None and unproven.unreproduced == UNCONFIRMED  # the budget, not the run, left it open
    exhausted = "seconds" if cut else budget.exhausted(spent) if decisive is None and unproven is None else ""
    hung = _hung(attempts, probed)
    updated = updated_diagnosis(run, diagnosis, attempts, decisive, replays, time.perf_counter() - started,
                                 exhausted=exhausted, predictions=predictions, pruned=pruned, unproven=unproven,
                                 hung=hung)
    _save(store_obj, updated, pair, alternative_pair)
    untried = _untried_corrections(run, steps, attempts, findings) if exhausted else 0
    return RepairResult(run_id=run.run_id, attempts=attempts, decisive=decisive, diagnosis=updated, pair=pair,
                        replays=replays, seconds=time.perf_counter() - started, pair_reason=pair_reason,
                        budget_exhausted=exhausted, probe=probed, predictions=predictions,
                        pruned=[s.index for s in pruned], alternative_pair=alternative_pair,
                        corrections_untried=untried, nondeterministic=unproven.unreproduced if unproven and not cut else "",
                        check_replays=sum(r.replays_run for a in attempts for r in a.checks),
                        hung=hung)


#: Why a flip is left unconfirmed when the seconds budget ends its checks (not a sign of nondeterminism)
UNCONFIRMED = "the seconds budget ran out before the flip was reproduced"

_TIMEOUTS = ("FactoryTimeout", "VerifierTimeout", "ReplayTimeout")


def _hung(attempts: list[StepAttempt], probed: str) -> str:
    """What the last replay that ran out of time was stuck in (its mark's message), else the probe's, else ""."""
    marks = [r.error.message for a in attempts for r in a.replays + a.checks
             if r.error is not None and r.error.type in _TIMEOUTS]
    if marks:
        return marks[-1]
    return probed.removeprefix("inconclusive: ") if "did not return within" in probed else ""


def _save(store: RunStore | None, diagnosis: Diagnosis, *pairs: RepairPair | None) -> None:
    """Store the updated diagnosis and the pairs the search made (none without a store)."""
    if store is None:
        return
    store.save_diagnosis(diagnosis)
    for pair in pairs:
        if pair is not None:
            store.save_repair_pair(pair)


def _untried_corrections(run: Run, steps: list[Step], attempts: list[StepAttempt], findings: list[Finding]) -> int:
    """How many corrections of the candidate steps the search never replayed (it ran out of budget first); one whose
    edit a replay already made at another step (``edits.edit_key``) was tried."""
    def key(i: Any) -> str:
        return edit_key(run, i) or i.step_id + json.dumps(i.replacement, sort_keys=True, default=str)

    tried = {key(r.intervention) for a in attempts for r in a.replays}
    return sum(1 for step in steps for c in corrections_for(step, run, findings) if key(c) not in tried)


def _repairable(run: Run, model: str | Any) -> Any:
    """The judge of ``model`` (None without one), after checking that ``run`` can be repaired (a UserError)."""
    if run.outcome.status != "failure":
        raise UserError(f"run {run.run_id} did not fail (status {run.outcome.status!r}): nothing to repair")
    if not has_recording(run) and model is None:
        raise UserError(f"run {run.run_id} has no recording: repairing it needs a model (--model) to predict replays")
    if model is None or hasattr(model, "ask"):
        return model
    from causaltrace.attribution.judge import Judge

    return Judge(model)


def _pairs(run: Run, decisive: StepAttempt | None) -> tuple[RepairPair | None, RepairPair | None, str]:
    """``(pair, alternative_pair, reason)``: the pair of a correction's flip, or the pair an alternative's flip
    keeps for ``pairs export --include-alternatives`` only (issue 32 item 5), and why there is no pair."""
    pair, reason = _pair_of(run, decisive)
    if pair is not None and pair.basis == "alternative":
        return None, pair, ("the flip came from an alternative (no finding derives the edit): its pair is kept for "
                            "`pairs export --include-alternatives` only")
    return pair, None, reason


def _pair_of(run: Run, decisive: StepAttempt | None) -> tuple[RepairPair | None, str]:
    """The repair pair of the decisive flip, or None and why (an environment flip yields none)."""
    if decisive is not None and decisive.phase == "environment":
        return None, "the flip edits a tool result (the environment), not a model's turn"
    if decisive is not None and decisive.best is not None:
        pair, reason = repair_pair_or_reason(run, decisive.best, crs=decisive.crs,
                                             minimality_score=decisive.minimality or 0.0)
        if pair is not None and decisive.best.intervention.basis == "alternative":
            pair = pair.model_copy(update={"basis": "alternative"})
        return pair, reason
    return None, ""


async def _probe(run: Run, factory: Factory, sandbox: Sandbox | None, timeout_s: float | None) -> str:
    """The model probe (output captured, bounded and run in its own worker like a replay, its factory watched:
    issue 36 item 3); raises its one-line UserError."""
    watch = Watch(timeout_s)
    async with captured_output():
        try:
            verdict = await in_own_loop(lambda: probe_models(run, watched_factory(factory, watch),
                                                             sandbox=sandbox or default_sandbox()), timeout_s)
        except (TimeoutError, UserCodeTimeout):
            return f"inconclusive: {watch.timeout_mark()[1].replace('the replay', 'the probe replay')}"
        except UserCodeExit as exc:
            return f"inconclusive: the probe replay's {exc}"
    return verdict.detail if verdict.probed else f"inconclusive: {verdict.detail}"


async def _search(run: Run, steps: list[Step], factory: Factory, verify: Any, *, agent_first: bool,
                  environment: bool, exhaustive: bool, budget: _Budget, judge: Any, k: int, sandbox: Sandbox | None,
                  policy: ReplayPolicy | None, mutation_budget: int, measure: str,
                  on_replay: Callable[[Step, ReplayResult], None] | None, suspicion: SuspicionIndex | None = None,
                  findings: list[Finding] | None = None) -> tuple[list[StepAttempt], StepAttempt | None, int]:
    """The passes in order — the corrections of every candidate step (earliest first), then, only if none flipped,
    the alternatives, then the environment — each step's proposals in order, until the earliest flip (or the
    budget's end); returns the attempts, the decisive one and what the budget was charged (replays and
    predictions, :func:`_cost`)."""
    attempts: list[StepAttempt] = []
    decisive: StepAttempt | None = None
    replays = 0
    for phase, basis, phase_steps in _phases(steps, agent_first=agent_first, environment=environment):
        if basis == "alternative" and budget.alternatives_from is None:
            budget.alternatives_from = replays  # the corrections' pass is over: the alternatives' bound starts
        for step in phase_steps:
            if budget.exhausted(replays):
                break
            proposals = await _proposals(run, step, basis, findings or [], judge=judge, k=k,
                                         mutation_budget=mutation_budget,
                                         suspicion=suspicion.of(step) if suspicion is not None else None)
            if not proposals and basis == "correction":  # a step with nothing to correct: no attempt
                continue
            attempt = await _try_step(run, step, factory, verify, proposals, phase=phase, basis=basis,
                                      sandbox=sandbox, policy=policy, judge=judge, measure=measure,
                                      on_replay=on_replay, budget=budget, replays_so_far=replays)
            attempts.append(attempt)
            replays += sum(_cost(r) for r in attempt.replays)
            if attempt.crs == 1.0 and await confirm_flagged(run, attempt, judge) and decisive is None:  # issue 20.8
                await _reproduce(run, step, attempt, factory, verify, sandbox=sandbox, policy=policy, judge=judge,
                                 budget=budget, on_replay=on_replay)
                replays += sum(_cost(r) for r in attempt.checks)
                if attempt.unreproduced:  # the run is nondeterministic: no flip of it is evidence
                    return attempts, None, replays
                decisive = attempt
                if not exhaustive:
                    break
        if (decisive is not None and not exhaustive) or budget.exhausted(replays):
            break
    return attempts, decisive, replays


async def _reproduce(run: Run, step: Step, attempt: StepAttempt, factory: Factory, verify: Any, *,
                     sandbox: Sandbox | None, policy: ReplayPolicy | None, judge: Any, budget: _Budget,
                     on_replay: Callable[[Step, ReplayResult], None] | None) -> None:
    """Issue 36 item 2: a replayed flip is evidence only when it reproduces. The UNEDITED run is replayed once —
    its recorded answer at the step, every call after it live (:class:`~causaltrace.replay.executor.ControlPlayback`:
    a replay served from the recording would not exercise a noisy tool or model) — and must still fail; the flipping
    edit is replayed once more and must flip again. When a live call of the unedited replay answered its recorded
    request differently (a tool, code or model that is itself nondeterministic), one of each is not enough: both
    are repeated up to the policy's ``attempts`` (3) and every one must hold. Sets ``attempt.unreproduced`` to why
    not (the run is then reported nondeterministic); the checks go to ``attempt.checks`` and count as replays. A
    predicted flip is not checked (no replay to repeat)."""
    best = attempt.best
    if best is None or best.verified_by != "replay":
        return
    edit = best.intervention
    where = f"step #{step.index}"
    control = edit.model_copy(update={"description": f"the unedited run, live after {where} (does it still fail?)"})
    again = edit.model_copy(update={"description": f"again: {edit.description} (does it flip again?)"})
    rounds, checked = 1, 0
    while checked < rounds:
        for proposal, is_control in ((control, True), (again, False)):
            if budget.exhausted(0) == "seconds":
                attempt.unreproduced = UNCONFIRMED
                return
            result, output = await guarded_replay(run, factory, proposal, verify, sandbox=sandbox, policy=policy,
                                                  model=judge, timeout_s=budget.timeout(), control=is_control)
            attempt.checks.append(result)
            attempt.check_outputs.append(output)
            if on_replay is not None:
                on_replay(step, result)
            attempt.unreproduced = _check_failed(result, is_control, where)
            if attempt.unreproduced and result.error is not None and budget.exhausted(0) == "seconds":
                attempt.unreproduced = UNCONFIRMED  # cut by the budget's end: nothing is known about the run
            if attempt.unreproduced:
                return
            if is_control and not checked and rounds == 1:
                noisy = answered_differently(run, result.run)
                if noisy:
                    rounds = max(1, (policy or ReplayPolicy()).attempts)
                    logger.info("causaltrace repair: %s answered recorded requests differently; the flip at %s must "
                                "hold in %d replays of each", ", ".join(noisy[:3]), where, rounds)
        checked += 1


def _check_failed(result: ReplayResult, control: bool, where: str) -> str:
    """Why one check of :func:`_reproduce` does not hold ("" when it does)."""
    if control and result.flipped:
        return (f"the unedited run succeeded when replayed live after {where}: its outcome changes without an edit, "
                "so no flip of it is evidence")
    if control:  # it did not succeed: failed, or ended without success (an error, a timeout) — as recorded
        return ""
    if result.error is not None:
        return (f"the flipping edit could not be replayed again ({result.error.type}): the flip at {where} was not "
                "reproduced")
    if not result.flipped:
        return (f"the flipping edit at {where} did not flip the run when replayed again ({result.outcome.status}): "
                "the same edit gives different outcomes")
    return ""


async def _proposals(run: Run, step: Step, basis: str, findings: list[Finding], *, judge: Any, k: int,
                     mutation_budget: int, suspicion: StepSuspicion | None) -> list[Any]:
    """The proposals of one pass at ``step``: its corrections (``correction``), the other edits, labelled
    alternatives (``alternative``), or every edit with the corrections among them labelled as such (``any``: the
    published search, in its own order)."""
    corrections = corrections_for(step, run, findings) if not is_environment_step(step) else []
    if basis == "correction":
        return corrections
    others = await proposals_for(step, run, judge=judge, k=k, mutation_budget=mutation_budget, suspicion=suspicion)
    if basis == "alternative":
        return classify(others, corrections)
    by_key = {json.dumps(c.replacement, sort_keys=True, default=str): c for c in corrections}
    return [by_key.get(json.dumps(p.replacement, sort_keys=True, default=str))
            or p.model_copy(update={"basis": "alternative"}) for p in others]


def is_environment_step(step: Step) -> bool:
    """A step whose replacement edits the environment's output (a tool result), not an agent's decision."""
    return replacement_kind(step) == "result"


def _cost(result: ReplayResult) -> int:
    """What one tried proposal costs the budget: its replays (r of R with live calls), or one for a predicted
    outcome (a model call standing in for a replay; module docstring)."""
    return 1 if result.verified_by == "prediction" else result.replays_run


def _counts(attempts: list[StepAttempt]) -> tuple[int, int]:
    """``(replays, predictions)`` the search ran."""
    tried = [r for a in attempts for r in a.replays + a.checks]
    return (sum(r.replays_run for r in tried if r.verified_by != "prediction"),
            sum(1 for r in tried if r.verified_by == "prediction"))


def _provenance(run: Run) -> Provenance | None:
    """The run's value provenance, built once for pruning and ordering; None when it fails (both are
    optimisations: without them the search is the same, only longer)."""
    try:
        from causaltrace.attribution.stages.provenance import build_provenance

        return build_provenance(run)
    except Exception as exc:
        logger.info("causaltrace: provenance failed (%s: %s); repair tries every candidate step and proposal "
                    "in minimality order", type(exc).__name__, exc)
        return None


_TERMINATION = ("TERMINATE", "final answer", "FINAL ANSWER")


def _ends_work_before_an_omission(run: Run, findings: list[Finding]) -> set[str]:
    """Issue 32 item 6: when the answer lacks an item the task named (an ``omission`` finding), the steps that END
    an agent's work at or before it — a final answer, a hand-back or handoff, a termination, a ``final_answer``
    call — reach the failure through what is missing, so provenance's reach (which follows what steps said, not what
    they left out) must not prune them."""
    omitted = [f.index for f in findings if f.family == "omission"]
    if not omitted:
        return set()
    last = max(omitted)
    return {s.step_id for s in run.steps if s.index <= last and (
        s.kind in ("final_answer", "handoff") or (s.kind == "tool_call" and s.tool_name == "final_answer")
        or (s.kind == "message" and any(word in (s.content or "") for word in _TERMINATION)))}


def _guided(run: Run, steps: list[Step], prune: bool, order: bool, keep: set[str] | None = None
            ) -> tuple[list[Step], list[Step], SuspicionIndex | None]:
    """``(kept, pruned, suspicion)``: provenance built once (when pruning or ordering asks for it) prunes the
    candidate steps — never those in ``keep`` — and indexes what is suspicious in each (module docstring)."""
    prov = _provenance(run) if steps and (prune or order) else None
    kept, pruned = _pruned(steps, prov if prune else None, keep or set())
    if prov is None or not order:
        return kept, pruned, None
    from causaltrace.replay.suspicion import SuspicionIndex

    return kept, pruned, SuspicionIndex(prov)


def _pruned(steps: list[Step], prov: Provenance | None, keep: Collection[str] = ()
            ) -> tuple[list[Step], list[Step]]:
    """``(kept, pruned)``: the candidate steps whose provenance reach is 0 are pruned (module docstring) unless in
    ``keep``; a step provenance does not score is kept, and no provenance (not asked for, or failed) prunes
    nothing."""
    if prov is None:
        return steps, []
    reach = {sid: prov.reach.get(i, 0.0) for i, sid in prov.step_ids.items()}
    pruned = [s for s in steps if reach.get(s.step_id) == 0.0 and s.step_id not in keep]
    return [s for s in steps if s not in pruned], pruned


def _phases(steps: list[Step], *, agent_first: bool, environment: bool) -> list[tuple[str, str, list[Step]]]:
    """The search order as ``(phase, basis, steps)``: the corrections of the agents' decisions, then their
    alternatives, then (last, labelled) the tool results; without ``agent_first`` the published search (every step,
    every proposal, in step order)."""
    if not agent_first:
        return [("agent", "any", [s for s in steps if environment or not is_environment_step(s)])]
    agent = [s for s in steps if not is_environment_step(s)]
    env = [s for s in steps if is_environment_step(s)]
    return ([("agent", "correction", agent), ("agent", "alternative", agent)]
            + ([("environment", "alternative", env)] if environment and env else []))


@dataclass
class _Budget:
    """The search's bound in replays and seconds (None: unbounded)."""

    max_replays: int | None
    max_seconds: float | None
    started: float
    replay_timeout_s: float | None = None
    #: replays of one step's proposals in flight at once
    concurrency: int = 1
    max_alternatives: int | None = None  # the bound after the corrections' pass; the replays when that pass ended
    alternatives_from: int | None = None
    edits: set[str] = field(default_factory=set)  # what the search's replays changed (edits.edit_key)

    def first(self, key: str | None) -> bool:
        """Whether the edit ``key`` is new to this search (it is then noted); an edit without a key always is."""
        if key is None:
            return True
        new = key not in self.edits
        self.edits.add(key)
        return new

    def timeout(self) -> float | None:
        """One replay's time limit from now: the replay timeout, cut to what is left of the seconds budget (so
        ``max_seconds`` holds whatever a replay's user code does; issue 36 item 3)."""
        if self.max_seconds is None:
            return self.replay_timeout_s
        left = max(0.1, self.started + self.max_seconds - time.perf_counter())
        return left if self.replay_timeout_s is None else min(self.replay_timeout_s, left)

    def exhausted(self, replays: int) -> str:
        if self.max_replays is not None and replays >= self.max_replays:
            return "replays"
        if self.max_seconds is not None and time.perf_counter() - self.started >= self.max_seconds:
            return "seconds"
        if (self.max_alternatives is not None and self.alternatives_from is not None
                and replays - self.alternatives_from >= self.max_alternatives):
            return "alternatives"
        return ""


async def _try_step(run: Run, step: Step, factory: Factory, verify: Any, proposals: list[Any], *, phase: str,
                    basis: str, sandbox: Sandbox | None, policy: ReplayPolicy | None, judge: Any, measure: str,
                    on_replay: Callable[[Step, ReplayResult], None] | None, budget: _Budget,
                    replays_so_far: int) -> StepAttempt:
    """Replay ``proposals`` for one step, in order, until one flips the run (CRS = 1) or the budget runs out."""
    attempt = StepAttempt(step_id=step.step_id, index=step.index,
                          phase="environment" if is_environment_step(step) else phase, basis=basis)
    proposals = [p for p in proposals if budget.first(edit_key(run, p))]  # an edit replayed already: not again
    original = original_value(step, replacement_kind(step))
    done = replays_so_far
    # each replay's timeout is set when it starts: the replay timeout, cut to what is left of the seconds budget
    starts = [functools.partial(lambda p: guarded_replay(run, factory, p, verify, sandbox=sandbox, policy=policy,
                                                         model=judge, timeout_s=budget.timeout()), p)
              for p in proposals]
    # started in proposal order, consumed in proposal order: the stopping rules below are the sequential search's
    results = in_order(starts, budget.concurrency, may_start=lambda in_flight: not budget.exhausted(done + in_flight))
    async with contextlib.aclosing(results):
        async for result, output in results:
            # a replay started within the seconds budget and cut at its end (issue 36 item 3) is recorded: it says
            # what hung; one past a replay count (all replays, or the alternatives') ran ahead and is not
            if budget.exhausted(done) in ("replays", "alternatives"):
                break
            done += _cost(result)
            attempt.replays.append(result)
            attempt.outputs.append(output)
            if on_replay is not None:
                on_replay(step, result)
            if result.flipped:
                attempt.crs = 1.0
                attempt.best = result
                attempt.minimality = minimality(original, result.intervention.replacement,
                                                kind="edit" if measure == "edit" else "positional")
                break
    return attempt


def _guide(store: RunStore, run_id: str) -> Diagnosis | None:
    """The stored diagnosis that guides the search: the strongest the run has (replay > prediction > heuristic,
    newest within a level — the one ``report`` shows), else the newest."""
    strongest = getattr(store, "strongest_diagnosis", None)
    if callable(strongest):
        return strongest(run_id)
    previous = store.diagnoses(run_id)
    return previous[-1] if previous else None


def _open_store(store: RunStore | bool | None) -> RunStore | None:
    if store is False or store is None:
        return None
    if store is True:
        from causaltrace.collector.store import Store

        return Store()
    return store


@dataclass
class _Tried:
    """The replays the search consumed, in order, passed on to ``on_replay`` — and what a stop stores (the CLI on
    SIGINT, :func:`causaltrace.replay.concurrency.save_interrupted`): the search so far, marked interrupted, in one
    write."""

    on_replay: Callable[[Step, ReplayResult], None] | None
    store: RunStore | None
    run: Run
    diagnosis: Diagnosis | None
    started: float
    pruned: list[Step]
    results: list[tuple[Step, ReplayResult]] = field(default_factory=list)

    def __call__(self, step: Step, result: ReplayResult) -> None:
        self.results.append((step, result))
        if self.on_replay is not None:
            self.on_replay(step, result)

    def save(self) -> None:
        if self.store is not None:
            self.store.save_diagnosis(_interrupted_diagnosis(self.run, self.diagnosis, list(self.results),
                                                             self.started, self.pruned))


def _interrupted_diagnosis(run: Run, diagnosis: Diagnosis | None, tried: list[tuple[Step, ReplayResult]],
                           started: float, pruned: list[Step]) -> Diagnosis:
    """The search's record when the process is stopped mid-search: the replays consumed so far, marked
    ``artifacts["interrupted"]``; the guiding diagnosis's verdict stands, nothing is proven."""
    attempts: dict[str, StepAttempt] = {}
    for step, result in tried:
        attempts.setdefault(step.step_id, StepAttempt(step_id=step.step_id, index=step.index)).replays.append(result)
    replays, predictions = _counts(list(attempts.values()))
    seconds = time.perf_counter() - started
    updated = updated_diagnosis(run, diagnosis, list(attempts.values()), None, replays, seconds,
                                 predictions=predictions, pruned=pruned)
    note = f"the repair search was interrupted after {replays} replays in {seconds:.1f} s; no step was proven"
    explanation = f"{diagnosis.explanation} ({note})".strip() if diagnosis is not None else note
    return updated.model_copy(update={"explanation": explanation, "artifacts": {
        **updated.artifacts, "interrupted": {"replays": replays, "predictions": predictions, "seconds": seconds}}})


def repair_sync(run: Run, factory: Factory, verify: Any, candidates: Any = None, k: int = 3, **kwargs: Any) -> RepairResult:
    """:func:`repair` for sync code."""
    return asyncio.run(repair(run, factory, verify, candidates, k, **kwargs))
