"""Label-free text encoders: VADER sentiment and WordLlama embeddings, cached by content hash.

Both use no rating and are deterministic, so it is honest to compute them on every row and
their vectors are cached by a hash of the text (computed once per table, not once per trial;
see :mod:`pulse_ml.models.text_cache`). A text is a session's messages, one per line
(``turn_sep``); both encoders also score the messages one by one.

Packages: ``vaderSentiment`` (its lexicon ships inside the package) is in the base install;
``wordllama`` (its 256-dimensional ``l2_supercat`` weights and tokenizer ship inside the package
and are read from the installed package folder; nothing is downloaded) comes with the text
extra, ``pip install 'pulse-ml[text]'`` (:mod:`pulse_ml.models.text_packages`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from pulse_ml.errors import PulseError
from pulse_ml.models.lexicon import cap_messages, vader_compound
from pulse_ml.models.text_cache import store_for
from pulse_ml.models.text_packages import PIP, require_package
from pulse_ml.sessions.text_options import WORDLLAMA_DIMS

__all__ = ["VADER_COLUMNS", "load_wordllama", "vader_features",
           "wordllama_features"]

VADER_COLUMNS = ("compound", "turn_mean", "turn_min", "turn_max", "turn_last",
                 "share_negative", "share_positive")
_VADER_ALPHA = 15.0  # VADER's normalization constant (vaderSentiment.normalize)


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
            f"Reinstall it (pip install --force-reinstall '{PIP['wordllama']}') or choose "
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
