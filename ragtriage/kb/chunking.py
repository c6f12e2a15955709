"""Structure-aware chunking (pure): headings first, then paragraphs, then sentence windows.

1. A chunk never spans two sections (a section is the text under one heading).
2. Within a section, adjacent blocks are packed together while the chunk stays within `target_chars`.
3. A block longer than `max_chars` is cut into sentence windows of up to `target_chars`; each window
   after the first repeats the previous window's trailing whole sentences, up to `overlap_chars`
   (no overlap when the last sentence alone is longer than that, or when it would push the window
   over `max_chars`). Code and table blocks are windowed by lines.
4. A sentence is never cut unless it alone is longer than `max_chars`; then it is cut at a comma or a
   space where possible, else at `max_chars`. So no chunk is ever longer than `max_chars`.

Sentence ends: 。！？； anywhere, `. ! ?` before whitespace or the end, and line breaks.

Every chunk records its character span (`char_start`, `char_end`) in the document text: every block of
every section, stripped as chunking strips it, joined with a blank line (`document_text`). The text
does not depend on the chunk sizes, so a span of gold taken under one chunking maps onto another.

Chunk ids are `{doc_id}#{sha1(heading_path, content)[:10]}`, with `-2`, `-3`, … for repeats inside one
document. They depend only on the section's heading path and the chunk's text, so chunks of an
unchanged section keep their ids when other sections of the document change.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ragtriage.config.settings import KBSettings
from ragtriage.kb.document import Block, LoadedDocument, Section
from ragtriage.kb.types import ChunkRecord, ChunkStatus

_CJK_CLOSERS = re.escape("”’」』）)]")
# ASCII quotes only close a Western sentence: after 。 a `"` is as likely to open the next one.
_WESTERN_CLOSERS = re.escape("”’」』）)]\"'")
_SENTENCE = re.compile(
    rf"[^\n]*?(?:[。！？；]+[{_CJK_CLOSERS}]*|[.!?]+[{_WESTERN_CLOSERS}]*(?=\s|$)|\n)[ \t]*\n*"
)
_LINE = re.compile(r"[^\n]*\n+")
_SOFT_BREAKS = "，、,：:；; \t"
_BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ChunkingParams:
    """Sizes in characters (see the module docstring for how each is used)."""

    target_chars: int = 800
    max_chars: int = 1200
    overlap_chars: int = 150

    def __post_init__(self) -> None:
        if not 0 < self.target_chars <= self.max_chars:
            raise ValueError(f"need 0 < target_chars ({self.target_chars}) <= max_chars ({self.max_chars})")
        if not 0 <= self.overlap_chars < self.target_chars:
            raise ValueError(
                f"need 0 <= overlap_chars ({self.overlap_chars}) < target_chars ({self.target_chars})"
            )

    @classmethod
    def from_settings(cls, kb: KBSettings) -> ChunkingParams:
        """The sizes configured in `[kb]`."""
        return cls(target_chars=kb.target_chars, max_chars=kb.max_chars, overlap_chars=kb.overlap_chars)


def split_sentences(text: str) -> list[str]:
    """Split into sentences that keep their end marks and trailing whitespace (`"".join(...) == text`)."""
    pieces = [match.group(0) for match in _SENTENCE.finditer(text) if match.group(0)]
    consumed = sum(len(piece) for piece in pieces)
    if consumed < len(text):
        pieces.append(text[consumed:])
    return pieces


def _split_lines(text: str) -> list[str]:
    pieces = [match.group(0) for match in _LINE.finditer(text)]
    consumed = sum(len(piece) for piece in pieces)
    if consumed < len(text):
        pieces.append(text[consumed:])
    return pieces


def _hard_cut(piece: str, max_chars: int) -> Iterator[str]:
    """Cut one over-long sentence into parts of at most `max_chars`, preferring a soft break."""
    while len(piece) > max_chars:
        window = piece[:max_chars]
        cut = max((window.rfind(ch) for ch in _SOFT_BREAKS), default=-1) + 1
        if cut < max_chars // 2:
            cut = max_chars
        yield piece[:cut]
        piece = piece[cut:]
    if piece:
        yield piece


def sentence_windows(text: str, params: ChunkingParams, *, by_lines: bool = False) -> list[str]:
    """Windows of whole sentences up to `target_chars`, overlapping by up to `overlap_chars`."""
    raw = _split_lines(text) if by_lines else split_sentences(text)
    pieces = [part for piece in raw for part in _hard_cut(piece, params.max_chars)]
    windows: list[str] = []
    overlap: list[str] = []
    index = 0
    while index < len(pieces):
        window = list(overlap)
        length = sum(len(piece) for piece in window)
        if length + len(pieces[index]) > params.max_chars:
            window, length = [], 0
        window.append(pieces[index])
        length += len(pieces[index])
        new_pieces = 1
        index += 1
        while index < len(pieces) and length + len(pieces[index]) <= params.target_chars:
            window.append(pieces[index])
            length += len(pieces[index])
            new_pieces += 1
            index += 1
        text_of_window = "".join(window).strip()
        if text_of_window:
            windows.append(text_of_window)
        overlap = _trailing_overlap(window[-new_pieces:], params.overlap_chars)
    return windows


def _trailing_overlap(pieces: list[str], overlap_chars: int) -> list[str]:
    """The longest run of whole trailing pieces that fits in `overlap_chars`."""
    tail: list[str] = []
    length = 0
    for piece in reversed(pieces):
        if length + len(piece) > overlap_chars:
            break
        tail.insert(0, piece)
        length += len(piece)
    return tail


def section_chunk_texts(section: Section, params: ChunkingParams) -> list[str]:
    """The chunk contents of one section: blocks packed up to target, long blocks windowed."""
    return [content for content, _, _ in section_chunk_spans(section, params)]


def section_chunk_spans(
    section: Section, params: ChunkingParams, offset: int = 0
) -> list[tuple[str, int, int]]:
    """`(content, start, end)` of each chunk of one section; offsets count from `offset`, the
    section's first block in the document text (end exclusive)."""
    units: list[tuple[str, int, int]] = []
    for text, start, kind in _section_blocks(section, offset):
        units.extend(_unit_spans(text, start, params, by_lines=kind in ("code", "table")))
    chunks: list[tuple[str, int, int]] = []
    current: list[tuple[str, int, int]] = []
    length = 0
    for unit in units:
        joined = length + len(_BLOCK_SEPARATOR) + len(unit[0]) if current else len(unit[0])
        if current and joined > params.target_chars:
            chunks.append(_packed(current))
            current, joined = [], len(unit[0])
        current.append(unit)
        length = joined
    if current:
        chunks.append(_packed(current))
    return chunks


