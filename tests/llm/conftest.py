"""Shared fixtures: a scripted OpenAI-compatible server and a per-test MLflow sqlite store."""

from __future__ import annotations

import shutil

import pytest
from llm_stub import StubLLMServer

from pulse_ml.llm.config import LLMConfig


@pytest.fixture
def stub_server():
    """A started stub server (canned answers per prompt type); stopped after the test."""
    server = StubLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def make_cfg(stub_server):
    """Factory of LLMConfig pointing at the stub server with fast backoff."""

    def make(**kw) -> LLMConfig:
        base = dict(name="stub", model="openai/stub-model", api_base=stub_server.url,
                    api_key_env=None, concurrency=4, timeout=5.0, retries=2,
                    temperature=0.0, backoff_base=0.01, backoff_max=0.05, seed=0,
                    price_in_per_1k=0.001, price_out_per_1k=0.002)
        base.update(kw)
        return LLMConfig(**base)

    return make


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch, mlflow_template) -> str:
    """A fresh MLflow store in ``tmp_path`` (copied from tests/conftest.py's template); returns
    its URI."""
    db = tmp_path / "mlflow.db"
    shutil.copy(mlflow_template, db)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("PULSE_HOME", str(tmp_path))
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    return uri
