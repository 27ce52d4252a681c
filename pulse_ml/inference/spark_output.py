"""Where ``score engine=spark`` writes: a folder it replaces only when pulse-ml wrote it.

Spark's ``mode("overwrite")`` deletes whatever is at ``out`` first — once the user's
``data/demo/`` (``out=`` named the folder holding the input), once an unrelated file beside
earlier scores. Here:

* ``out`` must not equal, contain or lie inside the input (also for ``s3a://``/``hdfs://``
  locations, compared as strings), checked before Spark starts;
* an existing ``out`` is replaced only when it holds pulse-ml's marker file
  (:data:`pulse_ml.env.staging.MARKER`, written beside the Parquet parts; Spark ignores files whose
  name starts with ``_``), never otherwise;
* a local ``out`` is written into a staging folder and put in place when complete (with the
  command's other outputs; the previous folder is restored if that fails), so a failed run
  leaves the earlier scores as they were. A remote ``out`` (no rename across object stores) is
  written in place, after the same marker check.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pulse_ml.env.locations import local_path, relation
from pulse_ml.env.staging import MARKER
from pulse_ml.errors import PulseError


def _norm(location: str) -> str:
    return location.rstrip("/")


def check_out(path: str, out: str) -> None:
    """Refuse an ``out`` that touches the input, or an existing local one pulse-ml did not write.

    Raises:
        PulseError: one line, before Spark starts.
    """
    src, dst = local_path(path), local_path(out)
    if src is not None and dst is not None:
        rel = relation(dst, src)
    elif _norm(out) == _norm(path):
        rel = "is"
    elif _norm(path).startswith(_norm(out) + "/"):
        rel = "contains"
    elif _norm(out).startswith(_norm(path) + "/"):
        rel = "is inside"
    else:
        rel = None
    if rel is not None:
        raise PulseError(f"out={out} {rel} the input data.path={path}: engine=spark replaces "
                         "its output folder, so it never writes over, into or around the input. "
                         "Nothing was done; choose another out=, e.g. out=results/scores.")
    if dst is not None:
        _check_existing(out, dst.is_dir(), os.path.lexists(dst), (dst / MARKER).is_file())


def _check_existing(out: str, is_dir: bool, exists: bool, marked: bool) -> None:
    if exists and not is_dir:
        raise PulseError(f"out={out} is an existing file, and engine=spark writes a folder of "
                         "Parquet parts there. Nothing was done; choose a new folder name (or "
                         "remove the file).")
    if exists and not marked:
        raise PulseError(f"out={out} is an existing folder that pulse-ml did not write (no "
                         f"{MARKER} in it), so it is not replaced. Nothing was done; choose a "
                         "new folder name, or remove the folder yourself.")


def _marker(about: dict) -> str:
    return json.dumps({"written_by": "pulse-ml score engine=spark",
                       "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **about},
                      indent=2) + "\n"


@contextmanager
def spark_output(spark, out: str, about: dict) -> Iterator[tuple[str, str]]:
    """Yield ``(location, save mode)`` to write the scores to; marked and put in place after.

    Args:
        spark: The SparkSession (for a remote location's file system).
        out: The user's ``out``.
        about: What the marker records (model, input).

    Raises:
        PulseError: ``out`` exists and is not a folder pulse-ml wrote.
    """
    dst = local_path(out)
    if dst is not None:
        from pulse_ml.env.staging import staged

        _check_existing(out, dst.is_dir(), os.path.lexists(dst), (dst / MARKER).is_file())
        with staged(dst.parent, str(dst), lock_target=dst, only=dst.name) as stage:
            target = stage / dst.name
            yield str(target), "errorifexists"
            (target / MARKER).write_text(_marker(about), encoding="utf-8")
        return
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - Hadoop's FileSystem has no Python API
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001
    folder = jvm.org.apache.hadoop.fs.Path(out)
    fs = folder.getFileSystem(conf)
    marker = jvm.org.apache.hadoop.fs.Path(folder, MARKER)
    exists = bool(fs.exists(folder))
    _check_existing(out, exists and bool(fs.getFileStatus(folder).isDirectory()), exists,
                    exists and bool(fs.exists(marker)))
    yield out, "overwrite" if exists else "errorifexists"
    stream = fs.create(marker, True)
    try:
        stream.write(bytearray(_marker(about).encode("utf-8")))
    finally:
        stream.close()
