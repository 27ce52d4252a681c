"""env.signals.deferred: SIGTERM/SIGINT wait for the end of the block, also with other threads."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from pulse_ml.env import signals

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signal handlers can be set from the main thread only")


@pytest.fixture
def sigterm_handler():
    previous = signal.getsignal(signal.SIGTERM)
    signals.install()
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def busy_thread():
    """Another thread alive (as a progress bar's monitor is): it may receive the signal."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield thread
    stop.set()
    thread.join()


@pytest.mark.parametrize("signum,raised", [(signal.SIGTERM, signals.Terminated),
                                           (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_during_the_block_is_delivered_after_it(sigterm_handler, busy_thread, signum,
                                                         raised):
    steps: list[str] = []
    with pytest.raises(raised):
        with signals.deferred():
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # Python would run a pending handler here, inside the block
            steps.append("block finished")
        steps.append("after the block")  # not reached: the signal is raised right after it
    assert steps == ["block finished"]


def test_handlers_are_restored_and_nothing_is_raised_without_a_signal(sigterm_handler):
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with signals.deferred():
        pass
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
