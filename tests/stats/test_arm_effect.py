"""compare_arms: the legacy formulas equal two ppi_py calls; exact small-sample formulas; refusals.

Coverage of the corrected defaults is checked by the seeded simulations in test_validity.py.
"""

import dataclasses
import importlib
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.stats import norm
from scipy.stats import t as student_t

from pulse_ml.errors import PulseError
from pulse_ml.stats.arm_effect import ArmComparison, compare_arms, theoretical_width_ratio
from pulse_ml.stats.arm_inputs import Arm

TOL = 1e-10
Z = norm.ppf(0.975)


@pytest.fixture(scope="module")
def ppi_py():
    with warnings.catch_warnings():  # ppi_py silences all warnings on import
        warnings.simplefilter("ignore")
        return importlib.import_module("ppi_py")


def _arm(rng, mu, n, big_n, signal=1.0):
    x = rng.normal(size=n + big_n)
    y = mu + x + rng.normal(size=n + big_n)
    f = signal * x + 0.3 * rng.normal(size=n + big_n)
    return y[:n], f[:n], f[n:]


@pytest.mark.parametrize("n,N,signal", [(30, 100, 1.0), (200, 5000, 0.5), (80, 400, 0.0)])
def test_stats_compare_without_clusters_equals_two_ppi_py_calls(n, N, signal, ppi_py):
    rng = np.random.default_rng(n + N)
    c, t = _arm(rng, 3.0, n, N, signal), _arm(rng, 3.3, n + 7, N + 11, signal)
    # The oracle: ppi_py's asymptotic formulas (ddof 0, normal quantile, per-arm lambda). The
    # default small-sample rules (t quantiles, ddof 1, joint lambda, tuning inflation) differ on
    # purpose -- they are what makes n = 10..30 cover -- so the equality is checked on the
    # explicit legacy option that reproduces the old numbers.
    res = compare_arms(Arm(*c), Arm(*t), alpha=0.05, small_sample=False, lam_mode="per_arm")
    halves, points = [], []
    for y, f, fu in (c, t):
        lo, hi = np.ravel(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05))
        halves.append((hi - lo) / 2)
        points.append(float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu))[0]))
    assert res.mean_control_augmented == pytest.approx(points[0], abs=TOL)
    assert res.mean_treatment_augmented == pytest.approx(points[1], abs=TOL)
    assert res.augmented.effect == pytest.approx(points[1] - points[0], abs=TOL)
    half = np.hypot(*halves)
    assert res.augmented.ci_lower == pytest.approx(points[1] - points[0] - half, abs=TOL)
    assert res.augmented.ci_upper == pytest.approx(points[1] - points[0] + half, abs=TOL)
    assert res.se_control_augmented * Z == pytest.approx(halves[0], abs=TOL)
    # naive = two classical intervals
    nh = [np.diff(np.ravel(ppi_py.classical_mean_ci(a[0], alpha=0.05)))[0] / 2 for a in (c, t)]
    assert res.naive.effect == pytest.approx(t[0].mean() - c[0].mean(), abs=TOL)
    assert res.naive.width / 2 == pytest.approx(np.hypot(*nh), abs=TOL)
    # lambdas: the interval of ppi_py at our lambda is the power-tuned one
    lo, hi = np.ravel(ppi_py.ppi_mean_ci(*c, alpha=0.05, lam=res.lambda_control))
    assert (hi - lo) / 2 == pytest.approx(halves[0], abs=TOL)
    assert res.ci_reduction_pct == pytest.approx(
        100 * (1 - res.augmented.width / res.naive.width), abs=1e-9
    )
    assert res.n_clusters is None and res.naive.df == np.inf
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.alpha = 0.1  # type: ignore[misc]


def test_stats_compare_reduction_tracks_theoretical_ratio():
    rng = np.random.default_rng(5)
    n, big_n = 2000, 20000
    c, t = _arm(rng, 3.0, n, big_n), _arm(rng, 3.2, n, big_n)
    res = compare_arms(Arm(*c), Arm(*t))
    rho = np.corrcoef(c[0], c[1])[0, 1]
    ratio = res.augmented.width / res.naive.width
    assert ratio == pytest.approx(theoretical_width_ratio(rho, n, big_n), abs=0.03)
    assert isinstance(res, ArmComparison) and res.ci_reduction_pct > 20


