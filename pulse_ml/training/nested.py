"""Selection-free out-of-fold predictions: each fold predicted by the trial best on the others.

The best trial of a study is chosen on the very folds whose out-of-fold (OOF) predictions then
describe it, so its OOF error is optimistic (the winner's curse of model selection; Cawley &
Talbot 2010). Paired with a champion, that optimism made ``promotion.rule=significant`` promote
between equally good models 6-22% of the time instead of 2.5%. Predicting the same folds again
with the chosen configuration on a fresh split of the users removes only the part of the
optimism that belongs to one split (the luck of the fold models), not the part that belongs to
the sessions (a configuration whose errors happen to be small on these users stays so on any
split): it still promoted ~14% in ``tests/training/test_promotion_selection.py``.

What removes it is nested CV: fold ``j`` must be predicted by a configuration chosen without
fold ``j`` (Varma & Simon 2006). Re-tuning inside every fold costs ``n_splits`` studies; here the
inner selection reuses the trials' per-fold scores, which Optuna already stored: for fold ``j``
the trial with the best score on the other folds (pooled MSE for ``cv_mse``, the size-weighted
mean of the fold r for ``cv_pearson``) predicts fold ``j`` with its model trained without fold
``j``. Folds whose choice is the best trial reuse the ensemble's predictions; only the others
are refit, so the cost is at most one extra CV fit of one configuration per fold.

What remains: the other folds' models were trained with fold ``j``'s sessions, and the TPE
sampler and the median pruner saw every fold, so fold ``j``'s labels still reach the choice at
second hand (measured in the test above: <= 3% where the old procedure promoted 15-22%).

References:
    S. Varma, R. Simon. Bias in error estimation when using cross-validation for model
    selection. BMC Bioinformatics 7:91, 2006.
    G. C. Cawley, N. L. C. Talbot. On over-fitting in model selection and subsequent selection
    bias in performance evaluation. JMLR 11:2079-2107, 2010.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.models.factory import ModelSpec, build_pipeline
from pulse_ml.models.preprocess import feature_frame
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.training.metrics import CVMetrics, cv_metrics

FOLD_SCORE = {"cv_mse": "fold_mse", "cv_pearson": "fold_pearson"}  # trial attr per objective


def held_out_scores(scores: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each trial's score on all folds but one: the size-weighted mean over the other folds.

    Args:
        scores: Per-fold scores, shape (trials, folds).
        sizes: Sessions per fold, shape (folds,).

    Returns:
        Shape (trials, folds): entry ``[k, j]`` is trial k's score without fold j (the pooled
        MSE of the other folds when ``scores`` are fold MSEs).
    """
    s = np.asarray(scores, float)
    w = np.asarray(sizes, float)
    total = (s * w).sum(axis=1, keepdims=True)
    return (total - s * w) / (w.sum() - w)


def fold_choices(scores: np.ndarray, sizes: np.ndarray, maximize: bool = False) -> np.ndarray:
    """Per fold, the trial (row index) with the best score on the other folds.

    Ties go to the earliest trial, as ``study.best_trial`` does.

    Args:
        scores: Per-fold scores, shape (trials, folds).
        sizes: Sessions per fold, shape (folds,).
        maximize: Higher is better (``cv_pearson``).

    Returns:
        Integer array of shape (folds,).
    """
    held = held_out_scores(scores, sizes)
    return np.argmax(held, axis=0) if maximize else np.argmin(held, axis=0)


@dataclass(frozen=True)
class SelectionFree:
    """Selection-free out-of-fold predictions of a study (see the module docstring).

    Attributes:
        oof: session_id, fold, prediction, rating, trial (the trial that predicted the row).
        metrics: MSE, MAE, r and per-fold values of these predictions.
        fold_trials: Number of the trial chosen for each fold.
        refit_folds: Folds predicted by another trial than the best (each one extra fit).
        n_candidates: Completed trials with per-fold scores the choice was made among.
    """

    oof: pd.DataFrame
    metrics: CVMetrics
    fold_trials: tuple[int, ...]
    refit_folds: int
    n_candidates: int


def selection_free(labeled: pd.DataFrame, y: np.ndarray, folds: np.ndarray, spec: ModelSpec,
                   features: FeatureSet, trials: list, best, ensemble_oof: pd.DataFrame,
                   objective: str) -> SelectionFree:
    """Predict each fold with the trial that scored best on the other folds.

    Args:
        labeled: The labeled sessions (rows in the order of ``y`` and ``folds``).
        y: Their ratings.
        folds: Fold index per session (the study's folds, 0..k-1).
        spec: Model family (with the text search space, as tuned).
        features: Feature set.
        trials: The study's completed trials (those without per-fold scores for these folds,
            e.g. of an older study, are left out).
        best: The best trial (its fold models are the ensemble).
        ensemble_oof: The ensemble's out-of-fold table (reused for the folds of the best trial).
        objective: ``cv_mse`` or ``cv_pearson``.
    """
    from threadpoolctl import threadpool_limits

    ids = np.unique(folds)
    attr = FOLD_SCORE[objective]
    usable = [t for t in trials if len(t.user_attrs.get(attr) or ()) == len(ids)]
    if not any(t.number == best.number for t in usable):
        usable = [best]  # no per-fold scores for the best trial: nothing to choose among
    scores = np.array([t.user_attrs.get(attr) or [0.0] * len(ids) for t in usable], float)
    chosen = fold_choices(np.nan_to_num(scores, nan=np.inf if objective == "cv_mse"
                                        else -np.inf),
                          np.bincount(folds, minlength=len(ids))[ids],
                          maximize=objective == "cv_pearson")
    pred = ensemble_oof["prediction"].to_numpy(float).copy()
    who = np.full(len(y), best.number)
    X = None
    refits = 0
    for j, k in zip(ids, chosen, strict=True):
        trial = usable[int(k)]
        if trial.number == best.number:
            continue
        X = feature_frame(labeled, features) if X is None else X
        test = folds == j
        with threadpool_limits(limits=1):  # the threading of the trials: the same numbers
            model = build_pipeline(spec, features, trial.params).fit(X[~test], y[~test])
            pred[test] = model.predict(X[test])
        who[test] = trial.number
        refits += 1
    oof = pd.DataFrame({"session_id": labeled["session_id"].astype(str).to_numpy(),
                        "fold": folds.astype(int), "prediction": pred,
                        "rating": np.asarray(y, float), "trial": who})
    return SelectionFree(oof=oof, metrics=cv_metrics(y, pred, folds),
                         fold_trials=tuple(int(usable[int(k)].number) for k in chosen),
                         refit_folds=refits, n_candidates=len(usable))
