"""Recorded calls keep repeated content once (issue 21 item 14): a tool result that every later model request
carries again is stored once, on both backends, and the recording reads back equal to what was written."""

from __future__ import annotations

import os
from typing import Any

import pytest

from _builders import RunBuilder
from _postgres import sql_rows
from causaltrace.collector.store import Store
from causaltrace.recording import canonicalize_request
from causaltrace.schema import Run

#: The tool's payload: random (incompressible) text, large enough that a copy per request shows.
PAYLOAD_CHARS = 1_000_000
#: The model calls after the tool returned: each request carries the whole conversation, the payload included.
LATER_CALLS = 6


def payload_run(run_id: str, payload: str, *, later_calls: int = LATER_CALLS) -> Run:
    """A run whose tool returns ``payload`` and whose ``later_calls`` model requests each carry it again (a growing
    conversation, as AutoGen and smolagents send it)."""
    question = "Summarise the file."
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    builder = (
        RunBuilder(run_id)
        .task(question, step_id="s0")
        .turn("reader", step_id="s1")
        .llm("reader", tool_calls=[{"name": "read", "arguments": {}, "call_alias": "call#0"}], step_id="s2",
             deps=[("s0", "saw")])
        .tool_call("reader", "read", {}, step_id="s3", deps=[("s2", "produced_by")])
        .tool_response("reader", payload, step_id="s4", deps=[("s3", "tool_result_of")])
        .recorded("llm", canonicalize_request({"messages": list(messages)}), agent_key="team/reader", step_id="s2",
                  response={"tool_calls": [{"name": "read", "arguments": "{}"}]})
        .recorded("tool", canonicalize_request({"name": "read", "arguments": {}}), agent_key="team/reader",
                  step_id="s3", response=payload)
    )
    messages.append({"role": "tool", "content": payload, "tool_call_id": "call#0"})
    previous = "s4"
    for i in range(later_calls):
        step_id = f"s{5 + i}"
        builder.llm("reader", f"part {i} of the summary", step_id=step_id, deps=[(previous, "observed")])
        builder.recorded("llm", canonicalize_request({"messages": list(messages)}), agent_key="team/reader",
                         step_id=step_id, response={"content": f"part {i} of the summary"})
        messages.append({"role": "assistant", "content": f"part {i} of the summary"})
        previous = step_id
    return builder.end_turn().build(framework="autogen", task=question)


def random_text(chars: int) -> str:
    """Incompressible text: hex of random bytes."""
    return os.urandom(chars // 2).hex()


def stored_chars(store: Store) -> int:
    """Characters of content the store holds: the data of every table there is (the chunks table only exists from
    the schema version that introduced it)."""
    total = 0
    for table in ("runs", "steps", "recordings", "recording_chunks"):
        try:
            total += int(sql_rows(store, f"SELECT COALESCE(SUM(LENGTH(data)), 0) FROM {table}")[0][0])
        except Exception:  # a table this schema version does not have
            continue
    return total


@pytest.mark.xfail(strict=True, reason="issue 21 item 14: every later request stores the payload again")
def test_a_payload_every_later_request_carries_is_stored_once(store_target: str) -> None:
    payload = random_text(PAYLOAD_CHARS)
    run = payload_run("payload-0001", payload)
    with Store(store_target, max_chars=100_000) as store:  # the step fields are cut (CAUSALTRACE_STORE_MAX_CHARS)
        store.finish_run(run)
        assert store.get_run(run.run_id).recording == run.recording
        size = stored_chars(store)
    assert size <= 2 * PAYLOAD_CHARS, f"{size:,} chars stored for a {PAYLOAD_CHARS:,}-char payload"
