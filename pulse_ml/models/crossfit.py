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

from pulse_ml.models.honest_lookup import FINGERPRINT, fingerprint
from pulse_ml.models.preprocess import feature_frame
from pulse_ml.sessions.feature_sets import FeatureSet


@dataclass
class CrossFitEnsemble:
    """Fold models of one family plus the out-of-fold predictions they produced.

    Attributes:
        models: One fitted Pipeline per fold.
        features: The feature set the models read.
        family: Model family name.
        oof: DataFrame with session_id, fold, prediction, rating, content (hash of features
            and rating) and fingerprint (hash of the features,
            :func:`pulse_ml.models.honest_lookup.fingerprint`) for the training sessions.
        error_model: The expected squared error of the predictions
            (:class:`pulse_ml.models.error_model.ErrorModel`, fitted inside the same folds;
            ``pulse-ml request`` needs it). None for versions registered before it existed.
    """

    models: Sequence
    features: FeatureSet
    family: str
    oof: pd.DataFrame
    error_model: object | None = None

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Mean prediction of the fold models for every row of a session table."""
        X = feature_frame(frame, self.features)
        preds = np.zeros(len(frame))
        for model in self.models:
            preds += model.predict(X)
        return preds / len(self.models)

    def honest_lookup(self):
        """The :class:`~pulse_ml.models.honest_lookup.HonestLookup` of this ensemble's OOF table."""
        from pulse_ml.models.honest_lookup import HonestLookup

        return HonestLookup(self.oof, self.features)

    def honest_match(self, frame: pd.DataFrame):
        """Honest predictions and how rows matched: ``(predictions, OofMatch)``.

        A row gets its out-of-fold prediction only when its ``session_id`` and its feature
        fingerprint equal a training session's (:mod:`pulse_ml.models.honest_lookup`); every
        other row gets the ensemble mean.
        """
        return self.honest_lookup().apply(frame, self.predict(frame))

    def honest_predict(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Predictions that never use a model on a session it was trained on.

        Training sessions (same ``session_id`` and the same feature values) get their
        out-of-fold prediction; all others get the ensemble mean.

        Returns:
            ``(predictions, used_oof)`` where ``used_oof`` marks rows that got an OOF value.
        """
        preds, match = self.honest_match(frame)
        return preds, match.used

    def honesty(self, frame: pd.DataFrame, labeled: np.ndarray,
                used: np.ndarray | None = None) -> HonestyReport:
        """Check that training sessions are recognised in ``frame`` (see :class:`HonestyReport`).

        A labeled session that has no out-of-fold match but the same content (features and
        rating) as a training session is most likely that session under a new id: the
        ensemble mean would then predict it with models that saw its label.

        Args:
            frame: The validated session table.
            labeled: Per row, True when the session has a rating.
            used: Rows that got an OOF prediction (default: :meth:`honest_match` of ``frame``).
        """
        if used is None:
            used = self.honest_lookup().match(frame).used
        known = labeled & used
        unmatched = labeled & ~used
        suspects = changed = 0
        if "content" in self.oof.columns and labeled.any():
            rows = np.flatnonzero(labeled)  # only labeled rows are compared: hash only those
            content = content_hash(frame.iloc[rows], self.features)
            train_content = self.oof["content"].to_numpy().astype("uint64")
            suspects = int(np.isin(content[unmatched[rows]], train_content).sum())
            by_id = pd.Series(train_content, index=self.oof["session_id"].astype(str))
            ids = frame["session_id"].iloc[rows].astype(str).to_numpy()
            kept = known[rows]
            changed = int((by_id.reindex(ids[kept]).to_numpy() != content[kept]).sum())
        return HonestyReport(n_labeled=int(labeled.sum()), n_with_oof=int(known.sum()),
                             n_training=len(self.oof), n_renamed_suspects=suspects,
                             n_changed=changed)


@dataclass(frozen=True)
class HonestyReport:
    """How the labeled sessions of a table relate to the model's training sessions.

    Attributes:
        n_labeled: Labeled sessions in the table.
        n_with_oof: Of those, how many got their out-of-fold prediction (id match).
        n_training: Sessions the model was trained on.
        n_renamed_suspects: Labeled sessions without an id match whose features and rating
            equal a training session's (probably renamed: a leak if predicted by the ensemble).
        n_changed: Labeled sessions matched by id and features whose rating changed since
            training (their OOF prediction is still honest: fold model k never saw them).
    """

    n_labeled: int
    n_with_oof: int
    n_training: int
    n_renamed_suspects: int
    n_changed: int

    @property
    def leak_suspected(self) -> bool:
        """True when many unmatched labeled sessions look like renamed training sessions."""
        unmatched = self.n_labeled - self.n_with_oof
        return self.n_renamed_suspects >= max(5, 0.2 * unmatched)


def content_hash(frame: pd.DataFrame, features: FeatureSet) -> np.ndarray:
    """A 64-bit hash per row of the feature values and the rating (ids excluded)."""
    cols = feature_frame(frame, features)
    cols["__rating"] = frame["rating"].astype("float64").to_numpy()
    return pd.util.hash_pandas_object(cols, index=False).to_numpy(dtype="uint64")


def fit_crossfit(
    pipeline_factory,
    frame: pd.DataFrame,
    y: np.ndarray,
    folds: np.ndarray,
    features: FeatureSet,
    family: str,
    fitted: list | None = None,
) -> CrossFitEnsemble:
    """Fit one pipeline per fold and collect out-of-fold predictions.

    Args:
        pipeline_factory: Zero-argument callable returning a fresh, unfitted Pipeline.
        frame: Labeled sessions (session table rows).
        y: Their ratings.
        folds: Fold index per row (0..k-1).
        features: Feature set.
        family: Family name recorded in the ensemble.
        fitted: The fold models already fitted on exactly these folds (fold order), e.g. by
            the tuning trial being refit: used as they are instead of fitting again.
    """
    X = feature_frame(frame, features)
    oof = np.empty(len(y))
    models = []
    for i, k in enumerate(np.unique(folds)):
        test = folds == k
        model = (fitted[i] if fitted is not None
                 else pipeline_factory().fit(X[~test], y[~test]))
        oof[test] = model.predict(X[test])
        models.append(model)
    table = pd.DataFrame(
        {
            "session_id": frame["session_id"].astype(str).to_numpy(),
            "fold": folds.astype(int),
            "prediction": oof,
            "rating": y,
            "content": content_hash(frame, features),
            FINGERPRINT: fingerprint(frame, features),
        }
    )
    from pulse_ml.models.error_model import fit_error_model

    errors = fit_error_model(frame, y, oof, folds, features)
    return CrossFitEnsemble(models=models, features=features, family=family, oof=table,
                            error_model=errors)
