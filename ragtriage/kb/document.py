"""What a loader produces: a document with a title, metadata and sections of text blocks.

Loaders (`markdown_loader`, `html_loader`, `office_loader`, `pdf_loader`, plain text in `loaders`) turn
one file into a `LoadedDocument`;
`chunking` turns that into chunks. Nothing here touches the store.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragtriage.errors import InputError

BlockKind = Literal["paragraph", "list_item", "code", "table", "quote"]

#: File suffixes `kb add` reads, and the loader each one goes to.
SUFFIX_FORMATS: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
    ".docx": "docx",
    ".pptx": "pptx",
    ".pdf": "pdf",
}
#: Older formats `kb add` cannot read, and what to save them as instead.
LEGACY_SUFFIXES: dict[str, str] = {".doc": ".docx", ".ppt": ".pptx", ".rtf": ".docx", ".wps": ".docx"}


@dataclass(frozen=True)
class Block:
    """One unit of body text: a paragraph, a list item, a code/pre block, a table or a quote."""

    kind: BlockKind
    text: str


@dataclass
class Section:
    """The text under one heading, up to the next heading of any level."""

    heading_path: list[str]
    """Heading texts from the top; `heading_path[0]` is the document title."""
    anchor: str | None
    """HTML id or Markdown slug of the section's own heading (None for text before any heading)."""
    blocks: list[Block] = field(default_factory=list)

    @property
    def heading(self) -> str:
        """The section's own heading text (the document title for the lead section)."""
        return self.heading_path[-1] if self.heading_path else ""


@dataclass
class DocumentMeta:
    """Front-matter style metadata; every field is optional."""

    doc_id: str | None = None
    title: str | None = None
    product_line: str | None = None
    doc_version: str | None = None
    """Document/product version string such as `v2.3` (front matter key `version`)."""
    updated_at: str | None = None
    """ISO date or date-time from the front matter."""
    status: Literal["published", "ready"] | None = None
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Front-matter keys ragtriage does not interpret (kept in `DocumentRow.meta`)."""


@dataclass
class LoadedDocument:
    """One parsed source file."""

    title: str
    sections: list[Section]
    meta: DocumentMeta = field(default_factory=DocumentMeta)
    source_path: str | None = None
    format: str = "text"
    warnings: list[str] = field(default_factory=list)
    """Things the loader worked around (e.g. HTML without headings)."""

    def content_hash(self) -> str:
        """sha256 over title, metadata and every section: equal hashes mean nothing to re-chunk."""
        payload = {
            "title": self.title,
            "meta": asdict(self.meta),
            "sections": [
                {"path": s.heading_path, "anchor": s.anchor, "blocks": [[b.kind, b.text] for b in s.blocks]}
                for s in self.sections
            ],
        }
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def char_count(self) -> int:
        """Characters of body text over all sections."""
        return sum(len(block.text) for section in self.sections for block in section.blocks)


class DocumentLoadError(InputError):
    """A file that cannot become a document; carries the file, the line, the reason and the fix."""

    def __init__(self, path: Path | str, reason: str, fix: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        self.fix = fix
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}; fix: {fix}")

    @property
    def location(self) -> str:
        """`path` or `path:line`."""
        return f"{self.path}:{self.line}" if self.line is not None else self.path


class SectionBuilder:
    """Collects headings and blocks in reading order and cuts them into `Section`s.

    The heading path starts with the document title; a top heading equal to the title is not repeated.
    Sections without blocks (a heading directly followed by a sub-heading) are dropped; their heading
    stays in the path of the sections below it.
    """

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []
        self._anchor: str | None = None
        self._blocks: list[Block] = []
        self._pending: list[tuple[list[str], str | None, list[Block]]] = []
        self.heading_count = 0

    def heading(self, level: int, text: str, anchor: str | None) -> None:
        """Start a section under a heading of `level` (1–6)."""
        self._flush()
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))
        self._anchor = anchor
        self.heading_count += 1

    def block(self, kind: BlockKind, text: str) -> None:
        """Add a block to the current section; empty text is ignored."""
        if text.strip():
            self._blocks.append(Block(kind, text))

    def sections(self, title: str) -> list[Section]:
        """The sections, with `title` prepended to every heading path."""
        self._flush()
        result = []
        for headings, anchor, blocks in self._pending:
            path = [title, *headings]
            if len(path) > 1 and path[1] == title:
                del path[1]
            result.append(Section(heading_path=path, anchor=anchor, blocks=blocks))
        return result

    def _flush(self) -> None:
        if self._blocks:
            self._pending.append(([text for _, text in self._stack], self._anchor, self._blocks))
        self._blocks = []
