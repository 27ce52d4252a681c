"""Atomic outputs: every file a verb writes appears complete or not at all.

Files are written into a hidden staging folder in the target folder (same file system, so the
final ``os.replace`` is atomic) and put in place when complete (:mod:`pulse_ml.env.staging`). On
any failure — a full disk, a bad row in a late chunk, Ctrl-C or SIGTERM — the staged files are
removed, folders this call created are removed again, and the files already at the target
(earlier results) stay as they were. Inside a command (:func:`pulse_ml.env.staging.command`, used
by the CLI) every set is put in place only when the whole command has succeeded.

* :func:`atomic_file` — one file (``extract``'s session table, ``judge``'s judgments).
* :func:`staged_outputs` — a set of files that belong together (``infer``'s effects, forest
  plot and feature tables), put in place together (a failure midway restores the old set).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from pulse_ml.env.staging import as_user_error, staged
from pulse_ml.errors import PulseError


def _reraise(exc: OSError, target: Path) -> NoReturn:
    """Raise ``exc`` as the one-line user error it stands for (disk full, no permission)."""
    error = as_user_error(exc, target)
    if error is exc:
        raise exc
    raise error from exc

@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` when the block succeeds.

    The temporary file has the same name inside a hidden staging folder (writers that pick
    the format by extension, such as matplotlib, still work). Concurrent writers of ``path``
    are serialized (see :mod:`pulse_ml.env.staging`).

    Args:
        path: The final file.

    Yields:
        Where to write the content.

    Raises:
        PulseError: ``path`` is a folder, the disk is full or the folder is not writable
            (nothing is left behind).
    """
    path = Path(path)
    if path.is_dir():
        raise PulseError(f"cannot write {path}: it is an existing folder and a file is "
                         "expected there. Give a file name (or remove the folder).")
    try:
        with staged(path.parent, str(path), lock_target=path, only=path.name) as stage:
            yield stage / path.name
    except OSError as exc:
        _reraise(exc, path)

@contextmanager
def staged_outputs(directory: str | os.PathLike[str],
                   discard: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield a staging folder; its files move into ``directory`` when the block succeeds.

    Args:
        directory: The output folder (created when missing; removed again on failure if this
            call created it).
        discard: Names of files of an earlier set in ``directory`` that this set has not
            (removed when the new files are put in place, restored if that fails).

    Yields:
        A hidden folder inside ``directory``: write every output file there under its final
        name.

    Raises:
        PulseError: ``directory`` is a file, the disk is full or the folder is not writable
            (nothing is left behind).
    """
    directory = Path(directory)
    if os.path.lexists(directory) and not directory.is_dir():
        raise PulseError(f"cannot write into {directory}: it is an existing file and a folder "
                         "is expected there. Choose a folder (or remove the file).")
    try:
        with staged(directory, str(directory), discard=tuple(discard)) as stage:
            yield stage
    except OSError as exc:
        _reraise(exc, directory)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a text file atomically (UTF-8); returns its path."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
