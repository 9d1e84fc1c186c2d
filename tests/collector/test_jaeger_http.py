"""The Jaeger client's HTTP behaviour (issue 24 "Bad input"): a bounded retry of refused / reset connections and
HTTP 5xx, no retry of a timeout, and one clear line when it gives up — against real local HTTP servers."""

from __future__ import annotations

import http.server
import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from _builders import RunBuilder
from _http import serving
from causaltrace.collector.jaeger import DEFAULT_RETRIES, pull_from_jaeger, query_jaeger_traces
from causaltrace.collector.otlp import run_to_otlp
from causaltrace.exceptions import UserError

TRACE = "ab" * 16


def _run() -> Any:
    return RunBuilder("run-http").task("add 2 and 3").llm("solver", "5").build(trace_id=TRACE)


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each GET with the next (status, body) of ``script`` (the last one repeats); ``hang`` seconds of
    silence first, or ``reset`` to drop the connection without an answer."""

    script: list[tuple[int, str]] = []
    hits: list[str] = []
    hang: float = 0.0
    reset_first: int = 0

    def do_GET(self) -> None:
        cls = type(self)
        cls.hits.append(self.path)
        if len(cls.hits) <= cls.reset_first:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if cls.hang:
            time.sleep(cls.hang)
        status, body = cls.script[min(len(cls.hits) - 1 - cls.reset_first, len(cls.script) - 1)]
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def scripted(*script: tuple[int, str], hang: float = 0.0, reset_first: int = 0) -> Iterator[str]:
    _Scripted.script, _Scripted.hits, _Scripted.hang, _Scripted.reset_first = list(script), [], hang, reset_first
    with serving(_Scripted) as url:
        yield url


def test_a_passing_503_is_retried_and_the_run_comes_back() -> None:
    run = _run()
    with scripted((503, "busy"), (200, json.dumps({"result": run_to_otlp(run)}))) as url:
        assert pull_from_jaeger(TRACE, url) == [run]
    assert len(_Scripted.hits) == 2


def test_a_lasting_500_is_one_line_after_the_bounded_retries() -> None:
    with scripted((500, '{"error":{"message":"search depth must be greater than 0"}}')) as url:
        started = time.monotonic()
        with pytest.raises(UserError) as info:
            query_jaeger_traces(url, "causaltrace", "2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z")
        elapsed = time.monotonic() - started
    message = str(info.value)
    assert message.startswith(f"Jaeger at {url} answered HTTP 500 Internal Server Error for ")
    assert "search depth must be greater than 0" in message and "\n" not in message
    assert len(_Scripted.hits) == 1 + DEFAULT_RETRIES
    assert elapsed < 3


def test_retries_zero_tries_once_and_a_400_is_never_retried() -> None:
    with scripted((503, "busy")) as url, pytest.raises(UserError, match="answered HTTP 503"):
        pull_from_jaeger(TRACE, url, retries=0)
    assert len(_Scripted.hits) == 1
    with scripted((400, "bad query")) as url, pytest.raises(UserError, match="answered HTTP 400 Bad Request"):
        pull_from_jaeger(TRACE, url)
    assert len(_Scripted.hits) == 1


def test_a_jaeger_that_never_answers_is_one_line_within_the_timeout_not_retried() -> None:
    with scripted((200, "{}"), hang=5) as url:
        started = time.monotonic()
        with pytest.raises(UserError) as info:
            pull_from_jaeger(TRACE, url, timeout_s=0.5)
        elapsed = time.monotonic() - started
        hits = len(_Scripted.hits)
    assert str(info.value) == f"cannot reach Jaeger at {url}: no answer within 0.5 s"
    assert hits == 1 and elapsed < 2.5


def test_a_connection_reset_mid_request_is_retried() -> None:
    run = _run()
    with scripted((200, json.dumps({"result": run_to_otlp(run)})), reset_first=1) as url:
        assert pull_from_jaeger(TRACE, url) == [run]
    assert len(_Scripted.hits) == 2


def test_a_refused_connection_gives_up_after_the_retries() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(UserError) as info:
        pull_from_jaeger(TRACE, f"http://127.0.0.1:{port}", timeout_s=1)
    assert str(info.value) == f"cannot reach Jaeger at http://127.0.0.1:{port}: Connection refused"
    assert 0.7 <= time.monotonic() - started < 3  # the 0.25 s + 0.5 s back-off between the tries


@pytest.mark.parametrize(("script", "hang", "words"), [
    ([(500, "internal error")], 0.0, "answered HTTP 500 Internal Server Error"),
    ([(200, "{}")], 5.0, "no answer within 0.5 s"),
    ([(200, "<html>not json</html>")], 0.0, "with invalid JSON"),
])
def test_pull_from_a_failing_jaeger_is_one_line_exit_2_and_stores_nothing(capsys, tmp_path, script, hang, words):
    """The CLI over the same servers: ``causaltrace pull`` says why in one line, exit 2, and writes no store."""
    from causaltrace.cli import main

    db = tmp_path / "store.db"
    with scripted(*script, hang=hang) as url:
        code = main(["--db", str(db), "pull", TRACE, "--jaeger", url, "--timeout", "0.5"])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not db.exists()
