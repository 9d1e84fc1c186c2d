"""An output the CLI cannot write is one line and exit 2 (issue 36 item 6: an ASCII-only, closed or full stdout was
an internal error): the helpers of ``causaltrace.report.terminal`` — ``prepare_output`` before a command,
``output_error`` for what a command raised writing, ``finish_output`` after it — around real commands in a child
process whose stdout is ``/dev/full``, closed, or ASCII-only. (The CLI's entry point, ``cli/__init__.py``, wires
them in; this child does what it does.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample_run.otlp.jsonl"

_ENTRY = """
import sys
from causaltrace.report.terminal import finish_output, output_error, prepare_output
prepare_output()
from causaltrace.cli import build_parser
args = build_parser().parse_args(sys.argv[1:])
try:
    code = args.func(args)
except OSError as exc:
    why = output_error(exc)
    if why is None:
        raise
    print(f"causaltrace: error: {why}", file=sys.stderr)
    sys.exit(2)
why = finish_output()
if why:
    print(f"causaltrace: error: {why}", file=sys.stderr)
    code = 2
sys.exit(code)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    home = tmp_path_factory.mktemp("streams")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CAUSALTRACE_", "PYTHONIOENCODING"))}
    env.update(PYTHONPATH=str(ROOT / "src"), CAUSALTRACE_HOME=str(home))
    done = subprocess.run([sys.executable, "-c", _ENTRY, "import", str(SAMPLE), "--format", "otlp-json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env, done.stdout.split()[0]


@pytest.mark.parametrize("argv", [["runs"], ["show", "RUN"], ["export", "RUN"], ["runs", "--json"]], ids=" ".join)
def test_a_full_stdout_is_one_line_and_exit_2(store: tuple[dict[str, str], str], argv: list[str]) -> None:
    env, run_id = store
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-c", _ENTRY, *[a.replace("RUN", run_id) for a in argv]], env=env,
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and lines == ["causaltrace: error: cannot write the output: No space left on device"]


def test_a_closed_stdout_and_an_ascii_only_one_write_what_they_can(store: tuple[dict[str, str], str]) -> None:
    env, run_id = store
    closed = subprocess.run([sys.executable, "-c", _ENTRY, "show", run_id], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, timeout=60, close_fds=True,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 0 and closed.stderr == ""
    ascii_only = subprocess.run([sys.executable, "-c", _ENTRY, "show", run_id], env={**env, "PYTHONIOENCODING": "ascii"},
                                capture_output=True, timeout=60)
    assert ascii_only.returncode == 0 and ascii_only.stderr == b""
    assert b"\\u" in ascii_only.stdout or b"\\x" in ascii_only.stdout  # the non-ASCII characters, escaped
    ascii_only.stdout.decode("ascii")
