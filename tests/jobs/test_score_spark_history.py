"""`pulse-ml score engine=spark` of a user_history model equals engine=local (one Spark start).

The history columns are computed on Spark (window functions over each user's sessions) and
handed to the model's UDF: predictions equal local chunked scoring, with the scored table as its
own past and with a separate history table; the columns themselves equal the local rule for
ties at one instant, ``window_days``, ``min_prior``, row order, times as datetimes, ISO text or
epoch seconds, and users without an id; bad input gets local's messages.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml.config import compose
from pulse_ml.errors import PulseError
from pulse_ml.jobs import score
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.sessions.user_history import derived_columns, history_frame

pytest.importorskip("pyspark", reason="pyspark is missing: pip install 'pulse-ml[scale]' "
                    "(CI installs it through .[dev])")


def _tied(frame: pd.DataFrame) -> pd.DataFrame:
    """Each returning user's second session starts at the same instant as its first."""
    frame = frame.copy()
    order = frame.sort_values(["user_id", "started_at"], kind="stable")
    rank = order.groupby("user_id").cumcount()
    first = order["started_at"].where(rank == 0).groupby(order["user_id"]).transform("first")
    second = order.index[rank == 1]
    frame.loc[second, "started_at"] = first.loc[second]
    return frame


def _run(*args: str):
    return score.run(compose("score", ["progress=false", *args]))


def _message(*args: str) -> str:
    """The one message ``score`` stops with on these arguments."""
    with pytest.raises(PulseError) as info:
        _run(*args)
    return str(info.value)


