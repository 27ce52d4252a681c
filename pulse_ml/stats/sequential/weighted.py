"""Anytime-valid monitoring of sessions asked to rate by probability (active PPI++, IPW).

Sessions of a case study asked with a known, varying probability ``pi`` (``request_prob``) and
answering with a response probability ``r`` carry the weight ``w = 1 / (pi r)`` when rated
(``R = 1``). Per session the augmented term

    psi_i = g(f_i) + R_i w_i (y_i - g(f_i)),      g(f) = a + b f,

has the arm's mean as its expectation whatever ``g`` is (``E[R w | x] = 1``), so the running
mean of the psi terms of an arm estimates the arm's mean rating over ALL its sessions. The
naive (IPW) estimator is the same with ``b = 0`` (the intercept only: a predictable difference
estimator, about Hajek's efficiency, not Horvitz-Thompson's); active PPI++ tunes ``a`` and the
slope ``b = lambda`` (on [0, 1]) on the prediction. ``a`` and ``b`` minimize the variance of
psi (least squares of ``R w y`` on ``D = 1 - R w`` and ``D f``).

Predictable nuisances. The asymptotic confidence sequence of Waudby-Smith et al. (2024, Thm 2.2)
holds for running means of terms whose nuisances are fixed before the terms are seen (the
anytime-valid off-policy construction of Waudby-Smith, Wu, Ramdas, Karampatziakis & Mineiro,
2024): the weights ``w`` come from the caller fitted on earlier looks, and ``(a, b)`` of a
session at look k are fitted on the sessions of looks < k of its arm. At the first look there
is nothing earlier: its sessions are split in two folds (by user, seeded) and each fold's
``(a, b)`` comes from the other fold (cross-fitting), so the first look's terms are a batch
whose nuisances never change afterwards either. A session's psi is thus fixed once it is seen,
and later looks only add terms.

Variance: cluster-robust (CR1) by user over the users with a session by then (sessions as
clusters without users), of the difference of the two arm means (users in both arms enter
once, with both arms' deviations); the t boundary's df is Welch-Satterthwaite over the arms
with each arm's Kish effective number of labeled users in weight, ``(sum_u W_u)^2 / sum_u
W_u^2`` (``W_u``: the user's summed weights). The sequence clock is the number of sessions
(both arms); t* comes from the same rules as the unweighted monitor (``horizon`` at the rate up
to the burn-in look, or ``target_labels`` converted at the burn-in look's sessions per label).

References:
    I. Waudby-Smith, L. Arnold, J. Wu, A. Ramdas. Time-uniform central limit theory and
    asymptotic confidence sequences. Annals of Statistics, 2024.
    I. Waudby-Smith, L. Wu, A. Ramdas, N. Karampatziakis, P. Mineiro. Anytime-valid off-policy
    inference for contextual bandits. ACM/IMS Journal of Data Science, 2024.
    T. Zrnic, E. J. Candès. Active statistical inference. ICML 2024.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from pulse_ml.stats import effect_engine
from pulse_ml.stats.ppi import z_two_sided
from pulse_ml.stats.sequential.boundary import _mixture_c
from pulse_ml.stats.sequential.monitor import (
    TABLE_COLUMNS,
    MonitorResult,
    _fail,
    _int_codes,
    _prepare,
    _target,
    look_table,
    refuse_unready,
)
from pulse_ml.stats.sequential.small_sample import t_multiplier
from pulse_ml.stats.sequential.stops import ESTIMATORS, stops_table
from pulse_ml.stats.sequential.weighted_windows import weighted_window_effects

F64 = NDArray[np.float64]

__all__ = ["psi_terms", "stable_folds", "weighted_monitor"]


def _coefficients(s: F64, slope: bool) -> F64:
    """(a, b) minimizing the variance of psi, from a training set's sums ``s``.

    ``s`` holds the sums of (1, T, D, Df, DD, DDf, DfDf, DT, DfT) (leading axes any); zeros
    without enough data (fewer than 3 sessions or no spread of D).
    """
    n = np.maximum(s[..., 0], 1.0)
    mean = s[..., :4] / n[..., None]
    c_dd = s[..., 4] / n - mean[..., 2] ** 2
    c_ddf = s[..., 5] / n - mean[..., 2] * mean[..., 3]
    c_dfdf = s[..., 6] / n - mean[..., 3] ** 2
    c_dt = s[..., 7] / n - mean[..., 2] * mean[..., 1]
    c_dft = s[..., 8] / n - mean[..., 3] * mean[..., 1]
    ok = (s[..., 0] >= 3) & (c_dd > 1e-12)
    out = np.zeros(s.shape[:-1] + (2,))
    with np.errstate(divide="ignore", invalid="ignore"):
        if slope:
            det = c_dd * c_dfdf - c_ddf**2
            b = np.where(det > 1e-12 * c_dd * c_dfdf, (c_ddf * c_dt - c_dd * c_dft) / det, 0.0)
            b = np.clip(np.nan_to_num(b), 0.0, 1.0)
        else:
            b = np.zeros_like(c_dd)
        a = -(c_dt + b * c_ddf) / c_dd
    out[..., 0] = np.where(ok, a, 0.0)
    out[..., 1] = np.where(ok, b, 0.0)
    return out


def psi_terms(grp: NDArray[np.int64], arm: NDArray[np.int64], lk: NDArray[np.int64],
              lab: NDArray[np.bool_], y: F64, f: F64, w: F64, fold: NDArray[np.int64],
              n_groups: int, n_looks: int) -> tuple[F64, F64, F64]:
    """Per session the naive and the PPI++ psi term, and the PPI++ slope (lambda) it used.

    Args:
        grp: Group code per session.
        arm: 0 control, 1 treatment.
        lk: First look (0-based) at which each session is visible.
        lab: Rated sessions.
        y: Ratings (any value where not rated).
        f: Predictions.
        w: Weights ``1 / (pi r)`` (used where rated), predictable (module docstring).
        fold: 0/1 per session: the cross-fitting fold within the first look.
        n_groups: Number of groups.
        n_looks: Number of looks.

    Returns:
        ``psi_naive`` and ``psi_ppi`` per session (the nuisances of a session come only from
        earlier looks of its group and arm, or from the other fold at look 0), and the PPI++
        slope per (group * n_looks + look, arm) (at look 0 the mean of the two folds').
    """
    psi, _, lam = _terms(grp, arm, lk, lab, y, f, w, fold, n_groups, n_looks)
    return psi[0], psi[1], lam


def _terms(grp, arm, lk, lab, y, f, w, fold, n_groups, n_looks):
    """:func:`psi_terms`' psi pair, the fitted ``g(f)`` pair behind them, and the slopes."""
    rw = np.where(lab, w, 0.0)
    t = rw * np.where(lab, y, 0.0)
    d = 1.0 - rw
    df_ = d * f
    parts = (np.ones_like(t), t, d, df_, d * d, d * df_, df_ * df_, d * t, df_ * t)
    cell = ((grp * n_looks + lk) * 2 + arm) * 2 + fold
    size = n_groups * n_looks * 4
    sums = np.stack([np.bincount(cell, weights=p, minlength=size) for p in parts], axis=-1)
    sums = sums.reshape(n_groups, n_looks, 2, 2, len(parts))
    by_look = sums.sum(axis=3)  # (g, k, arm, 9)
    before = np.cumsum(by_look, axis=1) - by_look  # looks < k
    first = sums[:, 0, :, ::-1, :]  # look 0, the OTHER fold: (g, arm, fold, 9)
    out, fits = [], []
    for slope in (False, True):
        coef_k = _coefficients(before, slope)  # (g, k, arm, 2)
        coef_0 = _coefficients(first, slope)  # (g, arm, fold, 2)
        c = np.where((lk == 0)[:, None], coef_0[grp, arm, fold], coef_k[grp, lk, arm])
        g = c[:, 0] + c[:, 1] * f
        out.append(g + rw * (np.where(lab, y, 0.0) - g))
        fits.append(g)
    lam = coef_k[..., 1].copy()
    lam[:, 0] = coef_0[..., 1].mean(axis=2)
    return (out[0], out[1]), (fits[0], fits[1]), lam.reshape(n_groups * n_looks, 2)


def _running(grp, clusters, lk, arm, lab, w, psi, n_groups, n_looks):
    """Per (group, look), cumulated: Gram of the per-cluster 6-vectors.

    The 6-vector is (n, S_naive, S_ppi) per arm; also returned: the clusters with a session,
    labeled users per arm and their Kish sums of weights (sum W, sum W^2).
    """
    n_seg = n_groups * n_looks
    gram = np.zeros((n_seg, 6, 6))
    n_cl = np.zeros(n_seg)
    units = np.zeros((n_seg, 2))
    kish = np.zeros((n_seg, 2, 2))  # sum W, sum W^2 per arm
    seg = grp * n_looks + lk
    order = np.lexsort((clusters, seg))
    seg_s, cl_s = seg[order], clusters[order]
    cell_key, start = np.unique(np.c_[seg_s, cl_s], axis=0, return_index=True)
    vals = np.zeros((order.size, 10))
    a = arm[order]
    for j, v in enumerate((np.ones(order.size), psi[0][order], psi[1][order])):
        vals[np.arange(order.size), 3 * a + j] = v
    lab_o = lab[order]
    vals[np.arange(order.size), 6 + a] = lab_o
    vals[np.arange(order.size), 8 + a] = np.where(lab_o, w[order], 0.0)
    cells = np.add.reduceat(vals, start, axis=0) if order.size else vals
    bounds = np.flatnonzero(np.r_[True, cell_key[1:, 0] != cell_key[:-1, 0]])
    edges = np.r_[bounds, cell_key.shape[0]]
    running = np.zeros((int(clusters.max()) + 1 if clusters.size else 1, 10))
    for i, lo in enumerate(bounds):
        hi = edges[i + 1]
        s = int(cell_key[lo, 0])
        u = cell_key[lo:hi, 1]
        xo = running[u]
        xn = xo + cells[lo:hi]
        running[u] = xn
        gram[s] = xn[:, :6].T @ xn[:, :6] - xo[:, :6].T @ xo[:, :6]
        n_cl[s] = ((xn[:, 0] + xn[:, 3]) > 0).sum() - ((xo[:, 0] + xo[:, 3]) > 0).sum()
        units[s] = (xn[:, 6:8] > 0).sum(axis=0) - (xo[:, 6:8] > 0).sum(axis=0)
        kish[s, :, 0] = (xn[:, 8:10] - xo[:, 8:10]).sum(axis=0)
        kish[s, :, 1] = (xn[:, 8:10] ** 2 - xo[:, 8:10] ** 2).sum(axis=0)

    def cum(x):
        return x.reshape((n_groups, n_looks) + x.shape[1:]).cumsum(axis=1).reshape(x.shape)
    return cum(gram), cum(n_cl), cum(units), cum(kish)


def weighted_monitor(
    arm: ArrayLike, labeled: ArrayLike, rating: ArrayLike, prediction: ArrayLike,
    look: ArrayLike, n_looks: int, weight: ArrayLike, users: ArrayLike | None = None,
    alpha: float = 0.05, target_labels: float | None = None, horizon: float | None = None,
    look_times: ArrayLike | None = None, min_units_per_arm: int = 10,
    groups: ArrayLike | None = None, seed: int = 0, fold: ArrayLike | None = None,
) -> MonitorResult:
    """IPW (naive) and active PPI++ effect, fixed interval and confidence sequence per look.

    Args:
        arm: 0 control, 1 treatment per session.
        labeled: Rated sessions.
        rating: Ratings of rated sessions.
        prediction: Honest predictions.
        look: First look (0-based) at which each session is visible.
        n_looks: Number of looks.
        weight: ``1 / (pi r)`` per session (read where rated), computed from earlier looks only
            (the caller's response model); finite and > 0 where rated.
        users: Cluster (user) ids; None = sessions are the clusters.
        alpha: Error level of the intervals and of the sequence (uniformly over looks).
        target_labels: t* in labeled sessions (both arms), fixed in advance.
        horizon: Planned length of the test in units of ``look_times`` (t* from the rate up
            to the burn-in look), used without ``target_labels``.
        look_times: Time of each look since the start, (n_looks,) or (n_groups, n_looks).
        min_units_per_arm: No interval before each arm has this many labeled users.
        groups: Case-study ids (one sequence per group); the table gains a ``group`` column.
        seed: Seed of the first look's fold split (by user), used without ``fold``.
        fold: 0/1 per session, the first look's cross-fitting fold, constant within a user.
            Callers that re-run on growing data pass one that depends on the user's own id
            only (:func:`stable_folds`), so a re-run with more days keeps every earlier term;
            without it the split is drawn by the user's rank among the codes given.

    Returns:
        A :class:`MonitorResult` with the unweighted monitor's columns: ``naive`` is the IPW
        difference estimator, ``augmented`` active PPI++ (``lambda_*`` its slope at the look's
        newest sessions), ``eff_units_*`` Kish in weight, ``window_effect`` and ``time_shift``
        the drift check's weighted analogues
        (:mod:`~pulse_ml.stats.sequential.weighted_windows`: the weights right per window?).

    Raises:
        PulseError: On invalid inputs, or when an arm has fewer than ``min_units_per_arm``
            labeled users by the last look.
    """
    z_two_sided(alpha)
    arm_v, lab, y, f, lk = _prepare(arm, labeled, rating, prediction, look, n_looks)
    n = arm_v.size
    w = np.asarray(weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"weight has shape {w.shape} but there are {n} sessions")
    bad = np.flatnonzero(lab & ~(np.isfinite(w) & (w > 0)))
    if bad.size:
        raise _fail(f"rated sessions need a finite weight > 0; rows {bad[:5].tolist()} do not")
    grp, group_values = ((np.zeros(n, dtype=np.int64), None) if groups is None
                         else _int_codes(groups, "groups", n))
    n_groups = int(grp.max()) + 1
    clusters = (np.arange(n, dtype=np.int64) if users is None
                else _int_codes(users, "users", n)[0])
    if fold is None:
        ids = np.unique(clusters)
        fold = np.random.default_rng(seed).integers(0, 2, ids.size)[np.searchsorted(ids, clusters)]
    else:
        fold = np.asarray(fold)
        if fold.shape != (n,) or not np.isin(fold, (0, 1)).all():
            raise ValueError(f"fold must be 0/1 per session (shape ({n},)), got {fold.shape}")
        fold = fold.astype(np.int64)
    clusters = pd.factorize(grp * (int(clusters.max()) + 1) + clusters)[0]  # a user per group
    (psi_n, psi_p), fits, lam_k = _terms(grp, arm_v, lk, lab, y, f, w, fold, n_groups,
                                         n_looks)
    *window_eff, time_shift = weighted_window_effects(
        grp, arm_v, lk, np.where(lab, w, 0.0), f, (psi_n, psi_p), fits, lam_k, n_groups,
        n_looks)
    window = dict(zip(ESTIMATORS, window_eff, strict=True))
    shifts = {"naive": np.zeros_like(time_shift), "augmented": time_shift}
    gram, n_cl, units, kish = _running(grp, clusters, lk, arm_v, lab, w, (psi_n, psi_p),
                                       n_groups, n_looks)
    shape = (n_groups, n_looks)
    seg = grp * n_looks + lk
    n_seg = n_groups * n_looks
    count = lambda m: np.bincount(seg[m], minlength=n_seg).reshape(shape).cumsum(axis=1)  # noqa: E731
    n_lab = np.stack([count(lab & (arm_v == a)).reshape(-1) for a in (0, 1)], axis=1)
    n_all = np.stack([count(arm_v == a).reshape(-1) for a in (0, 1)], axis=1)
    sums = [np.stack([np.bincount(seg[arm_v == a], weights=p[arm_v == a], minlength=n_seg)
                      .reshape(shape).cumsum(axis=1).reshape(-1) for a in (0, 1)], axis=1)
            for p in (psi_n, psi_p)]
    valid = (n_lab.min(axis=1) >= 2) & (units.min(axis=1) >= 2)
    ready = valid & (units.min(axis=1) >= min_units_per_arm)
    refuse_unready(ready, shape, group_values, users is not None, min_units_per_arm)
    sessions = n_all.sum(axis=1).reshape(shape).astype(np.float64)
    labels = n_lab.sum(axis=1).reshape(shape).astype(np.float64)
    k0 = np.argmax(ready.reshape(shape), axis=1)
    per_label = sessions[np.arange(n_groups), k0] / labels[np.arange(n_groups), k0]
    if target_labels is not None:
        t_star = float(target_labels) * per_label
    else:
        t_star, _ = _target(sessions, ready.reshape(shape), n_looks, None, None, horizon,
                            look_times)
    c = _mixture_c(alpha)
    tr = c * sessions / t_star[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        mult = np.sqrt(2.0 * (tr + 1.0) / tr * np.log(np.sqrt(tr + 1.0) / alpha)).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff_units = kish[:, :, 0] ** 2 / kish[:, :, 1]
        n_a = np.maximum(n_all, 1).astype(np.float64)
        g_cr1 = n_cl / np.maximum(n_cl - 1.0, 1.0)
        cols: dict[str, list[F64]] = {k: [] for k in TABLE_COLUMNS[2:]}
        for j, name in enumerate(ESTIMATORS):
            means = sums[j] / n_a  # the running mean of psi per arm
            eff = means[:, 1] - means[:, 0]
            vec = np.zeros((n_seg, 2, 6))  # per-arm linearization of its mean
            for a in (0, 1):
                vec[:, a, 3 * a] = -means[:, a] / n_a[:, a]
                vec[:, a, 3 * a + 1 + j] = 1.0 / n_a[:, a]
            part = np.einsum("sai,sij,saj->sa", vec, gram, vec) * g_cr1[:, None]
            both = vec[:, 1] - vec[:, 0]
            var = np.einsum("si,sij,sj->s", both, gram, both) * g_cr1
            se = np.where(valid & (var > 0), np.sqrt(np.maximum(var, 0.0)), np.nan)
            df = (part.sum(axis=1) ** 2
                  / (part ** 2 / np.maximum(eff_units - 1.0, 1.0)).sum(axis=1))
            df = np.where(np.isfinite(se) & np.isfinite(df), df, np.nan)
            q = effect_engine.quantile(alpha, np.where(np.isfinite(df), df, np.inf))
            m_t = t_multiplier(mult, np.where(np.isfinite(df), df, np.inf))
            se_i = np.where(ready, se, np.nan)
            eff = np.where(valid, eff, np.nan)
            lam_e = lam_k if name == "augmented" else np.zeros_like(lam_k)
            lam_col = np.where(valid[:, None], lam_e, np.nan)
            for key, v in (("n_labeled", n_lab.sum(axis=1)),
                           ("n_unlabeled", (n_all - n_lab).sum(axis=1)),
                           ("units_control", units[:, 0]), ("units_treatment", units[:, 1]),
                           ("effect", eff), ("se", se), ("df", df),
                           ("ci_lower", eff - q * se_i), ("ci_upper", eff + q * se_i),
                           ("cs_lower", eff - m_t * se_i), ("cs_upper", eff + m_t * se_i),
                           ("lambda_control", lam_col[:, 0]),
                           ("lambda_treatment", lam_col[:, 1]),
                           ("eff_units_control", eff_units[:, 0]),
                           ("eff_units_treatment", eff_units[:, 1]),
                           ("window_effect", np.where(valid, window[name], np.nan)),
                           ("time_shift", np.where(valid, shifts[name], np.nan))):
                cols[key].append(np.asarray(v, dtype=np.float64))
    table = look_table(cols, group_values, n_groups, n_looks)
    return MonitorResult(table=table, stops=stops_table(table, group_values, n_groups, n_looks),
                         alpha=float(alpha), target_labels=t_star / per_label,
                         clustered=users is not None, lambda_rule="arm",
                         burn_in_look=k0.astype(np.int64))


def stable_folds(keys: ArrayLike, seed: int) -> NDArray[np.int64]:
    """A seeded 0/1 fold per key that depends on the key's own value only.

    Args:
        keys: User ids (or session ids when sessions are the clusters), any values.
        seed: Seed of the split.

    Returns:
        0/1 per key: the same key gets the same fold whatever other keys are present and in
        whatever order, so a monitor re-run with more days keeps its first look's split.
    """
    text = pd.Series(np.asarray(keys, dtype=object)).astype(str).to_numpy(dtype=object)
    hashed = pd.util.hash_array(text, hash_key=f"{seed % 10**16:016d}", categorize=False)
    return (hashed >> np.uint64(7) & np.uint64(1)).astype(np.int64)
