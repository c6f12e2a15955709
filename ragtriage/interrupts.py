"""Ctrl-C that a library cannot lose: remembered, and raised again at the job's next safe point.

Python raises `KeyboardInterrupt` wherever the main thread happens to be. C code that calls back
into Python may clear it as if it were its own error (pyarrow's first `to_numpy` imported pandas
from C++ that way, and a `kb import` interrupted then went on to the end). `latched_interrupts`
remembers that SIGINT came; its `check` raises `KeyboardInterrupt` at the next batch boundary.

A Ctrl-C in a terminal goes to every process of the group, the forked helpers of an import too.
They are stopped by the importing process instead (it rolls back what they did):
`children_ignore_interrupts` makes them born with SIGINT blocked, so that one arriving while they
start (Python's own after-fork code, before they could ignore it) is not printed as an error.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["children_ignore_interrupts", "latched_interrupts"]


@contextlib.contextmanager
def latched_interrupts() -> Iterator[Callable[[], None]]:
    """Yield `check()`, which raises `KeyboardInterrupt` if SIGINT came since entering.

    Only in the main thread, and only while SIGINT has Python's default handler (a worker thread
    of the TUI or the service, or a process started with SIGINT ignored, is left as it is: `check`
    then does nothing).
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield lambda: None
        return
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    def check() -> None:
        if received:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def children_ignore_interrupts() -> Iterator[None]:
    """Processes forked inside start with SIGINT blocked (and keep it so unless they unblock it).

    In this process a Ctrl-C that comes meanwhile is held back and raised when the block ends (its
    handler runs then), never halfway through starting them: a half-built pool would be lost to
    its owner and its workers left behind.
    """
    handler = signal.getsignal(signal.SIGINT)
    main = threading.current_thread() is threading.main_thread() and handler is not None
    held: list[int] = []
    if main:
        signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    # The mask is what forked children inherit (the calling thread's); other threads of this
    # process may still take the signal, and the holding handler above catches it.
    masked = hasattr(signal, "pthread_sigmask")
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masked else set()
    try:
        yield
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        if main:
            signal.signal(signal.SIGINT, handler)
            if held and callable(handler):
                handler(signal.SIGINT, None)
