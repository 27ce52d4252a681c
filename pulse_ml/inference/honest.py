"""Honest predictions: a raw table and a cross-fit ensemble become sessions with predictions.

Labeled sessions that were in the model's training data get their out-of-fold prediction
(matched by session_id and feature fingerprint, :mod:`pulse_ml.models.honest_lookup`; guarded
against renamed training sessions); every other session gets the mean of the fold models
(cross-prediction PPI, see the project's design card). ``infer``, ``audit``, ``benchmarks``
(task deltas), ``agreement`` and ``monitor`` all start here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.sessions.case_studies import CaseStudy
from pulse_ml.sessions.readers import with_text_columns
from pulse_ml.sessions.table import SessionTable, missing_columns_error, validate_frame

# Options of the ``ppi.predictions`` setting (value -> meaning).
PREDICTION_MODES = {"crossfit": "honest, out-of-fold for training sessions",
                    "in_sample": "the paper's mode, NOT valid"}


@dataclass(frozen=True)
class HonestData:
    """A validated table with one prediction per session.

    Attributes:
        table: The validated session table (case studies resolved).
        predictions: One prediction per row of ``table.frame``.
        n_with_oof: Labeled sessions that got their out-of-fold prediction.
        notes: Things the user should know about the predictions.
        mode: ``crossfit`` (honest) or ``in_sample`` (the paper's, not valid).
    """

    table: SessionTable
    predictions: np.ndarray
    n_with_oof: int
    notes: tuple[str, ...]
    mode: str


def honest_data(raw: pd.DataFrame, path: str, ensemble,
                configured: Mapping[str, CaseStudy] | None = None,
                only: Iterable[str] | None = None, mode: str = "crossfit",
                case_study_rows: bool = False) -> HonestData:
    """Check the model's columns, validate the table and predict every session.

    Args:
        raw: The table as read (``sessions.readers.read_frame``).
        path: File name used in messages.
        ensemble: The registered :class:`~pulse_ml.models.crossfit.CrossFitEnsemble`.
        configured: Configured case studies by name.
        only: Restrict case studies to these names (``[]`` = none, e.g. for agreement).
        mode: ``crossfit`` (honest) or ``in_sample``.
        case_study_rows: Run the model only on the sessions of the table's (selected) case
            studies; the other rows get NaN (``infer``: its analyses read no other row). The
            honesty checks still see every labeled session. Ignored for a feature set with a
            ``user_history`` feature, whose columns are computed from the whole table.

    Raises:
        PulseError: missing model columns, contract violations, or a suspected leak.
    """
    check_model_columns(raw, ensemble, path)
    raw = with_text_columns(raw, path, ensemble.features.of_kind("text"))
    table = validate_frame(raw, path, ensemble.features, configured or {}, only)
    rows = None
    if case_study_rows and not ensemble.features.of_kind("user_history"):
        names = [study.name for study in table.case_studies]
        rows = table.frame["case_study"].isin(names).to_numpy()
    preds, n_oof, notes = predictions(ensemble, table, mode, rows)
    return HonestData(table, preds, n_oof, tuple(notes), mode)


def predictions(ensemble, table: SessionTable, mode: str,
                rows: np.ndarray | None = None) -> tuple[np.ndarray, int, list[str]]:
    """Predictions for every session, honest unless ``mode == "in_sample"``.

    ``rows`` (a boolean mask) limits the model to those sessions: the others get NaN, unless
    they are labeled sessions with an out-of-fold prediction (which replaces the model's).

    Returns:
        ``(predictions, n_labeled_with_oof, notes)``.

    Raises:
        PulseError: no out-of-fold predictions, or labeled sessions that look like the model's
            training sessions under new ids (their predictions would leak their labels).
    """
    if mode == "in_sample":
        return fast_predict(ensemble, table.frame, rows), 0, []
    if ensemble.oof is None or len(ensemble.oof) == 0:
        raise PulseError("the model version has no out-of-fold predictions, and honest mode "
                         "(ppi.predictions=crossfit) needs them. Re-register it with "
                         "`pulse-ml train`, or use ppi.predictions=in_sample (not valid).")
    from pulse_ml.models.honest_lookup import mismatch_note

    lookup = ensemble.honest_lookup()
    preds, match = lookup.apply(table.frame, fast_predict(ensemble, table.frame, rows))
    report = ensemble.honesty(table.frame, table.labeled, match.used)
    if report.leak_suspected:
        raise PulseError(
            f"{table.path}: {report.n_renamed_suspects} labeled session(s) have no out-of-fold "
            f"prediction by session_id but the same features and rating as sessions the model "
            f"was trained on ({report.n_with_oof} of {report.n_labeled} labeled sessions matched "
            "by id). They look like training sessions under new ids; predicting them with the "
            "model would leak their labels and make the intervals invalid. Keep the session_id "
            "values the model was trained with, or re-train on this table (`pulse-ml train`).")
    notes = list(lookup.notes)
    if match.n_mismatched:
        n_lab = int((match.id_matched & ~match.used & table.labeled).sum())
        notes.append(mismatch_note(match.n_mismatched, f" ({n_lab} labeled)"))
    if report.n_renamed_suspects:
        notes.append(f"{report.n_renamed_suspects} labeled session(s) without an id match have "
                     "the same features and rating as a training session (few enough to be "
                     "coincidences; re-train on this table to be sure).")
    if report.n_changed:
        notes.append(f"{report.n_changed} labeled session(s) changed their rating since "
                     "training; they keep their out-of-fold prediction (honest: their fold model "
                     "never saw them). Re-train to use the new ratings.")
    if report.n_with_oof == 0 and report.n_labeled:
        notes.append(f"none of the model's {report.n_training} training sessions is in this "
                     "table: every session is predicted by the full ensemble (honest only if "
                     "these labeled sessions were never used to train it).")
    return preds, report.n_with_oof, notes


def fast_predict(ensemble, frame: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """The ensemble mean for every row (or the ``rows`` mask; NaN elsewhere), ``score``'s path.

    :class:`~pulse_ml.models.fast_predict.FastPredictor`: one shared feature transform, each
    distinct feature row predicted once, native threads; equal to
    :meth:`~pulse_ml.models.crossfit.CrossFitEnsemble.predict` (bitwise for LightGBM). The one
    prediction path of ``infer``, ``monitor``, ``audit``, ``score`` and Spark.
    """
    from pulse_ml.models.fast_predict import FastPredictor

    predictor = FastPredictor(ensemble, cache_rows=0)
    if rows is None:
        return predictor.predict(frame)
    out = np.full(len(frame), np.nan)
    out[rows] = predictor.predict(frame.loc[rows])  # each row predicted on its own
    return out


def check_model_columns(frame: pd.DataFrame, ensemble, path: str) -> None:
    """Fail early when the table lacks features the model needs."""
    error = missing_columns_error(path, frame.columns, ensemble.features.input_names,
                                  f"the model (feature set '{ensemble.features.name}')")
    if error is not None:
        raise error
