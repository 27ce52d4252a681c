"""FastPredictor equals CrossFitEnsemble.predict (real fitted ensembles of every family)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from pulse_ml import settings as cfg_io
from pulse_ml.config import compose
from pulse_ml.jobs import train
from pulse_ml.models.crossfit import fit_crossfit
from pulse_ml.models.factory import build_pipeline
from pulse_ml.models.fast_predict import (
    FastPredictor,
    PredictionCache,
    distinct_rows,
    shared_transform,
    transforms_equal,
)
from pulse_ml.sessions.feature_sets import FeatureSet, FeatureSpec
from pulse_ml.training.family import training_data
from pulse_ml.training.folds import make_folds

PARAMS = {
    "lightgbm": {"n_estimators": 30, "num_leaves": 8},
    "hist_gb": {"max_iter": 20},
    "random_forest": {"n_estimators": 20, "n_jobs": 1},
    "ordinal_logit": {},
}


@pytest.fixture(scope="module")
def frame(small_demo) -> pd.DataFrame:
    return pd.read_parquet(small_demo)


def _ensemble(small_demo, family, features=None):
    cfg = compose("train", [f"data.path={small_demo}", f"model={family}"])
    table = cfg_io.load_table(cfg)
    features = features or table.features
    spec = train.model_spec(cfg)
    labeled, y = training_data(table)
    folds = make_folds(len(y), 5, 42)
    return fit_crossfit(lambda: build_pipeline(spec, features, PARAMS[family]), labeled, y,
                        folds, features, spec.name)


@pytest.mark.parametrize("family", sorted(PARAMS))
def test_equal_to_ensemble_predict_for_every_family(small_demo, frame, family):
    ensemble = _ensemble(small_demo, family)
    fast = FastPredictor(ensemble, threads=2, cache_rows=1000)
    # the demo feature set fixes every category: the fold transforms are provably equal
    assert fast.shared is ensemble.models[0].steps[0][1]
    expected = ensemble.predict(frame)
    # several calls (chunks) so the cross-chunk cache is exercised, in a shuffled order
    order = np.random.default_rng(0).permutation(len(frame))
    got = np.concatenate([fast.predict(frame.iloc[part]) for part in np.array_split(order, 4)])
    np.testing.assert_allclose(got, expected[order], rtol=0, atol=1e-9)
    assert fast.cache.hits > 0  # later chunks re-used predictions of earlier ones
    if family in ("lightgbm", "hist_gb"):  # row-independent native code: bit for bit
        assert np.array_equal(got, expected[order])
    assert "shared feature transform" in fast.mode


def test_learned_categories_that_differ_between_folds_fall_back(small_demo, frame):
    base = _ensemble(small_demo, "lightgbm").features
    # `task_category` without fixed values: each fold learns the categories it saw, and a rare
    # category kept on one labeled session only is absent from that session's fold model
    cols = tuple(FeatureSpec(c.name, c.kind, () if c.name == "task_category" else c.values,
                             c.options) for c in base.columns)
    features = FeatureSet(name="auto_categories", columns=cols)
    labeled = frame[frame["rating"].notna()]
    rare = labeled["task_category"].value_counts().index[-1]
    keep = (labeled["task_category"] != rare).to_numpy().copy()
    keep[np.flatnonzero(~keep)[0]] = True
    small = frame.drop(index=labeled.index[~keep])
    path = small_demo.parent / "rare_category.parquet"
    small.to_parquet(path, index=False)
    ensemble = _ensemble(path, "lightgbm", features)
    cats = [m.steps[0][1].named_transformers_["onehot"].categories_ for m in ensemble.models]
    differ = any(not all(np.array_equal(a, b) for a, b in zip(c, cats[0], strict=True))
                 or len(c) != len(cats[0]) for c in cats)
    fast = FastPredictor(ensemble)
    assert (fast.shared is None) == differ
    assert differ, "the fixture should make the folds' categories differ"
    assert fast.cache is None and "per fold" in fast.mode
    np.testing.assert_array_equal(fast.predict(small), ensemble.predict(small))


def test_transforms_with_a_fitted_scaler_are_never_shared():
    X = pd.DataFrame({"a": [0.0, 1.0, 2.0, 3.0], "c": ["x", "y", "x", "y"]})

    def make():
        return ColumnTransformer([("onehot", OneHotEncoder(categories=[["x", "y"]],
                                                           sparse_output=False), ["c"]),
                                  ("numeric", "passthrough", ["a"])])

    assert transforms_equal(make().fit(X), make().fit(X.iloc[:2]))  # fixed categories
    scaled = ColumnTransformer([("numeric", StandardScaler(), ["a"])])
    assert not transforms_equal(scaled.fit(X), scaled.fit(X))  # a same-object scaler too
    assert shared_transform([]) is None


def test_distinct_rows_and_cache_verify_values_not_only_hashes():
    X = pd.DataFrame({"c": ["a", "b", "a", "a"], "v": [1.0, np.nan, 1.0, 2.0]})
    first, codes = distinct_rows(X)
    assert first.tolist() == [0, 1, 3] and codes.tolist() == [0, 1, 0, 2]
    pd.testing.assert_frame_equal(X.iloc[first].iloc[codes].reset_index(drop=True), X)
    cache = PredictionCache(capacity=2)
    rows = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    cache.add(rows, np.array([10, 11, 12], dtype=np.uint64), np.array([3.0, 4.0, 5.0]))
    assert len(cache) == 2  # capacity
    # same hash as row 0 but another row (a forced collision): not a hit
    hit, values = cache.lookup(np.array([[0.0, 1.0], [5.0, 5.0]]),
                               np.array([10, 10], dtype=np.uint64))
    assert hit.tolist() == [True, False] and values.tolist() == [3.0]
