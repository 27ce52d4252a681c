"""Regression metrics on out-of-fold predictions (pure functions)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from pulse_ml import keys


def pearson(y: np.ndarray, pred: np.ndarray) -> float:
    """Pearson r; 0.0 when either side is constant (a constant predictor has no correlation)."""
    y = np.asarray(y, float)
    pred = np.asarray(pred, float)
    if y.size < 2 or np.ptp(y) == 0 or np.ptp(pred) == 0:
        return 0.0
    return float(np.corrcoef(y, pred)[0, 1])


def spearman(y: np.ndarray, pred: np.ndarray) -> float:
    """Spearman rank correlation; 0.0 when either side is constant."""
    if np.ptp(np.asarray(y, float)) == 0 or np.ptp(np.asarray(pred, float)) == 0:
        return 0.0
    return float(stats.spearmanr(y, pred).statistic)


def point_metrics(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """MSE, MAE, Pearson r and Spearman rho of ``pred`` against ``y`` (NaN for no rows)."""
    y = np.asarray(y, float)
    pred = np.asarray(pred, float)
    if y.size == 0:
        nan = float("nan")
        return {"mse": nan, "mae": nan, "pearson": nan, "spearman": nan}
    err = pred - y
    return {"mse": float(np.mean(err**2)), "mae": float(np.mean(np.abs(err))),
            "pearson": pearson(y, pred), "spearman": spearman(y, pred)}


@dataclass(frozen=True)
class CVMetrics:
    """Metrics on pooled out-of-fold predictions plus per-fold values.

    Attributes:
        mse, mae, pearson, spearman: On all out-of-fold predictions pooled.
        fold_mse, fold_mae, fold_pearson: One value per fold.
    """

    mse: float
    mae: float
    pearson: float
    spearman: float
    fold_mse: tuple[float, ...]
    fold_mae: tuple[float, ...]
    fold_pearson: tuple[float, ...]

    def as_dict(self) -> dict[str, float]:
        """MLflow metric keys: ``cv_mse``, ``cv_mae``, ``cv_pearson``, ``cv_spearman`` and stds."""
        return {
            keys.CV_MSE: self.mse,
            keys.CV_MAE: self.mae,
            keys.CV_PEARSON: self.pearson,
            keys.CV_SPEARMAN: self.spearman,
            "cv_mse_std": float(np.std(self.fold_mse)),
            "cv_mae_std": float(np.std(self.fold_mae)),
            "cv_pearson_std": float(np.std(self.fold_pearson)),
        }


def cv_metrics(y: np.ndarray, oof: np.ndarray, folds: np.ndarray) -> CVMetrics:
    """Compute pooled and per-fold metrics.

    Args:
        y: Ratings, shape (n,).
        oof: Out-of-fold predictions, shape (n,).
        folds: Fold index of each row, shape (n,).
    """
    y = np.asarray(y, float)
    oof = np.asarray(oof, float)
    err = oof - y
    ids = np.unique(folds)
    f_mse = tuple(float(np.mean(err[folds == k] ** 2)) for k in ids)
    f_mae = tuple(float(np.mean(np.abs(err[folds == k]))) for k in ids)
    f_r = tuple(pearson(y[folds == k], oof[folds == k]) for k in ids)
    return CVMetrics(
        mse=float(np.mean(err**2)),
        mae=float(np.mean(np.abs(err))),
        pearson=pearson(y, oof),
        spearman=spearman(y, oof),
        fold_mse=f_mse,
        fold_mae=f_mae,
        fold_pearson=f_r,
    )
