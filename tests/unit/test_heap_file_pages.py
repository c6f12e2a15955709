"""`heap.release_file_pages`: written pages of shared file mappings leave the process, not the file."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from ragtriage.index.heap import release_file_pages

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc/self/smaps and madvise semantics are Linux's"
)

SIZE = 4 << 20


def resident_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of `path` (from /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=5)
        if "-" in first[0] and not first[0].endswith(":"):
            inside = len(first) == 6 and first[5] == str(path.resolve())
        elif inside and first[0] == "Rss:":
            total += int(first[1])
    return total


def written_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * SIZE)
    return path


def pattern() -> bytes:
    return bytes(range(256)) * (SIZE // 256)


def test_written_shared_pages_leave_the_process_and_reach_the_file(tmp_path: Path) -> None:
    path = written_file(tmp_path / "shard" / "vectors")
    with path.open("r+b") as handle, mmap.mmap(handle.fileno(), SIZE, access=mmap.ACCESS_WRITE) as mapped:
        mapped[:] = pattern()
        assert resident_kib(path) >= SIZE // 1024

        assert release_file_pages(tmp_path / "shard") >= SIZE

        assert resident_kib(path) == 0
        assert mapped[:] == pattern()  # read back through the page cache
        mapped.flush()
    assert path.read_bytes() == pattern()


def test_private_mappings_and_other_folders_are_left_alone(tmp_path: Path) -> None:
    private = written_file(tmp_path / "shard" / "private")
    elsewhere = written_file(tmp_path / "other" / "vectors")
    with (
        private.open("r+b") as first,
        elsewhere.open("r+b") as second,
        mmap.mmap(first.fileno(), SIZE, access=mmap.ACCESS_COPY) as copied,
        mmap.mmap(second.fileno(), SIZE, access=mmap.ACCESS_WRITE) as shared,
    ):
        copied[:] = pattern()
        shared[:] = pattern()

        assert release_file_pages(tmp_path / "shard") == 0

        assert copied[:] == pattern()  # a private mapping's written pages exist only here
        assert resident_kib(elsewhere) >= SIZE // 1024
    assert private.read_bytes() == b"\0" * SIZE
