import numpy as np
import pytest
from scipy import stats

from pulse_ml.stats.permutation import permutation_pvalue


def _scipy_pvalue(y_c, y_t, seed):
    res = stats.permutation_test(
        (y_t, y_c),
        lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        permutation_type="independent",
        n_resamples=9999,
        vectorized=True,
        rng=seed,
    )
    return res.pvalue


@pytest.mark.parametrize("shift", [0.0, 0.4, 0.9])
def test_stats_permutation_matches_scipy_approximately(shift):
    rng = np.random.default_rng(7)
    y_c, y_t = rng.normal(size=25), rng.normal(shift, 1.0, size=30)
    ours = permutation_pvalue(y_c, y_t, n_permutations=9999, seed=1)
    ref = _scipy_pvalue(y_c, y_t, 1)
    assert ours == pytest.approx(ref, abs=0.02)


def test_stats_permutation_seeded_bounds_and_ties():
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert permutation_pvalue(y, y, 500, seed=3) == 1.0  # identical samples: every split ties
    p1 = permutation_pvalue(y, y + 10, 2000, seed=3)
    assert p1 == permutation_pvalue(y, y + 10, 2000, seed=3)
    # only the 2 extreme splits of C(10,5)=252 are as extreme: p ~ 2/252
    assert p1 == pytest.approx(2 / 252, abs=0.006)
    assert p1 >= 1 / 2001
    with pytest.raises(ValueError):
        permutation_pvalue(y, y, 0)


def test_stats_permutation_uniform_under_null():
    rng = np.random.default_rng(123)
    reps = 300
    data = rng.integers(1, 6, size=(reps, 40)).astype(float)  # star ratings, many ties
    p = np.array([permutation_pvalue(d[:18], d[18:], 500, seed=i) for i, d in enumerate(data)])
    assert 0.03 <= np.mean(p <= 0.05) <= 0.08
    assert 0.07 <= np.mean(p <= 0.10) <= 0.14
    assert stats.kstest(p, "uniform").pvalue > 0.01
