"""Loop detector (ARCHITECTURE step 3: "persistent loops (repeated near-identical actions without progress — EMFA's
loop branch)"; EMFA §2.6 / SEEDS §2.6, here deterministic).

Two kinds of loop, both groups of at least ``min_repeats`` steps by the same agent, each member within ``max_gap``
steps of the previous one:

* an **action loop** (issue 20: a repetition counts only when the same agent repeats the SAME action and gets no new
  information): a structured call (a tool call, a handoff, code) repeats only with the same target and EQUAL
  arguments (one call per item is not a loop); a final answer never repeats the step it returns; tool results and
  code outputs are observations, not actions; the thought before a call belongs to the call. Text steps are
  near-identical when the token sets of the *head* of their action
  signatures (the first ``head_chars`` characters of the normalised kind / target / text, where an agent states
  what it did: "I clicked 'See more results'") have Jaccard similarity ≥ ``threshold`` with the first member's;
  numbers and identifiers with a digit (``C2``, ``K4``) are kept and must be the same, so a changing number or
  item is a different action — and there is **no
  progress**: for at least ``min_repeated_followups`` of the repeats, the observation that follows it (a call's
  own result, else the next step by another agent) is near-identical to an earlier member's, or an error, or — for
  a text entry, which carries what the agent saw — the whole entry repeats an earlier one. A repeated action whose
  observations keep changing (polling a job that progresses, a retry that gets the result) is not a loop.
* an **instruction loop**: an agent re-issues an instruction to the same addressee (``"X (-> Y)"``, a handoff —
  NOT a speaker selection: selecting the same speaker again is turn-taking) whose text is similar (Jaccard of salient
  tokens ≥ ``instruction_threshold``; instructions are rephrased when re-issued) beyond the task's words: an
  orchestrator restates the task in every instruction (Magentic-One), so two different steps of its plan share
  them; only what an instruction asks beyond the task can repeat. Re-issuing says the previous attempt did not satisfy the instructing agent; the
  addressee's ``replies`` between the members are recorded — the first one is the first failure to follow (or the
  instruction was ambiguous: EMFA's loop branch separates the two; issue 6's LLM stages decide).

The artifact lists each loop's kind, agent, members, replies, a short signature and, for action loops, the share of
follow-ups that repeated. A loop's **first member** starts the repetition (EMFA's loop-branch candidate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import addressee, agent_of, candidate_steps, content_of
from causaltrace.schema import Run, Step, action_signature

__all__ = ["Loop", "LoopDetectStage", "detect_loops", "jaccard", "signature_tokens"]

_TOKEN = re.compile(r"[a-z0-9_]+(?:\.[0-9]+)?")


def signature_tokens(step: Step) -> frozenset[str]:
    """The token set of a step's action signature (computed when the step has none)."""
    sig = step.action_signature or action_signature(step.kind, step.tool_name, step.arguments or content_of(step))
    return frozenset(_TOKEN.findall(sig.casefold()[:2000]))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Token-set Jaccard similarity (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass
class Loop:
    """A persistent loop: who repeated what, where, and how little the observations changed."""

    agent: str
    members: list[int]
    signature: str
    repeated_followups: float
    kind: str = "action"
    addressee: str | None = None
    replies: list[int] = field(default_factory=list)

    @property
    def start(self) -> int:
        """The step that started the repetition."""
        return self.members[0]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "agent": self.agent, "members": self.members,
                               "signature": self.signature}
        if self.kind == "instruction":
            out["addressee"] = self.addressee
            out["replies"] = self.replies
        else:
            out["repeated_followups"] = round(self.repeated_followups, 3)
        return out


def _is_error(step: Step) -> bool:
    return step.status == "error" or step.kind == "error" or step.outputs.get("is_error") is True


