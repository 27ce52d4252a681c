"""``pulse-ml`` commands forked from a warm interpreter (``tests/support/zygote.py``).

One zygote per pytest worker, started on first use and stopped at exit. :func:`run` has the
contract of ``subprocess.run([python, "-m", "pulse_ml", *args], capture_output=True, text=True)``
(a ``CompletedProcess``, ``subprocess.TimeoutExpired`` after ``timeout``). ``PULSE_TEST_FRESH=1``
makes every command a fresh interpreter instead (the start-up tests always use one).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ZYGOTE = Path(__file__).with_name("zygote.py")


class _Zygote:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": os.environ.get(
            "PYTHONDONTWRITEBYTECODE", "")}
        self.proc = subprocess.Popen([sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, cwd=str(ZYGOTE.parents[2]))
        self.lock = threading.Lock()
        self.ids = itertools.count()
        self.answers: dict[int, dict] = {}
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.cond:
                self.answers.setdefault(msg["id"], {}).update(msg)
                self.cond.notify_all()
        with self.cond:
            self.answers[-1] = {"dead": True}
            self.cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_for(self, rid: int, key: str, deadline: float | None) -> dict | None:
        with self.cond:
            while key not in self.answers.get(rid, {}):
                if -1 in self.answers:
                    raise RuntimeError("the test zygote died")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self.cond.wait(timeout=left if left is not None else 1.0)
            return self.answers[rid]

    def run(self, args: list[str], env: dict[str, str], cwd: str | None,
            timeout: float | None) -> subprocess.CompletedProcess:
        rid = next(self.ids)
        with tempfile.TemporaryDirectory(prefix="pulse-cli-") as tmp:
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            request = {"id": rid, "args": args, "env": env, "cwd": cwd, "out": out, "err": err}
            with self.lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            deadline = None if timeout is None else time.monotonic() + timeout
            started = self.wait_for(rid, "pid", None)
            done = self.wait_for(rid, "code", deadline)
            if done is None:
                os.kill(started["pid"], signal.SIGKILL)
                self.wait_for(rid, "code", None)
                raise subprocess.TimeoutExpired(["pulse-ml", *args], timeout or 0,
                                                Path(out).read_text(errors="replace"),
                                                Path(err).read_text(errors="replace"))
            stdout = Path(out).read_text(encoding="utf-8", errors="replace")
            stderr = Path(err).read_text(encoding="utf-8", errors="replace")
        with self.cond:
            self.answers.pop(rid, None)
        return subprocess.CompletedProcess([sys.executable, "-m", "pulse_ml", *args],
                                           done["code"], stdout, stderr)

    def stop(self) -> None:
        if self.alive():
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_ZYGOTE: _Zygote | None = None
_START = threading.Lock()


def _zygote() -> _Zygote:
    global _ZYGOTE
    with _START:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = _Zygote()
            atexit.register(_ZYGOTE.stop)
        return _ZYGOTE


def run(args: list[str], env: dict[str, str], cwd: str | os.PathLike | None = None,
        timeout: float | None = 300) -> subprocess.CompletedProcess:
    """``pulse-ml *args`` with exactly ``env`` in ``cwd``: a forked child of the warm zygote."""
    if os.environ.get("PULSE_TEST_FRESH") == "1":
        return subprocess.run([sys.executable, "-m", "pulse_ml", *args], capture_output=True,
                              text=True, env=env, cwd=cwd, timeout=timeout)
    return _zygote().run(list(args), dict(env), str(cwd or os.getcwd()), timeout)
