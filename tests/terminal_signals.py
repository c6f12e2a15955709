"""SIGINT as a terminal's foreground process gets it, whatever the test process inherited.

A process started as a background job of a non-interactive shell (`pytest … &`, `nohup … &`) starts
with SIGINT ignored, and Python then leaves it ignored: no `KeyboardInterrupt`, and every child
inherits the ignored signal. Ctrl-C tests assert what a user at a terminal sees, so they set the
terminal's disposition explicitly instead of relying on how the test run was started.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path


def as_from_a_terminal() -> None:
    """`preexec_fn` for `subprocess.Popen`: the child starts with SIGINT's default action, unblocked
    (Python then installs its `KeyboardInterrupt` handler, as in a terminal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def default_sigint() -> Iterator[None]:
    """Inside, this process takes SIGINT with Python's default handler, unblocked in this thread;
    the previous handler and mask come back on exit."""
    handler = signal.getsignal(signal.SIGINT)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def child_pids(pid: int) -> list[int]:
    """The processes `pid` has started and not yet reaped, from /proc (Linux): what a Ctrl-C test
    waits for before it interrupts, and expects gone after."""
    found: list[int] = []
    for task in (Path("/proc") / str(pid) / "task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return found