def head_tokens(step: Step, head_chars: int = 300) -> frozenset[str]:
    """Tokens of the head of a step's action signature (where an agent states what it did)."""
    sig = step.action_signature or action_signature(step.kind, step.tool_name, step.arguments or content_of(step))
    return frozenset(_TOKEN.findall(sig.casefold()[:head_chars]))


def _group(
    steps: list[Step], key: Any, tokens: dict[int, frozenset[str]], threshold: float, max_gap: int
) -> list[tuple[Any, list[Step]]]:
    """Greedy grouping in step order: a step joins its key's open group whose first member it resembles."""
    groups: list[tuple[Any, list[Step]]] = []
    open_by_key: dict[Any, list[int]] = {}
    for step in steps:
        k = key(step)
        if k is None:
            continue
        # groups whose last member is more than max_gap steps back are closed for good
        still_open = [gi for gi in open_by_key.get(k, []) if step.index - groups[gi][1][-1].index <= max_gap]
        open_by_key[k] = still_open
        for gi in still_open:
            members = groups[gi][1]
            if jaccard(tokens[step.index], tokens[members[0].index]) >= threshold:
                members.append(step)
                break
        else:
            groups.append((k, [step]))
            still_open.append(len(groups) - 1)
    return groups


#: environment outputs: what an action got back, never an action that repeats
OBSERVATIONS = frozenset({"tool_response", "code_execution"})


def call_identity(step: Step) -> str | None:
    """For a structured call (a tool call, a handoff, code): its target and canonical arguments — two calls are the
    SAME action only when these are equal (one call per item, with different arguments, is not a repetition).
    None for a text step (compared by tokens instead)."""
    if step.tool_name and step.arguments is not None:
        return action_signature("call", step.tool_name, step.arguments)
    code = step.inputs.get("code") if isinstance(step.inputs, dict) else None
    if isinstance(code, str) and code.strip():
        return action_signature("code", step.tool_name, " ".join(code.split()))
    return None


def is_answer_step(step: Step) -> bool:
    """A final answer (the step, the ``final_answer`` tool call or its response): it RETURNS an earlier step's
    result, so a step and the answer that returns it are never a repetition."""
    return step.kind == "final_answer" or (step.tool_name or "") == "final_answer"


def relays_result(run: Run, step: Step) -> bool:
    """A message that is its agent's tool result passed on word for word (AutoGen's tool-call summary, what an
    agent without reflection always posts): the tool's output, not an action of the agent — a later report of the
    same result is no repeat of it."""
    if step.kind != "message":
        return False
    text = content_of(step).strip()
    return bool(text) and any(s.kind in ("tool_response", "code_execution") and s.agent == step.agent
                              and content_of(s).strip() == text for s in run.steps[max(0, step.index - 4):step.index])


def _numbers(tokens: frozenset[str]) -> frozenset[str]:
    """The tokens that act as a text action's arguments: numbers and identifiers with a digit (``c2``, ``k4``,
    ``b7``) — the same instruction for another account or order is another action, not a repeat."""
    return frozenset(t for t in tokens if any(ch.isdigit() for ch in t))


def detect_loops(
    run: Run,
    *,
    min_repeats: int = 2,
    threshold: float = 0.8,
    instruction_threshold: float = 0.5,
    max_gap: int = 12,
    head_chars: int = 300,
    min_repeated_followups: float = 0.5,
    min_action_tokens: int = 6,
) -> list[Loop]:
    """Persistent loops in ``run`` (module docstring), ordered by their first member."""
    steps = candidate_steps(run)  # content steps: an llm_response and the message it produced are one action
    position = {s.index: i for i, s in enumerate(steps)}
    loops = _action_loops(run, steps, position, threshold=threshold, max_gap=max_gap, head_chars=head_chars,
                          min_repeats=min_repeats, min_repeated_followups=min_repeated_followups,
                          min_action_tokens=min_action_tokens)
    loops += _instruction_loops(steps, threshold=instruction_threshold, max_gap=max_gap, min_repeats=min_repeats,
                                task_words=frozenset(salient_tokens(run.task or "")))
    loops.sort(key=lambda lp: (lp.start, lp.kind))
    return loops


