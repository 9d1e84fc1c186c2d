"""What keeps the local model's calls short and valid (issue 6, FACTS.md "A real local LLM"), offline:

* answers fitted to the output budget (:func:`fit_schema`): the grammar bounds every string and list, so a weak
  model's answer is complete within ``max_tokens`` and never cut mid-JSON;
* the prompt shows a short answer template instead of the JSON schema (the grammar enforces the schema);
* the steps-first prompt layout (a shared prefix the llama.cpp server does not evaluate twice);
* tolerant parsing of raw control characters inside JSON strings (llama.cpp's JSON grammar lets them through);
* ``--order size`` counting the task, which every prompt carries.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from causaltrace.attribution import local_model
from causaltrace.attribution.bench import select_runs
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.judge import (
    JudgeRequest,
    JudgeResponse,
    LiteLLMModel,
    answer_template,
    answer_tokens,
    compact_schema_in_messages,
    extract_json,
    fit_schema,
    json_schema_for,
    output_model,
    short_text,
    step_index,
)
from causaltrace.attribution.stages.prompting import STEPS_FIRST_SYSTEM, schema_text
from causaltrace.collector.whowhen import load_whowhen

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"
METHODS = ("defa", "emfa", "dcfa", "graph")


def schemas_of_every_stage() -> dict[str, dict]:
    """The answer schema of every LLM stage of the four methods (one per stage id), from offline diagnoses of the
    fixture traces with a schema-driven fake (DCFA's ``simulate`` included: its search evaluates candidates)."""
    from _method_fakes import fake

    def cgc(info, generated):  # every step causes the next one: the LCE search has candidates to simulate
        steps = info.schema["properties"]["steps"]["items"]["properties"]["step"]["enum"]
        return {"steps": [{"step": i, "label": "mistake", "causes": [j for j in steps if j < i],
                           "effects": [j for j in steps if j > i]} for i in steps]}

    out: dict[str, dict] = {}
    for name in ("Algorithm-Generated/1.json", "Hand-Crafted/1.json"):
        run = load_whowhen(DATA / name)
        for method in METHODS:
            judge = fake({"cgc": cgc})
            d = asyncio.run(diagnose(run, method, judge, judge_options={"cache": False}))
            assert not d.failed, d.failure_reason
            for call in judge.calls:
                out.setdefault(call.stage_id, call.schema or {})
    return out


# ---------------------------------------------------------------------------------------------- parsing


def test_extract_json_accepts_raw_newlines_inside_strings():
    text = '{"goal": "first line\nsecond line", "n": 1}\n'
    assert extract_json(text) == {"goal": "first line\nsecond line", "n": 1}
    assert extract_json('{"a": "cut\tshort') == {"a": "cut\tshort"}  # truncated and with a raw tab


# ------------------------------------------------------------------------------------------- fit_schema


def _answer_model():
    Item = output_model("Item", step=step_index([1, 2, 3]), reason=short_text(400))
    return output_model("Answer", items=list[Item], explanation=short_text(800), name=str,  # type: ignore[valid-type]
                        sub=step_index(0, 49), big=step_index(0, 5000), flag=bool)


def test_unbounded_schemas_have_no_token_bound_and_fitting_bounds_them():
    schema = json_schema_for(_answer_model())
    assert answer_tokens(schema) is None  # a list without maxItems, a str without maxLength
    for budget in (128, 256):
        fitted, bound = fit_schema(schema, budget)
        assert bound == answer_tokens(fitted) and bound <= budget
        items = fitted["properties"]["items"]
        assert 1 <= items["maxItems"] <= 8
        assert 16 <= items["items"]["properties"]["reason"]["maxLength"] <= 400
        assert 16 <= fitted["properties"]["name"]["maxLength"] <= 200
        # a small integer range becomes an enum (llama.cpp's converter ignores minimum / maximum); a big one stays
        assert fitted["properties"]["sub"]["enum"] == list(range(50))
        assert "enum" not in fitted["properties"]["big"]
    assert "maxItems" not in schema["properties"]["items"]  # the caller's schema is not changed
    floor, bound = fit_schema(schema, 8)  # a budget too small for any answer: the floor (best effort)
    assert floor["properties"]["items"]["maxItems"] == 1 and floor["properties"]["name"]["maxLength"] == 16
    assert bound == answer_tokens(floor) > 8


def test_a_fitted_schema_keeps_existing_limits_and_the_pydantic_model_still_validates():
    Pick = output_model("Pick", step=step_index([4, 7]), reason=short_text(30))
    from typing import Annotated

    from pydantic import Field
    Model = output_model("Screen", candidates=Annotated[list[Pick], Field(json_schema_extra={"maxItems": 2})])
    fitted, bound = fit_schema(json_schema_for(Model), 128)
    assert fitted["properties"]["candidates"]["maxItems"] == 2
    assert fitted["properties"]["candidates"]["items"]["properties"]["reason"]["maxLength"] == 30
    assert bound <= 128
    Model.model_validate({"candidates": [{"step": 4, "reason": "x" * 100}]})  # longer text still validates


def test_answer_template_is_short_and_replaces_the_schema_shown_in_the_prompt():
    Model = _answer_model()
    schema = json_schema_for(Model)
    fitted, _ = fit_schema(schema, 128)
    template = answer_template(fitted)
    assert template.startswith('{"items": [{"step": 1|2|3, "reason": "<text, ≤ ')
    assert '"sub": <integer 0–49>' in template and '"flag": true|false' in template
    shown = schema_text(Model)
    messages = [{"role": "system", "content": "s"},
                {"role": "user", "content": f"Do it.\n\nReply with only a JSON object matching this schema: {shown}"}]
    out = compact_schema_in_messages(messages, schema, fitted)
    assert out[0] == messages[0] and shown not in out[1]["content"]
    assert out[1]["content"].endswith(template) and len(out[1]["content"]) < len(messages[1]["content"]) / 2


# ---------------------------------------------------------------------------------- the local backend


def test_the_local_backend_fits_the_schema_and_compacts_the_prompt(monkeypatch):
    seen: list[JudgeRequest] = []

    async def fake_complete(self, request):
        seen.append(request)
        return JudgeResponse(text="{}", input_tokens=1, output_tokens=1)

    monkeypatch.setattr(LiteLLMModel, "complete", fake_complete)
    server = local_model.LocalServer(pid=1, port=1, gguf="g", n_ctx=8192, proc_start="0")
    monkeypatch.setattr(local_model, "_alive", lambda s: True)
    model = local_model.LocalModel()
    model._server = server
    Model = _answer_model()
    schema = json_schema_for(Model)
    request = JudgeRequest(messages=[{"role": "user", "content": f"schema: {schema_text(Model)}"}], schema=schema,
                           schema_name="Answer", max_tokens=256, temperature=0.0, seed=0, timeout_s=5.0)
    asyncio.run(model.complete(request))
    sent = seen[0]
    assert sent.max_tokens == 256 and answer_tokens(sent.schema) <= local_model.ANSWER_TOKENS
    assert sent.messages[0]["content"] == f"schema: {answer_template(sent.schema)}"
    assert model.steps_first is True


def test_the_local_server_runs_without_logits_for_every_prompt_token(monkeypatch, tmp_path):
    monkeypatch.setattr(local_model, "_check_llama_cpp", lambda: None)
    monkeypatch.setattr(local_model, "gguf_path", lambda: tmp_path / "m.gguf")
    argv: list[list[str]] = []

    class Stop(Exception):
        pass

    def popen(args, **kw):
        argv.append(list(args))
        raise Stop

    monkeypatch.setattr(local_model.subprocess, "Popen", popen)
    with pytest.raises(Stop):
        local_model.ensure_server()
    args = argv[0]
    assert args[args.index("--logits_all") + 1] == "false"  # logits only for the last token: no logprobs needed
    assert args[args.index("--n_ctx") + 1] == "8192" and args[args.index("--host") + 1] == "127.0.0.1"


# --------------------------------------------------------------------------------- steps-first layout


@pytest.mark.parametrize("method", METHODS)
def test_steps_first_layout_keeps_the_texts_and_shares_the_prefix(method):
    from _method_fakes import fake

    run = load_whowhen(DATA / "Algorithm-Generated" / "1.json")
    plain, first = fake(), fake()
    first.steps_first = True
    d_plain = asyncio.run(diagnose(run, method, plain, judge_options={"cache": False}))
    d_first = asyncio.run(diagnose(run, method, first, judge_options={"cache": False}))
    assert not d_plain.failed and not d_first.failed
    assert d_plain.cost.calls_by_stage == d_first.cost.calls_by_stage
    with_steps = 0
    for a, b in zip(plain.calls, first.calls, strict=True):
        if len(b.messages) == 3:  # a stage that shows steps
            with_steps += 1
            system, steps, instructions = (m["content"] for m in b.messages)
            assert system == STEPS_FIRST_SYSTEM and [m["role"] for m in b.messages] == ["system", "user", "user"]
            body = steps.split("\n", 1)[1]
            assert body in a.messages[1]["content"] and instructions.startswith(a.messages[0]["content"])
        else:
            assert b.messages == a.messages
    assert with_steps >= 3
    prefixes = [tuple(m["content"] for m in c.messages[:2]) for c in first.calls if len(c.messages) == 3]
    assert len(set(prefixes)) < len(prefixes)  # some consecutive stages share their prefix


# ------------------------------------------------------------------------------------------- selection


def test_order_size_counts_the_task_every_prompt_carries(tmp_path):
    for sub in ("Algorithm-Generated", "Hand-Crafted"):
        (tmp_path / sub).mkdir()
    shutil.copy(DATA / "VERSION", tmp_path / "VERSION")
    short_log = json.loads((DATA / "Algorithm-Generated" / "3.json").read_text())
    long_task = dict(short_log, question="A very long question. " * 40)
    (tmp_path / "Algorithm-Generated" / "1.json").write_text(json.dumps(long_task))
    other = json.loads((DATA / "Algorithm-Generated" / "1.json").read_text())
    (tmp_path / "Algorithm-Generated" / "2.json").write_text(json.dumps(other))
    content = {r.run_id: sum(len(s.content) for s in r.steps) for r in select_runs(tmp_path, "algo")}
    assert content["whowhen-algo-1"] < content["whowhen-algo-2"]  # the shorter log, with the longer read, comes last
    assert [r.run_id for r in select_runs(tmp_path, "algo", order="size")] == ["whowhen-algo-2", "whowhen-algo-1"]


# ------------------------------------------------------------------------------ every stage's schema fits


def test_every_stage_schema_of_the_four_methods_fits_the_local_budget():
    schemas = schemas_of_every_stage()
    assert {"protocol_rules", "structure", "correct", "simulate", "refine", "adjudicate", "cgc"} <= set(schemas)
    for stage, schema in schemas.items():
        fitted, bound = fit_schema(schema, local_model.ANSWER_TOKENS)
        # the budget, or the floor (DeFA's rule has many fields) — always well inside max_tokens, so a complete
        # answer is never cut even when the model's text takes more tokens than estimated
        assert bound <= local_model.ANSWER_TOKENS or stage == "protocol_rules", (stage, bound)
        assert bound <= local_model.MAX_TOKENS_CAP * 2 // 3, (stage, bound)
        strings = [n for n in _nodes(fitted) if n.get("type") == "string" and "enum" not in n]
        assert all(16 <= n["maxLength"] <= 400 for n in strings), stage
        assert all(n.get("maxItems") for n in _nodes(fitted) if n.get("type") == "array"), stage


def _nodes(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _nodes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _nodes(v)
