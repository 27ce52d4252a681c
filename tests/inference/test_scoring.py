"""Chunked scoring equals in-memory prediction (real cross-fit ensemble, real files)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pulse_ml import settings as cfg_io
from pulse_ml.config import compose
from pulse_ml.errors import DataError, PulseError
from pulse_ml.inference.scoring import ScoreSettings, score_file
from pulse_ml.jobs import train
from pulse_ml.models.crossfit import fit_crossfit
from pulse_ml.models.factory import build_pipeline
from pulse_ml.training.family import training_data
from pulse_ml.training.folds import make_folds


@pytest.fixture(scope="module")
def ensemble(small_demo):
    """A real LightGBM cross-fit ensemble on the labeled demo sessions (no MLflow needed)."""
    cfg = compose("train", [f"data.path={small_demo}", "model=lightgbm"])
    table = cfg_io.load_table(cfg)
    spec = train.model_spec(cfg)
    labeled, y = training_data(table)
    folds = make_folds(len(y), 5, 42)
    params = {"n_estimators": 40, "num_leaves": 8}
    return fit_crossfit(lambda: build_pipeline(spec, table.features, params), labeled, y,
                        folds, table.features, spec.name)


@pytest.fixture(scope="module")
def frame(small_demo) -> pd.DataFrame:
    return pd.read_parquet(small_demo)


def _score(ensemble, src, out, chunk_size, honest=True):
    return score_file(ensemble, src, out, ScoreSettings(chunk_size=chunk_size, honest=honest,
                                                        progress=False))


def test_parquet_chunks_equal_in_memory_honest_predict(ensemble, frame, tmp_path):
    src = tmp_path / "in.parquet"
    frame.to_parquet(src, index=False, row_group_size=1000)  # row groups != chunks
    out = tmp_path / "scores.parquet"
    result = _score(ensemble, src, out, chunk_size=700)
    expected, used = ensemble.honest_predict(frame)
    got = pd.read_parquet(out)
    assert result.n_chunks == int(np.ceil(len(frame) / 700)) and result.n_chunks > 3
    assert result.n_rows == len(frame) == len(got)
    assert list(got.columns) == ["session_id", "prediction", "honest"]
    assert got["session_id"].tolist() == frame["session_id"].astype(str).tolist()
    np.testing.assert_allclose(got["prediction"].to_numpy(), expected, rtol=1e-12, atol=1e-12)
    assert got["honest"].to_numpy().tolist() == used.astype(int).tolist()
    assert result.n_honest == int(frame["rating"].notna().sum()) == int(used.sum()) > 0
    assert not (tmp_path / "scores.parquet.partial").exists()
    # out-of-fold values differ from the ensemble mean on training sessions: honesty matters
    mean = ensemble.predict(frame)
    assert not np.allclose(got["prediction"].to_numpy()[used], mean[used])
    assert pq.ParquetFile(out).schema_arrow.field("honest").type == "int8"


def test_csv_chunks_equal_in_memory_predict(ensemble, frame, tmp_path):
    src = tmp_path / "in.csv"
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    shuffled.to_csv(src, index=False)
    out = tmp_path / "scores.parquet"
    result = _score(ensemble, src, out, chunk_size=1100, honest=False)
    got = pd.read_parquet(out)
    assert result.n_chunks == 3 and result.n_honest == 0
    assert got["session_id"].tolist() == shuffled["session_id"].astype(str).tolist()
    np.testing.assert_allclose(got["prediction"].to_numpy(), ensemble.predict(shuffled),
                               rtol=1e-12, atol=1e-12)
    assert (got["honest"] == 0).all()
    honest = _score(ensemble, src, tmp_path / "honest.parquet", chunk_size=500)
    expected, used = ensemble.honest_predict(shuffled)
    np.testing.assert_allclose(pd.read_parquet(tmp_path / "honest.parquet")["prediction"],
                               expected, rtol=1e-12, atol=1e-12)
    assert honest.n_honest == int(used.sum())


def test_one_chunk_equals_many_chunks(ensemble, small_demo, tmp_path):
    _score(ensemble, small_demo, tmp_path / "one.parquet", chunk_size=10**6)
    _score(ensemble, small_demo, tmp_path / "many.parquet", chunk_size=333)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "one.parquet"),
                                  pd.read_parquet(tmp_path / "many.parquet"))


def test_bad_values_in_a_late_chunk_name_file_rows_and_leave_no_output(ensemble, frame,
                                                                      tmp_path):
    bad = frame.copy()
    bad["user_message_count"] = bad["user_message_count"].astype(float)
    bad.loc[2500, "user_message_count"] = np.nan
    bad.loc[2600, "task_category"] = "write_poems"
    bad.loc[2700, "git_push"] = 3
    src = tmp_path / "bad.parquet"
    bad.to_parquet(src, index=False)
    out = tmp_path / "scores.parquet"
    with pytest.raises(DataError) as err:
        _score(ensemble, src, out, chunk_size=1000)
    msg = str(err.value)
    assert str(src) in msg
    assert "column 'user_message_count': empty/NaN" in msg and "row 2501" in msg
    assert f"session_id={bad.loc[2500, 'session_id']}" in msg
    assert "'write_poems'" in msg and "row 2601" in msg and "Allowed: fix_bugs" in msg
    assert "column 'git_push'" in msg and "row 2701" in msg
    assert "chunk 3, rows 2001-3000" in msg
    assert not out.exists() and not (tmp_path / "scores.parquet.partial").exists()


def test_missing_columns_are_one_clear_error(ensemble, frame, tmp_path):
    src = tmp_path / "in.csv"
    frame.drop(columns=["git_rebase", "user_sentiment"]).to_csv(src, index=False)
    with pytest.raises(PulseError, match=r"missing column\(s\) 'user_sentiment', 'git_rebase'"):
        _score(ensemble, src, tmp_path / "o.parquet", chunk_size=100)


def test_settings_and_model_problems_are_clear(ensemble, small_demo, tmp_path):
    with pytest.raises(PulseError, match="chunk_size=0"):
        _score(ensemble, small_demo, tmp_path / "o.parquet", chunk_size=0)
    with pytest.raises(PulseError, match="use a .parquet name"):
        _score(ensemble, small_demo, tmp_path / "o.csv", chunk_size=10)
    with pytest.raises(PulseError, match="unsupported extension"):
        _score(ensemble, tmp_path / "x.xlsx", tmp_path / "o.parquet", chunk_size=10)
    no_oof = type(ensemble)(models=ensemble.models, features=ensemble.features,
                            family=ensemble.family, oof=ensemble.oof.iloc[:0])
    with pytest.raises(PulseError, match="honest=false"):
        _score(no_oof, small_demo, tmp_path / "o.parquet", chunk_size=10)


@pytest.fixture
def other_table(colliding_table) -> pd.DataFrame:
    return colliding_table.copy()


def _collisions(ensemble, table):
    """Rows of ``table`` whose id is a training id, and which of them also share the features."""
    from pulse_ml.models.honest_lookup import fingerprint

    oof = ensemble.oof.set_index("session_id")
    ids = table["session_id"].astype(str)
    collide = ids.isin(oof.index).to_numpy()
    same = np.zeros(len(table), dtype=bool)
    fp = fingerprint(table[collide], ensemble.features)
    same[collide] = fp == oof.loc[ids[collide], "fingerprint"].to_numpy().astype(np.uint64)
    return collide, same


def test_colliding_ids_of_another_table_do_not_take_oof_predictions(ensemble, other_table,
                                                                    tmp_path):
    """The honesty hole: id-only matching gave another session's OOF value, flagged honest."""
    src = tmp_path / "other.parquet"
    other_table.to_parquet(src, index=False)
    collide, same = _collisions(ensemble, other_table)
    assert collide.sum() == len(ensemble.oof)  # every training id is reused by the other table
    assert (collide & ~same).sum() > 0.9 * collide.sum()  # ... by other sessions
    result = _score(ensemble, src, tmp_path / "s.parquet", chunk_size=700)
    got = pd.read_parquet(tmp_path / "s.parquet")
    mean = ensemble.predict(other_table)
    mismatched = collide & ~same
    np.testing.assert_allclose(got["prediction"].to_numpy()[~same], mean[~same], rtol=1e-12)
    assert got["honest"].to_numpy().tolist() == same.astype(int).tolist()
    assert result.n_honest == int(same.sum()) and result.n_mismatched == int(mismatched.sum())
    assert any(f"{int(mismatched.sum())} session(s) share a session_id" in n
               for n in result.notes)
    # the same rows through the in-memory path (used by infer): identical decisions
    preds, used = ensemble.honest_predict(other_table)
    assert used.tolist() == same.tolist()
    np.testing.assert_allclose(got["prediction"].to_numpy(), preds, rtol=1e-12, atol=1e-12)