def test_stats_theoretical_width_ratio_values():
    assert theoretical_width_ratio(0.0, 100, 1000) == 1.0
    assert theoretical_width_ratio(1.0, 100, 300) == pytest.approx(0.5)
    np.testing.assert_allclose(
        theoretical_width_ratio(np.array([0.5, 0.8]), 100, 900),
        np.sqrt(1 - np.array([0.25, 0.64]) * 0.9),
    )


def test_stats_compare_singleton_clusters_reduce_to_iid_formulas():
    rng = np.random.default_rng(11)
    n, big_n = 300, 3000
    c, t = _arm(rng, 3.0, n, big_n), _arm(rng, 3.1, n, big_n)
    legacy = {"small_sample": False, "lam_mode": "per_arm"}
    iid = compare_arms(Arm(*c), Arm(*t), **legacy)
    single = compare_arms(Arm(*c, users=np.arange(n)), Arm(*t, users=np.arange(1000, 1000 + n)),
                          **legacy)  # unlabeled sessions: one cluster each
    assert single.n_clusters == 2 * (n + big_n) and single.n_labeled_clusters == 2 * n
    cr1 = np.sqrt(n / (n - 1))  # CR1 counts labeled clusters only
    y, f, fu = c
    # lambda = exact minimizer of Var0(Y - lam f)/n + lam^2 Var0(f~)/N
    lam = np.cov(y, f, ddof=0)[0, 1] / (f.var() + n / big_n * fu.var())
    assert single.lambda_control == pytest.approx(min(1.0, lam), abs=1e-12)
    se = np.sqrt(np.var(y - lam * f) / n + lam**2 * fu.var() / big_n)
    assert single.se_control_augmented == pytest.approx(cr1 * se, rel=1e-10)
    assert single.se_control_naive == pytest.approx(cr1 * iid.se_control_naive, rel=1e-10)
    assert single.augmented.se <= iid.augmented.se * cr1 * (1 + 1e-12)  # optimal lambda
    assert single.augmented.se == pytest.approx(
        np.hypot(single.se_control_augmented, single.se_treatment_augmented), rel=1e-12
    )


def test_stats_compare_default_iid_formulas_are_welch_and_ddof1():
    rng = np.random.default_rng(12)
    n_c, n_t, big_n = 25, 40, 400
    c, t = _arm(rng, 3.0, n_c, big_n), _arm(rng, 3.4, n_t, big_n + 50)
    res = compare_arms(Arm(*c), Arm(*t))
    (yc, fc, fuc), (yt, _, _) = c, t
    # naive: exactly Welch's t interval
    v_c, v_t = yc.var(ddof=1) / n_c, yt.var(ddof=1) / n_t
    welch_df = (v_c + v_t) ** 2 / (v_c**2 / (n_c - 1) + v_t**2 / (n_t - 1))
    assert res.naive.se == pytest.approx(np.sqrt(v_c + v_t), rel=1e-12)
    assert res.naive.df == pytest.approx(welch_df, rel=1e-10)
    half = student_t.ppf(0.975, welch_df) * np.sqrt(v_c + v_t)
    assert res.naive.width == pytest.approx(2 * half, rel=1e-10)
    assert res.naive.p_value == pytest.approx(
        stats.ttest_ind(yt, yc, equal_var=False).pvalue, rel=1e-9
    )
    # augmented control arm: ddof-1 variances, the pooled floor, the tuning inflation
    lam = res.lambda_control
    assert 0 < lam < 1
    s2_unl = max(fuc.var(ddof=1), np.concatenate([fc, fuc]).var(ddof=1))
    v_in = np.var(yc - lam * fc, ddof=1) / n_c + lam**2 * s2_unl / big_n
    s_dd = fc.var(ddof=1) / n_c + fuc.var(ddof=1) / big_n
    h = s_dd / (s_dd + (s2_unl - fuc.var(ddof=1)) / big_n)  # share not from the floor
    # lambda is shrunk to the share that minimizes the printed width; the inflation and the
    # df loss scale with that share
    assert 0 < res.lambda_shrink <= 1
    infl = (n_c - 1) / (n_c - 1 - 2 * h * res.lambda_shrink)
    assert res.se_control_augmented == pytest.approx(np.sqrt(infl * v_in), rel=1e-9)
    assert res.mean_control_augmented == pytest.approx(
        yc.mean() + lam * (fuc.mean() - fc.mean()), rel=1e-12
    )
    assert res.warnings and "control arm: only 25 labeled sessions" in res.warnings[0]


