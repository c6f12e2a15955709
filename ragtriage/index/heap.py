"""Hand memory a big build no longer needs back to the system between its phases.

glibc's allocator keeps memory freed in its heap for reuse; after `kb import`'s pass (per-batch
rows, strings and segmenting buffers) about 50 MB per 30k chunks stayed resident into the BM25
build, whose large arrays are mapped apart and never reuse it. `malloc_trim(0)` returns it.

Qdrant Edge writes its vectors, payload and write-ahead log through shared file mappings, and
every page it has written stays mapped in the writing process (about 230 MB at 100k points of
384 dimensions) although nothing reads them during an import. `release_file_pages` unmaps those
pages from the process (`madvise(MADV_DONTNEED)`): for a *shared* file mapping the kernel keeps
their contents, written or not, in the page cache, which writes them to the file and may evict
them; a later read faults them back in from there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from pathlib import Path
from typing import Any

__all__ = ["release_file_pages", "trim_heap"]

_MADV_DONTNEED = 4  # Linux


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        library = ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
    if library is None:
        return None
    if hasattr(library, "madvise"):
        library.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        library.madvise.restype = ctypes.c_int
    return library


def trim_heap() -> None:
    """Return free heap pages to the system (glibc's `malloc_trim`; a no-op elsewhere)."""
    library = _libc()
    if library is not None and hasattr(library, "malloc_trim"):
        library.malloc_trim(0)


def release_file_pages(folder: Path) -> int:
    """Unmap the resident pages of every file under `folder` this process maps *shared*; the
    contents stay in the file (through the page cache). Private mappings are left alone: their
    written pages exist nowhere else. Returns the bytes of mappings released (0 where `/proc`
    or `madvise` is missing: not Linux)."""
    library = _libc()
    maps = Path("/proc/self/maps")
    if library is None or not hasattr(library, "madvise") or not maps.exists():
        return 0
    prefix = str(folder.resolve()) + os.sep
    released = 0
    for line in maps.read_text(encoding="utf-8", errors="replace").splitlines():
        # address perms offset dev inode path; perms[3] is "s" for a shared mapping
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or parts[1][3:4] != "s" or not parts[5].startswith(prefix):
            continue
        start, end = (int(bound, 16) for bound in parts[0].split("-"))
        if library.madvise(start, end - start, _MADV_DONTNEED) == 0:
            released += end - start
    return released
