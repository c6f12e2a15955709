"""Text helpers shared by the loaders: decoding, whitespace clean-up and GitHub-style slugs."""

from __future__ import annotations

import codecs
import re
import unicodedata
from pathlib import Path

from ragtriage.kb.document import DocumentLoadError

#: Byte-order marks we honour, longest first (UTF-32 LE starts with the UTF-16 LE mark).
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_SNIFF_BYTES = 8192
_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# A line break between two CJK characters is a source-formatting artefact, not a word gap.
_CJK_LINE_BREAK = re.compile(rf"(?<=[{_CJK}])[ \t]*\n\s*(?=[{_CJK}])")
_WHITESPACE = re.compile(r"\s+")


def decode_bytes(data: bytes, path: Path | str) -> tuple[str, str]:
    """Decode a text file: BOM, then UTF-8, then GB18030. Returns (text, encoding used).

    Raises:
        DocumentLoadError: the file is binary (NUL bytes without a UTF-16/32 mark) or in neither encoding.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as error:
                raise _undecodable(path, data, error, encoding) from None
            if _looks_garbled(text):
                # Two bytes FF FE are a UTF-16 mark only if what follows decodes to real text.
                raise DocumentLoadError(
                    path,
                    f"starts with a {encoding} byte-order mark but decodes to unassigned or control "
                    "characters: a binary file, not text",
                    "remove it from the folder or re-save it as UTF-8 text",
                )
            return text, encoding
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise DocumentLoadError(
            path,
            "binary file (contains NUL bytes), not text",
            "remove it from the folder or convert it to .md/.html/.txt",
        )
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as utf8_error:
        try:
            return data.decode("gb18030"), "gb18030"
        except UnicodeDecodeError:
            raise _undecodable(path, data, utf8_error, "utf-8") from None


def _undecodable(
    path: Path | str, data: bytes, error: UnicodeDecodeError, encoding: str
) -> DocumentLoadError:
    line = data[: error.start].count(b"\n") + 1
    return DocumentLoadError(
        path,
        f"cannot decode byte {data[error.start : error.start + 1].hex()} at offset {error.start} "
        f"as {encoding} (GB18030 fails too)",
        "re-save the file as UTF-8, e.g. `iconv -f <its encoding> -t UTF-8`",
        line=line,
    )


def _looks_garbled(text: str) -> bool:
    """True when over 2% of the sample is unassigned, private-use, surrogate or control characters."""
    sample = text[:_SNIFF_BYTES].lstrip("\ufeff")
    if not sample:
        return False
    odd = sum(
        1
        for ch in sample
        if unicodedata.category(ch) in ("Cn", "Co", "Cs", "Cf")
        or (unicodedata.category(ch) == "Cc" and ch not in "\n\r\t\f")
    )
    return odd / len(sample) > 0.02


def looks_binary(text: str) -> bool:
    """True when decoded text is mostly control characters (a binary file that happened to decode)."""
    sample = text[:_SNIFF_BYTES]
    if not sample:
        return False
    controls = sum(1 for ch in sample if unicodedata.category(ch) == "Cc" and ch not in "\n\r\t\f")
    return controls / len(sample) > 0.05


def clean_inline(text: str) -> str:
    """Collapse whitespace to single spaces; drop line breaks between CJK characters."""
    text = _CJK_LINE_BREAK.sub("", text.replace("\r\n", "\n").replace("\xa0", " "))
    return _WHITESPACE.sub(" ", text).strip()


def clean_preformatted(text: str) -> str:
    """Keep a code/pre block's lines; strip trailing spaces and blank edges."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\xa0", " ").split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def github_slug(heading: str) -> str:
    """GitHub's heading anchor: lower-case, punctuation dropped (letters of any script kept), spaces → `-`.

    `## 退款 政策（2024）?` → `退款-政策2024`. Duplicates are numbered by `SlugCounter`.
    """
    kept = []
    for ch in heading.strip().lower():
        category = unicodedata.category(ch)
        if category[0] in "LMN" or category == "Pc" or ch == "-":
            kept.append(ch)
        elif ch == " ":
            kept.append("-")
    return "".join(kept)


class SlugCounter:
    """Numbers repeated slugs the way GitHub does: `faq`, `faq-1`, `faq-2`."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def unique(self, slug: str) -> str:
        """`slug`, or `slug-N` if it was handed out before."""
        count = self._seen.get(slug)
        if count is None:
            self._seen[slug] = 1
            return slug
        self._seen[slug] = count + 1
        candidate = f"{slug}-{count}"
        self._seen.setdefault(candidate, 1)
        return candidate
