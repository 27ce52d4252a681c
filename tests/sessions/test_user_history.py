"""The user_history feature kind: strictly earlier ratings of the same user, by one rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from returning_users import SET, returning_users

from pulse_ml.errors import DataError, PulseError
from pulse_ml.models.preprocess import feature_frame
from pulse_ml.sessions.feature_sets import feature_set_from_mapping
from pulse_ml.sessions.table import validate_frame
from pulse_ml.sessions.user_history import HistoryIndex, derived_columns, history_frame

FS = feature_set_from_mapping(SET)
COLS = derived_columns("hist")


def _table(**extra):
    return pd.DataFrame({
        "session_id": list("abcdef"), "condition": "c", "x": 0.0,
        "rating": [4, np.nan, 2, 5, 3, np.nan],
        "user_id": ["u", "u", "u", "v", "v", "u"],
        "started_at": ["2025-01-01T00:00:00Z", "2025-01-02", "2025-01-02", "2025-01-01",
                       "2025-01-05", "2025-01-03"], **extra})


def test_history_by_started_at_ties_and_flags():
    t = validate_frame(_table(), "t.csv", FS)
    h = t.frame.set_index("session_id")[COLS]
    # a: u's first session: no history, flagged, mean 0 (not an imputed rating)
    assert h.loc["a"].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]
    # b and c start at the same instant: neither sees the other's rating (c's own 2 is not used)
    assert h.loc["b"].tolist() == [4.0, 1.0, 1.0, 1.0, 0.0]
    assert h.loc["c"].tolist() == [4.0, 1.0, 1.0, 1.0, 0.0]
    # f (2025-01-03) sees a, b (unrated) and c: mean of 4 and 2, 3 earlier sessions, 2 days
    assert h.loc["f"].tolist() == [3.0, 2.0, 3.0, 2.0, 0.0]
    assert h.loc["e"].tolist() == [5.0, 1.0, 1.0, 4.0, 0.0]
    assert any("ordered by started_at" in n for n in t.notes)


def test_row_order_without_started_at_is_said_once():
    t = validate_frame(_table().drop(columns="started_at"), "t.csv", FS)
    h = t.frame.set_index("session_id")[COLS]
    assert h.loc["c", "hist__n_sessions"] == 2.0  # row order: b is before c now
    assert h.loc["f", "hist__mean"] == 3.0 and (h["hist__days"] == 0).all()
    said = [n for n in t.notes if "row order" in n]
    assert len(said) == 1 and "no started_at column" in said[0]


def test_order_follows_started_at_not_rows():
    frame = _table()
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    a = validate_frame(frame, "t.csv", FS).frame.set_index("session_id")[COLS]
    b = validate_frame(shuffled, "t.csv", FS).frame.set_index("session_id")[COLS]
    pd.testing.assert_frame_equal(a, b.loc[a.index])


def test_no_leak_own_or_later_ratings_never_change_a_session():
    frame = returning_users(300, seed=4, rated=0.6)
    base = history_frame(frame, "hist", FS.history[0].options)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(frame), 25, replace=False):
        changed = frame.copy()
        later = frame.index >= i  # own and later rows (the table is in time order)
        changed.loc[later, "rating"] = rng.integers(1, 6, later.sum()).astype(float)
        after = history_frame(changed, "hist", FS.history[0].options)
        pd.testing.assert_frame_equal(base.iloc[: i + 1], after.iloc[: i + 1])
    # and an earlier rating does change a later session of the same user
    first = frame.groupby("user_id").head(1)
    rated_first = first[first["rating"].notna()].index
    again = frame["user_id"].duplicated() & frame["user_id"].isin(
        frame.loc[rated_first, "user_id"])
    changed = frame.copy()
    changed.loc[rated_first, "rating"] = 6 - changed.loc[rated_first, "rating"]
    moved = history_frame(changed, "hist", FS.history[0].options)["hist__mean"] != base[
        "hist__mean"]
    assert moved[again].any()


def test_window_and_min_prior():
    fs = feature_set_from_mapping({"name": "w", "columns": {
        "hist": {"kind": "user_history", "window_days": 1.5, "min_prior": 2}}})
    t = validate_frame(_table(), "t.csv", fs)
    h = t.frame.set_index("session_id")[COLS]
    # f: only c (2025-01-02, 1 day before) is inside 1.5 days; 1 rating < min_prior 2
    assert h.loc["f", "hist__n_ratings"] == 1.0 and h.loc["f", "hist__missing"] == 1.0
    assert h.loc["f", "hist__mean"] == 0.0 and h.loc["f", "hist__n_sessions"] == 3.0


def test_feature_frame_computes_the_columns_from_a_raw_frame_equally():
    frame = returning_users(200, seed=5, rated=0.5)
    table = validate_frame(frame, "t", FS)
    raw = frame.assign(started_at=frame["started_at"].astype(str))
    got = feature_frame(raw, FS)
    want = feature_frame(table.frame, FS)
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    assert list(got.columns) == FS.model_names


def test_index_queries_equal_whole_table_in_any_chunking():
    frame = returning_users(400, seed=6, rated=0.4)
    whole = history_frame(frame, "hist", {"window_days": 10.0, "min_prior": 1})
    index = HistoryIndex.from_frame(frame)
    times = frame["started_at"].to_numpy(dtype="datetime64[us]").astype(np.int64)
    parts = [index.query(frame["user_id"].to_numpy()[s], times[s], "hist", 10.0, 1)
             for s in np.array_split(np.arange(len(frame)), 7)]
    np.testing.assert_array_equal(pd.concat(parts).to_numpy(), whole.to_numpy())


def test_bad_input_one_message():
    with pytest.raises(DataError) as err:
        validate_frame(_table().drop(columns="user_id"), "t.csv", FS)
    assert "user_id" in str(err.value) and "earlier ratings" in str(err.value)
    with pytest.raises(DataError) as err:
        validate_frame(_table(started_at=["yesterday", *["2025-01-01"] * 5]), "t.csv", FS)
    assert "started_at" in str(err.value) and "yesterday" in str(err.value)
    for bad in ({"window_days": 0}, {"min_prior": 0}, {"min_prior": 1.5}, {"span": 3}):
        with pytest.raises(PulseError, match="user_history"):
            feature_set_from_mapping({"name": "b", "columns": {
                "hist": {"kind": "user_history", **bad}}})


def test_one_session_per_user_is_a_note_not_an_error():
    frame = _table(user_id=list("123456"))
    t = validate_frame(frame, "t.csv", FS)
    assert (t.frame["hist__missing"] == 1).all()
    assert any("constant" in n for n in t.notes)


def test_a_late_earlier_rating_keeps_training_sessions_out_of_fold():
    from pulse_ml.models.crossfit import fit_crossfit
    from pulse_ml.models.factory import build_pipeline, model_spec_from_mapping
    from pulse_ml.training.folds import make_folds

    frame = returning_users(300, seed=7, rated=0.6)
    table = validate_frame(frame, "t", FS)
    lab = table.frame[table.labeled].reset_index(drop=True)
    spec = model_spec_from_mapping({"name": "ridge", "estimator": {
        "_target_": "sklearn.linear_model.Ridge"}})
    folds = make_folds(len(lab), 5, 42, lab["user_id"].to_numpy())
    ens = fit_crossfit(lambda: build_pipeline(spec, FS), lab, lab["rating"].to_numpy(), folds,
                       FS, "ridge")
    # ratings of unrated earlier sessions arrive after training: histories change
    late = frame.assign(rating=frame["rating"].fillna(3.0))
    now = validate_frame(late, "t", FS).frame
    changed = (now["hist__mean"] != table.frame["hist__mean"]) & table.labeled
    assert changed.any()
    preds, used = ens.honest_predict(now)
    assert used[table.labeled].all()  # every training session still gets its OOF prediction
    oof = ens.oof.set_index("session_id")["prediction"]
    np.testing.assert_array_equal(preds[table.labeled],
                                  oof.loc[now["session_id"][table.labeled]].to_numpy())
