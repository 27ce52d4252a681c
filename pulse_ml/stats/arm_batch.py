"""Many comparisons of one design at once: the vectorized twin of ``compare_arms``."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from pulse_ml.stats import effect_engine as engine
from pulse_ml.stats.arm_inputs import Arm, cluster_codes
from pulse_ml.stats.cluster_lin import kish_sums, labeled_cluster_lin
from pulse_ml.stats.cluster_moments import session_moments

__all__ = ["BatchComparison", "compare_batch"]


@dataclass(frozen=True)
class BatchComparison:
    """Many comparisons of the same design at once (arrays of shape (R,), per arm (R, 2)).

    Attributes:
        naive_effect: Naive effects.
        naive_lower: Lower ends of the naive intervals.
        naive_upper: Upper ends of the naive intervals.
        naive_se: Naive standard errors.
        aug_effect: Augmented effects.
        aug_lower: Lower ends of the augmented intervals.
        aug_upper: Upper ends of the augmented intervals.
        aug_se: Augmented standard errors.
        aug_se_in_sample: Augmented s.e. before the lambda-tuning inflation.
        ci_reduction_pct: ``100 (1 - width_aug / width_naive)``.
        lam: Lambdas, control first, shape (R, 2).
        result: The full engine output.
    """

    naive_effect: NDArray[np.float64]
    naive_lower: NDArray[np.float64]
    naive_upper: NDArray[np.float64]
    naive_se: NDArray[np.float64]
    aug_effect: NDArray[np.float64]
    aug_lower: NDArray[np.float64]
    aug_upper: NDArray[np.float64]
    aug_se: NDArray[np.float64]
    aug_se_in_sample: NDArray[np.float64]
    ci_reduction_pct: NDArray[np.float64]
    lam: NDArray[np.float64]
    result: engine.EngineResult


def compare_batch(
    control: Arm,
    treatment: Arm,
    alpha: float = 0.05,
    *,
    small_sample: bool = True,
    lam_mode: str = "joint",
    cr2: bool = True,
    lambda_noise: bool = True,
) -> BatchComparison:
    """:func:`compare_arms` for R data sets of one design in one vectorized pass.

    The arms' value arrays (``y``, ``f``, ``f_unl``) have shape (R, n) (a 1-D array is one data
    set); user ids are shared by the R data sets, shape (n,); weights have shape (R, n) or
    (n,). No refusals or warnings: rows that :func:`compare_arms` would refuse come out as NaN
    or zero-width. Meant for simulations (coverage, power, benchmarks).

    Args:
        control: The control arm (values (R, n_c) and (R, N_c)).
        treatment: The treatment arm.
        alpha: Error level.
        small_sample: As in :func:`compare_arms`.
        lam_mode: As in :func:`compare_arms`.
        cr2: As in :func:`compare_arms`.
        lambda_noise: As in :func:`compare_arms`.

    Returns:
        The batch of comparisons.
    """
    vals = [np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in
            (control.y, control.f, control.f_unl, treatment.y, treatment.f, treatment.f_unl)]
    yc, fc, fuc, yt, ft, fut = vals
    keys = [control.users, control.users_unl, treatment.users, treatment.users_unl]
    names = ["clusters_c", "clusters_unl_c", "clusters_t", "clusters_unl_t"]
    sizes = [yc.shape[1], fuc.shape[1], yt.shape[1], fut.shape[1]]
    (cl_c, cu_c, cl_t, cu_t), n_codes = cluster_codes(keys, sizes, names)
    w_c, w_t = control.w, treatment.w
    weighted = w_c is not None or w_t is not None
    wc = np.broadcast_to(np.ones(1) if w_c is None else np.asarray(w_c, float), yc.shape)
    wt = np.broadcast_to(np.ones(1) if w_t is None else np.asarray(w_t, float), yt.shape)
    cy = np.concatenate([yc, yt], axis=1).mean(axis=1, keepdims=True)
    cf = np.concatenate([fc, ft], axis=1).mean(axis=1, keepdims=True)
    arms = [(cl_c, yc - cy, fc - cf, wc, cu_c, fuc - cf),
            (cl_t, yt - cy, ft - cf, wt, cu_t, fut - cf)]
    res = _solve_in_chunks(arms, n_codes, cr2 and small_sample, lambda_noise and small_sample,
                           weighted=weighted, small_sample=small_sample, lam_mode=lam_mode,
                           clustered=any(k is not None for k in keys), alpha=alpha)
    q_n, q_a = engine.quantile(alpha, res.naive_df), engine.quantile(alpha, res.aug_df)
    w_n, w_a = 2 * q_n * res.naive_se, 2 * q_a * res.aug_se
    return BatchComparison(
        naive_effect=res.naive_effect, naive_lower=res.naive_effect - q_n * res.naive_se,
        naive_upper=res.naive_effect + q_n * res.naive_se, naive_se=res.naive_se,
        aug_effect=res.aug_effect, aug_lower=res.aug_effect - q_a * res.aug_se,
        aug_upper=res.aug_effect + q_a * res.aug_se, aug_se=res.aug_se,
        aug_se_in_sample=res.aug_se_in_sample,
        ci_reduction_pct=100.0 * (1.0 - np.divide(w_a, w_n, out=np.full_like(w_a, np.nan),
                                                  where=w_n > 0)),
        lam=res.lam, result=res,
    )


def _solve_in_chunks(arms: list[tuple], n_codes: int, cr2: bool, noise: bool,
                     **opts) -> engine.EngineResult:
    """:func:`engine.solve` over chunks of replications, concatenated.

    The per-cluster sums of the lambda-noise term take R x G_L x 16 values.
    """
    r = arms[0][1].shape[0]
    g_lab = np.unique(np.concatenate([arms[0][0], arms[1][0]])).size
    step = max(1, 2_000_000 // max(16 * g_lab, 1))
    parts = []
    for start in range(0, r, step):
        sub = [(cl, y[start:start + step], f[start:start + step], w[start:start + step], cu,
                fu[start:start + step]) for cl, y, f, w, cu, fu in arms]
        parts.append(engine.solve(
            session_moments(sub, n_codes, cr2=cr2), cr2=cr2,
            lab_z=labeled_cluster_lin(sub, n_codes, cr2=cr2) if noise else None,
            kish=kish_sums(sub, n_codes) if cr2 else None, **opts))
    if len(parts) == 1:
        return parts[0]
    return engine.EngineResult(*(np.concatenate([getattr(p, f.name) for p in parts])
                                 for f in fields(engine.EngineResult)))
