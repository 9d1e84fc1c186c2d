"""The replay output capture (replay/concurrency.py, issue 33 item 1): it never wraps a live display's proxy (the
two wrote into each other for ever: ``causaltrace demo`` froze in a terminal), a replay's thread that outlives its
search keeps writing to the replay's buffer and never to the terminal, and a stop starts no further replay."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from rich.console import Console

from causaltrace.replay import concurrency
from causaltrace.replay.concurrency import in_order, on_interrupt, routed_output, save_interrupted


def _in_thread(body, timeout_s: float = 10.0) -> None:
    """``body()`` in a daemon thread, failing the test (not hanging it) when it does not finish in time."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), "the writes never finished: the capture and the display write into each other"
    if errors:
        raise errors[0]


def test_a_live_status_and_the_capture_never_write_into_each_other(capsys):
    console = Console(force_terminal=True, width=80)  # no fixed file: it writes to whatever sys.stdout is

    def body() -> None:
        with console.status("repairing"):  # rich replaces sys.stdout / sys.stderr by its proxy
            with routed_output() as router:
                console.print("progress line")  # the search's own line, through the proxy's console
                print("search print")
                with router.replay() as buffer:
                    print("replay print")
            console.print("after the search")
        assert buffer.getvalue() == "replay print\n"

    _in_thread(body)
    out = capsys.readouterr().out
    assert "progress line" in out and "search print" in out and "after the search" in out
    assert "replay print" not in out


def test_a_replay_thread_that_outlives_its_search_writes_to_the_replay_never_the_terminal(capsys):
    release = threading.Event()
    started = threading.Event()

    def late_replay() -> None:  # a replay's worker thread (asyncio.to_thread copies the replay's context)
        started.set()
        release.wait(5)
        print("late replay line")

    def framework_worker() -> None:  # a thread a framework started: no replay context
        print("worker line during the search")
        release.wait(5)
        print("worker line after the search")

    with routed_output() as router:
        with router.replay() as buffer:
            replay_thread = threading.Thread(target=contextvars.copy_context().run, args=(late_replay,))
            replay_thread.start()
            worker = threading.Thread(target=framework_worker)
            worker.start()
            started.wait(5)
    print("the search is over")
    release.set()
    replay_thread.join(5)
    worker.join(5)
    later = threading.Thread(target=print, args=("a later thread's line",))  # may reuse the worker's ident
    later.start()
    later.join(5)
    out = capsys.readouterr().out
    assert "late replay line" in buffer.getvalue()
    assert "worker line during the search" in buffer.getvalue()  # the one replay running took it
    assert "worker line after the search" in router.unattributed.getvalue()
    assert out == "the search is over\na later thread's line\n"


def test_a_stop_starts_no_further_replay_and_runs_what_the_search_registered(monkeypatch):
    monkeypatch.setattr(concurrency, "_STOP", threading.Event())
    started: list[int] = []

    def start(i: int):
        async def replay() -> int:
            started.append(i)
            if i == 1:
                concurrency.request_stop()  # Ctrl-C while replay 1 runs
            await asyncio.sleep(0)
            return i

        return replay

    async def consume() -> list[int]:
        return [r async for r in in_order([start(i) for i in range(6)], 2)]

    assert asyncio.run(consume()) == [0, 1]  # what was in flight finishes; nothing starts after the stop
    assert started == [0, 1] and concurrency.stop_requested()
    saved: list[str] = []
    with on_interrupt(lambda: saved.append("outer")), on_interrupt(lambda: saved.append("inner")):
        assert save_interrupted() == 2
    assert saved == ["inner", "outer"] and save_interrupted() == 0
