"""Recorded calls keep repeated content once (issue 21 item 14): a tool result that every later model request
carries again is stored once, on both backends, and the recording reads back equal to what was written; chunks
are shared across runs and go with the last run that uses them; a store of the schema before (v2) opens, migrates
and its runs replay; export / import and the OTLP recording still carry the whole recording."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pydantic_core
import pytest

from _builders import RunBuilder
from _postgres import sql_rows
from causaltrace.cli import main
from causaltrace.collector import _migrations, recording_chunks
from causaltrace.collector.store import SCHEMA_VERSION, Store
from causaltrace.collector.store_sql import RUN_COLUMNS, RUN_PLACEHOLDERS, iso, now_iso, sort_ts
from causaltrace.exceptions import StoreError
from causaltrace.recording import canonicalize_request
from causaltrace.schema import Outcome, RecordedCall, Recording, Run

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


def test_a_payload_every_later_request_carries_is_stored_once(store_target: str) -> None:
    payload = random_text(PAYLOAD_CHARS)
    run = payload_run("payload-0001", payload)
    with Store(store_target, max_chars=100_000) as store:  # the step fields are cut (CAUSALTRACE_STORE_MAX_CHARS)
        store.finish_run(run)
        assert store.get_run(run.run_id).recording == run.recording
        size = stored_chars(store)
    assert size <= 2 * PAYLOAD_CHARS, f"{size:,} chars stored for a {PAYLOAD_CHARS:,}-char payload"


def digest_of(text: str) -> str:
    return hashlib.sha256(pydantic_core.to_json(text)).hexdigest()


def chunk_rows(store: Store) -> list[tuple[Any, ...]]:
    return sql_rows(store, "SELECT digest, chars FROM recording_chunks ORDER BY digest")


def test_the_recording_reads_back_equal_and_holds_each_large_string_once(store_target: str) -> None:
    payload = random_text(20_000)
    prompt = "You are careful. " * 400  # a long system prompt every request repeats: chunked too
    twin = payload[:10_000] + "!" + payload[10_001:]  # as long as the payload, one character apart
    builder = RunBuilder("share-0001").task("t", step_id="s0")
    for i in range(4):
        builder.recorded("llm", {"messages": [{"role": "system", "content": prompt},
                                              {"role": "tool", "content": payload, "parts": [twin, payload, "short"]}],
                                 "i": i, "looks_like_a_reference": digest_of(payload)},
                         agent_key="team/a", response={"content": payload if i % 2 else f"answer {i}"})
    builder.recorded("tool", {"name": "read"}, agent_key="team/a", response=payload)
    builder.recorded("tool", {"name": "small"}, agent_key="team/a", response={"nested": [1, 2.5, None, "x"]})
    run = builder.build()
    with Store(store_target) as store:
        store.finish_run(run)
        back = store.get_run(run.run_id)
        assert back == run and back.recording == run.recording
        assert chunk_rows(store) == sorted(
            (digest_of(text), len(text) + 2) for text in (payload, prompt, twin))  # the JSON literal's length
        rows = dict(sql_rows(store, "SELECT seq, chunks FROM recordings ORDER BY seq"))
        assert rows[5] is None  # a call without a large string is stored whole
        assert json.loads(rows[4]) == [[digest_of(payload), "response"]]
        # the digest-looking string of the request stays a plain string: only the listed paths are references
        assert back.recording.calls[0].request["looks_like_a_reference"] == digest_of(payload)
        # one string object for every call that carries it
        first = back.recording.calls[0].request["messages"][1]["content"]
        assert all(c.request["messages"][1]["content"] is first for c in back.recording.calls[:4])


def test_a_wrapped_or_growing_string_keeps_its_shared_part_once(store_target: str) -> None:
    """smolagents sends a tool result as ``Observation:\\n`` + the result; a text that grows by appending repeats
    what it held: both are stored as pieces, the shared part once, whichever call comes first."""
    payload = random_text(200_000)
    wrapped = "Observation:\n" + payload + "\n(end)"
    a, b, c = random_text(70_000), random_text(70_000), random_text(70_000)
    builder = RunBuilder("pieces-0001").task("t", step_id="s0")
    builder.recorded("llm", {"messages": [{"content": [{"type": "text", "text": wrapped}]}]}, agent_key="team/a")
    builder.recorded("tool", {"name": "read"}, agent_key="team/a", response=payload)  # the raw result comes later
    for grown in (a, a + b, a + b + c, "prefix " + a + b + c):
        builder.recorded("llm", {"prompt": grown}, agent_key="team/b", response={"text": "ok"})
    run = builder.build()
    with Store(store_target) as store:
        store.finish_run(run)
        back = store.get_run(run.run_id)
        assert back.recording == run.recording
        distinct = len(payload) + len(a) + len(b) + len(c)
        stored = sum(chars for _, chars in chunk_rows(store))
        assert distinct <= stored <= distinct + 200, (stored, distinct)
        assert back.recording.calls[0].request["messages"][0]["content"][0]["text"] == wrapped
        assert back.recording.calls[5].request["prompt"] == "prefix " + a + b + c


def test_chunks_are_shared_and_go_with_the_last_run_that_uses_them(store_target: str) -> None:
    payload = random_text(50_000)
    other = random_text(50_000)
    with Store(store_target) as store:
        store.finish_run(payload_run("a-0001", payload, later_calls=2))
        store.finish_run(payload_run("b-0001", payload, later_calls=3))  # a replay of the same payload
        assert [d for d, _ in chunk_rows(store)] == [digest_of(payload)]
        written = sql_rows(store, "SELECT {rowid} FROM recording_chunks")
        # Replacing a run by one that still uses the chunk neither deletes nor rewrites it.
        changed = payload_run("a-0001", payload, later_calls=2).model_copy(
            update={"outcome": Outcome(status="failure")})
        store.save_run(changed)
        assert sql_rows(store, "SELECT {rowid} FROM recording_chunks") == written
        assert store.get_run("a-0001") == changed
        store.delete_run("a-0001")
        assert [d for d, _ in chunk_rows(store)] == [digest_of(payload)]  # b-0001 still uses it
        assert store.get_run("b-0001").recording == payload_run("b-0001", payload, later_calls=3).recording
        # Replacing b-0001 by a run with another payload drops the unused chunk.
        store.save_run(payload_run("b-0001", other, later_calls=1))
        assert [d for d, _ in chunk_rows(store)] == [digest_of(other)]
        # A run that starts over under another writer (begin_run) loses its recording and its chunks.
        store.begin_run("b-0001", framework="autogen", task="again", name=None, trace_id=None, started_at=None,
                        writer=_other_writer())
        assert chunk_rows(store) == [] and sql_rows(store, "SELECT COUNT(*) FROM recording_chunk_refs") == [(0,)]
        # A run saved without a recording drops the chunks of the one it replaces.
        store.finish_run(payload_run("c-0001", other, later_calls=1))
        store.save_run(payload_run("c-0001", other, later_calls=1).model_copy(update={"recording": None}))
        assert chunk_rows(store) == []


def _other_writer() -> Any:
    from causaltrace.collector.writers import WriterInfo

    return WriterInfo(pid=1, start_time="0", host="elsewhere")


def test_a_damaged_reference_or_chunk_is_one_error_naming_it(store_target: str) -> None:
    payload = random_text(10_000)
    with Store(store_target) as store:
        store.finish_run(payload_run("bad-0001", payload, later_calls=1))
        sql_rows(store, "UPDATE recording_chunks SET data = '5'")
        with pytest.raises(StoreError, match=f"chunk {digest_of(payload)} is corrupt"):
            store.get_run("bad-0001")
        sql_rows(store, "DELETE FROM recording_chunks")
        with pytest.raises(StoreError, match=f"references the chunk {digest_of(payload)} the store lacks") as err:
            store.get_run("bad-0001")
        assert "bad-0001" in str(err.value) and "recorded call #" in str(err.value)
        sql_rows(store, "UPDATE recordings SET chunks = '{{\"x\": 1}}' WHERE chunks IS NOT NULL")
        with pytest.raises(StoreError, match="chunk references of recorded call #1 are corrupt"):
            store.get_run("bad-0001")


# ----------------------------------------------------------------------------------- a store of schema v2


def _v2_connection(target: str, tmp_path: Path) -> Any:
    """A connection to a fresh store at schema v2 (``?`` placeholders, autocommit), and how to close it."""
    if "://" not in target:
        conn = sqlite3.connect(target, isolation_level=None)
        assert _migrations.migrate(conn, target=2) == [1, 2]
        return conn
    import psycopg

    from causaltrace.collector.store_postgres import PgConnection, PostgresBackend

    conn = PgConnection(psycopg.connect(target, autocommit=True))
    assert _migrations.migrate_postgres(conn, lambda: PostgresBackend.begin_write(conn), target=2) == [1, 2]
    return conn


def write_as_v2(conn: Any, run: Run) -> None:
    """Store ``run`` the way schema v2 did: one whole RecordedCall JSON per ``recordings`` row."""
    conn.execute(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({RUN_PLACEHOLDERS})", (
        run.run_id, run.framework, run.name, run.task, run.trace_id, iso(run.started_at), iso(run.ended_at),
        run.outcome.status, "finished", 1, "0", "elsewhere", int(run.recording is not None), now_iso(),
        run.model_dump_json(exclude={"steps", "recording"}), sort_ts(run.started_at)))
    for s in run.steps:
        conn.execute("INSERT INTO steps (run_id, step_id, idx, kind, agent, status, parent, truncated, data) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (run.run_id, s.step_id, s.index, s.kind, s.agent, s.status, s.parent_step_id, int(s.truncated),
                      s.model_dump_json()))
        for pos, d in enumerate(s.depends_on):
            conn.execute("INSERT INTO dependencies (run_id, consumer, producer, kind, pos) VALUES (?, ?, ?, ?, ?)",
                         (run.run_id, s.step_id, d.step_id, d.kind, pos))
    for seq, c in enumerate(run.recording.calls if run.recording else ()):
        conn.execute("INSERT INTO recordings (run_id, seq, step_id, agent_key, kind, ordinal, request_hash, data) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (run.run_id, seq, c.step_id, c.agent_key, c.kind, c.ordinal, c.request_hash,
                      c.model_dump_json()))


def test_a_v2_store_opens_migrates_and_reads_its_recordings_whole(store_target: str, tmp_path: Path) -> None:
    payload = random_text(30_000)
    old = payload_run("old-0001", payload, later_calls=2)
    conn = _v2_connection(store_target, tmp_path)
    write_as_v2(conn, old)
    conn.close()
    with Store(store_target) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        assert store.get_run("old-0001") == old
        assert chunk_rows(store) == []  # its rows were not rewritten
        assert sql_rows(store, "SELECT COUNT(*) FROM recordings WHERE chunks IS NULL") == [(len(old.recording.calls),)]
        store.save_run(old)  # the same run again: unchanged, nothing rewritten
        assert chunk_rows(store) == []
        store.save_run(old.model_copy(update={"outcome": Outcome(status="failure")}))  # written again: chunked
        assert [d for d, _ in chunk_rows(store)] == [digest_of(payload)]
        assert store.get_run("old-0001").recording == old.recording


def test_a_run_stored_under_v2_replays_from_the_migrated_store(tmp_path: Path) -> None:
    """A real smolagents run stored the old way replays with every model and tool call served from the recording
    (and so does the same run stored the new, chunked way)."""
    pytest.importorskip("smolagents")
    from opentelemetry.sdk.trace import TracerProvider

    import causaltrace
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
    from causaltrace.instrumentation.tracing import reset_tracing
    from causaltrace.replay.executor import replay_sync
    from causaltrace.replay.sandbox import SubprocessSandbox
    from causaltrace.schema import Intervention

    payload = random_text(40_000)
    factory = _reader_factory(payload, notes=2)
    instrument_smolagents(TracerProvider(), TraceConfig(store=False))
    try:
        with causaltrace.run(task="How long is the blob?", verify="40000") as handle:
            factory().run("How long is the blob?")
        live = handle.run
        assert live is not None and live.outcome.status == "success"
        old_db, new_db = str(tmp_path / "v2.db"), str(tmp_path / "v3.db")
        conn = _v2_connection(old_db, tmp_path)
        write_as_v2(conn, live)
        conn.close()
        with Store(new_db) as store:
            store.finish_run(live)
            assert chunk_rows(store)  # the payload is a chunk there
        sandbox = SubprocessSandbox()
        for db in (old_db, new_db):
            with Store(db) as store:
                run = store.get_run(live.run_id)
            assert run.recording == live.recording
            note = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "note")
            result = replay_sync(run, factory, Intervention(step_id=note.step_id, replacement=dict(note.arguments)),
                                 "40000", sandbox=sandbox)
            assert result.divergence is None and result.error is None, (db, result.divergence, result.error)
            assert result.outcome.status == "success" and result.live_calls == 0
            assert result.served_calls == len(run.recording.calls) - 1
    finally:
        uninstrument_smolagents()
        reset_tracing()


def _reader_factory(payload: str, *, notes: int) -> Any:
    """A factory of the payload reader: a ToolCallingAgent on a reactive scripted model that reads the blob, takes
    ``notes`` notes and answers with the blob's length (what ``bench_recording_payloads.py`` runs, at 20 MB)."""
    from smolagents import LogLevel, ToolCallingAgent, tool

    from causaltrace.testing.smolagents import Call, ScriptedModel, ScriptedRequest

    def build() -> Any:
        @tool
        def read_blob() -> str:
            """Read the blob the task is about."""
            return payload

        @tool
        def note(text: str) -> str:
            """Write down a note.

            Args:
                text: the note.
            """
            return f"noted: {text}"

        def policy(request: ScriptedRequest) -> Any:
            seen = request.observations
            if not seen:
                return [Call("read_blob", {})]
            if len(seen) <= notes:
                return [Call("note", {"text": f"part {len(seen)}"})]
            return [Call("final_answer", {"answer": f"{len(payload)} characters"})]

        return ToolCallingAgent(tools=[read_blob, note], model=ScriptedModel(policy), name="reader",
                                max_steps=notes + 3, verbosity_level=LogLevel.OFF)

    return build


