"""SIGTERM handled like Ctrl-C, and short sections that a signal must not cut in half.

A scheduler or ``kill`` sends SIGTERM. Python's default is to die on the spot, which leaves an
MLflow run RUNNING forever and temporary files behind. :func:`install` makes SIGTERM raise
:class:`Terminated`, a :class:`KeyboardInterrupt`, so every cleanup written for Ctrl-C (runs
marked KILLED, partial outputs removed) runs for it too; the CLI exits 143 (128 + 15).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGTERM_EXIT = 128 + signal.SIGTERM
SIGINT_EXIT = 128 + signal.SIGINT


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM."""


def _on_sigterm(signum, frame) -> None:
    # A second SIGTERM while the first one's cleanup runs is ignored: the cleanup (marking the
    # run, removing partial files) takes a fraction of a second; a scheduler's SIGKILL follows.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def install() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (call once, from the CLI)."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def exit_code(exc: KeyboardInterrupt) -> int:
    """Exit status for an interruption: 143 for SIGTERM, 130 for Ctrl-C."""
    return SIGTERM_EXIT if isinstance(exc, Terminated) else SIGINT_EXIT


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs; they are delivered right after it.

    For a few renames that must all happen or none (publishing a set of result files). The
    signals are held at Python level: masking them in the main thread is not enough once
    another thread exists (a progress bar's monitor, MLflow's logging), because the kernel
    then delivers the signal there and Python still runs the handler in the main thread,
    in the middle of the block. Outside the main thread this is a no-op (handlers run in the
    main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, _frame) -> None:
        held.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:  # delivered again, now to the handler that was in place before the block
            signal.raise_signal(held[0])
