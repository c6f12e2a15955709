"""Query normalization: Unicode NFKC (full-width → half-width), whitespace collapse, strip."""

from __future__ import annotations

import re
import unicodedata

from ragtriage.errors import InputError

_WHITESPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFKC-fold `text` (so `Ｅ１００１` → `E1001`, the ideographic space → a space), collapse runs of
    whitespace to one space and strip both ends. Never raises; may return an empty string."""
    folded = unicodedata.normalize("NFKC", text)
    return _WHITESPACE.sub(" ", folded).strip()


def normalize_query(raw_query: str) -> str:
    """The normalized form of a user query; the caller keeps `raw_query` as it was.

    Raises:
        InputError: the query is empty or only whitespace.
    """
    normalized = normalize_text(raw_query)
    if not normalized:
        raise InputError("empty query; pass --query with text")
    return normalized
