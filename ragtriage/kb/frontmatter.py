"""Markdown front matter: YAML between a leading `---` line and the next `---` (or `...`) line.

Keys (all optional): `doc_id`, `title`, `product_line`, `version`, `updated_at`, `status`
(`published` | `ready`), `tags`. Other keys are kept as `DocumentMeta.extra`.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml

from ragtriage.kb.document import DocumentLoadError, DocumentMeta
from ragtriage.wording import quoted

_FENCE = "---"
_CLOSERS = ("---", "...")
_STATUSES = ("published", "ready")
_FIX_YAML = "fix the YAML between the leading --- lines (quote values that contain ':' or '#')"


def split_front_matter(text: str, path: Path | str) -> tuple[DocumentMeta, str, int]:
    """Split `text` into (metadata, body, number of lines the front matter took).

    Raises:
        DocumentLoadError: unclosed block, bad YAML, a non-mapping or a bad value (names file and line).
    """
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != _FENCE:
        return DocumentMeta(), text, 0
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _CLOSERS), None)
    if end is None:
        raise DocumentLoadError(
            path,
            "front matter starts with --- but is never closed",
            "add a closing --- line after the metadata, or remove the opening ---",
            line=1,
        )
    block = "\n".join(lines[1:end])
    try:
        data = yaml.safe_load(block) if block.strip() else {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        context_mark = getattr(error, "context_mark", None)
        if context_mark is not None and mark is not None and context_mark.line != mark.line:
            # PyYAML notices an unclosed [ or { only on a later line; point at where it opened too.
            problem = f"{problem} (in the value that starts on line {context_mark.line + 2})"
        raise DocumentLoadError(
            path, f"front matter is not valid YAML: {problem}", _FIX_YAML, line=line
        ) from None
    if not isinstance(data, dict):
        raise DocumentLoadError(
            path, f"front matter must be key: value pairs, got {type(data).__name__}", _FIX_YAML, line=2
        )
    meta = _meta_from_mapping(data, lines[1:end], path)
    body = "\n".join(lines[end + 1 :])
    return meta, body, end + 1


def _meta_from_mapping(data: dict[Any, Any], block_lines: list[str], path: Path | str) -> DocumentMeta:
    def line_of(key: str) -> int:
        for index, line in enumerate(block_lines):
            if line.startswith(f"{key}:") or line.startswith(f"{key} :"):
                return index + 2
        return 1

    def text_value(key: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, (dict, list)):
            raise DocumentLoadError(
                path,
                f"front matter key {quoted(key)} must be a single value",
                f"write `{key}: <text>`",
                line=line_of(key),
            )
        return str(value).strip() or None

    status = text_value("status")
    if status is not None and status not in _STATUSES:
        raise DocumentLoadError(
            path,
            f"front matter status {quoted(status)} is not one of {', '.join(_STATUSES)}",
            "use `status: published` (retrievable) or `status: ready` (stored, not indexed)",
            line=line_of("status"),
        )
    updated_at = data.get("updated_at")
    if updated_at is not None and not isinstance(updated_at, (dt.date, dt.datetime)):
        try:
            updated_at = dt.datetime.fromisoformat(str(updated_at).strip())
        except ValueError:
            raise DocumentLoadError(
                path,
                f"front matter updated_at {quoted(updated_at)} is not an ISO date",
                "write `updated_at: 2024-05-01` or `2024-05-01T09:30:00`",
                line=line_of("updated_at"),
            ) from None
    tags = data.get("tags") or []
    if isinstance(tags, str):
        tags = [part.strip() for part in tags.split(",") if part.strip()]
    if not isinstance(tags, list):
        raise DocumentLoadError(
            path, "front matter tags must be a list", "write `tags: [a, b]`", line=line_of("tags")
        )
    known = {"doc_id", "title", "product_line", "version", "updated_at", "status", "tags"}
    return DocumentMeta(
        doc_id=text_value("doc_id"),
        title=text_value("title"),
        product_line=text_value("product_line"),
        doc_version=text_value("version"),
        updated_at=updated_at.isoformat() if updated_at is not None else None,
        status=status,  # type: ignore[arg-type]
        tags=[str(tag) for tag in tags],
        extra=json.loads(json.dumps({str(k): v for k, v in data.items() if k not in known}, default=str)),
    )
