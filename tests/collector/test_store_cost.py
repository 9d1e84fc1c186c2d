"""A bounded store cost (issue 36 item 7): ``CAUSALTRACE_STORE_MAX_CHARS`` cuts the outcome's final answer as it
cuts step fields, while the recording keeps the whole text once. A real AutoGen AssistantAgent, driven by the
reactive scripted model of ``causaltrace.testing``, whose tool returns 400,000 characters that become the final
answer (``reflect_on_tool_use=False``: the tool result is the last message)."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import string
from pathlib import Path

import pytest

from causaltrace.collector.store import Store
from causaltrace.collector.store_sql import TRUNCATION_MARKER
from causaltrace.config import TraceConfig
from causaltrace.schema import Outcome, Run

BIG = 400_000
LIMIT = 10_000


def _stored_chars(db: Path) -> dict[str, int]:
    """Characters of text per table of the store (every column of every row)."""
    conn = sqlite3.connect(db)
    try:
        out = {}
        for table in ("runs", "steps", "recordings", "recording_chunks"):
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
            out[table] = sum(len(str(v)) for row in rows for v in row if v is not None)
        return out
    finally:
        conn.close()


def test_a_huge_final_answer_is_cut_in_the_run_row_and_kept_once_in_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("autogen_agentchat")
    from autogen_agentchat.agents import AssistantAgent
    from opentelemetry.sdk.trace import TracerProvider

    import causaltrace
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
    from causaltrace.instrumentation.tracing import reset_tracing
    from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, call

    page = "".join(random.Random(3).choices(string.ascii_letters + " ", k=BIG))  # not a repetition of one char

    def fetch() -> str:
        """Fetch the page."""
        return page

    def policy(request: ScriptedRequest) -> object:
        return call("fetch")

    db = tmp_path / "store.db"
    monkeypatch.setenv("CAUSALTRACE_STORE_MAX_CHARS", str(LIMIT))
    monkeypatch.setenv("CAUSALTRACE_DB", str(db))
    instrument_autogen(TracerProvider(), TraceConfig.from_env())
    try:
        agent = AssistantAgent("reader", model_client=ScriptedChatCompletionClient(policy), tools=[fetch])

        async def main() -> str:
            async with causaltrace.run(task="read the page") as handle:
                await agent.run(task="read the page")
            return handle.run_id

        run_id = asyncio.run(main())
    finally:
        uninstrument_autogen()
        reset_tracing()
    with Store(db, readonly=True) as store:
        run = store.get_run(run_id)
    answer = run.outcome.final_answer or ""
    assert answer.startswith(page[:LIMIT]) and answer.endswith(TRUNCATION_MARKER.format(n=BIG - LIMIT))
    assert run.recording is not None
    assert sum(page in c.model_dump_json() for c in run.recording.calls) >= 1  # replay keeps the whole text
    chars = _stored_chars(db)
    assert chars["runs"] < 3 * LIMIT  # the run's row: the cut answer (it held all 400,000 before)
    assert sum(chars.values()) < 1.5 * BIG  # the whole text once: the recording's chunk


def test_import_compares_a_run_as_it_would_be_stored(tmp_path: Path) -> None:
    """Importing the same run with a long final answer twice is "unchanged", not a conflict with its cut copy."""
    run = Run(run_id="long", framework="test", task="t" * 50, outcome=Outcome(status="success", final_answer="a" * 500))
    with Store(tmp_path / "s.db", max_chars=100) as store:
        assert store.import_run(run) == "stored"
        assert store.import_run(run) == "unchanged"
        stored = store.get_run("long")
    assert stored.outcome.final_answer == "a" * 100 + TRUNCATION_MARKER.format(n=400)
    assert stored.task == "t" * 50
