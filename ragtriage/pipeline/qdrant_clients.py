"""Qdrant clients shared per folder (local mode) or URL (server) within this process.

Local mode locks its folder: one client per folder per process, shared by every `QdrantIndex` on
it (counted users), closed by the last user and at exit. A pid file next to the folder names the
process holding it, so a second process gets an `IndexLockedError` that says which process to stop.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from qdrant_client import QdrantClient

from ragtriage.errors import IndexLockedError

__all__ = [
    "LOCAL_MODE_LIMIT",
    "LOCAL_MODE_SIZE_WARNING",
    "acquire_local",
    "quiet_local_size_warning",
    "acquire_server",
    "forget_inherited",
    "held_by_this_process",
    "release",
]

#: Points above which qdrant-client's local mode warns that it is slow (`LARGE_DATA_THRESHOLD`).
LOCAL_MODE_LIMIT = 20_000
#: That warning's message (a regex prefix). It is printed on stderr in the middle of our progress
#: output, so it is filtered here, where Qdrant local is opened, and `kb stats` says it in our words.
LOCAL_MODE_SIZE_WARNING = r"Local mode is not recommended for collections with more than"


def quiet_local_size_warning() -> None:
    """Ignore exactly qdrant-client's local-mode size warning (idempotent; call before opening)."""
    warnings.filterwarnings("ignore", message=LOCAL_MODE_SIZE_WARNING, category=UserWarning)


@dataclass
class _ClientEntry:
    client: QdrantClient
    users: int
    pid_file: Path | None


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


def acquire_local(folder: Path) -> QdrantClient:
    """The client of local-mode `folder` (opened on first use); raises IndexLockedError if another process holds it."""
    key = str(folder.resolve())
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            folder.mkdir(parents=True, exist_ok=True)
            quiet_local_size_warning()
            try:
                client = QdrantClient(path=key)
            except RuntimeError as error:
                if "already accessed" not in str(error):
                    raise
                raise IndexLockedError(
                    f"{folder}: the dense index is in use by {_holder_description(folder)}; "
                    "stop that process and retry, or set index.qdrant_url to a Qdrant server "
                    "for concurrent access"
                ) from None
            pid_file = _pid_file(folder)
            pid_file.write_text(f"{os.getpid()}\n{' '.join(sys.argv)}\n", encoding="utf-8")
            entry = _ClientEntry(client=client, users=0, pid_file=pid_file)
            _registry[key] = entry
        entry.users += 1
        return entry.client


def held_by_this_process(folder: Path) -> bool:
    """This process has the local-mode folder open (another process could not open it now)."""
    with _registry_lock:
        return str(folder.resolve()) in _registry


def acquire_server(url: str, api_key: str | None, timeout_s: float) -> QdrantClient:
    """The client of the server at `url` (created on first use)."""
    key = f"url:{url}"
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            entry = _ClientEntry(QdrantClient(url=url, api_key=api_key, timeout=int(timeout_s)), 0, None)
            _registry[key] = entry
        entry.users += 1
        return entry.client


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
    entry.client.close()
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


def forget_inherited() -> None:
    """In a forked process: drop the parent's clients without closing them (they are the parent's
    to close; sharing a client's SQLite connection or HTTP pool across a fork is unsafe)."""
    global _registry_lock
    _registry.clear()
    _registry_lock = threading.Lock()  # the parent may have held it while forking
