"""Feature preprocessing: one-hot for categoricals (the paper's DictVectorizer), pass the rest."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import OneHotEncoder

from pulse_ml.sessions.feature_sets import FeatureSet


def make_preprocessor(features: FeatureSet) -> ColumnTransformer:
    """A transformer from the session table's feature columns to a dense float matrix.

    Categorical columns become one-hot indicators (unknown values at predict time give all
    zeros, like a DictVectorizer); counts, flags and numeric columns pass through as floats.
    """
    cats = [c for c in features.columns if c.kind == "categorical"]
    nums = features.of_kind("count", "flag", "numeric")
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
    return ColumnTransformer(
        transformers, remainder="drop", sparse_threshold=0.0, verbose_feature_names_out=False
    )


def feature_frame(frame: pd.DataFrame, features: FeatureSet) -> pd.DataFrame:
    """The feature columns of a session table with model-ready dtypes (floats and strings)."""
    out = {}
    for spec in features.columns:
        col = frame[spec.name]
        out[spec.name] = col.astype(str) if spec.kind == "categorical" else col.astype("float64")
    return pd.DataFrame(out, index=frame.index)
