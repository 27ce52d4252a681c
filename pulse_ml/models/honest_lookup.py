"""The one out-of-fold lookup: which sessions get a training session's out-of-fold prediction.

Every honest path goes through :class:`HonestLookup`: ``infer`` (and everything built on
:func:`pulse_ml.inference.honest.honest_data`), :meth:`CrossFitEnsemble.honest_predict`, chunked
``pulse-ml score`` and ``engine=spark`` (which ships :meth:`HonestLookup.broadcast_table` to a
broadcast join and checks fingerprints with :func:`fingerprint` in its workers).

A session gets the out-of-fold (OOF) prediction of a training session only when its
``session_id`` **and** the fingerprint of its feature values (a 64-bit hash of exactly what the
model reads, :func:`fingerprint`) equal that training session's. Ids alone are not enough:
simulated ids restart at ``s000000``, so another table's session ``s000042`` is usually not the
training session ``s000042``; handing it that session's OOF value would mix two functions in the
PPI correction (the OOF fold model for a session it never saw *as that session* and the
ensemble mean elsewhere) and describe another session's features. Rows whose id matches but
whose features differ get the ensemble mean (``honest`` = 0) and are counted
(:attr:`OofMatch.n_mismatched`) so the caller can say so.

What the fingerprint leaves out, on purpose:

* **The rating.** A training session re-rated later is still that session; fold model k never
  saw it, so its OOF value is honest whatever its label. ``infer`` notes rating changes
  separately (``CrossFitEnsemble.honesty``).
* **The session id.** Two sessions with equal features and ids are indistinguishable to the
  model; the OOF value is then a prediction of exactly those features by a model that did not
  train on the training session.

Models registered before fingerprints existed (no ``fingerprint`` column in their OOF table)
keep the id-only match; :attr:`HonestLookup.notes` then says once that content cannot be checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.errors import PulseError
from pulse_ml.models.preprocess import feature_frame, with_history_columns
from pulse_ml.sessions.feature_sets import FeatureSet

ID = "session_id"
FINGERPRINT = "fingerprint"

UNCHECKED_NOTE = ("the model was registered before out-of-fold fingerprints existed: sessions "
                  "get their out-of-fold prediction by session_id alone, without checking that "
                  "their features are the training session's. Re-train (`pulse-ml train`) so "
                  "that a session of another table under a reused id cannot take a training "
                  "session's prediction.")


def fingerprint(frame: pd.DataFrame, features: FeatureSet) -> np.ndarray:
    """A 64-bit hash per row of the model's feature values (no id, no rating), as ``uint64``.

    Computed on :func:`~pulse_ml.models.preprocess.feature_frame` (floats and strings), so a
    count read as ``int64`` from Parquet, ``float64`` from CSV or ``long`` from Spark hashes
    the same. Vectorized (``pandas.util.hash_pandas_object``).

    A ``user_history`` feature's columns are left out: they change when an earlier session's
    rating arrives after training, and the training session must still get its out-of-fold
    prediction (the ensemble mean would use a model trained on it).
    """
    if len(frame) == 0:
        return np.empty(0, dtype=np.uint64)
    cols = feature_frame(frame, features)
    cols = cols.drop(columns=[c for c in features.model_names if c not in features.names])
    if cols.shape[1] == 0:  # only history features: the id alone identifies the session
        return np.zeros(len(frame), dtype=np.uint64)
    return pd.util.hash_pandas_object(cols, index=False).to_numpy(dtype=np.uint64)


def mismatch_note(n: int, where: str = "") -> str:
    """The one sentence about rows whose id matched a training session but not its features."""
    return (f"{n} session(s){where} share a session_id with a training session but not its "
            "feature values: they are other sessions (ids reused, e.g. a table simulated or "
            "exported separately) and get the fold-model mean (honest = 0), not that session's "
            "out-of-fold prediction. If they are the training sessions with re-computed "
            "features, re-train on this table (`pulse-ml train`).")


@dataclass(frozen=True)
class OofMatch:
    """Which rows take an out-of-fold prediction.

    Attributes:
        used: Per row, True when id and fingerprint match a training session.
        values: The out-of-fold predictions of the ``used`` rows (in row order).
        id_matched: Per row, True when the id alone matches.
    """

    used: np.ndarray
    values: np.ndarray
    id_matched: np.ndarray

    @property
    def n_mismatched(self) -> int:
        """Rows whose id matched but whose features differ (they keep the ensemble mean)."""
        return int((self.id_matched & ~self.used).sum())


class HonestLookup:
    """Out-of-fold predictions by ``session_id`` + feature fingerprint, built once per model.

    Args:
        oof: The ensemble's OOF table (``session_id``, ``prediction``, optionally
            ``fingerprint``).
        features: The feature set the fingerprints were computed on.

    Raises:
        PulseError: duplicate session ids in the OOF table.
    """

    def __init__(self, oof: pd.DataFrame, features: FeatureSet):
        self.features = features
        self._index = pd.Index(oof[ID].astype(str).to_numpy())
        if not self._index.is_unique:
            raise PulseError("the model's out-of-fold table has duplicate session ids; "
                             "re-train it on a table with unique session_id values.")
        self._values = oof["prediction"].to_numpy(dtype=float)
        self._arrow = None  # the ids as an Arrow array, built on first use
        self.checked = FINGERPRINT in oof.columns
        self._fingerprints = (oof[FINGERPRINT].to_numpy().astype(np.uint64)
                              if self.checked else None)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def notes(self) -> tuple[str, ...]:
        """Say-once notes about the lookup itself (an old model without fingerprints)."""
        return () if self.checked else (UNCHECKED_NOTE,)

    def positions(self, ids) -> np.ndarray:
        """Position of each id in the OOF table, -1 when absent (one hash probe per row).

        ``pyarrow.compute.index_in`` on the Arrow strings (pandas' default string storage), so
        a 10^5-row chunk costs ~10 ms instead of ~90 ms through numpy unicode and ``Index``.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._arrow is None:
            self._arrow = pa.array(self._index.to_numpy().astype(str), type=pa.string())
        if not isinstance(ids, pd.Series) or not pd.api.types.is_string_dtype(ids.dtype):
            ids = pd.Series(np.asarray(ids)).astype(str)
        found = pc.index_in(pa.array(ids, type=pa.string(), from_pandas=True),
                            value_set=self._arrow)
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.intp, copy=False)

    def match(self, frame: pd.DataFrame) -> OofMatch:
        """Match the rows of a session table (``session_id`` and the model's features).

        Fingerprints are computed only for rows whose id matched (at most the number of
        training sessions), so a 10^6-row chunk of new sessions costs one id probe per row.
        """
        pos = self.positions(frame[ID])
        id_matched = pos >= 0
        used = id_matched.copy()
        if self.checked and id_matched.any():
            frame = with_history_columns(frame, self.features)  # of the whole frame, not rows
            rows = np.flatnonzero(id_matched)
            same = fingerprint(frame.iloc[rows], self.features) == self._fingerprints[pos[rows]]
            used[rows[~same]] = False
        return OofMatch(used=used, values=self._values[pos[used]], id_matched=id_matched)

    def apply(self, frame: pd.DataFrame, preds: np.ndarray) -> tuple[np.ndarray, OofMatch]:
        """``preds`` with the matched rows replaced by their OOF value: ``(preds, match)``."""
        m = self.match(frame)
        out = np.array(preds, dtype=float, copy=True)
        out[m.used] = m.values
        return out, m

    def broadcast_table(self) -> pd.DataFrame:
        """The OOF table for a Spark broadcast join.

        Columns ``session_id``, ``oof_prediction`` and ``oof_fingerprint`` (the uint64
        fingerprint viewed as int64: Spark has no unsigned longs; 0 for an old model without
        fingerprints, whose rows are then matched by id alone).
        """
        fps = (self._fingerprints.view(np.int64) if self.checked
               else np.zeros(len(self), dtype=np.int64))
        return pd.DataFrame({ID: self._index.to_numpy().astype(str),
                             "oof_prediction": self._values, "oof_fingerprint": fps})


def same_fingerprint(features_frame: pd.DataFrame, stored: pd.Series, has: pd.Series,
                     features: FeatureSet) -> pd.Series:
    """For a Spark pandas UDF: per row, does the feature fingerprint equal ``stored`` (int64)?

    ``has`` marks rows with an id match; only those are hashed, the others are False. Pass
    ``stored`` without nulls (``coalesce(oof_fingerprint, 0)``): Arrow hands a nullable long
    column to pandas as float64, which cannot hold 64-bit fingerprints exactly.
    """
    out = np.zeros(len(stored), dtype=bool)
    mask = has.to_numpy(dtype=bool)
    if mask.any():
        rows = np.flatnonzero(mask)
        fp = fingerprint(features_frame.iloc[rows].reset_index(drop=True), features)
        out[rows] = fp.view(np.int64) == stored.to_numpy(dtype=np.int64)[rows]
    return pd.Series(out)
