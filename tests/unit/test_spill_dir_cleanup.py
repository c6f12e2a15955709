"""`remove_stale_spill_dirs`: trace-ingest temp folders are removed when their owner has ended;
folders whose name names no owner (an older version's, or a collector's own temp folder) when
nothing in them changed for `STALE_AFTER_S`; live, other-host and recent folders stay."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ragtriage.logs.trace_child import STALE_AFTER_S, remove_stale_spill_dirs


def _folder(root: Path, name: str, age_s: float, *, fresh_file: bool = False) -> Path:
    """A folder with a spill file inside, both last changed `age_s` ago (the file now if `fresh_file`)."""
    folder = root / name
    (folder / "inner").mkdir(parents=True)
    spill = folder / "inner" / "spans.sqlite"
    spill.write_bytes(b"x")
    then = time.time() - age_s
    for path in (spill, folder / "inner", folder):
        os.utime(path, (then, then))
    if fresh_file:
        os.utime(spill, None)
    return folder


def test_folders_without_an_owner_go_once_nothing_in_them_changed_for_a_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    host = socket.gethostname()
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    ended_pid = int(ended.stdout)
    old = STALE_AFTER_S + 3600
    gone = [
        _folder(tmp_path, "ragtriage-trace-ingest-abcd1234", old),  # an older version's name
        _folder(tmp_path, "ragtriage-traces-k2j4h5g6", old),  # a collector's own, its process killed
        _folder(tmp_path, f"ragtriage-trace-ingest-{ended_pid}@{host}-abcd1234", 10),  # owner ended
    ]
    kept = [
        _folder(tmp_path, "ragtriage-trace-ingest-efgh5678", 600),  # no owner, but recent
        _folder(tmp_path, "ragtriage-traces-a1b2c3d4", old, fresh_file=True),  # still being written
        _folder(tmp_path, f"ragtriage-trace-ingest-{os.getpid()}@{host}-abcd1234", old),  # live owner
        _folder(tmp_path, f"ragtriage-trace-ingest-{ended_pid}@another-host-abcd1234", old),  # other host
        _folder(tmp_path, "unrelated-folder", old),
    ]

    removed = remove_stale_spill_dirs()

    assert sorted(removed) == sorted(gone)
    assert sorted(tmp_path.iterdir()) == sorted(kept)