def test_stats_compare_user_in_both_arms_gets_covariance_term():
    # every user appears in both arms with a big user effect: the effect is within-user,
    # so the clustered effect se must be far below the sum-of-variances one.
    rng = np.random.default_rng(2)
    users = np.repeat(np.arange(50), 4)
    u = 3 * rng.normal(size=50)[users]
    yc, yt = u + rng.normal(size=200), u + 0.2 + rng.normal(size=200)
    fc, ft = u + rng.normal(size=200), u + rng.normal(size=200)
    fuc, fut = fc + rng.normal(size=200), ft + rng.normal(size=200)
    res = compare_arms(Arm(yc, fc, fuc, users=users, users_unl=users),
                       Arm(yt, ft, fut, users=users, users_unl=users))
    assert res.n_clusters == 50
    assert res.naive.se < 0.5 * np.hypot(res.se_control_naive, res.se_treatment_naive)


def _clustered_data(seed, reps, n_users, per_user, n_lab, tau):
    """Users with strong random effects and many sessions; vectorized over replications."""
    rng = np.random.default_rng(seed)
    sessions = n_users * per_user
    users = np.repeat(np.arange(n_users), per_user)
    u = rng.normal(size=(reps, 2, n_users))[..., users]
    x = rng.normal(size=(reps, 2, sessions))
    arm = np.arange(2)[None, :, None]
    y = 3.0 + tau * arm + u + x + 0.5 * rng.normal(size=(reps, 2, sessions))
    f = x + 0.5 * u + 0.3 * rng.normal(size=(reps, 2, sessions))
    order = rng.random((reps, 2, sessions)).argsort(axis=-1)
    return users, y, f, order[..., :n_lab], order[..., n_lab:]


@pytest.mark.slow
def test_stats_compare_cluster_robust_interval_covers_while_iid_undercovers():
    reps, n_users, tau = 1000, 100, 0.25
    users, y, f, lab, unl = _clustered_data(2024, reps, n_users, 12, 240, tau)
    covered = np.zeros((reps, 4), dtype=bool)
    for r in range(reps):
        arms = []
        for a in range(2):
            li, ui = lab[r, a], unl[r, a]
            arms.append(
                (
                    y[r, a, li],
                    f[r, a, li],
                    f[r, a, ui],
                    users[li] + a * n_users,
                    users[ui] + a * n_users,
                )
            )
        (yc, fc, fuc, cc, cuc), (yt, ft, fut, ct, cut) = arms
        iid = compare_arms(Arm(yc, fc, fuc), Arm(yt, ft, fut))
        cl = compare_arms(Arm(yc, fc, fuc, users=cc, users_unl=cuc),
                          Arm(yt, ft, fut, users=ct, users_unl=cut))
        covered[r] = [
            e.ci_lower <= tau <= e.ci_upper
            for e in (iid.naive, iid.augmented, cl.naive, cl.augmented)
        ]
    iid_naive, iid_aug, cl_naive, cl_aug = covered.mean(axis=0)
    print(
        f"coverage iid naive={iid_naive:.3f} aug={iid_aug:.3f}; "
        f"clustered naive={cl_naive:.3f} aug={cl_aug:.3f}"
    )
    assert cl_aug >= 0.93 and cl_naive >= 0.93
    assert iid_aug <= 0.85 and iid_naive <= 0.88


def test_stats_compare_bad_inputs():
    y, f, fu = np.arange(5.0), np.arange(5.0), np.arange(9.0)
    with pytest.raises(ValueError, match="clusters_c"):
        compare_arms(Arm(y, f, fu, users=np.arange(4)), Arm(y, f, fu))
    with pytest.raises(PulseError, match="y_t: need at least 2"):
        compare_arms(Arm(y, f, fu), Arm(y[:1], f[:1], fu))
    with pytest.raises(PulseError, match="missing"):
        compare_arms(Arm(y, f, fu, users=np.array(["a", None, "b", "c", "d"], dtype=object)),
                     Arm(y, f, fu))
    with pytest.raises(PulseError, match="control arm: all 5 labeled sessions come from one user"):
        compare_arms(Arm(y, f, fu, users=np.zeros(5), users_unl=np.zeros(9)), Arm(y, f, fu))
    with pytest.raises(ValueError, match="lam_mode"):
        compare_arms(Arm(y, f, fu), Arm(y, f, fu), lam_mode="both")