def test_infer_path_gives_colliding_labeled_sessions_the_ensemble_mean(ensemble, other_table,
                                                                       frame):
    from pulse_ml.inference.honest import honest_data

    collide, same = _collisions(ensemble, other_table)
    data = honest_data(other_table, "other.parquet", ensemble, only=[])
    labeled = data.table.labeled
    mean = ensemble.predict(data.table.frame)
    np.testing.assert_allclose(data.predictions[~same], mean[~same], rtol=1e-12)
    assert data.n_with_oof == int((same & labeled).sum())
    n_lab = int((collide & ~same & labeled).sum())
    assert n_lab > 100
    assert any(f"({n_lab} labeled) share a session_id" in n for n in data.notes)
    # the training table itself: every labeled session keeps its out-of-fold prediction
    own = honest_data(frame, "train.parquet", ensemble, only=[])
    assert own.n_with_oof == int(frame["rating"].notna().sum())
    assert not any("share a session_id" in n for n in own.notes)


def test_old_model_without_fingerprints_matches_ids_and_says_so(ensemble, other_table,
                                                                tmp_path):
    old = type(ensemble)(models=ensemble.models, features=ensemble.features,
                         family=ensemble.family, oof=ensemble.oof.drop(columns="fingerprint"))
    src = tmp_path / "other.parquet"
    other_table.to_parquet(src, index=False)
    result = _score(old, src, tmp_path / "s.parquet", chunk_size=1000)
    collide, _ = _collisions(ensemble, other_table)
    assert result.n_honest == int(collide.sum()) and result.n_mismatched == 0
    assert len(result.notes) == 1 and "before out-of-fold fingerprints" in result.notes[0]


