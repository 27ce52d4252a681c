"""Building blocks of :func:`pulse_ml.stats.effect_engine.solve` (pure numpy on moments).

Safe ratios and quadratic forms, the box least squares of the joint lambdas, the pooled floor of
the unlabeled mean's variance, effective cluster counts (Kish / Bell-McCaffrey) and the
Welch-Satterthwaite df. Formulas and references: :mod:`pulse_ml.stats.effect_engine`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtr, stdtrit

from pulse_ml.stats import cluster_moments as cm
from pulse_ml.stats.cluster_moments import Moments

_I = cm.RAW_INDEX
_L = cm.LIN_INDEX
_K = len(cm.LIN)

Array = NDArray[np.float64]


@dataclass(frozen=True)
class EngineResult:
    """Arrays of shape (R,) (per arm: (R, 2), control first) of a batch of comparisons."""

    naive_effect: Array
    naive_se: Array
    naive_df: Array
    aug_effect: Array
    aug_se: Array
    aug_df: Array
    aug_se_in_sample: Array
    mean_naive: Array
    mean_aug: Array
    se_naive_arm: Array
    se_aug_arm: Array
    lam: Array
    n_lab: Array
    n_unl: Array
    g_lab: Array
    g_unl: Array
    g_lab_union: Array
    g_any: Array
    rating_var: Array
    tuned: Array  # h * shrink of the tuned arms (0 where lambda = 0), see solve
    g_eff: Array  # effective numbers of labeled clusters per arm (Kish), see _effective_clusters
    pred_shift: Array  # per arm: unlabeled (weighted: all-session) minus labeled prediction mean
    pred_shift_se: Array  # per arm: its standard error (cluster-robust)
    pooled_floor: Array
    shrink: Array  # share of the variance-minimizing lambdas used (1 unless joint + small)
    lambda_noise_var: Array  # variance added for the tuned lambdas' own noise (0 without z)


_EDGES = np.array([[0.0], [1.0]])  # a lambda's lower and upper bound, times ub (exact)


def stack1(arrays: list[Array]) -> Array:
    """``np.stack(arrays, axis=1)`` without its Python-level checks (small arrays, hot path)."""
    return np.concatenate([a[:, None] for a in arrays], axis=1)


def _ratio(num: Array | float, den: Array) -> Array:
    """``num / den`` where ``den > 0``, else 0."""
    shape = den.shape
    if getattr(num, "shape", shape) != shape:  # np.broadcast only when the shapes differ
        shape = np.broadcast(num, den).shape
    return np.divide(num, den, out=np.zeros(shape), where=den > 0)


def _cr(g: Array, lost: float | Array) -> Array:
    """Small-sample factor ``G / (G - lost)`` (0 where undefined)."""
    return _ratio(g, g - lost) * (g > lost)


def _clip_min(num: Array, den: Array, ub: Array) -> Array:
    """Minimize over [0, ub] of ``2 lam num + lam^2 den`` (den >= 0)."""
    return np.minimum(np.maximum(_ratio(-num, den), 0.0), ub)  # = np.clip, without wrappers


def _box_ls(s: dict[str, Array], ub_t: Array, ub_c: Array) -> tuple[Array, Array]:
    """Minimize ``Q = rr + 2 lt rt + 2 lc rc + lt^2 tt + 2 lt lc tc + lc^2 cc`` on the box.

    Q is a convex quadratic (a variance), so its minimum over [0, ub_t] x [0, ub_c] is the
    stationary point if it lies inside, else the best of the four edge minima (each a clipped
    one-dimensional solution). ``(0, 0)`` lies on an edge, so the result never exceeds ``rr``.
    """
    rt, rc, tt, cc, tc = s["rt"], s["rc"], s["tt"], s["cc"], s["tc"]

    def q(lt: Array, lc: Array) -> Array:
        return 2 * lt * rt + 2 * lc * rc + lt**2 * tt + 2 * lt * lc * tc + lc**2 * cc

    lc_edge, lt_edge = _EDGES * ub_c, _EDGES * ub_t  # the four edges (0 or ub), two at a time
    lt_of_lc = _clip_min(rt + tc * lc_edge, tt, ub_t)
    lc_of_lt = _clip_min(rc + tc * lt_edge, cc, ub_c)
    det = tt * cc - tc**2
    ok = det > 1e-12 * np.maximum(tt * cc, 1e-300)
    lt_i = _ratio(-rt * cc + rc * tc, np.where(ok, det, 0.0))
    lc_i = _ratio(-rc * tt + rt * tc, np.where(ok, det, 0.0))
    inside = ok & (lt_i >= 0) & (lt_i <= ub_t) & (lc_i >= 0) & (lc_i <= ub_c)
    lts = np.concatenate([lt_of_lc, lt_edge, np.where(inside, lt_i, 0.0)[None]])
    lcs = np.concatenate([lc_edge, lc_of_lt, np.where(inside, lc_i, 0.0)[None]])
    values = q(lts, lcs)
    values[-1] = np.where(inside, values[-1], np.inf)
    best = np.argmin(values, axis=0)
    cols = np.arange(lts.shape[1])
    return lts[best, cols], lcs[best, cols]


def _pooled_floor(mom: Moments, empirical: Array, clustered: bool) -> Array:
    """Extra variance so the unlabeled mean's variance is at least its pooled-prediction value.

    ``V_pool = s^2 (N + icc (sum_h N_h^2 - N)) / N^2``: ``s^2`` (ddof 1) and the intra-user
    correlation ``icc`` (one-way ANOVA estimator, clipped to [0, 1]) come from ALL predictions of
    the arm, labeled and unlabeled, as ppi_py pools them for its lambda; ``N_h`` = unlabeled
    sessions of user h. With few unlabeled sessions (or users) the empirical variance of their
    mean has almost no degrees of freedom (exactly 0 at N = 1); the floor keeps lambda from
    exploiting that noise. Both arms at once: ``empirical`` and the result have shape (R, 2).
    """
    tot = mom.tot
    n, n_unl = tot[..., _I["m"]], tot[..., _I["mu"]]
    big_m = n + n_unl
    s1 = tot[..., _I["sf"]] + tot[..., _I["su"]]
    s2 = tot[..., _I["sff"]] + tot[..., _I["suu"]]
    mean_part = _ratio(s1**2, big_m)
    ss_total = np.maximum(s2 - mean_part, 0.0)
    var = _ratio(ss_total, big_m - 1.0)
    icc = np.zeros_like(var)
    if clustered:
        g = mom.g_all
        ss_between = np.maximum(mom.t2_over_m - mean_part, 0.0)
        ss_within = np.maximum(ss_total - ss_between, 0.0)
        ms_b = _ratio(ss_between, g - 1.0)
        ms_w = _ratio(ss_within, big_m - g)
        n0 = _ratio(big_m - _ratio(mom.m2, big_m), g - 1.0)
        sigma_b = np.maximum(_ratio(ms_b - ms_w, n0), 0.0)
        icc = np.clip(_ratio(sigma_b, sigma_b + ms_w), 0.0, 1.0)
    v_pool = var * _ratio(n_unl + icc * (mom.mu2 - n_unl), n_unl**2)
    return np.maximum(v_pool - empirical, 0.0)


def _effective_clusters(mom: Moments, kish: Array | None = None) -> tuple[Array, Array]:
    """Effective numbers of labeled clusters per arm, shape (R, 2), and of the effect, (R,).

    Bell-McCaffrey df of a weighted sum under an independence working model: with variance shares
    ``v_g``, ``G* = (sum_g v_g)^2 / sum_g v_g^2``. A (weighted) mean: ``v_g = sum_{i in g} w_i^2
    / W^2``, so ``G* = (sum_i w_i^2)^2 / sum_g (sum_{i in g} w_i^2)^2`` (= n for independent
    unweighted sessions, = G for equal cluster sizes, small when a few users or a few large
    weights carry the labels). The effect: ``v_g = sww_t,g / W_t^2 + sww_c,g / W_c^2``, which
    counts a user with labels in both arms once. ``kish``: these counts computed elsewhere
    (:func:`pulse_ml.stats.cluster_lin.kish_sums`, with the ratings' intra-user correlation).
    """
    if kish is not None:  # computed from the sessions (CR2-scaled Gram, user random effect)
        return kish[:, :2], kish[:, 2]
    oc, ot = _L["sww"], _K + _L["sww"]
    sww_c, sww_t = mom.tot[:, 0, _I["sww"]], mom.tot[:, 1, _I["sww"]]
    w2_c, w2_t = mom.tot[:, 0, _I["sw"]] ** 2, mom.tot[:, 1, _I["sw"]] ** 2
    g = mom.gram
    cc, tt, ct = g[:, oc, oc], g[:, ot, ot], g[:, oc, ot]
    per_arm = np.stack([_ratio(sww_c**2, cc), _ratio(sww_t**2, tt)], axis=1)
    sum_v = _ratio(sww_c, w2_c) + _ratio(sww_t, w2_t)
    sum_v2 = _ratio(cc, w2_c**2) + _ratio(tt, w2_t**2) + 2 * _ratio(ct, w2_c * w2_t)
    return per_arm, _ratio(sum_v**2, sum_v2)


def _ppi_py_lambda(mom: Moments, a: int) -> Array:
    """``clip(Cov0(Y, f) / ((1 + n/N) Var1(pooled f)), 0, 1)`` of ppi_py (singleton clusters)."""
    tot, o = mom.tot[:, a, :], a * _K
    n, n_unl = tot[:, _I["m"]], tot[:, _I["mu"]]
    ybar, fbar = _ratio(tot[:, _I["sy"]], n), _ratio(tot[:, _I["sf"]], n)
    cov = _ratio(mom.gram[:, o + _L["swy"], o + _L["swf"]], n) - ybar * fbar
    s1, big_m = tot[:, _I["sf"]] + tot[:, _I["su"]], n + n_unl
    var = _ratio(tot[:, _I["sff"]] + tot[:, _I["suu"]] - _ratio(s1**2, big_m), big_m - 1.0)
    return np.clip(_ratio(cov, (1.0 + _ratio(n, n_unl)) * var), 0.0, 1.0)


def _welch_df(v: Array, nu: Array, cap: Array) -> Array:
    """Satterthwaite-Welch df of a sum of per-arm variances ``v`` (R, 2) with dfs ``nu``."""
    num = np.add.reduce(v, axis=1) ** 2  # ufunc reduce: no wrapper
    den = np.add.reduce(_ratio(v**2, nu), axis=1)
    df = np.where(den > 0, _ratio(num, den), np.minimum.reduce(nu, axis=1))
    return np.maximum(np.minimum(df, cap), 1.0)


def quantile(alpha: float, df: Array) -> Array:
    """Two-sided ``t_{1 - alpha/2}`` quantile (normal where ``df`` is infinite).

    ``scipy.special.stdtrit`` gives the values of ``scipy.stats.t.ppf`` without its argument
    checks (microseconds per call) and without importing ``scipy.stats`` (over a second).
    """
    return stdtrit(df, 1.0 - alpha / 2.0)


def p_value(effect: Array, se: Array, df: Array) -> Array:
    """Two-sided p-value of ``effect / se`` against t(df) (NaN where se = 0)."""
    stat = np.divide(np.abs(effect), se, out=np.full_like(se, np.nan), where=se > 0)
    return 2.0 * stdtr(df, -stat)  # = 2 t.sf(stat, df)
