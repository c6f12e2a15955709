"""What an ingest did: `IngestReport`, filled in by the writer, the workers and the format readers."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import BaseModel, Field


class IngestReport(BaseModel):
    """What one ingest did. `read` always equals the sum of the five outcomes."""

    files: list[str] = Field(default_factory=list)
    formats: dict[str, str] = Field(default_factory=dict)
    """The format each file was read in (`v1`, `flat`, `parquet`, `csv`, `otlp`, …), by file as given."""
    read: int = 0
    ingested: int = 0
    flagged: int = 0
    """Requests that entered the triage queue (new records, incl. earlier requests flagged as followed up)."""
    flagged_by_reason: dict[str, int] = Field(default_factory=dict)
    """`flagged` by why: each request under its reasons joined with `+` in `flagging.REASONS` order
    (`bad_rating`, `bad_rating+escalated`, `empty_citations`, …), so the counts add up to `flagged`."""
    duplicates: int = 0
    conflicts: int = 0
    quarantined: int = 0
    blank: int = 0
    recovered: int = 0
    """Ingested lines that were not UTF-8 and were decoded as GB18030."""
    quarantined_by_kind: dict[str, int] = Field(default_factory=dict)
    files_without_requests: list[str] = Field(default_factory=list)
    """Non-empty files that held no readable request (every line quarantined or blank; trace files
    are judged together): an ingest that read nothing usable from a file is a failure."""
    stopped: bool = False
    seconds: float = 0.0

    def reconciles(self) -> bool:
        """True when every line read is accounted for exactly once."""
        return self.read == self.ingested + self.duplicates + self.conflicts + self.quarantined + self.blank


def add_counts(totals: dict[str, int], counts: Mapping[str, int]) -> None:
    """Add `counts` to `totals` key by key (a report's `quarantined_by_kind`, `flagged_by_reason`)."""
    for key, count in counts.items():
        totals[key] = totals.get(key, 0) + count


ProgressCallback = Callable[[int, int | None], None]