def test_cache_rows_is_a_setting_and_does_not_change_predictions(ensemble, small_demo,
                                                                 tmp_path):
    from pulse_ml.jobs import score

    job = score.settings_from_config(compose("score", ["cache_rows=1234", "engine=spark",
                                                       "data.path=s3a://bucket/sessions/"]))
    assert job.settings.cache_rows == 1234
    assert job.data_path == "s3a://bucket/sessions/"  # not collapsed to s3a:/ by Path()
    with pytest.raises(PulseError, match="cache_rows=-1 is out of range"):
        score.settings_from_config(compose("score", ["cache_rows=-1"]))
    outs = []
    for rows in (0, 50, 200_000):
        out = tmp_path / f"c{rows}.parquet"
        score_file(ensemble, small_demo, out, ScoreSettings(chunk_size=500, progress=False,
                                                            cache_rows=rows))
        outs.append(pd.read_parquet(out))
    for other in outs[1:]:
        pd.testing.assert_frame_equal(outs[0], other)


def test_lookup_matches_ids_of_any_dtype(ensemble, frame):
    from pulse_ml.models.honest_lookup import HonestLookup

    oof = ensemble.oof.assign(session_id=np.arange(len(ensemble.oof)).astype(str))
    lookup = HonestLookup(oof, ensemble.features)
    assert lookup.positions(pd.Series([3, 10**9, 0])).tolist() == [3, -1, 0]
    assert lookup.positions(np.array(["0", "x", "2"], dtype=object)).tolist() == [0, -1, 2]
    assert lookup.positions(pd.Series(["1", "2"], dtype="string")).tolist() == [1, 2]


def test_spark_fingerprint_check_is_exact_for_64_bit_values(ensemble, frame):
    """The pandas UDF's comparison (no Spark needed): full 64-bit precision, only id matches."""
    from pulse_ml.models.honest_lookup import HonestLookup, same_fingerprint

    table = HonestLookup(ensemble.oof, ensemble.features).broadcast_table()
    rows = frame.set_index("session_id").loc[table["session_id"]].reset_index()
    feats = rows[ensemble.features.names]
    stored = table["oof_fingerprint"]
    has = pd.Series(np.arange(len(rows)) % 3 != 0)
    got = same_fingerprint(feats, stored, has, ensemble.features).to_numpy()
    assert got.tolist() == has.tolist()  # the training rows themselves: equal where checked
    # a fingerprint off by one in its lowest bit (lost in a float64 round trip) is refused
    assert not same_fingerprint(feats, stored + 1, has, ensemble.features).to_numpy().any()
    assert np.abs(stored.to_numpy()).max() > 2**53  # float64 could not hold these exactly
