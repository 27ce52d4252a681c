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
part only, and the out-of-fold predictions that PPI++ needs stay honest. VADER and WordLlama are
label-free and deterministic, so their vectors are cached by content hash (computed once per
table, not once per trial; see :mod:`pulse_ml.models.text_cache`).

Packages: ``vaderSentiment`` (its lexicon ships inside the package) is in the base install;
``wordllama`` (its 256-dimensional ``l2_supercat`` weights and tokenizer ship inside the package
and are read from the installed package folder; nothing is downloaded) comes with the text
extra, ``pip install 'pulse-ml[text]'``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import logging
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer, TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold
from sklearn.preprocessing import normalize

from pulse_ml.errors import PulseError
from pulse_ml.models.lexicon import cap_messages, vader_compound
from pulse_ml.models.text_cache import (
    count_store,
    memoize,
    peek,
    sequence_key,
    store_for,
    text_hashes,
)

__all__ = [
    "DIRECT_ENCODERS",
    "STACK_INPUTS",
    "TEXT_EXTRA",
    "TextColumnCheck",
    "TextFeatures",
    "check_text_column",
    "load_wordllama",
    "parse_encoders",
    "require_package",
    "text_options",
    "text_requirements",
    "text_search_space",
    "vader_features",
    "wordllama_features",
]

TEXT_EXTRA = "text"
DIRECT_ENCODERS = ("stack", "vader", "wordllama", "tfidf")
STACK_INPUTS = ("tfidf", "hashing", "wordllama", "vader")
VADER_COLUMNS = ("compound", "turn_mean", "turn_min", "turn_max", "turn_last",
                 "share_negative", "share_positive")
WORDLLAMA_DIMS = (64, 128, 256, 512, 1024)
# TF-IDF from stored per-text n-gram counts (text_cache.CountStore) instead of tokenizing every
# fold's texts again; the same vocabulary, idf and matrix (tested). perf/text_bench.py
# --count-cache off switches it off to measure what it saves.
USE_COUNT_CACHE = True
MAX_DIRECT_TFIDF = 5000
_VADER_ALPHA = 15.0  # VADER's normalization constant (vaderSentiment.normalize)
_SHOW = 5
_PIP = {"vaderSentiment": "vaderSentiment>=3.3", "wordllama": "wordllama>=0.4"}
# How to get each encoder package back: VADER is a base dependency, WordLlama the text extra.
_INSTALL_HINT = {
    "vaderSentiment": ("it is part of the base install of pulse-ml; reinstall it: pip install "
                       f"'{_PIP['vaderSentiment']}'"),
    "wordllama": (f"install the text extra: pip install 'pulse-ml[{TEXT_EXTRA}]' (or pip "
                  f"install '{_PIP['wordllama']}')"),
}


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextColumnCheck:
    """A text column made model-ready by :func:`check_text_column`.

    Attributes:
        column: Column name.
        texts: The texts (``str``), missing values replaced by ``""``; same index as the input.
        n_missing: How many values were missing (NaN/None) and count as empty text.
    """

    column: str
    texts: pd.Series
    n_missing: int

    @property
    def note(self) -> str | None:
        """A sentence for the user when values were missing, else None."""
        return missing_text_note(self.column, self.n_missing, len(self.texts))


def missing_text_note(column: str, n_missing: int, n_rows: int) -> str | None:
    """The note for ``n_missing`` of ``n_rows`` sessions without text (None when there are none).

    Shared by the whole-table check and the chunked one (summed over the chunks).
    """
    if not n_missing:
        return None
    return (f"column '{column}': {n_missing} of {n_rows} session(s) have no text; they count "
            "as empty text (no words).")


