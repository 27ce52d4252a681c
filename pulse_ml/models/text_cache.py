"""Content-hash caches for text encoders: each distinct text is encoded once per process.

Label-free encoders (VADER scores, WordLlama embeddings) give the same vector for the same text
whatever fold or trial asks, so their outputs are stored by a 64-bit hash of the text's content:
in memory for the life of the process and, when a cache folder is given, on disk (one ``.npz``
file per encoder setting) so that later runs and the tuning worker processes reuse them. Fitted
TF-IDF vocabularies depend on the training rows, so they are memoised by the ordered content
of those rows (the same fold of the same table in the next Optuna trial hits the cache). The
word n-gram *counts* of a text do not depend on any other row, so a :class:`CountStore` keeps
them by content hash over one growing term index: every fold's TF-IDF (vocabulary, idf) is then
computed from the rows' stored counts instead of tokenizing the same texts again in every fold.

Everything here is vectorized over texts: hashing, lookup (``np.searchsorted`` on the sorted
hashes) and merging; only texts not seen before reach the encoder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["CountStore", "VectorStore", "array_key", "clear_text_caches", "count_store", "memoize",
           "params_key", "peek", "sequence_key", "store_for", "text_hashes"]


def text_hashes(texts) -> np.ndarray:
    """A 64-bit content hash per text (``pandas.util.hash_pandas_object``, vectorized).

    Args:
        texts: Sequence of strings.

    Returns:
        ``uint64`` array, one hash per text; equal texts get equal hashes.

    Notes:
        Two different texts share a hash with probability about ``m**2 / 2**65`` for ``m``
        distinct texts (about 3e-8 for a million), which is negligible for a cache.
    """
    series = pd.Series(np.asarray(texts, dtype=object), dtype=object)
    # categorize=False: the same hashes (pandas hashes each value either way), without first
    # factorizing the long strings -- 8x faster on USS dialogues, and this runs in every trial.
    return pd.util.hash_pandas_object(series, index=False, categorize=False
                                      ).to_numpy(dtype=np.uint64)


def sequence_key(hashes: np.ndarray) -> str:
    """An order-sensitive key of a sequence of text hashes (the rows a model is fitted on)."""
    arr = np.ascontiguousarray(hashes, dtype=np.uint64)
    return f"{len(arr)}:" + hashlib.blake2b(arr.tobytes(), digest_size=16).hexdigest()


def params_key(est) -> tuple:
    """A scikit-learn estimator's class and settings (a subclass never shares a memoised fit)."""
    cls = type(est)
    return (f"{cls.__module__}.{cls.__qualname__}",
            *sorted((k, repr(v)) for k, v in est.get_params(deep=False).items()))


def array_key(y: np.ndarray | None) -> str | None:
    """A content key of an array (the ratings a fit used), None for None."""
    if y is None:
        return None
    arr = np.ascontiguousarray(y, dtype=np.float64)
    return f"{arr.shape}:" + hashlib.blake2b(arr.tobytes(), digest_size=16).hexdigest()


