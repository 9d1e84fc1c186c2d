"""Ready-made verifiers (ARCHITECTURE "Shared contracts": Verifier): each returns a callable ``(Outcome) -> Verdict``.

* :func:`expected` — the final answer contains a text (whitespace- and case-normalised), or equals a number;
* :func:`tests_pass` — a test file runs green in the sandbox against the code in the final answer;
* :func:`llm_judge` — an LLM judges the final answer against criteria (through litellm; the kill switch applies).

A plain ``str`` passed as ``verify=`` means :func:`expected` of it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from causaltrace.exceptions import MissingExtraError
from causaltrace.protocols import Sandbox, default_sandbox
from causaltrace.schema import Outcome, Verdict

__all__ = ["code_in", "expected", "llm_judge", "tests_pass"]

_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def expected(text: str | int | float) -> Callable[[Outcome], Verdict]:
    """The final answer must contain ``text`` (normalised); a number must appear as a number (42 ≠ 142)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        pattern = re.compile(rf"(?<![\d.]){re.escape(str(text))}(?![\d])")

        def verify_number(outcome: Outcome) -> Verdict:
            answer = outcome.final_answer or ""
            if pattern.search(answer.replace(",", "")):
                return Verdict(passed=True)
            return Verdict(passed=False, reason=f"the final answer {answer[:200]!r} does not give {text}")

        return verify_number
    wanted = _norm(str(text))

    def verify_text(outcome: Outcome) -> Verdict:
        answer = outcome.final_answer or ""
        if wanted in _norm(answer):
            return Verdict(passed=True)
        return Verdict(passed=False, reason=f"the final answer {answer[:200]!r} does not contain {text!r}")

    return verify_text


def code_in(answer: str) -> str:
    """The code of a final answer: its fenced code blocks joined, or the whole answer when it has none."""
    blocks = _CODE_BLOCK.findall(answer)
    return "\n\n".join(b.strip() for b in blocks) if blocks else answer


def tests_pass(
    path: str | Path,
    *,
    module: str = "solution",
    sandbox: Sandbox | None = None,
    timeout_s: float = 30.0,
    memory_mb: int = 512,
) -> Callable[[Outcome], Verdict]:
    """Run the test file at ``path`` in the sandbox against the code in the final answer (saved as ``module``.py).

    The test file may be a pytest-style module of ``test_*`` functions (run without pytest: each is called, an
    exception fails it) so the sandbox needs nothing installed.
    """
    test_source = Path(path).read_text(encoding="utf-8")
    runner = (
        "import importlib, sys, traceback\n"
        "sys.path.insert(0, '.')\n"
        "mod = importlib.import_module('test_answer')\n"
        "names = sorted(n for n in dir(mod) if n.startswith('test') and callable(getattr(mod, n)))\n"
        "failed = []\n"
        "for n in names:\n"
        "    try:\n"
        "        getattr(mod, n)()\n"
        "    except BaseException as exc:\n"
        "        failed.append(f'{n}: {type(exc).__name__}: {exc}')\n"
        "print(f'{len(names) - len(failed)} passed, {len(failed)} failed')\n"
        "for f in failed: print(f)\n"
        "sys.exit(1 if failed or not names else 0)\n"
    )

    def verify(outcome: Outcome) -> Verdict:
        box = sandbox
        if box is None:
            box = default_sandbox()
        files = {f"{module}.py": code_in(outcome.final_answer or "").encode(), "test_answer.py": test_source.encode()}
        result = box.run(runner, files=files, timeout_s=timeout_s, memory_mb=memory_mb)
        summary = (result.stdout or result.stderr).strip().splitlines()
        if result.timed_out:
            return Verdict(passed=False, reason=f"the tests timed out after {timeout_s} s")
        if result.exit_code == 0:
            return Verdict(passed=True, reason=summary[0] if summary else "")
        return Verdict(passed=False, reason="; ".join(summary[:4]) or f"exit code {result.exit_code}")

    return verify


def llm_judge(model: str, criteria: str, *, api_base: str | None = None) -> Callable[[Outcome], Any]:
    """An async verifier: ``model`` (any litellm model) judges the final answer against ``criteria``."""

    async def verify(outcome: Outcome) -> Verdict:
        if os.environ.get("CAUSALTRACE_ALLOW_MODEL_REQUESTS", "1") == "0" and not (api_base or "").startswith(
            ("http://127.0.0.1", "http://localhost")
        ):
            return Verdict(passed=False, reason="model requests are disabled (CAUSALTRACE_ALLOW_MODEL_REQUESTS=0)")
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            import litellm
        except ImportError as exc:  # the model stages' extra is not installed: one line naming it
            raise MissingExtraError("litellm", "llm") from exc

        prompt = (
            f"Criteria: {criteria}\nFinal answer: {outcome.final_answer!r}\n"
            'Does the final answer meet the criteria? Reply with JSON {"passed": true|false, "reason": "..."} only.'
        )
        response = await litellm.acompletion(
            model=model, messages=[{"role": "user", "content": prompt}], temperature=0, api_base=api_base
        )
        text = response.choices[0].message.content or ""
        match = re.search(r"\{.*\}", text, re.DOTALL)
        try:
            data = json.loads(match.group(0) if match else text)
            return Verdict(passed=bool(data["passed"]), reason=str(data.get("reason", "")))
        except (ValueError, KeyError, TypeError):
            return Verdict(passed=False, reason=f"the judge's answer could not be read: {text[:200]!r}")

    return verify
