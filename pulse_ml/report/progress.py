"""Every progress bar of pulse_ml: one width rule (``tqdm``).

On a terminal a bar follows the terminal's width (also when it is resized); written to a file or
a pipe it is at most :data:`MAX_COLUMNS` wide (``COLUMNS`` narrower when set), postfix included,
so a log never holds a bar wider than the printed tables. In a notebook tqdm's widget fits the
cell by itself.
"""

from __future__ import annotations

import os
import sys

MAX_COLUMNS = 100  # the width of every printed table and wrapped line (report.tables.say)


def bar_width(stream) -> dict:
    """The width arguments of a tqdm bar written to ``stream``.

    Args:
        stream: Where the bar is written (a file object; default of tqdm: ``sys.stderr``).

    Returns:
        ``{"dynamic_ncols": True}`` on a terminal (its width, read at every refresh), else
        ``{"ncols": n}`` with ``n = min(COLUMNS, 100)`` (100 when ``COLUMNS`` is unset or not a
        positive number).
    """
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or not a real file
        tty = False
    if tty:
        return {"dynamic_ncols": True}
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    return {"ncols": min(columns, MAX_COLUMNS) if columns > 0 else MAX_COLUMNS}


def progress_bar(*args, **kwargs):
    """A ``tqdm`` bar with :func:`bar_width`'s width.

    Arguments as ``tqdm``'s (``file`` default ``sys.stderr``). In a notebook, ``tqdm.auto``'s
    widget as it is.
    """
    from tqdm import autonotebook
    from tqdm.auto import tqdm
    from tqdm.std import tqdm as text_bar

    if autonotebook.tqdm is not text_bar:  # a notebook widget: its width is the cell's
        return tqdm(*args, **kwargs)
    kwargs.setdefault("file", sys.stderr)
    for key in ("ncols", "dynamic_ncols"):
        kwargs.pop(key, None)
    return tqdm(*args, **kwargs, **bar_width(kwargs["file"]))
