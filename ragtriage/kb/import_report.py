"""What one `kb import` did: `read = added + changed + unchanged + deleted + rejected`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["ImportReport", "RejectedRow"]


class RejectedRow(BaseModel):
    """A row left out with `--skip-bad-rows`: where it is, why, and the fix."""

    where: str
    reason: str
    fix: str

    def message(self) -> str:
        """`where: reason; fix: …` (one line)."""
        return f"{self.where}: {self.reason}; fix: {self.fix}"


class ImportReport(BaseModel):
    """Counts of one import. Every row read lands in exactly one of the five row counts."""

    source: str
    read: int = 0
    """Rows read from the source."""
    added: int = 0
    """Retrievable chunks that were not in the KB (or were deleted there)."""
    changed: int = 0
    """Retrievable chunks whose row differs from the stored one (new chunk version when the content did)."""
    unchanged: int = 0
    deleted: int = 0
    """Rows the status filters exclude (`deleted`, not `published`, a status outside
    `[kb.import] retrievable_statuses`): stored as deleted chunks."""
    deleted_by: dict[str, int] = Field(default_factory=dict)
    """`deleted` per filter: `deleted`, `not published`, `status <value as given>`."""
    rejected: int = 0
    """Bad rows left out (only with `--skip-bad-rows`; otherwise the first one stops the import)."""
    absent_mapped: int = 0
    """Rows (JSONL, Qdrant payloads) without the column of an explicitly mapped optional field: the
    field was read as null, as from an empty CSV cell (not a separate count in `read`)."""
    absent_mapped_first: str | None = None
    """The first of them and its field: `chunks.jsonl:3: no column 'section_title' for title`."""
    missing: int = 0
    """With `--full`: imported chunks absent from the source, marked deleted (not rows, not in `read`)."""
    written: int = 0
    """Chunk rows written (0 for an unchanged source)."""
    documents_removed: int = 0
    """Documents removed because their chunks moved to other documents (a re-import that maps
    `doc_id` differently) and left them with no chunk."""
    vectors: int = 0
    """Rows that brought a vector."""
    vector_dim: int | None = None
    vector_embedder: str | None = None
    """The name the imported vectors are recorded under (the configured embedder's)."""
    rejected_rows: list[RejectedRow] = Field(default_factory=list)
    """The first rejected rows (at most 100)."""
    kb_revision: int = 0
    read_seconds: float = 0.0
    """Reading, mapping and checking every row (the import's one pass, SQL writes excluded)."""
    write_seconds: float = 0.0
    """Writing the rows that differ to SQL (inside the pass, in its one transaction)."""
    mapping_warnings: list[str] = Field(default_factory=list)
    """A mapping that looks wrong though every row was valid (content read from the title's column,
    or equal to the title on most rows), each with its fix (`FieldMapper.mapping_warnings`)."""
    suggested_map: dict[str, str] = Field(default_factory=dict)
    """Optional fields left unmapped whose likely column was kept as metadata: field → column
    (`FieldMapper.suggested_map`)."""
    recognised: str | None = None
    """The framework shape the rows were read as with no `--map` (`import_presets`): `a LlamaIndex
    vector-store collection`, `LangChain documents`, `LlamaIndex nodes (a docstore)`; None: none."""
    recognised_map: dict[str, str] = Field(default_factory=dict)
    """With `recognised`: field → the path its first value came from, e.g.
    `content` → `payload._node_content.text` (an explicit `--map` field is not listed)."""
    index: dict[str, Any] | None = None
    """The indexer's report, when indexing ran."""
    index_skipped: str | None = None
    same_source_as_last: bool = False
    """The file and settings were those of the last import into this KB revision: its rows were not
    read again and their counts are the last import's (`import_fingerprint`)."""

    @property
    def adds_up(self) -> bool:
        """read = added + changed + unchanged + deleted + rejected."""
        return self.read == self.added + self.changed + self.unchanged + self.deleted + self.rejected

    def counts_line(self) -> str:
        """`read N = added … + rejected …` (the reconciliation, one line)."""
        return (
            f"read {self.read} = added {self.added} + changed {self.changed} + unchanged {self.unchanged}"
            f" + deleted {self.deleted} + rejected {self.rejected}"
        )
