"""Test teams for the terminal tests (tests/test_cli_terminal.py), loaded by the CLI as ``--factory
tests/_terminal_teams.py:NAME``.

``build_stuck`` is the smolagents demo team whose managed agent's tool never returns (it prints, then sleeps for an
hour): a replay that reaches it hangs in its worker thread, its sandboxed code waiting on the managed agent — what a
SIGINT must stop without joining. The tool keeps the name, signature and docstring of the recorded one, so the
replayed requests match the recording up to the corrected step.

``verify_in_docker`` is a verifier that checks the outcome in a Docker sandbox container which never finishes (the
engine and image from ``$DOCKER_HOST`` / ``$CAUSALTRACE_DOCKER_IMAGE``): a container a SIGINT must remove.
"""

from __future__ import annotations

import time
from typing import Any


def build_stuck() -> Any:
    """The failing smolagents demo team, its ``sum_of_powers`` tool stuck."""
    from smolagents import tool

    from causaltrace.demo import smolagents_team

    team = smolagents_team.build()

    @tool
    def sum_of_powers(numbers: list, power: int) -> int:
        """Add up each number raised to a power.

        Args:
            numbers: the integers to raise and add.
            power: the exponent (2 for squares, 3 for cubes).
        """
        print("stuck tool: waiting for an hour", flush=True)
        time.sleep(3600)
        return 0

    team.managed_agents["math_agent"].tools["sum_of_powers"] = sum_of_powers
    return team


def verify_in_docker(outcome: Any) -> bool:
    """Judge the outcome in a Docker sandbox container that sleeps for an hour (never returns in a test)."""
    from causaltrace.replay.sandbox import DockerSandbox

    print("docker verifier: starting its container", flush=True)
    DockerSandbox().run("import time\ntime.sleep(3600)\n", timeout_s=3600, memory_mb=256)
    return False