# ------------------------------------------------------------------------------- export, import, OTLP


def test_export_import_and_the_otlp_recording_carry_the_whole_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from causaltrace.collector.recording_otlp import RecordingExport, recording_attributes, recording_from_attributes

    payload = random_text(100_000)
    run = payload_run("move-0001", payload, later_calls=3)
    first, second = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with Store(first) as store:
        store.save_run(run)
        stored = store.get_run(run.run_id)
    out = tmp_path / "run.json"
    assert main(["--db", first, "export", run.run_id, "-o", str(out)]) == 0
    assert main(["--db", second, "import", "--format", "otlp-json", str(out)]) == 0
    capsys.readouterr()
    with Store(second) as store:
        assert store.get_run(run.run_id).recording == run.recording
        assert [d for d, _ in chunk_rows(store)] == [digest_of(payload)]
    attrs = recording_attributes(stored.recording, settings=RecordingExport(max_bytes=10**8), chunk_chars=32_000)
    assert recording_from_attributes(attrs) == (run.recording, None)


class _Unhashable(str):
    """A text that fails if it is ever hashed (the splitter keys long texts by identity, never by hash)."""

    def __hash__(self) -> int:
        raise AssertionError("a long text was hashed")


def test_equal_long_texts_of_other_objects_are_one_chunk_and_none_is_hashed(store_target: str) -> None:
    """Python hashes every character of a string the first time it is a dict key (14 ms for a 50 MB tool result):
    the splitter finds a text again by identity, an equal text of another object by a whole compare, and neither
    is ever hashed; the chunk keeps the literal's character count, and SQLite keeps the literal as its UTF-8 bytes
    (not decoded to be written), read back equal."""
    text = random_text(20_000) + "é–\n\"" + random_text(20_000)  # non-ASCII: characters != bytes
    one, other = _Unhashable(text), _Unhashable("".join(text))  # equal, two objects
    assert one is not other
    calls = [RecordedCall.model_construct(agent_key="team/a", kind="tool", ordinal=0, request_hash="0" * 64,
                                          request={"name": "read"}, response=one),
             RecordedCall.model_construct(agent_key="team/a", kind="llm", ordinal=0, request_hash="1" * 64,
                                          request={"messages": [{"content": other}]}, response={"text": one})]
    split = recording_chunks.split_calls("nohash-0001", calls)
    assert list(split.chunks) == [digest_of(text)]
    assert [json.loads(row[-1]) for row in split.rows] == [
        [[digest_of(text), "response"]], [[digest_of(text), "request", "messages", 0, "content"],
                                          [digest_of(text), "response", "text"]]]
    builder = RunBuilder("nohash-0001").task("t", step_id="s0")
    builder.recorded("tool", {"name": "read"}, agent_key="team/a", response=text)
    builder.recorded("llm", {"messages": [{"content": "".join(text)}]}, agent_key="team/a", response={"text": text})
    run = builder.build()
    with Store(store_target) as store:
        store.finish_run(run)
        assert store.get_run(run.run_id).recording == run.recording
        literal = pydantic_core.to_json(text)
        assert chunk_rows(store) == [(digest_of(text), len(literal.decode()))]
        data = sql_rows(store, "SELECT data FROM recording_chunks")[0][0]
        assert (data if isinstance(data, bytes) else data.encode()) == literal
        if store.path is not None:  # SQLite: the bytes as they were written
            assert isinstance(data, bytes)


