"""All-or-nothing outputs of a command: stage every output, put them all in place at the end.

A verb's outputs (``infer``'s eight files, ``judge``'s judgments and ``table_out``, a Spark
output folder) are written into hidden staging folders beside their targets
(:func:`pulse_ml.env.atomic.staged_outputs` / :func:`~pulse_ml.env.atomic.atomic_file`).
Inside :func:`command` (the CLI wraps ``infer``, ``audit``, ``monitor``, ``compare``, ``score``,
``extract``, ``judge``, ``request``) nothing is put in place until the verb has returned — its
MLflow run included — so a failure anywhere leaves every earlier output as it was. Outside a
command (library calls), each set is put in place when its block ends.

Putting in place (:func:`_put_in_place`) keeps every replaced file in a hidden backup folder
until all new ones are in place; a failure midway (a rename refused, or the test hook
``PULSE_TEST_FAIL_COMMIT_AFTER=n``: fail after n files, used only by the tests) restores the
previous files, so the outputs are the earlier set or the new set, never a mix. SIGINT/SIGTERM
wait for those renames.

Concurrent writers of one output (two ``score out=x.parquet`` at once) are serialized: each
target is locked (``flock`` on a lock file in a per-user temporary folder, keyed by the target's
real path, so nothing is added to the user's folders) from the moment its staging starts until
the command that staged it has put it in place; the other command waits (at most
``PULSE_OUTPUT_LOCK_TIMEOUT`` seconds, default 600) and then writes its own complete set.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pulse_ml.errors import PulseError

FAIL_HOOK = "PULSE_TEST_FAIL_COMMIT_AFTER"  # tests only: fail after n files were put in place
LOCK_TIMEOUT_ENV = "PULSE_OUTPUT_LOCK_TIMEOUT"
STAGE_PREFIX = ".partial-"
BACKUP_PREFIX = ".previous-"
MARKER = "_pulse_ml_output.json"  # inside an output folder pulse-ml wrote (it may replace it)


@dataclass
class StagedSet:
    """Files staged for one folder: ``stage/<name>`` replaces ``directory/<name>``."""

    directory: Path
    stage: Path
    created: list[Path]  # folders made for it, removed again when nothing is put in place
    discard: tuple[str, ...] = ()  # stale files of an earlier set, removed with the swap
    only: str | None = None  # atomic_file: the one name this set may put in place

    def names(self) -> list[str]:
        """The staged names (sorted)."""
        names = sorted(os.listdir(self.stage)) if self.stage.is_dir() else []
        return [n for n in names if self.only is None or n == self.only]


@dataclass
class Transaction:
    """The staged sets and held locks of one command."""

    sets: list[StagedSet] = field(default_factory=list)
    locks: dict[str, int] = field(default_factory=dict)  # lock key -> open fd

    def pending(self, path: Path) -> Path | None:
        """The staged file that will replace ``path``, if this transaction staged one."""
        target = Path(path).absolute()
        for s in reversed(self.sets):
            if s.directory.absolute() == target.parent and target.name in s.names():
                return s.stage / target.name
        return None


_CURRENT: contextvars.ContextVar[Transaction | None] = contextvars.ContextVar(
    "pulse_ml_outputs", default=None)


def current() -> Transaction | None:
    """The transaction of the running command, or None outside :func:`command`."""
    return _CURRENT.get()


def pending_path(path: str | os.PathLike[str]) -> Path:
    """Where the content of ``path`` is now: its staged copy inside a command, else ``path``.

    For the code that reads an output back before the command ends (MLflow artifacts).
    """
    tx = current()
    staged = tx.pending(Path(path)) if tx is not None else None
    return staged if staged is not None else Path(path)


@contextmanager
def command() -> Iterator[Transaction]:
    """Run a verb with all-or-nothing outputs: staged sets are put in place when it returns.

    On any exception (or Ctrl-C / SIGTERM) the staged files are removed and every earlier
    output stays as it was.
    """
    tx = Transaction()
    token = _CURRENT.set(tx)
    try:
        yield tx
        _put_in_place(tx.sets)
    finally:
        _CURRENT.reset(token)
        _discard(tx.sets)
        _release(tx)


def as_user_error(exc: OSError, target: Path) -> BaseException:
    """A PulseError naming ``target`` for disk and permission faults, else ``exc`` itself."""
    from pulse_ml.env.faults import access_reason, disk_reason

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


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the ones created (deepest last)."""
    missing = []
    current_dir = directory
    while not os.path.lexists(current_dir) and current_dir != current_dir.parent:
        missing.append(current_dir)
        current_dir = current_dir.parent
    if not current_dir.is_dir():
        raise PulseError(f"cannot write {directory}: {current_dir} is a file, not a folder. "
                         "Choose an output location whose folders are folders.")
    directory.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


