"""Reports the KB service returns: what an add or remove did, and the KB's counts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["AddReport", "FailedFile", "FileWarning", "KBStats", "RemoveReport"]


class FailedFile(BaseModel):
    """A file that was not added, why, and what to do about it."""

    path: str
    reason: str
    fix: str
    line: int | None = None

    def message(self) -> str:
        """`path[:line]: reason; fix: …` (one line)."""
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}; fix: {self.fix}"


class FileWarning(BaseModel):
    """A file that was added with a caveat (e.g. HTML without headings)."""

    path: str
    message: str


class AddReport(BaseModel):
    """What one `add_paths` call did. `files_seen = added + changed + unchanged + len(failed)`."""

    files_seen: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    """Documents marked deleted (gone from a folder that was added before); not counted in files."""
    failed: list[FailedFile] = Field(default_factory=list)
    warnings: list[FileWarning] = Field(default_factory=list)
    added_doc_ids: list[str] = Field(default_factory=list)
    changed_doc_ids: list[str] = Field(default_factory=list)
    deleted_doc_ids: list[str] = Field(default_factory=list)
    chunks_written: int = 0
    """Chunks of added or changed documents."""
    kb_revision: int = 0
    index: dict[str, Any] | None = None
    """The indexer's report, when indexing ran."""
    index_skipped: str | None = None
    """Why indexing did not run (`--no-index`, indexer not installed)."""

    @property
    def adds_up(self) -> bool:
        """The file counts account for every file seen."""
        return self.files_seen == self.added + self.changed + self.unchanged + len(self.failed)


class RemoveReport(BaseModel):
    """What `remove_documents` did."""

    removed: list[str] = Field(default_factory=list)
    already_deleted: list[str] = Field(default_factory=list)
    chunks_deleted: int = 0
    kb_revision: int = 0
    index: dict[str, Any] | None = None
    index_skipped: str | None = None


class KBStats(BaseModel):
    """Counts by status and the KB revision."""

    kb: str
    revision: int
    revision_updated_at: str | None = None
    documents: dict[str, int] = Field(default_factory=dict)
    chunks: dict[str, int] = Field(default_factory=dict)

    @property
    def retrievable_chunks(self) -> int:
        """Published chunks (the only ones the indexes hold)."""
        return self.chunks.get("published", 0)
