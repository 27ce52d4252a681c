"""Issue 26, "data lost": a failed command changes nothing, no input or store is ever written.

Every test runs the real CLI in a subprocess against a real sqlite MLflow store. A late failure
is made with ``PULSE_TEST_FAIL_COMMIT_AFTER=1`` (a hook read only by ``pulse_ml.env.staging``: the
command fails after its first output file was put in place, the hardest moment) or for real
(a file-size limit that lets the first output through and stops the second). Each checks that
the earlier outputs and the inputs are byte-identical afterwards and that no hidden staging or
backup folder was left.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.jobs import train

FAST = ("tuning.n_trials=1", "progress=false", "model=mean")
HOOK = "PULSE_TEST_FAIL_COMMIT_AFTER"


def _tree(*roots: Path) -> dict[str, str]:
    """Every file under ``roots`` (or the file itself) with its hash, hidden ones included."""
    out = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in files:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _run(*args: str, env: dict | None = None, preexec=None, timeout: float = 300):
    full = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "pulse_ml", *args], capture_output=True,
                          text=True, env=full, timeout=timeout, preexec_fn=preexec)


def _popen(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pulse_ml", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def _one_line_error(res, text: str, code: int = 2) -> str:
    assert res.returncode == code, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("waiting:")]
    assert lines and lines[0].startswith("error:") and text in lines[0], res.stderr
    return lines[0]


def _no_hidden(*folders: Path) -> None:
    for folder in folders:
        if folder.is_dir():
            left = [p.name for p in folder.iterdir()
                    if p.name.startswith((".partial", ".previous"))]
            assert left == [], left


@pytest.fixture
def registered(trained_home):
    return trained_home(*FAST)


def _chats(path: Path, n: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = np.array(["fix", "the", "bug", "in", "parser", "please", "tests", "fail"])
    recs = [{"session_id": f"c{i}", "rating": int(rng.integers(1, 6)),
             "messages": [{"role": "user", "text": " ".join(rng.choice(words, 30))},
                          {"role": "assistant", "text": " ".join(rng.choice(words, 30))}]}
            for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return path


def _judge_table(path: Path, n: int = 60) -> Path:
    pd.DataFrame({"session_id": [f"s{i}" for i in range(n)],
                  "rating": np.resize([4.0, 2.0, 5.0, 1.0], n),
                  "transcript": [json.dumps([{"role": "user", "text": f"hi {i}"}])
                                 for i in range(n)]}).to_parquet(path)
    return path


# --- 1. all-or-nothing outputs per command ---------------------------------------------------

def _case(verb: str, small_demo: Path, tmp: Path, server_url: str | None):
    """(first args, second args that change the outputs, output locations, inputs)."""
    out = tmp / "out"
    if verb in ("infer", "audit", "monitor"):
        first = {"infer": ["infer", "permutations=200"],
                 "audit": ["audit", "case_study=plan", "replications=100",
                           "split_half.replications=30", "progress=false"],
                 "monitor": ["monitor"]}[verb]
        first = [*first, f"data.path={small_demo}", "log_mlflow=true", f"output={out}"]
        second = [*first, "alpha=0.1"]
        return first, second, [out], [small_demo]
    if verb == "compare":  # a second family run (trained by the test) changes the table
        first = ["compare", f"output={out}"]
        return first, first, [out], []
    if verb == "score":
        first = ["score", f"data.path={small_demo}", f"out={out / 'scores.parquet'}",
                 "progress=false"]
        return first, [*first, "honest=false"], [out], [small_demo]
    if verb == "extract":
        src = _chats(tmp / "chats.jsonl")
        first = ["extract", f"input={src}", f"out={out / 'sessions.parquet'}", "progress=false"]
        return first, [*first, "case_study=other"], [out], [src]
    assert verb == "judge"
    data = _judge_table(tmp / "t.parquet")
    table = tmp / "tables" / "judged.parquet"
    first = ["judge", f"data.path={data}", f"judge.api_base={server_url}", "judge.retries=0",
             "progress=false", f"output={out}", f"table_out={table}", "column=judge_a",
             f"cache_dir={tmp / 'cache'}"]
    return first, [*first[:-2], "column=judge_b", first[-1]], [out, table], [data]


@pytest.mark.parametrize("verb", ["infer", "audit", "monitor", "compare", "score", "extract",
                                  "judge"])
def test_a_command_failing_after_its_first_file_changes_nothing(verb, registered, small_demo,
                                                                 pulse_home, tmp_path):
    from llm_stub import StubLLMServer

    server = StubLLMServer().start() if verb == "judge" else None
    try:
        first, second, outs, inputs = _case(verb, small_demo, tmp_path,
                                            server.url if server else None)
        ok = _run(*first)
        assert ok.returncode == 0, ok.stderr[-3000:]
        if verb == "compare":
            train.run(compose("train", [f"data.path={small_demo}", *FAST, "seed=1"]))
        before, data = _tree(*outs), _tree(*inputs)
        assert before
        res = _run(*second, env={HOOK: "1"})
        _one_line_error(res, f"{HOOK}=1: failure injected after 1 output file")
        assert _tree(*outs) == before  # the earlier set, byte for byte: no mix
        assert _tree(*inputs) == data
        _no_hidden(*[o if o.is_dir() else o.parent for o in outs])
        again = _run(*second)  # the same command without the fault does change them
        assert again.returncode == 0, again.stderr[-3000:]
        assert _tree(*outs) != before
    finally:
        if server is not None:
            server.stop()


def test_judge_whose_second_output_fails_for_real_keeps_both(pulse_home, tmp_path):
    """A real late fault: the judgments CSV fits under the file-size limit, the table does not.

    Before, ``judgments_local.csv`` was replaced and then the table write failed (a mix).
    """
    from llm_stub import StubLLMServer

    data = _judge_table(tmp_path / "t.parquet", n=400)
    big = pd.read_parquet(data).assign(padding=["x" * 400] * 400)
    big.to_parquet(data)
    out, table = tmp_path / "out", tmp_path / "judged.csv"
    server = StubLLMServer().start()
    try:
        args = ["judge", f"data.path={data}", f"judge.api_base={server.url}",
                "judge.retries=0", "progress=false", f"output={out}", f"table_out={table}",
                f"cache_dir={tmp_path / 'cache'}"]
        ok = _run(*args, "column=judge_a")
        assert ok.returncode == 0, ok.stderr[-3000:]
        before = _tree(out, table)
        sizes = sorted(Path(p).stat().st_size for p in before)
        limit = (sizes[0] + sizes[-1]) // 2  # between the judgments and the table
        assert (out / "judgments_local.csv").stat().st_size < limit < table.stat().st_size

        def small_files() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        res = _run(*args, "column=judge_b", "cv.seed=5", preexec=small_files)
    finally:
        server.stop()
    _one_line_error(res, "file too large")
    assert _tree(out, table) == before
    _no_hidden(out, tmp_path)


def _consistent_infer_set(out: Path) -> int:
    """The effects of effects.csv and effects.json are one run's (returns its permutations)."""
    doc = json.loads((out / "effects.json").read_text())
    csv = pd.read_csv(out / "effects.csv")
    assert np.allclose(csv["p_value"].to_numpy(dtype=float),
                       [r["p_value"] for r in doc["effects"]], equal_nan=True)
    return len(doc["effects"])


