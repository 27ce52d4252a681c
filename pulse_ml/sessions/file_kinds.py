"""What an input path is when it is not the table file it should be, and header checks.

A named pipe (FIFO) or a folder of Parquet parts (a dataset written by Spark or
``to_parquet(partition_cols=...)``) is not "no such file": the message says what the path is and
how to get one file. A CSV whose header names a column twice is refused (pandas would silently
rename the copy ``x.1``). A JSON Lines file that cannot be read names its first bad line.
"""

from __future__ import annotations

import json
import stat
from collections import Counter
from pathlib import Path

from pulse_ml.errors import DataError

_SHOW = 5


def not_a_file(path: Path, kind: str) -> str:
    """The problem sentence for a table path that is not a regular file."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return ("no such file. Check the path, or create demo data with `pulse-ml simulate`.")
    if stat.S_ISDIR(mode):
        parts = sum(1 for _ in zip(range(1000), path.rglob("*.parquet"), strict=False))
        if parts:
            return (f"is a folder of {parts}{'+' if parts == 1000 else ''} Parquet part file(s) "
                    "(a dataset, e.g. written by Spark), not one table file. Give one file, "
                    f"e.g. combine the parts with pandas: pd.read_parquet('{path}')"
                    f".to_parquet('{path.with_suffix('')}_combined.parquet').")
        return f"is a folder, not a {kind} file. Give the path of the table file itself."
    if stat.S_ISFIFO(mode):
        return ("is a named pipe (FIFO), not a regular file: pulse-ml reads the table more than "
                "once (checks, fingerprint, features). Write it to a file first and give that.")
    if stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a socket or device, not a regular file. Give the path of a table file."
    return "is not a regular file. Give the path of a table file."


def require_unique_header(path: Path) -> None:
    """Refuse a CSV file whose header names a column more than once.

    Raises:
        DataError: naming the repeated columns and their positions.
    """
    import csv

    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        first = next(csv.reader(fh), [])
    twice = [c for c, n in Counter(first).items() if n > 1]
    if not twice:
        return
    where: dict[str, list[str]] = {}
    for i, name in enumerate(first):
        if name in twice:
            where.setdefault(name, []).append(str(i + 1))
    shown = "; ".join(f"'{c}' (columns {', '.join(where[c])})" for c in twice[:_SHOW])
    more = f" and {len(twice) - _SHOW} more" if len(twice) > _SHOW else ""
    raise DataError(str(path), [
        f"the header names {len(twice)} column(s) more than once: {shown}{more}. Each column "
        "needs its own name (pandas would read the copy as '<name>.1'): rename or drop the "
        "copies."])


def first_bad_json_line(path: Path) -> tuple[int, str] | None:
    """The first non-empty line of ``path`` that is not a JSON object, else None.

    Returns:
        ``(line number, reason)``; one pass that stops at the first bad line.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    return number, str(exc).splitlines()[0][:120] if str(exc) else "invalid"
                if not isinstance(value, dict):
                    return number, f"a {type(value).__name__}, not an object"
    except OSError:
        return None
    return None
