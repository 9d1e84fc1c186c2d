"""The tools and the code executor of an AutoGen playback: workbenches whose ``call_tool`` / ``call_tool_stream``
serve the recording through the injected playback core (a ``StaticStreamWorkbench`` stays a stream workbench, so an
``AgentTool``'s streamed events still flow), per-agent copies of the handoff tools, and the CodeExecutorAgent's
executor on the injected sandbox.

**A divergence at a tool call ends the replay cleanly** (it never hangs it). AutoGen's ``AssistantAgent`` runs a
response's tool calls in a task that puts an end marker on an event queue only when every call RETURNS; a workbench
that raises leaves the agent waiting on that queue forever (``team.run`` hangs; only the per-replay timeout ended
it). A real workbench never raises — ``StaticWorkbench`` turns a failing tool into an error ``ToolResult`` — so the
playback twins keep that contract: a call that diverges (or comes after the replay's first divergence) returns an
error result naming the divergence, which the core has already logged; the agent's next model call raises it again
and the run stops there, and the adapter reports the divergence (``Playback.finish``).

This module imports AutoGen at its top; ``_playback.py`` imports it only when a playback is assembled.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from autogen_core.code_executor import CodeExecutor, CodeResult
from autogen_core.tools import StaticStreamWorkbench, TextResultContent, ToolResult, Workbench

from causaltrace.exceptions import ReplayDivergence
from causaltrace.instrumentation.autogen._access import parse_arguments, tool_request
from causaltrace.instrumentation.autogen._executor import SandboxCodeExecutor
from causaltrace.instrumentation.autogen._playback_keys import live_key
from causaltrace.protocols import PlaybackCore, PlaybackDecision
from causaltrace.recording import canonicalize_request, request_hash
from causaltrace.schema import RecordedCall, Run

__all__ = [
    "CodeRecord",
    "PlaybackCodeExecutor",
    "PlaybackStreamWorkbench",
    "PlaybackWorkbench",
    "ToolPlayback",
    "handoff_twin",
    "input_twin",
    "playback_workbench",
    "recorded_code",
    "recorded_inputs",
]

#: Memory limit of one sandboxed code block during replay.
CODE_MEMORY_MB = 512


class ToolPlayback:
    """The logic of one agent's playback workbenches and handoff tools. ``in_flight`` (shared by the replay's agents)
    holds the tasks of the tool calls running now, so a cancelled replay can stop them (``_playback._run_or_stop``:
    AutoGen leaves the task that runs a response's tool calls running when the agent is cancelled)."""

    def __init__(self, core: PlaybackCore, key: str, in_flight: set[asyncio.Future[Any]] | None = None) -> None:
        self.core = core
        self.key = key
        self.in_flight: set[asyncio.Future[Any]] = in_flight if in_flight is not None else set()

    def track(self, future: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """Keep ``future`` in :attr:`in_flight` until it is done."""
        self.in_flight.add(future)
        future.add_done_callback(self.in_flight.discard)
        return future

    def decide(self, name: str, arguments: Any, call_id: str | None) -> PlaybackDecision:
        core = self.core
        core.check()
        key = live_key(self.key)
        parsed = parse_arguments(arguments if arguments is not None else {})
        ordinal, parsed = core.claim(key, name, parsed, call_id)
        canonical = canonicalize_request(tool_request(name, parsed))
        return core.decide(key, "tool", ordinal, request_hash(canonical), canonical, f"tool {name}")

    async def play(
        self,
        name: str,
        arguments: Any,
        call_id: str | None,
        run_live: Callable[[], Awaitable[Any]],
        wrap: Callable[[str, bool], Any],
        text_of_result: Callable[[Any], tuple[str, bool]],
    ) -> Any:
        """Serve, intervene, re-run or run live one tool call. ``wrap(text, is_error)`` builds the result the caller
        returns; ``text_of_result`` reads a live result back. A divergence is returned as an error result, never
        raised (module docstring: AutoGen's tool loop hangs on a raising workbench)."""
        try:
            decision = self.decide(name, arguments, call_id)
        except ReplayDivergence as exc:
            return wrap(f"replay diverged: {exc.message}", True)
        rec = decision.call
        core = self.core
        if decision.action == "intervene":
            assert core.edit is not None
            core.release(rec)
            value = core.edit.value
            return wrap(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), False)
        if decision.action == "serve":
            assert rec is not None
            await core.wait_turn(rec)
            if core.divergences:  # another agent diverged while this call waited for its turn
                core.release(rec)
                return wrap(f"replay diverged: {core.divergences[0]}", True)
            core.count("serve")
            core.release(rec)
            text, is_error = recorded_tool_result(rec)
            return wrap(text, is_error)
        try:
            result = await self.track(asyncio.ensure_future(run_live()))
        finally:
            core.release(rec)
        if decision.action == "rerun" and rec is not None and text_of_result(result) == recorded_tool_result(rec):
            core.count("serve")
        else:
            core.count("live")
        return result


def recorded_tool_result(rec: RecordedCall) -> tuple[str, bool]:
    """``(content, is_error)`` of a recorded tool call (a FunctionExecutionResult, or the recorded exception)."""
    if rec.response is None and rec.error is not None:
        return rec.error.message, True
    value = rec.decoded_response()
    content = getattr(value, "content", value)
    return (content if isinstance(content, str) else str(content)), bool(getattr(value, "is_error", False))


def _wrap(name: str) -> Callable[[str, bool], Any]:
    return lambda text, is_error: ToolResult(name=name, result=[TextResultContent(content=text)], is_error=is_error)


def _text_of_result(result: Any) -> tuple[str, bool]:
    return result.to_text(), bool(result.is_error)


class _Delegating:
    """The workbench methods that go straight to the wrapped workbench."""

    _inner: Any
    playback: ToolPlayback

    async def list_tools(self) -> Any:
        return await self._inner.list_tools()

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

    async def reset(self) -> None:
        await self._inner.reset()

    async def save_state(self) -> Any:
        return await self._inner.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self._inner.load_state(state)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: Any = None,
        call_id: str | None = None,
    ) -> Any:
        return await self.playback.play(
            name,
            arguments,
            call_id,
            lambda: self._inner.call_tool(name, arguments, cancellation_token, call_id),
            _wrap(name),
            _text_of_result,
        )


