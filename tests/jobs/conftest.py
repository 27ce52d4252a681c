"""Throw-away servers for the scale-out tests: PostgreSQL 15 and an MLflow tracking server.

``postgres`` starts a PostgreSQL server with the system's ``initdb``/``pg_ctl`` in a temporary
directory on 127.0.0.1 and a free port (trust authentication, no password). PostgreSQL refuses
to run as root and CI runs as root: then the server runs as the unprivileged ``postgres`` user
through ``runuser``. Tests skip (with the reason) only where the binaries are absent; a server
that is present but does not start fails the test. ``mlflow_server`` starts ``mlflow server``
on that PostgreSQL with a local artifact root. Both are session-scoped and stopped at the end.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<v>/bin`` (Debian), else ``initdb`` on the PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


@dataclass(frozen=True)
class Postgres:
    """A running throw-away PostgreSQL server."""

    host: str
    port: int
    user: str
    bin: Path
    run_as: tuple[str, ...]

    def url(self, database: str, driver: str = "postgresql+psycopg2") -> str:
        return f"{driver}://{self.user}@{self.host}:{self.port}/{database}"

    def createdb(self, name: str) -> str:
        """Create database ``name``; returns its SQLAlchemy URL."""
        import psycopg2

        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user,
                                dbname="postgres", connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (``Postgres``); skips where PostgreSQL is absent."""
    pytest.importorskip("psycopg2", reason="psycopg2-binary is missing: pip install "
                        "'pulse-ml[scale]' (CI installs it through .[dev])")
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install "
                    "postgresql (Debian: apt-get install postgresql)")
    root = os.geteuid() == 0
    run_as: tuple[str, ...] = ("runuser", "-u", "postgres", "--") if root else ()
    tmp = Path(tempfile.mkdtemp(prefix="pulse-pg-"))
    data = tmp / "data"
    if root:
        os.chmod(tmp, 0o755)
        shutil.chown(tmp, user="postgres")
    user = "postgres" if root else os.environ.get("USER", "postgres")
    port = free_port()
    subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(data), "-U", user,
                    "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                   capture_output=True, timeout=120)
    opts = f"-h 127.0.0.1 -p {port} -k {tmp} -c fsync=off -c max_connections=200"
    subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l",
                    str(tmp / "server.log"), "-w", "-t", "60", "start"], check=True,
                   capture_output=True, timeout=90)
    try:
        yield Postgres("127.0.0.1", port, user, bindir, run_as)
    finally:
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class MlflowServer:
    """A running ``mlflow server`` (PostgreSQL backend, local artifact root)."""

    uri: str
    artifacts: Path


@pytest.fixture(scope="session")
def mlflow_server(postgres, tmp_path_factory):
    """``mlflow server`` on the session's PostgreSQL and a free port, stopped at the end."""
    backend = postgres.createdb("mlflow")
    artifacts = tmp_path_factory.mktemp("mlflow-artifacts")
    port = free_port()
    log = open(artifacts.parent / "mlflow-server.log", "w")  # noqa: SIM115 - closed below
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                             backend, "--artifacts-destination", str(artifacts),
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.flush()
                raise RuntimeError("mlflow server exited:\n"
                                   + (artifacts.parent / "mlflow-server.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("mlflow server did not answer /health within 120 s")
            time.sleep(0.5)
        yield MlflowServer(uri, artifacts)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
        log.close()


@contextlib.contextmanager
def _chattr_immutable(*paths: Path):
    """``chattr +i`` (root cannot write either); skip the test when the file system refuses."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available: cannot make a store read-only for root")
    done = []
    try:
        for p in paths:
            res = subprocess.run(["chattr", "+i", str(p)], capture_output=True, text=True)
            if res.returncode != 0:
                pytest.skip(f"chattr +i is not supported here ({res.stderr.strip()})")
            done.append(p)
        yield
    finally:
        for p in reversed(done):
            subprocess.run(["chattr", "-i", str(p)], capture_output=True)


@pytest.fixture
def immutable():
    """A context manager making files and folders immutable for the block (a read-only store)."""
    return _chattr_immutable
