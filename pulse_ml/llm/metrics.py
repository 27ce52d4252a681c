"""Pure metrics of LLM-judge scores against ratings, on the trainer's folds (``cv`` config)."""

from __future__ import annotations

import numpy as np

from pulse_ml.training.folds import FoldSettings
from pulse_ml.training.metrics import point_metrics


def score_metrics(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """MSE, MAE, Pearson r and Spearman rho of ``pred`` vs ``y`` (NaN preds ignored).

    Correlations follow :mod:`pulse_ml.training.metrics` (0.0 when one side is constant).
    """
    ok = ~np.isnan(pred)
    return point_metrics(y[ok], pred[ok])


def cv_judge_metrics(y: np.ndarray, pred: np.ndarray, cv: FoldSettings | None = None,
                     groups: np.ndarray | None = None) -> dict[str, float]:
    """Judge metrics pooled over labeled sessions plus their std over the trainer's folds.

    Args:
        y: Ratings of the labeled sessions, in table order, shape (n,).
        pred: Judge scores (NaN = missing), shape (n,).
        cv: The ``cv`` settings (default: 5 folds, seed 42, grouped by user), the same
            ones the trainer reads.
        groups: User ids: folds keep a user's sessions together when ``group_by_user``.

    Returns:
        ``cv_mse``, ``cv_mae``, ``cv_pearson``, ``cv_spearman`` (pooled over all folds, like
        out-of-fold predictions), ``cv_mse_std``, ``cv_mae_std``, ``cv_pearson_std`` (population
        std of the per-fold values), ``n_sessions`` and ``n_missing``.
    """
    y = np.asarray(y, dtype=float)
    pred = np.asarray(pred, dtype=float)
    pooled = score_metrics(y, pred)
    out = {f"cv_{k}": v for k, v in pooled.items()}
    folds: dict[str, list[float]] = {"mse": [], "mae": [], "pearson": []}
    cv = cv or FoldSettings()
    n_splits = cv.n_splits
    if len(y) >= n_splits:
        from pulse_ml.errors import PulseError
        from pulse_ml.training.folds import make_folds

        try:
            fold_of = make_folds(len(y), n_splits, cv.seed,
                                 groups if cv.group_by_user else None)
        except PulseError:  # too few users for grouped folds: fall back to plain folds
            fold_of = make_folds(len(y), n_splits, cv.seed)
        for k in range(n_splits):
            test = fold_of == k
            m = score_metrics(y[test], pred[test])
            for k in folds:
                folds[k].append(m[k])
    for k, vals in folds.items():
        arr = np.asarray(vals, dtype=float)
        out[f"cv_{k}_std"] = float(np.nanstd(arr)) if len(arr) and not np.isnan(arr).all() else \
            float("nan")
    out["n_sessions"] = float(len(y))
    out["n_missing"] = float(np.isnan(pred).sum())
    return out
