"""The weighted (active PPI++) monitor against a brute-force oracle, look by look.

Every look's psi terms, running means and cluster-robust se are recomputed by plain loops
(least squares on the earlier looks' sessions of the arm, the other fold at look 0; CR1 over
the users seen by then), and a session's term must not depend on later looks.
"""

from __future__ import annotations

import numpy as np
import pytest

from pulse_ml.errors import PulseError
from pulse_ml.stats.sequential.weighted import weighted_monitor

LOOKS = 5


def _data(seed: int, n: int = 900, n_users: int = 120):
    rng = np.random.default_rng(seed)
    users = rng.integers(0, n_users, n)
    arm = (users % 2).astype(np.int64)  # randomized by user
    f = 3.8 + rng.normal(0, 0.6, n)
    y = np.clip(np.round(f + 0.2 * arm + rng.normal(0, 1, n)), 1, 5)
    pi = np.clip(0.1 + 0.3 * rng.random(n), 0, 1)
    rated = rng.random(n) < pi
    look = rng.integers(0, LOOKS, n)
    w = 1.0 / (pi * rng.uniform(0.7, 1.0, n))  # some predictable response rate
    return dict(arm=arm, labeled=rated, rating=np.where(rated, y, np.nan), prediction=f,
                look=look, weight=w, users=users)


def _coef(t, d, df_, slope):
    c = np.cov(np.vstack([d, df_, t]), bias=True)
    b = 0.0
    if slope:
        b = float(np.clip(np.linalg.solve(c[:2, :2], -c[:2, 2])[1], 0.0, 1.0))
    return -(c[0, 2] + b * c[0, 1]) / c[0, 0], b


def _oracle(d, seed):
    n = d["arm"].size
    lab, w, f = d["labeled"], d["weight"], d["prediction"]
    rw = np.where(lab, w, 0.0)
    t = rw * np.nan_to_num(d["rating"])
    dd = 1.0 - rw
    ids = np.unique(d["users"])
    fold = np.random.default_rng(seed).integers(0, 2, ids.size)[np.searchsorted(ids, d["users"])]
    psi = np.empty((2, n))
    for i in range(n):
        a, k = d["arm"][i], d["look"][i]
        same = d["arm"] == a
        train = same & ((d["look"] < k) if k > 0 else ((d["look"] == 0) & (fold != fold[i])))
        for j, slope in enumerate((False, True)):
            ca, cb = _coef(t[train], dd[train], dd[train] * f[train], slope)
            g = ca + cb * f[i]
            psi[j, i] = g + rw[i] * (np.nan_to_num(d["rating"][i]) - g)
    rows = []
    for k in range(LOOKS):
        seen = d["look"] <= k
        for j in (0, 1):
            m = [psi[j, seen & (d["arm"] == a)].mean() for a in (0, 1)]
            n_a = [(seen & (d["arm"] == a)).sum() for a in (0, 1)]
            u = {}
            for i in np.flatnonzero(seen):
                a = d["arm"][i]
                u[d["users"][i]] = u.get(d["users"][i], 0.0) + (psi[j, i] - m[a]) / n_a[a] * (
                    1 if a == 1 else -1)
            g = len(u)
            var = g / (g - 1) * sum(v * v for v in u.values())
            rows.append((m[1] - m[0], np.sqrt(var)))
    return np.array(rows)


def test_every_look_equals_the_brute_force_oracle():
    d = _data(3)
    res = weighted_monitor(**d, n_looks=LOOKS, min_units_per_arm=5, seed=11)
    got = res.table[["effect", "se"]].to_numpy()
    np.testing.assert_allclose(got, _oracle(d, 11), rtol=1e-9, atol=1e-12)
    assert (res.table["eff_units_control"] < res.table["units_control"] + 1e-9).all()
    lam = res.table.loc[res.table["estimator"] == "augmented", "lambda_treatment"]
    assert ((lam >= 0) & (lam <= 1)).all()


