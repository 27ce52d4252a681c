"""A tracking server that rejects the credentials vs one that does not answer: told apart."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pulse_ml.errors import PulseError
from pulse_ml.registry.http_probe import probe_http


class _Locked(BaseHTTPRequestHandler):
    """An MLflow-like server behind basic auth: /health is open, the API wants a login."""

    def do_GET(self):  # noqa: N802 - http.server API
        ok = self.path == "/health" or self.headers.get("Authorization") == "Basic dTpnb29k"
        body = b'{"experiments": []}' if ok else b"Unauthorized"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def locked_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Locked)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_rejected_credentials_are_not_a_dead_server(locked_server, monkeypatch):
    for var in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(PulseError, match="answers but refuses access .*no credentials"):
        probe_http(locked_server, 5)
    wrong = locked_server.replace("http://", "http://u:bad@")
    with pytest.raises(PulseError, match=r"http://u:\*\*\*@127.*refuses access .*credentials "
                                         "given") as info:
        probe_http(wrong, 5)
    assert "bad" not in str(info.value)
    probe_http(locked_server.replace("http://", "http://u:good@"), 5)  # accepted
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "u")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "good")
    probe_http(locked_server, 5)


def test_dead_server_does_not_answer():
    with pytest.raises(PulseError, match="does not answer"):
        probe_http(f"http://127.0.0.1:{_closed_port()}", 3)


@pytest.mark.slow
def test_cli_says_which(locked_server, tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": locked_server, "PULSE_HOME": str(tmp_path)}
    for var in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        env.pop(var, None)
    res = subprocess.run([sys.executable, "-m", "pulse_ml", "compare"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 2 and "answers but refuses access (HTTP 401" in res.stderr
    assert "does not answer" not in res.stderr and "Traceback" not in res.stderr
