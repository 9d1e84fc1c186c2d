"""Shared fixtures: a temporary CAUSALTRACE_HOME for every test, the strict-skip rule, the LLM kill switch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WHOWHEN_DIR = Path(os.environ.get("CAUSALTRACE_WHOWHEN_DIR", ROOT.parent / "shared" / "data" / "whowhen"))
STRICT = os.environ.get("CAUSALTRACE_STRICT", "").lower() in {"1", "true", "yes"}


def require(condition: bool, reason: str) -> None:
    """Skip with ``reason`` when ``condition`` is false — or fail under CAUSALTRACE_STRICT=1 (set by .ci/run).

    Only machine facts may skip in CI (no Docker engine, no Go toolchain): those call ``pytest.skip`` directly.
    """
    if condition:
        return
    if STRICT:
        pytest.fail(f"CAUSALTRACE_STRICT=1 and {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def causaltrace_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty CAUSALTRACE_HOME (store, caches), so no test touches ~/.causaltrace."""
    home = tmp_path / "ct-home"
    home.mkdir()
    monkeypatch.setenv("CAUSALTRACE_HOME", str(home))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("CAUSALTRACE_MODEL", raising=False)
    return home


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LLM kill switch: any real model request fails loudly (the loopback local model stays allowed)."""
    monkeypatch.setenv("CAUSALTRACE_ALLOW_MODEL_REQUESTS", "0")


@pytest.fixture
def whowhen_dir() -> Path:
    """The Who&When data (../shared/data/whowhen); skips (fails under strict) when it is absent."""
    require((WHOWHEN_DIR / "Algorithm-Generated").is_dir(), f"Who&When data not found at {WHOWHEN_DIR}")
    return WHOWHEN_DIR


@pytest.fixture
def span_capture():
    """(provider, exporter): a TracerProvider writing to an in-memory exporter — the one span capture the tests share
    (``_builders.capture_spans`` for tests that need a sampler or several)."""
    from _builders import capture_spans

    return capture_spans()


# The PostgreSQL server fixtures (a cluster in a temporary directory; tests/_postgres.py) and the both-backends
# ``store_target`` for every test module.
from _postgres import pg_url, postgres_server, store_target  # noqa: E402, F401
