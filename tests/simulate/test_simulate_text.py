"""The simulator's templated user text: seeded, one line per message, signal only when asked."""

from __future__ import annotations

import numpy as np

from pulse_ml.simulate.text import NEGATIVE, POSITIVE, user_texts


def _mood(texts: np.ndarray) -> np.ndarray:
    """(positive - negative) messages per session."""
    pos, neg = set(POSITIVE), set(NEGATIVE)
    return np.array([sum((m in pos) - (m in neg) for m in t.split("\n")) for t in texts])


def _draw(signal: float, seed: int = 0, n: int = 4000):
    rng = np.random.default_rng(seed)
    msgs = 1 + rng.poisson(8, n)
    sat = rng.normal(size=n)
    texts = user_texts(np.random.default_rng(seed + 1), msgs, rng.integers(0, 8, n), sat, signal)
    return msgs, sat, texts


def test_seeded_and_one_line_per_message():
    msgs, _, texts = _draw(0.5)
    assert [t.count("\n") + 1 for t in texts] == msgs.tolist()
    assert (texts == _draw(0.5)[2]).all()
    assert not (texts == _draw(0.5, seed=7)[2]).all()


def test_signal_follows_satisfaction_and_zero_signal_is_noise():
    # n = 4000 sessions: under no relation the correlation has s.e. 1/sqrt(4000) = 0.016, so
    # |r| < 0.06 fails with prob. < 2e-4; with signal 0.5 the expected r is about 0.3.
    _, sat, texts = _draw(0.0)
    assert abs(np.corrcoef(_mood(texts), sat)[0, 1]) < 0.06
    _, sat, texts = _draw(0.5)
    assert np.corrcoef(_mood(texts), sat)[0, 1] > 0.2
