"""The model probe before repair's first replay (issue 19 item 3): a factory whose model recites a fixed list of
answers (a list restarting from the top at every build, like AutoGen's ``ReplayChatCompletionClient``) or raises
because its shared list ran out is refused with one line, before any replay; a reactive model passes — also one
whose answers happen to repeat.

The fixed-list models here are hand-written classes of their own (no class name is checked anywhere); the teams are
real AutoGen and smolagents teams, replayed through the real adapters and sandbox.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import causaltrace
from causaltrace.exceptions import UserError
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.probe import answer_key, probe_target
from causaltrace.replay.repair import repair
from causaltrace.schema import Outcome, Verdict

pytest.importorskip("autogen_agentchat")

TASK = "Add 3 and 5. Draft twice, then give 'final: <sum>'."


def verify(outcome: Outcome) -> Verdict:
    return Verdict(passed="final: 9" in str(outcome.final_answer or ""), reason="expected final: 9")


# ------------------------------------------------------------------------------------------------- AutoGen


def _fixed_list_client_class() -> type:
    from autogen_core.models import ChatCompletionClient, CreateResult, RequestUsage

    from causaltrace.testing.autogen import scripted_model_info

    class AnswerList(ChatCompletionClient):
        """Answers in the order they were given, whatever is asked; raises when the list runs out."""

        def __init__(self, answers: list[str]) -> None:
            self.answers = answers  # shared when the factory shares the list

        async def create(self, messages: Any, **kwargs: Any) -> Any:
            if not self.answers:
                raise ValueError("No more answers in the list")
            text = self.answers.pop(0)
            return CreateResult(finish_reason="stop", content=text, cached=False,
                                usage=RequestUsage(prompt_tokens=len(messages), completion_tokens=1))

        async def create_stream(self, messages: Any, **kwargs: Any) -> Any:
            yield await self.create(messages, **kwargs)

        async def close(self) -> None:
            return None

        def actual_usage(self) -> Any:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        total_usage = actual_usage

        def count_tokens(self, messages: Any, **kwargs: Any) -> int:
            return 0

        def remaining_tokens(self, messages: Any, **kwargs: Any) -> int:
            return 10_000

        @property
        def capabilities(self) -> Any:  # type: ignore[override]
            return {"vision": False, "function_calling": False, "json_output": False}

        @property
        def model_info(self) -> Any:
            return scripted_model_info()

    return AnswerList


WRITER_ANSWERS = ["draft: 4", "draft: 4", "final: 8 TERMINATE"]


def _writer_policy(request: Any) -> str:
    """Reactive: the answer depends on how many drafts the writer already wrote (they repeat: 4, 4)."""
    drafts = sum(1 for m in request.messages if getattr(m, "source", None) == "writer")
    return WRITER_ANSWERS[min(drafts, 2)]


def _team(writer_client: Any) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    from causaltrace.testing.autogen import ScriptedChatCompletionClient

    writer = AssistantAgent("writer", model_client=writer_client, system_message="You write.")
    checker = AssistantAgent("checker", model_client=ScriptedChatCompletionClient(lambda r: "checked", model="c"),
                             system_message="You check.")
    return RoundRobinGroupChat([writer, checker], name="pad",
                               termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(9))


def build_reactive() -> Any:
    from causaltrace.testing.autogen import ScriptedChatCompletionClient

    return _team(ScriptedChatCompletionClient(_writer_policy, model="w"))


def build_fixed_list() -> Any:
    """A fresh list at every build: the fixed list restarts from the top."""
    return _team(_fixed_list_client_class()(list(WRITER_ANSWERS)))


SHARED: list[str] = []


def build_shared_list() -> Any:
    """One list for every build: the original run used it up."""
    return _team(_fixed_list_client_class()(SHARED))


async def _record(factory: Any) -> Any:
    causaltrace.instrument()
    async with causaltrace.run(task=TASK, verify=verify) as handle:
        await factory().run(task=TASK)
    return handle.run


@pytest.fixture(autouse=True)
def _uninstrument():
    yield
    causaltrace.uninstrument()
    reset_tracing()


async def test_the_probe_call_is_the_first_answer_that_differs_from_the_agents_earlier_ones():
    run = await _record(build_reactive)
    target = probe_target(run.recording)
    assert target is not None and target.agent_key.endswith("writer") and target.ordinal == 2
    first = run.recording.find(target.agent_key, "llm", 0)
    assert answer_key(first) == answer_key(run.recording.find(target.agent_key, "llm", 1))  # the repeat
    assert answer_key(first) != answer_key(target)


async def test_a_fixed_list_restarting_from_the_top_is_refused_before_any_replay():
    run = await _record(build_fixed_list)
    assert run.outcome.status == "failure" and "final: 8" in str(run.outcome.final_answer)
    replays: list[Any] = []
    with pytest.raises(UserError) as caught:
        await repair(run, build_fixed_list, verify, k=0, sandbox=default_sandbox(), store=False,
                     on_replay=lambda step, result: replays.append(result))
    message = caught.value.message
    assert "\n" not in message and replays == []
    assert "earlier call #0" in message and "fixed list" in message
    assert "a live LLM or a reactive model" in message


async def test_a_shared_list_that_ran_out_is_refused():
    SHARED[:] = list(WRITER_ANSWERS)
    run = await _record(build_shared_list)
    assert SHARED == []  # the original run used the list up
    with pytest.raises(UserError) as caught:
        await repair(run, build_shared_list, verify, k=0, sandbox=default_sandbox(), store=False)
    assert "raised" in caught.value.message and "No more answers" in caught.value.message
    assert "a live LLM or a reactive model" in caught.value.message


async def test_a_reactive_model_whose_answers_repeat_passes_and_the_search_repairs():
    run = await _record(build_reactive)
    result = await repair(run, build_reactive, verify, k=0, sandbox=default_sandbox(), store=False, max_replays=40)
    assert result.probe.endswith("answered its recorded request as recorded"), result.probe
    assert result.repaired and "8" in result.decisive.best.intervention.description
    # probe=False skips it (the search is the same)
    unprobed = await repair(run, build_reactive, verify, k=0, sandbox=default_sandbox(), store=False,
                            max_replays=40, probe=False)
    assert unprobed.probe == "" and unprobed.decisive.step_id == result.decisive.step_id


def test_cli_refuses_a_fixed_list_factory_in_one_line(capsys):
    from causaltrace.cli import main

    run = asyncio.run(_record(build_fixed_list))
    capsys.readouterr()
    here = __file__
    code = main(["repair", run.run_id, "--factory", f"{here}:build_fixed_list", "--verify", f"{here}:verify"])
    err = capsys.readouterr().err
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("causaltrace: error:")]
    assert len(errors) == 1 and "fixed list" in errors[0], err
    assert "· step #" not in err  # no replay ran


# ---------------------------------------------------------------------------------------------- smolagents


def _smol_team(model: Any) -> Any:
    from smolagents import LogLevel, ToolCallingAgent

    from causaltrace.testing.smolagents import sum_of_powers_tool

    return ToolCallingAgent(tools=[sum_of_powers_tool()], model=model, name="math_agent", max_steps=4,
                            verbosity_level=LogLevel.OFF)


def _repeating_policy(request: Any) -> Any:
    """Reactive: the same tool call twice (the answers repeat), then the tool's result as the final answer."""
    from causaltrace.testing.smolagents import Call

    if request.turn < 2:
        return [Call("sum_of_powers", {"numbers": [1, 2, 3, 4, 5], "power": 2})]
    return [Call("final_answer", {"answer": request.observations[-1].strip()})]


