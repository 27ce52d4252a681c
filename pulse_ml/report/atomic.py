"""Atomic outputs: every file a verb writes appears complete or not at all.

Files are written under temporary names in the target folder (same file system, so the final
``os.replace`` is atomic) and renamed when complete. On any failure — a full disk, a bad row in a
late chunk, Ctrl-C or SIGTERM — the temporary files are removed, folders this call created are
removed again, and the files already at the target (earlier results) stay as they were.

* :func:`atomic_file` — one file (``extract``'s session table, ``judge``'s judgments).
* :func:`staged_outputs` — a set of files that belong together (``infer``'s effects, forest
  plot and feature tables): written into a hidden staging folder, then renamed into place
  together, with SIGINT/SIGTERM held for those few renames.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from pulse_ml.errors import PulseError
from pulse_ml.faults import access_reason, disk_reason


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the ones created (deepest last)."""
    missing = []
    current = directory
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    directory.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _remove_created(created: list[Path]) -> None:
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            break  # not empty (someone else wrote there) or gone: leave it


def _as_user_error(exc: OSError, target: Path) -> BaseException:
    """A PulseError naming ``target`` for disk and permission faults, else ``exc`` itself."""
    reason = disk_reason(exc)
    if reason is not None:
        return PulseError(f"cannot write {target}: {reason}. Nothing was written (earlier files "
                          "there are unchanged); free some space or write elsewhere and run "
                          "again.")
    reason = access_reason(exc)
    if reason is not None:
        return PulseError(f"cannot write {target}: {reason}. Nothing was written; make the "
                          "folder writable or choose another output path.")
    return exc


def _reraise(exc: OSError, target: Path) -> NoReturn:
    """Raise ``exc`` as the one-line user error it stands for (disk full, no permission)."""
    error = _as_user_error(exc, target)
    if error is exc:
        raise exc
    raise error from exc


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` when the block succeeds.

    The temporary name keeps the suffix (writers that pick the format by extension, such as
    matplotlib, still work).

    Args:
        path: The final file.

    Yields:
        Where to write the content.

    Raises:
        PulseError: the disk is full or the folder is not writable (nothing is left behind).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.partial-{os.getpid()}{path.suffix}")
    created: list[Path] = []
    done = False
    try:
        created = _make_dirs(path.parent)
        yield tmp
        if tmp.exists():
            os.replace(tmp, path)
        done = True
    except OSError as exc:
        _reraise(exc, path)
    finally:
        if not done:
            tmp.unlink(missing_ok=True)
            _remove_created(created)


@contextmanager
def staged_outputs(directory: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a staging folder; its files move into ``directory`` when the block succeeds.

    Args:
        directory: The output folder (created when missing; removed again on failure if this
            call created it).

    Yields:
        A hidden folder inside ``directory``: write every output file there under its final
        name.

    Raises:
        PulseError: the disk is full or the folder is not writable (nothing is left behind).
    """
    from pulse_ml import signals

    directory = Path(directory)
    created: list[Path] = []
    stage: Path | None = None
    done = False
    try:
        created = _make_dirs(directory)
        with signals.deferred():  # a signal between mkdtemp and the assignment would leak it
            stage = Path(tempfile.mkdtemp(prefix=".partial-", dir=directory))
        yield stage
        with signals.deferred():
            for item in sorted(stage.iterdir()):
                os.replace(item, directory / item.name)
        done = True
    except OSError as exc:
        _reraise(exc, directory)
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if not done:
            _remove_created(created)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a text file atomically (UTF-8); returns its path."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
