"""Reactive scripted model clients for AutoGen AgentChat (ARCHITECTURE decision 8).

A :class:`ScriptedChatCompletionClient` answers each ``create`` / ``create_stream`` call with a deterministic
FUNCTION of the request (a *policy*), never with the next item of a canned list — so a replay that changes one step
(a corrected tool argument) produces a different, consistent downstream. Token usage is reported as word counts.

The policies of the demo arithmetic team (task ``"(a + b) * c"``):

* :func:`planner_policy` restates the task's numbers as a plan (``PLAN: step 1: add 17 and 25. step 2: multiply
  the sum by 3.``);
* :func:`solver_policy` parses the numbers the plan gave it and calls the ``add`` / ``multiply`` tools with them,
  one call per model turn, each next call built from the previous tool RESULT in its context, then reports
  ``add(17, 25) = 42; multiply(42, 3) = 126. RESULT: 126``. ``off_by_one=True`` plants the demo's fault: the first
  ``add`` gets its second operand + 1; ``parallel=True`` computes ``a*c + b*c`` with two parallel ``multiply``
  calls first;
* :func:`reviewer_policy` recomputes every operation the solver reported and answers ``RESULT: n verified.
  APPROVE`` only when all of them and the RESULT agree, else ``REJECT: <what is wrong>`` (it checks the
  arithmetic it was shown, not the task — weak verification, so a wrong operand is carried forward);
* :func:`selector_policy` picks a SelectorGroupChat's next speaker from the conversation in the selector prompt;
* :func:`orchestrator_policy` plays a MagenticOneGroupChat's orchestrator (see its docstring): the task-ledger
  facts and plan, the JSON progress ledger (who speaks next, with what instruction; satisfied once the reviewer
  APPROVEs; stalling when an agent repeats itself or reports ``RESULT: unknown``), the re-planning prompts and the
  final answer — so a MagenticOne team runs to completion offline.

Usage:
    >>> from causaltrace.testing.autogen import planner_client, solver_client
    >>> client = solver_client(off_by_one=True)              # a ChatCompletionClient
    >>> client.model_info["function_calling"]
    True
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
    UserMessage,
)

__all__ = [
    "ScriptedChatCompletionClient",
    "ScriptedRequest",
    "ToolCallSpec",
    "call",
    "orchestrator_client",
    "orchestrator_policy",
    "parse_task",
    "planner_client",
    "planner_policy",
    "reviewer_client",
    "reviewer_policy",
    "scripted_model_info",
    "selector_client",
    "selector_policy",
    "solver_client",
    "solver_policy",
]

_OP = re.compile(r"\b(add|multiply)\((-?\d+), (-?\d+)\) = (-?\d+)")
_RESULT = re.compile(r"RESULT: (-?\d+|\w+)")
_TASK = re.compile(r"\(\s*(-?\d+)\s*\+\s*(-?\d+)\s*\)\s*\*\s*(-?\d+)")
_PLAN = re.compile(r"add (-?\d+) and (-?\d+)\. step 2: multiply the sum by (-?\d+)")


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call a policy asks for: the tool's name and its arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


def call(name: str, **arguments: Any) -> ToolCallSpec:
    """``call("add", a=1, b=2)``: a tool call for a policy to return (a list of them = parallel calls)."""
    return ToolCallSpec(name, arguments)


def _text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, FunctionCall):
                parts.append(f"{item.name}({item.arguments})")
            elif isinstance(item, FunctionExecutionResult):
                parts.append(item.content)
            else:
                parts.append(str(item))
        return " ".join(parts)
    return str(content)


class ScriptedRequest:
    """The request a policy sees: the messages (AutoGen ``LLMMessage`` objects) and the tools offered, with helpers
    for the questions a reactive policy asks."""

    def __init__(
        self,
        messages: Sequence[LLMMessage],
        tools: Sequence[Any] = (),
        tool_choice: Any = "auto",
        json_output: Any = None,
    ) -> None:
        self.messages = list(messages)
        self.tool_names = [
            getattr(t, "name", None) or (t.get("name") if isinstance(t, Mapping) else str(t)) for t in tools
        ]
        self.tool_choice = tool_choice
        self.json_output = json_output

    # -- reading the conversation -------------------------------------------------------------------------------

    def text(self) -> str:
        """All message texts, one per line (what word-count usage is computed over)."""
        return "\n".join(_text(m) for m in self.messages)

    def task(self) -> str:
        """The text of the first message from ``user`` (the task), or ''."""
        for m in self.messages:
            if isinstance(m, UserMessage) and m.source == "user":
                return _text(m)
        return ""

    def last_from(self, source: str) -> tuple[int, str] | None:
        """``(position, text)`` of the latest message whose source is ``source``."""
        for i in range(len(self.messages) - 1, -1, -1):
            m = self.messages[i]
            if getattr(m, "source", None) == source and isinstance(getattr(m, "content", None), str):
                return i, _text(m)
        return None

    def last_user_text(self) -> str:
        """The text of the latest user-role message (from any source)."""
        for m in reversed(self.messages):
            if isinstance(m, UserMessage):
                return _text(m)
        return ""

    def tool_rounds_since(self, position: int) -> list[tuple[list[FunctionCall], list[FunctionExecutionResult]]]:
        """The (calls, results) rounds the model had after message ``position``, oldest first."""
        rounds: list[tuple[list[FunctionCall], list[FunctionExecutionResult]]] = []
        for m in self.messages[position + 1 :]:
            if isinstance(m, AssistantMessage) and isinstance(m.content, list):
                rounds.append(([c for c in m.content if isinstance(c, FunctionCall)], []))
            elif isinstance(m, FunctionExecutionResultMessage) and rounds:
                rounds[-1][1].extend(m.content)
        return rounds

    def tool_rounds(self) -> int:
        """How many tool-calling assistant messages the whole request holds (used for deterministic call ids)."""
        return sum(1 for m in self.messages if isinstance(m, AssistantMessage) and isinstance(m.content, list))


Policy = Callable[[ScriptedRequest], "str | ToolCallSpec | Sequence[ToolCallSpec] | CreateResult"]


def _words(text: str) -> int:
    return len(text.split())


class ScriptedChatCompletionClient(ChatCompletionClient):
    """A ChatCompletionClient whose answer is ``policy(ScriptedRequest)``: a str (text), a ToolCallSpec or a list
    of them (tool calls, parallel when several), or a full CreateResult.

    Tool-call ids are deterministic (``<model>-<k>-<i>``: k = tool rounds already in the request, i = position).
    ``model_info`` declares function calling, JSON and structured output, family ``unknown``.
    """

    #: A pure function of the request: live calls to it during replay are deterministic.
    deterministic = True

    def __init__(self, policy: Policy, *, model: str = "scripted", temperature: float = 0.0) -> None:
        self.policy = policy
        self.model = model
        self.temperature = temperature
        self.calls = 0
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._last = RequestUsage(prompt_tokens=0, completion_tokens=0)

    def _answer(
        self,
        messages: Sequence[LLMMessage],
        tools: Sequence[Any],
        tool_choice: Any,
        json_output: Any,
    ) -> CreateResult:
        request = ScriptedRequest(messages, tools, tool_choice, json_output)
        out = self.policy(request)
        self.calls += 1
        if isinstance(out, CreateResult):
            result = out
        else:
            specs = [out] if isinstance(out, ToolCallSpec) else out
            prompt = _words(request.text())
            if isinstance(specs, str):
                usage = RequestUsage(prompt_tokens=prompt, completion_tokens=_words(specs))
                result = CreateResult(finish_reason="stop", content=specs, usage=usage, cached=False)
            else:
                k = request.tool_rounds()
                calls = [
                    FunctionCall(id=f"{self.model}-{k}-{i}", name=s.name, arguments=json.dumps(dict(s.arguments)))
                    for i, s in enumerate(specs)
                ]
                completion = sum(_words(f"{c.name} {c.arguments}") for c in calls)
                usage = RequestUsage(prompt_tokens=prompt, completion_tokens=completion)
                result = CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False)
        self._last = result.usage
        self._total = RequestUsage(
            prompt_tokens=self._total.prompt_tokens + result.usage.prompt_tokens,
            completion_tokens=self._total.completion_tokens + result.usage.completion_tokens,
        )
        return result

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Any] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        return self._answer(messages, tools, tool_choice, json_output)

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Any] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        result = self._answer(messages, tools, tool_choice, json_output)
        if isinstance(result.content, str):
            words = result.content.split(" ")
            for i, word in enumerate(words):
                yield word if i == len(words) - 1 else word + " "
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return self._last

    def total_usage(self) -> RequestUsage:
        return self._total

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = []) -> int:
        return _words("\n".join(_text(m) for m in messages))

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = []) -> int:
        return max(0, 100_000 - self.count_tokens(messages, tools=tools))

    @property
    def capabilities(self) -> ModelCapabilities:  # type: ignore[override]
        return ModelCapabilities(vision=False, function_calling=True, json_output=True)  # type: ignore[typeddict-item]

    @property
    def model_info(self) -> ModelInfo:
        return scripted_model_info()


def scripted_model_info() -> ModelInfo:
    """What the scripted models declare: function calling, JSON and structured output, family ``unknown``."""
    return ModelInfo(
        vision=False,
        function_calling=True,
        json_output=True,
        family="unknown",
        structured_output=True,
        multiple_system_messages=True,
    )


# ----------------------------------------------------------------------------------------- the arithmetic team


def parse_task(text: str) -> tuple[int, int, int] | None:
    """``(a, b, c)`` of a task that contains ``(a + b) * c``."""
    m = _TASK.search(text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def planner_policy(request: ScriptedRequest) -> str:
    """Restate the task's numbers as a two-step plan (again after a rejection, naming it)."""
    numbers = parse_task(request.task()) or parse_task(request.text())  # MagenticOne: the task is in the ledger
    if numbers is None:
        return "PLAN: I found no expression of the form (a + b) * c in the task."
    a, b, c = numbers
    plan = f"PLAN: step 1: add {a} and {b}. step 2: multiply the sum by {c}. solver, use the tools."
    last = request.last_user_text()
    if last.startswith("REJECT"):
        plan = "The reviewer rejected the last answer; redo it. " + plan
    return plan