class VectorStore:
    """Vectors of texts keyed by content hash, in memory and optionally in one ``.npz`` file.

    Args:
        key: Name of the encoder setting (e.g. ``wordllama-l2_supercat-256``); also the file
            name under ``cache_dir``.
        width: Length of each vector.
        cache_dir: Folder for the on-disk copy (None = memory only).
    """

    def __init__(self, key: str, width: int, cache_dir: str | os.PathLike | None = None):
        self.key = key
        self.width = int(width)
        self.path = (Path(cache_dir).expanduser() / f"{_slug(key)}.npz"
                     if cache_dir is not None else None)
        self.hashes = np.empty(0, dtype=np.uint64)
        self.values = np.empty((0, self.width), dtype=np.float32)
        self.n_computed = 0
        if self.path is not None and self.path.is_file():
            self._merge(*self._read(self.path))

    def __len__(self) -> int:
        return len(self.hashes)

    def get(self, texts, compute: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """Vectors of ``texts`` (rows in the same order), encoding only the texts not stored.

        Args:
            texts: Sequence of strings.
            compute: Encoder: list of distinct new texts -> ``(len, width)`` array.

        Returns:
            ``(len(texts), width)`` float32 array.
        """
        texts = np.asarray(texts, dtype=object)
        if texts.size == 0:
            return np.empty((0, self.width), dtype=np.float32)
        h = text_hashes(texts)
        uniq, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        missing = ~self._contains(uniq)
        if missing.any():
            new = np.asarray(compute(texts[first[missing]].tolist()), dtype=np.float32)
            if new.shape != (int(missing.sum()), self.width):
                raise ValueError(f"{self.key}: encoder returned shape {new.shape}, expected "
                                 f"({int(missing.sum())}, {self.width})")
            self.n_computed += len(new)
            self._merge(uniq[missing], new)
            self._save()
        pos = np.searchsorted(self.hashes, uniq)
        return self.values[pos][inverse.ravel()]

    def _contains(self, uniq: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(self.hashes, uniq), max(len(self.hashes) - 1, 0))
        return (self.hashes[pos] == uniq) if len(self.hashes) else np.zeros(len(uniq), bool)

    def _merge(self, hashes: np.ndarray, values: np.ndarray) -> None:
        if len(hashes) == 0:
            return
        all_h = np.concatenate([self.hashes, hashes.astype(np.uint64)])
        all_v = np.concatenate([self.values, values.astype(np.float32)])
        keep_h, idx = np.unique(all_h, return_index=True)
        self.hashes, self.values = keep_h, all_v[idx]

    def _read(self, path: Path) -> tuple[np.ndarray, np.ndarray]:
        try:
            with np.load(path) as data:
                h, v = data["hashes"].astype(np.uint64), data["values"].astype(np.float32)
        except (OSError, ValueError, KeyError):
            return np.empty(0, np.uint64), np.empty((0, self.width), np.float32)
        if v.ndim != 2 or v.shape[1] != self.width or len(h) != len(v):
            return np.empty(0, np.uint64), np.empty((0, self.width), np.float32)
        return h, v

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file():  # another process may have added texts meanwhile
            self._merge(*self._read(self.path))
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".npz.tmp")
        os.close(fd)
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, hashes=self.hashes, values=self.values)
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


