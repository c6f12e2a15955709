"""Re-importing the file of the last import: skip the row pass when nothing can differ.

A daily `kb import chunks.parquet` mostly brings the same file again. The row pass (read, map, check
and hash every row) then finds every row unchanged: 8 s for 100k rows. When the source file's bytes,
the import settings and the KB are exactly those the last import left, that pass cannot find a
difference, so its counts are the last import's and nothing is read again.

The fingerprint is the SHA-256 of the file's bytes and of everything that maps a row to a chunk
(the merged `--map`, `[kb.import]`, the vector field, the encoding, the embedder the vectors are
recorded under, `--full` and `--skip-bad-rows`). It is kept, with the KB revision the import left
and its counts, in `<home>/last_import.json`. Every write to the KB's chunks bumps the KB
revision (`kb add`, `kb remove`, an import), so a changed KB never takes the shortcut, nor do
stale indexes (`import_apply` also requires the index manifest to be at that revision).
SQL and Qdrant sources are always read: their data has no bytes to fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ragtriage import locations
from ragtriage.kb.import_report import ImportReport

__all__ = ["file_fingerprint", "last_import_report", "record_import"]

_READ_SIZE = 1 << 20
#: Report fields copied from the last import (the rest describe the work this import did).
_KEPT = (
    "read",
    "deleted",
    "deleted_by",
    "rejected",
    "rejected_rows",
    "vectors",
    "vector_dim",
    "vector_embedder",
    "absent_mapped",
    "absent_mapped_first",
    "mapping_warnings",
    "recognised",
    "recognised_map",
)


def file_fingerprint(path: Path, settings: dict[str, Any]) -> str:
    """SHA-256 (hex) of the file's bytes and the JSON of `settings` (everything that maps its rows).

    Raises:
        OSError: the file cannot be read (the import itself names it).
    """
    digest = hashlib.sha256()
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode("utf-8"))
    with path.open("rb") as handle:
        while block := handle.read(_READ_SIZE):
            digest.update(block)
    return digest.hexdigest()


def _record_path(home: Path) -> Path:
    return locations.last_import_path(home)


def last_import_report(
    home: Path, kb: str, fingerprint: str, revision: int, source: str
) -> ImportReport | None:
    """The report of a re-import that would change nothing, or None if the rows must be read.

    Its rows are those of the last import, all counted unchanged (or deleted/rejected as then);
    `same_source_as_last` is set. None unless the last import into this home had `fingerprint`,
    was into KB `kb` and left it at `revision` (the KB's current revision).
    """
    try:
        record = json.loads(_record_path(home).read_text(encoding="utf-8"))
        if record["fingerprint"] != fingerprint or record["kb"] != kb or record["kb_revision"] != revision:
            return None
        last = ImportReport.model_validate(record["report"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no record, or one this version cannot read: read the rows
    report = ImportReport(source=source, **{name: getattr(last, name) for name in _KEPT})
    report.unchanged = last.added + last.changed + last.unchanged
    report.kb_revision = revision
    report.same_source_as_last = True
    return report


def record_import(home: Path, kb: str, fingerprint: str | None, report: ImportReport) -> None:
    """Keep `fingerprint` with the KB revision and counts `report` left (None: forget the last one)."""
    path = _record_path(home)
    if fingerprint is None:
        path.unlink(missing_ok=True)
        return
    record = {
        "fingerprint": fingerprint,
        "kb": kb,
        "kb_revision": report.kb_revision,
        "report": report.model_dump(
            mode="json", include=set(_KEPT) | {"source", "added", "changed", "unchanged"}
        ),
    }
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    os.replace(partial, path)  # a reader never sees half a record