@contextmanager
def staged(directory: Path, what: str, lock_target: Path | None = None,
           discard: tuple[str, ...] = (), only: str | None = None) -> Iterator[Path]:
    """Yield a fresh staging folder in ``directory``; its files replace their targets later.

    Inside :func:`command` they are put in place when the command returns; otherwise when
    this block ends. ``lock_target`` (default ``directory``) is locked from now on.

    Args:
        directory: Where the staged files go (created when missing).
        what: How to name the output in messages.
        lock_target: The output whose concurrent writers are serialized.
        discard: Names of stale files in ``directory`` to remove with the swap.
        only: The one name this set may put in place (a single-file output).
    """
    from pulse_ml.env import signals

    tx = current()
    local = tx is None
    if tx is None:
        tx = Transaction()
    entry: StagedSet | None = None
    try:
        lock(tx, lock_target or directory, what)
        created = _make_dirs(directory)
        with signals.deferred():  # a signal between mkdtemp and the assignment would leak it
            entry = StagedSet(directory, Path(tempfile.mkdtemp(prefix=STAGE_PREFIX,
                                                                dir=directory)),
                              created, tuple(discard), only)
            tx.sets.append(entry)
        yield entry.stage
        if local:
            _put_in_place([entry])
    except BaseException:
        if entry is not None and entry in tx.sets:
            tx.sets.remove(entry)
            _discard([entry])
        raise
    finally:
        if local:
            _discard(tx.sets)
            _release(tx)