def test_a_large_string_with_a_lone_surrogate_is_stored_as_the_call_json_would_be(tmp_path: Path) -> None:
    """A lone surrogate (UTF-8 cannot encode it) becomes U+FFFD in a chunk, as in a call's own JSON: never an
    error that would lose the run."""
    broken = random_text(10_000) + "\udcff" + random_text(10_000)
    calls = (  # built by hand: a request hash cannot be computed over such text (the recorder's side handles it)
        RecordedCall(run_id="broken-0001", agent_key="team/a", kind="tool", ordinal=0, request={"name": "read"},
                     request_hash="0" * 64, response=broken, start_order=0),
        RecordedCall(run_id="broken-0001", agent_key="team/a", kind="llm", ordinal=0,
                     request={"messages": [{"content": broken}]}, request_hash="1" * 64, start_order=1),
    )
    run = Run(run_id="broken-0001", recording=Recording(run_id="broken-0001", calls=calls))
    with Store(tmp_path / "s.db") as store:
        store.finish_run(run)
        calls = store.get_run(run.run_id).recording.calls
    fixed = broken.replace("\udcff", "\ufffd")
    assert calls[0].response == fixed and calls[1].request == {"messages": [{"content": fixed}]}


# ------------------------------------------------------------------------------ the live run's memory


