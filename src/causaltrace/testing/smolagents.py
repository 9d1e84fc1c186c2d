"""Reactive scripted smolagents models: deterministic functions of the request, never lists of canned answers.

ARCHITECTURE decision 8: offline agents (tests, the example, replay) are driven by models that READ their request —
the task, the observations, the tools they were offered — and decide what to do from it. A replay that corrects a
step upstream therefore changes what these models see and what they answer downstream, as a real model would.

* :class:`ScriptedModel` is a ``smolagents.Model`` subclass whose ``generate`` (overridden, as a user's custom model
  would) turns the request into a :class:`ScriptedRequest` and asks a *policy* (a function of that request) for a
  reply: a text (``str``) or tool calls (a list of :class:`Call`). Token usage is counted from the request and the
  reply (characters / 4), so it is deterministic too.
* Policies for the example agents (``examples/smolagents_agents.py``):

  - :func:`code_manager_policy` — a manager CodeAgent that reads "from A to B" off its task, writes code that lists
    those integers and delegates the sum of their squares / cubes to a managed agent, then answers with the number it
    reads in the managed agent's report. ``off_by_one=True`` plants the boundary bug ``range(A, B)`` (instead of
    ``range(A, B + 1)``) that a range-end mutation repairs;
  - :func:`tool_worker_policy` — a managed ToolCallingAgent that parses the numbers it was given, calls the
    ``sum_of_powers`` tool with them and answers with the tool's result;
  - :func:`parallel_manager_policy` — a manager ToolCallingAgent that delegates two sub-tasks to two managed
    agents in ONE response (smolagents then runs them in parallel) and adds the two reported numbers.

smolagents is imported lazily: importing this module does not import it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Call",
    "ScriptedModel",  # noqa: F822 - built on first access (module __getattr__), so smolagents loads lazily
    "ScriptedRequest",
    "code_manager_policy",
    "numbers_in",
    "parallel_manager_policy",
    "sum_of_powers_tool",
    "tool_worker_policy",
]

Reply = str | list["Call"]
Policy = Callable[["ScriptedRequest"], Reply]

_INT = re.compile(r"-?\d+")
_REPORT = re.compile(r"managed agent '(?P<name>\w+)':\s*(?P<value>-?\d+)")
_RANGE = re.compile(r"from\s+(-?\d+)\s+to\s+(-?\d+)", re.IGNORECASE)


def numbers_in(text: str) -> list[int]:
    """Every integer written in ``text``, in order."""
    return [int(m) for m in _INT.findall(text)]


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _role_of(message: Any) -> str:
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", "")
    return str(getattr(role, "value", role))


@dataclass(frozen=True)
class Call:
    """A tool call a policy wants to make: tool name and arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScriptedRequest:
    """What a scripted model was asked, in the form a policy reads."""

    #: (role, text) of every message, in order.
    messages: tuple[tuple[str, str], ...]
    stop_sequences: tuple[str, ...] = ()
    #: Names of the tools offered (``tools_to_call_from``); empty for a CodeAgent.
    tool_names: tuple[str, ...] = ()

    @classmethod
    def from_call(cls, messages: Sequence[Any], stop_sequences: Sequence[str] | None, tools: Sequence[Any] | None):
        return cls(
            messages=tuple((_role_of(m), _text_of(m.get("content") if isinstance(m, dict) else m.content))
                           for m in messages),
            stop_sequences=tuple(stop_sequences or ()),
            tool_names=tuple(getattr(t, "name", str(t)) for t in tools or ()),
        )

    @property
    def task(self) -> str:
        """The text of the latest task given to the agent (smolagents writes it as ``New task:\\n…``)."""
        for role, text in reversed(self.messages):
            if role == "user" and text.startswith("New task:"):
                return text[len("New task:"):].strip()
        return ""

    @property
    def observations(self) -> list[str]:
        """Texts of the tool responses (observations and errors) after the latest task, oldest first."""
        out: list[str] = []
        for role, text in self.messages:
            if role == "user" and text.startswith("New task:"):
                out = []
            elif role == "tool-response":
                out.append(text)
        return out

    @property
    def turn(self) -> int:
        """How many replies this agent already gave for the latest task."""
        count = 0
        for role, text in self.messages:
            if role == "user" and text.startswith("New task:"):
                count = 0
            elif role == "assistant":
                count += 1
        return count

    @property
    def is_planning(self) -> bool:
        """True for smolagents' planning calls (they stop at ``<end_plan>``)."""
        return "<end_plan>" in self.stop_sequences

    @property
    def is_final_summary(self) -> bool:
        """True for the call smolagents makes after max steps to force a final answer: the only call with neither
        stop sequences nor tools (action calls stop at ``Observation:``, planning calls at ``<end_plan>``)."""
        return not self.stop_sequences and not self.tool_names