def test_two_scores_writing_one_out_at_once_both_succeed(registered, small_demo, pulse_home,
                                                         tmp_path):
    """Before: both wrote ``<out>.partial``; one exited 0 leaving an unreadable Parquet file."""
    frame = pd.read_parquet(small_demo)
    big = pd.concat([frame.assign(session_id=frame["session_id"] + f"-{k}") for k in range(8)],
                    ignore_index=True)
    src = tmp_path / "big.parquet"
    big.to_parquet(src)
    out = tmp_path / "scores.parquet"
    procs = [_popen("score", f"data.path={src}", f"out={out}", "progress=false",
                    "chunk_size=500", f"honest={h}") for h in ("true", "false")]
    results = [(p.communicate(timeout=600)[1], p.returncode) for p in procs]
    for err, code in results:
        assert code == 0, err[-3000:]
        assert "Traceback" not in err
    table = pd.read_parquet(out)  # readable, complete: one of the two runs' output
    assert len(table) == len(big) and table["session_id"].tolist() == big["session_id"].tolist()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_two_infers_into_one_output_at_once_leave_one_consistent_set(registered, small_demo,
                                                                    pulse_home, tmp_path):
    out = tmp_path / "out"
    procs = [_popen("infer", f"data.path={small_demo}", "permutations=300", f"seed={s}",
                    "log_mlflow=false", f"output={out}") for s in (1, 2)]
    for p in procs:
        err = p.communicate(timeout=600)[1]
        assert p.returncode == 0, err[-3000:]
    assert _consistent_infer_set(out) > 0
    _no_hidden(out)


