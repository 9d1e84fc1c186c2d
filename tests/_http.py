"""Test helper: an HTTP server on a free loopback port, for the tests that play a trace server (Jaeger, Phoenix).

    from _http import serving

    with serving(MyHandler) as url:   # "http://127.0.0.1:PORT"; stopped (and its thread joined) at the end
        ...
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["serving"]


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served by a threading HTTP server on 127.0.0.1 (a free port) while the block runs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