def _scripted_model_class() -> type:
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
        TokenUsage,
    )

    class _ScriptedModel(Model):
        """A smolagents Model whose reply is ``policy(request)``: see :class:`ScriptedModel`."""

        #: A pure function of the request: live calls to it during replay are deterministic.
        deterministic = True

        def __init__(self, policy: Policy, *, model_id: str = "scripted", **kwargs: Any) -> None:
            super().__init__(model_id=model_id, **kwargs)
            self.policy = policy
            self.calls = 0

        def generate(
            self,
            messages: list[Any],
            stop_sequences: list[str] | None = None,
            response_format: dict[str, str] | None = None,
            tools_to_call_from: list[Any] | None = None,
            **kwargs: Any,
        ) -> Any:
            request = ScriptedRequest.from_call(messages, stop_sequences, tools_to_call_from)
            self.calls += 1
            reply = self.policy(request)
            in_tokens = sum(len(text) for _, text in request.messages) // 4
            if isinstance(reply, str):
                return ChatMessage(
                    role=MessageRole.ASSISTANT,
                    content=reply,
                    token_usage=TokenUsage(input_tokens=in_tokens, output_tokens=max(1, len(reply) // 4)),
                )
            tool_calls = [
                ChatMessageToolCall(
                    id=f"call_{request.turn}_{i}",
                    type="function",
                    function=ChatMessageToolCallFunction(name=call.name, arguments=dict(call.arguments)),
                )
                for i, call in enumerate(reply)
            ]
            out_chars = len(json.dumps([[c.name, c.arguments] for c in reply], default=str))
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content="",
                tool_calls=tool_calls,
                token_usage=TokenUsage(input_tokens=in_tokens, output_tokens=max(1, out_chars // 4)),
            )

    _ScriptedModel.__name__ = _ScriptedModel.__qualname__ = "ScriptedModel"
    _ScriptedModel.__module__ = __name__
    return _ScriptedModel


_CLASS: type | None = None


def __getattr__(name: str) -> Any:
    # ScriptedModel subclasses smolagents.Model, so it is built on first access (smolagents imported lazily).
    global _CLASS
    if name == "ScriptedModel":
        if _CLASS is None:
            _CLASS = _scripted_model_class()
        return _CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------------------------- the example


def _power_of(text: str) -> int:
    return 3 if "cube" in text.lower() else 2


def _power_word(power: int) -> str:
    return "cubes" if power == 3 else "squares"


def code_manager_policy(*, agent: str = "math_agent", off_by_one: bool = False) -> Policy:
    """A manager CodeAgent: list the integers "from A to B" of its task, delegate the sum of their powers to
    ``agent``, then ``final_answer`` the number the managed agent reported (reads it off the observation).

    ``off_by_one=True`` writes ``range(A, B)`` — the last integer is dropped, a boundary bug a range-end mutation of
    the code repairs.
    """

    def policy(request: ScriptedRequest) -> str:
        if request.is_planning:
            return "1. List the integers.\n2. Delegate the arithmetic.\n3. Report the number.\n<end_plan>"
        if request.is_final_summary:
            reported = _reported_numbers(request)
            return str(sum(reported.values())) if reported else "I could not compute the answer."
        reported = _reported_numbers(request)
        if agent in reported:
            return (
                f"Thought: {agent} reported {reported[agent]}, which answers the task.\n"
                f"<code>\nfinal_answer({reported[agent]})\n</code>"
            )
        bounds = _RANGE.search(request.task)
        if bounds is None:
            return "Thought: the task gives no range.\n<code>\nfinal_answer('no range given')\n</code>"
        low, high = int(bounds.group(1)), int(bounds.group(2))
        end = f"{high}" if off_by_one else f"{high} + 1"
        word = _power_word(_power_of(request.task))
        return (
            f"Thought: I will list the integers from {low} to {high} and ask {agent} for the sum of their {word}.\n"
            "<code>\n"
            f"numbers = list(range({low}, {end}))\n"
            f'report = {agent}(task=f"Compute the sum of the {word} of these numbers: {{numbers}}")\n'
            "print(report)\n"
            "</code>"
        )

    return policy


def _reported_numbers(request: ScriptedRequest) -> dict[str, int]:
    found: dict[str, int] = {}
    for text in request.observations:
        for match in _REPORT.finditer(text):
            found[match.group("name")] = int(match.group("value"))
    return found


def tool_worker_policy(*, tool: str = "sum_of_powers") -> Policy:
    """A managed ToolCallingAgent: call ``tool(numbers=[…], power=p)`` with the numbers listed in its task (the last
    ``[...]`` list; p = 3 for cubes, else 2), then ``final_answer`` the integer the tool returned.

    If the tool failed (an ``Error:`` observation), it retries once with the same numbers; otherwise it answers.
    """

    def policy(request: ScriptedRequest) -> Reply:
        if request.is_final_summary:
            return "no answer"
        task = request.task
        lists = re.findall(r"\[([^\]]*)\]", task)
        numbers = numbers_in(lists[-1]) if lists else numbers_in(task)
        observations = request.observations
        if observations and "Error:" not in observations[-1]:
            values = numbers_in(observations[-1].split("Observation:")[-1])
            if values:
                return [Call("final_answer", {"answer": str(values[-1])})]
        if len(observations) >= 2:
            return [Call("final_answer", {"answer": "the tool kept failing"})]
        return [Call(tool, {"numbers": numbers, "power": _power_of(task)})]

    return policy


def parallel_manager_policy(*, squares_agent: str = "squares_agent", cubes_agent: str = "cubes_agent") -> Policy:
    """A manager ToolCallingAgent for "the sum of the squares of the integers from A to B plus the sum of the cubes of
    the integers from C to D": ONE response with two managed-agent calls (run in parallel by smolagents), then
    ``final_answer`` of the sum of the two reported numbers."""

    def policy(request: ScriptedRequest) -> Reply:
        reported = _reported_numbers(request)
        if squares_agent in reported and cubes_agent in reported:
            return [Call("final_answer", {"answer": str(reported[squares_agent] + reported[cubes_agent])})]
        ranges = _RANGE.findall(request.task)
        if len(ranges) < 2:
            return [Call("final_answer", {"answer": "the task needs two ranges"})]
        (a, b), (c, d) = ((int(x), int(y)) for x, y in ranges[:2])
        return [
            Call(squares_agent, {"task": f"Compute the sum of the squares of these numbers: {list(range(a, b + 1))}"}),
            Call(cubes_agent, {"task": f"Compute the sum of the cubes of these numbers: {list(range(c, d + 1))}"}),
        ]

    return policy


def sum_of_powers_tool() -> Any:
    """A fresh ``sum_of_powers(numbers, power)`` smolagents Tool (the managed agents' arithmetic)."""
    from smolagents import tool

    @tool
    def sum_of_powers(numbers: list, power: int) -> int:
        """Add up each number raised to a power.

        Args:
            numbers: the integers to raise and add.
            power: the exponent (2 for squares, 3 for cubes).
        """
        return sum(int(n) ** int(power) for n in numbers)

    return sum_of_powers
