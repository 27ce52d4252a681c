"""SIGTERM while a session table is being written: the earlier table stays, nothing half-written.

Deterministic: the signal is sent by the process to itself from inside the writer (a cell whose
``str`` sends it while ``to_csv`` formats the rows), with the CLI's own handler installed, so the
moment is exact rather than raced against a subprocess (``extract`` writes through this writer).
"""

import os
import signal

import pandas as pd
import pytest

from pulse_ml.env import signals
from pulse_ml.sessions.writers import write_table


class _SigtermOnFormat:
    def __str__(self) -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        return "x"


def test_sigterm_while_writing_keeps_the_earlier_table(tmp_path):
    name = "sessions.csv"  # every format goes through the same atomic_file
    out = tmp_path / name
    out.write_text("session_id,rating\nold,3\n")
    before = out.read_bytes()
    frame = pd.DataFrame({"session_id": [f"s{i}" for i in range(1000)], "note": "fine"},
                         dtype=object)
    frame.loc[500, "note"] = _SigtermOnFormat()
    old = signal.getsignal(signal.SIGTERM)
    try:
        signals.install()
        with pytest.raises(signals.Terminated):
            write_table(frame, out, "auto")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left beside it
