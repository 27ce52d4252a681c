"""Feature preprocessing: one-hot for categoricals, text encoders for text, pass the rest."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import OneHotEncoder

from pulse_ml.errors import PulseError
from pulse_ml.sessions.feature_sets import FeatureSet
from pulse_ml.sessions.text_column import check_text_column
from pulse_ml.sessions.user_history import KIND as HISTORY
from pulse_ml.sessions.user_history import derived_columns, history_frame


def make_preprocessor(features: FeatureSet) -> ColumnTransformer:
    """A transformer from the session table's feature columns to a dense float matrix.

    Categorical columns become one-hot indicators (unknown values at predict time give all
    zeros, like a DictVectorizer); counts, flags and numeric columns pass through as floats;
    each text column goes to its own :class:`pulse_ml.models.text.TextFeatures` step named
    ``text_<column>`` (settings from the feature set; tunable as
    ``features__text_<column>__<setting>``); a ``user_history`` feature's five columns pass
    through as numbers.
    """
    cats = [c for c in features.columns if c.kind == "categorical"]
    nums = [n for c in features.columns if c.kind in ("count", "flag", "numeric", HISTORY)
            for n in (derived_columns(c.name) if c.kind == HISTORY else [c.name])]
    transformers = []
    if cats:
        categories = [list(c.values) if c.values else "auto" for c in cats]
        if any(c == "auto" for c in categories):
            categories = "auto"
        transformers.append(
            (
                "onehot",
                OneHotEncoder(
                    categories=categories,
                    handle_unknown="ignore",
                    sparse_output=False,
                    dtype=np.float64,
                ),
                [c.name for c in cats],
            )
        )
    if nums:
        transformers.append(("numeric", "passthrough", nums))
    for spec in features.columns:
        if spec.kind == "text":
            from pulse_ml.models.text import TextFeatures

            settings = {k: v for k, v in spec.options.items() if k != "search_space"}
            transformers.append((f"text_{spec.name}", TextFeatures(**settings), spec.name))
    return ColumnTransformer(
        transformers, remainder="drop", sparse_threshold=0.0, verbose_feature_names_out=False
    )


def with_history_columns(frame: pd.DataFrame, features: FeatureSet) -> pd.DataFrame:
    """``frame`` with its ``user_history`` columns, computed from the whole frame when absent.

    Call it before taking a subset of rows: a subset has fewer earlier sessions.
    """
    missing = [s for s in features.history
               if not all(c in frame.columns for c in derived_columns(s.name))]
    if not missing:
        return frame
    parts = [history_frame(frame, s.name, s.options) for s in missing]
    return pd.concat([frame, *parts], axis=1)


def feature_frame(frame: pd.DataFrame, features: FeatureSet) -> pd.DataFrame:
    """The feature columns of a session table with model-ready dtypes (floats and strings).

    Text columns are checked by :func:`pulse_ml.sessions.text_column.check_text_column`
    (missing values become empty text; numbers or lists are refused). A ``user_history``
    feature gives its five columns: taken from the frame when a validated table already holds
    them (:func:`pulse_ml.sessions.table.validate_frame` computes them on the whole table,
    chunked scoring from the history table), else computed from the frame's own ``user_id``,
    ``rating`` and ``started_at`` (:func:`pulse_ml.sessions.user_history.history_frame`).

    Raises:
        PulseError: if a feature column is missing or a text column holds non-text values.
    """
    absent = [c.name for c in features.columns
              if c.kind != HISTORY and c.name not in frame.columns]
    if absent:
        raise PulseError(f"the table lacks feature column(s) {', '.join(absent)} of feature set "
                         f"'{features.name}' that the model reads; add them to the table.")
    out = {}
    for spec in features.columns:
        if spec.kind == HISTORY:
            cols = derived_columns(spec.name)
            have = (frame[cols] if all(c in frame.columns for c in cols)
                    else history_frame(frame, spec.name, spec.options))
            for c in cols:
                out[c] = have[c].astype("float64").to_numpy()
            continue
        col = frame[spec.name]
        if spec.kind == "text":
            out[spec.name] = check_text_column(col, spec.name).texts
        elif spec.kind == "categorical":
            out[spec.name] = col.astype(str)
        else:
            out[spec.name] = col.astype("float64")
    return pd.DataFrame(out, index=frame.index)