def test_a_live_runs_requests_share_one_object_per_long_string() -> None:
    """The recorder keeps one string object for a text every later request carries (a 20 MB tool result was held
    once per request: ~20 MB of RSS per model call), and the hashes are what they are without sharing."""
    pytest.importorskip("smolagents")
    from opentelemetry.sdk.trace import TracerProvider

    import causaltrace
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
    from causaltrace.instrumentation.tracing import reset_tracing
    from causaltrace.recording import request_hash

    payload = random_text(100_000)
    instrument_smolagents(TracerProvider(), TraceConfig(store=False))
    try:
        with causaltrace.run(task="How long is the blob?") as handle:
            _reader_factory(payload, notes=3)().run("How long is the blob?")
    finally:
        uninstrument_smolagents()
        reset_tracing()
    run = handle.run
    assert run is not None and run.recording is not None
    carried = [s for c in run.recording.calls if c.kind == "llm" for s in _strings(c.request) if payload in s]
    assert len(carried) == 4  # the requests after the tool returned (3 notes and the answer)
    assert all(s is carried[0] for s in carried)
    assert all(c.request_hash == request_hash(c.request) for c in run.recording.calls)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_canonical_request_shares_long_strings_without_changing_the_request_or_its_hash() -> None:
    from causaltrace.recording import canonical_request

    text = "ü" + random_text(70_000)
    first = {"messages": [{"role": "tool", "content": text, "tool_call_id": "abc"}], "created_at": 5}
    later = {"messages": [*first["messages"], {"role": "user", "content": "and?"}]}
    shared: dict[str, str] = {}
    alone = [canonical_request(r) for r in (first, later)]
    together = [canonical_request(r, shared=shared) for r in (first, later)]
    assert together == alone  # the same canonical requests and hashes
    assert together[1][0]["messages"][0]["content"] is together[0][0]["messages"][0]["content"]
    assert list(shared) == [text]
    small: dict[str, str] = {}
    canonical_request({"content": "x" * 5000}, shared=small)  # a small request is not looked at
    assert small == {}


