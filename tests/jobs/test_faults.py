"""Issue 16: what a hostile run found — every case ends in one clear line, nothing hung or lost.

Each test runs the real CLI in a subprocess against real parts: a real sqlite MLflow store, a
real TCP port (nothing listening, or a socket that accepts and never answers), a real read-only
store (``chattr +i``: tests run as root, so permission bits would not stop the writes), a real
full disk (``RLIMIT_FSIZE`` in the child, with SIGXFSZ ignored so writes fail with EFBIG as on a
full disk), a real SIGTERM. Each checks the exit code, the message's first line, that no
traceback was printed, and that nothing changed on disk or in the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose

REPO = Path(__file__).resolve().parents[2]
FAST = ("tuning.n_trials=1", "progress=false", "model=mean")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its hash (to show nothing changed)."""
    return {str(p.relative_to(folder)): _sha(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line_error(res, text: str, code: int = 2) -> str:
    """Assert exit ``code``, an ``error:`` first line containing ``text``, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr
    first = res.stderr.strip().splitlines()[0]
    assert first.startswith("error:") and text in first, res.stderr
    return first


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _silent_server():
    """A TCP port on 127.0.0.1 that accepts connections (kernel backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _env(**kw: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for key, value in kw.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run(*args: str, env: dict | None = None, cwd: Path | None = None, preexec=None,
         timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pulse_ml", *args], capture_output=True,
                          text=True, env=env or _env(), cwd=cwd, timeout=timeout,
                          preexec_fn=preexec)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _file_size_limit(limit: int):
    """preexec_fn: writes beyond ``limit`` bytes fail with EFBIG (a full disk, for real)."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.fixture
def registered(trained_home):
    return trained_home(*FAST)


# --- 2. timeouts -----------------------------------------------------------------------------

def test_tracking_server_that_never_answers_fails_within_30_s(small_demo, pulse_home):
    with _silent_server() as port:
        uri = f"http://127.0.0.1:{port}"
        start = time.perf_counter()
        res = _run("train", f"data.path={small_demo}", *FAST,
                   env=_env(MLFLOW_TRACKING_URI=uri), timeout=120)
        elapsed = time.perf_counter() - start
    _one_line_error(res, f"MLflow tracking server {uri} does not answer")
    assert "no answer within 10 s" in res.stderr and "PULSE_TRACKING_TIMEOUT" in res.stderr
    assert elapsed < 30, elapsed  # MLflow alone: minutes of retries with no output


def test_tracking_server_down_fails_fast_and_timeout_is_configurable(small_demo, pulse_home):
    uri = f"http://127.0.0.1:{_free_port()}"
    res = _run("infer", f"data.path={small_demo}", env=_env(MLFLOW_TRACKING_URI=uri))
    _one_line_error(res, f"MLflow tracking server {uri} does not answer")
    assert "refused" in res.stderr.lower()
    res = _run("train", f"data.path={small_demo}", *FAST,
               env=_env(MLFLOW_TRACKING_URI=uri, PULSE_TRACKING_TIMEOUT="abc"))
    _one_line_error(res, "PULSE_TRACKING_TIMEOUT=abc is not a number of seconds")


def test_database_tracking_uri_that_never_answers_fails_within_30_s(small_demo, pulse_home):
    """postgresql:// tracking URIs were neither probed nor bounded (kind "other")."""
    pytest.importorskip("psycopg2", reason="psycopg2-binary comes with .[dev] (the scale extra)")
    with _silent_server() as port:
        uri = f"postgresql+psycopg2://pulse:secret@127.0.0.1:{port}/mlflow"
        start = time.perf_counter()
        res = _run("train", f"data.path={small_demo}", *FAST,
                   env=_env(MLFLOW_TRACKING_URI=uri), timeout=120)
        elapsed = time.perf_counter() - start
    first = _one_line_error(res, "MLflow tracking database postgresql+psycopg2://pulse:***@")
    assert "sent no answer within 10 s" in first and "PULSE_TRACKING_TIMEOUT" in first
    assert "secret" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert elapsed < 30, elapsed


def test_database_tracking_probe_connects_for_real(postgres, monkeypatch):
    """A live PostgreSQL passes the probe; a database that does not exist is one line."""
    from pulse_ml.errors import PulseError
    from pulse_ml.registry import guard

    monkeypatch.setenv("PULSE_TRACKING_TIMEOUT", "5")
    assert guard.check_store(postgres.url("postgres"), explicit=True, write=True).kind \
        == "database"
    with pytest.raises(PulseError, match=r"refused the connection \(.*database \"nope\" does "
                       r"not exist"):
        guard.check_store(postgres.url("nope"), explicit=True, write=True)


def test_optuna_database_that_does_not_answer(small_demo, pulse_home):
    store = pulse_home / "mlruns" / "mlflow.db"
    before = _sha(store)
    url = f"postgresql://user:secret@127.0.0.1:{_free_port()}/optuna"
    res = _run("train", f"data.path={small_demo}", *FAST, f"tuning.storage={url}")
    first = _one_line_error(res, "tuning.storage=postgresql://user:***@127.0.0.1")
    assert "does not answer" in first and "secret" not in res.stderr
    assert _sha(store) == before  # refused before any MLflow run started
    # A server that accepts and never answers: PostgreSQL (psycopg2 comes with .[dev]), then
    # MySQL where pymysql is installed (it is not a dependency).
    drivers = [d for d, module in (("postgresql+psycopg2", "psycopg2"),
                                   ("mysql+pymysql", "pymysql")) if _importable(module)]
    assert drivers and drivers[0] == "postgresql+psycopg2", "psycopg2 missing: pip install .[dev]"
    for driver in drivers:
        with _silent_server() as port:
            start = time.perf_counter()
            res = _run("train", f"data.path={small_demo}", *FAST,
                       f"tuning.storage={driver}://u@127.0.0.1:{port}/db", timeout=120)
            elapsed = time.perf_counter() - start
        first = _one_line_error(res, f"tuning.storage={driver}://u@127.0.0.1:{port}/db")
        # psycopg2's own connect_timeout fires first ("timeout expired"); pymysql's never does
        # and the thread bound says "within 10 s".
        assert "within 10 s" in first or "timeout expired" in first, first
        assert "(now 10 s)" in first or "within 10 s" in first, first
        assert elapsed < 30, elapsed


# --- 3. never touch a foreign store ----------------------------------------------------------

def _foreign_db(path: Path) -> Path:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (name TEXT)")
    con.execute("INSERT INTO people VALUES ('ann')")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("kind,text", [
    ("foreign", "another application's SQLite database (tables: people)"),
    ("not_a_database", "no SQLite header: it is not a database"),
    ("truncated", "truncated: the header says"),
])
def test_store_that_is_not_mlflow_is_refused_untouched(kind, text, small_demo, pulse_home,
                                                       tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    db = folder / "data.db"
    if kind == "foreign":
        _foreign_db(db)
    elif kind == "not_a_database":
        db.write_bytes(np.random.default_rng(0).bytes(3000))
    else:
        good = (pulse_home / "mlruns" / "mlflow.db").read_bytes()
        db.write_bytes(good[: len(good) // 3])
    before = _tree(folder)
    res = _run("train", f"data.path={small_demo}", *FAST,
               env=_env(MLFLOW_TRACKING_URI=f"sqlite:///{db}"))
    first = _one_line_error(res, text)
    assert "left it untouched" in first
    assert _tree(folder) == before  # same bytes, no journal, no lock, no artifacts folder


def test_explicit_store_in_a_missing_folder_is_not_created(small_demo, pulse_home, tmp_path):
    typo = tmp_path / "mlrnus"
    res = _run("train", f"data.path={small_demo}", *FAST,
               env=_env(MLFLOW_TRACKING_URI=f"sqlite:///{typo / 'mlflow.db'}"))
    _one_line_error(res, f"the folder {typo} does not exist")
    assert not typo.exists()


@pytest.mark.parametrize("verb", ["train", "promote"])
def test_read_only_store_is_one_line(verb, small_demo, pulse_home, tmp_path, immutable):
    """MLflow alone printed 77-92 lines of chained tracebacks, then 'failed unexpectedly'."""
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(pulse_home / "mlruns" / "mlflow.db", folder / "mlflow.db")
    before = _tree(folder)
    args = ([f"data.path={small_demo}", *FAST] if verb == "train" else ["version=1"])
    with immutable(folder / "mlflow.db", folder):
        res = _run(verb, *args, env=_env(MLFLOW_TRACKING_URI=f"sqlite:///{folder}/mlflow.db"))
    _one_line_error(res, "the store is read-only")
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert _tree(folder) == before


def test_read_only_store_still_serves_its_model(registered, small_demo, pulse_home, tmp_path,
                                                 immutable):
    store = pulse_home / "mlruns"
    with immutable(store / "mlflow.db", store):
        res = _run("infer", f"data.path={small_demo}", "permutations=200", "log_mlflow=false",
                   f"output={tmp_path / 'out'}")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "effects.json").is_file()


# --- 5. two commands at once on a fresh store ------------------------------------------------

def test_two_trains_at_once_on_a_fresh_store_both_succeed(small_demo, tmp_path):
    """Two processes create the schema, log 8 trials each and register into one sqlite file.

    Both write trial runs, metrics and model versions at the same moments; each must wait
    for the other's write transactions (guard.wait_for_locks), not fail "database is locked".
    """
    store = tmp_path / "fresh"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    env = _env(MLFLOW_TRACKING_URI=uri, PULSE_HOME=str(tmp_path))
    # register=always: under the default (candidates) the later of the two finishes may meet
    # the earlier one's champion and rightly decline to register an equal model.
    cmd = [sys.executable, "-m", "pulse_ml", "train", f"data.path={small_demo}",
           "model=ordinal_logit", "tuning.n_trials=8", "progress=false", "register=always"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    versions = client.search_model_versions("name='pulse-satisfaction'")
    assert sorted(int(v.version) for v in versions) == [1, 2]
    exp = client.get_experiment_by_name("pulse-train")
    families = client.search_runs([exp.experiment_id], "tags.kind = 'family'")
    assert sorted(r.info.status for r in families) == ["FINISHED", "FINISHED"]
    assert {v.run_id for v in versions} == {r.info.run_id for r in families}
    for family in families:
        assert {"cv_mse", "cv_mae", "cv_pearson"} <= set(family.data.metrics)
        assert "best_trial" in family.data.tags and "best_trial" not in family.data.metrics
        trials = client.search_runs(
            [exp.experiment_id], f"tags.kind = 'trial' and tags.mlflow.parentRunId = "
            f"'{family.info.run_id}'")
        assert sorted(int(t.data.tags["trial_number"]) for t in trials) == list(range(8))
        for t in trials:  # every trial complete with its metrics, or pruned with its folds
            assert t.info.status in ("FINISHED", "KILLED"), t.info.status
            assert "objective" in t.data.metrics or "running_cv_mse" in t.data.metrics
            if t.info.status == "FINISHED":
                assert {"cv_mse", "objective"} <= set(t.data.metrics)
            else:  # a pruned trial's partial value must not sort among complete ones
                assert "objective" not in t.data.metrics
    assert (store / "artifacts").is_dir()  # artifacts beside the database


# --- 4. SIGTERM and atomic outputs -----------------------------------------------------------

def test_sigterm_during_train_marks_the_run_killed(small_demo, pulse_home):
    uri = f"sqlite:///{pulse_home / 'mlruns' / 'mlflow.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulse_ml", "train", f"data.path={small_demo}",
         "model=random_forest", "tuning.n_trials=500", "progress=false"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    deadline = time.monotonic() + 120
    running = []
    while not running and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        exp = client.get_experiment_by_name("pulse-train")
        if exp is not None:
            running = client.search_runs([exp.experiment_id],
                                         "tags.kind = 'family' and attributes.status = 'RUNNING'")
    assert running, "the train run never started"
    time.sleep(1.0)  # inside the tuning loop
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (proc.returncode, err[-2000:])
    assert err.strip().splitlines()[-1] == "terminated (SIGTERM)" and "Traceback" not in err
    run = client.get_run(running[0].info.run_id)
    assert run.info.status == "KILLED"
    assert client.search_model_versions("name='pulse-satisfaction'") == []


def _sigterm_when(args: list[str], ready, timeout: float = 180, env: dict | None = None):
    """Start ``pulse-ml <args>``, poll ``ready()`` every 5 ms, send SIGTERM once it is true.

    Returns (returncode, stderr). Fails when the command ended before ``ready()`` held.
    """
    proc = subprocess.Popen([sys.executable, "-m", "pulse_ml", *args], env=env or _env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, \
                ("the command ended (or took too long) before the moment to signal",
                 proc.poll(), proc.stderr.read()[-2000:] if proc.poll() is not None else "")
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=timeout)  # a bound, not a speed check
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):  # always closed: an open one warns later on
            pipe.close()
    return proc.returncode, err


def _running_runs(db: Path, experiment: str) -> list[str]:
    """RUNNING runs of ``experiment``, read straight from the sqlite file (fast, read-only)."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return [row[0] for row in con.execute(
            "SELECT r.run_uuid FROM runs r JOIN experiments e ON r.experiment_id = "
            "e.experiment_id WHERE e.name = ? AND r.status = 'RUNNING'", (experiment,))]
    except sqlite3.OperationalError:  # no such table yet / busy: not ready
        return []
    finally:
        con.close()


def test_sigterm_during_infer_leaves_no_partial_outputs_and_no_running_run(
        registered, small_demo, pulse_home, tmp_path):
    out = tmp_path / "results"
    base = ["infer", f"data.path={small_demo}", "permutations=200", f"output={out}"]
    ok = _run(*base, "log_mlflow=false")
    assert ok.returncode == 0, ok.stderr
    before = _tree(out)
    # 1. SIGTERM while the outputs are being written (the staging folder exists).
    code, err = _sigterm_when([*base, "seed=3", "log_mlflow=false"],
                              lambda: any(p.name.startswith(".partial") for p in out.iterdir()))
    assert code == 143, (code, err[-2000:])
    assert err.strip().splitlines()[-1] == "terminated (SIGTERM)" and "Traceback" not in err
    assert _tree(out) == before  # earlier results intact, staging folder removed
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    # 2. SIGTERM while its MLflow run is being logged: the run ends KILLED/FAILED.
    db = pulse_home / "mlruns" / "mlflow.db"
    seen: list[str] = []

    def logging_run() -> bool:
        seen.extend(_running_runs(db, "pulse-infer"))
        return bool(seen)

    code, err = _sigterm_when([*base, "seed=4", f"output={tmp_path / 'second'}"], logging_run)
    assert code == 143, (code, err[-2000:])
    uri = f"sqlite:///{db}"
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    run = client.get_run(seen[0])
    if run.info.status == "FINISHED":
        # the signal landed after the run's last write (the window is a few ms): then the run
        # must be whole, every effect logged and its files attached (the output folder may
        # still be unpublished: its staged set is discarded); else it ended KILLED/FAILED
        effects = pd.read_csv(out / "effects.csv")  # the same data's rows, from step 1
        assert len([k for k in run.data.metrics if k.endswith(".effect")]) == len(effects)
        assert client.list_artifacts(seen[0])
    else:
        assert run.info.status in ("KILLED", "FAILED")
    exp = client.get_experiment_by_name("pulse-infer")
    assert client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'") == []


def test_full_disk_during_infer_keeps_earlier_results(registered, small_demo, pulse_home,
                                                     tmp_path):
    out = tmp_path / "results"
    ok = _run("infer", f"data.path={small_demo}", "permutations=200", "log_mlflow=false",
              f"output={out}")
    assert ok.returncode == 0, ok.stderr
    before = _tree(out)
    assert (out / "forest.png").stat().st_size > 20_000
    res = _run("infer", f"data.path={small_demo}", "permutations=200", "log_mlflow=false",
               f"output={out}", "seed=3", preexec=_file_size_limit(20_000))
    _one_line_error(res, f"cannot write {out}: file too large")
    assert _tree(out) == before  # no truncated forest.png, no .partial folder
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def _full_disk_keeps(out: Path, first: list[str], again: list[str], limit: int,
                     env: dict | None = None) -> None:
    """Run a verb once (it writes ``out``), then again on a full disk: same files, no partial."""
    ok = _run(*first, env=env)
    assert ok.returncode == 0, ok.stderr
    before = _tree(out)
    assert before and max((out / name).stat().st_size for name in before) > limit, before
    res = _run(*again, env=env, preexec=_file_size_limit(limit))
    _one_line_error(res, "file too large")
    assert f"cannot write {out}" in res.stderr, res.stderr
    assert _tree(out) == before  # nothing truncated or replaced
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_full_disk_during_audit_keeps_earlier_results(registered, small_demo, tmp_path):
    out = tmp_path / "audit"
    args = ["audit", "case_study=plan", f"data.path={small_demo}", "replications=200",
            "split_half.replications=50", "progress=false", "log_mlflow=false",
            f"output={out}"]
    _full_disk_keeps(out, args, [*args, "seed=3"], limit=10_000)


def test_full_disk_during_monitor_keeps_earlier_results(registered, small_demo, tmp_path):
    out = tmp_path / "monitor"
    args = ["monitor", f"data.path={small_demo}", "log_mlflow=false", f"output={out}"]
    _full_disk_keeps(out, args, [*args, "alpha=0.1"], limit=20_000)


def test_full_disk_during_judge_keeps_earlier_judgments(pulse_home, tmp_path):
    from llm_stub import StubLLMServer

    n = 300
    frame = pd.DataFrame({"session_id": [f"s{i}" for i in range(n)],
                          "rating": np.resize([4.0, 2.0, 5.0], n),
                          "transcript": [json.dumps([{"role": "user", "text": f"hi {i}"}])
                                         for i in range(n)]})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    out = tmp_path / "judge"
    server = StubLLMServer().start()
    try:
        args = ["judge", f"data.path={path}", f"judge.api_base={server.url}",
                "judge.retries=0", "progress=false", f"output={out}",
                f"cache_dir={tmp_path / 'cache'}"]
        _full_disk_keeps(out, args, args, limit=4_000)
    finally:
        server.stop()


def _chat_records(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    words = np.array(["fix", "the", "bug", "in", "parser", "please", "tests", "fail", "again"])
    return [{"session_id": f"c{i}", "rating": int(rng.integers(1, 6)),
             "messages": [{"role": "user", "text": " ".join(rng.choice(words, 200))},
                          {"role": "assistant", "text": " ".join(rng.choice(words, 200))}]}
            for i in range(n)]


def test_full_disk_during_extract_keeps_the_earlier_table(tmp_path):
    src = tmp_path / "chats.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in _chat_records(400)) + "\n")
    out = tmp_path / "sessions.parquet"
    pd.DataFrame({"session_id": ["old"], "rating": [3.0]}).to_parquet(out)
    before = _tree(tmp_path)
    res = _run("extract", f"input={src}", f"out={out}", "progress=false",
               env=_env(PULSE_HOME=str(tmp_path)), preexec=_file_size_limit(64_000))
    _one_line_error(res, f"cannot write {out}: file too large")
    assert _tree(tmp_path) == before  # the earlier table is intact, no partial file beside it


def test_full_disk_during_extract_labeler_logs_no_run(pulse_home, tmp_path):
    """The table is written before its MLflow run: a full disk leaves no run without a table.

    The limit (2.5 MB) lets the store (~1.1 MB) grow but not the ~4 MB JSONL table; before,
    the ``label-local`` run was logged, then the table write failed.
    """
    from llm_stub import StubLLMServer

    src = tmp_path / "chats.jsonl"
    records = _chat_records(150)
    for r in records:  # long transcripts: a big table from few LLM calls
        for m in r["messages"]:
            m["text"] = " ".join([m["text"]] * 6)
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "labeled.jsonl"
    uri = f"sqlite:///{pulse_home / 'mlruns' / 'mlflow.db'}"
    server = StubLLMServer().start()
    try:
        res = _run("extract", f"input={src}", f"out={out}", "labeler=local",
                   f"labeler.api_base={server.url}", "labeler.retries=0", "progress=false",
                   f"cache_dir={tmp_path / 'cache'}", preexec=_file_size_limit(2_500_000))
    finally:
        server.stop()
    _one_line_error(res, f"cannot write {out}: file too large")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".partial" in p.name]
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    exp = client.get_experiment_by_name("pulse-judge")
    assert exp is None or client.search_runs([exp.experiment_id]) == []


# --- 6. extract: skipped lines, output formats -----------------------------------------------

def test_extract_skips_only_the_bad_line_and_names_it(tmp_path):
    recs = _chat_records(3)
    lines = [json.dumps(recs[0]), "{not json", json.dumps(recs[1]), "", json.dumps(recs[2])]
    src = tmp_path / "chat.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "t.parquet"
    res = _run("extract", f"input={src}", f"out={out}", "progress=false",
               env=_env(PULSE_HOME=str(tmp_path)))
    assert res.returncode == 0, res.stderr
    assert "extracted 3 session(s)" in res.stdout  # was: 3 records in, 0 out
    assert f"{src}: read 3 session(s), skipped 1 line(s) (2); first: invalid JSON" in res.stdout
    assert len(pd.read_parquet(out)) == 3


def test_extract_writes_the_format_of_its_suffix(tmp_path):
    src = tmp_path / "chat.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in _chat_records(4)) + "\n")
    env = _env(PULSE_HOME=str(tmp_path))
    out = tmp_path / "sessions.jsonl"
    res = _run("extract", f"input={src}", f"out={out}", "progress=false", env=env)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["session_id"] for r in rows] == ["c0", "c1", "c2", "c3"]
    res = _run("validate", f"data.path={out}", "features=progression", env=env)
    assert res.returncode == 0, res.stderr  # was: "unsupported extension" on Parquet bytes
    for bad in ("sessions", "sessions.json"):
        res = _run("extract", f"input={src}", f"out={tmp_path / bad}", "progress=false",
                   env=env)
        _one_line_error(res, "must end in .parquet, .csv or .jsonl")
        assert not (tmp_path / bad).exists()


# --- 1. user mistakes that took the internal-error path --------------------------------------

@pytest.mark.parametrize("verb,override,text", [
    ("train", "tuning.n_trials=abc", "tuning.n_trials='abc' is not a whole number"),
    ("train", "seed=abc", "seed='abc' is not a whole number"),
    ("train", "cv.n_splits=1", "cv.n_splits=1 is out of range"),
    ("train", "tuning.n_trials=-1", "tuning.n_trials=-1 is out of range"),
    ("train", "tuning.n_trials=0", "tuning.n_trials=0 runs no trial"),
    ("plan", "effect=big", "effect='big' is not a number"),
])
def test_bad_overrides_name_their_key(verb, override, text, small_demo, pulse_home):
    store = pulse_home / "mlruns" / "mlflow.db"
    before = _sha(store)
    args = [f"data.path={small_demo}", "progress=false"] if verb == "train" else []
    res = _run(verb, *args, override)
    _one_line_error(res, text)
    assert _sha(store) == before


def test_infinite_count_and_huge_category_are_data_errors(small_demo, tmp_path):
    frame = pd.read_parquet(small_demo)
    frame["user_message_count"] = frame["user_message_count"].astype(float)
    frame.loc[3, "user_message_count"] = np.inf
    frame.loc[5, "task_category"] = "x" * 10_000
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    res = _run("validate", f"data.path={path}")
    _one_line_error(res, "2 problem(s) found")
    assert "column 'user_message_count': infinite values in 1 row(s): row 4" in res.stderr
    assert "(10000 characters)" in res.stderr and len(res.stderr) < 2500


PAPER_CATEGORIES = {
    "fix_bugs": "Fix Bugs", "implement_features": "Implement Features",
    "create_programs_from_scratch": "Create Programs from Scratch",
    "fix_failing_ci": "Fix Failing Continuous Integration",
    "fix_merge_conflicts": "Fix Merge Conflicts", "write_documentation": "Write Documentation",
    "perform_deployments": "Perform Deployments", "perform_data_analysis": "Perform Data Analysis"}
FEATURE_SETS = sorted(p.stem for p in (REPO / "conf" / "features").glob("*.yaml"))


def _paper_table(small_demo, tmp_path) -> Path:
    frame = pd.read_parquet(small_demo)
    frame["task_category"] = frame["task_category"].map(PAPER_CATEGORIES)
    frame["user_sentiment"] = frame["user_sentiment"].str.upper()
    frame["judge_local"] = 3.0  # the all_judge set's columns
    frame["judge_local_missing"] = 0
    path = tmp_path / "paper.parquet"
    frame.to_parquet(path)
    return path


def test_paper_category_names_are_accepted(small_demo, pulse_home, tmp_path):
    res = _run("validate", f"data.path={_paper_table(small_demo, tmp_path)}")
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("name", FEATURE_SETS)
def test_every_feature_set_accepts_the_paper_category_names(name, small_demo, tmp_path):
    """conf/features/all_text.yaml had no aliases: "Fix Failing Continuous Integration" failed."""
    from pulse_ml.settings import load_table

    cfg = compose("validate", [f"data.path={_paper_table(small_demo, tmp_path)}",
                               f"features={name}"])
    table = load_table(cfg)  # raises DataError on an unknown category
    if "task_category" in table.features.names:
        assert sorted(table.frame["task_category"].unique()) == sorted(PAPER_CATEGORIES)
    assert len(FEATURE_SETS) >= 7 and "all_text" in FEATURE_SETS


def test_model_whose_artifacts_were_deleted(registered, small_demo, pulse_home):
    shutil.rmtree(pulse_home / "mlruns" / "artifacts")
    res = _run("infer", f"data.path={small_demo}", "log_mlflow=false")
    first = _one_line_error(res, "is registered, but its files are missing")
    assert "version 1" in first


# --- 9. LLM batches whose every call failed ---------------------------------------------------

def test_judge_whose_calls_all_failed_exits_2(pulse_home, tmp_path):
    frame = pd.DataFrame({"session_id": ["a", "b", "c"], "rating": [4.0, 2.0, 5.0],
                          "transcript": [json.dumps([{"role": "user", "text": "hi"}])] * 3})
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    store = pulse_home / "mlruns" / "mlflow.db"
    before = _sha(store)
    base = f"http://127.0.0.1:{_free_port()}/v1"
    res = _run("judge", f"data.path={path}", f"judge.api_base={base}", "judge.retries=0",
               "progress=false", f"output={tmp_path / 'judge'}", f"cache_dir={tmp_path / 'c'}")
    first = _one_line_error(res, "pulse-ml judge: all 3 LLM call(s) to openai/local-judge")
    assert "3 x " in first and "Nothing was written or logged" in first  # was: exit 0, MSE nan
    assert not (tmp_path / "judge").exists() and _sha(store) == before


def test_extract_labeler_whose_calls_all_failed_exits_2(pulse_home, tmp_path):
    src = tmp_path / "chat.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in _chat_records(2)) + "\n")
    out = tmp_path / "t.parquet"
    base = f"http://127.0.0.1:{_free_port()}/v1"
    res = _run("extract", f"input={src}", f"out={out}", "labeler=local",
               f"labeler.api_base={base}", "labeler.retries=0", "progress=false",
               f"cache_dir={tmp_path / 'c'}")
    _one_line_error(res, "pulse-ml extract labeler=local: all 4 LLM call(s)")
    assert not out.exists()


# --- 7. locations follow the user --------------------------------------------------------------

def test_data_store_and_artifacts_follow_the_user(tmp_path, mlflow_template):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    shutil.copy(mlflow_template, elsewhere / "mlflow.db")
    checkout = _tree(REPO / "mlruns") if (REPO / "mlruns").is_dir() else {}
    env = _env(PULSE_HOME=None, MLFLOW_TRACKING_URI=None, PULSE_ARTIFACT_ROOT=None)
    res = _run("simulate", "n_labeled=400", "unlabeled_ratio=3", "labeled_per_arm=40",
               "min_labeled_per_arm=30", "mc_sessions=20000", env=env, cwd=work)
    assert res.returncode == 0, res.stderr
    assert (work / "data" / "demo" / "sessions.parquet").is_file()  # the cwd, not the checkout
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{elsewhere / 'mlflow.db'}"
    res = _run("train", *FAST, env=env, cwd=work)  # default data.path: ./data/demo
    assert res.returncode == 0, res.stderr
    assert list((elsewhere / "artifacts").rglob("ensemble.joblib"))  # beside the database
    assert not (work / "mlruns").exists()
    now = _tree(REPO / "mlruns") if (REPO / "mlruns").is_dir() else {}
    assert now == checkout
