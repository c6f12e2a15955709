"""Log files as raw records: `.jsonl` or gzip lines split on `\\n` only (in constant memory), a
whole JSON document, or JSON values one after another (`iter_records`).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragtriage.errors import InputError

READ_CHUNK_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"


def open_binary(path: Path) -> Any:
    """`path` opened for reading bytes, decompressed when it starts with the gzip magic."""
    handle = open(path, "rb")  # noqa: SIM115 (the caller closes it)
    if handle.read(2) == b"\x1f\x8b":
        handle.close()
        return gzip.open(path, "rb")  # owns its file: closing it closes the file
    handle.seek(0)
    return handle


def open_bytes(path: Path) -> Any:
    """`open_binary`, a failure to open being an `InputError` that names the file.

    Raises:
        InputError: the file cannot be opened.
    """
    try:
        return open_binary(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None


def iter_raw_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """Yield `(line_no, raw_bytes, unterminated)` for every line of a `.jsonl` or gzip file.

    Only `\\n` separates lines. `unterminated` is True for a last line without a newline.

    Raises:
        InputError: the file is missing, or its gzip stream is corrupt or cut off.
    """
    line_no = 0
    with open_bytes(path) as handle:
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


def read_document(path: Path) -> bytes:
    """The whole text of a JSON document without its byte-order mark; of a gzip stream cut off,
    what it held before the cut (the JSON parser then tells where the document breaks).

    Raises:
        InputError: the file cannot be opened.
    """
    pieces: list[bytes] = []
    with open_bytes(path) as handle:
        read = handle.read1 if isinstance(handle, gzip.GzipFile) else handle.read
        try:
            while piece := read(READ_CHUNK_BYTES):
                pieces.append(piece)
        except (EOFError, gzip.BadGzipFile, OSError):
            pass
    return b"".join(pieces).removeprefix(_BOM)


def iter_records(path: Path, layout: str) -> Iterator[tuple[int, bytes]]:
    """`(line number, bytes)` of every non-blank line (`lines`), `(1, whole file)` for a
    `document` (`read_document` for a `broken` one), or each JSON value of a `stream` with the line
    it starts on; a leading byte-order mark is dropped.

    Raises:
        InputError: the file cannot be read, or its gzip stream is corrupt or cut off.
    """
    if layout == "lines":
        for line_no, raw, _ in iter_raw_lines(path):
            raw = raw[len(_BOM) :] if line_no == 1 and raw.startswith(_BOM) else raw
            if raw.strip():
                yield line_no, raw
        return
    if layout == "broken":
        yield 1, read_document(path)
        return
    with open_bytes(path) as handle:
        try:
            text = handle.read()
        except (EOFError, gzip.BadGzipFile, OSError) as error:
            raise InputError(cut_message(path, 0, error)) from None
    text = text[len(_BOM) :] if text.startswith(_BOM) else text
    if layout == "document":
        yield 1, text
    else:
        yield from iter_stream(text)


def iter_stream(text: bytes) -> Iterator[tuple[int, bytes]]:
    """`(line number where it starts, bytes)` of each JSON value of a stream of them; where a value
    does not parse, the rest of the text as one piece (its reader reports the JSON error)."""
    decoded = text.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    position, line_no, size = 0, 1, len(decoded)
    while True:
        start = position
        while start < size and decoded[start].isspace():
            start += 1
        if start >= size:
            return
        line_no += decoded.count("\n", position, start)
        try:
            _, end = decoder.raw_decode(decoded, start)
        except json.JSONDecodeError:
            yield line_no, decoded[start:].encode("utf-8")
            return
        yield line_no, decoded[start:end].encode("utf-8")
        line_no += decoded.count("\n", start, end)
        position = end
