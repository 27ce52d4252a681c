"""Fast clustered paths: dense integer user codes, per-code sums, t quantiles without scipy.stats.

Integer ids that are already small codes skip the hash factorization, and a sample with more
sessions than codes is summed over all codes; both must give the statistics of the general
path (string ids, factorized; sums over the clusters a sample touches).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm, cluster_codes
from pulse_ml.stats.cluster_moments import session_moments
from pulse_ml.stats.engine_parts import p_value, quantile


def _arms(seed: int, n: int = 300, big_n: int = 20_000, users: int = 900, gap: int = 1):
    rng = np.random.default_rng(seed)
    out = []
    for shift in (0.0, 0.2):
        x = rng.normal(size=n + big_n)
        y = np.clip(np.round(3.8 + shift + x + rng.normal(size=n + big_n)), 1, 5)
        f = 3.8 + 0.8 * x + 0.3 * rng.normal(size=n + big_n)
        u = rng.integers(0, users, n + big_n) * gap  # gap > 1: ids no sample uses
        out.append((y[:n], f[:n], f[n:], u[:n], u[n:]))
    return out


def _compare(arms, ids):
    (yc, fc, fuc, uc, uuc), (yt, ft, fut, ut, uut) = arms
    return compare_arms(Arm(yc, fc, fuc, users=ids(uc), users_unl=ids(uuc)),
                        Arm(yt, ft, fut, users=ids(ut), users_unl=ids(uut)))


@pytest.mark.parametrize("gap", [1, 2])
def test_dense_integer_codes_give_the_factorized_string_ids_results(gap):
    arms = _arms(3, gap=gap)
    dense = _compare(arms, lambda u: u)
    strings = _compare(arms, lambda u: np.char.add("user-", u.astype(str)).astype(object))
    for est in ("naive", "augmented"):
        a, b = getattr(dense, est), getattr(strings, est)
        for field in ("effect", "ci_lower", "ci_upper", "se", "p_value", "df"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-10, abs=1e-12)
    assert dense.n_clusters == strings.n_clusters
    assert dense.n_labeled_clusters == strings.n_labeled_clusters
    assert dense.lambda_control == pytest.approx(strings.lambda_control, rel=1e-10, abs=1e-12)


def test_large_ids_and_negative_ids_are_factorized():
    keys = [np.array([5, 10**9]), np.array([-1, 5, 5])]
    codes, n_codes = cluster_codes(keys, [2, 3], ["a", "b"])
    assert n_codes == 3
    assert codes[0][0] == codes[1][1] == codes[1][2]
    dense, n_dense = cluster_codes([np.array([0, 3]), np.array([3, 1])], [2, 2], ["a", "b"])
    assert n_dense == 4 and dense[0].tolist() == [0, 3] and dense[1].tolist() == [3, 1]


def test_sums_over_all_codes_equal_sums_over_touched_clusters():
    # the same sessions with extra unused codes: n_codes > sessions switches the big samples
    # to the touched-cluster path; every moment must agree
    rng = np.random.default_rng(11)
    n, big_n, r, users = 50, 4_000, 2, 700
    arms = []
    for _ in range(2):
        arms.append((rng.integers(0, users, n), rng.normal(size=(r, n)),
                     rng.normal(size=(r, n)), np.ones((r, n)),
                     rng.integers(0, users, big_n), rng.normal(size=(r, big_n))))
    full = session_moments(arms, users)
    touched = session_moments(arms, 10 * big_n)
    for name in full.__dataclass_fields__:
        np.testing.assert_allclose(getattr(full, name), getattr(touched, name), rtol=1e-12,
                                   atol=1e-9, err_msg=name)


def test_t_quantiles_and_p_values_equal_scipy_stats():
    df = np.array([1.0, 2.5, 7.0, 40.0, 1e7, np.inf])
    for alpha in (0.01, 0.05, 0.1):
        np.testing.assert_allclose(quantile(alpha, df), stats.t.ppf(1 - alpha / 2, df),
                                   rtol=1e-12)
    effect, se = np.array([0.3, -0.2, 0.0, 1.0, 2.0, 0.5]), np.array([0.1, 0.4, 1.0, 0.0, 1, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = 2 * stats.t.sf(np.abs(effect) / se, df)
    expected[se == 0] = np.nan
    np.testing.assert_allclose(p_value(effect, se, df), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64])
def test_negative_ids_of_every_integer_width_are_not_taken_as_codes(dtype):
    # the one-pass check reads ids as unsigned: a negative id must still fail it
    ids = np.array([3, 1, 0, 2], dtype=dtype)
    codes, n_codes = cluster_codes([ids, ids[:2]], [4, 2], ["a", "b"])
    assert n_codes == 4 and codes[0].tolist() == [3, 1, 0, 2]
    if np.issubdtype(dtype, np.signedinteger):
        bad = np.array([3, -1, 0, 2], dtype=dtype)
        codes, n_codes = cluster_codes([bad, ids[:2]], [4, 2], ["a", "b"])
        assert n_codes == 5  # factorized: five distinct ids, codes in order of appearance
        assert codes[0].tolist() == [0, 1, 2, 3] and codes[1].tolist() == [0, 4]