def check_text_column(values: pd.Series, column: str,
                      ids: pd.Series | None = None) -> TextColumnCheck:
    """Check a text feature column: strings pass, missing values become ``""``, others refused.

    Args:
        values: The column.
        column: Its name (for messages).
        ids: Optional ``session_id`` per row, named in the message next to the row number.

    Returns:
        The texts and the number of missing values (see :class:`TextColumnCheck`).

    Raises:
        PulseError: if a value is neither text nor missing (numbers, lists, bytes ...), naming
            the column, the first offending rows and their types.
    """
    s = pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    missing = s.isna().to_numpy(dtype=bool)
    if pd.api.types.is_string_dtype(s.dtype) and s.dtype != object:
        bad = np.zeros(len(s), dtype=bool)
    elif s.dtype == object:
        kind = pd.api.types.infer_dtype(s, skipna=True)
        bad = (np.zeros(len(s), dtype=bool) if kind in ("string", "empty")
               else ~missing & ~s.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool))
    else:  # numbers, booleans, datetimes: every non-missing value is not text
        bad = ~missing
    if bad.any():
        idx = np.flatnonzero(bad)
        rows = []
        for i in idx[:_SHOW]:
            where = f"row {i + 1}"
            if ids is not None:
                where += f" (session_id={pd.Series(ids).iloc[i]})"
            rows.append(f"{where}: {type(s.iloc[i]).__name__} {s.iloc[i]!r:.40}")
        more = f" and {len(idx) - _SHOW} more" if len(idx) > _SHOW else ""
        raise PulseError(
            f"column '{column}' (a text feature): {len(idx)} value(s) are not text — "
            f"{'; '.join(rows)}{more}. A text column holds the session's messages as strings "
            "(missing = empty text); write the text itself, quote numbers in CSV files, or "
            "give the column another kind in the feature set.")
    texts = s.where(~missing, "").astype(object).astype(str)
    return TextColumnCheck(column=str(column), texts=texts, n_missing=int(missing.sum()))


