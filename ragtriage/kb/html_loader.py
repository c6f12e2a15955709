"""HTML → `LoadedDocument` with BeautifulSoup + lxml.

Sections start at `h1`–`h6`. A section's anchor is the heading's `id`, else an `<a id|name>` inside
the heading or just before it (DocBook output such as the Debian FAQ writes `<h2><a id="x"/>…</h2>`),
else the `id` of the enclosing element whose first heading it is (`<section id>`, `<div class="section" id>`).
Navigation is dropped: `<nav>`, page-level `<header>`/`<footer>`, and DocBook's `navheader`,
`navfooter` and table-of-contents blocks.
A footnote's text goes right after the block that cites it (first citation in reading order), so it
lands in that section rather than in the page's last one (`html_footnotes` says what counts as one).
"""

from __future__ import annotations

import codecs
import re
import warnings
from pathlib import Path

from bs4 import (
    BeautifulSoup,
    Comment,
    Declaration,
    Doctype,
    ProcessingInstruction,
    Tag,
    XMLParsedAsHTMLWarning,
)
from bs4.element import NavigableString

from ragtriage.kb.document import BlockKind, LoadedDocument, SectionBuilder
from ragtriage.kb.html_footnotes import Footnotes, find_footnotes, labelled_text
from ragtriage.kb.text import clean_inline, clean_preformatted, decode_bytes

