"""Randomization inference: engine rows equal compare_arms, exact p-values, coverage, type-I.

Simulations: users randomized by user, heavy-tailed (Pareto) sessions per user, 1-5 star ratings
from a latent user + session scale cut at thresholds giving P(1..5) ~ .10,.08,.15,.27,.40 in
control, ~35% of sessions rated, honest predictions correlated with the latent scale (so they
move with the treatment, as real features do).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.stats import norm

from pulse_ml.errors import PulseError
from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_batch import compare_batch
from pulse_ml.stats.arm_effect import compare_arms
from pulse_ml.stats.arm_inputs import Arm
from pulse_ml.stats.randomization import (
    kish_effective_units,
    prepare,
    pvalues_batch,
    randomization_inference,
)
from pulse_ml.stats.randomization_design import unit_design

THRESHOLDS = np.array([-1.43, -0.99, -0.46, 0.28])  # latent N(0, 1.25) -> .10,.08,.15,.27,.40
SD_USER, SD_SESSION = 0.5, 1.0


def true_mean(shift: float) -> float:
    """Population mean rating when the latent scale is shifted by ``shift``."""
    cdf = norm.cdf((THRESHOLDS - shift) / np.hypot(SD_USER, SD_SESSION))
    return float(5 - cdf.sum())


def simulate(rng, users_per_arm: int, latent_shift: float = 0.0, additive: float = 0.0):
    """One user-randomized case study: arrays for randomization_inference, or None.

    ``latent_shift`` moves the treatment's latent scale (ratings stay 1-5 stars, effect not
    constant); ``additive`` adds a constant to every treated rating (the sharp-null model).
    None when an arm has fewer than 2 labeled users (the analysis refuses such data).
    """
    g = 2 * users_per_arm
    sizes = 2 + np.minimum((rng.pareto(1.2, g) * 2).astype(int), 80)
    users = np.repeat(np.arange(g), sizes)
    treated_user = rng.permutation(g) < users_per_arm
    arm = treated_user[users]
    lat = rng.normal(0, SD_USER, g)[users] + rng.normal(0, SD_SESSION, users.size)
    lat = lat + latent_shift * arm
    y = np.digitize(lat, THRESHOLDS) + 1.0 + additive * arm
    f = 3.9 + 0.5 * (lat + rng.normal(0, 0.8, users.size))
    lab = rng.random(users.size) < 0.35
    parts = [(arm == a) & (lab == lv) for a, lv in ((0, 1), (0, 0), (1, 1), (1, 0))]
    if min(np.unique(users[parts[0]]).size, np.unique(users[parts[2]]).size) < 2:
        return None
    return ([y[parts[0]], f[parts[0]], f[parts[1]], y[parts[2]], f[parts[2]], f[parts[3]]]
            + [users[parts[i]] for i in (0, 2, 1, 3)])


def _arms(data: list) -> tuple[Arm, Arm]:
    """The two arms of :func:`simulate`'s arrays (values, then units c, t, unl_c, unl_t)."""
    return (Arm(*data[:3], users=data[6], users_unl=data[8]),
            Arm(*data[3:6], users=data[7], users_unl=data[9]))


def _reject_rates(users_per_arm, reps, seed, truth, **kw):
    """Share of data sets rejecting H0(truth) at 5% (naive, augmented) and refusals."""
    rng = np.random.default_rng(seed)
    n_permutations = 251 if users_per_arm == 5 else 99  # 5 + 5 users: all 252 assignments
    preps = []
    refused = 0
    while len(preps) < reps:
        data = simulate(rng, users_per_arm, **kw)
        if data is None:
            refused += 1
            continue
        preps.append(prepare(*_arms(data), n_permutations=n_permutations,
                             seed=int(rng.integers(2**31)), max_exhaustive=n_permutations))
    p = np.concatenate([pvalues_batch(preps[i : i + 100], np.full(len(preps[i : i + 100]),
                                                                  truth))
                        for i in range(0, reps, 100)])
    return (p <= 0.05).mean(axis=0), refused


