"""Qdrant handles shared per folder (Qdrant Edge shards) or URL (server) within this process.

Qdrant Edge locks its folder: one handle per folder per process, shared by every index on it
(counted users), closed by the last user and at exit. A pid file next to the folder
names the process holding it, so a second process gets an `IndexLockedError` that says which
process to stop.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ragtriage.errors import IndexLockedError

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

__all__ = ["acquire_folder", "acquire_server", "held_by_this_process", "locked_error", "release"]


@dataclass
class _ClientEntry:
    client: Any
    """A `QdrantClient`, or what `acquire_folder` was given to open (an edge shard holder)."""
    users: int
    pid_file: Path | None
    close: Callable[[], None]


_Handle = TypeVar("_Handle")


_registry: dict[str, _ClientEntry] = {}
_registry_lock = threading.Lock()


def _pid_file(folder: Path) -> Path:
    return folder.parent / f"{folder.name}.pid"


def _holder_description(folder: Path) -> str:
    """Who holds the folder, from the pid file the holder wrote (if it is still alive)."""
    try:
        pid_text, _, command = _pid_file(folder).read_text(encoding="utf-8").partition("\n")
        pid = int(pid_text)
        os.kill(pid, 0)
    except (OSError, ValueError):
        return "another process (another ragtriage or Qdrant client)"
    return f"another ragtriage process (pid {pid}: {command.strip() or 'unknown command'})"


def locked_error(folder: Path) -> IndexLockedError:
    """The error for `folder` held by another client: names the holder and what to do."""
    return IndexLockedError(
        f"{folder}: the dense index is in use by {_holder_description(folder)}; "
        "stop that process and retry, or set index.qdrant_url to a Qdrant server "
        "for concurrent access"
    )


def acquire_folder(
    folder: Path, open_handle: Callable[[], _Handle], close_handle: Callable[[_Handle], None]
) -> _Handle:
    """The handle of `folder`, opened by `open_handle` on first use in this process (which raises
    `IndexLockedError` when another client holds the folder); the pid file then names this process.
    The last `release` (or the exit) calls `close_handle`."""
    key = str(folder.resolve())
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            handle = open_handle()
            pid_file = _pid_file(folder)
            pid_file.write_text(f"{os.getpid()}\n{' '.join(sys.argv)}\n", encoding="utf-8")
            entry = _ClientEntry(handle, 0, pid_file, lambda: close_handle(handle))
            _registry[key] = entry
        entry.users += 1
        handle_in_use: _Handle = entry.client
        return handle_in_use


def held_by_this_process(folder: Path) -> bool:
    """This process has the embedded index folder open (another process could not open it now)."""
    with _registry_lock:
        return str(folder.resolve()) in _registry


def acquire_server(url: str, api_key: str | None, timeout_s: float) -> QdrantClient:
    """The client of the server at `url` (created on first use)."""
    from qdrant_client import QdrantClient

    key = f"url:{url}"
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            client = QdrantClient(url=url, api_key=api_key, timeout=int(timeout_s))
            entry = _ClientEntry(client, 0, None, client.close)
            _registry[key] = entry
        entry.users += 1
        server_client: QdrantClient = entry.client
        return server_client


def release(key: str) -> None:
    """Give back one use of the client under `key` (folder path or `url:…`); the last closes it."""
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            return
        entry.users -= 1
        if entry.users <= 0:
            _close_entry(entry)
            del _registry[key]


def _close_entry(entry: _ClientEntry) -> None:
    entry.close()
    if entry.pid_file is not None:
        try:
            if entry.pid_file.read_text(encoding="utf-8").split("\n", 1)[0] == str(os.getpid()):
                entry.pid_file.unlink()
        except (OSError, ValueError):
            pass


@atexit.register
def _close_all() -> None:
    with _registry_lock:
        for entry in _registry.values():
            _close_entry(entry)
        _registry.clear()
