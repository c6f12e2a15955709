"""Markdown → `LoadedDocument` with markdown-it-py (CommonMark plus tables).

Anchors are GitHub-style slugs of the heading text (Chinese kept, duplicates numbered).
Inline markup is reduced to its text; code blocks keep their lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup
from markdown_it import MarkdownIt
from markdown_it.token import Token

from ragtriage.kb.document import BlockKind, LoadedDocument, SectionBuilder
from ragtriage.kb.frontmatter import split_front_matter
from ragtriage.kb.text import SlugCounter, clean_inline, clean_preformatted, github_slug

_PARSER = MarkdownIt("commonmark").enable("table")


def load_markdown(text: str, path: Path | str, *, default_title: str) -> LoadedDocument:
    """Parse Markdown `text` (already decoded) from `path`.

    Raises:
        DocumentLoadError: broken front matter (with the line number).
    """
    meta, body, _ = split_front_matter(text, path)
    tokens = _PARSER.parse(body)
    builder = SectionBuilder()
    slugs = SlugCounter()
    first_h1: str | None = None
    walker = _BlockWalker(builder)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.type == "heading_open":
            heading = inline_text(tokens[index + 1]) if index + 1 < len(tokens) else ""
            level = int(token.tag[1])
            if level == 1 and first_h1 is None and builder.heading_count == 0:
                first_h1 = heading
            builder.heading(level, heading, slugs.unique(github_slug(heading)) or None)
            index += 3
            continue
        index = walker.step(tokens, index)
    title = meta.title or first_h1 or default_title
    return LoadedDocument(
        title=title, sections=builder.sections(title), meta=meta, source_path=str(path), format="markdown"
    )


class _BlockWalker:
    """Turns the non-heading tokens into blocks, tracking list and quote nesting."""

    def __init__(self, builder: SectionBuilder) -> None:
        self.builder = builder
        self.list_depth = 0
        self.quote_depth = 0
        self.item_paragraphs: list[int] = []
        """Paragraphs seen so far in each open list item (innermost last)."""

    def step(self, tokens: list[Token], index: int) -> int:
        """Handle `tokens[index]` and return the index of the next token to look at."""
        token = tokens[index]
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            self.list_depth += 1
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.list_depth -= 1
        elif kind == "list_item_open":
            self.item_paragraphs.append(0)
        elif kind == "list_item_close":
            self.item_paragraphs.pop()
        elif kind == "blockquote_open":
            self.quote_depth += 1
        elif kind == "blockquote_close":
            self.quote_depth -= 1
        elif kind == "inline" and index > 0 and tokens[index - 1].type == "paragraph_open":
            self._paragraph(inline_text(token))
        elif kind in ("fence", "code_block"):
            self.builder.block("code", clean_preformatted(token.content))
        elif kind == "html_block":
            text = clean_inline(BeautifulSoup(token.content, "lxml").get_text(" "))
            self.builder.block("paragraph", text)
        elif kind == "table_open":
            return self._table(tokens, index)
        return index + 1

    def _paragraph(self, text: str) -> None:
        block_kind: BlockKind = "paragraph"
        if self.item_paragraphs:
            indent = "  " * (self.list_depth - 1)
            marker = "- " if self.item_paragraphs[-1] == 0 else "  "
            self.item_paragraphs[-1] += 1
            text, block_kind = f"{indent}{marker}{text}", "list_item"
        elif self.quote_depth:
            block_kind = "quote"
        self.builder.block(block_kind, text)

    def _table(self, tokens: list[Token], index: int) -> int:
        rows: list[list[str]] = []
        while index < len(tokens) and tokens[index].type != "table_close":
            token = tokens[index]
            if token.type == "tr_open":
                rows.append([])
            elif token.type == "inline" and rows:
                rows[-1].append(inline_text(token))
            index += 1
        self.builder.block("table", "\n".join(" | ".join(cells) for cells in rows))
        return index + 1


def inline_text(token: Token) -> str:
    """Plain text of an inline token: markup dropped, image alt text and inline code kept."""
    parts: list[str] = []
    children: list[Any] = token.children or []
    for child in children:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(child.content or "")
        elif child.type == "html_inline":
            continue
    return clean_inline("".join(parts))