def solver_policy(*, off_by_one: bool = False, parallel: bool = False) -> Policy:
    """The tool-using solver (see the module docstring)."""

    def policy(request: ScriptedRequest) -> str | ToolCallSpec | list[ToolCallSpec]:
        found = request.last_from("planner")
        plan = _PLAN.search(found[1]) if found else None
        if found is None or plan is None:
            return "I have no plan with numbers to work on. RESULT: unknown"
        a, b, c = (int(g) for g in plan.groups())
        rounds = request.tool_rounds_since(found[0])
        for _calls, results in rounds:
            for result in results:
                if result.is_error:
                    return f"The {result.name} tool failed: {result.content}. RESULT: unknown"
        done = [(fc, res) for calls, results in rounds for fc, res in zip(calls, results, strict=False)]
        if parallel:
            if not rounds:
                return [call("multiply", a=a, b=c), call("multiply", a=b + (1 if off_by_one else 0), b=c)]
            if len(rounds) == 1:
                return call("add", a=int(done[0][1].content), b=int(done[1][1].content))
        else:
            if not rounds:
                return call("add", a=a, b=b + (1 if off_by_one else 0))
            if len(rounds) == 1:
                return call("multiply", a=int(done[0][1].content), b=c)
        steps = []
        for fc, res in done:
            args = json.loads(fc.arguments)
            steps.append(f"{fc.name}({args['a']}, {args['b']}) = {res.content}")
        return "; ".join(steps) + f". RESULT: {done[-1][1].content}"

    return policy


