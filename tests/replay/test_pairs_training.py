"""Repair pairs a trainer can use (issue 19, "Pairs"), checked on real repairs of both frameworks.

Every exported pair passes three checks: ``chosen`` differs from ``rejected``; they differ ONLY in the edited part
(one tool call's name or arguments, or one contiguous stretch of the text); and substituting ``chosen`` as that
turn's response in a replay reproduces the flip. The TRL rows render through a strict tool-aware ChatML template
(``tests/fixtures/chatml_tools.jinja``: tools in the system turn, tool calls and tool results with their ids) and
the exported file loads with ``datasets``.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import jinja2
import pytest

from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import default_sandbox, replay
from causaltrace.replay.pairs import export_pairs, pair_rows
from causaltrace.replay.repair import repair
from causaltrace.replay.turns import producing_llm
from causaltrace.schema import Intervention
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults import runner as faults_runner
from causaltrace.testing.faults.runner import record

pytestmark = pytest.mark.slow

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "chatml_tools.jinja"
#: one case per shape of correction: a handoff call, a speaker selection, a tool call's arguments (AutoGen and
#: smolagents' ToolCallingAgent), a CodeAgent's code
CASES = ["ag-swarm-handoff", "ag-selector-choice", "ag-shop-quantity", "smol-shop-quantity", "smol-squares-range"]


def _raise(message: str) -> None:
    raise ValueError(message)


def chatml() -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.globals["raise_exception"] = _raise
    return env.from_string(TEMPLATE.read_text())


def differences(chosen: dict[str, Any], rejected: dict[str, Any]) -> list[str]:
    """The parts in which two assistant turns differ: ``content`` or ``tool_calls[i].<field>``."""
    out = []
    if chosen.get("content") != rejected.get("content"):
        out.append("content")
    a, b = chosen.get("tool_calls") or [], rejected.get("tool_calls") or []
    if len(a) != len(b):
        return [*out, "tool_calls"]
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        for field in ("id", "type"):
            if x.get(field) != y.get(field):
                out.append(f"tool_calls[{i}].{field}")
        for field in ("name", "arguments"):
            if x["function"].get(field) != y["function"].get(field):
                out.append(f"tool_calls[{i}].function.{field}")
    return out


def changed_stretches(old: str, new: str) -> int:
    return sum(1 for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal")


@pytest.fixture(scope="module")
def repaired(tmp_path_factory) -> Any:
    """(case, run, repair result) for each case, repaired at its true decisive step — recorded into a store of the
    module's own (the per-test home of conftest.py is function-scoped)."""
    import asyncio

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CAUSALTRACE_HOME", str(tmp_path_factory.mktemp("pairs-home")))
        mp.delenv("CAUSALTRACE_MODEL", raising=False)
        faults_runner._INSTRUMENTED = False
        yield _repair_cases(asyncio)
        from causaltrace.instrumentation.autogen import uninstrument_autogen
        from causaltrace.instrumentation.smolagents import uninstrument_smolagents

        uninstrument_smolagents()
        uninstrument_autogen()
        reset_tracing()
        faults_runner._INSTRUMENTED = False


def _repair_cases(asyncio: Any) -> list[tuple[Any, Any, Any]]:

    async def one(case):
        run = await record(case)
        step = case.rule(run)
        result = await repair(run, case.factory, case.verify, candidates=[step.step_id], k=0,
                              sandbox=default_sandbox(), store=False)
        return case, run, result

    cases = {c.name: c for c in all_cases()}
    return [asyncio.run(one(cases[name])) for name in CASES]


def _pair(result):
    """The repair's pair: a correction's, else the one an alternative's flip keeps for `--include-alternatives` (the
    shape of a pair does not depend on what the edit rests on; issue 32 item 5)."""
    return result.pair if result.pair is not None else result.alternative_pair


