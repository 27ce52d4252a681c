"""VADER lexicon scoring with a per-message length cap (VADER's time is quadratic in words).

VADER scores a message with rules that look back over the words before each word, so its time
grows with the square of the message's length: 1,000 words take ~0.2 s, 4,000 words ~4 s,
16,000 words ~46 s and a 10 MB pasted log would not finish. A chat message longer than
:data:`MAX_MESSAGE_CHARS` characters (~1,000 words) is a pasted file or log rather than a
sentence about the session, so only its first and last :data:`KEEP_CHARS` characters are scored
(the opening and the closing words carry its tone) and a note says how many messages were cut.
The other encoders (TF-IDF, hashing, WordLlama) are linear and see the whole text.
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import pandas as pd

from pulse_ml.models.text_packages import require_package

MAX_MESSAGE_CHARS = 5_000
KEEP_CHARS = MAX_MESSAGE_CHARS // 2
_NOTED: set[int] = set()


@functools.lru_cache(maxsize=1)
def _vader_analyzer():
    module = require_package("vaderSentiment.vaderSentiment", "vader")
    return module.SentimentIntensityAnalyzer()


def vader_compound(texts: list[str]) -> np.ndarray:
    """VADER's compound score of each text, ``(n, 1)`` float32 (one call per distinct text)."""
    analyzer = _vader_analyzer()
    return np.array([[analyzer.polarity_scores(t)["compound"]] for t in texts], dtype=np.float32)


def cap_messages(turns: np.ndarray, limit: int = MAX_MESSAGE_CHARS) -> np.ndarray:
    """Messages longer than ``limit`` characters cut to their first and last ``limit // 2``.

    Prints one note (once per process and number of cut messages) when any message is cut.

    Args:
        turns: Messages (object array of strings).
        limit: Longest message scored whole.

    Returns:
        The messages, the long ones as ``<start> … <end>``.
    """
    if len(turns) == 0:
        return turns
    series = pd.Series(turns, dtype=object)
    long = (series.str.len() > limit).to_numpy()
    n_cut = int(long.sum())
    if n_cut == 0:
        return turns
    keep = limit // 2
    cut = series[long]
    series[long] = cut.str[:keep] + " … " + cut.str[-keep:]
    if n_cut not in _NOTED:
        _NOTED.add(n_cut)
        print(f"note: VADER scored only the first and last {keep:,} characters of {n_cut:,} "
              f"message(s) longer than {limit:,} characters (its time grows with the square "
              "of a message's length; see pulse_ml/models/lexicon.py).", file=sys.stderr)
    return series.to_numpy(dtype=object)