def require_package(module: str, encoder: str):
    """Import an encoder package or say how to install it (base install or text extra).

    Args:
        module: Import path (``vaderSentiment.vaderSentiment``, ``wordllama`` ...).
        encoder: Encoder name, for the message.

    Raises:
        PulseError: if the package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        hint = _INSTALL_HINT.get(top, f"install it: pip install '{_PIP.get(top, top)}'")
        raise PulseError(
            f"text encoder '{encoder}' needs the package {top!r}, which is not installed: "
            f"{hint}; or drop '{encoder}' from the text column's encoders in the feature "
            "set.") from None


def parse_encoders(value: str | Sequence[str], allowed: Sequence[str], what: str
                   ) -> tuple[str, ...]:
    """Normalize an encoder list: ``"stack+vader"``, ``"stack,vader"`` or ``["stack", "vader"]``.

    The ``+`` form lets Optuna tune the choice with a categorical of plain strings.

    Raises:
        PulseError: if a name is unknown or the list is empty.
    """
    if isinstance(value, str):
        names = [p.strip() for p in value.replace(",", "+").split("+") if p.strip()]
    else:
        names = [str(p).strip() for p in value]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise PulseError(f"text feature: {what}={value!r}: "
                         + (f"unknown {', '.join(map(repr, unknown))}; " if unknown else
                            "empty; ")
                         + f"use names from {', '.join(allowed)} joined by '+' "
                         "(e.g. 'stack+vader').")
    return tuple(dict.fromkeys(names))


# --------------------------------------------------------------------------------------------
# Label-free encoders (cached by content hash)
# --------------------------------------------------------------------------------------------


def _split_turns(texts: np.ndarray, turn_sep: str) -> tuple[np.ndarray, np.ndarray]:
    """Non-empty messages of each text and the text index each comes from."""
    series = pd.Series(texts, dtype=object)
    if turn_sep:
        series = series.str.split(turn_sep, regex=False).explode()
    turns = series.astype(str).str.strip()
    keep = (turns != "").to_numpy()
    return turns.to_numpy(dtype=object)[keep], series.index.to_numpy()[keep]


def vader_features(texts: Sequence[str], turn_sep: str = "\n",
                   cache_dir: str | None = None) -> np.ndarray:
    """VADER lexicon sentiment of each text and of its messages.

    Args:
        texts: One string per session (messages separated by ``turn_sep``).
        turn_sep: Message separator ("" = the text is one message).
        cache_dir: Folder of the on-disk cache (None = memory only).

    Returns:
        ``(n, 7)`` array: compound score of the whole text (from the summed valences of its
        messages), mean / min / max / last compound over messages, share of negative
        (compound < -0.05) and positive (> 0.05) messages. Texts without words give zeros.

    Notes:
        VADER (Hutto & Gilbert 2014) is a rule-based valence lexicon with negation, intensifier
        and punctuation rules; the compound score lies in [-1, 1]. It uses no label, so it is
        honest to compute it on all rows; scores are cached per distinct message. A message
        longer than 5,000 characters is scored on its first and last 2,500 (with a note):
        VADER's time is quadratic in a message's words (``pulse_ml/models/lexicon.py``).

    References:
        Hutto, C. J. & Gilbert, E. (2014). VADER: A parsimonious rule-based model for sentiment
        analysis of social media text. ICWSM.
    """
    texts = np.asarray(texts, dtype=object)
    n = len(texts)
    store = store_for("vader-compound", 1, cache_dir)
    turns, owner = _split_turns(texts, turn_sep)
    turns = cap_messages(turns)  # VADER is quadratic in a message's words: long ones are cut
    comp = store.get(turns, vader_compound)[:, 0] if len(turns) else np.empty(0, np.float32)
    comp = comp.astype(np.float64)
    # VADER's compound is s / sqrt(s^2 + 15) of the summed valences s: invert it per message
    # and sum, which scores the whole text without running VADER on long texts again.
    c = np.clip(comp, -0.9999, 0.9999)
    valence = np.sqrt(_VADER_ALPHA) * c / np.sqrt(1.0 - c**2)
    frame = pd.DataFrame({"c": comp, "s": valence, "neg": comp < -0.05, "pos": comp > 0.05},
                         index=owner)
    g = frame.groupby(level=0)
    total = g["s"].sum()
    agg = pd.DataFrame({"whole": total / np.sqrt(total**2 + _VADER_ALPHA),
                        "mean": g["c"].mean(), "min": g["c"].min(), "max": g["c"].max(),
                        "last": g["c"].last(), "neg": g["neg"].mean(), "pos": g["pos"].mean()})
    return agg.reindex(pd.RangeIndex(n), fill_value=0.0).to_numpy(dtype=np.float64)


@functools.lru_cache(maxsize=4)
def load_wordllama(config: str = "l2_supercat", dim: int = 256):
    """The WordLlama model shipped inside the installed ``wordllama`` package (no download).

    Reads ``<package>/weights/<config>_<D>.safetensors`` (the smallest shipped ``D >= dim``,
    truncated to ``dim`` -- the embeddings are Matryoshka-trained) and
    ``<package>/tokenizers/<config>_tokenizer_config.json``.

    Args:
        config: Model configuration name (the package ships ``l2_supercat``).
        dim: Embedding dimension (64, 128, 256, ...).

    Returns:
        A ``wordllama.inference.WordLlamaInference``.

    Raises:
        PulseError: if the package is missing, or the weights or tokenizer file is not in the
            package folder (nothing is fetched).
    """
    if int(dim) not in WORDLLAMA_DIMS:
        raise PulseError(f"text feature: wordllama_dim={dim}: use one of "
                         f"{', '.join(map(str, WORDLLAMA_DIMS))}.")
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    package = require_package("wordllama", "wordllama")
    # wordllama's __init__ calls logging.basicConfig(level=INFO): undo it.
    root.handlers[:], root.level = handlers, level
    from safetensors import safe_open
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    folder = Path(package.__file__).parent
    shipped = sorted((folder / "weights").glob(f"{config}_*.safetensors"))
    sizes = sorted(int(p.stem.rsplit("_", 1)[1]) for p in shipped
                   if p.stem.rsplit("_", 1)[1].isdigit())
    usable = [d for d in sizes if d >= int(dim)]
    tokenizer = folder / "tokenizers" / f"{config}_tokenizer_config.json"
    if not usable or not tokenizer.is_file():
        have = ", ".join(p.name for p in sorted((folder / "weights").glob("*.safetensors")))
        missing = (f"weights {config}_<dim>.safetensors with dim >= {dim}" if not usable
                   else f"tokenizer {tokenizer.name}")
        raise PulseError(
            f"text encoder 'wordllama': the installed wordllama package ({folder}) has no "
            f"{missing} (it ships: {have or 'no weights'}); nothing is downloaded at run time. "
            f"Reinstall it (pip install --force-reinstall '{_PIP['wordllama']}') or choose "
            "another wordllama_config / wordllama_dim.")
    weights = folder / "weights" / f"{config}_{usable[0]}.safetensors"
    with safe_open(str(weights), framework="np", device="cpu") as fh:
        matrix = fh.get_tensor("embedding.weight")[:, : int(dim)]
    return WordLlamaInference(matrix, Tokenizer.from_file(str(tokenizer)), binary=False)


def _wordllama_compute(config: str, dim: int):
    def compute(texts: list[str]) -> np.ndarray:
        model = load_wordllama(config, dim)
        order = np.argsort([len(t) for t in texts], kind="stable")  # less padding per batch
        out = np.empty((len(texts), dim), dtype=np.float32)
        if len(texts):
            emb = model.embed([texts[i] for i in order], norm=False, batch_size=64)
            norm = np.linalg.norm(emb, axis=1, keepdims=True)
            out[order] = np.divide(emb, norm, out=np.zeros_like(emb), where=norm > 0)
        return out

    return compute


def wordllama_features(texts: Sequence[str], dim: int = 256, pool: str = "turns",
                       turn_sep: str = "\n", config: str = "l2_supercat",
                       cache_dir: str | None = None) -> np.ndarray:
    """WordLlama embedding of each text: unit-norm mean of token embeddings.

    Args:
        texts: One string per session.
        dim: Embedding dimension.
        pool: ``turns`` = mean of the unit-norm embeddings of the messages; ``text`` = the
            embedding of the whole text.
        turn_sep: Message separator for ``turns``.
        config: WordLlama configuration shipped in the package.
        cache_dir: Folder of the on-disk cache (None = memory only).

    Returns:
        ``(n, dim)`` float64 array (zeros for texts without tokens).

    Notes:
        WordLlama (Miller 2024) keeps the token-embedding table of a large language model,
        trained to make averaged token vectors good sentence embeddings; with no attention
        layers, encoding is a table look-up and a mean (fast on CPU). It uses no labels.

    References:
        Miller, D. L. (2024). WordLlama: recycled token embeddings from large language models.
        Software, version 0.4.
    """
    if pool not in ("turns", "text"):
        raise PulseError(f"text feature: wordllama_pool={pool!r}: use 'turns' or 'text'.")
    texts = np.asarray(texts, dtype=object)
    store = store_for(f"wordllama-{config}-{int(dim)}", int(dim), cache_dir)
    compute = _wordllama_compute(config, int(dim))
    if pool == "text":
        return store.get(texts, compute).astype(np.float64)
    turns, owner = _split_turns(texts, turn_sep)
    emb = store.get(turns, compute) if len(turns) else np.empty((0, int(dim)), np.float32)
    counts = np.bincount(owner, minlength=len(texts)).astype(np.float64)
    mean = sp.csr_matrix((np.ones(len(owner)), (owner, np.arange(len(owner)))),
                         shape=(len(texts), len(owner))) @ emb.astype(np.float64)
    return mean / np.maximum(counts, 1.0)[:, None]


# --------------------------------------------------------------------------------------------
# The per-column transformer
# --------------------------------------------------------------------------------------------


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

    def __init__(self, encoders: str | Sequence[str] = "stack",
                 stack_on: str | Sequence[str] = "tfidf+vader", stack_alpha: float = 3.0,
                 stack_folds: int = 5, random_state: int = 0, ngram_max: int = 2,
                 min_df: int = 2, max_df: float = 1.0, max_features: int | None = None,
                 sublinear_tf: bool = True, hashing_features: int = 2**18,
                 wordllama_dim: int = 256, wordllama_pool: str = "turns",
                 wordllama_config: str = "l2_supercat", turn_sep: str = "\n",
                 cache_dir: str | None = None):
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
            PulseError: naming the setting and the allowed values.
        """
        direct = parse_encoders(self.encoders, DIRECT_ENCODERS, "encoders")
        inputs = parse_encoders(self.stack_on, STACK_INPUTS, "stack_on") if "stack" in direct \
            else ()
        if "tfidf" in direct and not (self.max_features and
                                      int(self.max_features) <= MAX_DIRECT_TFIDF):
            raise PulseError("text feature: encoders includes 'tfidf' (raw TF-IDF columns into "
                             f"the model): set max_features <= {MAX_DIRECT_TFIDF}, or use "
                             "'stack' (a ridge sub-model on TF-IDF, one column).")
        checks = [("stack_alpha", self.stack_alpha, float, 0.0, False),
                  ("stack_folds", self.stack_folds, int, 2, True),
                  ("ngram_max", self.ngram_max, int, 1, True),
                  ("hashing_features", self.hashing_features, int, 16, True)]
        for name, value, typ, low, inclusive in checks:
            try:
                v = typ(value)
            except (TypeError, ValueError):
                v = None
            if v is None or (v < low if inclusive else v <= low) or \
                    (typ is int and float(value) != v):
                raise PulseError(f"text feature: {name}={value!r}: use a"
                                 f"{'n integer' if typ is int else ' number'} "
                                 f"{'>=' if inclusive else '>'} {low}.")
        if not (isinstance(self.min_df, int | np.integer) and self.min_df >= 1) and \
                not (isinstance(self.min_df, float) and 0.0 < self.min_df < 1.0):
            raise PulseError(f"text feature: min_df={self.min_df!r}: use a count >= 1 or a "
                             "share in (0, 1).")
        if not 0.0 < float(self.max_df) <= 1.0:
            raise PulseError(f"text feature: max_df={self.max_df!r}: use a share in (0, 1].")
        if self.wordllama_pool not in ("turns", "text"):
            raise PulseError(f"text feature: wordllama_pool={self.wordllama_pool!r}: use "
                             "'turns' or 'text'.")
        if int(self.wordllama_dim) not in WORDLLAMA_DIMS:
            raise PulseError(f"text feature: wordllama_dim={self.wordllama_dim!r}: use one of "
                             f"{', '.join(map(str, WORDLLAMA_DIMS))}.")
        return direct, inputs

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
        key = ("fit", _params_key(self), sequence_key(text_hashes(texts)), _array_key(y))
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

    def _tfidf_key(self, train_key: str) -> tuple:
        return ("tfidf", tuple(sorted(self._vectorizer_params().items(), key=str)), train_key,
                USE_COUNT_CACHE)

    def _count_store(self):
        ngram = int(self.ngram_max)
        return count_store(("ngrams", ngram), lambda: TfidfVectorizer(
            **self._vectorizer_params()).build_analyzer())

    def _fit_tfidf(self, texts: np.ndarray) -> TfidfVectorizer:
        params = self._vectorizer_params()

        def fit() -> tuple[TfidfVectorizer, np.ndarray | None]:
            try:
                if USE_COUNT_CACHE:
                    return _tfidf_from_counts(self._count_store().counts(texts),
                                              self._count_store().term_names, params)
                return TfidfVectorizer(**params).fit(texts), None
            except ValueError as exc:  # empty vocabulary: every training text is empty
                raise PulseError(f"text feature '{self.column_}': no term is left for TF-IDF "
                                 f"({exc}); lower min_df or check that the column holds "
                                 "the messages.") from None

        return memoize(self._tfidf_key(sequence_key(text_hashes(texts))), fit)[0]

    def _fit_hashing(self, texts: np.ndarray):
        from sklearn.pipeline import make_pipeline

        hasher = HashingVectorizer(ngram_range=(1, int(self.ngram_max)), alternate_sign=False,
                                   norm=None, n_features=int(self.hashing_features))
        pipe = make_pipeline(hasher, TfidfTransformer(sublinear_tf=bool(self.sublinear_tf)))
        return pipe.fit(texts)

    def _encoding_key(self) -> tuple:
        """Everything an encoding depends on except the rows (not the sub-model's settings)."""
        skip = {"stack_alpha", "stack_folds", "random_state", "cache_dir"}
        return tuple(k for k in _params_key(self) if not (isinstance(k, tuple) and k[0] in skip))

    def _sparse(self, texts: np.ndarray) -> sp.csr_matrix:
        # memoised: the same fold's texts are vectorized once, whatever the sub-model settings
        key = ("sparse", self._encoding_key(), self.train_key_, sequence_key(text_hashes(texts)))

        def vectorize() -> sp.csr_matrix:
            # The stored counts when this very vectorizer was fitted from them in this process
            # and every text is stored; else (a loaded model, new texts) the vectorizer itself.
            fitted = peek(self._tfidf_key(self.train_key_))
            if fitted is not None and fitted[0] is self.vectorizer_ and fitted[1] is not None:
                counts = self._count_store().counts(texts, add=False)
                if counts is not None:
                    return _tfidf_weights(counts[:, fitted[1]], self.vectorizer_.idf_,
                                          bool(self.sublinear_tf))
            return sp.csr_matrix(self.vectorizer_.transform(texts))

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