def test_stats_compare_labeled_users_only_count():
    rng = np.random.default_rng(3)
    y, f = rng.normal(size=40), rng.normal(size=40)
    users = np.repeat(np.arange(10), 4)
    fu, users_unl = rng.normal(size=30), rng.integers(0, 10, 30)
    base = compare_arms(Arm(y, f, fu, users=users, users_unl=users_unl),
                        Arm(y + 0.1, f, fu, users=users + 100, users_unl=users_unl + 100))
    # many more unlabeled sessions, from 50 new users: the naive s.e. and df must not move
    fu2 = np.concatenate([fu, rng.normal(size=200)])
    users_unl2 = np.concatenate([users_unl, 1000 + rng.integers(0, 50, 200)])
    more = compare_arms(Arm(y, f, fu2, users=users, users_unl=users_unl2),
                        Arm(y + 0.1, f, fu2, users=users + 100, users_unl=users_unl2 + 100))
    assert more.naive.se == pytest.approx(base.naive.se, rel=1e-12)
    assert more.naive.df == pytest.approx(base.naive.df, rel=1e-12)
    assert more.n_labeled_clusters == base.n_labeled_clusters == 20
    assert more.n_clusters > base.n_clusters
    # labels of one user, unlabeled sessions of 30 users: refused, saying why
    one = np.full(40, "u1", dtype=object)
    with pytest.raises(PulseError, match=r"treatment arm: all 40 labeled sessions come from one "
                       r"user \('u1'\).*unlabeled sessions of other users cannot replace them"):
        compare_arms(Arm(y, f, fu, users=users, users_unl=users_unl),
                     Arm(y, f, fu, users=one, users_unl=np.arange(30)))


def test_stats_compare_refuses_zero_variance_ratings():
    rng = np.random.default_rng(4)
    f, fu = rng.normal(size=20), rng.normal(size=50)
    with pytest.raises(PulseError, match="control arm: all 20 labeled ratings equal 4"):
        compare_arms(Arm(np.full(20, 4.0), f, fu), Arm(rng.normal(size=20), f, fu))


def test_stats_compare_warns_about_few_labels_and_unlabeled_sessions():
    rng = np.random.default_rng(5)
    y, f = rng.normal(size=(2, 200))
    res = compare_arms(Arm(y, f, rng.normal(size=3), users=np.arange(200) % 50,
                           users_unl=np.array([1, 2, 2])),
                       Arm(y[:12] + 0.2, f[:12], rng.normal(size=500), users=np.arange(12) % 3,
                           users_unl=np.arange(500) % 40))
    text = " | ".join(res.warnings)
    assert "treatment arm: only 12 labeled sessions from 3 users (< 30)" in text
    assert "treatment arm: 3 labeled users are too few to tune lambda" in text
    assert res.lambda_treatment == 0.0
    assert "control arm: only 3 unlabeled session(s) from 2 user(s)" in text
    assert "control arm: only 200" not in text  # 200 labels from 50 users is not small
    # a useful predictor with plenty of data: nothing to say
    quiet = compare_arms(Arm(*_arm(rng, 3.0, 200, 2000)), Arm(*_arm(rng, 3.1, 200, 2000)))
    assert quiet.warnings == () and quiet.ci_reduction_pct > 20
    # a useless one: tuning would cost more than it gives, so lambda is shrunk to 0 and the
    # augmented interval is the naive one (the in-sample lambda printed it wider)
    useless = compare_arms(Arm(y, f, rng.normal(size=400)), Arm(y + 0.1, f, rng.normal(size=400)))
    assert useless.lambda_shrink == 0.0 and useless.lambda_control == 0.0
    assert useless.augmented.width == pytest.approx(useless.naive.width, rel=1e-12)
    assert not any("wider than the naive one" in w for w in useless.warnings)
    in_sample = compare_arms(Arm(y, f, rng.normal(size=400)), Arm(y + 0.1, f, rng.normal(size=400)),
                             lam_mode="per_arm")
    assert in_sample.ci_reduction_pct < 0  # the unshrunk tuned lambda: wider
