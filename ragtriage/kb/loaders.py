"""One entry point for every supported file: `load_document(path)` → `LoadedDocument`.

Markdown, HTML, Word/PowerPoint and PDF have their own modules; plain text is handled here: paragraphs are separated by
blank lines, and the first line is the title when it stands alone, is short and does not end like
a sentence (otherwise the file name is the title).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ragtriage.kb.document import (
    LEGACY_SUFFIXES,
    SUFFIX_FORMATS,
    DocumentLoadError,
    LoadedDocument,
    SectionBuilder,
)
from ragtriage.kb.html_loader import decode_html, load_html
from ragtriage.kb.markdown_loader import load_markdown
from ragtriage.kb.text import clean_inline, decode_bytes, looks_binary
from ragtriage.wording import quoted


# python-docx, python-pptx and pypdfium2 take about 0.4 s to import: only a file that needs them
# does (every command imports this module, `--help` screens too).
def _load_docx(path: Path, *, default_title: str) -> LoadedDocument:
    from ragtriage.kb.office_loader import load_docx

    return load_docx(path, default_title=default_title)


def _load_pptx(path: Path, *, default_title: str) -> LoadedDocument:
    from ragtriage.kb.office_loader import load_pptx

    return load_pptx(path, default_title=default_title)


def _load_pdf(path: Path, *, default_title: str) -> LoadedDocument:
    from ragtriage.kb.pdf_loader import load_pdf

    return load_pdf(path, default_title=default_title)


_BINARY_LOADERS: dict[str, Callable[..., LoadedDocument]] = {
    "docx": _load_docx,
    "pptx": _load_pptx,
    "pdf": _load_pdf,
}
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n+")
_TITLE_MAX_CHARS = 80
_SENTENCE_END = tuple("。！？；.!?;：:，,")


def load_document(path: Path) -> LoadedDocument:
    """Read and parse one file by its suffix (.md/.markdown, .html/.htm, .txt, .docx, .pptx, .pdf).

    Raises:
        DocumentLoadError: unsupported suffix, unreadable, empty, binary or undecodable text file,
            broken front matter, encrypted or damaged Office/PDF file, or nothing but markup.
    """
    suffix = path.suffix.lower()
    doc_format = SUFFIX_FORMATS.get(suffix)
    if doc_format is None:
        fix = f"use one of {', '.join(sorted(SUFFIX_FORMATS))}"
        if suffix in LEGACY_SUFFIXES:
            fix = f"save it as {LEGACY_SUFFIXES[suffix]} (File › Save As) and add that"
        raise DocumentLoadError(path, f"unsupported file type {quoted(path.suffix)}", fix)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DocumentLoadError(
            path, f"cannot read the file ({error.strerror})", "check the path and permissions"
        ) from None
    if not data.strip():
        raise DocumentLoadError(path, "empty file", "add content or remove the file from the folder")
    if doc_format in _BINARY_LOADERS:
        document = _BINARY_LOADERS[doc_format](path, default_title=path.stem)
        return _with_text(document, path)
    text = decode_html(data, path) if doc_format == "html" else decode_bytes(data, path)[0]
    if looks_binary(text):
        raise DocumentLoadError(
            path, "binary content (mostly control characters), not text", "remove it or convert it to text"
        )
    default_title = path.stem
    if doc_format == "markdown":
        document = load_markdown(text, path, default_title=default_title)
    elif doc_format == "html":
        document = load_html(text, path, default_title=default_title)
    else:
        document = load_text(text, path, default_title=default_title)
    return _with_text(document, path)


def _with_text(document: LoadedDocument, path: Path) -> LoadedDocument:
    if document.char_count == 0:
        raise DocumentLoadError(
            path, "no text after parsing (only markup or metadata)", "add body text or remove the file"
        )
    return document


def load_text(text: str, path: Path | str, *, default_title: str) -> LoadedDocument:
    """Plain text: one section, one block per paragraph (blank-line separated)."""
    paragraphs = [
        part.strip() for part in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n").lstrip("\ufeff"))
    ]
    paragraphs = [part for part in paragraphs if part]
    title = default_title
    if len(paragraphs) > 1 and _is_title_line(paragraphs[0]):
        title = clean_inline(paragraphs.pop(0))
    builder = SectionBuilder()
    for paragraph in paragraphs:
        builder.block("paragraph", clean_inline(paragraph))
    return LoadedDocument(title=title, sections=builder.sections(title), source_path=str(path), format="text")


def _is_title_line(paragraph: str) -> bool:
    line = paragraph.strip()
    return "\n" not in line and len(line) <= _TITLE_MAX_CHARS and not line.endswith(_SENTENCE_END)