def _tfidf_from_counts(counts: sp.csr_matrix, term_names, params: dict[str, Any]
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


def _tfidf_weights(counts: sp.csr_matrix, idf: np.ndarray, sublinear: bool) -> sp.csr_matrix:
    """TF-IDF rows from counts over the vocabulary (what ``TfidfVectorizer.transform`` does)."""
    out = sp.csr_matrix(counts, dtype=np.float64, copy=True)
    out.sort_indices()
    if sublinear:
        np.log(out.data, out.data)
        out.data += 1.0
    out.data *= idf[out.indices]
    return normalize(out, norm="l2", copy=False)


def _params_key(est: BaseEstimator) -> tuple:
    """The estimator's class and settings (a subclass never shares a memoised fit)."""
    cls = type(est)
    return (f"{cls.__module__}.{cls.__qualname__}",
            *sorted((k, repr(v)) for k, v in est.get_params(deep=False).items()))


def _array_key(y: np.ndarray | None) -> str | None:
    if y is None:
        return None
    arr = np.ascontiguousarray(y, dtype=np.float64)
    return f"{arr.shape}:" + hashlib.blake2b(arr.tobytes(), digest_size=16).hexdigest()


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


# --------------------------------------------------------------------------------------------
# Feature-set options and search space
# --------------------------------------------------------------------------------------------


def text_options(column: str, node: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the options of a ``text`` column in a feature set (everything but ``kind``).

    Accepted keys are the :class:`TextFeatures` settings plus ``search_space`` (Optuna ranges
    for those settings, in the ``conf/model`` syntax).

    Returns:
        The options as a plain dict (lists turned into ``+``-joined encoder strings).

    Raises:
        PulseError: naming the column and the unknown or invalid option.
    """
    allowed = set(TextFeatures().get_params())
    opts = {str(k): v for k, v in node.items() if k not in ("kind",)}
    unknown = sorted(set(opts) - allowed - {"search_space"})
    if unknown:
        raise PulseError(f"feature column '{column}' (text): unknown option(s) "
                         f"{', '.join(unknown)}. Use {', '.join(sorted(allowed))} or "
                         "search_space.")
    for key in ("encoders", "stack_on"):
        if key in opts and not isinstance(opts[key], str):
            opts[key] = "+".join(str(v) for v in opts[key])
    settings = {k: v for k, v in opts.items() if k != "search_space"}
    try:
        TextFeatures(**settings).validate()
    except PulseError as exc:
        raise PulseError(f"feature column '{column}': {exc}") from None
    space = opts.get("search_space") or {}
    if not isinstance(space, Mapping):
        raise PulseError(f"feature column '{column}' (text): search_space must map setting "
                         "names to ranges, e.g. {stack_alpha: {type: float, low: 0.3, "
                         "high: 30, log: true}}.")
    bad = sorted(set(space) - allowed)
    if bad:
        raise PulseError(f"feature column '{column}' (text): search_space names unknown "
                         f"setting(s) {', '.join(bad)}; use {', '.join(sorted(allowed))}.")
    if space:
        opts["search_space"] = {str(k): dict(v) for k, v in space.items()}
        text_search_space_of(column, opts["search_space"])  # validates the ranges
    return opts


def text_search_space_of(column: str, space: Mapping[str, Any]) -> tuple:
    """ParamSpecs named ``features__text_<column>__<setting>`` for one column's ranges."""
    from pulse_ml.models.factory import parse_search_space

    prefixed = {f"features__text_{column}__{k}": v for k, v in space.items()}
    return parse_search_space(f"feature column '{column}'", prefixed)


def text_search_space(features) -> tuple:
    """The Optuna search space the text columns of a feature set declare.

    Append it to the model family's: ``spec.search_space + text_search_space(features)``;
    :func:`pulse_ml.models.factory.build_pipeline` routes the ``features__...`` names to the
    pipeline's text steps.

    Args:
        features: A :class:`pulse_ml.sessions.feature_sets.FeatureSet`.

    Returns:
        Tuple of :class:`pulse_ml.models.factory.ParamSpec`.
    """
    out: tuple = ()
    for spec in features.columns:
        if spec.kind == "text" and spec.options.get("search_space"):
            out += text_search_space_of(spec.name, spec.options["search_space"])
    return out


def text_requirements(features) -> list[str]:
    """The pip requirements of the text encoders a feature set can use (pyfunc model).

    Counts the configured ``encoders`` / ``stack_on`` and every categorical choice of the
    column's ``search_space``, so a tuned model never needs a package its environment lacks.

    Args:
        features: A :class:`pulse_ml.sessions.feature_sets.FeatureSet`.

    Returns:
        Sorted requirement strings, e.g. ``["vaderSentiment>=3.3"]``; empty without text.
    """
    needed: set[str] = set()
    for spec in features.columns:
        if spec.kind != "text":
            continue
        settings = {k: v for k, v in spec.options.items() if k != "search_space"}
        enc = TextFeatures(**settings)
        names = [enc.encoders, enc.stack_on]
        for key in ("encoders", "stack_on"):
            names += list((spec.options.get("search_space") or {}).get(key, {}).get(
                "choices", ()))
        used = {n for value in names for n in parse_encoders(value, DIRECT_ENCODERS
                                                              + STACK_INPUTS, "encoders")}
        if "vader" in used:
            needed.add(_PIP["vaderSentiment"])
        if "wordllama" in used:
            needed.add(_PIP["wordllama"])
    return sorted(needed)