def test_every_repair_yields_a_pair_that_differs_only_in_the_edited_part(repaired):
    for case, run, result in repaired:
        assert result.repaired, case.name
        pair = _pair(result)
        assert pair is not None, f"{case.name}: {result.pair_reason}"
        chosen, rejected = pair.chosen, pair.rejected
        assert chosen != rejected, case.name
        diff = differences(chosen, rejected)
        assert len(diff) == 1, (case.name, diff)
        step = run.step(pair.step_id)
        if step.kind == "handoff":
            # the corrected turn calls the new target's transfer tool, and keeps the model's text as it was
            assert diff == ["tool_calls[0].function.name"], case.name
            assert chosen["tool_calls"][0]["function"]["name"].startswith("transfer_to_")
            assert chosen["content"] == rejected["content"]
        elif step.kind == "tool_call" and step.tool_name != "python_interpreter":
            assert diff[0].endswith(".function.arguments"), (case.name, diff)
        else:
            assert diff == ["content"], (case.name, diff)
            assert changed_stretches(rejected["content"], chosen["content"]) == 1, case.name


def _as_llm_replacement(turn: dict[str, Any]) -> Any:
    calls = turn.get("tool_calls") or []
    if not calls:
        return turn["content"]
    return {"text": turn["content"] or None,
            "tool_calls": [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in calls]}


async def test_substituting_chosen_as_the_turns_response_reproduces_the_flip(repaired):
    for case, run, result in repaired:
        pair = _pair(result)
        llm = producing_llm(run, run.step(pair.step_id))
        intervention = Intervention(step_id=llm.step_id, replacement=_as_llm_replacement(pair.chosen),
                                    description="the pair's chosen turn", source="mutation")
        again = await replay(run, case.factory, intervention, case.verify, sandbox=default_sandbox())
        assert again.flipped, (case.name, again.outcome.reason)


def test_trl_rows_render_through_a_tool_aware_chat_template_and_load_with_datasets(repaired, tmp_path):
    template = chatml()
    pairs = [_pair(result) for _, _, result in repaired]
    rows = list(pair_rows(pairs, format="trl-dpo", include_alternatives=True))
    assert len(rows) == len(pairs)
    with_tools = 0
    for row in rows:
        assert isinstance(row["tools"], list)
        with_tools += bool(row["tools"])
        ids = {c["id"] for m in row["prompt"] for c in m.get("tool_calls", [])}
        for message in row["prompt"]:
            if message["role"] == "tool":
                assert message["tool_call_id"] in ids  # every tool result answers a call of the prompt
        for side in ("chosen", "rejected"):
            text = template.render(messages=row["prompt"] + row[side], tools=row["tools"], add_generation_prompt=False)
            assert text.count("<|im_start|>assistant") >= 1
        assert template.render(messages=row["prompt"], tools=row["tools"], add_generation_prompt=True).endswith(
            "<|im_start|>assistant\n")
    assert with_tools >= 3  # the AutoGen teams and the ToolCallingAgent carry their tool schemas

    path = tmp_path / "pairs.jsonl"
    path.write_text(export_pairs(pairs, format="trl-dpo", include_alternatives=True))
    import datasets  # the dev extra installs it
    loaded = datasets.load_dataset("json", data_files=str(path), split="train")
    assert loaded.num_rows == len(pairs)
    assert set(loaded.column_names) >= {"prompt", "chosen", "rejected", "tools"}

    openai_rows = list(pair_rows(pairs, format="openai-dpo", include_alternatives=True))
    for row in openai_rows:
        for m in row["preferred_output"] + row["input"]["messages"]:
            for call in m.get("tool_calls", []):
                assert isinstance(call["function"]["arguments"], str)  # the OpenAI wire form
                json.loads(call["function"]["arguments"])


def test_the_template_refuses_what_a_trainer_could_not_use():
    template = chatml()
    good = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "2"}]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    assert "<tool_response" in template.render(messages=good, tools=tools, add_generation_prompt=True)
    no_id = [*good[:2], {"role": "tool", "content": "2"}]
    none_content = [{"role": "user", "content": None}]
    with pytest.raises(ValueError, match="tool_call_id"):
        template.render(messages=no_id, tools=tools, add_generation_prompt=True)
    with pytest.raises(ValueError, match="no text"):
        template.render(messages=none_content, tools=tools, add_generation_prompt=True)
    with pytest.raises(ValueError, match="list"):
        template.render(messages=good, tools=json.dumps(tools), add_generation_prompt=True)


def test_a_turn_of_tool_calls_only_has_empty_text_not_the_steps_summary(repaired):
    for case, run, result in repaired:
        pair = _pair(result)
        llm = producing_llm(run, run.step(pair.step_id))
        if llm.outputs.get("tool_calls") and not llm.outputs.get("text"):
            assert pair.rejected["content"] == "" and pair.chosen["content"] == "", case.name
