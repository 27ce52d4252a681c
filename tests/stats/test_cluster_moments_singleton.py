"""The two-pass path for unlabeled sessions without cluster ids equals the general path."""

from __future__ import annotations

import numpy as np
import pytest

from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm, cluster_codes
from pulse_ml.stats.cluster_moments import session_moments


@pytest.mark.parametrize("clustered_labels", [False, True])
def test_singleton_unlabeled_moments_equal_the_bincount_path(clustered_labels):
    rng = np.random.default_rng(5)
    n, big_n, r = 60, 70_000, 3  # > one block of 2^15 values: the blocked sums are exercised
    y = [rng.normal(size=(r, n)) for _ in range(2)]
    f = [rng.normal(size=(r, n)) for _ in range(2)]
    fu = [rng.normal(loc=3.0, size=(r, big_n)) for _ in range(2)]
    users = [rng.integers(0, 25, n) if clustered_labels else None for _ in range(2)]
    keys = [users[0], None, users[1], None]
    (cl_c, cu_c, cl_t, cu_t), n_codes = cluster_codes(keys, [n, big_n, n, big_n], list("abcd"))
    shift = 0.7
    general = session_moments(
        [(cl_c, y[0], f[0], np.ones((r, n)), cu_c, fu[0] - shift),
         (cl_t, y[1], f[1], np.ones((r, n)), cu_t, fu[1] - shift)], n_codes)
    fast = session_moments(
        [(cl_c, y[0], f[0], np.ones((r, n)), cu_c, fu[0]),
         (cl_t, y[1], f[1], np.ones((r, n)), cu_t, fu[1])], n_codes, (True, True),
        unl_shift=shift)
    for name in general.__dataclass_fields__:
        np.testing.assert_allclose(getattr(fast, name), getattr(general, name), rtol=1e-10,
                                   atol=1e-8, err_msg=name)


def test_compare_arms_unchanged_by_the_fast_path_against_explicit_session_clusters():
    # singleton unlabeled sessions of one arm vs the same sessions with their own cluster id
    # (general path) while the labeled sessions are clustered: the statistics coincide
    rng = np.random.default_rng(9)
    n, big_n = 80, 5000
    args = [rng.normal(size=n), rng.normal(size=n), rng.normal(size=big_n)] * 2
    users = [rng.integers(0, 30, n), rng.integers(0, 30, n)]
    ids_unl = [np.arange(1000, 1000 + big_n), np.arange(10_000, 10_000 + big_n)]
    fast = compare_arms(Arm(*args[:3], users=users[0]), Arm(*args[3:], users=users[1]))
    general = compare_arms(Arm(*args[:3], users=users[0], users_unl=ids_unl[0]),
                           Arm(*args[3:], users=users[1], users_unl=ids_unl[1]))
    for est in ("naive", "augmented"):
        a, b = getattr(fast, est), getattr(general, est)
        assert a.effect == pytest.approx(b.effect, abs=1e-10)
        assert a.ci_lower == pytest.approx(b.ci_lower, abs=1e-9)
        assert a.ci_upper == pytest.approx(b.ci_upper, abs=1e-9)
