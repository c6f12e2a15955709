"""Word (.docx) and PowerPoint (.pptx) → `LoadedDocument` with python-docx and python-pptx.

Word: a paragraph is a heading when its outline level (set on the paragraph or inherited from its
style, as Word's built-in `Heading 1`–`Heading 9` styles do) or its style name (`Heading N`,
`标题 N`) says so. The first `Title`-styled paragraph, else the document properties' title, else the
file name is the document title. A heading's anchor is the Word bookmark on it (`_Toc…` when the
document has a table of contents), else a GitHub-style slug of its text. Lists become list items
(indented by level), tables `a | b` rows; table-of-contents entries are skipped.

PowerPoint: each slide is a section headed by its title (`Slide N` without one), anchor `slide=N`.
Its shapes are read top to bottom, left to right: placeholder text as list items, text boxes as
paragraphs, tables as rows; speaker notes follow the slide's text.

Encrypted files (Office stores them as OLE containers, not ZIP) and damaged ones fail with a fix.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import docx
import pptx
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.exc import PackageNotFoundError as PptxPackageNotFoundError

from ragtriage.kb.document import DocumentLoadError, LoadedDocument, SectionBuilder
from ragtriage.kb.text import SlugCounter, clean_inline, github_slug

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_NAME = re.compile(r"^(?:heading|标题)\s*([1-9])$", re.IGNORECASE)
_SKIPPED_STYLES = re.compile(r"^(?:toc\b|toc heading$|目录)", re.IGNORECASE)
_BODY_PLACEHOLDERS = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY}


def load_docx(path: Path, *, default_title: str) -> LoadedDocument:
    """Parse a Word document into sections by its heading styles.

    Raises:
        DocumentLoadError: encrypted, damaged or not a .docx file.
    """
    document = _open(path, docx.Document, "Word", "File › Info › Protect Document")
    builder = SectionBuilder()
    slugs = SlugCounter()
    title: str | None = None
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            builder.block("table", _docx_table_text(item))
            continue
        style_name = item.style.name if item.style is not None else ""
        if _SKIPPED_STYLES.match(style_name or ""):
            continue
        text = clean_inline(item.text)
        if not text:
            continue
        if style_name == "Title" and title is None and builder.heading_count == 0:
            title = text
            continue
        level = heading_level(item)
        if level is not None:
            builder.heading(level, text, _bookmark(item) or slugs.unique(github_slug(text)) or None)
        elif _is_list_item(item, style_name):
            indent = "  " * _list_level(item)
            builder.block("list_item", f"{indent}- {text}")
        else:
            builder.block("quote" if "quote" in (style_name or "").lower() else "paragraph", text)
    title = title or clean_inline(document.core_properties.title or "") or default_title
    warnings = [] if builder.heading_count else ["no heading styles: loaded as one section"]
    return LoadedDocument(
        title=title, sections=builder.sections(title), source_path=str(path), format="docx", warnings=warnings
    )


def heading_level(paragraph: Paragraph) -> int | None:
    """1–9 for a heading (outline level, else a `Heading N` style name), None for body text."""
    level = _outline_level(paragraph._p.pPr)  # noqa: SLF001 (python-docx exposes no outline level)
    style = paragraph.style
    while level is None and style is not None:
        level = _outline_level(style.element.pPr)
        match = _HEADING_NAME.match(style.name or "")
        if level is None and match:
            level = int(match.group(1)) - 1
        style = style.base_style
    return level + 1 if level is not None else None


def _outline_level(ppr: Any) -> int | None:
    if ppr is None:
        return None
    element = ppr.find(qn("w:outlineLvl"))
    if element is None:
        return None
    value = int(element.get(qn("w:val"), "9"))
    return value if value < 9 else None  # 9 is Word's "body text"


def _bookmark(paragraph: Paragraph) -> str | None:
    for mark in paragraph._p.iter(qn("w:bookmarkStart")):  # noqa: SLF001
        name = mark.get(qn("w:name"))
        if name and name != "_GoBack":
            return str(name)
    return None


def _is_list_item(paragraph: Paragraph, style_name: str) -> bool:
    return _numbering(paragraph) is not None or style_name.startswith("List")


def _list_level(paragraph: Paragraph) -> int:
    numbering = _numbering(paragraph)
    level = numbering.find(qn("w:ilvl")) if numbering is not None else None
    return int(level.get(qn("w:val"), "0")) if level is not None else 0


def _numbering(paragraph: Paragraph) -> Any:
    """The paragraph's own `w:numPr` (list numbering), or None."""
    ppr = paragraph._p.pPr  # noqa: SLF001
    return ppr.find(qn("w:numPr")) if ppr is not None else None


def _docx_table_text(table: Table) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = clean_inline(cell.text)
            # A merged cell is returned once per grid column it spans.
            if not cells or cells[-1] != text:
                cells.append(text)
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def load_pptx(path: Path, *, default_title: str) -> LoadedDocument:
    """Parse a PowerPoint deck into one section per slide.

    Raises:
        DocumentLoadError: encrypted, damaged or not a .pptx file.
    """
    deck = _open(path, pptx.Presentation, "PowerPoint", "File › Info › Protect Presentation")
    builder = SectionBuilder()
    first_title: str | None = None
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        heading = clean_inline(title_shape.text_frame.text) if title_shape is not None else ""
        first_title = first_title or heading or None
        builder.heading(1, heading or f"Slide {number}", f"slide={number}")
        title_id = title_shape.shape_id if title_shape is not None else None
        for shape in _reading_order(slide.shapes):
            if shape.shape_id != title_id:
                _pptx_shape(builder, shape)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            for paragraph in slide.notes_slide.notes_text_frame.paragraphs:
                builder.block("paragraph", clean_inline(paragraph.text))
    title = clean_inline(deck.core_properties.title or "") or first_title or default_title
    return LoadedDocument(title=title, sections=builder.sections(title), source_path=str(path), format="pptx")


def _reading_order(shapes: Iterable[Any]) -> list[Any]:
    return sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))


def _pptx_shape(builder: SectionBuilder, shape: Any) -> None:
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in _reading_order(shape.shapes):
            _pptx_shape(builder, inner)
        return
    if getattr(shape, "has_table", False):
        rows = [" | ".join(clean_inline(cell.text) for cell in row.cells) for row in shape.table.rows]
        builder.block("table", "\n".join(row for row in rows if row.strip(" |")))
        return
    if not getattr(shape, "has_text_frame", False):
        return
    as_list = shape.is_placeholder and shape.placeholder_format.type in _BODY_PLACEHOLDERS
    for paragraph in shape.text_frame.paragraphs:
        text = clean_inline(paragraph.text.replace("\x0b", "\n"))
        if as_list and text:
            builder.block("list_item", f"{'  ' * paragraph.level}- {text}")
        else:
            builder.block("paragraph", text)


def _open(path: Path, opener: Any, product: str, menu: str) -> Any:
    try:
        return opener(str(path))
    except (
        PackageNotFoundError,
        PptxPackageNotFoundError,
        zipfile.BadZipFile,
        KeyError,
        ValueError,
    ) as error:
        with path.open("rb") as handle:
            head = handle.read(len(_OLE_MAGIC))
        if head == _OLE_MAGIC:
            raise DocumentLoadError(
                path,
                f"encrypted with a password, or an old binary {product} file renamed to {path.suffix}",
                f"remove the password ({menu}) or re-save it as {path.suffix} in {product}, and add it again",
            ) from None
        raise DocumentLoadError(
            path,
            f"not a readable {path.suffix} file ({type(error).__name__})",
            f"open it in {product} and save it again as {path.suffix}",
        ) from None
