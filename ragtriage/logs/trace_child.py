"""Trace files read and parsed in a forked process while this one stores: `ingest_files` for big
trace inputs.

The child reads the trace files (`formats.dispatch.trace_lines`, which forks the readers of
`formats.parallel`) and parses each request into rows (`batches.parse_batches`, the same parse,
flag rules and quarantine as every other line), and sends the parsed batches through a pipe; this
process hands them to the writer as they come. So parsing one batch overlaps storing the one
before, on the other core, instead of taking turns with it. The pipe holds at most a batch in
flight, so memory stays bounded.

A failure in the child is raised here: `InputError` as it was, anything else as `RuntimeError`
with the child's traceback. Closing the iterator early (a stop request, a strict-mode error)
ends the child and its readers, and removes the spill file. A process killed outright cannot
remove its spill folder; the folder's name says which process on which host owned it, and
`remove_stale_spill_dirs` removes those whose owner has ended, and those whose name names no owner
(an older version's, or a collector's own temp folder) once nothing in them changed for a day.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import re
import shutil
import signal
import socket
import tempfile
import time
import traceback
from collections.abc import Generator, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError
from ragtriage.logs.batches import ParsedBatch, parse_batches
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.formats.dispatch import PlannedFile, trace_lines

#: Spill folders in the temporary directory: `ragtriage-trace-ingest-PID@HOST-XXXXXXXX`.
SPILL_PREFIX = "ragtriage-trace-ingest-"
#: A trace collector's own spill folder (`formats.collect`), in the temporary directory when an
#: ingest reads in this process: its name names no owner.
COLLECTOR_PREFIX = "ragtriage-traces-"
#: A folder whose name names no owner is removed once nothing in it changed for this long (s): a
#: live ingest rewrites its spill file far more often.
STALE_AFTER_S = 24 * 3600
# TemporaryDirectory's random part has no `-`; a host name may.
_OWNER = re.compile(rf"{re.escape(SPILL_PREFIX)}(\d+)@(.+)-[^-]+")


def _spill_prefix() -> str:
    return f"{SPILL_PREFIX}{os.getpid()}@{socket.gethostname()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _last_change(folder: Path) -> float:
    """The newest modification time of `folder` and everything in it (s since the epoch)."""
    newest = folder.stat().st_mtime
    for parent, names, files in os.walk(folder):
        for name in (*names, *files):
            with contextlib.suppress(OSError):  # removed meanwhile
                newest = max(newest, os.stat(os.path.join(parent, name)).st_mtime)
    return newest


def _stale(folder: Path, host: str, now: float) -> bool:
    owner = _OWNER.fullmatch(folder.name)
    if owner is not None:
        return owner.group(2) == host and not _alive(int(owner.group(1)))
    # No owner to ask (another user's or an older version's live ingest looks the same): age decides.
    return now - _last_change(folder) > STALE_AFTER_S


def remove_stale_spill_dirs() -> list[Path]:
    """Remove the spill folders left by ingests killed before their cleanup ran; returns the
    folders removed. A folder whose name names its owner goes when that process on this host has
    ended; one whose name names none (`COLLECTOR_PREFIX`, an older version's) when nothing in it
    changed for `STALE_AFTER_S`. Folders of other hosts sharing the temporary directory and of
    live processes are left alone."""
    host, now = socket.gethostname(), time.time()
    removed: list[Path] = []
    root = Path(tempfile.gettempdir())
    try:
        folders = [*root.glob(f"{SPILL_PREFIX}*"), *root.glob(f"{COLLECTOR_PREFIX}*")]
    except OSError:
        return removed
    for folder in folders:
        try:
            if not folder.is_dir() or not _stale(folder, host, now):
                continue
        except OSError:  # removed meanwhile, or not ours to read
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # so that `finally` blocks end the readers


def _child(
    files: Sequence[PlannedFile],
    otel: OtelSettings,
    rules: LineRules,
    strict: bool,
    parse_lines: int,
    spill_dir: Path,
    out: Connection,
    parent_end: Connection,
) -> None:
    signal.signal(signal.SIGTERM, _stop)
    # Holding the parent's end open too, a send would block for ever once the parent is killed;
    # closed, it fails, and this process cleans up and ends.
    parent_end.close()
    try:
        for path, numbered in trace_lines(files, otel, spill_dir=spill_dir, parallel=True):
            out.send(("file", path))
            for batch in parse_batches(numbered, rules, strict, parse_lines, str(path.resolve())):
                out.send(("batch", batch))
                if batch.strict_error is not None or batch.input_error is not None:
                    out.send(("end", None))  # the parent raises it: nothing more is stored
                    return
        out.send(("end", None))
    except InputError as error:
        out.send(("input_error", str(error)))
    except SystemExit:
        pass  # the parent stopped this process
    except BaseException as error:  # noqa: BLE001 (reported to the parent, which raises it)
        with contextlib.suppress(OSError):  # the parent may have stopped listening
            out.send(("error", "".join(traceback.format_exception(error))))
    finally:
        out.close()


def parsed_traces(
    files: Sequence[PlannedFile], otel: OtelSettings, rules: LineRules, strict: bool, parse_lines: int
) -> Generator[tuple[Path, Iterator[ParsedBatch]], None, None]:
    """The parsed batches of the requests in trace `files`, per file in the order the readers
    give them (see `formats.dispatch.trace_lines`). Consume each file's batches before asking for
    the next file.

    Raises:
        InputError: a file cannot be read.
    """
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    # The spill file lives in a folder this process removes, however the child ends.
    spill_dir = tempfile.TemporaryDirectory(prefix=_spill_prefix())
    gc.freeze()  # the child's collector leaves this process's objects (and their pages) alone
    try:
        args = (files, otel, rules, strict, parse_lines, Path(spill_dir.name), send, receive)
        child = context.Process(target=_child, args=args)  # not a daemon: it forks the readers
        child.start()
    finally:
        gc.unfreeze()
    send.close()
    pending: list[tuple[str, Any]] = []

    def batches() -> Iterator[ParsedBatch]:
        while True:
            message = _receive(receive)
            if message[0] != "batch":
                pending.append(message)
                return
            yield message[1]

    try:
        message = _receive(receive)
        while message[0] == "file":
            yield message[1], batches()
            while not pending:  # batches the consumer left (it only leaves them when stopping)
                message = _receive(receive)
                if message[0] != "batch":
                    pending.append(message)
            message = pending.pop()
        if message[0] == "input_error":
            raise InputError(message[1])
        if message[0] == "error":
            raise RuntimeError(f"the trace reading process failed:\n{message[1]}")
        child.join()
    finally:
        if child.is_alive():
            child.terminate()
        child.join()
        receive.close()
        spill_dir.cleanup()


def _receive(pipe: Connection) -> tuple[str, Any]:
    try:
        message: tuple[str, Any] = pipe.recv()
    except EOFError:
        raise RuntimeError("the trace reading process stopped without a result") from None
    return message