def test_permuted_rows_equal_compare_arms_on_the_permuted_shifted_data():
    rng = np.random.default_rng(3)
    g = 30
    users = np.repeat(np.arange(g), 1 + (rng.pareto(1.3, g) * 3).astype(int))
    lat = rng.normal(0, .5, g)[users] + rng.normal(0, 1, users.size)
    y = np.digitize(lat, THRESHOLDS) + 1.0
    f = 3.8 + 0.5 * (lat + 0.3 * rng.normal(0, 1, users.size))
    lab = rng.random(users.size) < 0.5
    lab[np.unique(users, return_index=True)[1]] = True
    observed = rng.permutation(g) < g // 2
    cy, cf = y[lab].mean(), f[lab].mean()
    raw = cm.cluster_sums(users[lab], (y[lab] - cy)[None], (f[lab] - cf)[None],
                          np.ones((1, lab.sum())), users[~lab], (f[~lab] - cf)[None], g)[0]
    design = unit_design(raw, observed)
    order = np.concatenate([np.flatnonzero(raw[:, 0] > 0), np.flatnonzero(raw[:, 0] == 0)])
    for tau in (0.0, 0.37, -1.2):
        z = rng.permutation(observed)
        arm, y_tau = z[users], y - tau * observed[users]
        sel = [(arm == a) & (lab == lv) for a, lv in ((0, 1), (0, 0), (1, 1), (1, 0))]
        want = compare_arms(Arm(y_tau[sel[0]], f[sel[0]], f[sel[1]], users=users[sel[0]],
                                users_unl=users[sel[1]]),
                            Arm(y_tau[sel[2]], f[sel[2]], f[sel[3]], users=users[sel[2]],
                                users_unl=users[sel[3]]),
                            cr2=False, lambda_noise=False)  # additive moments: CR1, no noise
        flat = design.flat_moments(design.products(z[order][None].astype(float)),
                                   np.array([tau]))[0]
        got = engine.solve(cm.Moments.unflat(flat))
        assert got.aug_effect[0] == pytest.approx(want.augmented.effect, abs=1e-9)
        assert got.aug_se[0] == pytest.approx(want.augmented.se, rel=1e-7)
        assert got.naive_se[0] == pytest.approx(want.naive.se, rel=1e-7)
        assert got.lam[0] == pytest.approx([want.lambda_control, want.lambda_treatment],
                                           abs=1e-7)


@pytest.mark.slow
def test_exact_p_value_by_full_enumeration():
    """4 + 4 users: every assignment by compare_batch, p-values counted by hand, then validity."""
    rng = np.random.default_rng(11)
    data = simulate(rng, 4)
    while data is None:
        data = simulate(rng, 4)
    yc, fc, fuc, yt, ft, fut, uc, ut, uuc, uut = data
    y = np.concatenate([yc, yt])
    f, fu = np.concatenate([fc, ft]), np.concatenate([fuc, fut])
    ul, uu = np.concatenate([uc, ut]), np.concatenate([uuc, uut])
    users = np.unique(np.concatenate([ul, uu]))
    treated_obs = set(np.unique(np.concatenate([ut, uut])))
    stats, observed = [], None
    for chosen in combinations(users, 4):
        t = np.isin(ul, chosen)
        tu = np.isin(uu, chosen)
        c = compare_batch(Arm(y[~t], f[~t], fu[~tu], users=ul[~t], users_unl=uu[~tu]),
                          Arm(y[t], f[t], fu[tu], users=ul[t], users_unl=uu[tu]))
        few = min(np.unique(ul[t]).size, np.unique(ul[~t]).size) < 2  # no statistic: extreme
        stats.append([np.inf if few else abs(c.naive_effect[0] / c.naive_se[0]),
                      np.inf if few else abs(c.aug_effect[0] / c.aug_se[0])])
        if set(chosen) == treated_obs:
            observed = len(stats) - 1
    stats = np.array(stats)
    p_all = (stats[None, :, :] >= stats[:, None, :] * (1 - 1e-9)).mean(axis=1)  # (70, 2)
    res = randomization_inference(*_arms(data), n_permutations=500, alpha=0.1)
    assert res.exhaustive and res.n_assignments == 69
    assert res.naive.p_value == pytest.approx(p_all[observed, 0], abs=1e-12)
    assert res.augmented.p_value == pytest.approx(p_all[observed, 1], abs=1e-12)
    # validity: over the 70 equally likely assignments P(p <= k/70) <= k/70 for every k
    for k in range(1, 70):
        assert (p_all <= k / 70 + 1e-12).mean(axis=0).max() <= k / 70 + 1e-12


