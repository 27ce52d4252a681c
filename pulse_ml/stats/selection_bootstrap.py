"""Paired comparison of a *tuned* predictor with a reference: the selection is resampled too.

A study's trials each predicted every labeled session out of fold. The candidate is
selection-free: fold ``j`` is predicted by the trial with the best score on the other folds
(:func:`held_out_choice`), so no fold is judged by a choice it made. That removes the winner's
curse of taking the best trial, but the choices still depend on the data (fold ``i`` helps choose
fold ``j``'s trial), so the candidate is not a fixed function of the sessions and a bootstrap that
treats it as one is too narrow (~15% in sd in ``tests/training/test_promotion_selection.py``).
:func:`paired_bootstrap_selected` therefore repeats the choice in every resample of users, on the
resampled fold scores, as bootstrap bias-corrected CV does for the selection step (Tsamardinos,
Greasidou & Borboudakis 2018); the interval is the percentile interval of the cluster (user)
bootstrap of :mod:`pulse_ml.stats.paired`, with the same resampling stream.

References:
    I. Tsamardinos, E. Greasidou, G. Borboudakis. Bootstrapping the out-of-sample predictions
    for efficient and accurate cross-validation. Machine Learning 107, 1895-1922, 2018.
    S. Varma, R. Simon. Bias in error estimation when using cross-validation for model
    selection. BMC Bioinformatics 7:91, 2006.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pulse_ml.stats.paired import PairedComparison, _stats

_MAX_CELLS = 20_000_000  # resamples x cells x trials per block (bounds memory)


def held_out_choice(scores: ArrayLike, sizes: ArrayLike, maximize: bool = False
                    ) -> NDArray[np.intp]:
    """Per fold, the trial with the best size-weighted mean score over the *other* folds.

    Args:
        scores: Per-fold scores, shape (..., trials, folds) (fold MSEs: the held-out score is
            then the pooled MSE of the other folds).
        sizes: Sessions per fold, shape (..., folds) or (folds,).
        maximize: Higher is better (e.g. Pearson r).

    Returns:
        Trial index per fold, shape (..., folds); ties go to the earliest trial.
    """
    s = np.asarray(scores, float)
    w = np.asarray(sizes, float)[..., None, :]
    held = ((s * w).sum(axis=-1, keepdims=True) - s * w) / (w.sum(axis=-1, keepdims=True) - w)
    return np.argmax(held, axis=-2) if maximize else np.argmin(held, axis=-2)


def _fold_r(t: NDArray[np.float64]) -> NDArray[np.float64]:
    """Pearson r from sums ``[n, y, yy, p, pp, yp]`` in the last axis (0 when constant)."""
    n = t[..., 0]
    vy = t[..., 2] / n - (t[..., 1] / n) ** 2
    vp = t[..., 4] / n - (t[..., 3] / n) ** 2
    cov = t[..., 5] / n - t[..., 1] * t[..., 3] / n**2
    den = np.sqrt(np.maximum(vy, 0) * np.maximum(vp, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, cov / np.where(den > 0, den, 1.0), 0.0)


def _choose(t: NDArray[np.float64], maximize: bool) -> NDArray[np.intp]:
    """Per fold, the chosen trial from per-(trial, fold) sums ``t[..., K, F, 8]``."""
    if maximize:
        return held_out_choice(_fold_r(t[..., :6]), t[..., 0, :, 0], maximize=True)
    return held_out_choice(t[..., 6] / t[..., 0], t[..., 0, :, 0])


def paired_bootstrap_selected(
    y: ArrayLike,
    trial_preds: ArrayLike,
    folds: ArrayLike,
    pred_ref: ArrayLike,
    groups: ArrayLike | None = None,
    maximize: bool = False,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[PairedComparison, NDArray[np.intp]]:
    """Selection-free candidate (fold by fold) vs a reference, the choice redone per resample.

    Args:
        y: Ratings, shape (n,).
        trial_preds: Out-of-fold predictions of each trial, shape (K, n).
        folds: Fold of each session, shape (n,) (0..F-1).
        pred_ref: The reference's predictions (e.g. the champion's selection-free table).
        groups: User per session (resampling unit); None = each session alone.
        maximize: Trials are chosen on Pearson r (higher is better) instead of the MSE.
        n_boot: Resamples.
        alpha: Error level of the two-sided percentile intervals.
        seed: Seed of the resampling (drawn as in :func:`~pulse_ml.stats.paired.
            paired_bootstrap_many` with R = 1).

    Returns:
        ``(comparison, choice)``: the :class:`~pulse_ml.stats.paired.PairedComparison` of the
        selection-free candidate (chosen on all users) minus the reference, with intervals over
        resamples that choose again; and the trial index chosen for each fold.

    Raises:
        ValueError: mismatched shapes, fewer than 2 groups, or missing values.
    """
    yv = np.asarray(y, float)
    P = np.atleast_2d(np.asarray(trial_preds, float))
    ref = np.asarray(pred_ref, float)
    f = np.asarray(folds).astype(np.intp)
    n = yv.size
    if P.shape[1] != n or ref.shape != (n,) or f.shape != (n,):
        raise ValueError(f"shapes differ: y {yv.shape}, trial_preds {P.shape}, pred_ref "
                         f"{ref.shape}, folds {f.shape}")
    if not (np.isfinite(yv).all() and np.isfinite(P).all() and np.isfinite(ref).all()):
        raise ValueError("y, trial_preds and pred_ref must be finite")
    g = np.arange(n) if groups is None else np.asarray(groups)
    _, gi = np.unique(g, return_inverse=True)
    n_groups, n_folds, k = int(gi.max()) + 1, int(f.max()) + 1, P.shape[0]
    if n_groups < 2:
        raise ValueError("need at least 2 users (resampling units) to bootstrap a difference")
    centre = yv.mean()
    yc, Pc, rc = yv - centre, P - centre, ref - centre
    # per (group, fold) cell: trial sums [n, y, yy, p, pp, yp, err2, |err|] and the reference's
    cell = gi * n_folds + f
    cells, cell_of = np.unique(cell, return_inverse=True)
    cell_group, cell_fold = cells // n_folds, cells % n_folds
    base = np.stack([np.ones(n), yc, yc * yc], axis=1)
    err = Pc - yc
    per_trial = np.concatenate([np.broadcast_to(base, (k, n, 3)), np.stack(
        [Pc, Pc * Pc, Pc * yc, err * err, np.abs(err)], axis=2)], axis=2)  # (K, n, 8)
    sums = np.zeros((cells.size, k, 8))
    np.add.at(sums, cell_of, np.swapaxes(per_trial, 0, 1))
    rerr = rc - yc
    ref_sums = np.zeros((cells.size, 5))
    np.add.at(ref_sums, cell_of, np.stack([rc, rc * rc, rc * yc, rerr * rerr, np.abs(rerr)], 1))
    in_fold = [cell_fold == j for j in range(n_folds)]
    flat = [sums[m].reshape(int(m.sum()), k * 8) for m in in_fold]

    def resampled(weights: NDArray[np.float64]) -> tuple[dict, NDArray[np.intp]]:
        """Stats of both predictors for cell weights (B, C); the choice (B, F)."""
        t = np.stack([(weights[:, m] @ s_).reshape(-1, k, 8) for m, s_ in zip(in_fold, flat,
                                                                           strict=True)], 2)
        choice = _choose(t, maximize)  # (B, F)
        b = np.arange(t.shape[0])[:, None]
        chosen = t[b, choice, np.arange(n_folds)[None, :], :].sum(axis=1)  # (B, 8)
        table = np.concatenate([chosen[:, :3], chosen[:, 3:], weights @ ref_sums], axis=1)
        return _stats(table), choice

    point, choice = resampled(np.ones((1, cells.size)))
    rng = np.random.default_rng(seed)
    step = max(1, _MAX_CELLS // max(1, cells.size * k))
    boot = {key: np.empty(n_boot) for key in point}
    for start in range(0, n_boot, step):
        m = min(step, n_boot - start)
        drawn = rng.integers(0, n_groups, size=(m, n_groups))
        offset = np.arange(m)[:, None] * n_groups
        counts = np.bincount((drawn + offset).ravel(), minlength=m * n_groups).reshape(
            m, n_groups).astype(float)
        stats, _ = resampled(counts[:, cell_group])
        for key, value in stats.items():
            boot[key][start:start + m] = value
    q = [alpha / 2, 1 - alpha / 2]
    out: dict[str, float] = {}
    for name in ("mse", "mae", "r"):
        lo, hi = np.quantile(boot[f"{name}_new"] - boot[f"{name}_ref"], q)
        out.update({f"{name}_new": float(point[f"{name}_new"][0]),
                    f"{name}_ref": float(point[f"{name}_ref"][0]),
                    f"delta_{name}": float(point[f"{name}_new"][0] - point[f"{name}_ref"][0]),
                    f"{name}_ci_lower": float(lo), f"{name}_ci_upper": float(hi)})
    return PairedComparison(n_sessions=n, n_groups=n_groups, alpha=float(alpha),
                            n_boot=int(n_boot), seed=int(seed), **out), choice[0]
