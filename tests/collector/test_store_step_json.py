"""A stored step's JSON is pydantic's, byte for byte, whichever way ``store_sql.step_rows`` writes it (orjson from the
step's ``__dict__`` where the two agree, pydantic's serializer elsewhere)."""

from __future__ import annotations

import random
import struct
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from causaltrace.collector import store_sql
from causaltrace.collector.store_sql import step_rows
from causaltrace.instrumentation.steps import construct
from causaltrace.schema import Dependency, Step, StepError, StepSource, TokenUsage

_BASE = Step(step_id="r/1", run_id="r", index=1, kind="llm_response", agent="planner", parent_step_id="r/0",
             depends_on=(Dependency(step_id="r/0", kind="produced_by"),), content="hello",
             inputs={"messages": [{"role": "user", "content": "hi"}]}, outputs={"text": "hello"},
             usage=TokenUsage(input_tokens=3, output_tokens=4), model="m", started_at=datetime(2026, 1, 2, tzinfo=UTC),
             ended_at=datetime(2026, 1, 2, 0, 0, 1, 250000, tzinfo=UTC), status="ok", span_id="00f067aa0ba902b7",
             metadata={"k": 1})


def _data(step: Step) -> str:
    return step_rows(step.run_id, [step], 10**9, utf8=False)[0][8]  # type: ignore[no-any-return]


def _same(step: Step) -> None:
    assert _data(step) == step.model_dump_json()


def _floats() -> list[float]:
    rng = random.Random(35)
    bits = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    scaled = [rng.random() * 10 ** rng.randint(-30, 30) for _ in range(3000)]
    rounded = [round(rng.uniform(-1000, 1000), rng.randint(0, 6)) for _ in range(1000)]
    special = [0.0, -0.0, 1.0, 0.1, 1e15, 1e16, 1e17, 1e21, 1e22, 1e-5, 1e-7, 5e-324, 1.7976931348623157e308,
               float("nan"), float("inf"), float("-inf")]
    return bits + scaled + rounded + special


def test_floats_anywhere_in_a_payload_are_written_as_pydantic_writes_them() -> None:
    values = _floats()
    for start in range(0, len(values), 100):
        chunk = values[start : start + 100]
        _same(_BASE.model_copy(update={"outputs": {"values": chunk}, "metadata": {"first": chunk[0]}}))


@pytest.mark.parametrize("value", [
    2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**30, True, False, None, "", (1, [2, {"a": ()}]),
    "".join(map(chr, range(0, 0xD800, 7))), "".join(map(chr, range(0xE000, 0x110000, 97))), "\u2028\u2029\x7f\ufeff",
    "\ud800 lone surrogate", {"\udfff": 1}, {1: "a non-text key"}, b"bytes", {"nested": {"deep": [[[[[1.5]]]]]}},
])
def test_any_payload_value(value: Any) -> None:
    _same(_BASE.model_copy(update={"outputs": {"v": value}, "inputs": {"v": [value]}}))


@pytest.mark.parametrize("tz", [UTC, None, timezone(timedelta(0)), timezone(timedelta(hours=5, minutes=30)),
                                timezone(timedelta(hours=-8)), timezone(timedelta(seconds=37))])
@pytest.mark.parametrize("micro", [0, 1, 10, 100_000, 123_456, 999_999])
def test_timestamps(tz: timezone | None, micro: int) -> None:
    at = datetime(2026, 12, 7, 18, 5, 3, micro, tzinfo=tz)
    _same(_BASE.model_copy(update={"started_at": at, "ended_at": at}))
    _same(_BASE.model_copy(update={"started_at": None, "ended_at": datetime(1, 1, 1, tzinfo=tz)}))


def test_every_shape_of_a_step() -> None:
    _same(Step(step_id="s", run_id="r", index=0, kind="message"))  # every default
    _same(_BASE)
    _same(_BASE.model_copy(update={"status": "error", "error": StepError(type="ValueError", message="bad \"x\"\n")}))
    _same(_BASE.model_copy(update={"depends_on": (), "usage": None}))
    _same(_BASE.model_copy(update={"depends_on": tuple(Dependency(step_id=f"r/{i}", kind="produced_by")
                                                      for i in range(5))}))
    _same(_BASE.model_copy(update={"tool_name": "add", "arguments": {"a": 1, "b": 2.5}, "call_id": "c1",
                                   "action_signature": "tool|add|{}", "truncated": True}))
    source = StepSource(trace_id="t" * 32, span_id="s" * 16, start_time=datetime(2026, 1, 1, tzinfo=UTC),
                        end_time=datetime(2026, 1, 1, tzinfo=timezone(timedelta(seconds=1))), span_kind="LLM")
    _same(_BASE.model_copy(update={"source": source}))
    _same(_BASE.model_copy(update={"content": "é" * 50 + "\x00\x1f" + "😀"}))


def test_a_step_built_on_the_hot_path_in_its_own_field_order() -> None:
    # build_step keeps the adapters' field order, not the declared one: both writers follow the __dict__
    values = dict(reversed(list(_BASE.__dict__.items())))
    _same(construct(Step, values))


def test_what_orjson_is_not_trusted_with_takes_pydantics_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subclass, a timestamp in a zone whose offset has seconds: not orjson's (it would write the subclass's
    extra fields, or another offset) — pydantic's bytes all the same."""
    used: list[Any] = []

    def dumps(value: Any, **kw: Any) -> bytes:
        used.append(value)
        return store_sql.orjson.dumps(value, **kw)

    monkeypatch.setattr(store_sql, "_dumps", dumps)

    class Mine(Step):
        pass

    mine = Mine.model_validate(_BASE.model_dump())
    assert _data(mine) == _BASE.model_dump_json()
    odd_zone = _BASE.model_copy(update={"started_at": datetime(2026, 1, 1, tzinfo=timezone(timedelta(seconds=37)))})
    _same(odd_zone)
    assert used == []
    _same(_BASE)
    assert len(used) == 1


def test_a_stored_step_reads_back_equal(tmp_path: Any) -> None:
    from causaltrace.collector.store import Store
    from causaltrace.schema import Run

    run = Run(run_id="r", framework="autogen", steps=(_BASE.model_copy(update={"step_id": "r/0", "index": 0,
                                                                               "parent_step_id": None,
                                                                               "depends_on": ()}), _BASE))
    with Store(tmp_path / "s.db") as store:
        store.save_run(run)
        assert store.get_run("r") == run


def test_a_run_rows_json_and_a_chunks_list_are_the_texts_they_were() -> None:
    import json

    from causaltrace.collector.store_sql import refs_json, run_head_json
    from causaltrace.schema import Outcome, Run

    for run in (Run(run_id="r", framework="autogen", task="t é \n", metadata={"roster": {"a": [1.5, None]}},
                    started_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), steps=(_BASE.model_copy(
                        update={"step_id": "r/0", "index": 0, "parent_step_id": None, "depends_on": ()}),),
                    outcome=Outcome(status="success", final_answer="42")),
                Run(run_id="r", framework="x", task="a lone \ud800 surrogate")):
        assert run_head_json(run) == run.model_dump_json(exclude={"steps", "recording"})
    refs = [["ab" * 32, "request", "messages", 0, "content"], [["cd" * 32, "ef" * 32], "arguments", "ñ \"key\"", 1]]
    assert refs_json(refs) == json.dumps(refs, separators=(",", ":"))
