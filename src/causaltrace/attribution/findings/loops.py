"""Family ``loop_no_progress``: a loop without progress (EMFA's persistent-loop branch; MAST FM-1.3). An action
loop — the same call with equal arguments and no new information — blames the step that started it; an
instruction re-issued to an agent blames the first reply that did not follow it (the first failure to follow) — when
the agent made no progress between the re-issues (its replies repeat each other or err: :func:`_replies_repeat`).
:mod:`causaltrace.attribution.stages.loops` finds both from action signatures and observations."""

from __future__ import annotations

from collections.abc import Sequence

from causaltrace.attribution.findings._common import evidence, finding
from causaltrace.attribution.stages.loops import Loop, answered_by_error, jaccard, offered_next, signature_tokens
from causaltrace.schema import Finding, Run

#: two replies to a re-issued instruction repeat each other when their signatures' tokens are this similar (the
#: action loops' near-identity)
SAME_REPLY = 0.8

__all__ = ["detect_loops_without_progress"]


def detect_loops_without_progress(run: Run, loops: Sequence[Loop]) -> list[Finding]:
    """One finding per loop: at its start (an action loop) or at the first reply to a re-issued instruction."""
    out = []
    for lp in loops:
        repeats = [evidence(run, m, "repeat") for m in lp.members[1:6]]
        if lp.kind == "action":
            members = ", ".join(map(str, lp.members[:6]))
            first = run.step_at(lp.start)
            if (error := answered_by_error(run, first)) or offered_next(run, first):
                # the first try got an error back that said what was wrong, or a result that offered the next value
                # (a cursor): a try the agent could go on from (a fixed twin does, right there); the repeat that
                # ignored it is where the loop was decided
                again = lp.members[1]
                after = "its error" if error else "its result offered the next value"
                out.append(finding(run, "loop_no_progress", again,
                                   f"step {again} repeats step {lp.start}'s call after {after}, the first of "
                                   f"{len(lp.members) - 1} repeats without progress (steps {members})", repeats))
            else:
                out.append(finding(run, "loop_no_progress", lp.start,
                                   f"step {lp.start} starts a loop of {len(lp.members)} near-identical actions "
                                   f"without progress (steps {members})", repeats))
        elif lp.replies and _replies_repeat(run, lp.replies):
            first = lp.replies[0]
            items = [evidence(run, lp.start, "request"), *repeats]
            out.append(finding(run, "loop_no_progress", first,
                               f"step {first} is the first reply to an instruction {lp.agent} re-issued to "
                               f"{lp.addressee} {len(lp.members) - 1} time(s) (steps "
                               f"{', '.join(map(str, lp.members[:6]))}): it did not do what was asked", items,
                               category="FM-1.3"))
    return out


def _replies_repeat(run: Run, replies: Sequence[int]) -> bool:
    """True when the addressee made no progress between the re-issues: an error reply, or two replies that repeat
    each other. An orchestrator re-issues an instruction while its addressee works through it (Magentic-One's
    "please continue searching" to a web surfer whose every reply shows a new page): replies that keep changing are
    progress, what the framework always does, and no evidence — as for action loops, whose observations must repeat."""
    steps = [run.step_at(i) for i in replies[:8]]
    if any(s.status == "error" for s in steps):
        return True
    tokens = [signature_tokens(s) for s in steps]
    return any(jaccard(a, b) >= SAME_REPLY for k, a in enumerate(tokens) for b in tokens[k + 1:])