def reviewer_policy(request: ScriptedRequest) -> str:
    """Recompute every operation the solver reported; APPROVE only when all agree with the RESULT."""
    found = request.last_from("solver")
    if found is None:
        return "REJECT: there is no answer from the solver to review."
    text = found[1]
    ops = _OP.findall(text)
    result = _RESULT.search(text)
    if not ops or result is None:
        return "REJECT: the solver reported no computation and no RESULT."
    problems = []
    for name, x, y, z in ops:
        expected = int(x) + int(y) if name == "add" else int(x) * int(y)
        if expected != int(z):
            problems.append(f"{name}({x}, {y}) is {expected}, not {z}")
    if result.group(1) != ops[-1][3]:
        problems.append(f"the RESULT {result.group(1)} is not the last value {ops[-1][3]}")
    if problems:
        return "REJECT: " + "; ".join(problems) + "."
    return f"RESULT: {result.group(1)} verified. APPROVE"


_PARTICIPANTS = re.compile(r"select the next role from (\[[^\]]*\])")


def selector_policy(order: Sequence[str] = ("planner", "solver", "reviewer")) -> Policy:
    """Pick the next speaker from the conversation in a SelectorGroupChat prompt: the role after the last speaker in
    ``order`` (after ``user``: the first), back to the solver after a REJECT."""

    def policy(request: ScriptedRequest) -> str:
        prompt = request.text()
        m = _PARTICIPANTS.search(prompt)
        candidates = json.loads(m.group(1).replace("'", '"')) if m else list(order)
        last_speaker, last_text = "user", ""
        for line in prompt.splitlines():
            head, sep, rest = line.partition(": ")
            if sep and (head in order or head == "user"):
                last_speaker, last_text = head, rest
        if last_speaker == "reviewer" and last_text.startswith("REJECT") and "solver" in candidates:
            return "solver"
        names = list(order)
        nxt = names[0] if last_speaker not in names else names[(names.index(last_speaker) + 1) % len(names)]
        return nxt if nxt in candidates else candidates[0]

    return policy


