"""What AutoGen AgentChat's own objects say in OpenInference's spans, for the OpenInference reader (issue 34 item 2).

OpenInference's AutoGen AgentChat instrumentor writes a CHAIN span per team run (``<Team>.run_stream`` /
``<Team>.run``, ``output.value`` the ``TaskResult`` as JSON), an AGENT span per agent turn and an LLM span per model
call. Read here:

* a model call inside a team run but in no agent's turn is the team's manager choosing a speaker or, in MagenticOne,
  the orchestrator: its agent is the manager's name (``<Team>Manager``; ``MagenticOneOrchestrator``);
* MagenticOne's orchestrator: of its plain-text outputs in a row the second is its plan (the first its facts); a
  progress ledger (JSON with ``is_request_satisfied``, ``next_speaker``, ``instruction_or_question``) names the next
  speaker and its instruction, unless the request is satisfied; the output after that is the final answer's message;
* a Swarm handoff is a ``transfer_to_<agent>`` tool call: its result is also the ``handoff`` step the next agent's
  turn starts from;
* the final answer, as AutoGen's run ended (what causaltrace's AutoGen adapter derives too): when the run stopped
  normally (a text mention or another goal condition, not only a limit), the last message not from the user,
  the mentioned keyword taken out.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["ORCHESTRATOR", "final_answer", "handoff_target", "ledger_answer", "ledger_of", "manager_of_team", "team_name"]

#: MagenticOne's manager: its model calls write facts, a plan, progress ledgers (JSON) and the final answer
ORCHESTRATOR = "MagenticOneOrchestrator"

_TEAM_SPAN = re.compile(r"(\w+)\.(run_stream|run)")
_MANAGERS = {"MagenticOneGroupChat": "MagenticOneOrchestrator"}
_LEDGER_KEYS = {"is_request_satisfied", "next_speaker", "instruction_or_question"}
_TEXT_MENTION = re.compile(r"Text '(.+?)' mentioned")
_LIMITS = re.compile(r"Maximum number of (messages|turns)|Token usage limit reached|Timeout of [\d.]+ seconds|"
                     r"Max rounds reached")


def team_name(span_name: str) -> str | None:
    """The team class a CHAIN span runs (``SelectorGroupChat.run_stream`` → ``SelectorGroupChat``), or None."""
    match = _TEAM_SPAN.fullmatch(span_name)
    return match.group(1) if match and match.group(1).endswith(("GroupChat", "Swarm")) else None


def manager_of_team(team: str) -> str:
    """The name AutoGen gives a team's manager agent."""
    return _MANAGERS.get(team, f"{team}Manager")


def final_answer(task_result: Any) -> tuple[str, str] | None:
    """``(agent, text)`` of a run's final answer from its ``TaskResult`` (decoded JSON), or None when the run
    stopped on a limit only, or has no message but the user's."""
    if not isinstance(task_result, dict) or not isinstance(task_result.get("messages"), list):
        return None
    stop = str(task_result.get("stop_reason") or "")
    mention = _TEXT_MENTION.search(stop)
    if mention is None and _LIMITS.search(stop):
        return None
    for message in reversed(task_result["messages"]):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and message.get("source") not in (None, "user"):
            text = content.replace(mention.group(1), "") if mention else content
            return str(message["source"]), text.strip()
    return None


def ledger_of(text: str) -> dict[str, Any] | None:
    """A MagenticOne progress ledger (the orchestrator's JSON answer), or None for any other output."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and _LEDGER_KEYS <= value.keys() else None


def ledger_answer(ledger: dict[str, Any], key: str) -> Any:
    """One entry's ``answer`` of a progress ledger (None when absent)."""
    entry = ledger.get(key)
    return entry.get("answer") if isinstance(entry, dict) else None


def handoff_target(tool_name: str) -> str | None:
    """The agent an AutoGen handoff tool (``transfer_to_<agent>``) hands the conversation to, or None."""
    return tool_name.removeprefix("transfer_to_") if tool_name.startswith("transfer_to_") and len(tool_name) > 12 \
        else None