def _fixed_list_model(answers: list[Any]) -> Any:
    from smolagents.models import Model

    class CannedModel(Model):
        """A smolagents model that hands out its answers in order, whatever it is asked."""

        def __init__(self, answers: list[Any]) -> None:
            super().__init__(model_id="canned")
            self.answers = list(answers)

        def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                     tools_to_call_from: Any = None, **kwargs: Any) -> Any:
            if not self.answers:
                raise ValueError("No more answers in the list")
            return self.answers.pop(0)

    return CannedModel(answers)


def _smol_record(factory: Any, verify_smol: Any) -> Any:
    from opentelemetry.sdk.trace import TracerProvider

    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.smolagents import instrument_smolagents

    instrument_smolagents(TracerProvider(), TraceConfig())
    with causaltrace.run(task="Sum the squares of [1, 2, 3, 4, 5].", verify=verify_smol) as handle:
        factory().run("Sum the squares of [1, 2, 3, 4, 5].")
    return handle.run


@pytest.fixture
def smol():
    pytest.importorskip("smolagents")
    from causaltrace.instrumentation.smolagents import uninstrument_smolagents

    yield
    uninstrument_smolagents()


def test_smolagents_fixed_list_model_is_refused_and_a_repeating_reactive_one_passes(smol):
    from causaltrace.testing.smolagents import ScriptedModel

    def reactive() -> Any:
        return _smol_team(ScriptedModel(_repeating_policy))

    run = _smol_record(reactive, "56")  # 55 is the right sum: the run fails on the expected answer
    assert run.outcome.status == "failure"
    target = probe_target(run.recording)
    assert target is not None and target.ordinal == 2  # #0 and #1 are the same call (ids aside)
    answers = [c.decoded_response() for c in sorted(
        (c for c in run.recording.calls if c.kind == "llm"), key=lambda c: c.ordinal)]

    def canned() -> Any:
        return _smol_team(_fixed_list_model(answers))

    with pytest.raises(UserError) as caught:
        asyncio.run(repair(run, canned, "56", k=0, sandbox=default_sandbox(), store=False))
    assert "fixed list" in caught.value.message and "earlier call #0" in caught.value.message

    result = asyncio.run(repair(run, reactive, "56", k=0, sandbox=default_sandbox(), store=False, max_replays=3))
    assert "as recorded" in result.probe, result.probe
