"""Issue 19: the intervals stay valid where real raters live (seeded simulations).

Designs in :mod:`realistic_sims`: skewed 1-5 stars, users with Pareto-many sessions, raters who
differ from non-raters. Monte-Carlo s.d. of a coverage estimate near 0.95: 0.0034 at R = 4,000,
0.0040 at 3,000, so the 0.94 bar sits 2.5-3 s.d. below 0.95. Measured before this change (same
seeds): augmented coverage 0.923 / 0.879 / 0.779 at label shifts of rank-biserial 0.17 / 0.32 /
0.5 and 0.85 with users; CR1 naive 0.90 with concentrated raters. The ``*_old`` assertions show
each test can fail: they run the same data through the rules without the new term.
"""

import numpy as np
import pytest
import realistic_sims as rs
import validity_sims as sims

from pulse_ml.errors import PulseError
from pulse_ml.stats.arm_batch import compare_batch
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm

OLD = {"cr2": False, "lambda_noise": False}


@pytest.mark.slow
@pytest.mark.parametrize("rb", [0.17, 0.32, 0.5])
def test_stats_label_shift_augmented_covers_with_lambda_noise(rb):
    arms, kw, tau = rs.label_shift(4000, 1, rb=rb)
    b = compare_batch(*arms, **kw)
    naive, aug = sims.coverage(b, tau)
    print(f"rb={rb}: naive {naive:.4f} augmented {aug:.4f}")
    assert naive >= 0.94 and aug >= 0.94
    # the gain is kept: a common lambda cancels a shift shared by both arms
    assert np.mean(b.ci_reduction_pct) >= 5.0
    if rb >= 0.32:  # without lambda's noise the same joint lambdas under-cover
        old = compare_batch(*arms, **kw, **OLD, lam_mode="per_arm")
        assert sims.coverage(old, tau)[1] < 0.93


@pytest.mark.slow
def test_stats_label_shift_with_users_covers():
    arms, kw, tau = rs.label_shift(3000, 12, rb=0.32, users=True)
    b = compare_batch(*arms, **kw)
    naive, aug = sims.coverage(b, tau)
    print(f"users: naive {naive:.4f} augmented {aug:.4f}")
    assert naive >= 0.94 and aug >= 0.94


@pytest.mark.slow
def test_stats_lambda_noise_is_second_order_without_shift():
    # kind data (i.i.d., r 0.3-0.8, n >= 50): the new term costs < 1% of width (measured
    # 0.2-0.6%) and coverage stays
    for rho, n in ((0.3, 50), (0.8, 50), (0.5, 200)):
        arms, kw, tau = sims.iid(2000, n, 10 * n, rho=rho, seed=int(10 * rho) + n)
        new, old = compare_batch(*arms, **kw), compare_batch(*arms, **kw, **OLD)
        ratio = np.mean(new.aug_upper - new.aug_lower) / np.mean(old.aug_upper - old.aug_lower)
        assert 1.0 - 1e-9 <= ratio < 1.01
        assert sims.coverage(new, tau)[1] >= 0.935


@pytest.mark.slow
def test_stats_strong_predictor_few_labels_covers():
    for n in (10, 20, 30):
        arms, kw, tau = rs.strong_few(4000, 5 + n, n=n)
        b = compare_batch(*arms, **kw)
        naive, aug = sims.coverage(b, tau)
        print(f"strong n={n}: naive {naive:.4f} augmented {aug:.4f}")
        assert naive >= 0.94 and aug >= 0.94
        assert np.mean(b.ci_reduction_pct) > 25  # r ~ 0.85: a large, real gain remains


@pytest.mark.slow
def test_stats_concentrated_raters_cr2_covers_and_cr1_did_not():
    arms, kw, tau = rs.concentrated(4000, 4)  # ~200 labels from 35-50 users, G* about 4-5
    new, old = compare_batch(*arms, **kw), compare_batch(*arms, **kw, **OLD)
    print("CR2", sims.coverage(new, tau), "CR1", sims.coverage(old, tau))
    assert sims.coverage(old, tau)[0] < 0.91  # CR1 with t(G* - 1)
    assert min(sims.coverage(new, tau)) >= 0.925  # CR2; the rest is flagged (next test)
    arms, kw, tau = rs.concentrated(4000, 5)  # G* about 28
    assert min(sims.coverage(compare_batch(*arms, **kw), tau)) >= 0.94


def test_stats_concentrated_raters_warn_with_kish_count():
    rng = np.random.default_rng(3)
    users = np.r_[np.zeros(150, int), np.arange(1, 41)]  # one user gives 150 of 190 ratings
    y = [rng.integers(1, 6, users.size).astype(float) for _ in (0, 1)]
    f = [v + rng.normal(size=v.size) for v in y]
    fu = [rng.normal(3.9, 1, 500) for _ in (0, 1)]
    res = compare_arms(Arm(y[0], f[0], fu[0], users=users, users_unl=np.arange(500) + 1000),
                       Arm(y[1], f[1], fu[1], users=users + 100, users_unl=np.arange(500) + 2000))
    text = " ".join(res.warnings)
    assert "41 labeled users" in text and "effective users (Kish" in text
    assert res.effective_users is not None and res.effective_users[0] < 5


def test_stats_degenerate_paired_variance_is_refused():
    # two users, each rating both arms one star higher in treatment: the cluster-robust
    # variance is 0; the old rules printed CI [1.000, 1.000] with p = 1e-8
    y_c, y_t = np.array([2.0, 2, 4, 4]), np.array([3.0, 3, 5, 5])
    users = np.array(["a", "a", "b", "b"])
    c, t = (y_c, y_c + 0.1, np.full(20, 3.0)), (y_t, y_t + 0.1, np.full(20, 4.0))
    unl = np.repeat(["a", "b"], 10)
    with pytest.raises(PulseError, match="within-user difference"):
        compare_arms(Arm(*c, users=users, users_unl=unl), Arm(*t, users=users, users_unl=unl))
    # the same ratings from 4 different users per arm are fine
    res = compare_arms(Arm(*c, users=np.arange(4)), Arm(*t, users=np.arange(4, 8)))
    assert res.naive.se > 0.3


def test_stats_label_shift_note_is_driven_by_consequence():
    rng = np.random.default_rng(7)

    def arm(shift):
        x_l, x_u = rng.normal(shift, 1, 300), rng.normal(0, 1, 3000)
        y = np.clip(np.round(3.9 + 0.8 * x_l + rng.normal(size=300)), 1, 5)
        return y, 3.9 + 0.8 * x_l, 3.9 + 0.8 * x_u

    shifted = compare_arms(Arm(*arm(0.6)), Arm(*arm(0.6)))
    assert shifted.shift_flagged and any("raters differ" in w for w in shifted.warnings)
    assert shifted.prediction_shift[0] < -0.3
    quiet = compare_arms(Arm(*arm(0.0)), Arm(*arm(0.0)))
    assert not quiet.shift_flagged


@pytest.mark.slow
def test_stats_reweighted_label_shift_covers():
    # shift-aware PPI++ with the true propensity weights: the weighted prediction mean still
    # moves with lambda; measured 0.934 without lambda's noise (CR1), 0.954 with it (R = 4,000)
    arms, kw, tau = rs.weighted_shift(4000, 21, rb=0.5)
    naive, aug = sims.coverage(compare_batch(*arms, **kw), tau)
    assert naive >= 0.94 and aug >= 0.94
    assert sims.coverage(compare_batch(*arms, **kw, **OLD), tau)[1] < 0.94