# --- 2. never delete or write inside an input or the store -----------------------------------

def test_spark_out_holding_the_input_is_refused_untouched(registered, small_demo, pulse_home,
                                                          tmp_path):
    """Before: ``score engine=spark out=data/demo`` deleted the user's data/demo/."""
    pytest.importorskip("pyspark")
    data = tmp_path / "data" / "demo"
    data.mkdir(parents=True)
    src = data / "sessions.parquet"
    src.write_bytes(small_demo.read_bytes())
    (data / "ground_truth.json").write_text("{}")
    before = _tree(tmp_path / "data")
    for out in (data, tmp_path / "data", src):
        res = _run("score", "engine=spark", f"data.path={src}", f"out={out}", "progress=false")
        _one_line_error(res, "the input data.path=")
        assert _tree(tmp_path / "data") == before


def test_spark_out_folder_not_written_by_pulse_ml_is_never_removed(registered, small_demo,
                                                                   pulse_home, tmp_path):
    """Before: an unrelated file in a Spark out folder was deleted, exit 0 (overwrite mode)."""
    pytest.importorskip("pyspark")
    out = tmp_path / "scores"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = _run("score", "engine=spark", f"data.path={small_demo}", f"out={out}",
               "progress=false")
    _one_line_error(res, "pulse-ml did not write")
    assert (out / "notes.txt").read_text() == "mine" and len(list(out.iterdir())) == 1
    afile = tmp_path / "scores.parquet"
    afile.write_bytes(b"x")
    res = _run("score", "engine=spark", f"data.path={small_demo}", f"out={afile}",
               "progress=false")
    _one_line_error(res, "is an existing file")
    assert afile.read_bytes() == b"x"


@pytest.mark.slow
# A Spark output folder pulse-ml wrote is replaced whole, and only it: checked in
# tests/jobs/test_score_spark.py (after its directory scoring, one JVM start fewer).


@pytest.mark.parametrize("case", ["output_holds_input", "output_is_store",
                                  "output_inside_store", "score_out_is_input",
                                  "judge_table_out_is_input", "extract_out_inside_input"])
def test_outputs_touching_an_input_or_the_store_are_refused_before_any_work(
        case, small_demo, pulse_home, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    src = data / "sessions.parquet"
    src.write_bytes(small_demo.read_bytes())
    store = pulse_home / "mlruns"
    args, text = {
        "output_holds_input": (["infer", f"data.path={src}", f"output={data}"],
                               "contains the input data.path="),
        "output_is_store": (["monitor", f"data.path={src}", f"output={store}"],
                            "the MLflow store"),
        "output_inside_store": (["audit", "case_study=plan", f"data.path={src}",
                                 f"output={store / 'audit'}"],
                                "is inside the MLflow store"),
        "score_out_is_input": (["score", f"data.path={src}", f"out={src}"],
                               "is the input data.path="),
        "judge_table_out_is_input": (["judge", f"data.path={src}", f"table_out={src}",
                                      f"output={tmp_path / 'j'}"], "is the input data.path="),
        "extract_out_inside_input": (["extract", f"input={data}",
                                      f"out={data / 'table.parquet'}"],
                                     "is inside the input input="),
    }[case]
    before = _tree(data, store)
    res = _run(*args)
    _one_line_error(res, text)
    assert _tree(data, store) == before
    assert not (tmp_path / "j").exists()


# --- 3. a file where a folder is expected, a folder where a file is --------------------------

@pytest.mark.parametrize("verb,setting,kind", [
    ("score", "out", "folder"), ("extract", "out", "folder"),
    ("infer", "output", "file"), ("monitor", "output", "file"), ("judge", "output", "file")])
def test_existing_path_of_the_other_kind_is_one_line(verb, setting, kind, small_demo,
                                                     pulse_home, tmp_path):
    target = tmp_path / ("target.parquet" if setting == "out" else "target")
    if kind == "folder":
        target.mkdir()
        (target / "keep.txt").write_text("keep")
    else:
        target.write_text("keep")
    data = _chats(tmp_path / "chats.jsonl") if verb == "extract" else small_demo
    key = "input" if verb == "extract" else "data.path"
    before = _tree(target)
    quiet = ["progress=false"] if verb in ("score", "extract", "judge") else []
    res = _run(verb, f"{key}={data}", f"{setting}={target}", *quiet)
    first = _one_line_error(res, f"{setting}={target} is an existing {kind}")
    assert len(first) < 400
    assert _tree(target) == before
