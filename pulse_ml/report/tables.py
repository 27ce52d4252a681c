"""Plain-text and Markdown tables for the terminal and for result files."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd


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


def text_table(frame: pd.DataFrame, digits: int = 3, columns: Sequence[str] | None = None) -> str:
    """Render a DataFrame as an aligned plain-text table (numbers right-aligned)."""
    cols = list(columns or frame.columns)
    cells = [[_fmt(v.item() if hasattr(v, "item") else v, digits) for v in row]
             for row in frame[cols].itertuples(index=False)]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in cols]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cols), sep] + [line(r) for r in cells])


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """Render a DataFrame as a GitHub Markdown table."""
    cols = list(frame.columns)
    rows = [[_fmt(v.item() if hasattr(v, "item") else v, digits) for v in row]
            for row in frame.itertuples(index=False)]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def wrap_lines(text: str, width: int = 100, indent: str = "  ") -> str:
    """Wrap every line longer than ``width`` at spaces, continuing with ``indent``.

    Lines that are part of an aligned table (they contain a run of two spaces) are kept.
    """
    import textwrap

    out = []
    for line in text.split("\n"):
        if len(line) <= width or "  " in line.strip():
            out.append(line)
        else:
            out.append(textwrap.fill(line, width, subsequent_indent=indent,
                                     break_on_hyphens=False, break_long_words=False))
    return "\n".join(out)


def say(*parts: object, **kwargs) -> None:
    """``print`` whose long lines wrap at 100 columns (aligned table lines are kept as they are)."""
    print(wrap_lines(" ".join(str(p) for p in parts)), **kwargs)
