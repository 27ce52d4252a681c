"""Effect of a design change (treatment - control) with naive and prediction-powered intervals.

Each arm a in {control, treatment} has n_a labeled sessions (ratings Y, predictions f) and N_a
unlabeled sessions (predictions f~). Per arm the PPI++ estimate is

    mu_a(lam) = mean(Y) + lam * (mean(f~) - mean(f)),

with variance ``Var(Y - lam f) / n + lam^2 Var(f~) / N`` (ddof = 0, as ppi_py). The effect is
``Delta = mu_t - mu_c``; the arms are independent, so the variances add and the Wald interval is
``Delta -/+ z_{1-alpha/2} sqrt(se_c^2 + se_t^2)``. The naive estimate is the same with lam = 0
(difference of labeled means). Without clusters every number equals two ``ppi_py.ppi_mean_ci``
calls (power-tuned lambda, clipped to [0, 1]) combined this way.

Cluster-robust variant (sessions of one user are correlated; labeled and unlabeled sessions of an
arm may share a user). The estimate is linear, so its influence contributions are
``a_i = (Y_i - mean Y)/n``, ``b_i = (f_i - mean f)/n`` for labeled sessions and
``c_j = (f~_j - mean f~)/N`` for unlabeled ones. Summed per cluster g (user):
``A_g, B_g, C_g``, and with ``D_g = C_g - B_g`` the estimate's error is ``sum_g (A_g + lam D_g)``.
The per-cluster sums are the i.i.d. units (as the clustered PPI++ of the glide library, which
however uses per-cluster means and requires clusters to be fully labeled or unlabeled):

    Var_cl(lam) = G/(G-1) * sum_g (A_g + lam D_g)^2,
    lam* = clip(-sum_g A_g D_g / sum_g D_g^2, 0, 1)   (the exact minimizer of Var_cl),

G = number of clusters of the arm. The naive variance is the lam = 0 case. Cluster ids are shared
across arms: a user seen in both arms contributes ``psi_t,g - psi_c,g`` to the effect, so the
effect variance stays valid (it equals se_c^2 + se_t^2 when the arms have no user in common).

With honest (cross-fitted) predictions of correlation rho the width ratio cannot beat about
``sqrt(1 - rho^2 N/(n+N))`` (:func:`theoretical_width_ratio`).

References:
    A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. Prediction-powered
    inference. Science 382(6671), 2023.
    A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
    arXiv:2311.01453, 2023.
    T. Zrnic, E. J. Candes. Cross-prediction-powered inference. PNAS 121(15), 2024.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from pulse_ml.errors import PulseError
from pulse_ml.stats.ppi import as_vector, ppi_mean, z_two_sided

__all__ = ["ArmComparison", "Estimate", "compare_arms", "theoretical_width_ratio"]


@dataclass(frozen=True)
class Estimate:
    """An effect estimate (treatment - control) with its two-sided Wald interval.

    Attributes:
        effect: Point estimate of treatment mean - control mean.
        ci_lower: Lower end of the interval.
        ci_upper: Upper end of the interval.
        se: Standard error of the effect.
        p_value: Two-sided Wald p-value of "no effect".
    """

    effect: float
    ci_lower: float
    ci_upper: float
    se: float
    p_value: float

    @property
    def width(self) -> float:
        """Interval width ``ci_upper - ci_lower``."""
        return self.ci_upper - self.ci_lower


@dataclass(frozen=True)
class ArmComparison:
    """Naive and prediction-powered comparison of two arms.

    Attributes:
        naive: Difference of labeled means with its Wald interval.
        augmented: PPI++ effect with its Wald interval.
        ci_reduction_pct: ``100 * (1 - width_augmented / width_naive)`` (negative = wider).
        lambda_control: Lambda used in the control arm.
        lambda_treatment: Lambda used in the treatment arm.
        mean_control_naive: Labeled mean rating of the control arm.
        mean_treatment_naive: Labeled mean rating of the treatment arm.
        mean_control_augmented: PPI++ mean of the control arm.
        mean_treatment_augmented: PPI++ mean of the treatment arm.
        se_control_naive: Standard error of the control labeled mean.
        se_treatment_naive: Standard error of the treatment labeled mean.
        se_control_augmented: Standard error of the control PPI++ mean.
        se_treatment_augmented: Standard error of the treatment PPI++ mean.
        n_control: Labeled control sessions.
        n_treatment: Labeled treatment sessions.
        n_unlabeled_control: Unlabeled control sessions.
        n_unlabeled_treatment: Unlabeled treatment sessions.
        n_clusters: Number of clusters (users) over both arms; ``None`` without clustering.
        alpha: Error level of the intervals.
    """

    naive: Estimate
    augmented: Estimate
    ci_reduction_pct: float
    lambda_control: float
    lambda_treatment: float
    mean_control_naive: float
    mean_treatment_naive: float
    mean_control_augmented: float
    mean_treatment_augmented: float
    se_control_naive: float
    se_treatment_naive: float
    se_control_augmented: float
    se_treatment_augmented: float
    n_control: int
    n_treatment: int
    n_unlabeled_control: int
    n_unlabeled_treatment: int
    n_clusters: int | None
    alpha: float


def theoretical_width_ratio(
    rho: float | NDArray[np.float64], n: float, N: float
) -> float | NDArray[np.float64]:
    """Best achievable width ratio augmented/naive for predictions of correlation ``rho``.

    ``sqrt(1 - rho^2 * N / (n + N))`` (optimal lambda, Var(f) = Var(f~); PPI++, ADZ 2023).

    Args:
        rho: Correlation between rating and honest prediction (scalar or array).
        n: Labeled sessions per arm.
        N: Unlabeled sessions per arm.

    Returns:
        The ratio, same shape as ``rho``.
    """
    return np.sqrt(1.0 - np.square(rho) * N / (n + N))


def _estimate(effect: float, se: float, z: float) -> Estimate:
    p = float(2.0 * norm.sf(abs(effect) / se)) if se > 0 else float("nan")
    return Estimate(float(effect), float(effect - z * se), float(effect + z * se), float(se), p)


def _arm_arrays(
    y: ArrayLike, f: ArrayLike, f_unl: ArrayLike, arm: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    yv = as_vector(y, f"y_{arm}", min_size=2)
    fv = as_vector(f, f"f_{arm}", min_size=2)
    fu = as_vector(f_unl, f"f_unl_{arm}", min_size=1)
    if yv.size != fv.size:
        raise ValueError(f"y_{arm} has {yv.size} values but f_{arm} has {fv.size}")
    return yv, fv, fu


def _cluster_codes(
    keys: list[ArrayLike | None], sizes: list[int], names: list[str]
) -> tuple[list[NDArray[np.intp]], int]:
    """Integer cluster codes for several samples sharing one id space; ``None`` = singletons."""
    given = [(i, np.asarray(k)) for i, k in enumerate(keys) if k is not None]
    for i, k in given:
        if k.ndim != 1 or k.size != sizes[i]:
            raise ValueError(f"{names[i]} has shape {k.shape} but its sample has {sizes[i]} rows")
        if pd.isna(k).any():
            raise PulseError(f"{names[i]}: cluster ids (user_id) must not be missing")
    codes: list[NDArray[np.intp] | None] = [None] * len(keys)
    n_codes = 0
    if given:
        arrays = [k for _, k in given]
        if len({a.dtype.kind for a in arrays}) > 1:  # e.g. ints mixed with strings
            arrays = [a.astype(object) for a in arrays]
        joint, uniques = pd.factorize(np.concatenate(arrays))
        n_codes = len(uniques)
        start = 0
        for i, k in given:
            codes[i] = joint[start : start + k.size]
            start += k.size
    for i, c in enumerate(codes):
        if c is None:
            codes[i] = np.arange(n_codes, n_codes + sizes[i])
            n_codes += sizes[i]
    return [c for c in codes if c is not None], n_codes


def _clustered_arm(
    y: NDArray[np.float64],
    f: NDArray[np.float64],
    fu: NDArray[np.float64],
    codes_l: NDArray[np.intp],
    codes_u: NDArray[np.intp],
    n_codes: int,
) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    """Clustered lambda and per-cluster influence sums (naive, augmented), CR1-scaled."""
    n, big_n = y.size, fu.size
    a = np.bincount(codes_l, weights=(y - y.mean()) / n, minlength=n_codes)
    b = np.bincount(codes_l, weights=(f - f.mean()) / n, minlength=n_codes)
    c = np.bincount(codes_u, weights=(fu - fu.mean()) / big_n, minlength=n_codes)
    d = c - b
    dd = float(np.dot(d, d))
    lam = float(np.clip(-np.dot(a, d) / dd, 0.0, 1.0)) if dd > 0 else 0.0
    present = np.zeros(n_codes, dtype=bool)
    present[codes_l] = True
    present[codes_u] = True
    g = int(present.sum())
    if g < 2:
        raise PulseError("cluster-robust variance needs at least 2 users (clusters) per arm")
    scale = np.sqrt(g / (g - 1.0))
    return lam, a * scale, (a + lam * d) * scale


def compare_arms(
    y_c: ArrayLike,
    f_c: ArrayLike,
    f_unl_c: ArrayLike,
    y_t: ArrayLike,
    f_t: ArrayLike,
    f_unl_t: ArrayLike,
    alpha: float = 0.05,
    clusters_c: ArrayLike | None = None,
    clusters_t: ArrayLike | None = None,
    clusters_unl_c: ArrayLike | None = None,
    clusters_unl_t: ArrayLike | None = None,
) -> ArmComparison:
    """Compare treatment with control: naive and PPI++ (power-tuned) effect with intervals.

    Formulas: see the module docstring. Without any cluster argument the per-arm numbers are
    exactly those of ``ppi_py.ppi_mean_ci(..., lam=None)`` and ``classical_mean_ci``. When any
    cluster argument is given the variances are cluster-robust (per-user sums of influence
    contributions, CR1 factor G/(G-1)) and lambda minimizes the clustered variance; samples whose
    cluster argument is ``None`` are treated as one cluster per session. Integer cluster codes
    are much faster than strings (10^6 sessions: ~0.06 s vs ~0.6 s to factorize).

    Args:
        y_c: Control ratings of labeled sessions, shape (n_c,).
        f_c: Predictions for those sessions (honest: out-of-fold), shape (n_c,).
        f_unl_c: Predictions for unlabeled control sessions, shape (N_c,).
        y_t: Treatment ratings, shape (n_t,).
        f_t: Predictions for labeled treatment sessions, shape (n_t,).
        f_unl_t: Predictions for unlabeled treatment sessions, shape (N_t,).
        alpha: Error level of the two-sided intervals.
        clusters_c: Cluster (user) ids of the labeled control sessions.
        clusters_t: Cluster ids of the labeled treatment sessions.
        clusters_unl_c: Cluster ids of the unlabeled control sessions.
        clusters_unl_t: Cluster ids of the unlabeled treatment sessions.

    Returns:
        The comparison; effects are treatment - control.
    """
    z = z_two_sided(alpha)
    yc, fc, fuc = _arm_arrays(y_c, f_c, f_unl_c, "c")
    yt, ft, fut = _arm_arrays(y_t, f_t, f_unl_t, "t")
    keys = [clusters_c, clusters_unl_c, clusters_t, clusters_unl_t]
    n_clusters: int | None = None
    if all(k is None for k in keys):
        pc, pt = ppi_mean(yc, fc, fuc), ppi_mean(yt, ft, fut)
        lam_c, lam_t = pc.lam, pt.lam
        se_nc, se_nt = yc.std() / np.sqrt(yc.size), yt.std() / np.sqrt(yt.size)
        se_ac, se_at = pc.se, pt.se
        se_naive, se_aug = np.hypot(se_nc, se_nt), np.hypot(se_ac, se_at)
        m_ac, m_at = pc.estimate, pt.estimate
    else:
        names = ["clusters_c", "clusters_unl_c", "clusters_t", "clusters_unl_t"]
        sizes = [yc.size, fuc.size, yt.size, fut.size]
        (cl_c, cu_c, cl_t, cu_t), n_codes = _cluster_codes(keys, sizes, names)
        lam_c, naive_c, aug_c = _clustered_arm(yc, fc, fuc, cl_c, cu_c, n_codes)
        lam_t, naive_t, aug_t = _clustered_arm(yt, ft, fut, cl_t, cu_t, n_codes)
        se_nc, se_nt = np.linalg.norm(naive_c), np.linalg.norm(naive_t)
        se_ac, se_at = np.linalg.norm(aug_c), np.linalg.norm(aug_t)
        se_naive = np.linalg.norm(naive_t - naive_c)
        se_aug = np.linalg.norm(aug_t - aug_c)
        used = np.zeros(n_codes, dtype=bool)
        for codes in (cl_c, cu_c, cl_t, cu_t):
            used[codes] = True
        n_clusters = int(used.sum())
        m_ac = float(yc.mean()) + lam_c * (float(fuc.mean()) - float(fc.mean()))
        m_at = float(yt.mean()) + lam_t * (float(fut.mean()) - float(ft.mean()))
    m_nc, m_nt = float(yc.mean()), float(yt.mean())
    naive = _estimate(m_nt - m_nc, float(se_naive), z)
    augmented = _estimate(m_at - m_ac, float(se_aug), z)
    reduction = 100.0 * (1.0 - se_aug / se_naive) if se_naive > 0 else float("nan")
    return ArmComparison(
        naive=naive,
        augmented=augmented,
        ci_reduction_pct=float(reduction),
        lambda_control=float(lam_c),
        lambda_treatment=float(lam_t),
        mean_control_naive=m_nc,
        mean_treatment_naive=m_nt,
        mean_control_augmented=float(m_ac),
        mean_treatment_augmented=float(m_at),
        se_control_naive=float(se_nc),
        se_treatment_naive=float(se_nt),
        se_control_augmented=float(se_ac),
        se_treatment_augmented=float(se_at),
        n_control=int(yc.size),
        n_treatment=int(yt.size),
        n_unlabeled_control=int(fuc.size),
        n_unlabeled_treatment=int(fut.size),
        n_clusters=n_clusters,
        alpha=float(alpha),
    )