def test_earlier_looks_never_change_when_later_looks_arrive():
    d = _data(5)
    full = weighted_monitor(**d, n_looks=LOOKS, min_units_per_arm=5, target_labels=300.0)
    early = d["look"] <= 2
    part = weighted_monitor(**{k: v[early] for k, v in d.items()}, n_looks=3,
                            min_units_per_arm=5, target_labels=300.0)
    cols = ["effect", "se", "cs_lower", "cs_upper", "ci_lower", "ci_upper"]
    np.testing.assert_allclose(full.table[cols].to_numpy()[: 3 * 2],
                               part.table[cols].to_numpy(), rtol=1e-12)


def test_bad_weights_and_too_few_users_are_refused():
    d = _data(7)
    bad = dict(d, weight=np.where(d["labeled"], np.nan, 1.0))
    with pytest.raises(PulseError, match="finite weight"):
        weighted_monitor(**bad, n_looks=LOOKS)
    with pytest.raises(PulseError, match="at least 500 labeled users"):
        weighted_monitor(**d, n_looks=LOOKS, min_units_per_arm=500)


def _window_oracle(d):
    """Window effect and time shift per look by loops over windows, from the psi terms."""
    from pulse_ml.stats.sequential.weighted import _terms

    n = d["arm"].size
    lab, w, f = d["labeled"], d["weight"], d["prediction"]
    ids = np.unique(d["users"])
    fold = np.random.default_rng(0).integers(0, 2, ids.size)[np.searchsorted(ids, d["users"])]
    psi, fits, lam = _terms(np.zeros(n, np.int64), d["arm"], d["look"], lab,
                            np.nan_to_num(d["rating"]), f, w, fold, 1, LOOKS)
    rw = np.where(lab, w, 0.0)
    rows = []
    for k in range(LOOKS):
        effects, shift = [], 0.0
        for p, g in zip(psi, fits, strict=True):
            arms = []
            for a in (0, 1):
                num = den = 0.0
                for j in range(k + 1):
                    m = (d["arm"] == a) & (d["look"] == j)
                    if rw[m].sum() > 0:  # N_j (mean g + sum R w (y - g) / W_j)
                        num += m.sum() * (g[m].mean() + (p[m] - g[m]).sum() / rw[m].sum())
                        den += m.sum()
                arms.append(num / den)
            effects.append(arms[1] - arms[0])
        for a, sign in ((0, -1.0), (1, 1.0)):
            m = (d["arm"] == a) & (d["look"] <= k)
            fbar = {j: f[m & (d["look"] == j)].mean() for j in range(k + 1)}
            tot_w = rw[m].sum()
            between = sum(((d["look"][m] == j).sum() / m.sum()
                           - rw[m & (d["look"] == j)].sum() / tot_w) * fbar[j]
                          for j in range(k + 1))
            shift += sign * lam[k, a] * between
        rows.append((*effects, shift))
    return np.array(rows)


def test_window_effects_and_time_shift_equal_the_loop_oracle():
    d = _data(3)
    res = weighted_monitor(**d, n_looks=LOOKS, min_units_per_arm=5, seed=0)
    tab = res.table
    got = np.c_[tab.loc[tab["estimator"] == "naive", "window_effect"].to_numpy(),
                tab.loc[tab["estimator"] == "augmented", "window_effect"].to_numpy(),
                tab.loc[tab["estimator"] == "augmented", "time_shift"].to_numpy()]
    np.testing.assert_allclose(got, _window_oracle(d), rtol=1e-9, atol=1e-12)
    assert (tab.loc[tab["estimator"] == "naive", "time_shift"] == 0).all()
    assert np.abs(got[:, 2]).max() > 1e-6  # random weights: not proportional to the windows


def test_weights_matching_every_window_give_the_printed_effect_and_no_shift():
    """With every window's rated weights summing to its sessions the check is silent, exactly."""
    d = _data(4)
    w = d["weight"].copy()
    for a in (0, 1):
        for j in range(LOOKS):
            m = (d["arm"] == a) & (d["look"] == j)
            r = m & d["labeled"]
            w[r] *= m.sum() / w[r].sum()
    res = weighted_monitor(**dict(d, weight=w), n_looks=LOOKS, min_units_per_arm=5, seed=1)
    tab = res.table
    np.testing.assert_allclose(tab["window_effect"], tab["effect"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(tab["time_shift"], 0.0, rtol=0, atol=1e-12)
