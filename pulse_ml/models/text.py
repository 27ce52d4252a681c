"""Text features: what users write becomes model inputs, fitted honestly inside the CV folds.

A ``text`` column of the session table (the user's messages, one per line) becomes, inside the
scikit-learn pipeline, a few dense columns chosen by the feature set:

* ``stack`` -- one column: the prediction of a ridge *sub-model* on the text (TF-IDF of word
  n-grams, hashed n-grams, WordLlama embeddings and/or VADER scores). Its value for a training
  row comes from an inner K-fold cross-fit, so the structured model downstream never sees a
  text prediction made by a model that was fitted on that row's rating; at predict time it is
  the sub-model fitted on the whole training part (stacked generalization).
* ``vader`` -- 7 lexicon sentiment columns (whole text and per message, VADER).
* ``wordllama`` -- the mean WordLlama embedding of the messages (``wordllama_dim`` columns).
* ``tfidf`` -- the TF-IDF columns themselves (only with ``max_features`` <= 5000).

Since every encoder is a step of the pipeline, each outer CV fold fits it on its own training
part only, and the out-of-fold predictions that PPI++ needs stay honest. The settings are the
feature set's (:mod:`pulse_ml.sessions.text_options`); the label-free encoders, cached by
content hash, are in :mod:`pulse_ml.models.text_encoders`; TF-IDF from stored n-gram counts in
:mod:`pulse_ml.models.text_tfidf`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer, TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold

from pulse_ml.errors import PulseError
from pulse_ml.models.text_cache import (
    array_key,
    memoize,
    params_key,
    sequence_key,
    text_hashes,
)
from pulse_ml.models.text_encoders import VADER_COLUMNS, vader_features, wordllama_features
from pulse_ml.models.text_tfidf import fit_tfidf, tfidf_transform
from pulse_ml.sessions.text_options import TEXT_DEFAULTS as _D
from pulse_ml.sessions.text_options import check_text_settings

__all__ = ["TextFeatures"]


class TextFeatures(TransformerMixin, BaseEstimator):
    """One text column -> dense features (stacked text sub-model, VADER, embeddings, TF-IDF).

    Used by :func:`pulse_ml.models.preprocess.make_preprocessor` for every ``text`` column, as
    the ColumnTransformer step ``text_<column>``; its settings are therefore tunable as pipeline
    parameters ``features__text_<column>__<setting>``.

    Args:
        encoders: What enters the structured model, names from :data:`DIRECT_ENCODERS` joined
            by ``+`` (or a list): ``stack`` (1 column), ``vader`` (7), ``wordllama``
            (``wordllama_dim``), ``tfidf`` (needs ``max_features`` <= 5000).
        stack_on: What the ridge sub-model of ``stack`` reads, from :data:`STACK_INPUTS`:
            ``tfidf`` (word n-grams), ``hashing`` (hashed n-grams, no vocabulary: large
            corpora), ``wordllama``, ``vader``.
        stack_alpha: Ridge penalty of the sub-model.
        stack_folds: Inner folds of the cross-fit that gives training rows their stacked value.
        random_state: Seed of the inner fold split.
        ngram_max: Longest word n-gram (TF-IDF and hashing use 1..ngram_max).
        min_df: Minimum number of training texts a term must appear in (TF-IDF).
        max_df: Maximum share of training texts a term may appear in (TF-IDF).
        max_features: Keep the most frequent terms only (None = all).
        sublinear_tf: Use 1 + log(tf) (TF-IDF and hashing).
        hashing_features: Number of hash buckets (``hashing``).
        wordllama_dim: WordLlama embedding size (64, 128 or 256 with the shipped weights).
        wordllama_pool: ``turns`` (mean over messages) or ``text`` (whole text).
        wordllama_config: WordLlama configuration shipped in the package.
        turn_sep: Separator of the messages inside a text.
        cache_dir: Folder for the on-disk cache of VADER and WordLlama vectors (None = the
            ``PULSE_TEXT_CACHE`` environment variable, or memory only when it is unset).

    The default (``{kind: text}`` alone) is one column: a ridge sub-model on TF-IDF of word
    1-2-grams (sublinear tf, min_df=2) plus the 7 VADER scores, stacked honestly. Measured on
    USS and ConvAI2 (``perf/text_bench.py``) it beats feeding the VADER columns to the model
    directly on the small ConvAI2 table and is within noise of it on USS.

    Attributes:
        column_: Name of the text column seen in ``fit`` (or ``"text"``).
        vectorizer_: Fitted TF-IDF vectorizer (or hashing + idf pipeline), when used.
        dense_scalers_: Per dense stack input (``wordllama``/``vader``): (mean, scale) arrays.
        stack_model_: Ridge sub-model fitted on the whole training part (``stack``).
        stack_train_: The inner cross-fit values of the training rows (what ``fit_transform``
            returned in the stack column), kept for inspection.
        n_features_out_: Number of output columns.
        fit_key_: Content key of the fit (settings, texts, ratings); fits and transforms are
            memoised by it (:func:`pulse_ml.models.text_cache.memoize`).
        train_key_: Content key of the training texts (memoised encodings of a fold).

    Notes:
        Honesty: an outer CV fold fits this transformer on its training part only (it is a
        pipeline step), so no held-out row's text or rating shapes the vocabulary, the idf
        weights or the sub-model. Within the training part, ``fit_transform`` (what a Pipeline
        calls) returns for each row the prediction of a sub-model fitted on the *other* inner
        folds -- the stacked generalization of Wolpert (1992) and Breiman (1996), as in
        scikit-learn's ``StackingRegressor``. Without it the structured model would learn to
        trust an in-sample text prediction that memorised the training ratings (a leak that
        inflates r in training and hurts it out of fold; see ``tests/models/test_text.py``).
        The TF-IDF vocabulary and the dense scalers are fitted once on the whole training part:
        they use no rating, so the inner folds need not refit them.

    References:
        Wolpert, D. H. (1992). Stacked generalization. Neural Networks 5(2).
        Breiman, L. (1996). Stacked regressions. Machine Learning 24(1).
        Salton, G. & Buckley, C. (1988). Term-weighting approaches in automatic text
        retrieval. Information Processing & Management 24(5).
    """

    def __init__(self, encoders: str | Sequence[str] = _D["encoders"],
                 stack_on: str | Sequence[str] = _D["stack_on"],
                 stack_alpha: float = _D["stack_alpha"], stack_folds: int = _D["stack_folds"],
                 random_state: int = _D["random_state"], ngram_max: int = _D["ngram_max"],
                 min_df: int = _D["min_df"], max_df: float = _D["max_df"],
                 max_features: int | None = _D["max_features"],
                 sublinear_tf: bool = _D["sublinear_tf"],
                 hashing_features: int = _D["hashing_features"],
                 wordllama_dim: int = _D["wordllama_dim"],
                 wordllama_pool: str = _D["wordllama_pool"],
                 wordllama_config: str = _D["wordllama_config"], turn_sep: str = _D["turn_sep"],
                 cache_dir: str | None = _D["cache_dir"]):
        self.encoders = encoders
        self.stack_on = stack_on
        self.stack_alpha = stack_alpha
        self.stack_folds = stack_folds
        self.random_state = random_state
        self.ngram_max = ngram_max
        self.min_df = min_df
        self.max_df = max_df
        self.max_features = max_features
        self.sublinear_tf = sublinear_tf
        self.hashing_features = hashing_features
        self.wordllama_dim = wordllama_dim
        self.wordllama_pool = wordllama_pool
        self.wordllama_config = wordllama_config
        self.turn_sep = turn_sep
        self.cache_dir = cache_dir

    # -- settings ---------------------------------------------------------------------------

    def validate(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Check the settings; returns ``(encoders, stack_on)`` as tuples.

        Raises:
            PulseError: naming the setting and the allowed values
                (:func:`pulse_ml.sessions.text_options.check_text_settings`).
        """
        return check_text_settings(self.get_params(deep=False))

    def _vectorizer_params(self) -> dict[str, Any]:
        return {"ngram_range": (1, int(self.ngram_max)), "min_df": self.min_df,
                "max_df": float(self.max_df), "max_features": self.max_features,
                "sublinear_tf": bool(self.sublinear_tf), "dtype": np.float64}

    # -- fitting ----------------------------------------------------------------------------

    def fit(self, X, y=None):
        """Fit the encoders (and the sub-model) on the training texts; returns self."""
        self.fit_transform(X, y)
        return self

    def fit_transform(self, X, y=None, **fit_params):
        """Fit on the training texts and return their features (stack = inner cross-fit).

        Args:
            X: The text column (Series, 1-column frame or 1-D array of strings).
            y: Ratings (required when ``encoders`` includes ``stack``).
            **fit_params: Ignored (accepted for scikit-learn compatibility).

        Returns:
            ``(n, n_features_out_)`` float array.
        """
        direct, inputs = self.validate()
        texts, name = _texts(X)
        if "stack" in direct and y is None:
            raise PulseError("text feature 'stack': the text sub-model needs the ratings "
                             "(fit the pipeline with y).")
        y = None if y is None else np.asarray(y, dtype=np.float64)
        # The fit is a deterministic function of (settings, texts, ratings): memoised, so an
        # Optuna trial that only changes the structured model's settings reuses it.
        self.column_ = name or "text"
        key = ("fit", params_key(self), sequence_key(text_hashes(texts)), array_key(y))
        state, result = memoize(key, lambda: self._fit_state(texts, y, direct, inputs))
        self.__dict__.update(state)
        self.fit_key_ = key
        return result.copy()

    def _fit_state(self, texts: np.ndarray, y: np.ndarray | None, direct: tuple[str, ...],
                   inputs: tuple[str, ...]) -> tuple[dict[str, Any], np.ndarray]:
        """Fit a fresh copy; returns its fitted attributes and the training features."""
        fitted = type(self)(**self.get_params())
        fitted.column_ = self.column_
        fitted.train_key_ = sequence_key(text_hashes(texts))
        needs = set(direct) | set(inputs)
        if "tfidf" in needs:
            fitted.vectorizer_ = fitted._fit_tfidf(texts)
        elif "hashing" in needs:
            fitted.vectorizer_ = fitted._fit_hashing(texts)
        fitted.dense_scalers_ = {}
        for block in ("wordllama", "vader"):
            if block in inputs:
                dense = fitted._dense(block, texts)
                scale = dense.std(axis=0)
                fitted.dense_scalers_[block] = (dense.mean(axis=0),
                                                np.where(scale > 0, scale, 1.0))
        out = []
        if "stack" in direct:
            design = fitted._stack_design(texts, inputs)
            fitted.stack_train_ = fitted._inner_crossfit(design, y)
            fitted.stack_model_ = Ridge(alpha=float(self.stack_alpha)).fit(design, y)
            out.append(fitted.stack_train_[:, None])
        out += fitted._direct_blocks(texts, direct)
        result = np.hstack(out) if out else np.empty((len(texts), 0))
        fitted.n_features_out_ = result.shape[1]
        state = {k: v for k, v in vars(fitted).items() if k.endswith("_")}
        return state, result

    def transform(self, X):
        """Features of new texts: the stack column is the full-training-part sub-model's."""
        if not hasattr(self, "n_features_out_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("TextFeatures is not fitted yet; call fit first.")
        direct, inputs = self.validate()
        texts, _ = _texts(X)
        key = ("transform", self.fit_key_, sequence_key(text_hashes(texts)))
        return memoize(key, lambda: self._transform(texts, direct, inputs)).copy()

    def _transform(self, texts: np.ndarray, direct: tuple[str, ...],
                   inputs: tuple[str, ...]) -> np.ndarray:
        out = []
        if "stack" in direct:
            out.append(self.stack_model_.predict(self._stack_design(texts, inputs))[:, None])
        out += self._direct_blocks(texts, direct)
        return np.hstack(out) if out else np.empty((len(texts), 0))

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Output column names ``<column>__stack``, ``<column>__vader_compound`` ..."""
        direct, _ = self.validate()
        col = getattr(self, "column_", None) or (
            str(input_features[0]) if input_features is not None and len(input_features)
            else "text")
        names = []
        for block in direct:
            if block == "stack":
                names.append(f"{col}__stack")
            elif block == "vader":
                names += [f"{col}__vader_{c}" for c in VADER_COLUMNS]
            elif block == "wordllama":
                names += [f"{col}__wordllama_{i}" for i in range(int(self.wordllama_dim))]
            else:
                names += [f"{col}__tfidf_{t}" for t in self.vectorizer_.get_feature_names_out()]
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.two_d_array = False
        tags.requires_fit = True
        return tags

    # -- pieces -----------------------------------------------------------------------------

    def _fit_tfidf(self, texts: np.ndarray) -> TfidfVectorizer:
        return fit_tfidf(texts, self._vectorizer_params(), self.column_)

    def _fit_hashing(self, texts: np.ndarray):
        from sklearn.pipeline import make_pipeline

        hasher = HashingVectorizer(ngram_range=(1, int(self.ngram_max)), alternate_sign=False,
                                   norm=None, n_features=int(self.hashing_features))
        pipe = make_pipeline(hasher, TfidfTransformer(sublinear_tf=bool(self.sublinear_tf)))
        return pipe.fit(texts)

    def _encoding_key(self) -> tuple:
        """Everything an encoding depends on except the rows (not the sub-model's settings)."""
        skip = {"stack_alpha", "stack_folds", "random_state", "cache_dir"}
        return tuple(k for k in params_key(self) if not (isinstance(k, tuple) and k[0] in skip))

    def _sparse(self, texts: np.ndarray) -> sp.csr_matrix:
        # memoised: the same fold's texts are vectorized once, whatever the sub-model settings
        key = ("sparse", self._encoding_key(), self.train_key_, sequence_key(text_hashes(texts)))

        def vectorize() -> sp.csr_matrix:
            return tfidf_transform(self.vectorizer_, texts, self._vectorizer_params(),
                                   self.train_key_)

        return memoize(key, vectorize)

    def _dense(self, block: str, texts: np.ndarray) -> np.ndarray:
        key = ("dense", block, self.turn_sep, int(self.wordllama_dim), self.wordllama_pool,
               self.wordllama_config, sequence_key(text_hashes(texts)))
        if block == "vader":
            return memoize(key, lambda: vader_features(texts, self.turn_sep, self.cache_dir))
        return memoize(key, lambda: wordllama_features(
            texts, int(self.wordllama_dim), self.wordllama_pool, self.turn_sep,
            self.wordllama_config, self.cache_dir))

    def _stack_design(self, texts: np.ndarray, inputs: tuple[str, ...]) -> sp.csr_matrix:
        """The sub-model's inputs: sparse n-grams and standardized dense blocks.

        Each dense block is scaled to unit mean squared row norm, like the L2-normalized
        TF-IDF rows, so that one ridge penalty suits all blocks.
        """
        key = ("design", self._encoding_key(), self.train_key_, inputs,
               sequence_key(text_hashes(texts)))

        def build() -> sp.csr_matrix:
            parts = []
            if "tfidf" in inputs or "hashing" in inputs:
                parts.append(self._sparse(texts))
            for block in ("wordllama", "vader"):
                if block in inputs:
                    mean, scale = self.dense_scalers_[block]
                    dense = (self._dense(block, texts) - mean) / scale / np.sqrt(len(mean))
                    parts.append(sp.csr_matrix(dense))
            return sp.hstack(parts, format="csr")

        return memoize(key, build)

    def _inner_crossfit(self, design: sp.csr_matrix, y: np.ndarray) -> np.ndarray:
        n = design.shape[0]
        if n < 2 * int(self.stack_folds):
            raise PulseError(f"text feature 'stack': {n} training rows are too few for "
                             f"stack_folds={self.stack_folds} inner folds (need >= "
                             f"{2 * int(self.stack_folds)}).")
        out = np.empty(n)
        split = KFold(int(self.stack_folds), shuffle=True, random_state=int(self.random_state))
        for train, test in split.split(np.zeros(n)):
            model = Ridge(alpha=float(self.stack_alpha)).fit(design[train], y[train])
            out[test] = model.predict(design[test])
        return out

    def _direct_blocks(self, texts: np.ndarray, direct: tuple[str, ...]) -> list[np.ndarray]:
        out = []
        for block in direct:
            if block in ("vader", "wordllama"):
                out.append(self._dense(block, texts))
            elif block == "tfidf":
                out.append(self._sparse(texts).toarray())
        return out


def _texts(X) -> tuple[np.ndarray, str | None]:
    """A 1-D object array of strings from a Series, a one-column frame or an array."""
    name = None
    if isinstance(X, pd.DataFrame):
        if X.shape[1] != 1:
            raise ValueError(f"TextFeatures reads one column, got {X.shape[1]}")
        name = str(X.columns[0])
        X = X.iloc[:, 0]
    if isinstance(X, pd.Series):
        name = name or (None if X.name is None else str(X.name))
        values = X.to_numpy(dtype=object)
    else:
        values = np.asarray(X, dtype=object)
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(f"TextFeatures reads a 1-D column of texts, got shape {values.shape}")
    return values, name