def test_spark_history_scores_equal_local(small_demo, pulse_home, trained_home, tmp_path):
    from pyspark.sql import SparkSession

    from pulse_ml.inference.spark_history import with_history

    trained = trained_home("model=lightgbm", "tuning.n_trials=1", "progress=false",
                           "features=all_history")
    assert trained.promoted
    frame = _tied(pd.read_parquet(small_demo))
    n_ties = int(frame.duplicated(["user_id", "started_at"]).sum())
    assert n_ties > 300  # the rule "ties do not see each other" is exercised
    src = tmp_path / "sessions.parquet"
    frame.to_parquet(src, index=False, row_group_size=700)
    spark_flags = ["engine=spark", "spark_master='local[2]'"]
    try:
        # 1. the scored table is its own past; honest: training sessions keep their OOF value
        local = _run(f"data.path={src}", f"out={tmp_path / 'l1.parquet'}", "chunk_size=400")
        remote = _run(*spark_flags, f"data.path={src}", f"out={tmp_path / 's1'}")
        a = pd.read_parquet(tmp_path / "l1.parquet")
        b = pd.read_parquet(tmp_path / "s1").set_index("session_id").loc[a["session_id"]]
        assert remote.n_rows == local.n_rows == len(frame)
        np.testing.assert_allclose(b["prediction"].to_numpy(), a["prediction"].to_numpy(),
                                   rtol=0, atol=1e-9)
        assert b["honest"].astype(int).tolist() == a["honest"].astype(int).tolist()
        assert remote.n_honest == local.n_honest == int(frame["rating"].notna().sum())
        assert [n for n in remote.notes if "user_history" in n] == \
            [n for n in local.notes if "user_history" in n]

        # 2. new sessions against a history table (honest=false: every row is the model's)
        frame = frame.sort_values("started_at", kind="stable").reset_index(drop=True)
        cut = frame["started_at"].quantile(0.7)
        past, new = frame[frame["started_at"] < cut], frame[frame["started_at"] >= cut]
        past_path, new_path = tmp_path / "past.parquet", tmp_path / "new.parquet"
        past.to_parquet(past_path, index=False)
        new.assign(rating=np.nan).to_parquet(new_path, index=False)
        hist = [f"data.path={new_path}", f"history.path={past_path}", "honest=false"]
        _run(*hist, f"out={tmp_path / 'l2.parquet'}", "chunk_size=250")
        remote = _run(*spark_flags, *hist, f"out={tmp_path / 's2'}")
        a = pd.read_parquet(tmp_path / "l2.parquet")
        b = pd.read_parquet(tmp_path / "s2").set_index("session_id").loc[a["session_id"]]
        np.testing.assert_allclose(b["prediction"].to_numpy(), a["prediction"].to_numpy(),
                                   rtol=0, atol=1e-9)
        assert any("of past.parquet and of the scored table" in n for n in remote.notes)

        # 3. the columns themselves: window_days, min_prior, row order, users without an id
        spark = SparkSession.getActiveSession()
        odd = frame.copy()
        odd.loc[odd.index % 17 == 0, "user_id"] = None  # their own user: session:<id>
        specs = (FeatureSpec("h", "user_history", options={"window_days": 3.0, "min_prior": 1}),
                 FeatureSpec("g", "user_history", options={"window_days": None, "min_prior": 2}))
        fs = FeatureSet("t", specs)
        epoch = (odd["started_at"] - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)
        variants = (("timed", odd), ("by_row", odd.drop(columns="started_at")),
                    ("iso_text", odd.assign(started_at=odd["started_at"].dt.strftime(
                        "%Y-%m-%dT%H:%M:%S+00:00"))),
                    ("epoch_seconds", odd.assign(started_at=epoch)))
        for name, table in variants:
            path = tmp_path / f"{name}.parquet"
            table.to_parquet(path, index=False, row_group_size=500)
            got, _, notes = with_history(spark.read.parquet(str(path)), fs, str(path), None,
                                         spark.read.parquet)
            cols = [c for s in specs for c in derived_columns(s.name)]
            rows = got.select("session_id", *cols).collect()  # (toPandas warns on pandas 3)
            got = pd.DataFrame([r.asDict() for r in rows]).set_index("session_id")
            want = pd.concat([history_frame(table, s.name, s.options) for s in specs], axis=1)
            want.index = table["session_id"]
            np.testing.assert_allclose(got.loc[want.index, cols].to_numpy(), want[cols],
                                       rtol=1e-12, atol=1e-12, err_msg=name)
            assert want["h__missing"].mean() != want["g__missing"].mean()  # options matter
            assert ("ordered by started_at" in notes[0]) == (name != "by_row")

        # 4. bad input: local's messages (exit 2 through the CLI's PulseError handling)
        no_user = tmp_path / "no_user.parquet"
        new.drop(columns="user_id").to_parquet(no_user, index=False)
        for args in ([f"data.path={no_user}"],
                     [f"data.path={new_path}", f"history.path={no_user}"]):
            want = _message(*args, f"out={tmp_path / 'x.parquet'}")
            got = _message(*spark_flags, *args, f"out={tmp_path / 'x'}")
            assert "user_id" in got and got == want
        bad_time = tmp_path / "bad_time.parquet"
        new.assign(started_at=new["started_at"].astype(str).where(
            np.arange(len(new)) != 7, "last tuesday")).to_parquet(bad_time, index=False)
        want = _message(f"data.path={bad_time}", f"out={tmp_path / 'x.parquet'}")
        got = _message(*spark_flags, f"data.path={bad_time}", f"out={tmp_path / 'x'}")
        stem = "column 'started_at': unparseable values in 1 row(s) (first: 'last tuesday')"
        assert stem in want and stem in got
        assert want.split(" (rows")[0] == got.split(" (e.g.")[0]
        overlap = [f"data.path={new_path}", f"history.path={new_path}"]
        want = _message(*overlap, f"out={tmp_path / 'x.parquet'}")
        got = _message(*spark_flags, *overlap, f"out={tmp_path / 'x'}")
        assert f"share {len(new):,} session id(s)" in got and got == want
        assert not (tmp_path / "x").exists() and not (tmp_path / "x.parquet").exists()
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