class PlaybackWorkbench(_Delegating, Workbench):
    """A workbench that serves the recorded tool results and runs the wrapped one otherwise."""

    def __init__(self, inner: Any, playback: ToolPlayback) -> None:
        self._inner = inner
        self.playback = playback

    def call_tool_stream(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not a stream one
        raise NotImplementedError("a playback of a non-stream workbench has no call_tool_stream")


class PlaybackStreamWorkbench(_Delegating, StaticStreamWorkbench):
    """:class:`PlaybackWorkbench` for a ``StaticStreamWorkbench`` (AssistantAgent streams its events)."""

    def __init__(self, inner: Any, playback: ToolPlayback) -> None:
        super().__init__(tools=[])
        self._inner = inner
        self.playback = playback

    async def call_tool_stream(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: Any = None,
        call_id: str | None = None,
    ) -> Any:
        events: asyncio.Queue[Any] = asyncio.Queue()

        async def run_live() -> Any:
            final = None
            async for event in self._inner.call_tool_stream(name, arguments, cancellation_token, call_id):
                if isinstance(event, ToolResult):
                    final = event
                else:
                    events.put_nowait(event)
            return final

        task = self.playback.track(asyncio.ensure_future(
            self.playback.play(name, arguments, call_id, run_live, _wrap(name), _text_of_result)
        ))
        getter: asyncio.Future[Any] | None = None
        try:
            while not (task.done() and events.empty()):
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            yield task.result()
        finally:  # closed or cancelled mid-call: nothing of this call is left waiting
            for pending in (getter, task):
                if pending is not None and not pending.done():
                    pending.cancel()


def playback_workbench(inner: Any, playback: ToolPlayback) -> Any:
    """The playback twin of workbench ``inner`` (a stream workbench for a stream one)."""
    cls = PlaybackStreamWorkbench if isinstance(inner, StaticStreamWorkbench) else PlaybackWorkbench
    return cls(inner, playback)


def handoff_twin(tool: Any, playback: ToolPlayback) -> Any:
    """A copy of a handoff tool whose ``run_json`` plays the recording (``_execute_tool_call`` calls it directly)."""
    twin = copy.copy(tool)
    original = tool.run_json
    name = str(getattr(tool, "name", type(tool).__name__))

    async def run_json(args: Mapping[str, Any], cancellation_token: Any, call_id: str | None = None) -> Any:
        return await playback.play(
            name,
            dict(args),
            call_id,
            lambda: original(args, cancellation_token, call_id=call_id),
            lambda text, is_error: text,
            lambda result: (tool.return_value_as_string(result), False),
        )

    twin.run_json = run_json
    return twin


# ------------------------------------------------------------------------------------------------ the code


@dataclass
class CodeRecord:
    """One code execution of the original run: its code, stdout and exit code."""

    code: str
    stdout: str
    exit_code: int | None


class PlaybackCodeExecutor(CodeExecutor):
    """A CodeExecutorAgent's executor during replay: every block runs in the sandbox (:class:`SandboxCodeExecutor`);
    before the intervention the recorded output is returned (code reading the time or random numbers would
    otherwise diverge), after it the actual output (served when equal to the recorded one, else live)."""

    def __init__(self, core: PlaybackCore, key: str, sandbox: Any, *, timeout_s: float,
                 recorded: Mapping[str, list[CodeRecord]]) -> None:
        self.core = core
        self.key = key
        self.recorded = recorded
        self.sandboxed = SandboxCodeExecutor(sandbox, timeout_s=timeout_s, memory_mb=CODE_MEMORY_MB)

    async def execute_code_blocks(self, code_blocks: list[Any], cancellation_token: Any) -> Any:
        core = self.core
        core.check()
        key = live_key(self.key)
        ordinal = core.next_ordinal(key, "code")
        recorded = self.recorded.get(key, [])
        rec = recorded[ordinal] if ordinal < len(recorded) else None
        code = "\n\n".join(getattr(b, "code", str(b)) for b in code_blocks)
        if rec is not None and rec.code != code and not core.applied:
            raise core.diverge_from(f"{key} code #{ordinal}", "code execution", "code", rec.code, code)
        result = await self.sandboxed.execute_code_blocks(code_blocks, cancellation_token)
        core.count_code_run()
        if rec is not None and rec.code == code:
            if not core.applied:  # the recorded output: code reading time or random numbers stays in step
                core.count("serve")
                return CodeResult(exit_code=rec.exit_code if rec.exit_code is not None else 1, output=rec.stdout)
            if result.output == rec.stdout and result.exit_code == rec.exit_code:
                core.count("serve")
                return result
        core.count("live")
        return result

    async def start(self) -> None:
        await self.sandboxed.start()

    async def stop(self) -> None:
        await self.sandboxed.stop()

    async def restart(self) -> None:
        await self.sandboxed.restart()


def recorded_code(run: Run) -> dict[str, list[CodeRecord]]:
    """Per agent key, the code executions of the original run (code, stdout, exit code), in order."""
    out: dict[str, list[CodeRecord]] = {}
    by_id = {s.step_id: s for s in run.steps}
    for step in run.steps:
        if step.kind != "code_execution":
            continue
        turn = by_id.get(step.parent_step_id or "")
        key = turn.metadata.get("agent_key") if turn is not None else None
        if not isinstance(key, str):
            continue
        exit_code = step.outputs.get("exit_code")
        out.setdefault(key, []).append(
            CodeRecord(
                code=str(step.inputs.get("code") or ""),
                stdout=str(step.outputs.get("stdout") or ""),
                exit_code=exit_code if isinstance(exit_code, int) else None,
            )
        )
    return out


# ------------------------------------------------------------------------------------------ the user's input


def recorded_inputs(run: Run) -> dict[str, list[str]]:
    """Per agent key, what a UserProxyAgent answered in the original run, in order."""
    out: dict[str, list[str]] = {}
    by_id = {s.step_id: s for s in run.steps}
    for step in run.steps:
        if step.kind != "message" or step.metadata.get("user_input") is not True:
            continue
        turn = by_id.get(step.parent_step_id or "")
        key = turn.metadata.get("agent_key") if turn is not None else None
        if isinstance(key, str):
            out.setdefault(key, []).append(str(step.outputs.get("text", step.content)))
    return out


def input_twin(original: Callable[..., Any], core: PlaybackCore, key: str,
               answers: Mapping[str, list[str]]) -> Callable[..., Any]:
    """A UserProxyAgent input function answering what the user answered in the original run (``answers``, per
    agent key: consumed in order), then asking."""

    def recorded() -> str | None:
        queue = answers.get(live_key(key), [])
        if queue:
            core.count("serve")
            return queue.pop(0)
        return None

    if inspect.iscoroutinefunction(original):

        async def ask_async(prompt: str, cancellation_token: Any = None) -> str:
            answer = recorded()
            if answer is not None:
                return answer
            core.count("live")
            return str(await original(prompt, cancellation_token))

        return ask_async

    def ask(prompt: str) -> str:
        answer = recorded()
        if answer is not None:
            return answer
        core.count("live")
        return str(original(prompt))

    return ask
