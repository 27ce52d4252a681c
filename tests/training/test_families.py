"""Every model family's config composes, instantiates and fits; the estimator contract holds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pulse_ml import settings
from pulse_ml.config import compose
from pulse_ml.env.paths import conf_dir
from pulse_ml.jobs.train import model_spec, tuning_settings
from pulse_ml.models.factory import build_pipeline
from pulse_ml.models.preprocess import feature_frame

FAMILIES = sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml"))


def test_all_paper_families_are_configured():
    assert {"ordinal_logit", "random_forest", "hist_gb", "lightgbm", "mean"} <= set(FAMILIES)


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if "forest" in f else f
                                    for f in FAMILIES])  # forests: seconds per fit
@pytest.mark.parametrize("features", ["all", "user", "no_llm"])
def test_family_composes_instantiates_and_fits(family, features, small_demo, pulse_home):
    cfg = compose("train", [f"model={family}", f"features={features}",
                            f"data.path={small_demo}"])
    spec = model_spec(cfg)
    fs = settings.feature_set(cfg)
    assert spec.name == family
    frame = pd.read_parquet(small_demo).dropna(subset=["rating"]).head(200)
    pipe = build_pipeline(spec, fs)
    pipe.fit(feature_frame(frame, fs), frame["rating"].to_numpy())
    pred = pipe.predict(feature_frame(frame, fs))
    assert pred.shape == (200,) and np.isfinite(pred).all()
    assert tuning_settings(cfg).n_splits == 5


def test_search_space_is_separate_from_estimator_kwargs(pulse_home):
    cfg = compose("train", ["model=random_forest"])
    spec = model_spec(cfg)
    assert "search_space" not in spec.estimator
    assert {p.name for p in spec.search_space} >= {"n_estimators", "max_depth"}


def test_unknown_family_is_a_clear_error(pulse_home):
    from pulse_ml.errors import PulseError

    with pytest.raises(PulseError, match="cannot compose"):
        compose("train", ["model=does_not_exist"])


def test_folds_keep_each_users_sessions_together():
    from pulse_ml.training.folds import make_folds

    rng = np.random.default_rng(0)
    users = rng.integers(0, 120, size=600)
    folds = make_folds(600, 5, 42, users)
    per_user = pd.DataFrame({"u": users, "f": folds}).groupby("u")["f"].nunique()
    assert (per_user == 1).all()
    assert sorted(np.unique(folds)) == [0, 1, 2, 3, 4]
    assert np.array_equal(folds, make_folds(600, 5, 42, users))  # seeded
    plain = make_folds(600, 5, 42)
    assert not np.array_equal(plain, folds)
    from pulse_ml.errors import PulseError

    with pytest.raises(PulseError, match="users among the labeled sessions"):
        make_folds(10, 5, 42, np.array([0, 0, 1, 1, 2, 2, 3, 3, 0, 1]))
