"""The cross-fit ensemble: the best trial's fold models, predicting with their mean.

Each labeled session was held out by exactly one fold model, so its out-of-fold prediction is
honest; unlabeled sessions get the mean of all fold models (cross-prediction-powered inference,
Zrnic & Candès 2024). The ensemble is what gets registered in MLflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.features import FeatureSet
from pulse_ml.models.preprocess import feature_frame


@dataclass
class CrossFitEnsemble:
    """Fold models of one family plus the out-of-fold predictions they produced.

    Attributes:
        models: One fitted Pipeline per fold.
        features: The feature set the models read.
        family: Model family name.
        oof: DataFrame with session_id, fold, prediction, rating for the training sessions.
    """

    models: Sequence
    features: FeatureSet
    family: str
    oof: pd.DataFrame

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Mean prediction of the fold models for every row of a session table."""
        X = feature_frame(frame, self.features)
        preds = np.zeros(len(frame))
        for model in self.models:
            preds += model.predict(X)
        return preds / len(self.models)

    def honest_predict(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Predictions that never use a model on a session it was trained on.

        Sessions that were in the training data (matched by ``session_id``) get their
        out-of-fold prediction; all others get the ensemble mean.

        Returns:
            ``(predictions, used_oof)`` where ``used_oof`` marks rows that got an OOF value.
        """
        preds = self.predict(frame)
        lookup = pd.Series(
            self.oof["prediction"].to_numpy(), index=self.oof["session_id"].astype(str)
        )
        matched = frame["session_id"].astype(str).map(lookup)
        used = matched.notna().to_numpy()
        preds[used] = matched.to_numpy(dtype=float)[used]
        return preds, used


def fit_crossfit(
    pipeline_factory,
    frame: pd.DataFrame,
    y: np.ndarray,
    folds: np.ndarray,
    features: FeatureSet,
    family: str,
) -> CrossFitEnsemble:
    """Fit one pipeline per fold and collect out-of-fold predictions.

    Args:
        pipeline_factory: Zero-argument callable returning a fresh, unfitted Pipeline.
        frame: Labeled sessions (session table rows).
        y: Their ratings.
        folds: Fold index per row (0..k-1).
        features: Feature set.
        family: Family name recorded in the ensemble.
    """
    X = feature_frame(frame, features)
    oof = np.empty(len(y))
    models = []
    for k in np.unique(folds):
        test = folds == k
        model = pipeline_factory().fit(X[~test], y[~test])
        oof[test] = model.predict(X[test])
        models.append(model)
    table = pd.DataFrame(
        {
            "session_id": frame["session_id"].astype(str).to_numpy(),
            "fold": folds.astype(int),
            "prediction": oof,
            "rating": y,
        }
    )
    return CrossFitEnsemble(models=models, features=features, family=family, oof=table)
