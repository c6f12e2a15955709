"""Log files as lines: `.jsonl` or gzip, split on `\\n` only, in constant memory.

`iter_raw_lines` yields numbered lines (the in-process ingest); `iter_line_chunks` and
`iter_line_ranges` cut a file into pieces of whole lines for the ingest workers.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragtriage.errors import InputError

READ_CHUNK_BYTES = 1 << 20


def open_binary(path: Path) -> Any:
    """`path` opened for reading bytes, decompressed when it starts with the gzip magic."""
    handle = open(path, "rb")
    if handle.read(2) == b"\x1f\x8b":
        handle.seek(0)
        return gzip.GzipFile(fileobj=handle, mode="rb")
    handle.seek(0)
    return handle


def iter_raw_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """Yield `(line_no, raw_bytes, unterminated)` for every line of a `.jsonl` or gzip file.

    Only `\\n` separates lines. `unterminated` is True for a last line without a newline.

    Raises:
        InputError: the file is missing, or its gzip stream is corrupt or cut off.
    """
    try:
        handle = open_binary(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    line_no = 0
    with handle:
        rest = b""
        # GzipFile.read(n) loses everything it decompressed when the stream turns out to be cut
        # off; read1 hands over each decompressed piece, so the lines before the cut are yielded.
        read = handle.read1 if isinstance(handle, gzip.GzipFile) else handle.read
        try:
            while chunk := read(READ_CHUNK_BYTES):
                parts = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
                rest = parts.pop()
                for part in parts:
                    line_no += 1
                    yield line_no, part, False
        except (EOFError, gzip.BadGzipFile, OSError) as error:
            raise InputError(cut_message(path, line_no, error)) from None
        if rest:
            yield line_no + 1, rest, True


def cut_message(path: Path, line_no: int, error: BaseException) -> str:
    """The message for a gzip stream that breaks off after `line_no` lines."""
    return (
        f"{path}: the gzip stream is corrupt or cut off after line {line_no} ({error}); "
        "re-copy the file (lines before that point were read)"
    )


def iter_line_chunks(path: Path, lines_per_chunk: int) -> Iterator[tuple[int, bytes, bool]]:
    """Yield `(first_line_no, data, unterminated)`: the file in pieces of `lines_per_chunk` whole
    lines (the last piece may be shorter), each line ending in `\n` except, when `unterminated`,
    the last line of the last piece. Splitting `data` on `\n` gives the lines `iter_raw_lines`
    yields, without a Python object per line here.

    Raises:
        InputError: the file is missing, or its gzip stream is corrupt or cut off (raised after
            the pieces of whole lines read before the cut).
    """
    try:
        handle = open_binary(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    first = 1
    blocks: list[bytes] = []
    counted = 0  # newlines in `blocks`
    with handle:
        read = handle.read1 if isinstance(handle, gzip.GzipFile) else handle.read
        try:
            while block := read(READ_CHUNK_BYTES):
                ends, after = _piece_ends(block, counted, lines_per_chunk)
                start = 0
                for end in ends:
                    blocks.append(block[start:end])
                    yield first, b"".join(blocks), False
                    first += lines_per_chunk
                    blocks, start = [], end
                blocks.append(block[start:] if start else block)
                counted = after
        except (EOFError, gzip.BadGzipFile, OSError) as error:
            data = b"".join(blocks)
            whole = data[: data.rfind(b"\n") + 1]
            if whole:
                yield first, whole, False
            raise InputError(cut_message(path, first - 1 + counted, error)) from None
    data = b"".join(blocks)
    if data:
        yield first, data, not data.endswith(b"\n")


def iter_line_ranges(path: Path, lines_per_chunk: int) -> Iterator[tuple[int, int, int, bool]] | None:
    """`(first_line_no, offset, length, unterminated)` of the pieces `iter_line_chunks` would
    yield, without keeping their bytes (the reader of a piece reads its range itself); None for
    a gzip file, whose bytes only come in order through `iter_line_chunks`.

    Raises:
        InputError: the file is missing or unreadable.
    """
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the generator)
        if handle.read(2) == b"\x1f\x8b":
            handle.close()
            return None
        handle.seek(0)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    return _ranges(handle, lines_per_chunk)


def _ranges(handle: Any, lines_per_chunk: int) -> Iterator[tuple[int, int, int, bool]]:
    first = 1
    start = 0  # file offset where the current piece starts
    position = 0  # file offset of the block being read
    counted = 0  # newlines between `start` and `position`
    last_byte = b"\n"
    with handle:
        while block := handle.read(READ_CHUNK_BYTES):
            last_byte = block[-1:]
            ends, counted = _piece_ends(block, counted, lines_per_chunk)
            for end in ends:
                yield first, start, position + end - start, False
                first += lines_per_chunk
                start = position + end
            position += len(block)
    if position > start:
        # What is left: whole lines, and perhaps a last line without a newline.
        yield first, start, position - start, last_byte != b"\n"


def _piece_ends(block: bytes, counted: int, lines_per_chunk: int) -> tuple[list[int], int]:
    """Where pieces of `lines_per_chunk` lines end in `block`, the piece being read having
    `counted` newlines before it: the offsets just past each piece's last newline, and the
    newlines of the piece left unfinished at the block's end. The one cutting rule of
    `iter_line_chunks` and `iter_line_ranges` (their pieces must be the same)."""
    ends: list[int] = []
    newlines = block.count(b"\n")
    end = -1
    while counted + newlines >= lines_per_chunk:
        for _ in range(lines_per_chunk - counted):
            end = block.index(b"\n", end + 1)
        ends.append(end + 1)
        newlines -= lines_per_chunk - counted
        counted = 0
    return ends, counted + newlines