# ------------------------------------------------------------------------------------- the MagenticOne orchestrator

#: What the orchestrator's prompts (autogen_agentchat 0.7.5, ``_magentic_one/_prompts.py``) say, to tell them apart.
_FACTS_PROMPT = "Here is the pre-survey:"
_PLAN_PROMPT = "please devise a short bullet-point plan"
_LEDGER_PROMPT = "please answer the following questions, including necessary reasoning"
_FACTS_UPDATE_PROMPT = "Please rewrite the following fact sheet"
_PLAN_UPDATE_PROMPT = "Please briefly explain what went wrong on this last run"
_FINAL_PROMPT = "provide the final answer to the original request"
_NAMES = re.compile(r"Who should speak next\? \(select from: ([^)]*)\)")
_TEAM = re.compile(r"assembled the following team:\s*\n(.*?)\n\s*\n", re.DOTALL)

#: The instruction the scripted orchestrator gives each role of the arithmetic team (others: a generic one).
ORCHESTRATOR_INSTRUCTIONS: dict[str, str] = {
    "planner": "Restate the numbers of the request as a two-step plan for the solver.",
    "solver": "Compute the plan with the add and multiply tools and end with 'RESULT: n'.",
    "reviewer": "Check the solver's arithmetic: say APPROVE if it is right, else REJECT.",
}


def _instruction(name: str) -> str:
    return ORCHESTRATOR_INSTRUCTIONS.get(name, f"{name}, please do your part of the plan.")


def _ledger_entry(reason: str, answer: Any) -> dict[str, Any]:
    return {"reason": reason, "answer": answer}


def _speakers(request: ScriptedRequest, names: Sequence[str]) -> list[tuple[str, str]]:
    """``(member, text)`` of every message a team member in ``names`` sent, before the orchestrator's prompt."""
    return [
        (str(m.source), _text(m)) for m in request.messages[:-1] if isinstance(m, UserMessage) and m.source in names
    ]


def _team_names(prompt: str, order: Sequence[str]) -> list[str]:
    """The members the orchestrator's prompt names (the selection list, else the team description), else ``order``."""
    m = _NAMES.search(prompt)
    if m:
        return [n.strip() for n in m.group(1).split(",") if n.strip()]
    t = _TEAM.search(prompt)
    if t:
        return [line.split(":", 1)[0].strip() for line in t.group(1).splitlines() if ":" in line]
    return list(order)


def _ledger(request: ScriptedRequest, prompt: str, order: Sequence[str]) -> str:
    """The progress ledger of :func:`orchestrator_policy` (pure JSON)."""
    names = _team_names(prompt, order)
    ranked = [n for n in order if n in names] + [n for n in names if n not in order]
    said = _speakers(request, names)
    satisfied, loop, progress = False, False, True
    if not said:
        nxt, why = ranked[0], "Nobody has worked on the request yet."
    else:
        last, text = said[-1]
        if last == "reviewer" and "APPROVE" in text:
            satisfied = True
        loop = said[-1] in said[:-1]
        progress = not loop and "RESULT: unknown" not in text
        if last == "reviewer" and text.startswith("REJECT") and "solver" in ranked:
            nxt = "solver"
        else:
            nxt = ranked[(ranked.index(last) + 1) % len(ranked)] if last in ranked else ranked[0]
        why = f"{last} said: {text}"
    entry = {
        "is_request_satisfied": _ledger_entry(
            f"The reviewer approved: {said[-1][1]}" if satisfied else "No approved result yet.", satisfied
        ),
        "is_in_loop": _ledger_entry("The last message repeats an earlier one." if loop else "No repetition.", loop),
        "is_progress_being_made": _ledger_entry(why if not progress else "The team is moving on.", progress),
        "next_speaker": _ledger_entry(why, nxt),
        "instruction_or_question": _ledger_entry(f"{nxt} is next in the plan.", _instruction(nxt)),
    }
    return json.dumps(entry)


