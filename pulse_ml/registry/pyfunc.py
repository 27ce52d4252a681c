"""The MLflow pyfunc wrapper of a :class:`CrossFitEnsemble` (predicts from a session table)."""

from __future__ import annotations

import joblib
import mlflow.pyfunc
import pandas as pd


class PulseSatisfactionModel(mlflow.pyfunc.PythonModel):
    """Predicts the expected session rating with the mean of the cross-fit fold models.

    ``unwrap_python_model().ensemble`` gives the fold models and their out-of-fold predictions
    (needed for honest prediction-powered inference).
    """

    def load_context(self, context) -> None:
        """Load the pickled ensemble from the model's artifacts."""
        self.ensemble = joblib.load(context.artifacts["ensemble"])

    def predict(self, context, model_input: pd.DataFrame, params=None):
        """Predict ratings for the rows of a session table."""
        return self.ensemble.predict(pd.DataFrame(model_input))