def _agent_of(step: Step) -> str:
    return agent_of(step)


def _action_loops(run: Run, steps: list[Step], position: dict[int, int], *, threshold: float, max_gap: int,
                  head_chars: int, min_repeats: int, min_repeated_followups: float,
                  min_action_tokens: int) -> list[Loop]:
    """Action loops: the same agent repeating the same action (a structured call with EQUAL arguments, or
    near-identical text with the same numbers) and getting no new information."""
    heads = {s.index: head_tokens(s, head_chars) for s in steps}
    identity = {s.index: call_identity(s) for s in steps}
    # routing chatter ("next speaker: <agent>") is not an action: too few tokens to compare; a final answer
    # returns an earlier step's result and is never a repeat of it
    # the thought before a call ("Thought: iterate.") is part of that call's action, not an action of its own
    thoughts = {s.index for s, nxt in zip(steps, steps[1:], strict=False) if s.kind == "reasoning"
                and identity[nxt.index] is not None and _agent_of(nxt) == _agent_of(s)}
    actions = [s for s in steps if addressee(s) is None and not is_answer_step(s) and s.kind not in OBSERVATIONS
               and s.index not in thoughts and (identity[s.index] is not None or len(heads[s.index]) >= min_action_tokens)
               and not relays_result(run, s)]

    agents = frozenset(a.casefold() for s in run.steps if (a := _agent_of(s)))

    def key(step: Step) -> Any:
        ident = identity[step.index]
        if ident is not None:
            return (_agent_of(step), ident)
        # a text action's arguments: its numbers and identifiers, and the agents it names ("researcher, please do
        # your part" and "calculator, please do your part" are two instructions, not one repeated)
        return (_agent_of(step), _numbers(heads[step.index]) | (heads[step.index] & agents))

    loops: list[Loop] = []
    for (agent, _), members in _group(actions, key, heads, threshold, max_gap):
        if len(members) < min_repeats:
            continue
        share = _no_progress_share(run, steps, position, members, agent, threshold, head_chars)
        if share >= min_repeated_followups:
            sig = " ".join(content_of(members[0]).split())[:160]
            loops.append(Loop(agent, [m.index for m in members], sig, share))
    return loops


def _no_progress_share(run: Run, steps: list[Step], position: dict[int, int], members: list[Step], agent: str,
                       threshold: float, head_chars: int) -> float:
    """The share of repeats that got NO new information: the observation that follows the repeat (its tool result,
    or the next step by another agent) is an error or near-identical to an earlier member's, or — for a text entry,
    which carries what the agent saw ("I clicked X. The page says Y") — the whole entry repeats an earlier one. A
    structured call is identical to its earlier members by construction: only its result can show progress."""
    fulls = [signature_tokens(m) for m in members]
    carries = [call_identity(m) is None for m in members]
    seen: list[frozenset[str]] = []
    repeated = 0
    last_repeated = False
    for n, member in enumerate(members):
        f = _observation(run, member) or _followup(steps, position[member.index], agent)
        ft = signature_tokens(f) if f is not None else None
        last_repeated = bool(n) and (
            (carries[n] and any(jaccard(fulls[n], prev) >= threshold for prev in fulls[:n]))
            or (f is not None and _is_error(f))
            or (ft is not None and any(_same_observation(ft, prev, threshold) for prev in seen))
        )
        repeated += last_repeated
        if ft is not None:
            seen.append(ft)
    if not last_repeated and call_identity(members[-1]) is not None:
        return 0.0  # the last try of a call got what the others did not: a retry that recovered, not a loop
    return repeated / (len(members) - 1)