def _final(request: ScriptedRequest, order: Sequence[str]) -> str:
    """The orchestrator's final answer: the approved RESULT, else the last one reported, else ``unknown``."""
    results = [
        (src, r.group(1))
        for src, text in _speakers(request, list(order))
        for r in [_RESULT.search(text)]
        if r is not None
    ]
    approved = [v for src, v in results if src == "reviewer"]
    value = approved[-1] if approved else (results[-1][1] if results else "unknown")
    if value == "unknown":
        return "We could not complete the request. RESULT: unknown"
    return f"The answer is RESULT: {value}."


def _facts(prompt: str) -> str:
    """The orchestrator's pre-survey: the numbers the task gives."""
    numbers = parse_task(prompt)
    given = f"the expression ({numbers[0]} + {numbers[1]}) * {numbers[2]}" if numbers else "no numbers"
    return (
        f"1. GIVEN OR VERIFIED FACTS\n- The request gives {given}.\n\n2. FACTS TO LOOK UP\n- None.\n\n"
        "3. FACTS TO DERIVE\n- The value of the expression.\n\n4. EDUCATED GUESSES\n- None."
    )


def orchestrator_policy(order: Sequence[str] = ("planner", "solver", "reviewer")) -> Policy:
    """A MagenticOneGroupChat orchestrator, answering each of its prompts from the request alone:

    * facts (``pre-survey``): the numbers the task gives; plan: one bullet per team member, in ``order``;
    * the progress ledger (pure JSON, the keys ``is_request_satisfied``, ``is_in_loop``, ``is_progress_being_made``,
      ``next_speaker``, ``instruction_or_question``): reads the agents' messages in the conversation (user-role
      messages whose source is a team member). Satisfied when the last one is the reviewer's ``APPROVE``; else the
      next speaker is the member after the last speaker in ``order`` (the first when nobody spoke since the last
      ledger, back to the solver after a ``REJECT``). Not progressing when the last message reports
      ``RESULT: unknown``; in a loop (and not progressing) when it repeats an earlier message of the same member;
    * the re-planning prompts (facts update, plan update) and the final answer: ``The answer is RESULT: n.`` with
      the last RESULT an agent reported (the approved one when there is one), else ``RESULT: unknown``.
    """

    def policy(request: ScriptedRequest) -> str:
        prompt = request.last_user_text()
        if _LEDGER_PROMPT in prompt:
            return _ledger(request, prompt, order)
        if _FACTS_PROMPT in prompt:
            return _facts(prompt)
        if _PLAN_PROMPT in prompt:
            return "\n".join(f"- {n}: {_instruction(n)}" for n in _team_names(prompt, order))
        if _FACTS_UPDATE_PROMPT in prompt:
            failed = sum(1 for _, text in _speakers(request, list(order)) if "RESULT: unknown" in text)
            return f"The same facts; {failed} attempt(s) reported no result. EDUCATED GUESS: a tool is broken."
        if _PLAN_UPDATE_PROMPT in prompt:
            return "The last run found no result. New plan:\n" + "\n".join(
                f"- {n}: {_instruction(n)}" for n in _team_names(prompt, order)
            )
        if _FINAL_PROMPT in prompt:
            return _final(request, order)
        return "I do not recognise this prompt."

    return policy


def planner_client() -> ScriptedChatCompletionClient:
    """A fresh client running :func:`planner_policy`."""
    return ScriptedChatCompletionClient(planner_policy, model="scripted-planner")


def solver_client(*, off_by_one: bool = False, parallel: bool = False) -> ScriptedChatCompletionClient:
    """A fresh client running :func:`solver_policy`."""
    return ScriptedChatCompletionClient(
        solver_policy(off_by_one=off_by_one, parallel=parallel), model="scripted-solver"
    )


def reviewer_client() -> ScriptedChatCompletionClient:
    """A fresh client running :func:`reviewer_policy`."""
    return ScriptedChatCompletionClient(reviewer_policy, model="scripted-reviewer")


def selector_client(order: Sequence[str] = ("planner", "solver", "reviewer")) -> ScriptedChatCompletionClient:
    """A fresh client running :func:`selector_policy`."""
    return ScriptedChatCompletionClient(selector_policy(order), model="scripted-selector")


def orchestrator_client(order: Sequence[str] = ("planner", "solver", "reviewer")) -> ScriptedChatCompletionClient:
    """A fresh client running :func:`orchestrator_policy` (a MagenticOneGroupChat's ``model_client``)."""
    return ScriptedChatCompletionClient(orchestrator_policy(order), model="scripted-orchestrator")
