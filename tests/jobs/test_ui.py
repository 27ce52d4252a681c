"""`pulse-ml ui`: a real MLflow server on a trained store, its runs view, a clean Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pulse_ml import keys

from .conftest import free_port

pytestmark = pytest.mark.slow


def _server_processes(port: int) -> list[str]:
    """Command lines of live processes serving ``port`` (the MLflow server and uvicorn)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if state != "Z" and str(port) in words and any("mlflow" in w or "uvicorn" in w
                                                       for w in words):
            found.append(" ".join(words))
    return found


def _get(url: str, body: dict | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()


def test_ui_serves_the_store_and_stops_cleanly_on_ctrl_c(trained_home):
    result = trained_home("model=mean", "progress=false")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pulse_ml", "ui", f"port={port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ})
    lines: list[str] = []
    try:
        start = time.monotonic()
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("ready"):
                break
        ready_s = time.monotonic() - start
        out = "".join(lines)
        assert lines and lines[-1].startswith("ready"), out + proc.stderr.read()
        print(f"pulse-ml ui: ready after {ready_s:.1f} s")
        base = f"http://127.0.0.1:{port}"
        # the runs view of pulse-train: machine-learning layout, the metric-column view
        url = re.search(rf"{re.escape(base)}/#/experiments/(\d+)/runs\?\S+", out)
        assert url, out
        exp_id = url.group(1)
        assert "workflowType=machine_learning" in url.group(0)
        assert "viewStateShareKey=" in url.group(0)
        assert "LiteLLM" not in out and "litellm" not in out.lower()

        status, kind, html = _get(url.group(0).split("#")[0])
        assert status == 200 and kind.startswith("text/html") and "<html" in html.lower()
        _, _, body = _get(f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name="
                          f"{keys.TRAIN_EXPERIMENT}")
        exp = json.loads(body)["experiment"]
        assert exp["experiment_id"] == exp_id
        tags = {t["key"]: t["value"] for t in exp["tags"]}
        assert tags[keys.EXPERIMENT_KIND] == keys.CLASSIC_ML
        view = json.loads(tags[keys.SHARED_VIEW_PREFIX + "pulse-ml-metrics"])
        assert "metrics.`cv_mse`" in view["selectedColumns"]
        assert "metrics.`cv_pearson`" in view["selectedColumns"]
        _, _, body = _get(f"{base}/ajax-api/2.0/mlflow/runs/search",
                          {"experiment_ids": [exp_id], "max_results": 100})
        runs = {r["info"]["run_id"]: r for r in json.loads(body)["runs"]}
        assert result.run_id in runs
        metrics = {m["key"]: m["value"] for m in runs[result.run_id]["data"]["metrics"]}
        assert keys.CV_MSE in metrics and metrics[keys.CV_MSE] > 0
        assert _server_processes(port)  # the check below would see a live server

        proc.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        rest, err = proc.communicate(timeout=90)  # a loaded CI machine (load 5 on 2 cores)
        print(f"pulse-ml ui: stopped {time.monotonic() - stopped:.1f} s after Ctrl-C")
        assert time.monotonic() - stopped < 30  # SIGTERM, 5 s grace, SIGKILL: never hangs
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "Traceback" not in rest
        assert rest.strip() == "MLflow UI stopped.", rest
        assert err.strip() == "", err
        assert _server_processes(port) == []
        with socket.socket() as sock:  # nobody listens any more
            assert sock.connect_ex(("127.0.0.1", port)) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def test_ui_refuses_a_port_in_use_in_one_line(pulse_home, cli):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        res = cli("ui", f"port={port}")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: pulse-ml ui: port {port} on 127.0.0.1 is in use (another MLflow UI?). Choose "
        "another with port=..., or leave port unset for a free one."]
    assert "Traceback" not in res.stderr