def _same_observation(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """Two observations say the same: near-identical tokens AND the same numbers — a poll answering "30% done" and
    then "70% done" (or "done") reports progress, however alike its words."""
    return jaccard(a, b) >= threshold and _numbers(a) == _numbers(b)


def offered_next(run: Run, call: Step) -> bool:
    """Whether the result of ``call`` offered a next value for one of its arguments — a cursor ``c3`` after the
    call's ``c2``, a ``page 3`` after its page 2: the same letters, other digits — that a repeat of the call did
    not take (pagination that stopped advancing: the repeat is the loop's first wrong step, the call itself read a
    new page)."""
    seen = _observation(run, call)
    if seen is None or _is_error(seen):
        return False
    text = content_of(seen)
    for key, value in (call.arguments or {}).items():
        m = _ARGUMENT_TOKEN.fullmatch(str(value).strip())
        if m is None or not (m.group(1).strip(" _-") or _PAGING.search(str(key))):
            continue  # a bare number counts only as a page, cursor or offset: any result holds other numbers
        for other in re.finditer(rf"(?<![\w-]){re.escape(m.group(1))}\s?(\d+)(?![\w.])", text, re.IGNORECASE):
            if other.group(1) != m.group(2):
                return True
    return False


_PAGING = re.compile(r"page|cursor|offset|token|next", re.IGNORECASE)
#: an argument value that counts: letters (or none) and a number ("c2", "page2", "2")
_ARGUMENT_TOKEN = re.compile(r"([A-Za-z]{0,8}[\s_-]?)(\d{1,6})")


def answered_by_error(run: Run, call: Step) -> bool:
    """Whether the result a structured call got back is an error (it told the agent the call was wrong)."""
    seen = _observation(run, call)
    return seen is not None and _is_error(seen)


def _observation(run: Run, call: Step) -> Step | None:
    """The result a structured call got back: the first later ``tool_response`` of the same tool or
    ``code_execution`` (within 3 steps), or None."""
    if not call.tool_name:
        return None
    for later in run.steps[call.index + 1 : call.index + 4]:
        if (later.kind == "tool_response" and later.tool_name == call.tool_name) or later.kind == "code_execution":
            return later
    return None


def _instruction_loops(steps: list[Step], *, threshold: float, max_gap: int, min_repeats: int,
                       task_words: frozenset[str] = frozenset()) -> list[Loop]:
    """Instruction loops: an instruction (an orchestrator's ``X (-> Y)``, a handoff) re-issued to the same
    addressee. A speaker selection is routing, not an instruction: selecting the same speaker again is turn-taking."""
    instructions = [s for s in steps if addressee(s) is not None and s.kind != "speaker_selection"]
    words = {s.index: frozenset(salient_tokens(content_of(s))) - task_words for s in instructions}
    loops: list[Loop] = []
    for (agent, target), members in _group(
        instructions, lambda s: (_agent_of(s), addressee(s) or ""), words, threshold, max_gap
    ):
        if len(members) < min_repeats:
            continue
        bounds = [m.index for m in members] + [10**12]
        replies = []
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            reply = next((s for s in steps if lo < s.index < hi and _agent_of(s) == target), None)
            if reply is not None:
                replies.append(reply.index)
        sig = " ".join(content_of(members[0]).split())[:160]
        loops.append(Loop(agent, [m.index for m in members], sig, 1.0, kind="instruction", addressee=target,
                          replies=replies))
    return loops


def _followup(steps: list[Step], pos: int, agent: str) -> Step | None:
    for later in steps[pos + 1 : pos + 4]:
        if agent_of(later) != agent:
            return later
    return None


class LoopDetectStage(Stage[list[Loop]]):
    """Stage ``loop_detect`` (deterministic)."""

    stage_id: ClassVar[str] = "loop_detect"

    def __init__(self, **params: Any) -> None:
        self.params = params

    async def run(self, ctx: DiagnosisContext) -> list[Loop]:
        return detect_loops(ctx.run, **self.params)

    def artifact(self, result: list[Loop]) -> Any:
        return [lp.to_json() for lp in result]

    def skipped(self, ctx: DiagnosisContext) -> list[Loop]:
        return []
