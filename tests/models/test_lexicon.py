"""VADER's per-message length cap: a huge message is scored in bounded time, with a note."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from pulse_ml.models.lexicon import MAX_MESSAGE_CHARS, cap_messages

pytest.importorskip("vaderSentiment")


def test_cap_keeps_short_messages_and_cuts_long_ones(capsys):
    short = "thanks, that works"
    long = "bad " * 3000 + "thank you, great!"
    out = cap_messages(np.array([short, long], dtype=object))
    assert out[0] == short
    assert len(out[1]) <= MAX_MESSAGE_CHARS + 3 and out[1].endswith("thank you, great!")
    assert out[1].startswith("bad bad")
    assert "VADER scored only the first and last 2,500 characters of 1 message" in \
        capsys.readouterr().err


@pytest.mark.slow
def test_a_ten_megabyte_message_is_scored_in_bounded_time():
    """Before the cap: 16,000 words took ~46 s, 2 million words would never finish."""
    code = ("import time; from pulse_ml.models.text_encoders import vader_features\n"
            "t = 'the agent did not fix it but thanks great job bad error ' * 180_000\n"
            "s = time.perf_counter(); f = vader_features(['hi\\n' + t + '\\nthanks!'])\n"
            "print(round(time.perf_counter() - s, 2), f.shape)")
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert time.perf_counter() - start < 60 and "(1, 7)" in res.stdout
    assert "note: VADER scored only" in res.stderr
