"""Progress bars: the terminal's width on a terminal (a real pty), at most 100 columns elsewhere."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import termios

import pytest

from pulse_ml.report.progress import MAX_COLUMNS, bar_width, progress_bar

LONG = "tuning a_family_with_a_rather_long_name_and_features"


def _widths(text: str) -> list[int]:
    """Width of every frame a bar drew (frames are separated by \\r or \\n; escapes dropped)."""
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    return [len(part.rstrip()) for part in re.split(r"[\r\n]", plain) if part.strip()]


def _draw(stream, steps: int = 6, resize=None) -> None:
    bar = progress_bar(total=steps, desc=LONG, unit="trial", file=stream, mininterval=0,
                       miniters=1, leave=True)
    for i in range(steps):
        if resize is not None and i == steps // 2:
            resize()
        bar.update(1)
        bar.set_postfix({"best cv_mse": f"{1.5 + i / 1000:.4f}",
                         "a long postfix": "x" * 30})
    bar.close()


@pytest.mark.parametrize(("columns", "limit"), [(None, 100), ("100", 100), ("300", 100),
                                                ("60", 60), ("junk", 100)])
def test_off_a_terminal_a_bar_is_at_most_100_columns(monkeypatch, columns, limit):
    """Into a file or pipe (the old bar grew to 148 columns once its postfix appeared)."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    _draw(out)
    widths = _widths(out.getvalue())
    assert len(widths) >= 6 and max(widths) <= limit
    assert max(widths) == limit  # the long postfix fills the line, and is cut there
    if limit == MAX_COLUMNS:
        # the postfix is there, cut at the edge (a fast bar's 5-digit rate takes 3 columns more)
        assert "trial/s, b" in out.getvalue()


def _read_all(fd: int) -> str:
    chunks = []
    os.set_blocking(fd, False)
    while True:
        try:
            data = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def _set_size(fd: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))


def test_on_a_terminal_a_bar_follows_its_width_also_when_resized(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # the terminal's own size wins on a terminal
    master, slave = pty.openpty()
    try:
        _set_size(slave, 72)
        stream = os.fdopen(slave, "w", encoding="utf-8", closefd=False)
        assert bar_width(stream) == {"dynamic_ncols": True}
        first = io.StringIO()

        def resize():
            stream.flush()
            first.write(_read_all(master))
            _set_size(slave, 50)

        _draw(stream, steps=8, resize=resize)
        stream.flush()
        later = _read_all(master)
    finally:
        os.close(slave)
        os.close(master)
    before, after = _widths(first.getvalue()), _widths(later)
    assert before and after
    assert max(before) <= 72 and max(before) >= 60  # the terminal's width, not 100
    assert max(after) <= 50  # resized: the next frames are narrower


def test_a_closed_or_odd_stream_counts_as_no_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    closed = io.StringIO()
    closed.close()
    assert bar_width(closed) == {"ncols": MAX_COLUMNS}
    assert bar_width(object()) == {"ncols": MAX_COLUMNS}