def test_a_recording_above_the_export_ceiling_is_measured_not_built() -> None:
    from causaltrace.collector.recording_otlp import RecordingExport, recording_attributes
    from causaltrace.semconv import RECORDING_OMITTED

    payload = "é" + random_text(300_000)  # a two-byte character: bytes, not characters, are counted
    run = payload_run("ceiling-0001", payload, later_calls=3)
    whole = run.recording.model_dump_json().encode()
    attrs = recording_attributes(run.recording, settings=RecordingExport(max_bytes=len(whole) - 1), chunk_chars=100)
    assert attrs == {RECORDING_OMITTED: f"too large: {len(whole)} bytes > {len(whole) - 1}"}
    fits = recording_attributes(run.recording, settings=RecordingExport(max_bytes=len(whole)), chunk_chars=100_000)
    assert "".join(fits["causaltrace.run.recording.chunks"]).encode() == whole
    seen: list[str] = []
    redacted = recording_attributes(run.recording, settings=RecordingExport(max_bytes=10), chunk_chars=100,
                                    redact=lambda key, text: seen.append(text) or "{}")
    assert seen == [whole.decode()] and RECORDING_OMITTED not in redacted  # the callback sees the whole text


# ------------------------------------------------------------------------------------- concurrent writers


def _share_and_delete(target: str, tag: str, payload: str, barrier: Any) -> None:
    """One writer process: 8 runs carrying ``payload``, then its even runs deleted and its run 1 replaced by one
    without the payload — all while the other writers do the same with the same chunk."""
    with Store(target) as store:
        barrier.wait(60)
        for r in range(8):
            store.finish_run(payload_run(f"{tag}-{r}", payload, later_calls=2))
        for r in range(0, 8, 2):
            store.delete_run(f"{tag}-{r}")
        store.save_run(payload_run(f"{tag}-1", random_text(5_000), later_calls=1))


