"""Start the MLflow UI on this project's tracking store and print where pulse-train's runs are.

Runs ``mlflow server`` for the store every verb uses (``MLFLOW_TRACKING_URI``, else
``mlruns/mlflow.db`` under the project root) with one worker on 127.0.0.1, on a free port or
``port=``. Once the server answers it prints the address of the ``pulse-train`` runs table
(machine-learning layout, metric columns cv_mse and cv_pearson, sorted by cv_mse) and "ready".
Ctrl-C (or SIGTERM) stops the server and exits 0. ``log=true`` shows the server's own log.

The run addresses that train and infer print point at port 5000: ``pulse-ml ui port=5000``
makes them open.

Example:
    pulse-ml ui
    pulse-ml ui port=5000
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from pulse_ml.config import flag, number
from pulse_ml.errors import PulseError

STOP_WAIT_S = 5.0  # after SIGTERM, the server's process group gets this long before SIGKILL


@dataclass(frozen=True)
class UiSettings:
    """Settings of ``pulse-ml ui``.

    Attributes:
        port: The port on 127.0.0.1, or None for a free one.
        ready_timeout_s: How long to wait for the server to answer.
        log: Echo the server's log lines.
    """

    port: int | None
    ready_timeout_s: float
    log: bool


def settings_from_config(cfg) -> UiSettings:
    """Read and check the ``ui`` config."""
    return UiSettings(
        port=number(cfg, "port", "ui", low=1, high=65535, integer=True, optional=True),
        ready_timeout_s=number(cfg, "ready_timeout_s", "ui", low=0, open_interval=True),
        log=flag(cfg, "log", "ui"))


def pick_port(port: int | None, host: str) -> int:
    """``port`` when it is free on ``host`` (else one clear error), or a free port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port or 0))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PulseError(f"pulse-ml ui: port {port} on {host} is in use (another MLflow "
                                 "UI?). Choose another with port=..., or leave port unset for "
                                 "a free one.") from None
            raise PulseError(f"pulse-ml ui: cannot listen on {host}:{port}: "
                             f"{exc.strerror or exc}") from None
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when pulse-ml itself dies, even by SIGKILL."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Server:
    """The server subprocess, in its own process group, its output kept (last lines)."""

    def __init__(self, argv: list[str], env: dict[str, str], echo: bool) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stopped = False
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, errors="replace", start_new_session=True,
                                     preexec_fn=_die_with_parent if sys.platform == "linux"
                                     else None)
        self._reader = threading.Thread(target=self._read, args=(echo,), daemon=True)
        self._reader.start()

    def _read(self, echo: bool) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.tail.append(line.rstrip())
            if echo:
                print(f"  [mlflow] {line.rstrip()}", file=sys.stderr, flush=True)

    def died(self) -> PulseError:
        """The error for a server that exited by itself: its exit code and last log lines."""
        self._reader.join(timeout=2)
        lines = [t for t in self.tail if t.strip()][-8:]
        shown = "\n".join(f"  | {t}" for t in lines) or "  (no output)"
        return PulseError(f"pulse-ml ui: the MLflow server stopped (exit {self.proc.returncode})."
                          f" Its last lines:\n{shown}")

    def stop(self) -> None:
        """End the server's whole process group: SIGTERM, then SIGKILL after a grace period."""
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(timeout=2)


def _wait_ready(server: Server, base: str, timeout_s: float) -> float:
    from pulse_ml.registry.ui import answers

    start = time.monotonic()
    while not answers(base):
        if server.proc.poll() is not None:
            raise server.died()
        if time.monotonic() - start > timeout_s:
            raise PulseError(f"pulse-ml ui: the MLflow server did not answer at {base} within "
                             f"{timeout_s:g} s (a busy machine? raise ready_timeout_s=...).")
        time.sleep(0.25)
    return time.monotonic() - start


def run(cfg) -> None:
    """Entry point of ``pulse-ml ui``."""
    from pulse_ml.env import signals
    from pulse_ml.registry import ui

    s = settings_from_config(cfg)
    remote = ui.remote_ui()
    if remote is not None:
        print(f"The tracking store is an MLflow server: its UI is {remote}")
        return
    command = ui.server_command(pick_port(s.port, ui.HOST))
    print(f"Starting the MLflow UI for {command.shown_uri} at {command.base} (one worker) ...",
          flush=True)
    server = Server(command.argv, command.env, s.log)
    try:
        waited = _wait_ready(server, command.base, s.ready_timeout_s)
        view = ui.runs_view(command.base)
        if view.experiment_id is None:
            print("No pulse-train experiment yet (run `pulse-ml train` first). Experiments:")
        else:
            print("pulse-train runs" + (" (cv_mse, cv_pearson columns):" if view.columns
                                        else ":"))
        print(f"  {view.url}")
        print("(MLflow 3's experiments list opens the GenAI layout until you pick \"Model "
              "training\" in the sidebar once; the browser remembers it.)")
        print(f"ready: the server answered in {waited:.1f} s. Ctrl-C stops it.", flush=True)
        while server.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(timeout=1.0)
        raise server.died()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (env.signals): the normal way to stop
        with signals.deferred():
            server.stop()
        print("MLflow UI stopped.", flush=True)
    finally:
        with signals.deferred():
            server.stop()
