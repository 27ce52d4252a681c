"""TF-IDF from stored n-gram counts: a fold's vocabulary, idf and rows without tokenizing again.

The word n-gram counts of a text do not depend on any other row, so they are stored once per
text (:class:`pulse_ml.models.text_cache.CountStore`); each CV fold's TF-IDF (vocabulary, idf)
and its rows are then computed from the stored counts of its texts. The result is the same
vocabulary, idf and matrix as scikit-learn's ``TfidfVectorizer`` fitted on the texts
(``tests/models/test_text_counts.py``).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer, TfidfVectorizer
from sklearn.preprocessing import normalize

from pulse_ml.errors import PulseError
from pulse_ml.models.text_cache import (
    CountStore,
    count_store,
    memoize,
    peek,
    sequence_key,
    text_hashes,
)

__all__ = ["USE_COUNT_CACHE", "fit_tfidf", "tfidf_from_counts", "tfidf_transform",
           "tfidf_weights"]

# TF-IDF from stored per-text n-gram counts (text_cache.CountStore) instead of tokenizing every
# fold's texts again; the same vocabulary, idf and matrix (tested). perf/text_bench.py
# --count-cache off switches it off to measure what it saves.
USE_COUNT_CACHE = True


def _tfidf_key(params: dict[str, Any], train_key: str) -> tuple:
    return ("tfidf", tuple(sorted(params.items(), key=str)), train_key, USE_COUNT_CACHE)


def _ngram_counts(params: dict[str, Any]) -> CountStore:
    """The process's store of n-gram counts for these settings' longest n-gram."""
    return count_store(("ngrams", int(params["ngram_range"][1])),
                       lambda: TfidfVectorizer(**params).build_analyzer())


def fit_tfidf(texts: np.ndarray, params: dict[str, Any], column: str) -> TfidfVectorizer:
    """A ``TfidfVectorizer`` fitted on a fold's training texts (memoised by their content).

    Args:
        texts: The training texts.
        params: The vectorizer's parameters (``TextFeatures._vectorizer_params``).
        column: The text column's name (for the message).

    Raises:
        PulseError: if no term is left (every training text empty, or ``min_df`` too high).
    """

    def fit() -> tuple[TfidfVectorizer, np.ndarray | None]:
        try:
            if USE_COUNT_CACHE:
                return tfidf_from_counts(_ngram_counts(params).counts(texts),
                                         _ngram_counts(params).term_names, params)
            return TfidfVectorizer(**params).fit(texts), None
        except ValueError as exc:  # empty vocabulary: every training text is empty
            raise PulseError(f"text feature '{column}': no term is left for TF-IDF "
                             f"({exc}); lower min_df or check that the column holds "
                             "the messages.") from None

    return memoize(_tfidf_key(params, sequence_key(text_hashes(texts))), fit)[0]


def tfidf_transform(vectorizer, texts: np.ndarray, params: dict[str, Any],
                    train_key: str) -> sp.csr_matrix:
    """TF-IDF rows of ``texts`` from a vectorizer fitted on the texts keyed ``train_key``.

    From the stored counts when this very vectorizer was fitted from them in this process and
    every text is stored; else (a loaded model, new texts, hashing) the vectorizer itself.
    """
    fitted = peek(_tfidf_key(params, train_key))
    if fitted is not None and fitted[0] is vectorizer and fitted[1] is not None:
        counts = _ngram_counts(params).counts(texts, add=False)
        if counts is not None:
            return tfidf_weights(counts[:, fitted[1]], vectorizer.idf_,
                                 bool(params["sublinear_tf"]))
    return sp.csr_matrix(vectorizer.transform(texts))


def tfidf_from_counts(counts: sp.csr_matrix, term_names, params: dict[str, Any]
                       ) -> tuple[TfidfVectorizer, np.ndarray]:
    """A fitted ``TfidfVectorizer`` from the training rows' stored n-gram counts.

    The same vocabulary and idf as ``TfidfVectorizer(**params).fit(texts)`` (scikit-learn's
    rules: terms sorted alphabetically, ``min_df``/``max_df`` as counts or shares, the
    ``max_features`` most frequent), without tokenizing the texts again.

    Args:
        counts: ``(n, n_terms)`` counts of the training texts (``CountStore.counts``).
        term_names: Zero-argument callable giving the store's terms in index order.
        params: The vectorizer's parameters.

    Returns:
        The vectorizer and the store columns of its vocabulary (in vocabulary order).

    Raises:
        ValueError: no term at all, or none left after ``min_df``/``max_df``.
    """
    n = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    present = np.flatnonzero(df)
    if not len(present):
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
    names = term_names()[present]
    order = np.argsort(names)
    cols, names, dfs = present[order], names[order], df[present[order]]
    max_df, min_df = params["max_df"], params["min_df"]
    high = max_df if isinstance(max_df, numbers.Integral) else max_df * n
    low = min_df if isinstance(min_df, numbers.Integral) else min_df * n
    if high < low:
        raise ValueError("max_df corresponds to < documents than min_df")
    mask = (dfs <= high) & (dfs >= low)
    limit = params["max_features"]
    if limit is not None and mask.sum() > limit:  # as sklearn's _limit_features
        tfs = np.asarray(counts[:, cols].sum(axis=0)).ravel()
        keep = (-tfs[mask]).argsort()[:limit]
        mask = np.zeros(len(dfs), dtype=bool)
        mask[np.flatnonzero((dfs <= high) & (dfs >= low))[keep]] = True
    if not mask.any():
        raise ValueError("After pruning, no terms remain. Try a lower min_df or a higher "
                         "max_df.")
    cols, names = cols[mask], names[mask]
    vec = TfidfVectorizer(**params)
    vec.vocabulary_ = {str(t): i for i, t in enumerate(names)}
    vec.idf_ = TfidfTransformer(sublinear_tf=bool(params["sublinear_tf"])).fit(
        counts[:, cols]).idf_
    return vec, cols


def tfidf_weights(counts: sp.csr_matrix, idf: np.ndarray, sublinear: bool) -> sp.csr_matrix:
    """TF-IDF rows from counts over the vocabulary (what ``TfidfVectorizer.transform`` does)."""
    out = sp.csr_matrix(counts, dtype=np.float64, copy=True)
    out.sort_indices()
    if sublinear:
        np.log(out.data, out.data)
        out.data += 1.0
    out.data *= idf[out.indices]
    return normalize(out, norm="l2", copy=False)
