"""The judge client: tolerant parsing, repair, retries with backoff, cache, kill switch, error mapping, schemas."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest

from causaltrace.attribution.judge import (
    ALLOW_MODEL_REQUESTS_ENV,
    Judge,
    JudgeContextWindowExceeded,
    JudgeRateLimited,
    LiteLLMModel,
    ModelRequestsDisabled,
    agent_name,
    check_model_request_allowed,
    extract_json,
    json_schema_for,
    output_model,
    step_index,
)
from causaltrace.exceptions import JudgeError, JudgeOutputInvalid, UserError
from causaltrace.testing.judges import FunctionJudge


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    """The kill switch: any real (non-loopback) LLM request in these tests raises."""
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


Answer = output_model("Answer", agent_name=agent_name(["WebSurfer", "Orchestrator"]), step_number=step_index(0, 9),
                      reason=str)


def ask(judge: Judge, calls: list | None = None, **kw):
    record = (calls.append if calls is not None else None)
    return asyncio.run(judge.ask([{"role": "user", "content": "which step?"}], Answer, stage_id="judge",
                                 on_call=record, **kw))


# ------------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is:\n```\n{"a": 1}\n```\nHope that helps.', {"a": 1}),
        ('The answer is {"a": 1, "b": [1, 2]} as requested.', {"a": 1, "b": [1, 2]}),
        ('{"a": 1, "reason": "the step was cut', {"a": 1, "reason": "the step was cut"}),
        ('{"a": 1, "b": [1, 2', {"a": 1, "b": [1, 2]}),
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": 1, "b"', {"a": 1}),
        ('{"a": 1,', {"a": 1}),
        ('[note] then {"a": 1}', {"a": 1}),
    ],
)
def test_extract_json_is_tolerant(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "Agent: WebSurfer", "}"])
def test_extract_json_rejects_garbage(text):
    with pytest.raises(ValueError):
        extract_json(text)


def test_schema_constrains_steps_and_agents():
    schema = json_schema_for(Answer)
    props = schema["properties"]
    assert props["agent_name"]["enum"] == ["WebSurfer", "Orchestrator"]
    assert props["step_number"]["minimum"] == 0 and props["step_number"]["maximum"] == 9
    assert schema["additionalProperties"] is False and set(schema["required"]) == {"agent_name", "step_number",
                                                                                   "reason"}
    assert "$ref" not in json.dumps(schema) and "title" not in json.dumps(schema)
    enum_model = output_model("Pick", step=step_index([3, 7, 12]))
    assert json_schema_for(enum_model)["properties"]["step"]["enum"] == [3, 7, 12]


# ------------------------------------------------------------------------------------------ repair / garbage


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"agent_name": "WebSurfer", "step_number": 4, "reason": "r"}\n```',
        'Here you go: {"agent_name": "websurfer ", "step_number": "4", "reason": "r"} -- done',
        '{"agent_name": "WebSurfer (thought)", "step_number": 4, "reason": "cut off mid-sent',
        '[{"agent_name": "WebSurfer", "step_number": 4, "reason": "r", "extra": true}]',
    ],
)
def test_malformed_but_repairable_answers_parse_without_a_second_call(reply):
    fake = FunctionJudge(lambda m, i: reply)
    answer = ask(Judge(fake))
    assert (answer.agent_name, answer.step_number) == ("WebSurfer", 4)
    assert len(fake.calls) == 1


def test_invalid_answer_is_repaired_by_asking_again_with_the_error():
    replies = iter(['{"agent_name": "WebSurfer", "step_number": 42, "reason": "r"}',
                    '{"agent_name": "WebSurfer", "step_number": 4, "reason": "r"}'])
    fake = FunctionJudge(lambda m, i: next(replies))
    calls: list = []
    answer = ask(Judge(fake), calls)
    assert answer.step_number == 4 and len(fake.calls) == 2 and len(calls) == 2
    second = fake.calls[1].messages
    assert second[-2] == {"role": "assistant", "content": '{"agent_name": "WebSurfer", "step_number": 42, "reason": "r"}'}
    assert "step_number" in second[-1]["content"] and "less than or equal to 9" in second[-1]["content"]


def test_garbage_after_bounded_repairs_raises_judge_output_invalid():
    fake = FunctionJudge(lambda m, i: "I think it was the second agent, probably.")
    with pytest.raises(JudgeOutputInvalid) as info:
        ask(Judge(fake, max_repairs=2))
    assert len(fake.calls) == 3
    assert info.value.body == "I think it was the second agent, probably."


def test_unknown_agent_is_not_clamped_to_a_known_one():
    fake = FunctionJudge(lambda m, i: '{"agent_name": "Nobody", "step_number": 1, "reason": "r"}')
    with pytest.raises(JudgeOutputInvalid):
        ask(Judge(fake, max_repairs=1))


def test_fallback_parser_reads_a_plain_text_format():
    fake = FunctionJudge(lambda m, i: "Agent Name: WebSurfer\nStep Number: 2\nReason for Mistake: clicked wrongly")

    def fallback(text):
        lines = dict(line.split(": ", 1) for line in text.splitlines())
        return {"agent_name": lines["Agent Name"], "step_number": int(lines["Step Number"]),
                "reason": lines["Reason for Mistake"]}

    assert ask(Judge(fake), fallback=fallback).step_number == 2


# ---------------------------------------------------------------------------------------- retries / errors


def test_rate_limit_is_retried_with_exponential_backoff(monkeypatch):
    import litellm

    attempts = []

    def flaky(messages, info):
        attempts.append(info.number)
        if len(attempts) < 3:
            raise litellm.RateLimitError(message="slow down", llm_provider="fake", model="fake")
        return '{"agent_name": "Orchestrator", "step_number": 0, "reason": "r"}'

    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay):
        sleeps.append(delay)
        await real_sleep(0)

    monkeypatch.setattr("causaltrace.attribution.judge.asyncio.sleep", fake_sleep)
    calls: list = []
    answer = ask(Judge(FunctionJudge(flaky), backoff_s=0.5), calls)
    assert answer.agent_name == "Orchestrator" and len(attempts) == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 0.625 and 1.0 <= sleeps[1] <= 1.25
    assert len(calls) == 1  # retries are transport details: one logical call


def test_rate_limit_gives_up_after_max_retries():
    import litellm

    def always(messages, info):
        raise litellm.RateLimitError(message="429", llm_provider="fake", model="fake")

    fake = FunctionJudge(always)
    with pytest.raises(JudgeRateLimited) as info:
        ask(Judge(fake, backoff_s=0.001, max_retries=2))
    assert len(fake.calls) == 3 and isinstance(info.value.__cause__, litellm.RateLimitError)


def test_context_window_is_enforced_by_the_fake_and_mapped():
    fake = FunctionJudge(lambda m, i: "{}", context_window=10)
    with pytest.raises(JudgeContextWindowExceeded):
        asyncio.run(Judge(fake).ask([{"role": "user", "content": "x" * 400}], Answer, stage_id="judge"))


def test_other_litellm_errors_map_to_judge_error():
    import litellm

    def broken(messages, info):
        raise litellm.AuthenticationError(message="bad key", llm_provider="fake", model="fake")

    with pytest.raises(JudgeError, match="authentication failed"):
        ask(Judge(FunctionJudge(broken)))


def test_timeout_maps_to_judge_error():
    async def slow(messages, info):
        await asyncio.sleep(5)

    with pytest.raises(JudgeError, match="did not answer in time"):
        ask(Judge(FunctionJudge(slow), timeout_s=0.05))


def test_concurrency_is_limited():
    active = peak = 0

    async def tracked(messages, info):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return {"agent_name": "Orchestrator", "step_number": 0, "reason": str(info.number)}

    judge = Judge(FunctionJudge(tracked), concurrency=2, cache=False)

    async def many():
        await asyncio.gather(*(judge.ask([{"role": "user", "content": f"q{i}"}], Answer, stage_id="judge")
                               for i in range(8)))

    asyncio.run(many())
    assert peak == 2


# ------------------------------------------------------------------------------------------------- cache


def test_rerun_is_served_from_the_cache(causaltrace_home):
    fake = FunctionJudge(lambda m, i: '{"agent_name": "WebSurfer", "step_number": 1, "reason": "r"}')
    first: list = []
    ask(Judge(fake), first)
    assert len(fake.calls) == 1 and not first[0].cached
    files = list((causaltrace_home / "cache" / "llm").rglob("*.json"))
    assert len(files) == 1
    second: list = []
    answer = ask(Judge(fake), second)  # a fresh Judge: the cache is on disk
    assert answer.step_number == 1
    assert len(fake.calls) == 1  # zero model calls the second time
    assert second[0].cached and second[0].input_tokens == first[0].input_tokens
    ask(Judge(fake, cache=False))
    assert len(fake.calls) == 2


# ------------------------------------------------------------------------------------------- kill switch


def test_kill_switch_blocks_real_requests_but_not_loopback():
    with pytest.raises(ModelRequestsDisabled):
        ask(Judge("gpt-4o-mini"))
    with pytest.raises(ModelRequestsDisabled):
        check_model_request_allowed("https://api.openai.com/v1", "gpt-4o-mini")
    check_model_request_allowed("http://127.0.0.1:8080/v1", "openai/local")
    check_model_request_allowed("http://localhost:8080/v1", "openai/local")
    assert issubclass(ModelRequestsDisabled, UserError)


def test_kill_switch_off_allows_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")
    check_model_request_allowed(None, "gpt-4o-mini")


def test_litellm_backend_sends_the_schema_as_response_format(monkeypatch):
    import litellm

    seen = {}

    async def fake_acompletion(**kwargs):
        seen.update(kwargs)
        return litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content":
                                     '{"agent_name": "WebSurfer", "step_number": 3, "reason": "r"}'}}],
                                     usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})

    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")
    monkeypatch.setattr(litellm, "acompletion", fake_acompletion)
    calls: list = []
    answer = ask(Judge(LiteLLMModel(name="gpt-4o-mini")), calls)
    assert answer.step_number == 3
    rf = seen["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"]["properties"]["step_number"]["maximum"] == 9
    assert seen["temperature"] == 0.0 and seen["model"] == "gpt-4o-mini"
    assert calls[0].input_tokens == 11 and calls[0].output_tokens == 7
    assert calls[0].usd is not None and calls[0].usd > 0  # gpt-4o-mini is in litellm's price map
    seen.clear()
    ask(Judge(LiteLLMModel(name="openai/local", api_base="http://127.0.0.1:1/v1", response_format_style="llama_cpp")))
    assert seen["response_format"]["type"] == "json_object" and "schema" in seen["response_format"]


def test_literal_helper_types():
    Pick = output_model("Pick", half=Literal["upper", "lower"])
    assert json_schema_for(Pick)["properties"]["half"]["enum"] == ["upper", "lower"]
    with pytest.raises(ValueError):
        step_index(5, 4)
    with pytest.raises(ValueError):
        agent_name([])
