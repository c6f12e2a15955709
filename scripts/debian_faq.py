"""The Debian FAQ as a query set: its question headings, read from the HTML (not through the KB loader).

Used by the real-data test and the replay benchmarks. A question heading is an h1–h6 carrying an
id (its own or a child `<a id>`) whose text contains a question mark (？ or ?); the FAQ (zh-cn,
debian-faq 11.1) has 123 of them. The query is the heading without its section number.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEBS_DIR = REPO_ROOT.parent / "shared" / "data" / "debian-docs-zh"
FAQ_PACKAGE = "debian-faq-zh-cn"

#: "8.5. " / "12.2.1. " / "第 8 章 " before the heading text.
SECTION_NUMBER = re.compile(r"^\s*(?:第\s*\d+\s*章|\d+(?:\.\d+)*\.?)\s*")


@dataclass(frozen=True)
class FAQQuestion:
    """One question heading: the page's doc id (`<folder>/<file name without .html>`), its anchor and its text."""

    doc_id: str
    anchor: str
    heading: str

    @property
    def query(self) -> str:
        """The heading without its section number, as a user would type it."""
        return SECTION_NUMBER.sub("", self.heading)


def faq_questions(faq_dir: Path) -> list[FAQQuestion]:
    """Every question heading of the FAQ pages in `faq_dir`, in page and document order."""
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

    questions: list[FAQQuestion] = []
    doc_prefix = f"{faq_dir.resolve().name}/"  # `kb add faq_dir` prefixes ids with the folder name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        for page in sorted(faq_dir.glob("*.html")):
            soup = BeautifulSoup(page.read_text(encoding="utf-8"), "lxml")
            for heading in soup.find_all(re.compile(r"^h[1-6]$")):
                link = heading.find("a", id=True)
                anchor = heading.get("id") or (link.get("id") if link is not None else None)
                text = " ".join(heading.get_text(" ").split())
                if anchor and ("？" in text or "?" in text):
                    questions.append(
                        FAQQuestion(f"{doc_prefix}{page.name.removesuffix('.html')}", str(anchor), text)
                    )
    return questions


def debs_available(debs_dir: Path = DEFAULT_DEBS_DIR) -> bool:
    """True when the FAQ package is in `debs_dir`."""
    return debs_dir.is_dir() and any(debs_dir.glob(f"{FAQ_PACKAGE}_*.deb"))


def ensure_extracted(out_dir: Path, debs_dir: Path = DEFAULT_DEBS_DIR) -> Path:
    """Extract the FAQ and the Reference into `out_dir` (`faq/`, `reference/`) unless already there."""
    if not (out_dir / "faq").is_dir() or not (out_dir / "reference").is_dir():
        from ragtriage_demo.debian_docs import extract

        extract(debs_dir, out_dir)
    return out_dir