def _lock_dir() -> Path:
    folder = Path(tempfile.gettempdir()) / f"pulse-ml-locks-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def lock(tx: Transaction, target: Path, what: str) -> None:
    """Hold the lock of ``target`` for the rest of ``tx`` (wait while another command has it).

    Raises:
        PulseError: another command kept it longer than ``PULSE_OUTPUT_LOCK_TIMEOUT``.
    """
    import fcntl

    from pulse_ml.env.faults import seconds_from_env

    key = str(Path(target).absolute().resolve())
    if key in tx.locks:
        return
    timeout = seconds_from_env(LOCK_TIMEOUT_ENV, 600.0)
    name = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24] + ".lock"
    fd = os.open(_lock_dir() / name, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if not told:
                print(f"waiting: another pulse-ml command is writing {what}; its outputs go "
                      "in place first (at most "
                      f"{LOCK_TIMEOUT_ENV}={timeout:g} s)", file=sys.stderr)
                told = True
            if time.monotonic() > deadline:
                os.close(fd)
                raise PulseError(f"another pulse-ml command kept writing {what} for "
                                 f"{timeout:g} s ({LOCK_TIMEOUT_ENV}); nothing was written. "
                                 "Run again when it is done, or write elsewhere.") from None
            time.sleep(0.05)
    tx.locks[key] = fd


def _release(tx: Transaction) -> None:
    import fcntl

    for fd in tx.locks.values():
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    tx.locks.clear()


def _discard(sets: list[StagedSet]) -> None:
    """Remove staging folders, and the folders made for sets that were not put in place."""
    for s in reversed(sets):
        shutil.rmtree(s.stage, ignore_errors=True)
        for folder in reversed(s.created):
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (the set was put in place, or someone else wrote there)


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _remove(path: Path) -> None:
    if _is_dir(path):
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _fail_after() -> int:
    raw = os.environ.get(FAIL_HOOK, "").strip()
    return int(raw) if raw.isdigit() else 0


def _put_in_place(sets: list[StagedSet]) -> None:
    """Move every staged file over its target; on any failure restore the previous files.

    A replaced file is first hard-linked into a hidden backup folder (so the target never
    disappears; a folder or a file system without hard links is renamed there instead).
    """
    from pulse_ml.env import signals

    fail_after = _fail_after()
    for s in sets:
        for name in s.names():
            _check_replaceable(s.stage / name, s.directory / name)
    done: list[tuple[Path, Path | None]] = []  # (target, its backup or None if it was new)
    backups: dict[Path, Path] = {}
    try:
        with signals.deferred():
            try:
                for s in sets:
                    moves = [(s.stage / n, s.directory / n) for n in s.names()]
                    moves += [(None, s.directory / n) for n in s.discard
                              if n not in s.names() and os.path.lexists(s.directory / n)]
                    for src, dst in moves:
                        backup = None
                        if os.path.lexists(dst):
                            if s.directory not in backups:
                                backups[s.directory] = Path(tempfile.mkdtemp(
                                    prefix=BACKUP_PREFIX, dir=s.directory))
                            backup = backups[s.directory] / dst.name
                            _keep(dst, backup)
                        done.append((dst, backup))
                        if src is not None:
                            os.replace(src, dst)
                        else:
                            _remove(dst)
                        if fail_after and len(done) >= fail_after:
                            raise PulseError(
                                f"{FAIL_HOOK}={fail_after}: failure injected after {len(done)} "
                                f"output file(s) were put in place ({dst}); the previous "
                                "files were restored (a test hook).")
            except BaseException:
                _restore(done)
                raise
            for folder in backups.values():
                shutil.rmtree(folder, ignore_errors=True)
    except OSError as exc:
        target = done[-1][0] if done else (sets[0].directory if sets else Path("."))
        error = as_user_error(exc, target)
        if error is exc:
            raise
        raise error from exc
    finally:
        for folder in backups.values():
            shutil.rmtree(folder, ignore_errors=True)


def _check_replaceable(src: Path, dst: Path) -> None:
    """Refuse to put a file over a folder (or a folder over a file or a foreign folder)."""
    if not os.path.lexists(dst):
        return
    if _is_dir(dst) != _is_dir(src):
        have, want = ("a folder", "a file") if _is_dir(dst) else ("a file", "a folder")
        raise PulseError(f"cannot write {dst}: it is {have}, and the output is {want}. Nothing "
                         "was written; remove it or choose another output location.")
    if _is_dir(dst) and not (dst / MARKER).is_file():
        raise PulseError(f"cannot write {dst}: the folder exists and pulse-ml did not write it "
                         f"(no {MARKER} in it), so it is not replaced. Nothing was written; "
                         "remove it yourself or choose another output location.")


def _keep(dst: Path, backup: Path) -> None:
    """Keep the current ``dst`` as ``backup`` (a hard link, or a rename for folders)."""
    if not _is_dir(dst):
        try:
            os.link(dst, backup, follow_symlinks=False)
            return
        except OSError:
            pass
    os.replace(dst, backup)


def _restore(done: list[tuple[Path, Path | None]]) -> None:
    """Undo the moves in reverse: the previous file back at its target, new files removed."""
    for dst, backup in reversed(done):
        try:
            if backup is not None:
                if _is_dir(dst) or (_is_dir(backup) and os.path.lexists(dst)):
                    _remove(dst)
                os.replace(backup, dst)
            else:
                _remove(dst)
        except OSError:
            continue  # keep restoring the others
