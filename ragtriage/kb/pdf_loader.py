"""PDF → `LoadedDocument` with pypdfium2 (PDFium's text layer: fast, keeps CJK text intact).

Sections come from the PDF outline (bookmarks): each bookmark starts a section at the point its
destination names (page and height), and its depth in the outline is the heading level. The text
above the first bookmark is the lead section. A PDF without an outline is one section. A section's
anchor is `page=N` (1-based), the fragment PDF viewers open (RFC 8118).

The text layer has one line per printed line, so paragraphs are rebuilt: a line ends a paragraph
when it ends a sentence or stops well short of the text width; bullet lines start list items. Lines
repeated at the top or bottom of most pages (running headers, page numbers) and table-of-contents
lines (dot leaders) are dropped. Pages with no text are skipped, and named in a warning when an
image covers them (a scan). A PDF with no text at all, an encrypted PDF or a damaged one fails with
the reason and the fix.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pypdfium2 as pdfium  # type: ignore[import-untyped]
import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped]

from ragtriage.kb.document import BlockKind, DocumentLoadError, LoadedDocument, SectionBuilder
from ragtriage.kb.text import clean_inline

_BULLETS = "•◦▪‣●○■□–·"
_SENTENCE_END = tuple("。！？；：.!?;:")
_TOC_LEADER = re.compile(r"(?:\s*\.){4,}\s*[0-9ivxlcdm]+\s*$", re.IGNORECASE)
_ROMAN = re.compile(r"\b[ivxlcdm]+\b", re.IGNORECASE)
_NOT_SHAPE = re.compile(r"[\d\s\W_]+")
_NOT_WORD = re.compile(r"[\W_]+")
_TOC_ENTRY = re.compile(r"^(?:[0-9A-Z]+(?:\.[0-9]+)*\.?\s+)?(.+?)\s+[0-9ivxlcdm]+$", re.IGNORECASE)
_HAN = r"\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# PDFium reads the stretched glyph gaps of a justified CJK line as spaces: `对 于 使 用`.
_SPREAD_CJK = re.compile(rf"(?<=[{_HAN}]) (?=[{_HAN}])")
_SPREAD_MIN_GAPS = 3
_FULL_LINE_SHARE = 0.85
"""A line at least this share of the usual line width runs on into the next line."""
_RUNNING_LINE_SHARE = 0.3
"""A first/last page line whose shape repeats on this share of pages is a running header/footer."""
_SCAN_AREA_SHARE = 0.6
"""A page without text whose images cover this share of it is a scan."""


@dataclass
class _Bookmark:
    level: int
    title: str
    page: int
    top: float | None
    """Height of the destination on the page (PDF units from the bottom); None = top of the page."""


@dataclass
class _Segment:
    """Text of one page between two bookmark positions; `bookmark` starts it (None: it continues)."""

    page: int
    bookmark: _Bookmark | None
    lines: list[str] = field(default_factory=list)


def load_pdf(path: Path, *, default_title: str) -> LoadedDocument:
    """Parse the PDF at `path` into sections by its outline.

    Raises:
        DocumentLoadError: encrypted (password needed), damaged or not a PDF, or no text on any page.
    """
    pdf = _open(path)
    try:
        title = clean_inline(pdf.get_metadata_dict().get("Title", "")) or default_title
        bookmarks = _bookmarks(pdf)
        segments, blank_scans, page_count = _segments(pdf, bookmarks)
    finally:
        pdf.close()
    if not any(segment.lines for segment in segments):
        raise DocumentLoadError(
            path,
            f"no text on any of its {page_count} pages (a scanned PDF has only images)",
            "run OCR first (e.g. `ocrmypdf in.pdf out.pdf`) and add the OCR'd file",
        )
    _drop_running_lines(segments, page_count)
    builder = SectionBuilder()
    toc_titles = {_squash(mark.title) for mark in bookmarks}
    paragraphs = _ParagraphBuilder(builder, _usual_width(segments), toc_titles)
    for segment in segments:
        lines = segment.lines
        if segment.bookmark is not None:
            paragraphs.flush()
            mark = segment.bookmark
            builder.heading(mark.level, mark.title, f"page={mark.page + 1}")
            lines = _without_heading_lines(lines, mark.title)
        for line in lines:
            paragraphs.add(line)
    paragraphs.flush()
    warnings = []
    if blank_scans:
        shown = ", ".join(str(page + 1) for page in blank_scans[:10])
        more = f" and {len(blank_scans) - 10} more" if len(blank_scans) > 10 else ""
        warnings.append(
            f"pages {shown}{more} are images without text (scanned?): their content is not in the KB; "
            "run OCR on the file to include it"
        )
    if not bookmarks:
        warnings.append(
            "no outline (bookmarks): loaded as one section titled from the PDF metadata or file name"
        )
    return LoadedDocument(
        title=title, sections=builder.sections(title), source_path=str(path), format="pdf", warnings=warnings
    )


def _open(path: Path) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as error:
        if error.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise DocumentLoadError(
                path,
                "encrypted PDF: it needs a password to open",
                "save an unencrypted copy (e.g. `qpdf --decrypt --password=PASSWORD in.pdf out.pdf`) and add that",
            ) from None
        if error.err_code == pdfium_c.FPDF_ERR_SECURITY:
            raise DocumentLoadError(
                path, "PDF with an unsupported security handler", "save an unencrypted copy and add that"
            ) from None
        raise DocumentLoadError(
            path, "not a readable PDF (damaged or another format)", "re-export or re-download the file"
        ) from None


def _bookmarks(pdf: pdfium.PdfDocument) -> list[_Bookmark]:
    """Outline entries that point at a page, in page and height order, level 1 = outermost."""
    found = []
    for item in pdf.get_toc(max_depth=16):
        title = clean_inline(item.get_title())
        dest = item.get_dest()
        page = dest.get_index() if dest is not None else None
        if not title or page is None:
            continue
        mode, position = dest.get_view()
        top = position[1] if mode == pdfium_c.PDFDEST_VIEW_XYZ and len(position) >= 2 else None
        found.append(_Bookmark(item.level + 1, title, page, top))
    # Outline order is reading order in practice; sorting guards against the odd out-of-order entry.
    return sorted(found, key=lambda mark: (mark.page, -(mark.top if mark.top is not None else float("inf"))))


def _segments(pdf: pdfium.PdfDocument, bookmarks: list[_Bookmark]) -> tuple[list[_Segment], list[int], int]:
    """Every page's text cut at its bookmarks; also the pages that are images without text."""
    by_page: dict[int, list[_Bookmark]] = {}
    for mark in bookmarks:
        by_page.setdefault(mark.page, []).append(mark)
    segments: list[_Segment] = []
    scans: list[int] = []
    page_count = len(pdf)
    for index in range(page_count):
        page = pdf[index]
        textpage = page.get_textpage()
        try:
            left, bottom, right, top = page.get_bbox()
            marks = by_page.get(index, [])
            cuts = [top, *(min(mark.top, top) if mark.top is not None else top for mark in marks), bottom]
            starts: list[_Bookmark | None] = [None, *marks]
            page_text = 0
            for number, start in enumerate(starts):
                text = textpage.get_text_bounded(
                    left=left, bottom=cuts[number + 1], right=right, top=cuts[number]
                )
                lines = [_unspread(line.strip()) for line in text.splitlines() if line.strip()]
                page_text += len(lines)
                segments.append(_Segment(index, start, lines))
            if page_text == 0 and _image_share(page) >= _SCAN_AREA_SHARE:
                scans.append(index)
        finally:
            textpage.close()
            page.close()
    return segments, scans, page_count


