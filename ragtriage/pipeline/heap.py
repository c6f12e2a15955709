"""Hand the C heap's free pages back to the system between the phases of a big build.

glibc's allocator keeps memory freed in its heap for reuse; after `kb import`'s pass (per-batch
rows, strings and segmenting buffers) about 50 MB per 30k chunks stayed resident into the BM25
build, whose large arrays are mapped apart and never reuse it. `malloc_trim(0)` returns it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

__all__ = ["trim_heap"]


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        library = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return library if library is not None and hasattr(library, "malloc_trim") else None


def trim_heap() -> None:
    """Return free heap pages to the system (glibc's `malloc_trim`; a no-op elsewhere)."""
    library = _libc()
    if library is not None:
        library.malloc_trim(0)