class CountStore:
    """Term counts of texts by content hash, over one term index that grows with new texts.

    The counts of a text are a function of that text alone (the analyzer splits it into word
    n-grams), so storing them leaks nothing between rows: which terms a fold keeps, and their
    idf, are still computed from that fold's training rows only.

    Args:
        analyzer: Text -> list of terms (``CountVectorizer.build_analyzer()``).
    """

    def __init__(self, analyzer: Callable[[str], list[str]]):
        self.analyzer = analyzer
        self.terms: dict[str, int] = {}
        self.hashes = np.empty(0, dtype=np.uint64)  # sorted
        self.rows = np.empty(0, dtype=np.int64)  # row of ``matrix`` per sorted hash
        self.matrix = sp.csr_matrix((0, 0), dtype=np.float64)

    def term_names(self) -> np.ndarray:
        """The terms in index order (object array)."""
        names = np.empty(len(self.terms), dtype=object)
        names[list(self.terms.values())] = list(self.terms.keys())
        return names

    def counts(self, texts, add: bool = True) -> sp.csr_matrix | None:
        """The ``(len(texts), n_terms)`` count matrix of ``texts`` (float64, sorted indices).

        Args:
            texts: Sequence of strings.
            add: Analyze and store texts not seen before; with False, return None when any
                text is new (scoring new data does not grow the store).
        """
        texts = np.asarray(texts, dtype=object)
        h = text_hashes(texts)
        uniq, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        pos = np.minimum(np.searchsorted(self.hashes, uniq), max(len(self.hashes) - 1, 0))
        present = (self.hashes[pos] == uniq) if len(self.hashes) else np.zeros(len(uniq), bool)
        if not present.all():
            if not add:
                return None
            self._add(uniq[~present], texts[first[~present]])
            pos = np.searchsorted(self.hashes, uniq)
        out = self.matrix[self.rows[pos][inverse.ravel()]]
        out.resize((len(texts), len(self.terms)))
        out.sort_indices()
        return out

    def _add(self, hashes: np.ndarray, texts: np.ndarray) -> None:
        terms = self.terms
        indptr, indices, values = [0], [], []
        for doc in texts:  # the one Python loop: each distinct text is analyzed once
            counter: dict[int, int] = {}
            for term in self.analyzer(doc):
                idx = terms.setdefault(term, len(terms))
                counter[idx] = counter.get(idx, 0) + 1
            indices.extend(counter.keys())
            values.extend(counter.values())
            indptr.append(len(indices))
        new = sp.csr_matrix((np.asarray(values, dtype=np.float64),
                             np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
                            shape=(len(texts), len(terms)))
        new.sort_indices()
        old = self.matrix
        old.resize((old.shape[0], len(terms)))
        self.matrix = sp.vstack([old, new], format="csr")
        all_h = np.concatenate([self.hashes, hashes.astype(np.uint64)])
        all_r = np.concatenate([self.rows, old.shape[0] + np.arange(len(texts))])
        order = np.argsort(all_h, kind="stable")
        self.hashes, self.rows = all_h[order], all_r[order]


CACHE_ENV = "PULSE_TEXT_CACHE"
_STORES: dict[tuple[str, int, str | None], VectorStore] = {}
_COUNTS: dict[Hashable, CountStore] = {}
_MEMO: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
MEMO_SIZE = 128
MEMO_BYTES = 512 * 2**20


def store_for(key: str, width: int, cache_dir: str | os.PathLike | None = None) -> VectorStore:
    """The process-wide :class:`VectorStore` of an encoder setting (created on first use).

    ``cache_dir=None`` falls back to the ``PULSE_TEXT_CACHE`` environment variable (unset or
    empty = memory only).
    """
    cache_dir = cache_dir if cache_dir is not None else (os.environ.get(CACHE_ENV) or None)
    folder = None if cache_dir is None else str(Path(cache_dir).expanduser().resolve())
    ident = (key, int(width), folder)
    if ident not in _STORES:
        _STORES[ident] = VectorStore(key, width, folder)
    return _STORES[ident]


def count_store(key: Hashable, analyzer: Callable[[], Callable[[str], list[str]]]
                ) -> CountStore:
    """The process-wide :class:`CountStore` of an analyzer setting (``analyzer()`` builds it)."""
    if key not in _COUNTS:
        _COUNTS[key] = CountStore(analyzer())
    return _COUNTS[key]


@contextlib.contextmanager
def cache_folder(folder: str | os.PathLike | None) -> Iterator[None]:
    """Within the block, encoders cache on disk in ``folder`` (None = memory only).

    Sets the ``PULSE_TEXT_CACHE`` environment variable (so tuning worker processes started
    inside the block inherit it) and restores the previous value afterwards.
    """
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = "" if folder is None else str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before


def memoize(key: Hashable, compute: Callable[[], Any]) -> Any:
    """Least-recently-used memo of deterministic results (fits, encoded folds).

    Keeps at most ``MEMO_SIZE`` entries and about ``MEMO_BYTES`` of arrays; callers must not
    modify what they get back.
    """
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key][0]
    value = compute()
    _MEMO[key] = (value, _nbytes(value))
    total = sum(size for _, size in _MEMO.values())
    while len(_MEMO) > 1 and (len(_MEMO) > MEMO_SIZE or total > MEMO_BYTES):
        _, (_, size) = _MEMO.popitem(last=False)
        total -= size
    return value


def peek(key: Hashable) -> Any:
    """The memoised value of ``key``, or None when it is not (or no longer) memoised."""
    entry = _MEMO.get(key)
    return None if entry is None else entry[0]


def _nbytes(value: Any) -> int:
    """Approximate memory of arrays, sparse matrices and containers of them."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if hasattr(value, "data") and hasattr(value, "indices"):  # scipy sparse
        return int(value.data.nbytes + value.indices.nbytes + value.indptr.nbytes)
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    vocab = getattr(value, "vocabulary_", None)
    if isinstance(vocab, dict):  # a fitted TfidfVectorizer: ~150 bytes per term
        return 150 * len(vocab)
    return 0


def clear_text_caches() -> None:
    """Forget every in-memory store and memoised fit (files on disk are kept)."""
    _STORES.clear()
    _COUNTS.clear()
    _MEMO.clear()


def _slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)
