import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import check_grad
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from pulse_ml.models.ordinal import OrdinalLogitRegressor, _cumulative_logit_nll_grad

TRUE_THRESHOLDS = np.array([-2.0, -0.5, 0.5, 2.0])  # 5 classes: ratings 1..5


def simulate_proportional_odds(
    n: int, beta: np.ndarray, thresholds: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (X, y) with P(y <= k | x) = sigmoid(theta_k - x @ beta), ratings 1..K."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, beta.shape[0]))
    latent = X @ beta + rng.logistic(size=n)
    y = 1.0 + np.searchsorted(thresholds, latent)
    return X, y


@pytest.mark.slow
@parametrize_with_checks([OrdinalLogitRegressor()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    n, p, n_classes = 200, 4, 5
    X = rng.normal(size=(n, p))
    k = rng.integers(0, n_classes, n)
    w = rng.random(n)
    w /= w.sum()
    x0 = np.concatenate((rng.normal(size=p), [-1.0], 0.5 * rng.normal(size=n_classes - 2)))

    def fun(x):
        return _cumulative_logit_nll_grad(x, X, k, w, 0.3)[0]

    def jac(x):
        return _cumulative_logit_nll_grad(x, X, k, w, 0.3)[1]

    assert check_grad(fun, jac, x0) < 1e-5 * np.linalg.norm(jac(x0))


def test_recovers_true_parameters():
    beta = np.array([1.0, -0.5, 0.25, 0.0])
    X, y = simulate_proportional_odds(5000, beta, TRUE_THRESHOLDS, seed=1)
    model = OrdinalLogitRegressor(C=1e4).fit(X, y)
    np.testing.assert_array_equal(model.classes_, [1.0, 2.0, 3.0, 4.0, 5.0])
    # Standard errors at n=5000 are ~0.02-0.04: 0.1 is ~3 SE.
    np.testing.assert_allclose(model.coef_, beta, atol=0.1)
    np.testing.assert_allclose(model.thresholds_, TRUE_THRESHOLDS, atol=0.15)
    assert np.all(np.diff(model.thresholds_) > 0)


def test_predicts_expected_rating_within_class_range():
    X, y = simulate_proportional_odds(1000, np.array([2.0, -1.0]), TRUE_THRESHOLDS, seed=2)
    model = OrdinalLogitRegressor().fit(X, y)
    X_far = np.vstack([X, 100 * X[:10], [[1e6, -1e6], [-1e6, 1e6]]])
    pred = model.predict(X_far)
    proba = model.predict_class_proba(X_far)
    assert pred.min() >= 1.0 and pred.max() <= 5.0
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(pred, proba @ model.classes_)
    # Extreme inputs saturate at the end classes.
    np.testing.assert_allclose(pred[-2:], [5.0, 1.0], atol=1e-6)


def test_targets_are_rounded_to_integer_classes():
    X, _ = simulate_proportional_odds(40, np.array([1.0]), TRUE_THRESHOLDS, seed=3)
    y = np.tile([1.2, 2.6, 3.4, 4.5], 10)  # rint: 1, 3, 3, 4 (half to even)
    model = OrdinalLogitRegressor().fit(X, y)
    np.testing.assert_array_equal(model.classes_, [1.0, 3.0, 4.0])
    assert model.thresholds_.shape == (2,)


def test_single_class_predicts_that_class():
    X = np.random.default_rng(4).normal(size=(20, 3))
    model = OrdinalLogitRegressor().fit(X, np.full(20, 4.2))
    np.testing.assert_array_equal(model.classes_, [4.0])
    np.testing.assert_array_equal(model.predict(X), np.full(20, 4.0))
    np.testing.assert_array_equal(model.predict_class_proba(X), np.ones((20, 1)))
    assert model.n_iter_ == 0


def test_balanced_class_weight_changes_fit_on_imbalanced_classes():
    X, y = simulate_proportional_odds(
        2000, np.array([1.0, 0.5]), np.array([-4.0, -3.0, -2.0, -1.0]), seed=5
    )
    counts = np.unique(y, return_counts=True)[1]
    assert counts.max() > 5 * counts.min()  # the data really are imbalanced
    plain = OrdinalLogitRegressor().fit(X, y)
    balanced = OrdinalLogitRegressor(class_weight="balanced").fit(X, y)
    # Up-weighting the rare low ratings pulls predictions down and moves the thresholds.
    assert balanced.predict(X).mean() < plain.predict(X).mean() - 0.3
    assert np.abs(balanced.thresholds_ - plain.thresholds_).max() > 0.5


def test_class_weight_equals_equivalent_sample_weight():
    X, y = simulate_proportional_odds(500, np.array([1.0, -1.0]), TRUE_THRESHOLDS, seed=6)
    classes, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    sw_balanced = (len(y) / (len(classes) * counts))[inverse]
    a = OrdinalLogitRegressor(class_weight="balanced").fit(X, y)
    b = OrdinalLogitRegressor().fit(X, y, sample_weight=sw_balanced)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.thresholds_, b.thresholds_, rtol=1e-5, atol=1e-6)

    cw = {1: 3.0, 5: 0.5, 7: 10.0}  # key 7 is not a class: ignored
    c = OrdinalLogitRegressor(class_weight=cw).fit(X, y)
    sw_dict = np.select([y == 1, y == 5], [3.0, 0.5], default=1.0)
    d = OrdinalLogitRegressor().fit(X, y, sample_weight=sw_dict)
    np.testing.assert_allclose(c.coef_, d.coef_, rtol=1e-5, atol=1e-6)


def test_larger_c_shrinks_less():
    X, y = simulate_proportional_odds(300, np.array([1.0, -0.7, 0.4]), TRUE_THRESHOLDS, seed=7)
    norms = [
        np.linalg.norm(OrdinalLogitRegressor(C=c).fit(X, y).coef_)
        for c in (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
    ]
    assert np.all(np.diff(norms) > 0), norms
    assert norms[0] < 0.05 * norms[-1]


def test_works_in_pipeline_with_standard_scaler():
    X, y = simulate_proportional_odds(800, np.array([1.0, -1.0, 0.5]), TRUE_THRESHOLDS, seed=8)
    X_raw = X * np.array([1e-3, 1.0, 1e3]) + np.array([5.0, -2.0, 1e4])
    pipe = make_pipeline(StandardScaler(), OrdinalLogitRegressor(C=2.0, class_weight="balanced"))
    pipe.fit(X_raw, y)
    manual = OrdinalLogitRegressor(C=2.0, class_weight="balanced").fit(
        StandardScaler().fit_transform(X_raw), y
    )
    np.testing.assert_allclose(pipe[-1].coef_, manual.coef_)
    pred = pipe.predict(X_raw)
    assert 1.0 <= pred.min() and pred.max() <= 5.0
    assert np.corrcoef(pred, y)[0, 1] > 0.6


def test_sparse_input_matches_dense():
    X, y = simulate_proportional_odds(400, np.array([1.0, -1.0, 0.5]), TRUE_THRESHOLDS, seed=14)
    X[np.abs(X) < 0.8] = 0.0
    dense = OrdinalLogitRegressor().fit(X, y)
    sparse = OrdinalLogitRegressor().fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(sparse.predict(sp.csc_matrix(X)), dense.predict(X), rtol=1e-10)


def test_pickle_roundtrip_reproduces_predictions():
    X, y = simulate_proportional_odds(300, np.array([1.0, -1.0]), TRUE_THRESHOLDS, seed=9)
    model = OrdinalLogitRegressor(C=2.0, class_weight="balanced").fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert restored.get_params() == model.get_params()


@pytest.mark.slow
def test_many_distinct_continuous_targets():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(2000, 5))
    y = 100 * X.sum(axis=1) + 30 * rng.normal(size=2000)  # hundreds of rounded classes
    model = OrdinalLogitRegressor().fit(X, y)
    assert model.classes_.shape[0] > 500
    assert model.n_iter_ < model.max_iter
    assert model.score(X, y) > 0.9


def test_warns_when_max_iter_is_reached():
    X, y = simulate_proportional_odds(300, np.array([1.0, -1.0]), TRUE_THRESHOLDS, seed=11)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        OrdinalLogitRegressor(max_iter=1).fit(X, y)


@pytest.mark.parametrize(
    "params",
    [{"C": 0.0}, {"C": -1.0}, {"max_iter": 0}, {"tol": 0.0}, {"class_weight": "auto"}],
)
def test_rejects_invalid_parameters(params):
    X, y = simulate_proportional_odds(50, np.array([1.0]), TRUE_THRESHOLDS, seed=12)
    with pytest.raises(ValueError):
        OrdinalLogitRegressor(**params).fit(X, y)


def test_fits_10k_by_30_and_converges():
    """Its speed (target: under a second) is measured by ``perf/ordinal_bench.py``, not here."""
    rng = np.random.default_rng(13)
    beta = 0.3 * rng.normal(size=30)
    X, y = simulate_proportional_odds(10_000, beta, TRUE_THRESHOLDS, seed=13)
    model = OrdinalLogitRegressor(C=2.0, class_weight="balanced").fit(X, y)
    assert model.n_iter_ < model.max_iter
