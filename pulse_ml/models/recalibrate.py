"""Isotonic recalibration of a regressor's predictions, cross-fitted (a tunable step).

``recalibrate: isotonic`` (a model parameter, fixed in ``estimator`` or tuned as
``search_space: {recalibrate: {type: categorical, choices: [none, isotonic]}}``) wraps the
family's estimator in :class:`IsotonicRecalibrated`: inside each fit, an inner k-fold
cross-fit gives out-of-sample predictions of the training rows, a monotone (isotonic) map from
those predictions to the ratings is fitted, and the estimator is refitted on all training
rows; predictions are the map applied to the refitted estimator's output. The map never sees
its own training row's in-sample prediction, so an over-fitted model is not "calibrated" to
its own noise. Everything happens inside the outer fold's fit, so out-of-fold predictions stay
honest; Optuna keeps the step only when it improves the CV objective (``cv_pearson``: r;
``cv_mse``: MSE).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone

RECALIBRATE = ("none", "isotonic")


class IsotonicRecalibrated(RegressorMixin, BaseEstimator):
    """An estimator whose predictions pass through a cross-fitted isotonic map.

    Args:
        estimator: The unfitted base regressor.
        folds: Inner folds of the cross-fit that trains the map.
        random_state: Seed of the inner fold split.
    """

    def __init__(self, estimator=None, folds: int = 5, random_state: int = 0):
        self.estimator = estimator
        self.folds = folds
        self.random_state = random_state

    def fit(self, X, y):
        """Fit the inner cross-fit, the isotonic map and the base estimator on all rows."""
        from sklearn.isotonic import IsotonicRegression
        from sklearn.model_selection import KFold

        y = np.asarray(y, dtype=float)
        oof = np.empty(len(y))
        split = KFold(n_splits=min(self.folds, len(y)), shuffle=True,
                      random_state=self.random_state)
        rows = np.arange(len(y))
        for train, test in split.split(rows):
            model = clone(self.estimator).fit(_take(X, train), y[train])
            oof[test] = model.predict(_take(X, test))
        self.isotonic_ = IsotonicRegression(out_of_bounds="clip").fit(oof, y)
        self.estimator_ = clone(self.estimator).fit(X, y)
        return self

    def predict(self, X) -> np.ndarray:
        """The isotonic map of the refitted estimator's predictions."""
        return self.isotonic_.predict(np.asarray(self.estimator_.predict(X), dtype=float))


def _take(X, rows: np.ndarray):
    return X.iloc[rows] if hasattr(X, "iloc") else X[rows]
