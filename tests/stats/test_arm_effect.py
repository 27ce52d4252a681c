"""compare_arms: equals two ppi_py calls without clusters; cluster-robust coverage with users."""

import dataclasses
import importlib
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from pulse_ml.errors import PulseError
from pulse_ml.stats.arm_effect import ArmComparison, compare_arms, theoretical_width_ratio

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
    res = compare_arms(*c, *t, alpha=0.05)
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
    assert res.n_clusters is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.alpha = 0.1  # type: ignore[misc]


def test_stats_compare_reduction_tracks_theoretical_ratio():
    rng = np.random.default_rng(5)
    n, big_n = 2000, 20000
    c, t = _arm(rng, 3.0, n, big_n), _arm(rng, 3.2, n, big_n)
    res = compare_arms(*c, *t)
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
    iid = compare_arms(*c, *t)
    single = compare_arms(
        *c, *t, clusters_c=np.arange(n), clusters_t=np.arange(1000, 1000 + n)
    )  # unlabeled sessions: one cluster each
    assert single.n_clusters == 2 * (n + big_n)
    cr1 = np.sqrt((n + big_n) / (n + big_n - 1))
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


def test_stats_compare_user_in_both_arms_gets_covariance_term():
    # every user appears in both arms with a big user effect: the effect is within-user,
    # so the clustered effect se must be far below the sum-of-variances one.
    rng = np.random.default_rng(2)
    users = np.repeat(np.arange(50), 4)
    u = 3 * rng.normal(size=50)[users]
    yc, yt = u + rng.normal(size=200), u + 0.2 + rng.normal(size=200)
    fc, ft = u + rng.normal(size=200), u + rng.normal(size=200)
    fuc, fut = fc + rng.normal(size=200), ft + rng.normal(size=200)
    res = compare_arms(
        yc,
        fc,
        fuc,
        yt,
        ft,
        fut,
        clusters_c=users,
        clusters_t=users,
        clusters_unl_c=users,
        clusters_unl_t=users,
    )
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
        iid = compare_arms(yc, fc, fuc, yt, ft, fut)
        cl = compare_arms(
            yc,
            fc,
            fuc,
            yt,
            ft,
            fut,
            clusters_c=cc,
            clusters_unl_c=cuc,
            clusters_t=ct,
            clusters_unl_t=cut,
        )
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
        compare_arms(y, f, fu, y, f, fu, clusters_c=np.arange(4))
    with pytest.raises(PulseError, match="y_t: need at least 2"):
        compare_arms(y, f, fu, y[:1], f[:1], fu)
    with pytest.raises(PulseError, match="missing"):
        compare_arms(
            y, f, fu, y, f, fu, clusters_c=np.array(["a", None, "b", "c", "d"], dtype=object)
        )
    with pytest.raises(PulseError, match="at least 2 users"):
        compare_arms(y, f, fu, y, f, fu, clusters_c=np.zeros(5), clusters_unl_c=np.zeros(9))
