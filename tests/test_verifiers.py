"""Ready-made verifiers: expected text / number, a test suite run in the real sandbox, the LLM judge's kill switch."""

from __future__ import annotations

import pytest

from causaltrace.replay.sandbox import SubprocessSandbox
from causaltrace.schema import Outcome
from causaltrace.verifiers import code_in, expected, llm_judge
from causaltrace.verifiers import tests_pass as suite_verifier  # (a name pytest would collect)


def _out(answer: str) -> Outcome:
    return Outcome(status="unknown", final_answer=answer, stop="normal")


def test_expected_text_and_number():
    assert expected("Renzo  GRACIE")(_out("It is renzo gracie jiu-jitsu")).passed
    assert not expected("Paris")(_out("London")).passed
    assert expected(42)(_out("The answer is 42.")).passed
    assert not expected(42)(_out("The answer is 142")).passed
    assert expected(1000)(_out("1,000 items")).passed


def test_tests_pass_runs_the_suite_in_the_sandbox(tmp_path):
    tests = tmp_path / "test_add.py"
    tests.write_text("from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    verify = suite_verifier(tests, sandbox=SubprocessSandbox(), timeout_s=20)
    good = verify(_out("Here:\n```python\ndef add(a, b):\n    return a + b\n```"))
    assert good.passed and "1 passed" in good.reason
    bad = verify(_out("```python\ndef add(a, b):\n    return a - b\n```"))
    assert not bad.passed and "AssertionError" in bad.reason
    assert code_in("no fences: x = 1") == "no fences: x = 1"


def test_the_default_sandbox_comes_through_the_trunk(tmp_path):
    """Without a sandbox, tests_pass runs in replay's shared default sandbox, reached through ``protocols`` (the
    verifiers import only the trunk)."""
    from causaltrace import protocols
    from causaltrace.replay.executor import default_sandbox

    assert protocols.default_sandbox() is default_sandbox()
    tests = tmp_path / "test_one.py"
    tests.write_text("from solution import one\n\ndef test_one():\n    assert one() == 1\n")
    assert suite_verifier(tests, timeout_s=20)(_out("def one():\n    return 1")).passed


async def test_llm_judge_respects_the_kill_switch():
    verdict = await llm_judge("openai/gpt-4o-mini", "must be polite")(_out("hello"))
    assert not verdict.passed and "disabled" in verdict.reason


@pytest.mark.parametrize("answer", ["", None])
def test_expected_on_empty_answers(answer):
    assert not expected("x")(Outcome(final_answer=answer)).passed