@pytest.mark.slow
def test_interval_is_the_set_of_effects_not_rejected():
    rng = np.random.default_rng(5)
    data = simulate(rng, 10, additive=0.4)
    res = randomization_inference(*_arms(data), n_permutations=499, seed=2)
    prep = prepare(*_arms(data), n_permutations=499, seed=2)
    for est in (res.naive, res.augmented):
        assert est.ci_lower < est.effect < est.ci_upper
    for e, est in enumerate((res.naive, res.augmented)):
        width = est.ci_upper - est.ci_lower
        inside = [est.ci_lower + 0.02 * width, est.effect, est.ci_upper - 0.02 * width]
        outside = [est.ci_lower - 0.01 * width, est.ci_upper + 0.01 * width]
        p_in = pvalues_batch([prep] * 3, inside)[:, e]
        p_out = pvalues_batch([prep] * 2, outside)[:, e]
        assert (p_in > 0.05).all() and (p_out <= 0.05).all()
    assert res.augmented.p_value == pytest.approx(pvalues_batch([prep], [0.0])[0, 1])


@pytest.mark.slow
@pytest.mark.parametrize("users_per_arm", [5, 10, 40])
def test_coverage_of_the_randomization_interval(users_per_arm):
    """Share of data sets whose true effect is not rejected (= covered by the interval).

    Two truths: a constant additive effect (the sharp null holds: exact) and a latent shift
    whose star effect differs between users (the weak null only; studentized statistic).
    With 5 users per arm all 252 assignments are enumerated, else 99 random ones (p = (1 + b) /
    100 is exact too). Under the sharp null the coverage is 0.95 by construction (the exactness
    is checked by enumeration above), so 500 data sets (MC s.e. ~0.01) only guard the plumbing;
    the weak null, where nothing is exact, gets 2,000 (MC s.e. ~0.005): no scenario may fall
    below the 0.945 target by more than 2 MC s.e.
    """
    for kw, truth, reps in (({"additive": 0.3}, 0.3, 500),
                            ({"latent_shift": 0.3}, true_mean(0.3) - true_mean(0.0), 2000)):
        rates, refused = _reject_rates(users_per_arm, reps, seed=users_per_arm, truth=truth,
                                       **kw)
        cover = 1 - rates
        se = np.sqrt(cover * (1 - cover) / reps)
        print(f"{users_per_arm}/arm {kw}: randomization coverage naive {cover[0]:.4f}, "
              f"augmented {cover[1]:.4f} (MC s.e. {se[1]:.4f}); {refused} refused")
        assert cover.min() >= 0.945 - 2 * se.max()


@pytest.mark.slow
@pytest.mark.parametrize("users_per_arm", [5, 40])
def test_type_one_error_of_the_test(users_per_arm):
    """No effect: the test of H0(0) rejects at most 5% (+2 MC s.e.), naive and augmented."""
    reps = 1000
    rates, _ = _reject_rates(users_per_arm, reps, seed=100 + users_per_arm, truth=0.0)
    se = np.sqrt(0.05 * 0.95 / reps)
    print(f"{users_per_arm}/arm: type-I naive {rates[0]:.4f}, augmented {rates[1]:.4f} "
          f"(MC s.e. {se:.4f})")
    assert rates.max() <= 0.05 + 2 * se


def test_bad_input_is_refused():
    rng = np.random.default_rng(1)
    data = simulate(rng, 5)
    while data is None:
        data = simulate(rng, 5)
    shared = list(data)
    shared[7] = shared[7].copy()
    shared[7][0] = shared[6][0]  # a control user also in treatment
    with pytest.raises(PulseError, match="both arms"):
        randomization_inference(*_arms(shared), n_permutations=50)
    one = list(data)
    one[6] = np.full(one[6].size, one[6][0])
    with pytest.raises(PulseError, match="at least 2 per arm"):
        randomization_inference(*_arms(one), n_permutations=50)


def test_kish_effective_users():
    assert kish_effective_units(np.repeat([1, 2, 3], 4)) == pytest.approx(3.0)
    assert kish_effective_units(np.r_[np.zeros(97), 1, 2, 3]) == pytest.approx(
        100**2 / (97**2 + 3))
    assert kish_effective_units(np.array([])) == 0.0