def _unspread(line: str) -> str:
    """Drop the spaces between CJK characters of a letter-spaced line (three such gaps or more)."""
    gaps = len(_SPREAD_CJK.findall(line))
    return _SPREAD_CJK.sub("", line) if gaps >= _SPREAD_MIN_GAPS else line


def _image_share(page: pdfium.PdfPage) -> float:
    width, height = page.get_size()
    covered = 0.0
    for image in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
        left, bottom, right, top = image.get_bounds()
        covered += max(right - left, 0) * max(top - bottom, 0)
    return covered / (width * height) if width and height else 0.0


def _line_shape(line: str) -> str:
    """A line with page numbers (arabic or roman), spaces and punctuation removed."""
    return _NOT_SHAPE.sub("", _ROMAN.sub("", line)).lower()


def _page_edges(segments: list[_Segment]) -> Iterator[tuple[_Segment, int]]:
    """(segment, line index) of the first and the last line of every page."""
    by_page: dict[int, list[_Segment]] = {}
    for segment in segments:
        if segment.lines:
            by_page.setdefault(segment.page, []).append(segment)
    for page_segments in by_page.values():
        yield page_segments[0], 0
        yield page_segments[-1], len(page_segments[-1].lines) - 1


def _drop_running_lines(segments: list[_Segment], page_count: int) -> None:
    """Remove running headers/footers and bare page numbers from the top and bottom of every page."""
    edges = list(_page_edges(segments))
    counts = Counter(_line_shape(segment.lines[index]) for segment, index in edges)
    threshold = max(3, _RUNNING_LINE_SHARE * page_count)
    doomed: dict[int, set[int]] = {}
    for segment, index in edges:
        shape = _line_shape(segment.lines[index])
        if shape == "" or counts[shape] >= threshold:
            doomed.setdefault(id(segment), set()).add(index)
    for segment in segments:
        drop = doomed.get(id(segment))
        if drop:
            segment.lines = [line for i, line in enumerate(segment.lines) if i not in drop]


