"""Plain-text and Markdown tables for the terminal and for result files."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

_NO_BREAK = "\u00a0"  # a space textwrap does not break at (wrap_lines prints it as a space)
ESTIMATOR_LABELS = {"naive": "naive", "augmented": "PPI++"}  # the files' values -> the words


def estimator_label(name: str) -> str:
    """How people read an estimator of the files (``augmented`` -> ``PPI++``)."""
    return ESTIMATOR_LABELS.get(str(name), str(name))


def level_pct(alpha: float) -> str:
    """The interval level of ``alpha`` as people read it: 0.05 -> "95", 0.1 -> "90"."""
    return f"{100 * (1 - float(alpha)):.4g}"


def _fmt(value, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.{digits}f}"
    return str(value)


def text_table(frame: pd.DataFrame, digits: int = 3, columns: Sequence[str] | None = None,
               digits_of: Mapping[str, int] | None = None) -> str:
    """Render a DataFrame as an aligned plain-text table (numbers right-aligned).

    Args:
        frame: The table.
        digits: Decimals of float cells.
        columns: The columns shown, in order (default: all).
        digits_of: Decimals of particular columns (e.g. ``{"time_s": 1}``).
    """
    cols = list(columns or frame.columns)
    places = [(digits_of or {}).get(c, digits) for c in cols]
    cells = [[_fmt(v.item() if hasattr(v, "item") else v, d)
              for v, d in zip(row, places, strict=True)]
             for row in frame[cols].itertuples(index=False)]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in cols]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cols), sep] + [line(r) for r in cells])


def fitted_table(frame: pd.DataFrame, optional: Sequence[str], width: int = 100,
                 **options) -> tuple[str, list[str]]:
    """:func:`text_table` of ``frame`` that fits ``width`` columns, leaving out what it must.

    Columns of ``optional`` are left out, in that order, only while the table is wider than
    ``width``; returns the table and the columns left out (for a note naming where they are).
    """
    shown = list(frame.columns)
    dropped: list[str] = []
    table = text_table(frame, columns=shown, **options)
    for col in optional:
        if max(map(len, table.splitlines()), default=0) <= width:
            break
        if col in shown:
            shown.remove(col)
            dropped.append(col)
            table = text_table(frame, columns=shown, **options)
    return table, dropped


def markdown_table(frame: pd.DataFrame, digits: int = 3,
                   digits_of: Mapping[str, int] | None = None) -> str:
    """Render a DataFrame as a GitHub Markdown table (``digits_of`` as :func:`text_table`'s)."""
    cols = list(frame.columns)
    places = [(digits_of or {}).get(c, digits) for c in cols]
    rows = [[_fmt(v.item() if hasattr(v, "item") else v, d)
             for v, d in zip(row, places, strict=True)]
            for row in frame.itertuples(index=False)]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def unbroken(text: str) -> str:
    """``text`` (a command) kept on one line by :func:`wrap_lines`, which prints its spaces.

    Only for text that goes through :func:`wrap_lines` or :func:`say`.
    """
    return text.replace(" ", _NO_BREAK)


def address_lines(label: str, address: str, width: int = 100) -> str:
    """``label address`` on one line when it fits ``width``.

    Else the address stands alone on the next line (unindented, unbroken: a URL or a path
    copies whole).
    """
    if len(label) + 1 + len(address) <= width:
        return f"{label} {address}"
    return f"{label}\n{address}"


def wrap_lines(text: str, width: int = 100, indent: str = "  ") -> str:
    """Wrap every line longer than ``width`` at spaces, continuing with ``indent``.

    Lines that are part of an aligned table (they contain a run of two spaces) are kept, and so
    are words longer than the line (a URL or path) and :func:`unbroken` commands.
    """
    import textwrap

    out = []
    for line in text.split("\n"):
        if len(line) <= width or "  " in line.strip():
            out.append(line)
        else:
            out.append(textwrap.fill(line, width, subsequent_indent=indent,
                                     break_on_hyphens=False, break_long_words=False))
    return "\n".join(out).replace(_NO_BREAK, " ")


def say(*parts: object, **kwargs) -> None:
    """``print`` whose long lines wrap at 100 columns (aligned table lines are kept as they are)."""
    print(wrap_lines(" ".join(str(p) for p in parts)), **kwargs)
