"""Fast, exact scoring with a cross-fit ensemble: shared transform, dedup, native threads.

:meth:`CrossFitEnsemble.predict` runs each fold pipeline on the whole frame: five one-hot
transforms and five single-threaded predicts (the fold models were tuned with one thread each,
see ``conf/model/lightgbm.yaml``). :class:`FastPredictor` returns the same numbers faster:

1. **Shared feature transform.** The fold pipelines were built from the same preprocessing
   config, but each was fitted on its own data. For one-hot encoding with fixed categories and
   passthrough columns the fitted transforms are identical, and then the first fold's transform
   is applied once and fed to every fold's remaining steps. Equality is *checked* on the fitted
   objects (:func:`shared_transform`): text encoders (fitted vocabularies) or one-hot encoders
   whose learned categories differ between folds fall back to one transform per fold.
   Standardization (``scale: true``) is a separate pipeline step and stays per fold.
2. **Duplicate rows are predicted once.** Session features are discrete (categories, flags,
   counts), so a chunk of sessions repeats many feature vectors. A fitted pipeline predicts
   each row independently of the others, so predicting the distinct rows and broadcasting back
   gives the same numbers bit for bit. Rows are grouped by a 64-bit hash and the grouping is
   verified column by column; any mismatch (a hash collision) falls back to all rows.
3. **Native multi-threaded predict** at scoring time: LightGBM's ``num_threads`` and, for
   OpenMP/BLAS estimators (histogram gradient boosting, linear models), ``threadpoolctl``
   limits, both set to the cores available to this process. A row's prediction does not depend
   on the number of threads.

The fold predictions are summed in fold order and divided by the number of folds, exactly as
:meth:`CrossFitEnsemble.predict` does, so the predictions are equal to it (tested to 1e-9;
bitwise for LightGBM).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pulse_ml.models.preprocess import feature_frame


def available_cores() -> int:
    """Cores this process may run on (the CPU affinity mask, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _is_passthrough(transformer) -> bool:
    from sklearn.preprocessing import FunctionTransformer

    if isinstance(transformer, str):
        return transformer == "passthrough"
    return (type(transformer) is FunctionTransformer and transformer.func is None
            and transformer.inverse_func is None)


def _same_onehot(a, b) -> bool:
    from sklearn.preprocessing import OneHotEncoder

    if type(a) is not OneHotEncoder or type(b) is not OneHotEncoder:
        return False
    for enc in (a, b):
        if (enc.drop is not None or getattr(enc, "_infrequent_enabled", False)
                or enc.sparse_output):
            return False
    if a.handle_unknown != b.handle_unknown or a.dtype != b.dtype:
        return False
    if len(a.categories_) != len(b.categories_):
        return False
    return all(ca.dtype == cb.dtype and np.array_equal(ca, cb)
               for ca, cb in zip(a.categories_, b.categories_, strict=True))


def transforms_equal(a, b) -> bool:
    """True when two fitted ``ColumnTransformer`` s provably give the same output.

    Only one-hot encoders (equal learned categories, no dropping, no infrequent categories),
    passthrough columns and dropped columns are compared; any other transformer (text encoders,
    scalers, custom steps) makes the answer ``False``.
    """
    from sklearn.compose import ColumnTransformer

    if type(a) is not ColumnTransformer or type(b) is not ColumnTransformer:
        return False
    if a.sparse_threshold != b.sparse_threshold or a.remainder != b.remainder:
        return False
    if a.remainder not in ("drop",):
        return False
    if list(getattr(a, "feature_names_in_", [])) != list(getattr(b, "feature_names_in_", [])):
        return False
    ta, tb = a.transformers_, b.transformers_
    if len(ta) != len(tb):
        return False
    for (na, ea, ca), (nb, eb, cb) in zip(ta, tb, strict=True):
        if na != nb or list(np.atleast_1d(ca)) != list(np.atleast_1d(cb)):
            return False
        if isinstance(ea, str) and ea == "drop" and isinstance(eb, str) and eb == "drop":
            continue
        if _is_passthrough(ea) and _is_passthrough(eb):
            continue
        if not _same_onehot(ea, eb):
            return False
    return True


def shared_transform(models) -> object | None:
    """The fitted feature step all fold pipelines share, or ``None`` when they differ.

    Args:
        models: Fitted scikit-learn Pipelines whose first step is the feature transform.
    """
    from sklearn.pipeline import Pipeline

    if not models or not all(isinstance(m, Pipeline) and len(m.steps) >= 2 for m in models):
        return None
    first = models[0].steps[0][1]
    if all(transforms_equal(first, m.steps[0][1]) for m in models[1:]):
        return first
    return None


def distinct_rows(X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Group identical rows: ``(first, codes)`` with ``X.iloc[first].iloc[codes]`` equal to ``X``.

    Rows are grouped by a 64-bit hash of their values (``pandas.util.hash_pandas_object``) and
    the grouping is verified column by column, so the result is exact; on a hash collision
    the function returns ``None`` (the caller then predicts every row).
    """
    n = len(X)
    if n == 0:
        return None
    hashes = pd.util.hash_pandas_object(X, index=False).to_numpy()
    codes, uniques = pd.factorize(hashes)
    first = np.empty(len(uniques), dtype=np.intp)
    first[codes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.intp)  # first occurrence wins
    for name in X.columns:
        col = X[name].to_numpy()
        back = col[first][codes]
        if col.dtype.kind == "f":
            same = (back == col) | (np.isnan(back) & np.isnan(col))
        else:
            same = back == col
        if not bool(np.all(same)):
            return None
    return first, codes


def _estimator_predict(estimator, X, threads: int) -> np.ndarray:
    """``estimator.predict`` with native threads (LightGBM ``num_threads``, else ``n_jobs``)."""
    module = type(estimator).__module__
    if module.startswith("lightgbm"):
        return np.asarray(estimator.predict(X, num_threads=threads), dtype=float)
    params = estimator.get_params(deep=False) if hasattr(estimator, "get_params") else {}
    if "n_jobs" in params and hasattr(estimator, "estimators_"):  # forests: joblib threads
        estimator = copy.copy(estimator)  # shallow: the fitted trees are shared, not copied
        estimator.n_jobs = threads
    return np.asarray(estimator.predict(X), dtype=float)


def _pipeline_predict(steps, X, threads: int) -> np.ndarray:
    """Run the fitted ``steps`` (``[(name, step), ...]``): transforms, then the estimator."""
    for _, step in steps[:-1]:
        if step is None or (isinstance(step, str) and step == "passthrough"):
            continue
        X = step.transform(X)
    return _estimator_predict(steps[-1][1], X, threads)


class PredictionCache:
    """Predictions of transformed feature rows seen in earlier chunks (bounded, exact).

    Keyed by a 64-bit hash of the row; a hit is used only when the stored row equals the new
    one value for value, so a hash collision can only cost a re-prediction, never a wrong value.
    Holds at most ``capacity`` rows: ``capacity * (8 * n_columns + 16)`` bytes.
    """

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self._index = pd.Index(np.empty(0, dtype=np.uint64))
        self._rows: np.ndarray | None = None
        self._preds = np.empty(0)
        self.hits = self.lookups = 0

    def __len__(self) -> int:
        return len(self._index)

    @staticmethod
    def row_hash(Xt: np.ndarray) -> np.ndarray:
        """A 64-bit hash per row of a float matrix."""
        return pd.util.hash_pandas_object(pd.DataFrame(Xt, copy=False), index=False).to_numpy()

    def lookup(self, Xt: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(hit, values)``: rows found (and verified equal) and their cached predictions."""
        self.lookups += len(Xt)
        if len(self._index) == 0:
            return np.zeros(len(Xt), dtype=bool), np.empty(0)
        pos = self._index.get_indexer(hashes)
        hit = pos >= 0
        if hit.any():
            stored = self._rows[pos[hit]]
            new = Xt[hit]
            same = ((stored == new) | (np.isnan(stored) & np.isnan(new))).all(axis=1)
            hit[np.flatnonzero(hit)[~same]] = False
        self.hits += int(hit.sum())
        return hit, self._preds[pos[hit]]

    def add(self, Xt: np.ndarray, hashes: np.ndarray, preds: np.ndarray) -> None:
        """Store new rows (those whose hash is not stored yet) while there is room."""
        room = self.capacity - len(self._index)
        if room <= 0 or len(Xt) == 0:
            return
        _, first = np.unique(hashes, return_index=True)
        first = np.sort(first)
        if len(self._index):
            first = first[self._index.get_indexer(hashes[first]) < 0]
        first = first[:room]
        if len(first) == 0:
            return
        self._index = self._index.append(pd.Index(hashes[first]))
        rows = Xt[first]
        self._rows = rows if self._rows is None else np.concatenate([self._rows, rows])
        self._preds = np.concatenate([self._preds, preds[first]])


@dataclass
class FastPredictor:
    """Exact, faster :meth:`CrossFitEnsemble.predict` for scoring many sessions.

    Attributes:
        ensemble: The cross-fit ensemble (``models``, ``features``).
        threads: Native threads per predict (default: the cores available to this process).
        dedup: Predict distinct feature rows once (off for feature sets with text columns,
            whose rows are rarely repeated and costly to hash).
        cache_rows: With a shared transform, remember the predictions of up to this many
            distinct transformed rows across calls (chunks), so a feature vector seen in an
            earlier chunk is not predicted again; 0 turns the cache off.

    Notes:
        Equality with the slow path rests on three facts: a fitted pipeline predicts each
        row independently of the other rows; the shared transform is used only when the fold
        transforms are provably equal (:func:`transforms_equal`); the fold predictions are
        accumulated in fold order exactly like :meth:`CrossFitEnsemble.predict`. Cached and
        deduplicated rows are verified equal value for value, not only by hash.
    """

    ensemble: object
    threads: int = 0
    dedup: bool = True
    cache_rows: int = 200_000

    def __post_init__(self) -> None:
        self.threads = int(self.threads) or available_cores()
        self.shared = shared_transform(self.ensemble.models)
        if any(c.kind == "text" for c in self.ensemble.features.columns):
            self.dedup = False
        self.cache = (PredictionCache(self.cache_rows)
                      if self.dedup and self.shared is not None and self.cache_rows > 0 else None)

    @property
    def mode(self) -> str:
        """One line saying which speed-ups apply (for logs)."""
        parts = ["one shared feature transform" if self.shared is not None
                 else "one feature transform per fold (fold transforms differ)"]
        if self.dedup:
            parts.append("distinct rows predicted once")
        if self.cache is not None:
            parts.append(f"cache of up to {self.cache.capacity:,} rows across chunks")
        parts.append(f"{self.threads} thread(s)")
        return ", ".join(parts)

    def _fold_mean(self, X, transformed: bool) -> np.ndarray:
        preds = np.zeros(len(X))
        if len(X) == 0:
            return preds
        for model in self.ensemble.models:
            if transformed:
                preds += _pipeline_predict(model.steps[1:], X, self.threads)
            else:
                preds += _estimator_predict_pipeline(model, X, self.threads)
        return preds / len(self.ensemble.models)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Mean prediction of the fold models for every row (equal to the ensemble's)."""
        from threadpoolctl import threadpool_limits

        X = feature_frame(frame, self.ensemble.features)
        groups = distinct_rows(X) if self.dedup else None
        if groups is not None:
            X = X.iloc[groups[0]]
        with threadpool_limits(limits=self.threads):
            if self.shared is None:
                preds = self._fold_mean(X, transformed=False)
            else:
                Xt = np.ascontiguousarray(self.shared.transform(X), dtype=np.float64)
                if self.cache is None:
                    preds = self._fold_mean(Xt, transformed=True)
                else:
                    hashes = self.cache.row_hash(Xt)
                    hit, cached = self.cache.lookup(Xt, hashes)
                    preds = np.empty(len(Xt))
                    preds[hit] = cached
                    miss = ~hit
                    preds[miss] = self._fold_mean(Xt[miss], transformed=True)
                    self.cache.add(Xt[miss], hashes[miss], preds[miss])
        return preds if groups is None else preds[groups[1]]


def _estimator_predict_pipeline(model, X, threads: int) -> np.ndarray:
    """Predict with a whole fitted model (a Pipeline's steps, or a bare estimator)."""
    steps = getattr(model, "steps", None)
    if steps is None:
        return _estimator_predict(model, X, threads)
    return _pipeline_predict(steps, X, threads)