_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_SKIP_TAGS = {
    "head", "script", "style", "noscript", "template", "nav", "svg", "button", "form",
    "iframe", "img", "colgroup", "col", "select", "input", "object", "embed", "map",
}  # fmt: skip
_SKIP_CLASSES = {
    "navheader", "navfooter", "toc", "list-of-tables", "list-of-figures", "list-of-examples",
    "breadcrumb", "breadcrumbs", "navigation", "sidebar-nav",
}  # fmt: skip
_BLOCK_TAGS = {
    "p", "div", "section", "article", "main", "aside", "header", "footer", "ul", "ol", "li", "dl", "dt",
    "dd", "pre", "blockquote", "table", "thead", "tbody", "tfoot", "tr", "td", "th", "figure",
    "figcaption", "address", "fieldset", "details", "summary", "caption", "hr", "body", "html",
    *(_HEADINGS),
}  # fmt: skip
_LAYOUT_MARKERS = {"p", "pre", "ul", "ol", "dl", "div", "table", *_HEADINGS}
_LEAF_KINDS: dict[str, BlockKind] = {"blockquote": "quote", "li": "list_item"}
_IGNORED_STRINGS = (Comment, Declaration, Doctype, ProcessingInstruction)
# XHTML writes empty anchors as <a id="x"/>; an HTML parser would open an <a> that swallows the heading.
_SELF_CLOSED = re.compile(r"<(a|span|div)(\s[^<>]*?)?\s*/>", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def decode_html(data: bytes, path: Path | str) -> str:
    """Decode HTML bytes: BOM or UTF-8 first, then the declared `charset`, then GB18030."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    declared = _META_CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(codecs.lookup(declared.group(1).decode("ascii")).name)
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_bytes(data, path)[0]


def load_html(text: str, path: Path | str, *, default_title: str) -> LoadedDocument:
    """Parse HTML `text` (already decoded) from `path` into sections."""
    with warnings.catch_warnings():
        # XHTML (DocBook output) parsed as HTML is what we want: the HTML parser knows &nbsp; and friends.
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(_SELF_CLOSED.sub(r"<\1\2></\1>", text), "lxml")
    for line_break in soup.find_all("br"):
        line_break.replace_with("\n")
    title_tag = soup.find("title")
    page_title = clean_inline(title_tag.get_text()) if title_tag else ""
    builder = SectionBuilder()
    root = soup.body or soup
    walker = _Walker(builder, root, find_footnotes(root, _is_skipped))
    walker.walk(root)
    walker.place_leftover_footnotes()
    first_h1 = soup.find("h1")
    title = page_title or (clean_inline(first_h1.get_text()) if first_h1 else "") or default_title
    load_warnings: list[str] = []
    if builder.heading_count == 0:
        source = "its <title>" if page_title else "the file name"
        load_warnings.append(f"no h1–h6 headings: loaded as one section titled from {source}")
    return LoadedDocument(
        title=title,
        sections=builder.sections(title),
        source_path=str(path),
        format="html",
        warnings=load_warnings,
    )


class _Walker:
    """Depth-first walk in reading order, emitting headings and blocks to a `SectionBuilder`."""

    def __init__(self, builder: SectionBuilder, root: Tag, footnotes: Footnotes) -> None:
        self.builder = builder
        self.footnotes = footnotes
        self.placed: set[int] = set()
        """ids of the footnote bodies already emitted after their marker."""
        self.placing: int | None = None
        """id of the footnote body being emitted (the one relocated body `walk` does not skip)."""
        self.pending_label: str | None = None
        """Label the next block gets as `[label] ` unless it already starts with it."""
        self.block_holders = _block_holders(root)
        """ids of the elements that contain a block-level element (computed once, bottom-up)."""
        self.list_depth = 0
        self.pending_marker = False
        """The next block emitted starts a list item."""

    def walk(self, element: Tag) -> None:
        """Emit `element`'s headings and blocks."""
        if _is_skipped(element):
            return
        if self.footnotes.relocated(element) and id(element) != self.placing:
            return
        name = element.name
        if name in _HEADINGS:
            self.builder.heading(_HEADINGS[name], clean_inline(element.get_text()), heading_anchor(element))
            self._emit_citing("paragraph", "", [element])
            return
        if name == "pre":
            self._emit_citing("code", clean_preformatted(element.get_text()), [element])
            return
        if name == "table" and not _has_block_content(element):
            self._emit_citing("table", _table_text(element), [element])
            return
        if name == "li":
            self.list_depth += 1
            self.pending_marker = True
        try:
            if id(element) not in self.block_holders:
                self._emit_citing(
                    _LEAF_KINDS.get(name, "paragraph"), clean_inline(element.get_text()), [element]
                )
            else:
                self._walk_children(element)
        finally:
            if name == "li":
                self.list_depth -= 1
                self.pending_marker = False

    def place_leftover_footnotes(self) -> None:
        """Emit relocated footnotes whose marker the walk never reached (markers citing each other)."""
        for body in self.footnotes.bodies:
            if id(body) not in self.placed:
                self._walk_footnote(body)

    def _walk_children(self, element: Tag) -> None:
        inline_run: list[str] = []
        inline_tags: list[Tag] = []
        for child in element.children:
            if isinstance(child, Tag) and (child.name in _BLOCK_TAGS or id(child) in self.block_holders):
                self._emit_citing("paragraph", clean_inline("".join(inline_run)), inline_tags)
                inline_run, inline_tags = [], []
                self.walk(child)
            elif isinstance(child, Tag):
                if not _is_skipped(child):
                    inline_run.append(child.get_text())
                    inline_tags.append(child)
            elif isinstance(child, NavigableString) and not isinstance(child, _IGNORED_STRINGS):
                inline_run.append(str(child))
        self._emit_citing("paragraph", clean_inline("".join(inline_run)), inline_tags)

    def _emit_citing(self, kind: BlockKind, text: str, elements: list[Tag]) -> None:
        """Emit a block made of `elements`, then the footnotes it is the first to cite."""
        bodies: dict[int, Tag] = {}  # by id(): bs4 compares tags by their markup, and two notes may match
        marker_text = ""
        for element in elements:
            for marker in self.footnotes.markers_in(element):
                marker_text += marker.get_text()
                body = self.footnotes.body_of_marker[id(marker)]
                if self.footnotes.relocated(body) and id(body) not in self.placed:
                    bodies.setdefault(id(body), body)
        # A paragraph holding nothing but the markers (DocBook puts one after a list) would only repeat
        # the labels the footnotes start with.
        if not bodies or "".join(text.split()) != "".join(marker_text.split()):
            self._emit(kind, text)
        for body in bodies.values():
            self._walk_footnote(body)

    def _walk_footnote(self, body: Tag) -> None:
        self.placed.add(id(body))
        # A footnote cited from a list item is not itself part of the list.
        saved = (self.list_depth, self.pending_marker, self.placing)
        self.list_depth, self.pending_marker, self.placing = 0, False, id(body)
        self.pending_label = self.footnotes.label_of_body[id(body)]
        try:
            if body.name == "li":
                self._walk_children(body)
            else:
                self.walk(body)
        finally:
            self.list_depth, self.pending_marker, self.placing = saved
            self.pending_label = None

    def _emit(self, kind: BlockKind, text: str) -> None:
        if not text.strip():
            return
        if self.pending_label is not None:
            labelled = labelled_text(self.pending_label, text)
            if labelled is None:
                return
            text, self.pending_label = labelled, None
        if self.pending_marker:
            indent = "  " * max(self.list_depth - 1, 0)
            text, kind = f"{indent}- {text}", "list_item"
            self.pending_marker = False
        self.builder.block(kind, text)


def heading_anchor(heading: Tag) -> str | None:
    """The id a link to this heading would use (see the module docstring for the order tried)."""
    if heading.get("id"):
        return str(heading["id"])
    inner = heading.find("a", attrs={"id": True}) or heading.find("a", attrs={"name": True})
    if isinstance(inner, Tag):
        return str(inner.get("id") or inner.get("name"))
    previous = heading.find_previous_sibling()
    if isinstance(previous, Tag) and previous.name == "a" and not previous.get_text(strip=True):
        value = previous.get("id") or previous.get("name")
        if value:
            return str(value)
    for ancestor in heading.parents:
        if ancestor.name in ("body", "html", "[document]"):
            break
        if ancestor.get("id") and ancestor.find(list(_HEADINGS)) is heading:
            return str(ancestor["id"])
    return None


def _is_skipped(element: Tag) -> bool:
    if element.name in _SKIP_TAGS:
        return True
    if element.get("role") == "navigation" or element.get("aria-hidden") == "true":
        return True
    classes = element.get_attribute_list("class")
    if any(cls in _SKIP_CLASSES for cls in classes):
        return True
    # Page-level header/footer are site chrome; inside an article they are content.
    return (
        element.name in ("header", "footer") and element.parent is not None and element.parent.name == "body"
    )


def _block_holders(root: Tag) -> set[int]:
    holders: set[int] = set()
    # A plain descendants loop: bs4's find_all filter machinery is several times slower here.
    blocks = [el for el in root.descendants if isinstance(el, Tag) and el.name in _BLOCK_TAGS]
    for block in blocks:
        for ancestor in block.parents:
            if id(ancestor) in holders:
                break
            holders.add(id(ancestor))
    return holders


def _has_block_content(table: Tag) -> bool:
    """A layout table (DocBook admonitions) holds paragraphs or lists; a data table holds only cells."""
    return any(isinstance(el, Tag) and el.name in _LAYOUT_MARKERS for el in table.descendants)


def _table_text(table: Tag) -> str:
    rows = []
    for row in table.find_all("tr"):
        cells = [clean_inline(cell.get_text()) for cell in row.find_all(["th", "td"])]
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)
