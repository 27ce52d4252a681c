"""Passwords in URIs and key=value text are masked (pulse_ml/redact.py)."""

from __future__ import annotations

import io

import pytest

from pulse_ml.redact import RedactingStream, redact_text, redact_uri


@pytest.mark.parametrize("uri,shown", [
    ("postgresql://u:hunter2@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://u@h/db?password=hunter2", "postgresql://u@h/db?password=***"),
    ("postgresql://u@h/db?sslmode=require&sslpassword=hunter2&application_name=x",
     "postgresql://u@h/db?sslmode=require&sslpassword=***&application_name=x"),
    ("http://u:hunter2@mlflow.example:5000/", "http://u:***@mlflow.example:5000/"),
    ("https://h/?token=hunter2", "https://h/?token=***"),
    ("mysql://u:hun%40ter2@h/db", "mysql://u:***@h/db"),
    ("postgresql://u:p@ss/w@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:hunter2@[::1/db", "postgresql://u:***@[::1/db"),
    ("sqlite:////abs/optuna.db?password=hunter2", "sqlite:////abs/optuna.db?password=***"),
    ("sqlite:////abs/mlflow.db", "sqlite:////abs/mlflow.db"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
])
def test_redact_uri(uri, shown):
    assert redact_uri(uri) == shown


def test_redact_text_keeps_what_is_no_secret():
    text = ("tuning.storage=postgresql://u@h/db?password=hunter2: the server does not answer; "
            "DSN host=h password='a b' user=u; max_tokens=600 api_key_env=OPENAI_API_KEY; "
            "password authentication failed for user \"u\"; run http://127.0.0.1:5000/#/x")
    out = redact_text(text)
    assert "hunter2" not in out and "a b" not in out
    assert "db?password=***: the server" in out and "max_tokens=600" in out
    assert "api_key_env=OPENAI_API_KEY" in out and "http://127.0.0.1:5000/#/x" in out
    assert "password authentication failed" in out


def test_stream_masks_what_passes_through():
    buf = io.StringIO()
    RedactingStream(buf).write("see postgresql://u:hunter2@h/db\n")
    assert buf.getvalue() == "see postgresql://u:***@h/db\n"
