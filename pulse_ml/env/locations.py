"""Output locations checked before any work: never over, into or around an input or the store.

A verb's output (``out=``, ``output=``, ``table_out=``) that equals, contains or lies inside one
of its inputs (``data.path``, ``input``, ``ratings``) or the tracking store is refused with one
line (exit 2) before anything is read or computed: replacing such a location would delete or
change the user's data (``score engine=spark out=data/`` once removed ``data/demo/``), and
writing inside an input folder changes what the next run reads. So is an output whose kind is
wrong: an existing folder where a file is written, an existing file where a folder is written,
or a file where a parent folder should be.

Only local paths are compared (``s3a://``, ``hdfs://`` and other URIs are compared as strings
by the Spark scorer). Paths are compared after resolving symlinks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pulse_ml.env.faults import shorten
from pulse_ml.errors import PulseError

_GLOB = set("*?[")
PATH_LIMIT = 300  # paths are echoed whole up to this length


def local_path(location: str | os.PathLike[str]) -> Path | None:
    """The local path of ``location`` (``file:`` URIs too), or None for a remote URI."""
    text = os.fspath(location)
    if text.startswith("file:"):
        from urllib.parse import unquote, urlsplit

        return Path(unquote(urlsplit(text).path))
    if "://" in text:
        return None
    return Path(text).expanduser()


def _fixed_part(path: Path) -> Path:
    """A glob pattern's folder before its first wildcard (the pattern itself otherwise)."""
    parts = path.parts
    for i, part in enumerate(parts):
        if _GLOB & set(part):
            return Path(*parts[:i]) if i else Path(".")
    return path


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def relation(out: Path, other: Path) -> str | None:
    """How output ``out`` touches ``other``: ``is``, ``contains``, ``is inside``, or None."""
    out, other = _real(out), _real(other)
    if out == other:
        return "is"
    if other.is_relative_to(out):
        return "contains"
    if out.is_relative_to(other):
        return "is inside"
    return None


def _kind_problem(setting: str, location: str, path: Path, kind: str) -> str | None:
    if kind == "file" and path.is_dir():
        return (f"{setting}={location} is an existing folder, and a file is written there. "
                f"Give a file name, e.g. {setting}={shorten(path / 'output.parquet', PATH_LIMIT)}.")
    if kind == "folder" and os.path.lexists(path) and not path.is_dir():
        return (f"{setting}={location} is an existing file, and a folder is written there. "
                "Give a folder (existing or new), or remove the file.")
    parent = path.parent
    while parent != parent.parent and not os.path.lexists(parent):
        parent = parent.parent
    if os.path.lexists(parent) and not parent.is_dir():
        return (f"{setting}={location}: {parent} is a file, so no folder can be made there. "
                "Choose another output location.")
    return None


def check_outputs(verb: str, outputs: Sequence[tuple[str, object, str]],
                  inputs: Sequence[tuple[str, object]],
                  store: Sequence[tuple[str, Path]]) -> None:
    """Refuse outputs that touch an input or the store, or have the wrong kind (before work).

    Args:
        verb: The command, for the message (``infer``).
        outputs: ``(setting, location, kind)`` with kind ``file`` or ``folder``; a location of
            None is skipped.
        inputs: ``(setting, location)`` of what the command reads (a glob's fixed folder is
            used); None is skipped.
        store: ``(what, path)`` of the tracking store's local files and folders, kept away
            from the outputs too (:func:`pulse_ml.registry.store.store_locations`; ``[]``:
            none).

    Raises:
        PulseError: one line naming the setting, the location it touches and what to do.
    """
    others: list[tuple[str, Path]] = []
    for setting, location in inputs:
        path = None if location is None else local_path(str(location))
        if path is not None:
            others.append((f"the input {setting}={shorten(location, PATH_LIMIT)}",
                           _fixed_part(path)))
    others += store
    for setting, location, kind in outputs:
        path = None if location is None else local_path(str(location))
        if path is None:
            continue
        shown = shorten(location, PATH_LIMIT)
        for what, other in others:
            rel = relation(path, other)
            if rel is None:
                continue
            where = "" if what.startswith("the input") and rel == "is" else f" ({other})"
            raise PulseError(
                f"pulse-ml {verb}: {setting}={shown} {rel} {what}{where}; pulse-ml never "
                "writes over, into or around its inputs or the store. Nothing was done: "
                f"choose an output location of its own, e.g. {setting}=results/{verb}"
                f"{'/' + path.name if kind == 'file' else ''}.")
        problem = _kind_problem(setting, shown, path, kind)
        if problem is not None:
            raise PulseError(f"pulse-ml {verb}: {problem}")
