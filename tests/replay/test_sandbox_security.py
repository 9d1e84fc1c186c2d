"""The sandbox security table (issue 7) in the subprocess sandbox: bubblewrap, and the unshare fallback where the
row holds for it.

Every row is real code run in the real sandbox. The table — each attack, the expected result, the placeholders
and the decisions written down about them — is tests/_sandbox_attacks.py, shared with the container's
(test_sandbox_docker.py). After each row: nothing reached the parent, and no sandboxed process or cgroup of this
process is left (tests/_sandbox_host.py).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _sandbox_attacks import (
    ENV_SECRET,
    REPO,
    Attack,
    attack_params,
    check_contained,
    check_host_untouched,
    fill,
    listening,
    run_watched,
    secret_in_home,
)
from _sandbox_host import kill_leftovers, leftovers
from causaltrace.replay.sandbox import SubprocessSandbox

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def parent_listener() -> Iterator[socket.socket]:
    with listening("127.0.0.1") as listener:
        yield listener


@pytest.fixture
def home_secret() -> Iterator[Path]:
    with secret_in_home() as path:
        yield path


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.mark.parametrize("attack", attack_params(local=True))
def test_attack_is_contained(
    attack: Attack,
    mode: str,
    parent_listener: socket.socket,
    home_secret: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = attack.in_sandbox("bwrap" if mode == "bwrap" else "unshare")
    if row is None:
        return  # documented in the table: this row holds for bubblewrap only
    code, expected = row
    monkeypatch.setenv("CAUSALTRACE_TEST_SECRET", ENV_SECRET)
    prefix = os.path.realpath(sys.base_prefix)
    filled = fill(
        code,
        PORT=parent_listener.getsockname()[1],
        SECRET=home_secret,
        REPO=REPO,
        PREFIX=prefix,
        PARENT_PID=os.getpid(),
    )
    sandbox = SubprocessSandbox(use_bwrap=mode == "bwrap")
    result, elapsed = run_watched(
        lambda: sandbox.run(filled, timeout_s=expected.timeout_s, memory_mb=expected.memory_mb),
        expected,
        kill_leftovers,
    )
    check_contained(
        result, expected, elapsed=elapsed, detail=f"{mode}: {result!r}", stdout=result.stdout.replace(prefix, "PREFIX")
    )

    # nothing reached the parent, and nothing is left behind
    check_host_untouched(parent_listener, home_secret, Path(prefix, "evil"))
    deadline = time.monotonic() + 5
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers() == []