def test_writers_sharing_and_dropping_one_chunk_at_once_keep_it_exactly_while_used(store_target: str) -> None:
    import multiprocessing

    payload = random_text(20_000)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    with Store(store_target):  # the schema exists before the writers race
        pass
    procs = [ctx.Process(target=_share_and_delete, args=(store_target, f"w{i}", payload, barrier)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with Store(store_target) as store:
        left = sorted(r["run_id"] for r in store.list_runs())
        assert left == sorted(f"w{i}-{r}" for i in range(3) for r in (1, 3, 5, 7))
        assert digest_of(payload) in {d for d, _ in chunk_rows(store)}
        assert store.get_run("w2-7").recording == payload_run("w2-7", payload, later_calls=2).recording
        for run_id in left:
            if not run_id.endswith("-1"):
                store.delete_run(run_id)
        assert digest_of(payload) not in {d for d, _ in chunk_rows(store)}  # the last run using it is gone
        for run_id in (f"w{i}-1" for i in range(3)):
            store.delete_run(run_id)
        assert chunk_rows(store) == [] and sql_rows(store, "SELECT COUNT(*) FROM recording_chunk_refs") == [(0,)]


def test_many_chunks_with_text_copy_must_escape_round_trip(store_target: str) -> None:
    """60 distinct chunks (PostgreSQL sends 50 rows or more by COPY) holding what COPY's text format and JSON must
    escape: tabs, newlines, backslashes, quotes, a NUL, non-ASCII."""
    awkward = 'tab\there, a new\nline, a back\\slash, \\N, a "quote", a NUL \x00, ünï ✓ '
    builder = RunBuilder("copy-0001").task("t", step_id="s0")
    texts = [f"{i}: " + awkward * 80 + random_text(200) for i in range(60)]
    for text in texts:
        builder.recorded("tool", {"name": "read"}, agent_key="team/a", response={"text": text, "again": text})
    run = builder.build()
    with Store(store_target) as store:
        store.finish_run(run)
        assert store.get_run(run.run_id) == run
        assert len(chunk_rows(store)) == 60


def test_rows_from_the_calls_given_json_equal_the_rows_serialized_again() -> None:
    """The export's JSON of each call (``split_calls(texts=…)``) becomes the call's row with its long strings'
    literals swapped for their references — the very row serializing the call again with them in place writes: a
    string twice in one call, a non-ASCII one with escapes, one kept as pieces, one that is also a dict key (the
    swap is refused: the row is serialized again)."""
    shared = random_text(5000) + ' "quoted" \\ é 日本 \n'
    inner = random_text(70_000)
    calls = [
        RecordedCall(run_id="r", start_order=0, agent_key="a", kind="llm", ordinal=0, request_hash="h0",
                     request={"messages": [{"role": "system", "content": shared}, {"role": "user", "content": shared}]},
                     response={"content": "ok"}),
        RecordedCall(run_id="r", start_order=1, agent_key="a", kind="llm", ordinal=1, request_hash="h1",
                     request={"messages": [{"role": "tool", "content": inner}]},
                     response={"content": "Observation:\n" + inner + "\nend"}),
        RecordedCall(run_id="r", start_order=2, agent_key="a", kind="tool", ordinal=0, request_hash="h2",
                     request={"args": {shared: 1}, "text": shared}, response="short"),
        RecordedCall(run_id="r", start_order=3, agent_key="a", kind="llm", ordinal=2, request_hash="h3", request={"messages": []},
                     response={"content": "short"}),
    ]
    texts = [call.model_dump_json() for call in calls]
    given = recording_chunks.split_calls("r", calls, texts)
    again = recording_chunks.split_calls("r", calls)
    assert given.rows == again.rows
    assert given.chunks == again.chunks
    assert given.rows[0][-1] is not None and given.rows[0][-2].count(digest_of(shared)) == 2


def test_a_text_every_run_sends_again_is_hashed_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system prompt each run sends (a new string object each run) gets its literal and digest from the earlier
    write (``_recent_chunk``): the same rows and chunks as made anew; a text above ``_RECENT_MAX_CHARS`` is not
    kept, and the oldest entry goes first."""
    made: list[int] = []
    real = recording_chunks.json_literal

    def counted(text: str, **kw: Any) -> Any:
        made.append(len(text))
        return real(text, **kw)

    monkeypatch.setattr(recording_chunks, "json_literal", counted)
    prompt = random_text(9000) + ' "quoted" é \n'
    big = random_text(recording_chunks._RECENT_MAX_CHARS + 10)

    def calls(run_id: str) -> list[RecordedCall]:  # the texts copied: other objects, equal
        return [RecordedCall(run_id=run_id, start_order=0, agent_key="a", kind="llm", ordinal=0, request_hash="h",
                             request={"messages": [{"role": "system", "content": "".join(list(prompt))},
                                                   {"role": "user", "content": "".join(list(big))}]},
                             response={"content": "ok"})]

    first = recording_chunks.split_calls("r", calls("r"))
    assert sorted(made) == [len(prompt), len(big)]
    made.clear()
    second = recording_chunks.split_calls("r", calls("r"))
    assert made == [len(big)]  # the prompt's literal and digest known; the big text made again
    assert second.chunks == first.chunks
    assert second.rows == first.rows
    monkeypatch.setattr(recording_chunks, "_recent", {})
    made.clear()
    assert recording_chunks.split_calls("r", calls("r")).rows == second.rows
    assert sorted(made) == [len(prompt), len(big)]
    for i in range(recording_chunks._RECENT_MAX + 1):  # a full table drops its oldest entry
        recording_chunks._remember_chunk(f"text {i} " * 600, f"d{i}", 1, b"x")
    assert len(recording_chunks._recent) == recording_chunks._RECENT_MAX
    assert recording_chunks._recent_chunk("text 0 " * 600) is None
    assert recording_chunks._recent_chunk(prompt) is None
    assert recording_chunks._recent_chunk("text 1 " * 600) == ("d1", 1, b"x")


def test_a_recording_without_a_long_string_is_its_calls_json_as_given() -> None:
    """No call holds a large string (the JSON of each shorter than CHUNK_MIN_CHARS, or longer from many short
    strings): the rows are the given JSON, the same rows as the calls serialized again, and no chunk."""
    calls = [RecordedCall(run_id="r", start_order=i, agent_key="a", kind="llm", ordinal=i, request_hash=f"h{i}",
                          request={"messages": [{"role": "user", "content": f"{i} " + "x" * 300}] * (1 + 15 * i)},
                          response={"content": "ok"}) for i in range(3)]
    texts = [call.model_dump_json() for call in calls]
    assert len(texts[0]) < recording_chunks.CHUNK_MIN_CHARS <= len(texts[2])
    given = recording_chunks.split_calls("r", calls, texts)
    assert given.rows == recording_chunks.split_calls("r", calls).rows
    assert [row[7] for row in given.rows] == texts and {row[8] for row in given.rows} == {None}
    assert not given.chunks
