"""Anytime-valid monitoring of an A/B effect: every look at once, naive and PPI++.

An A/B test is looked at K times (daily, say). At look k the data are the sessions visible by
then; for each look this module computes, in one pass over the data (per-look sums, cumulated):

* the naive effect (difference of labeled means) and the PPI++ effect (per arm
  ``mean(Y) + lam (mean(f~) - mean(f))``, lam estimated only from the data up to look k), their
  standard errors, i.i.d. or cluster-robust by user, exactly as :func:`compare_arms` computes them
  on the data up to that look;
* the fixed-horizon Wald interval ``effect -/+ z_{1-alpha/2} se`` (what a daily dashboard shows;
  acting on the first look at which it excludes 0 inflates the false-positive rate);
* an anytime-valid asymptotic confidence sequence (AsympCS) ``effect -/+ m_k se``, valid
  uniformly over all looks, so a test may stop at the first look at which it excludes 0.

Estimators at a look (formulas of :mod:`pulse_ml.stats.arm_effect`). I.i.d. mode (no users):
per arm ``se^2 = Var0(Y - lam f)/n + lam^2 Var0(f~)/N`` with the power-tuned
``lam = clip(Cov0(Y, f) / ((1 + n/N) Var1(f_all)), 0, 1)`` of ppi_py; the arms add. Clustered
mode: per user g and arm a the influence sums ``A_g = sum (Y - Ybar)/n``, ``B_g = sum (f - fbar)/n``
(labeled) and ``C_g = sum (f~ - f~bar)/N`` (unlabeled), ``D_g = C_g - B_g``, CR1 factor
``s_a = sqrt(G_a/(G_a - 1))`` (G_a users seen in the arm), and the effect's variance
``V = sum_g (s_t (A_tg + lam_t D_tg) - s_c (A_cg + lam_c D_cg))^2``, which keeps the cross term
of users seen in both arms. ``lambda_rule="arm"`` takes ``lam_a = clip(-sum A D / sum D^2, 0, 1)``
per arm (as compare_arms); ``"joint"`` minimizes V over ``[0, 1]^2`` (identical to "arm" when no
user is in both arms). All these are quadratic forms in the per-user vector
``x_g = (n_g, sum Y, sum f, N_g, sum f~)`` of both arms, so each look needs only the Gram matrix
``sum_g x_g x_g^T`` (10 x 10) and the arm totals; they are updated look by look from the users
that have new sessions at that look (``x_new x_new^T - x_old x_old^T``), one pair of matrix
products per look. An arm with no unlabeled session yet has lam = 0; a look at which an arm has
fewer than 2 labels (or, clustered, fewer than 2 users) has NaN numbers.

The confidence sequence. For a standardized process whose variance grows linearly in a time t
(i.i.d. sums, after strong approximation), the two-sided Gaussian-mixture boundary of Robbins
gives ``P(exists t: |S_t| >= sigma sqrt(2 (t rho^2 + 1)/rho^2 log(sqrt(t rho^2 + 1)/alpha))) <=
alpha``. Waudby-Smith et al. (2024, Thm 2.2) turn this into the AsympCS

    mu_hat_t -/+ sigma_hat_t sqrt(2 (t rho^2 + 1) / (t^2 rho^2) log(sqrt(t rho^2 + 1) / alpha)),

and Kilian, Cortinovis & Caron (2025) apply it to PPI/PPI++. With ``sigma_hat_t^2 = t V_t`` the
half-width is ``se_t m(t)``, ``m(t) = sqrt(2 (t rho^2 + 1)/(t rho^2) log(sqrt(t rho^2 + 1)/alpha))``
(:func:`cs_multiplier`). The mixture parameter ``rho^2 = (2 log(1/alpha) + log(1 + 2 log(1/alpha)))
/ t*`` makes the boundary (nearly) tightest at the target time t* (Waudby-Smith et al. 2024,
Sec. 2.4; :func:`mixture_rho`); then ``t rho^2 = c t/t*``, so only the ratio ``t/t*`` matters.

Notes:
    What "t" is here. The boundary needs a clock proportional to the information of the error
    process, ``1/V_t``; only ``t/t*`` enters. We take t = the labeled sessions seen so far over
    both arms (clustered or not) and ``sigma_hat_t^2 = t V_t`` (a per-label variance that, with
    users, includes the design effect). Reasons: (i) t is a count fixed by the arrival process
    (ancillary to the ratings), so the boundary does not move with the noise of a variance
    estimate (the Lyapunov-type AsympCS clocks on an estimated variance instead, but then t* has
    to be set on a variance scale nobody knows in advance). (ii) With labeled and unlabeled
    sessions arriving in stable proportions the PPI++ variance is
    ``(1 - rho^2 N/(n + N)) sigma^2 / n``, proportional to ``1/n``: naive and PPI++ share one
    clock, their multipliers are equal at every look, and the width ratio of the sequences is the
    se ratio. Unlabeled sessions change sigma, not the clock. (iii) With users, the per-user sums
    are the independent units of the variance (CR1), but counting labeled *users* as the clock is
    wrong when users come back: the user count saturates while the information keeps growing
    with their new sessions, so early looks get too small a multiplier. In the seeded null
    simulation of the tests (21 daily looks, alpha = 5%, 1000 replications, 60 returning users,
    users in both arms, no burn-in) the PPI++ sequence ever excluded 0 in 8.3% of replications
    with a labeled-users clock, 5.9% with the estimated-information clock ``1/V_hat_t`` and
    3.8% with the labeled-sessions clock (naive: 4.0%, 2.8%, 2.1%). If the design effect grows
    over time (information grows slower than labels) the sessions clock errs on the
    conservative side.
    The guarantee is asymptotic. With few labels or few users the CR1 variance, and more so
    the PPI++ one with its fitted lambda, is too small (about 12% too small a se with 10 labels
    per arm), and the sequence is only protected by its large multiplier at small ``t/t*``;
    intervals are therefore reported only from the look at which each arm has
    ``min_units_per_arm`` labeled units (users when clustered, sessions otherwise). With only
    30 users in all and strong user effects the PPI++ sequence still overshoots alpha (about
    10% instead of 5%; naive about 5%): the asymptotics need tens of labeled users per arm.

    The target t*. The boundary is valid for any fixed rho; t* only decides where it is
    tightest. For a strict guarantee t* is fixed before the data are seen (``target_labels``,
    e.g. the labels expected by the planned last day, :func:`plan_monitoring`). Otherwise t* is
    the label count at ``target_look`` (default the last look); a target look beyond the data
    is extrapolated from the labels per look so far, which moves only with arrival counts.

    Planning (:func:`plan_monitoring`). With daily volumes per arm, ``Delta_hat_d`` has variance
    ``V_1/d`` and independent increments, so ``W_d = d Delta_hat_d / sqrt(V_1)`` is a Gaussian
    random walk with drift ``theta = Delta/sqrt(V_1)`` per day and the sequence stops when
    ``|W_d| >= m(d/t*) sqrt(d)``. The distribution of the stopping day is computed exactly (for
    the Gaussian approximation) by recursive numerical integration over the continuation region,
    as for group-sequential designs (Armitage, McPherson & Rowe 1969;
    :func:`first_crossing_probabilities`).

References:
    I. Waudby-Smith, D. Arbour, R. Sinha, E. H. Kennedy, A. Ramdas. Time-uniform central limit
    theory and asymptotic confidence sequences. Annals of Statistics, 2024 (arXiv:2103.06476).
    A. Kilian, S. Cortinovis, F. Caron. Anytime-valid, Bayes-assisted, prediction-powered
    inference. arXiv:2505.18000, 2025.
    H. Robbins. Statistical methods related to the law of the iterated logarithm. Annals of
    Mathematical Statistics 41(5), 1970.
    S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon. Time-uniform, nonparametric,
    nonasymptotic confidence sequences. Annals of Statistics 49(2), 2021.
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
    P. Armitage, C. K. McPherson, B. C. Rowe. Repeated significance tests on accumulating data.
    JRSS A 132(2), 1969.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.stats import norm

from pulse_ml.errors import PulseError
from pulse_ml.stats.ppi import z_two_sided

__all__ = [
    "MonitorPlan",
    "MonitorResult",
    "SequentialPlan",
    "cs_multiplier",
    "first_crossing_probabilities",
    "mixture_rho",
    "monitor_effect",
    "plan_monitoring",
    "simulate_monitoring",
]

ESTIMATORS = ("naive", "augmented")
TABLE_COLUMNS = [
    "look",
    "estimator",
    "n_labeled",
    "n_unlabeled",
    "units_control",
    "units_treatment",
    "effect",
    "se",
    "ci_lower",
    "ci_upper",
    "cs_lower",
    "cs_upper",
    "lambda_control",
    "lambda_treatment",
]
F64 = NDArray[np.float64]


# --------------------------------------------------------------------------- boundary


def _mixture_c(alpha: float) -> float:
    z_two_sided(alpha)  # validates alpha
    two_log = 2.0 * math.log(1.0 / alpha)
    return two_log + math.log(1.0 + two_log)


def mixture_rho(t_star: float, alpha: float = 0.05) -> float:
    """Mixture parameter that makes the Gaussian-mixture boundary tightest near ``t_star``.

    ``rho = sqrt((-2 log alpha + log(1 - 2 log alpha)) / t_star)`` (Waudby-Smith et al. 2024,
    Sec. 2.4, the closed-form approximation of the exact Lambert-W optimum).

    Args:
        t_star: Target effective sample size (> 0).
        alpha: Error level of the sequence, in (0, 1).

    Returns:
        rho > 0.

    Raises:
        PulseError: If ``t_star`` is not positive.
    """
    if not np.isfinite(t_star) or t_star <= 0:
        raise PulseError(f"the target sample size must be > 0, got {t_star}")
    return math.sqrt(_mixture_c(alpha) / t_star)


def cs_multiplier(t: ArrayLike, t_star: float, alpha: float = 0.05) -> F64:
    """Half-width of the asymptotic confidence sequence in units of the standard error.

    ``m(t) = sqrt(2 (t rho^2 + 1)/(t rho^2) log(sqrt(t rho^2 + 1)/alpha))`` with
    ``rho = mixture_rho(t_star, alpha)``, so that the sequence is ``effect -/+ m(t) se_t``
    (``se_t^2 = sigma_hat_t^2 / t``). ``t <= 0`` gives NaN.

    Args:
        t: Effective sample sizes (scalar or array).
        t_star: Target effective sample size at which the boundary is tightest.
        alpha: Error level (two-sided, uniformly over time).

    Returns:
        Multipliers, same shape as ``t`` (always > ``z_{1-alpha/2}``).

    Notes:
        Waudby-Smith et al. (2024), Theorem 2.2, with ``sigma_hat_t = sqrt(t) se_t``.
    """
    rho2 = mixture_rho(t_star, alpha) ** 2
    tr = np.asarray(t, dtype=np.float64) * rho2
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(2.0 * (tr + 1.0) / tr * np.log(np.sqrt(tr + 1.0) / alpha))
    return np.where(tr > 0, out, np.nan)


# --------------------------------------------------------------------------- monitor


@dataclass(frozen=True)
class MonitorResult:
    """Every look of one (or several) A/B tests, naive and PPI++.

    Attributes:
        table: One row per (group x) look x estimator, in that order. Columns: ``group`` (only
            when groups were given), ``look`` (0-based), ``estimator`` ('naive'/'augmented'),
            ``n_labeled``, ``n_unlabeled`` (sessions visible at the look, both arms;
            ``n_labeled`` is the sequence's clock t), ``units_control``, ``units_treatment``
            (labeled users per arm, or labeled sessions without users), ``effect`` (treatment -
            control), ``se``, ``ci_lower``/``ci_upper`` (fixed-horizon Wald interval),
            ``cs_lower``/``cs_upper`` (anytime-valid sequence), ``lambda_control``,
            ``lambda_treatment`` (0 for naive). NaN where undefined (an arm with < 2 labels or,
            clustered, < 2 users); intervals NaN before ``min_units_per_arm`` is reached.
        stops: One row per (group x) estimator x band ('sequence' or 'fixed'): the first look
            at which the band excludes 0. Columns ``conclusive`` (bool), ``look``,
            ``n_labeled``, ``n_unlabeled`` (Int64, NA when never), ``effect``, ``lower``,
            ``upper`` at that look (NaN when never).
        alpha: Error level of intervals and sequences.
        target_labels: t* per group (labeled sessions at which the sequence is tightest).
        clustered: Whether variances are cluster-robust by user.
        lambda_rule: 'arm' or 'joint' (clustered mode); 'ppi_py' in i.i.d. mode.
    """

    table: pd.DataFrame
    stops: pd.DataFrame
    alpha: float
    target_labels: F64
    clustered: bool
    lambda_rule: str


def _fail(msg: str) -> PulseError:
    return PulseError(f"monitor: {msg}")


def _int_codes(x: ArrayLike, name: str, n: int) -> tuple[NDArray[np.int64], NDArray]:
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name} has shape {arr.shape} but there are {n} sessions")
    if pd.isna(arr).any():
        bad = np.flatnonzero(pd.isna(arr))[:5].tolist()
        raise _fail(f"{name} must not be missing (rows {bad})")
    codes, uniques = pd.factorize(arr, sort=True)
    return codes.astype(np.int64), np.asarray(uniques)


def _prepare(
    arm: ArrayLike,
    labeled: ArrayLike,
    rating: ArrayLike,
    prediction: ArrayLike,
    look: ArrayLike,
    n_looks: int,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], F64, F64, NDArray[np.int64]]:
    if isinstance(n_looks, bool) or not isinstance(n_looks, int | np.integer) or n_looks < 1:
        raise _fail(f"n_looks must be a positive integer, got {n_looks!r}")
    a = np.asarray(arm)
    n = a.size
    if a.ndim != 1 or n == 0:
        raise _fail(f"arm must be a non-empty 1-D array, got shape {a.shape}")
    arrays = {"labeled": labeled, "rating": rating, "prediction": prediction, "look": look}
    for name, v in arrays.items():
        shape = np.shape(v)
        if shape != (n,):
            raise ValueError(f"{name} has shape {shape} but arm has {n} sessions")
    if a.dtype == bool:
        a = a.astype(np.int64)
    bad = np.flatnonzero(~np.isin(a, (0, 1)))
    if bad.size:
        raise _fail(f"arm must be 0 (control) or 1 (treatment); rows {bad[:5].tolist()} are not")
    lab = np.asarray(labeled)
    if lab.dtype != bool:
        if not np.isin(lab, (0, 1)).all():
            raise _fail("labeled must be a boolean mask")
        lab = lab.astype(bool)
    y = np.asarray(rating, dtype=np.float64)
    bad = np.flatnonzero(lab & ~np.isfinite(y))
    if bad.size:
        raise _fail(f"labeled sessions need a finite rating; rows {bad[:5].tolist()} have none")
    f = np.array(prediction, dtype=np.float64)  # a copy: it is shifted in place later
    bad = np.flatnonzero(~np.isfinite(f))
    if bad.size:
        raise _fail(f"predictions must be finite; rows {bad[:5].tolist()} are not")
    lk = np.asarray(look)
    if lk.dtype.kind not in "iu":
        if lk.dtype.kind != "f" or not np.all(np.isfinite(lk)) or np.any(lk != np.round(lk)):
            raise _fail("look must hold integer look indices")
    lk = lk.astype(np.int64)
    bad = np.flatnonzero((lk < 0) | (lk >= n_looks))
    if bad.size:
        raise _fail(
            f"look indices must be in [0, {n_looks - 1}]; rows {bad[:5].tolist()} are outside"
        )
    return a.astype(np.int64), lab, np.where(lab, y, 0.0), f, lk


def _iid_sums(
    grp: NDArray[np.int64],
    lk: NDArray[np.int64],
    arm: NDArray[np.int64],
    lab: NDArray[np.bool_],
    y: F64,
    f: F64,
    n_groups: int,
    n_looks: int,
) -> dict[str, F64]:
    """Cumulative per-arm sums at every look, shape (n_groups * n_looks, 2)."""
    idx = (grp * n_looks + lk) * 2 + arm
    size = n_groups * n_looks * 2

    def cum(w: F64 | None) -> F64:
        s = np.bincount(idx, weights=w, minlength=size).astype(np.float64)
        return s.reshape(n_groups, n_looks, 2).cumsum(axis=1).reshape(-1, 2)

    fl = np.where(lab, f, 0.0)
    fu = f - fl
    out = {
        "n": cum(lab.astype(np.float64)),
        "N": cum((~lab).astype(np.float64)),
        "sy": cum(y),
        "syy": cum(y * y),
        "sf": cum(fl),
        "sff": cum(fl * fl),
        "syf": cum(y * fl),
        "su": cum(fu),
        "suu": cum(fu * fu),
    }
    return out


def _iid_estimates(s: dict[str, F64]) -> dict[str, F64]:
    n, big_n = s["n"], s["N"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ybar, fbar, ubar = s["sy"] / n, s["sf"] / n, s["su"] / big_n
        vy = np.maximum(s["syy"] / n - ybar**2, 0.0)
        vf = np.maximum(s["sff"] / n - fbar**2, 0.0)
        cyf = s["syf"] / n - ybar * fbar
        vu = np.maximum(s["suu"] / big_n - ubar**2, 0.0)
        tot = n + big_n
        var1 = (s["sff"] + s["suu"] - (s["sf"] + s["su"]) ** 2 / tot) / (tot - 1.0)
        lam = cyf / ((1.0 + n / big_n) * var1)
        ok = (big_n > 0) & (var1 > 0) & np.isfinite(lam)
        lam = np.where(ok, np.clip(lam, 0.0, 1.0), 0.0)
        unl_term = np.where(big_n > 0, lam**2 * vu / big_n, 0.0)
        var_aug = np.maximum(vy - 2.0 * lam * cyf + lam**2 * vf, 0.0) / n + unl_term
        mu_aug = ybar + np.where(lam > 0, lam * (ubar - fbar), 0.0)
    return {
        "naive_effect": ybar[:, 1] - ybar[:, 0],
        "naive_var": vy[:, 0] / n[:, 0] + vy[:, 1] / n[:, 1],
        "aug_effect": mu_aug[:, 1] - mu_aug[:, 0],
        "aug_var": var_aug[:, 0] + var_aug[:, 1],
        "lam": lam,
        "n": n,
        "N": big_n,
        "arm_units": n,
        "valid": (n[:, 0] >= 2) & (n[:, 1] >= 2),
    }


def _cluster_sums(
    grp: NDArray[np.int64],
    users: NDArray[np.int64],
    lk: NDArray[np.int64],
    arm: NDArray[np.int64],
    lab: NDArray[np.bool_],
    y: F64,
    f: F64,
    n_groups: int,
    n_looks: int,
) -> dict[str, F64]:
    """Per-look Gram matrices of per-user sums, arm totals, users per arm and labeled users.

    Sessions are sorted by (group, look, user) and summed per cell; a loop over the (group,
    look) segments keeps each user's running 10-vector (both arms) and adds
    ``x_new x_new^T - x_old x_old^T`` of the users seen in the segment to the Gram matrix.
    """
    if n_groups > 1:  # one cluster per (group, user)
        cl = pd.factorize(grp * (int(users.max()) + 1) + users)[0].astype(np.int64)
    else:
        cl = users
    n_cl = int(cl.max()) + 1
    key = (grp * n_looks + lk) * n_cl + cl
    order = np.argsort(key)
    key = key[order]
    arm_s, lab_s = arm[order], lab[order]
    q = np.empty((key.size, 5))
    q[:, 0] = lab_s
    q[:, 1] = np.where(lab_s, y[order], 0.0)
    f_s = f[order]
    q[:, 2] = np.where(lab_s, f_s, 0.0)
    q[:, 3] = ~lab_s
    q[:, 4] = f_s - q[:, 2]
    is_t = arm_s[:, None].astype(np.float64)
    x = np.concatenate([q * (1.0 - is_t), q * is_t], axis=1)
    del q
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    cell = np.add.reduceat(x, starts, axis=0)
    del x
    cell_key = key[starts]
    cell_cl = cell_key % n_cl
    seg = cell_key // n_cl  # group * n_looks + look, non-decreasing
    bounds = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1], True])
    n_seg = n_groups * n_looks
    running = np.zeros((n_cl, 10))
    old = np.empty((cell.shape[0], 10))
    gram = np.zeros((n_seg, 10, 10))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        u = cell_cl[lo:hi]
        xo = running[u]
        xn = xo + cell[lo:hi]
        running[u] = xn
        old[lo:hi] = xo
        gram[seg[lo]] = xn.T @ xn - xo.T @ xo
    seg_ids = seg[bounds[:-1]]

    def per_look(counts: F64) -> F64:
        s = np.zeros((n_seg,) + counts.shape[1:])
        s[seg_ids] = np.add.reduceat(counts, bounds[:-1], axis=0)
        return s.reshape((n_groups, n_looks) + counts.shape[1:]).cumsum(axis=1).reshape(s.shape)

    def became(*cols: int) -> NDArray[np.bool_]:
        had = sum(old[:, c] for c in cols) > 0
        return ~had & (sum(old[:, c] + cell[:, c] for c in cols) > 0)

    flags = np.column_stack([became(0, 3), became(5, 8), became(0), became(5)])
    counts = per_look(flags.astype(np.float64))
    return {
        "gram": gram.reshape(n_groups, n_looks, 10, 10).cumsum(axis=1).reshape(n_seg, 10, 10),
        "totals": per_look(cell),
        "g": counts[:, :2],
        "labeled_users": counts[:, 2:],
    }


def _div(a: F64, b: F64) -> F64:
    return np.divide(a, b, out=np.zeros_like(a, dtype=np.float64), where=b > 0)


def _box_minimize(quu: F64, qup: F64, quq: F64, qpp: F64, qqq: F64, qpq: F64) -> tuple[F64, F64]:
    """Minimize ``V(a, b) = quu + 2a qup + 2b quq + a^2 qpp + b^2 qqq + 2ab qpq`` on [0, 1]^2."""

    def value(a: F64, b: F64) -> F64:
        return quu + 2 * a * qup + 2 * b * quq + a * a * qpp + b * b * qqq + 2 * a * b * qpq

    zero, one = np.zeros_like(quu), np.ones_like(quu)
    cands = [
        (zero, np.clip(_div(-quq, qqq), 0, 1)),
        (one, np.clip(_div(-(quq + qpq), qqq), 0, 1)),
        (np.clip(_div(-qup, qpp), 0, 1), zero),
        (np.clip(_div(-(qup + qpq), qpp), 0, 1), one),
    ]
    det = qpp * qqq - qpq**2
    inner_ok = det > 1e-12 * qpp * qqq
    a_i = _div(quq * qpq - qup * qqq, np.where(inner_ok, det, 0.0))
    b_i = _div(qup * qpq - quq * qpp, np.where(inner_ok, det, 0.0))
    inside = inner_ok & (a_i >= 0) & (a_i <= 1) & (b_i >= 0) & (b_i <= 1)
    cands.append((np.where(inside, a_i, 0.0), np.where(inside, b_i, 0.0)))
    values = np.stack([value(a, b) for a, b in cands])
    best = np.argmin(values, axis=0)
    a_all = np.stack([a for a, _ in cands])
    b_all = np.stack([b for _, b in cands])
    cols = np.arange(quu.size)
    return a_all[best, cols], b_all[best, cols]


def _cluster_estimates(s: dict[str, F64], lambda_rule: str) -> dict[str, F64]:
    tot, gram, g = s["totals"], s["gram"], s["g"]
    n_rows = tot.shape[0]
    w_a, w_d, means = [], [], []
    with np.errstate(divide="ignore", invalid="ignore"):
        for a in (0, 1):
            o = 5 * a
            n, sy, sf, big_n, su = (tot[:, o + j] for j in range(5))
            ybar, fbar, ubar = sy / n, sf / n, _div(su, big_n)
            wa = np.zeros((n_rows, 10))
            wa[:, o + 1], wa[:, o] = 1.0 / n, -ybar / n
            wd = np.zeros((n_rows, 10))
            has_u = big_n > 0
            wd[:, o + 4] = _div(np.ones(n_rows), big_n)
            wd[:, o + 3] = -_div(ubar, big_n)
            wd[:, o + 2] = np.where(has_u, -1.0 / n, 0.0)
            wd[:, o] = np.where(has_u, fbar / n, 0.0)
            w_a.append(np.nan_to_num(wa, nan=0.0, posinf=0.0, neginf=0.0))
            w_d.append(np.nan_to_num(wd, nan=0.0, posinf=0.0, neginf=0.0))
            means.append((ybar, ubar - fbar))
        scale = np.sqrt(_div(g, g - 1.0))

    def quad(u: F64, v: F64) -> F64:
        return np.einsum("li,lij,lj->l", u, gram, v)

    u = scale[:, 1:2] * w_a[1] - scale[:, 0:1] * w_a[0]
    p = scale[:, 1:2] * w_d[1]
    q = -scale[:, 0:1] * w_d[0]
    if lambda_rule == "joint":
        lam_t, lam_c = _box_minimize(
            quad(u, u), quad(u, p), quad(u, q), quad(p, p), quad(q, q), quad(p, q)
        )
    else:
        lam_c = np.clip(_div(-quad(w_a[0], w_d[0]), quad(w_d[0], w_d[0])), 0.0, 1.0)
        lam_t = np.clip(_div(-quad(w_a[1], w_d[1]), quad(w_d[1], w_d[1])), 0.0, 1.0)
    psi = u + lam_t[:, None] * p + lam_c[:, None] * q
    (yc, gap_c), (yt, gap_t) = means
    n = tot[:, [0, 5]]
    big_n = tot[:, [3, 8]]
    with np.errstate(invalid="ignore"):
        aug = (yt + np.where(lam_t > 0, lam_t * gap_t, 0.0)) - (
            yc + np.where(lam_c > 0, lam_c * gap_c, 0.0)
        )
    return {
        "naive_effect": yt - yc,
        "naive_var": np.maximum(quad(u, u), 0.0),
        "aug_effect": aug,
        "aug_var": np.maximum(quad(psi, psi), 0.0),
        "lam": np.column_stack([lam_c, lam_t]),
        "n": n,
        "N": big_n,
        "arm_units": s["labeled_users"],
        "valid": (n[:, 0] >= 2) & (n[:, 1] >= 2) & (g[:, 0] >= 2) & (g[:, 1] >= 2),
    }


def _first_true(mask: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """Per row of a (groups, looks) mask: whether any is true and the first such column."""
    any_ = mask.any(axis=1)
    return any_, np.where(any_, np.argmax(mask, axis=1), -1)


def monitor_effect(
    arm: ArrayLike,
    labeled: ArrayLike,
    rating: ArrayLike,
    prediction: ArrayLike,
    look: ArrayLike,
    n_looks: int,
    users: ArrayLike | None = None,
    alpha: float = 0.05,
    target_look: int | None = None,
    target_labels: float | ArrayLike | None = None,
    lambda_rule: Literal["joint", "arm"] = "joint",
    min_units_per_arm: int = 10,
    groups: ArrayLike | None = None,
) -> MonitorResult:
    """Naive and PPI++ effect, fixed interval and anytime-valid sequence at every look at once.

    Cost: one sort and a few bincounts over the sessions plus one pair of 10-column matrix
    products per look (clustered), or nine bincounts (i.i.d.); 10^6 sessions x 30 looks take
    well under a second (``perf/monitor_bench.py``). Sessions may come in any order.

    Args:
        arm: Per session 0 (control) or 1 (treatment), shape (n,).
        labeled: Boolean mask of rated sessions.
        rating: Rating of labeled sessions (ignored, e.g. NaN, for unlabeled ones).
        prediction: Honest prediction for every session (out-of-fold for sessions the model was
            trained on, or from a model trained before the test). In-sample predictions make
            the sequence invalid.
        look: First look (0-based) at which the session is visible.
        n_looks: Number of looks K so far; looks are ``0 .. K-1``.
        users: Optional cluster (user) ids, any hashable values (integer codes are fastest).
            Given, variances are cluster-robust (CR1).
        alpha: Error level of the fixed intervals and of the sequence (uniformly over looks).
        target_look: Look at which the sequence should be tightest (default: the last look,
            ``K-1``). It may lie beyond the data (a planned calendar): t* is then extrapolated
            as ``labels at K-1 * (target_look + 1) / K``.
        target_labels: t* in labeled sessions (both arms), fixed in advance; overrides
            ``target_look``. A scalar, or one value per group (in sorted group order).
        lambda_rule: Clustered mode only: 'joint' minimizes the effect's variance over both
            lambdas (cross term of users in both arms), 'arm' takes each arm's own optimum as
            compare_arms does; they agree when no user is in both arms. Without users lambda is
            ppi_py's power-tuned one per arm.
        min_units_per_arm: Intervals and sequences start at the first look at which each arm has
            this many labeled units (labeled users when clustered, labeled sessions otherwise);
            the asymptotics do not hold before (module Notes). At least 2.
        groups: Optional case-study (or replication) ids: every group is monitored on its own,
            in the same pass; the table and stops gain a ``group`` column.

    Returns:
        The per-look table and the first conclusive look per estimator and band.

    Raises:
        PulseError: If an input is invalid, or if at the last look an arm of a group has fewer
            than ``min_units_per_arm`` labeled units (nothing can be monitored).

    Notes:
        Numbers at look k equal :func:`pulse_ml.stats.arm_effect.compare_arms` on the sessions
        with ``look <= k`` (i.i.d.; clustered with ``lambda_rule='arm'``); see the module
        docstring for the formulas, the clock t and the references (Waudby-Smith et al. 2024;
        Kilian, Cortinovis & Caron 2025).
    """
    z = z_two_sided(alpha)
    arm_v, lab, y, f, lk = _prepare(arm, labeled, rating, prediction, look, n_looks)
    n = arm_v.size
    if lambda_rule not in ("joint", "arm"):
        raise _fail(f"lambda_rule must be 'joint' or 'arm', got {lambda_rule!r}")
    if (
        isinstance(min_units_per_arm, bool)
        or not isinstance(min_units_per_arm, int | np.integer)
        or min_units_per_arm < 2
    ):
        raise _fail(f"min_units_per_arm must be an integer >= 2, got {min_units_per_arm!r}")
    if groups is None:
        grp, group_values = np.zeros(n, dtype=np.int64), None
    else:
        grp, group_values = _int_codes(groups, "groups", n)
    n_groups = int(grp.max()) + 1
    # Shift ratings and predictions by constants per group: every estimate is invariant and the
    # sums of squares lose less precision.
    for v, mask in ((y, lab), (f, np.ones(n, dtype=bool))):
        cnt = np.bincount(grp[mask], minlength=n_groups)
        ref = np.bincount(grp[mask], weights=v[mask], minlength=n_groups) / np.maximum(cnt, 1)
        v -= np.where(mask, ref[grp], 0.0)
    if users is None:
        est = _iid_estimates(_iid_sums(grp, lk, arm_v, lab, y, f, n_groups, n_looks))
        rule = "ppi_py"
    else:
        codes, _ = _int_codes(users, "users", n)
        sums = _cluster_sums(grp, codes, lk, arm_v, lab, y, f, n_groups, n_looks)
        est = _cluster_estimates(sums, lambda_rule)
        rule = lambda_rule
    shape = (n_groups, n_looks)
    valid = est["valid"]
    arm_units = est["arm_units"]
    ready = valid & (arm_units.min(axis=1) >= min_units_per_arm)
    last_ok = ready.reshape(shape)[:, -1]
    if not last_ok.all():
        bad = np.flatnonzero(~last_ok)[:5]
        names = bad.tolist() if group_values is None else group_values[bad].tolist()
        unit = "labeled users" if users is not None else "labeled sessions"
        where = "" if group_values is None else f" (groups {names})"
        raise _fail(
            f"each arm needs at least {min_units_per_arm} {unit} by the last look{where}; "
            "monitor later, or lower min_units_per_arm"
        )
    n_lab = est["n"].sum(axis=1)
    n_unl = est["N"].sum(axis=1)
    clock = n_lab.reshape(shape)
    t_star = _target(clock, n_looks, target_look, target_labels)
    c = _mixture_c(alpha)
    tr = c * clock / t_star[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        mult = np.sqrt(2.0 * (tr + 1.0) / tr * np.log(np.sqrt(tr + 1.0) / alpha)).reshape(-1)
    names_out = TABLE_COLUMNS[2:]
    cols: dict[str, list[F64]] = {k: [] for k in names_out}
    for name in ESTIMATORS:
        key = "naive" if name == "naive" else "aug"
        se = np.where(valid, np.sqrt(est[f"{key}_var"]), np.nan)
        se = np.where(se > 0, se, np.nan)
        eff = np.where(valid, est[f"{key}_effect"], np.nan)
        lam = est["lam"] if name == "augmented" else np.zeros_like(est["lam"])
        lam = np.where(valid[:, None], lam, np.nan)
        se_i = np.where(ready, se, np.nan)
        for k, v in (
            ("n_labeled", n_lab),
            ("n_unlabeled", n_unl),
            ("units_control", arm_units[:, 0]),
            ("units_treatment", arm_units[:, 1]),
            ("effect", eff),
            ("se", se),
            ("ci_lower", eff - z * se_i),
            ("ci_upper", eff + z * se_i),
            ("cs_lower", eff - mult * se_i),
            ("cs_upper", eff + mult * se_i),
            ("lambda_control", lam[:, 0]),
            ("lambda_treatment", lam[:, 1]),
        ):
            cols[k].append(v)
    rows = n_groups * n_looks
    data: dict[str, object] = {}
    if group_values is not None:
        data["group"] = np.repeat(group_values, n_looks * 2)
    data["look"] = np.tile(np.repeat(np.arange(n_looks), 2), n_groups)
    data["estimator"] = np.tile(np.array(ESTIMATORS, dtype=object), rows)
    for k, parts in cols.items():
        data[k] = np.column_stack(parts).reshape(-1)
    table = pd.DataFrame(data)
    for k in ("n_labeled", "n_unlabeled", "units_control", "units_treatment"):
        table[k] = table[k].round().astype(np.int64)
    return MonitorResult(
        table=table,
        stops=_stops(table, group_values, n_groups, n_looks),
        alpha=float(alpha),
        target_labels=t_star,
        clustered=users is not None,
        lambda_rule=rule,
    )


def _target(
    clock: F64, n_looks: int, target_look: int | None, target_labels: float | ArrayLike | None
) -> F64:
    """t* per group: given, or the labels at the target look (extrapolated beyond the data)."""
    if target_labels is not None:
        given = np.asarray(target_labels, dtype=np.float64)
        if given.ndim > 1 or given.size not in (1, clock.shape[0]):
            raise _fail(f"target_labels needs one value or one per group ({clock.shape[0]})")
        t_star = np.broadcast_to(given.reshape(-1), (clock.shape[0],)).copy()
    else:
        tl = n_looks - 1 if target_look is None else target_look
        if isinstance(tl, bool) or not isinstance(tl, int | np.integer) or tl < 0:
            raise _fail(f"target_look must be a look index >= 0, got {target_look!r}")
        if tl < n_looks:
            t_star = clock[:, tl].astype(np.float64)
        else:
            t_star = clock[:, -1] * (tl + 1.0) / n_looks
    if not (np.isfinite(t_star) & (t_star > 0)).all():
        raise _fail("the target has no labeled session; choose a later target_look")
    return t_star


def _stops(
    table: pd.DataFrame, group_values: NDArray | None, n_groups: int, n_looks: int
) -> pd.DataFrame:
    parts = []
    for e, name in enumerate(ESTIMATORS):
        sub = table.iloc[e::2]
        for band, lo_col, hi_col in (
            ("sequence", "cs_lower", "cs_upper"),
            ("fixed", "ci_lower", "ci_upper"),
        ):
            lo = sub[lo_col].to_numpy().reshape(n_groups, n_looks)
            hi = sub[hi_col].to_numpy().reshape(n_groups, n_looks)
            found, first = _first_true((lo > 0) | (hi < 0))
            rows = sub.iloc[np.where(found, first, 0) + np.arange(n_groups) * n_looks]
            df = pd.DataFrame(
                {
                    "estimator": name,
                    "band": band,
                    "conclusive": found,
                    "look": pd.array(np.where(found, first, 0), dtype="Int64"),
                    "n_labeled": pd.array(rows["n_labeled"].to_numpy(), dtype="Int64"),
                    "n_unlabeled": pd.array(rows["n_unlabeled"].to_numpy(), dtype="Int64"),
                    "effect": np.where(found, rows["effect"].to_numpy(), np.nan),
                    "lower": np.where(found, rows[lo_col].to_numpy(), np.nan),
                    "upper": np.where(found, rows[hi_col].to_numpy(), np.nan),
                }
            )
            df.loc[~found, ["look", "n_labeled", "n_unlabeled"]] = pd.NA
            if group_values is not None:
                df.insert(0, "group", group_values)
            parts.append(df)
    out = pd.concat(parts, ignore_index=True)
    if group_values is not None:
        out = out.sort_values("group", kind="stable")
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- planning


def _simpson(b: float, step: float) -> tuple[F64, F64]:
    m = max(2, int(math.ceil(2.0 * b / step)))
    m += m % 2
    x = np.linspace(-b, b, m + 1)
    w = np.ones(m + 1)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (x[1] - x[0]) / 3.0


def first_crossing_probabilities(drift: float, boundary: ArrayLike, step: float = 0.05) -> F64:
    """First-passage probabilities of a Gaussian random walk through a two-sided boundary.

    ``W_d = sum_{j <= d} (drift + e_j)``, e_j i.i.d. N(0, 1); returns ``P(|W_d| >= b_d`` for the
    first time at look d) for d = 1..D by recursive numerical integration (Simpson's rule on
    the continuation region, exact normal tails for the crossing mass).

    Args:
        drift: Mean increment per look.
        boundary: Positive boundaries ``b_1..b_D`` on the scale of W (inf = no stop at a look).
        step: Grid spacing of the integration (in units of one look's standard deviation).

    Returns:
        Array of D probabilities; their sum is the probability of stopping by look D.

    Notes:
        Armitage, McPherson & Rowe (1969); Jennison & Turnbull, Group Sequential Methods with
        Applications to Clinical Trials (2000), ch. 19.
    """
    b = np.asarray(boundary, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or (b <= 0).any() or np.isnan(b).any():
        raise PulseError("first_crossing_probabilities: boundaries must be positive numbers")
    out = np.zeros(b.size)
    big = 40.0 + abs(drift) * b.size  # a finite stand-in for "no stopping"
    bb = np.where(np.isfinite(b), b, big)
    out[0] = norm.sf(bb[0] - drift) + norm.cdf(-bb[0] - drift)
    x, w = _simpson(bb[0], step)
    dens = np.exp(-0.5 * (x - drift) ** 2) / math.sqrt(2 * math.pi)
    for d in range(1, b.size):
        mean = x + drift
        mass = w * dens
        out[d] = float(mass @ (norm.sf(bb[d] - mean) + norm.cdf(-bb[d] - mean)))
        if d + 1 < b.size:
            xn, wn = _simpson(bb[d], step)
            kern = np.exp(-0.5 * (xn[:, None] - mean[None, :]) ** 2) / math.sqrt(2 * math.pi)
            dens = kern @ mass
            x, w = xn, wn
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class SequentialPlan:
    """Expected course of a monitored test for one estimator.

    Attributes:
        median_day: First day by which the sequence is conclusive with probability >= 1/2
            (``None`` if not within ``max_days``).
        power_day: First day by which it is conclusive with probability >= ``power``.
        p_conclusive: Probability that the sequence excludes 0 within ``max_days``.
        p_conclusive_by_day: Cumulative probability of a conclusive sequence, day 1..max_days.
        fixed_days: Days a fixed-horizon test needs for ``power`` (looked at once, at the end).
        fixed_labels_per_arm: Labels per arm of that fixed-horizon test.
        se_factor: Standard error relative to the naive one (1 for naive).
    """

    median_day: int | None
    power_day: int | None
    p_conclusive: float
    p_conclusive_by_day: tuple[float, ...]
    fixed_days: int
    fixed_labels_per_arm: int
    se_factor: float


@dataclass(frozen=True)
class MonitorPlan:
    """Days to a conclusive result with the naive and the PPI++ sequence.

    Attributes:
        naive: Plan for the difference of labeled means.
        augmented: Plan for PPI++ (optimal lambda).
        median_ratio: ``augmented.median_day / naive.median_day`` (``None`` if either is).
        variance_ratio: ``1 - rho^2 N/(n + N)``, the PPI++ / naive variance ratio; with a
            constant multiplier it would be the ratio of days.
        peeking_type1: Probability that the fixed Wald interval, checked every day for
            ``max_days`` days, ever excludes 0 under no effect (what peeking costs).
        sequence_type1: The same for the sequence (at most ``alpha``, asymptotically).
        target_day: Day at which the sequence is tightest (t* of :func:`monitor_effect`).
        max_days: Horizon.
        alpha: Error level.
        power: Target power.
    """

    naive: SequentialPlan
    augmented: SequentialPlan
    median_ratio: float | None
    variance_ratio: float
    peeking_type1: float
    sequence_type1: float
    target_day: int
    max_days: int
    alpha: float
    power: float


def _first_day(cum: F64, level: float) -> int | None:
    hit = np.flatnonzero(cum >= level - 1e-12)
    return int(hit[0]) + 1 if hit.size else None


def _fixed_days(theta: float, z: float, power: float) -> float:
    def gap(d: float) -> float:
        s = theta * math.sqrt(d)
        return float(norm.cdf(s - z) + norm.cdf(-s - z)) - power

    lo, hi = 1e-9, 1.0
    while gap(hi) < 0:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise PulseError("plan_monitoring: the effect is too small to reach the power")
    return lo if gap(lo) >= 0 else float(brentq(gap, lo, hi, xtol=1e-10, rtol=1e-12))


def plan_monitoring(
    effect: float,
    sd: float,
    rho: float,
    labeled_per_day: float,
    unlabeled_per_day: float,
    alpha: float = 0.05,
    power: float = 0.8,
    design_effect: float = 1.0,
    max_days: int = 21,
    target_day: int | None = None,
    min_units_per_arm: int = 10,
) -> MonitorPlan:
    """Expected days to a conclusive result with the naive and the PPI++ sequence.

    Daily looks; per arm and day ``labeled_per_day`` ratings and ``unlabeled_per_day``
    predictions arrive. After d days the naive effect has variance
    ``V_d = 2 sd^2 deff / (d labeled_per_day)`` and PPI++ ``V_d (1 - rho^2 N/(n + N))``
    (optimal lambda); the stopping-day distribution of the sequence of :func:`monitor_effect`
    (clock t proportional to days, t* at ``target_day``) is computed exactly for this Gaussian
    model (:func:`first_crossing_probabilities`). The fixed-horizon rows solve the usual
    two-sided power equation for the number of days.

    Args:
        effect: Effect to detect (treatment - control, rating scale), non-zero.
        sd: Standard deviation of a rating within an arm (> 0).
        rho: Correlation of rating and honest prediction, in [-1, 1].
        labeled_per_day: Labeled sessions per arm per day (> 0).
        unlabeled_per_day: Unlabeled sessions per arm per day (>= 0).
        alpha: Error level of the sequence / test.
        power: Target power, in (alpha/2, 1).
        design_effect: Variance inflation of clustering (>= 1; 1 + (m - 1) ICC for m sessions
            per user).
        max_days: Horizon of the monitoring, in days (>= 1).
        target_day: Day at which the sequence is tightest (default ``max_days``), as
            ``target_look`` of :func:`monitor_effect`.
        min_units_per_arm: No stop before each arm has this many labels (as in
            :func:`monitor_effect`).

    Returns:
        The plan for both estimators.

    Raises:
        PulseError: If an argument is out of range, or if no day reaches ``min_units_per_arm``.

    Notes:
        Boundary of Waudby-Smith et al. (2024); PPI++ variance of Angelopoulos, Duchi & Zrnic
        (2023); numerical integration of Armitage, McPherson & Rowe (1969).
    """
    problems = []
    if not np.isfinite(effect) or effect == 0:
        problems.append(f"effect must be a non-zero number, got {effect}")
    if not np.isfinite(sd) or sd <= 0:
        problems.append(f"sd must be > 0, got {sd}")
    if not -1.0 <= rho <= 1.0:
        problems.append(f"rho must be in [-1, 1], got {rho}")
    if not np.isfinite(labeled_per_day) or labeled_per_day <= 0:
        problems.append(f"labeled_per_day must be > 0, got {labeled_per_day}")
    if not np.isfinite(unlabeled_per_day) or unlabeled_per_day < 0:
        problems.append(f"unlabeled_per_day must be >= 0, got {unlabeled_per_day}")
    if not 0.0 < alpha < 1.0:
        problems.append(f"alpha must be in (0, 1), got {alpha}")
    if not alpha / 2.0 < power < 1.0:
        problems.append(f"power must be in (alpha/2, 1), got {power}")
    if not np.isfinite(design_effect) or design_effect <= 0:
        problems.append(f"design_effect must be > 0, got {design_effect}")
    if isinstance(max_days, bool) or not isinstance(max_days, int | np.integer) or max_days < 1:
        problems.append(f"max_days must be a positive integer, got {max_days!r}")
    target = max_days if target_day is None else target_day
    if (
        isinstance(target, bool)
        or not isinstance(target, int | np.integer)
        or not 1 <= target <= max(max_days, 1)
    ):
        problems.append(f"target_day must be an integer in [1, max_days], got {target_day!r}")
    if not problems and max_days * labeled_per_day < min_units_per_arm:
        problems.append(
            f"fewer than min_units_per_arm={min_units_per_arm} labels per arm by day {max_days}"
        )
    if problems:
        raise PulseError("plan_monitoring: " + "; ".join(problems))
    z = z_two_sided(alpha)
    days = np.arange(1, max_days + 1, dtype=np.float64)
    mult = cs_multiplier(days, float(target), alpha)
    started = days * labeled_per_day >= min_units_per_arm
    seq_b = np.where(started, mult * np.sqrt(days), np.inf)
    fix_b = np.where(started, z * np.sqrt(days), np.inf)
    factor = 1.0 - rho**2 * unlabeled_per_day / (labeled_per_day + unlabeled_per_day)
    v1 = 2.0 * sd**2 * design_effect / labeled_per_day
    plans = []
    for f in (1.0, factor):
        theta = abs(effect) / math.sqrt(v1 * f)
        cum = np.cumsum(first_crossing_probabilities(theta, seq_b))
        d_fix = _fixed_days(theta, z, power)
        plans.append(
            SequentialPlan(
                median_day=_first_day(cum, 0.5),
                power_day=_first_day(cum, power),
                p_conclusive=float(cum[-1]),
                p_conclusive_by_day=tuple(float(c) for c in cum),
                fixed_days=int(math.ceil(d_fix - 1e-9)),
                fixed_labels_per_arm=int(math.ceil(d_fix * labeled_per_day - 1e-9)),
                se_factor=math.sqrt(f),
            )
        )
    naive, aug = plans
    ratio = (
        aug.median_day / naive.median_day
        if naive.median_day is not None and aug.median_day is not None
        else None
    )
    return MonitorPlan(
        naive=naive,
        augmented=aug,
        median_ratio=ratio,
        variance_ratio=float(factor),
        peeking_type1=float(first_crossing_probabilities(0.0, fix_b).sum()),
        sequence_type1=float(first_crossing_probabilities(0.0, seq_b).sum()),
        target_day=int(target),
        max_days=int(max_days),
        alpha=float(alpha),
        power=float(power),
    )


# --------------------------------------------------------------------------- simulation


def _star_mean(loc: F64, scale: float) -> F64:
    """E[clip(round(Z), 1, 5)] for Z ~ N(loc, scale^2)."""
    cuts = np.array([1.5, 2.5, 3.5, 4.5])
    return 1.0 + norm.sf((cuts[:, None] - np.atleast_1d(loc)[None, :]) / scale).sum(axis=0)


def simulate_monitoring(
    n_reps: int,
    n_days: int = 21,
    labeled_per_day: int = 10,
    unlabeled_per_day: int = 100,
    effect: float = 0.0,
    signal: float = 0.6,
    n_users: int | None = None,
    user_sd: float = 0.5,
    randomize: Literal["session", "user"] = "session",
    base: float = 4.0,
    seed: int = 0,
) -> tuple[dict[str, NDArray], float]:
    """Seeded A/B monitoring data with 1-5 star ratings (the validation design of the tests).

    Per replication, day and arm, ``labeled_per_day`` rated and ``unlabeled_per_day`` unrated
    sessions arrive (arm slots are exact for ``randomize='session'``; with ``'user'`` each user
    keeps one arm and the slot's arm is replaced by it). The latent rating is
    ``base + effect * arm + b_user + x + e`` with ``x ~ N(0, signal)``, ``e ~ N(0, 1 - signal)``
    and ``b_user ~ N(0, user_sd^2)``; the rating is ``clip(round(latent), 1, 5)``. The honest
    prediction is ``3.5 + x + 0.8 b_user`` (it does not see the arm). With users, 30% arrive
    on day 0 and the rest uniformly over the days; a session belongs to a uniformly drawn user
    among those already arrived, so a user's sessions spread over many looks.

    Args:
        n_reps: Replications (returned as ``group`` 0..n_reps-1).
        n_days: Days = looks.
        labeled_per_day: Labeled sessions per arm per day.
        unlabeled_per_day: Unlabeled sessions per arm per day.
        effect: Effect on the latent scale.
        signal: Share of the within-user latent variance the predictor sees, in [0, 1].
        n_users: Users per replication; ``None`` = no users (i.i.d. sessions).
        user_sd: Standard deviation of the user effect.
        randomize: 'session' (users may be in both arms) or 'user'.
        base: Latent control mean.
        seed: Seed of the generator.

    Returns:
        ``(data, true_effect)``: data has arrays ``group``, ``look``, ``arm``, ``labeled``,
        ``rating`` (NaN when unlabeled), ``prediction`` and ``users`` (``None`` without users);
        ``true_effect`` is the effect on the star scale (exact, by normal probabilities).
    """
    if randomize not in ("session", "user"):
        raise PulseError(f"randomize must be 'session' or 'user', got {randomize!r}")
    rng = np.random.default_rng(seed)
    per_day = 2 * (labeled_per_day + unlabeled_per_day)
    slot_arm = np.repeat([0, 1], labeled_per_day + unlabeled_per_day)
    slot_lab = np.tile(np.r_[np.ones(labeled_per_day, bool), np.zeros(unlabeled_per_day, bool)], 2)
    size = n_reps * n_days * per_day
    group = np.repeat(np.arange(n_reps), n_days * per_day)
    look = np.tile(np.repeat(np.arange(n_days), per_day), n_reps)
    arm = np.tile(slot_arm, n_reps * n_days)
    labeled = np.tile(slot_lab, n_reps * n_days)
    x = rng.normal(0.0, math.sqrt(signal), size)
    e = rng.normal(0.0, math.sqrt(1.0 - signal), size)
    users = None
    b = np.zeros(size)
    sd_total = 1.0
    if n_users is not None:
        n_first = max(1, int(0.3 * n_users))
        arrive = np.sort(np.r_[np.zeros(n_first), rng.uniform(0, n_days, n_users - n_first)])
        arrived = np.searchsorted(arrive, np.arange(n_days), side="right")  # users by day d
        u = np.minimum((rng.random(size) * arrived[look]).astype(np.int64), arrived[look] - 1)
        users = group * n_users + u
        b = rng.normal(0.0, user_sd, n_reps * n_users)[users]
        sd_total = math.sqrt(1.0 + user_sd**2)
        if randomize == "user":
            arm = rng.integers(0, 2, n_reps * n_users)[users]
    latent = base + effect * arm + b + x + e
    rating = np.clip(np.round(latent), 1.0, 5.0)
    prediction = 3.5 + x + 0.8 * b
    data = {
        "group": group,
        "look": look,
        "arm": arm,
        "labeled": labeled,
        "rating": np.where(labeled, rating, np.nan),
        "prediction": prediction,
        "users": users,
    }
    means = _star_mean(np.array([base, base + effect]), sd_total)
    return data, float(means[1] - means[0])
