"""Table writers: a session table in the format its path's suffix names, written atomically."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pulse_ml.errors import PulseError

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl",
           ".ndjson": "jsonl"}


def table_format(out: Path, setting: str) -> str:
    """The format ``out`` is written in, by its suffix (``parquet``, ``csv``, ``jsonl``).

    Args:
        out: The target path.
        setting: How the user set it, for the message (e.g. ``pulse-ml judge: table_out``).

    Raises:
        PulseError: any other suffix (or none): the file would not be readable by its name.
    """
    kind = FORMATS.get(out.suffix.lower())
    if kind is None:
        raise PulseError(f"{setting}={out} must end in .parquet, .csv or .jsonl (the table is "
                         "written in that format and read back by its extension), e.g. "
                         f"{setting.split()[-1]}=data/sessions_judged.parquet.")
    return kind


def write_table(frame: pd.DataFrame, out: Path, setting: str) -> None:
    """Write ``frame`` in the format of ``out``'s suffix (Parquet, CSV or JSON Lines).

    Atomic: written under a temporary name and renamed when complete, so a full disk or an
    interruption leaves no truncated file and an earlier table at ``out`` stays as it was.

    Raises:
        PulseError: unsupported suffix (see :func:`table_format`), full disk, no permission.
    """
    from pulse_ml.env.atomic import atomic_file

    kind = table_format(out, setting)
    with atomic_file(out) as tmp:
        if kind == "csv":
            frame.to_csv(tmp, index=False)
        elif kind == "jsonl":
            # times as ISO 8601 (the contract's started_at), not epoch milliseconds
            frame.to_json(tmp, orient="records", lines=True, force_ascii=False,
                          date_format="iso", date_unit="s")
        else:
            frame.to_parquet(tmp, index=False)
