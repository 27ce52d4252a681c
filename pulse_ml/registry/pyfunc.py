"""The MLflow pyfunc wrapper of a :class:`CrossFitEnsemble` (predicts from a session table)."""

from __future__ import annotations

import os

import joblib
import mlflow.pyfunc
import pandas as pd

from pulse_ml.keys import ENSEMBLE_ARTIFACT

THREADS_ENV = "PULSE_PREDICT_THREADS"


def predict_threads() -> int:
    """Native threads per fold predict: ``$PULSE_PREDICT_THREADS``, else 0 (every core).

    Spark scoring sets it to 1 on its Python workers (one worker per core already).
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    return int(raw) if raw.isdigit() else 0


class PulseSatisfactionModel(mlflow.pyfunc.PythonModel):
    """Predicts the expected session rating with the mean of the cross-fit fold models.

    Predictions go through :class:`~pulse_ml.models.fast_predict.FastPredictor` (one shared
    feature transform, distinct rows once, native threads), which returns the same numbers as
    ``ensemble.predict``. ``unwrap_python_model().ensemble`` gives the fold models and their
    out-of-fold predictions (needed for honest prediction-powered inference).
    """

    def load_context(self, context) -> None:
        """Load the pickled ensemble from the model's artifacts and its fast predictor."""
        from pulse_ml.models.fast_predict import FastPredictor

        self.ensemble = joblib.load(context.artifacts[ENSEMBLE_ARTIFACT])
        self.predictor = FastPredictor(self.ensemble, threads=predict_threads())

    def predict(self, context, model_input: pd.DataFrame, params=None):
        """Predict ratings for the rows of a session table."""
        predictor = getattr(self, "predictor", None) or self.ensemble
        return predictor.predict(pd.DataFrame(model_input))