def _squash(text: str) -> str:
    """Letters and digits only, NFKC-folded and lower-cased: `"$PATH" 变量` and `”$PATH” 变量` agree."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text)).lower()


def _without_heading_lines(lines: list[str], title: str) -> list[str]:
    """`lines` without the printed heading the bookmark points at (`Chapter 1`, `1.1.1 title`, …)."""
    wanted = _squash(title)
    seen = ""
    for count, line in enumerate(lines[:4], start=1):
        seen += _squash(line)
        if wanted and wanted in seen:
            return lines[count:] if len(seen) <= len(wanted) + 20 else lines
    return lines


def display_width(text: str) -> int:
    """Terminal-style width: East Asian wide and full-width characters count 2."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _usual_width(segments: list[_Segment]) -> int:
    """The 90th percentile line width: what a full line of body text measures."""
    widths = sorted(display_width(line) for segment in segments for line in segment.lines)
    return widths[int(len(widths) * 0.9)] if widths else 0


class _ParagraphBuilder:
    """Joins printed lines into paragraph and list-item blocks."""

    def __init__(self, builder: SectionBuilder, usual_width: int, toc_titles: set[str]) -> None:
        self.builder = builder
        self.toc_titles = toc_titles
        """Squashed outline titles: a line `1.2 <title> 17` is a table-of-contents entry."""
        self.full_width = usual_width * _FULL_LINE_SHARE
        self.lines: list[str] = []
        self.kind: BlockKind = "paragraph"

    def add(self, line: str) -> None:
        """Take the next printed line."""
        if _TOC_LEADER.search(line) or self._is_toc_entry(line):
            return
        if line[0] in _BULLETS:
            self.flush()
            self.kind = "list_item"
            line = f"- {line[1:].strip()}"
        self.lines.append(line)
        if line.endswith(_SENTENCE_END) or display_width(line) < self.full_width:
            self.flush()

    def _is_toc_entry(self, line: str) -> bool:
        match = _TOC_ENTRY.match(line)
        return match is not None and _squash(match.group(1)) in self.toc_titles

    def flush(self) -> None:
        """End the current block."""
        if self.lines:
            self.builder.block(self.kind, clean_inline("\n".join(self.lines)))
        self.lines = []
        self.kind = "paragraph"
