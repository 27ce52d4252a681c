"""`pulse-ml score engine=spark` (mlflow.pyfunc.spark_udf, Spark local mode) equals engine=local."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.jobs import train
from pulse_ml.simulate.generator import SimulateSettings, simulate

pytest.importorskip("pyspark", reason="pyspark is missing: pip install 'pulse-ml[scale]' "
                    "(CI installs it through .[dev])")


def test_spark_scores_equal_local_scores_row_by_row(small_demo, pulse_home, cli):
    trained = train.run(compose("train", [f"data.path={small_demo}", "model=lightgbm",
                                          "tuning.n_trials=1", "progress=false"]))
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