def _packed(units: list[tuple[str, int, int]]) -> tuple[str, int, int]:
    return _BLOCK_SEPARATOR.join(text for text, _, _ in units), units[0][1], units[-1][2]


def _stripped(block: Block) -> str:
    return block.text.strip("\n") if block.kind in ("code", "table") else block.text.strip()


def _section_blocks(section: Section, offset: int) -> Iterator[tuple[str, int, str]]:
    """`(stripped text, start offset, kind)` of each non-empty block (a blank line between blocks)."""
    for block in section.blocks:
        text = _stripped(block)
        if text:
            yield text, offset, block.kind
            offset += len(text) + len(_BLOCK_SEPARATOR)


def _unit_spans(
    text: str, start: int, params: ChunkingParams, *, by_lines: bool
) -> list[tuple[str, int, int]]:
    if len(text) <= params.max_chars:
        return [(text, start, start + len(text))]
    spans: list[tuple[str, int, int]] = []
    cursor = 0
    for window in sentence_windows(text, params, by_lines=by_lines):
        # Windows are stripped runs of the block's sentences, in order (they may overlap).
        at = text.find(window, cursor)
        at = cursor if at < 0 else at
        spans.append((window, start + at, start + at + len(window)))
        cursor = at
    return spans


def document_text(document: LoadedDocument) -> str:
    """The text chunk offsets refer to: every non-empty block, stripped, blank-line separated."""
    return _BLOCK_SEPARATOR.join(
        text for section in document.sections for text, _, _ in _section_blocks(section, 0)
    )


def chunk_id(doc_id: str, heading_path: list[str], content: str) -> str:
    """`{doc_id}#{sha1(heading_path + content)[:10]}` (the caller numbers repeats)."""
    key = json.dumps(heading_path, ensure_ascii=False) + "\n" + content
    return f"{doc_id}#{hashlib.sha1(key.encode('utf-8')).hexdigest()[:10]}"


def content_hash(content: str) -> str:
    """sha256 of a chunk's content (the embedding cache key together with the embedder)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def chunk_document(
    document: LoadedDocument,
    *,
    doc_id: str,
    params: ChunkingParams,
    kb: str = "default",
    version: int = 1,
    status: ChunkStatus = "published",
    updated_at: str | None = None,
) -> list[ChunkRecord]:
    """Every chunk of `document`, ordinals from 0 in reading order.

    A chunk's `title` is its section heading (the document title for text before the first heading);
    the document title is `heading_path[0]`.
    """
    records: list[ChunkRecord] = []
    seen: dict[str, int] = {}
    offset = 0
    for section in document.sections:
        blocks = list(_section_blocks(section, offset))
        spans = section_chunk_spans(section, params, offset)
        if blocks:
            offset = blocks[-1][1] + len(blocks[-1][0]) + len(_BLOCK_SEPARATOR)
        for content, char_start, char_end in spans:
            base_id = chunk_id(doc_id, section.heading_path, content)
            seen[base_id] = seen.get(base_id, 0) + 1
            unique_id = base_id if seen[base_id] == 1 else f"{base_id}-{seen[base_id]}"
            records.append(
                ChunkRecord(
                    chunk_id=unique_id,
                    doc_id=doc_id,
                    kb=kb,
                    title=section.heading or document.title,
                    heading_path=list(section.heading_path),
                    anchor=section.anchor,
                    ordinal=len(records),
                    content=content,
                    content_hash=content_hash(content),
                    version=version,
                    updated_at=updated_at,
                    status=status,
                    product_line=document.meta.product_line,
                    doc_version=document.meta.doc_version,
                    source_path=document.source_path,
                    char_start=char_start,
                    char_end=char_end,
                )
            )
    return records
