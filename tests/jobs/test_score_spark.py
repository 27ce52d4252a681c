"""`pulse-ml score engine=spark` (mlflow.pyfunc.spark_udf, Spark local mode) equals engine=local."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pulse_ml.simulate.generator import simulate
from pulse_ml.simulate.spec import SimulateSettings

pytest.importorskip("pyspark", reason="pyspark is missing: pip install 'pulse-ml[scale]' "
                    "(CI installs it through .[dev])")


def test_spark_scores_equal_local_scores_row_by_row(small_demo, pulse_home, cli, trained_home):
    trained = trained_home("model=lightgbm", "tuning.n_trials=1", "progress=false")
    assert trained.promoted
    # 10^5 sessions: the training table (its labeled sessions have OOF predictions) plus
    # unlabeled sessions of another simulation under new ids
    base = pd.read_parquet(small_demo)
    extra = simulate(SimulateSettings(seed=11, n_labeled=1000, unlabeled_ratio=96.0,
                                      mc_sessions=20_000)).sessions
    extra = extra.assign(session_id="x-" + extra["session_id"].astype(str), rating=np.nan)
    table = pd.concat([base, extra.iloc[:100_000 - len(base)]], ignore_index=True)
    assert len(table) == 100_000
    src = pulse_home / "big.parquet"
    table.to_parquet(src, index=False, row_group_size=25_000)

    local, spark = pulse_home / "local.parquet", pulse_home / "spark.parquet"
    res = cli("score", f"data.path={src}", f"out={local}", "progress=false")
    assert res.returncode == 0, res.stdout + res.stderr
    res = cli("score", "engine=spark", "spark_master='local[2]'", f"data.path={src}",
              f"out={spark}", "progress=false")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "scored 100000 sessions" in res.stdout
    # quiet: no JVM start-up chatter, progress bar or pandas-version warning (driver, workers)
    assert "does not yet fully support pandas" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2, res.stderr  # (was 23 lines)
    a = pd.read_parquet(local)
    b = pd.read_parquet(spark).set_index("session_id").loc[a["session_id"]].reset_index()
    assert len(b) == len(a) == 100_000 and b["session_id"].is_unique
    np.testing.assert_allclose(b["prediction"].to_numpy(), a["prediction"].to_numpy(),
                               rtol=0, atol=1e-9)
    assert b["honest"].astype(int).tolist() == a["honest"].astype(int).tolist()
    assert a["honest"].sum() == int(base["rating"].notna().sum()) > 0


def test_spark_missing_names_the_extra(small_demo, pulse_home):
    # an interpreter where pyspark cannot be imported (None in sys.modules = not installed)
    code = ("import sys; sys.modules['pyspark'] = None; sys.argv = ['pulse-ml', 'score', "
            f"'engine=spark', 'data.path={small_demo}', 'out={pulse_home / 'o.parquet'}']; "
            "from pulse_ml.cli import main; main()")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "pip install 'pulse-ml[scale]'" in res.stderr and "Traceback" not in res.stderr


def test_spark_scores_a_parquet_directory_and_checks_fingerprints(small_demo, pulse_home, cli,
                                                                   colliding_table, trained_home):
    """A Parquet directory (what Spark itself writes) scores; reused ids keep the mean."""
    trained = trained_home("model=lightgbm", "tuning.n_trials=1", "progress=false")
    assert trained.promoted
    other = colliding_table
    single = pulse_home / "other.parquet"
    other.to_parquet(single, index=False)
    folder = pulse_home / "other_dir"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(other)), 3)):
        other.iloc[part].to_parquet(folder / f"part-{i:05d}.parquet", index=False)
    local, spark = pulse_home / "local.parquet", pulse_home / "spark_out"
    res = cli("score", f"data.path={single}", f"out={local}", "progress=false")
    assert res.returncode == 0, res.stdout + res.stderr
    res_spark = cli("score", "engine=spark", "spark_master='local[2]'", f"data.path={folder}/",
                    f"out={spark}", "progress=false")
    assert res_spark.returncode == 0, res_spark.stdout + res_spark.stderr
    a = pd.read_parquet(local)
    b = pd.read_parquet(spark).set_index("session_id").loc[a["session_id"]].reset_index()
    np.testing.assert_allclose(b["prediction"].to_numpy(), a["prediction"].to_numpy(),
                               rtol=0, atol=1e-9)
    assert b["honest"].astype(int).tolist() == a["honest"].astype(int).tolist()
    # every training id is reused, almost always by another session: those keep the mean
    n_train = int(pd.read_parquet(small_demo)["rating"].notna().sum())
    n_honest = int(a["honest"].sum())
    assert n_honest < 0.1 * n_train
    note = f"{n_train - n_honest} session(s) share a session_id with a training session"
    assert note in res.stdout and note in res_spark.stdout
    # nothing lost: a folder pulse-ml score wrote (its marker) is replaced whole, and only it
    marker = json.loads((spark / "_pulse_ml_output.json").read_text())
    assert marker["written_by"].startswith("pulse-ml score")
    again = cli("score", "engine=spark", "spark_master='local[2]'", f"data.path={folder}/",
                f"out={spark}", "honest=false", "progress=false")
    assert again.returncode == 0, again.stdout + again.stderr
    replaced = pd.read_parquet(spark)
    assert len(replaced) == len(b) and int(replaced["honest"].sum()) == 0
    left = [p.name for p in pulse_home.iterdir() if p.name.startswith((".partial", ".previous"))]
    assert left == []


def test_spark_refuses_csv_and_bad_values_before_scoring(small_demo, pulse_home, cli,
                                                         trained_home):
    trained_home("model=lightgbm", "tuning.n_trials=1", "progress=false")
    csv = pulse_home / "sessions.csv"
    pd.read_parquet(small_demo).head(10).to_csv(csv, index=False)
    res = cli("score", "engine=spark", f"data.path={csv}", f"out={pulse_home / 'o'}")
    assert res.returncode == 2 and "engine=spark reads Parquet" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1

    bad = pd.read_parquet(small_demo)
    bad["user_message_count"] = bad["user_message_count"].astype(float)
    bad.loc[[5, 6], "user_message_count"] = [np.nan, 2.5]
    bad.loc[7:9, "task_category"] = "write_poems"
    bad.loc[10, "task_category"] = "Fix Bugs"  # an accepted spelling, not a problem
    bad.loc[11, "git_push"] = 3
    bad["git_pull"] = bad["git_pull"].astype(str)
    bad.loc[12, "git_pull"] = "maybe"
    folder = pulse_home / "bad_dir"
    folder.mkdir()
    bad.to_parquet(folder / "part-0.parquet", index=False)
    out = pulse_home / "bad_out"
    res = cli("score", "engine=spark", "spark_master='local[1]'", f"data.path={folder}",
              f"out={out}", "progress=false")
    err = res.stderr
    assert res.returncode == 2, res.stdout + err
    assert "column 'user_message_count': empty/NaN values in 1 row(s)" in err
    assert f"session_id={bad.loc[5, 'session_id']}" in err
    assert "column 'user_message_count': non-integer counts in 1 row(s)" in err
    assert "column 'task_category': unknown category values in 3 row(s)" in err
    assert "column 'git_push': a 0/1 flag has other values in 1 row(s)" in err
    assert "column 'git_pull': non-numeric values in 1 row(s)" in err
    assert "Traceback" not in err and not out.exists()

    # local paths are checked from the Parquet footers before Spark starts
    res = cli("score", "engine=spark", "spark_master='local[1]'",
              f"data.path={pulse_home / 'nowhere'}", f"out={out}", "progress=false")
    assert res.returncode == 2 and "no such file or directory" in res.stderr, res.stderr
    not_parquet = pulse_home / "csv_dir"
    not_parquet.mkdir()
    (not_parquet / "part-0.parquet").write_bytes(csv.read_bytes())  # CSV under a Parquet name
    res = cli("score", "engine=spark", "spark_master='local[1]'", f"data.path={not_parquet}",
              f"out={out}", "progress=false")
    assert res.returncode == 2 and "not readable as Parquet" in res.stderr, res.stderr

    short = pulse_home / "short_dir"
    short.mkdir()
    bad.drop(columns=["git_rebase"]).to_parquet(short / "part-0.parquet", index=False)
    res = cli("score", "engine=spark", "spark_master='local[1]'", f"data.path={short}",
              f"out={out}", "progress=false")
    assert res.returncode == 2 and "missing column(s) 'git_rebase'" in res.stderr, res.stderr
    assert not out.exists()
