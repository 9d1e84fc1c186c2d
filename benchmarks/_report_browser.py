"""What the report's browser test and benchmark share: a real headless Chromium driven over the DevTools protocol,
and long runs built from real Steps.

Chromium is driven through ``--remote-debugging-pipe`` (the DevTools protocol as NUL-terminated JSON on file
descriptors 3 and 4), so no websocket client and no driver binary are needed. The page is opened in a fixed
viewport BEFORE it loads (so the page's own on-load scrolling sees the real window), and what the test asserts is
read back with ``Runtime.evaluate`` from the live page — the page's script is not trusted to report on itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from causaltrace.schema import Candidate, Dependency, Diagnosis, EvidenceItem, Outcome, Run, Step

__all__ = ["Chromium", "chromium_available", "long_run", "long_run_diagnosis"]

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium_available() -> bool:
    return shutil.which("chromium") is not None


class Chromium:
    """One headless Chromium process; :meth:`open` loads a page in a ``width`` × ``height`` viewport."""

    def __init__(self, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="causaltrace-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes the answers
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            ["chromium", *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, pass_fds=(3, 4),  # kept open after preexec_fn wired them
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed its DevTools pipe (exit {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        """Send one command and wait for its answer (events that arrive meanwhile are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session is not None:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, *, width: int = 1600, height: int = 1000) -> float:
        """Load ``url`` in a fresh tab of that viewport; the seconds from navigation to the load event + a frame."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        start = time.perf_counter()
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            time.sleep(0.01)
        # one animation frame after load: the page's on-load scroll has been laid out
        self.call("Runtime.evaluate", {"expression": "new Promise(r => requestAnimationFrame(() => r(1)))",
                                       "awaitPromise": True})
        return time.perf_counter() - start

    def rect(self, selector: str) -> dict[str, float] | None:
        """The element's box relative to the viewport, and the viewport's size (None when there is no element)."""
        return self.evaluate(
            f"(function () {{ var el = document.querySelector({json.dumps(selector)}); if (!el) {{ return null; }}"
            " var r = el.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right,"
            " bottom: r.bottom, width: innerWidth, height: innerHeight}; })()"
        )


def in_viewport(box: dict[str, float] | None) -> bool:
    """The whole box lies inside the viewport it was measured in."""
    return (box is not None and box["right"] > box["left"] and box["left"] >= 0 and box["top"] >= 0
            and box["right"] <= box["width"] and box["bottom"] <= box["height"])


def long_run(n: int, *, run_id: str = "long-run") -> Run:
    """A manager team of ``n`` steps (at least 11): the manager plans and, each round, delegates to one of three
    sub-agents through a tool call; the sub-agent's work (an agent_turn with an llm response, code, its result and
    an answer inside, ``parent_step_id`` set) returns to the manager as the tool's result. One second per step."""
    steps: list[Step] = []
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    workers = ("researcher", "coder", "checker")

    def add(kind: str, agent: str, deps: list[tuple[int, str]], parent: int | None = None, **kw: Any) -> int:
        i = len(steps)
        steps.append(Step(
            step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind=kind, agent=agent,
            parent_step_id=None if parent is None else f"{run_id}/{parent}",
            depends_on=tuple(Dependency(step_id=f"{run_id}/{d}", kind=k) for d, k in deps),
            started_at=t0 + timedelta(seconds=i), ended_at=t0 + timedelta(seconds=i + 0.8), **kw))
        return i

    task = add("task", "user", [], content="Sum the quarterly figures and check the total.")
    last = add("llm_response", "manager", [(task, "saw")], content="Plan: ask the team, round by round.")
    rnd = 0
    while len(steps) + 8 <= n - 1:
        worker = workers[rnd % len(workers)]
        call = add("tool_call", "manager", [(last, "produced_by")], tool_name=worker,
                   arguments={"task": f"round {rnd}"}, content=f"{worker}(task='round {rnd}')")
        turn = add("agent_turn", worker, [(call, "delegated_by")], parent=call, content=f"{worker} runs")
        think = add("llm_response", worker, [(call, "saw")], parent=turn,
                    content=f"Thought: I compute round {rnd}.\nCode:\n```py\nx = {rnd} * 2\nprint(x)\n```")
        code = add("code_execution", worker, [(think, "executes")], parent=turn,
                   inputs={"code": f"x = {rnd} * 2\nif x > 3:\n    print(x)"}, content=f"x = {rnd} * 2")
        res = add("tool_response", worker, [(code, "tool_result_of")], parent=turn, content=str(rnd * 2))
        answer = add("message", worker, [(res, "observed"), (think, "continues")], parent=turn,
                     content=f"round {rnd} gives {rnd * 2}")
        back = add("tool_response", "manager", [(call, "tool_result_of"), (answer, "answer_of")],
                   tool_name=worker, content=f"round {rnd} gives {rnd * 2}")
        last = add("llm_response", "manager", [(back, "observed"), (last, "continues")],
                   content=f"Noted round {rnd}.")
        rnd += 1
    while len(steps) < n - 1:  # exactly n steps: the manager's last thoughts fill the rest
        last = add("llm_response", "manager", [(last, "continues")], content="Checking the total.")
    add("final_answer", "manager", [(last, "answer_of")], content="The total is 1234.")
    return Run(run_id=run_id, framework="smolagents", agents=("manager", *workers), task=steps[0].content,
               steps=tuple(steps), outcome=Outcome(status="failure", final_answer="The total is 1234."))


def long_run_diagnosis(run: Run, *, at: float = 0.62, candidates: int = 20) -> Diagnosis:
    """A diagnosis whose decisive step is a sub-agent's code execution about ``at`` of the way through the run, with
    an evidence path to the final answer and ``candidates`` ranked candidates (the decisive one first)."""
    codes = [s for s in run.steps if s.kind == "code_execution"]
    decisive = min(codes, key=lambda s: abs(s.index - at * len(run.steps)))
    final = run.steps[-1]
    others = [s for s in run.steps if s.kind in ("llm_response", "message") and s.step_id != decisive.step_id]
    picked = [decisive, *others[: max(candidates - 1, 0)]]
    return Diagnosis(
        run_id=run.run_id, method="graph", decisive_step_id=decisive.step_id, decisive_step_index=decisive.index,
        agent=decisive.agent, category="FM-2.6", explanation="the code doubles where it should add",
        evidence=(EvidenceItem(step_id=decisive.step_id, index=decisive.index, role="introduced"),
                  EvidenceItem(step_id=final.step_id, index=final.index, role="exposed")),
        candidates=tuple(Candidate(step_id=s.step_id, index=s.index, agent=s.agent, score=1.0 / (k + 1),
                                   reasons=(f"reason {k}",)) for k, s in enumerate(picked)),
        verified_by="heuristic", confidence=0.5,
    )
