"""The dataset input's schema, built in vector time, equals MLflow's own inference."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from mlflow.types.utils import _infer_schema

from pulse_ml.registry.dataset_input import _SCHEMA_ROWS, _table_schema


def test_table_schema_equals_mlflow_inference(small_demo):
    frame = pd.read_parquet(small_demo)
    # a value missing after the rows the types are read from: the column is not required
    late = _SCHEMA_ROWS + 7
    frame["user_text"] = frame["user_text"].astype(object)
    frame.loc[late, "user_text"] = None
    frame["score"] = np.where(np.arange(len(frame)) == late, np.nan, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _infer_schema(frame)
        got = _table_schema(frame)
    assert got == expected
    required = {spec.name: spec.required for spec in got.inputs}
    assert required["user_text"] is False and required["score"] is False
    assert required["session_id"] is True
