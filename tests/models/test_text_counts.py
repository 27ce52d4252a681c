"""TF-IDF from stored n-gram counts equals scikit-learn's TfidfVectorizer, fold by fold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from pulse_ml.models import text_cache, text_tfidf
from pulse_ml.models.text import TextFeatures

WORDS = np.array([f"w{i:03d}" for i in range(300)] + ["great", "broken", "Thanks!", "é-café"])


@pytest.fixture(autouse=True)
def _fresh_caches():
    text_cache.clear_text_caches()
    yield
    text_cache.clear_text_caches()


def _texts(rng: np.random.Generator, n: int) -> np.ndarray:
    # Zipf-like word choice: frequent and rare terms, ties in term frequency, some empty texts
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    words = WORDS[rng.choice(len(WORDS), size=(n, 12), p=p / p.sum())]
    out = pd.DataFrame(words).agg(" ".join, axis=1).to_numpy(dtype=object)
    out[rng.random(n) < 0.05] = ""
    out[::7] = "\n".join([out[1], out[2]])  # repeated texts, with a turn separator
    return out


@pytest.mark.parametrize("options", [
    {},                                          # the default: min_df=2, 1-2-grams, sublinear
    {"min_df": 1, "ngram_max": 1, "sublinear_tf": False},
    {"min_df": 0.02, "max_df": 0.5},
    {"max_features": 150},                       # the most frequent terms, ties as sklearn
    {"max_features": 40, "min_df": 3, "ngram_max": 3},
])
def test_stored_counts_give_the_tfidf_vectorizers_vocabulary_idf_and_matrix(options):
    rng = np.random.default_rng(11)
    texts = _texts(rng, 400)
    folds = rng.permutation(np.arange(400) % 4)
    for k in range(4):  # every fold reuses the counts stored by the earlier ones
        train, test = texts[folds != k], texts[folds == k]
        enc = TextFeatures(encoders="stack", stack_on="tfidf", **options)
        enc.fit(pd.Series(train), rng.normal(size=len(train)))
        ref = TfidfVectorizer(**enc._vectorizer_params()).fit(train)
        assert enc.vectorizer_.vocabulary_ == ref.vocabulary_
        np.testing.assert_allclose(enc.vectorizer_.idf_, ref.idf_, rtol=1e-13)
        for part in (train, test):
            got, want = enc._sparse(part), ref.transform(part)
            assert (got != want).nnz == 0 or abs(got - want).max() < 1e-12
        # the fitted vectorizer also works alone (a loaded model, new texts)
        new = _texts(np.random.default_rng(k), 30)
        assert abs(enc.vectorizer_.transform(new) - ref.transform(new)).max() < 1e-12


def test_count_cache_on_and_off_give_the_same_features(monkeypatch):
    rng = np.random.default_rng(3)
    texts, y = pd.Series(_texts(rng, 300)), rng.normal(size=300)
    on = TextFeatures(encoders="stack", stack_on="tfidf").fit_transform(texts[:240], y[:240])
    on_test = TextFeatures(encoders="stack", stack_on="tfidf").fit(texts[:240], y[:240]) \
        .transform(texts[240:])
    monkeypatch.setattr(text_tfidf, "USE_COUNT_CACHE", False)
    text_cache.clear_text_caches()
    off_enc = TextFeatures(encoders="stack", stack_on="tfidf")
    off = off_enc.fit_transform(texts[:240], y[:240])
    np.testing.assert_allclose(on, off, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(on_test, off_enc.transform(texts[240:]), rtol=1e-9, atol=1e-12)
    assert not text_cache._COUNTS  # switched off: nothing stored


def test_scoring_new_texts_does_not_grow_the_count_store():
    rng = np.random.default_rng(4)
    texts, y = pd.Series(_texts(rng, 200)), rng.normal(size=200)
    enc = TextFeatures(encoders="stack", stack_on="tfidf").fit(texts, y)
    (store,) = text_cache._COUNTS.values()
    before = store.matrix.shape[0]
    enc.transform(pd.Series([f"never seen {i}" for i in range(50)]))
    assert store.matrix.shape[0] == before


def test_text_hashes_keep_the_values_of_earlier_versions():
    # The on-disk vector stores are keyed by these hashes: the faster categorize=False path
    # must give what pandas' default (categorize=True) gave, duplicates and empties included.
    texts = np.array(["a b", "", "a b", "é\nturn two", "x" * 5000, "a b "], dtype=object)
    want = pd.util.hash_pandas_object(pd.Series(texts, dtype=object), index=False).to_numpy()
    got = text_cache.text_hashes(texts)
    assert got.dtype == np.uint64 and (got == want).all()
    assert got[0] == got[2] and len(set(got.tolist())) == 5
