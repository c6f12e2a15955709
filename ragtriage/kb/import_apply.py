"""Apply a chunk source to the KB: map, check, and upsert into `kb_chunk`/`kb_document` incrementally.

One pass, one transaction: every row is read, mapped and checked (`FieldMapper`) and compared by
hash with its stored `source_hash`; the rows that differ are written batch by batch inside one
write transaction (`import_write`), opened at the first row to write. Any bad row, even the last
one, rolls the whole transaction back, so nothing is half-imported (with `skip_bad_rows` it is
counted as rejected instead). An unchanged source opens no write transaction: nothing written.
Syncing the indexes afterwards is the caller's (`ragtriage.index.kb_sync`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from sqlalchemy.engine import Engine
from sqlmodel import select

from ragtriage.errors import InputError
from ragtriage.kb.import_files import release_reader_memory
from ragtriage.kb.import_fingerprint import last_import_report, record_import
from ragtriage.kb.import_mapping import FieldMapper
from ragtriage.kb.import_report import ImportReport, RejectedRow
from ragtriage.kb.import_rows import ImportedChunk, RowError, SourceRow
from ragtriage.kb.import_write import PUBLISHED, DocFields, ImportWriter
from ragtriage.store.db import read_session, write_session
from ragtriage.store.kb_repo import DELETED, bump_revision, kb_revision
from ragtriage.store.kb_tables import ChunkRow

__all__ = ["ChunkSource", "import_chunks"]

ProgressCallback = Callable[[int, int], None]
MapperFactory = Callable[[], FieldMapper]
_REJECTED_KEPT = 100
#: Rows of the pass between two hand-backs of the reader's freed memory (`release_reader_memory`).
_RELEASE_EVERY_ROWS = 10_000


class ChunkSource(Protocol):
    """A source of chunk rows (`import_files.FileSource`, `import_sql.SQLSource`, `import_qdrant.QdrantSource`)."""

    name: str
    schemaless: bool
    columns: list[str] | None

    def batches(self, on_progress: ProgressCallback | None = None) -> Iterator[list[SourceRow]]:
        """Rows in batches; `columns` is set before the first batch unless `schemaless`."""
        ...


@dataclass(frozen=True)
class _Stored:
    source_hash: str | None
    status: str
    version: int


@dataclass
class _Pass:
    """What the pass has seen so far (ids only: rows are written and dropped batch by batch)."""

    stored: dict[str, _Stored]
    seen: dict[str, str] = field(default_factory=dict)
    """chunk id → where it was read (duplicate detection)."""
    kept_ids: set[str] = field(default_factory=set)
    """Ids of rejected rows: with `full`, their stored chunk stays."""
    grown_docs: set[str] = field(default_factory=set)
    """Documents that gain a chunk they did not have live: their deleted chunks count as re-chunked."""
    retired: dict[str, str] = field(default_factory=dict)
    """Live chunk id → doc id, for rows of this source that mark a live chunk deleted."""
    touched_docs: dict[str, DocFields] = field(default_factory=dict)


def import_chunks(
    engine: Engine,
    kb: str,
    home: Path,
    source: ChunkSource,
    make_mapper: MapperFactory,
    *,
    full: bool = False,
    skip_bad_rows: bool = False,
    vector_embedder: str | None = None,
    on_progress: ProgressCallback | None = None,
    fingerprint: str | None = None,
    reuse_last: Callable[[int], bool] = lambda revision: True,
    check_interrupt: Callable[[], None] = lambda: None,
) -> tuple[ImportReport, int | None]:
    """Import `source` into KB `kb` of the store `engine`: the report and the KB revision the
    import made (None: nothing was written).

    `fingerprint` (file sources: `import_fingerprint.file_fingerprint`) lets a re-import of the last
    import's file and settings into an unchanged KB skip the row pass, when `reuse_last(revision)`
    agrees (the caller's indexes hold that revision). `check_interrupt` is called at every batch.

    Raises:
        InputError: a bad row or column, or an empty source with `full` (it would delete every
            chunk); the transaction is rolled back and nothing is imported.
    """
    started = time.perf_counter()
    if fingerprint is not None:
        revision = kb_revision(engine, kb)
        same = (
            last_import_report(home, kb, fingerprint, revision, source.name) if reuse_last(revision) else None
        )
        if same is not None:
            same.read_seconds = time.perf_counter() - started
            return same, None
    report = ImportReport(source=source.name, vector_embedder=vector_embedder)
    mapper = make_mapper()
    written = _import(
        engine,
        kb,
        source,
        mapper,
        report,
        full=full,
        skip_bad_rows=skip_bad_rows,
        on_progress=on_progress,
        check_interrupt=check_interrupt,
    )
    report.kb_revision = kb_revision(engine, kb)
    report.read_seconds = time.perf_counter() - started - report.write_seconds
    report.vector_dim = mapper.dim if report.vectors else None
    if mapper.preset is not None:
        report.recognised, report.recognised_map = mapper.preset.name, dict(mapper.recognised)
    if not report.vectors:
        report.vector_embedder = None
    record_import(home, kb, fingerprint, report)
    return report, written


def _stored_chunks(engine: Engine, kb: str) -> dict[str, _Stored]:
    with read_session(engine) as session:
        rows = session.exec(
            select(ChunkRow.chunk_id, ChunkRow.source_hash, ChunkRow.status, ChunkRow.version).where(
                ChunkRow.kb == kb
            )
        ).all()
    return {
        chunk_id: _Stored(source_hash, status, version) for chunk_id, source_hash, status, version in rows
    }


def _import(
    engine: Engine,
    kb: str,
    source: ChunkSource,
    mapper: FieldMapper,
    report: ImportReport,
    *,
    full: bool,
    skip_bad_rows: bool,
    on_progress: ProgressCallback | None,
    check_interrupt: Callable[[], None],
) -> int | None:
    """Read, check and write every row in one transaction; the KB revision it made (None: nothing
    was written). `check_interrupt` is called at every batch (it raises `KeyboardInterrupt` after
    a Ctrl-C a library swallowed).
    """
    state = _Pass(stored=_stored_chunks(engine, kb))
    now = datetime.now(timezone.utc)
    with contextlib.ExitStack() as stack:
        writer: ImportWriter | None = None

        def open_writer() -> ImportWriter:
            # The write transaction (BEGIN IMMEDIATE) starts at the first row that differs.
            session = stack.enter_context(write_session(engine))
            return ImportWriter(session, kb, now, report.vector_embedder)

        columns_checked = False
        rows_since_release = 0
        for batch in source.batches(on_progress):
            check_interrupt()
            rows_since_release += len(batch)
            if rows_since_release >= _RELEASE_EVERY_ROWS:
                rows_since_release = 0
                release_reader_memory()
            if not columns_checked and not source.schemaless and source.columns is not None:
                mapper.check_columns(source.columns)
                report.suggested_map = mapper.suggested_map(source.columns)
                columns_checked = True
            todo = _read_batch(batch, mapper, state, report, skip_bad_rows)
            if todo:
                began = time.perf_counter()
                writer = writer or open_writer()
                writer.write(todo, [c.chunk_id for c in todo if c.chunk_id in state.stored])
                report.written += len(todo)
                report.write_seconds += time.perf_counter() - began
        if not columns_checked and source.columns is not None and not source.schemaless:
            mapper.check_columns(source.columns)
        columns = sorted(mapper.seen_columns) if source.schemaless else (source.columns or [])
        report.mapping_warnings = mapper.mapping_warnings(columns)
        if source.schemaless and report.read > report.rejected:
            mapper.check_seen()
            report.suggested_map = mapper.suggested_map(sorted(mapper.seen_columns))
            report.absent_mapped, report.absent_mapped_first = mapper.absent_rows, mapper.first_absent
        missing = _missing(source, state, report) if full else []
        report.missing = len(missing)
        if writer is None and not missing:
            return None
        began = time.perf_counter()
        writer = writer or open_writer()
        writer.retag_rechunked([cid for cid, doc in state.retired.items() if doc in state.grown_docs])
        missing_docs = writer.mark_missing(missing, state.grown_docs)
        report.documents_removed = len(writer.write_documents(state.touched_docs, missing_docs, source.name))
        revision = bump_revision(writer.session, kb)
        report.write_seconds += time.perf_counter() - began
    return revision


def _read_batch(
    batch: list[SourceRow], mapper: FieldMapper, state: _Pass, report: ImportReport, skip_bad_rows: bool
) -> list[ImportedChunk]:
    """Map, check and classify one batch; returns the chunks to write."""
    todo: list[ImportedChunk] = []
    for row in batch:
        report.read += 1
        try:
            chunk = mapper.map_row(row)
            if chunk.chunk_id in state.seen:
                raise RowError(
                    row.where,
                    f"chunk_id {chunk.chunk_id} was already read at {state.seen[chunk.chunk_id]}",
                    "export each chunk once (duplicate ids would overwrite each other)",
                )
        except RowError as error:
            if not skip_bad_rows:
                raise
            _reject(report, error)
            chunk_id = mapper.chunk_id_of(row)
            if chunk_id is not None:
                state.kept_ids.add(chunk_id)  # with --full its stored version stays
            continue
        state.seen[chunk.chunk_id] = row.where
        if _classify(chunk, state, report):
            todo.append(chunk)
            state.touched_docs[chunk.doc_id] = DocFields.of(chunk)
    return todo


def _classify(chunk: ImportedChunk, state: _Pass, report: ImportReport) -> bool:
    """Count the row as added, changed, unchanged or deleted; True if it must be written."""
    stored = state.stored.get(chunk.chunk_id)
    source_hash = chunk.source_hash()
    if chunk.vector is not None:
        report.vectors += 1
    same = stored is not None and stored.source_hash == source_hash
    if not chunk.retrievable:
        report.deleted += 1
        reason = chunk.excluded_by or "status filters"
        report.deleted_by[reason] = report.deleted_by.get(reason, 0) + 1
        if stored is not None and stored.status != DELETED:
            state.retired[chunk.chunk_id] = chunk.doc_id
        return not (same and stored is not None and stored.status == DELETED)
    if stored is None or stored.status == DELETED:
        report.added += 1
        state.grown_docs.add(chunk.doc_id)
    elif same and stored.status == PUBLISHED:
        report.unchanged += 1
        return False
    else:
        report.changed += 1
    return True


def _missing(source: ChunkSource, state: _Pass, report: ImportReport) -> list[str]:
    """With `full`: the live imported chunks this source no longer has."""
    if report.read == 0:
        raise InputError(
            f"{source.name}: the source has no rows, and --full would mark every imported chunk deleted; "
            "fix: check the file or query (or drop --full)"
        )
    return [
        chunk_id
        for chunk_id, stored in state.stored.items()
        if stored.source_hash is not None
        and stored.status != DELETED
        and chunk_id not in state.seen
        and chunk_id not in state.kept_ids
    ]


def _reject(report: ImportReport, error: RowError) -> None:
    report.rejected += 1
    if len(report.rejected_rows) < _REJECTED_KEPT:
        report.rejected_rows.append(RejectedRow(where=error.where, reason=error.reason, fix=error.fix))
