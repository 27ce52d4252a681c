"""The user_history kind end to end: train, infer, chunked score (= whole table, and from a
history table), the pyfunc in a fresh process, and bad input (exit 2, one message)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import DataError
from pulse_ml.jobs import infer, score, train
from pulse_ml.registry.analysis import open_model
from pulse_ml.sessions.user_history import derived_columns


def test_history_model_train_infer_score_and_pyfunc(small_demo, pulse_home, tmp_path):
    fit = train.run(compose("train", [f"data.path={small_demo}", "tuning.n_trials=2",
                                      "progress=false", "model=lightgbm",
                                      "features=all_history"]))
    assert fit.promoted
    infer.run(compose("infer", [f"data.path={small_demo}", "permutations=200"]))
    ensemble = open_model("models:/pulse-satisfaction@champion").ensemble
    frame = pd.read_parquet(small_demo)
    want, used = ensemble.honest_predict(frame)  # the whole table at once

    # chunked scoring (the table is its own history) equals the whole-table predictions
    out = tmp_path / "pred.parquet"
    result = score.run(compose("score", [f"data.path={small_demo}", f"out={out}",
                                         "progress=false", "chunk_size=333"]))
    got = pd.read_parquet(out)
    assert result.n_chunks > 5
    np.testing.assert_allclose(got["prediction"].to_numpy(), want, rtol=1e-12, atol=1e-12)
    assert got["honest"].to_numpy().tolist() == used.astype(int).tolist()
    assert any("ordered by started_at" in n for n in result.notes)

    # new sessions scored against a history table = the same sessions scored in one table
    frame = frame.sort_values("started_at", kind="stable").reset_index(drop=True)
    cut = frame["started_at"].quantile(0.7)
    past, new = frame[frame["started_at"] < cut], frame[frame["started_at"] >= cut]
    new = new.assign(rating=np.nan)  # fresh sessions: not rated yet
    past_path, new_path = tmp_path / "past.parquet", tmp_path / "new.parquet"
    past.to_parquet(past_path, index=False)
    new.to_parquet(new_path, index=False)
    out2 = tmp_path / "new_pred.parquet"
    result = score.run(compose("score", [f"data.path={new_path}", f"out={out2}",
                                         f"history.path={past_path}", "progress=false",
                                         "chunk_size=250", "honest=false"]))
    together = pd.concat([past, new], ignore_index=True)
    expected = ensemble.predict(together)[len(past):]
    np.testing.assert_allclose(pd.read_parquet(out2)["prediction"].to_numpy(), expected,
                               rtol=1e-12, atol=1e-12)
    assert any("of past.parquet and of the scored table" in n for n in result.notes)
    with pytest.raises(DataError, match="share 900 session id"):  # a past that is not past
        score.run(compose("score", [f"data.path={new_path}", f"history.path={new_path}",
                                    f"out={tmp_path / 'x.parquet'}", "progress=false"]))

    # the registered pyfunc in a fresh process reads user_id, rating and started_at (as ISO
    # text: MLflow's schema refuses time-zone-aware datetimes)
    code = (
        "import json, sys, mlflow, pandas as pd\n"
        "m = mlflow.pyfunc.load_model('models:/pulse-satisfaction@champion')\n"
        "frame = pd.read_parquet(sys.argv[1])\n"
        "frame['started_at'] = frame['started_at'].dt.strftime('%Y-%m-%dT%H:%M:%SZ')\n"
        "schema = [c.name for c in m.metadata.get_input_schema().inputs]\n"
        "back = m.predict(frame.iloc[::-1])[::-1]\n"  # ordered by started_at, not by row
        "print(json.dumps({'schema': schema, 'pred': [float(v) for v in m.predict(frame)],\n"
        "                  'back': [float(v) for v in back]}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(small_demo)], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"user_id", "rating", "started_at"} <= set(got["schema"])
    whole = pd.read_parquet(small_demo)
    np.testing.assert_allclose(got["pred"], ensemble.predict(whole), rtol=1e-9)
    np.testing.assert_allclose(got["back"], got["pred"], rtol=1e-9)
    # the history columns are model inputs (a leak would show up as the own rating in them)
    assert derived_columns("user_history")[0] in ensemble.features.model_names


def test_history_bad_input_exit_2_and_constant_note(small_demo, tmp_path, pulse_home, cli):
    frame = pd.read_parquet(small_demo)
    no_user = tmp_path / "no_user.parquet"
    frame.drop(columns="user_id").to_parquet(no_user, index=False)
    done = cli("validate", "features=all_history", f"data.path={no_user}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "column 'user_id': missing (needed by feature 'user_history'" in done.stderr
    assert "Traceback" not in done.stderr

    bad_time = tmp_path / "bad_time.csv"
    frame.assign(started_at=frame["started_at"].astype(str).where(
        np.arange(len(frame)) != 7, "last tuesday")).to_csv(bad_time, index=False)
    done = cli("validate", "features=all_history", f"data.path={bad_time}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "column 'started_at': unparseable values" in done.stderr
    assert "last tuesday" in done.stderr and "Traceback" not in done.stderr

    once = tmp_path / "once.parquet"
    frame.assign(user_id=frame["session_id"]).to_parquet(once, index=False)
    done = cli("validate", "features=all_history", f"data.path={once}")
    assert done.returncode == 0, done.stderr
    assert "is constant" in " ".join(done.stdout.split())

    done = cli("train", "features=all_history", f"data.path={small_demo}", "cv.group_by=none",
               "tuning.n_trials=1", "model=mean")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needs folds grouped by user" in done.stderr
