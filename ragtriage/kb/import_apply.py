"""Apply a chunk source to the KB: map, check, and upsert into `kb_chunk`/`kb_document` incrementally.

Two passes keep memory constant and never leave half an import behind:
1. read every row, map and check it (`FieldMapper`), and compare its hash with the stored
   `source_hash`; any bad row stops here, before anything is written (or is counted as rejected with
   `skip_bad_rows`). An unchanged source ends here: nothing written, nothing embedded.
2. read the source again and write only the rows that differ, in one write transaction (rolled back
   on any error, including a source that changed between the passes).
Then the indexes are synced; vectors that came with the rows are used as given (see
`ragtriage.pipeline.indexer`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from sqlalchemy import delete, func, insert, update
from sqlmodel import Session, SQLModel, col, select

from ragtriage.errors import InputError
from ragtriage.kb.import_files import release_reader_memory
from ragtriage.kb.import_mapping import FieldMapper
from ragtriage.kb.import_report import ImportReport, RejectedRow
from ragtriage.kb.import_rows import ImportedChunk, RowError, SourceRow
from ragtriage.kb.repository import DELETED, RECHUNKED, REMOVED, bump_revision, kb_revision
from ragtriage.store.db import read_session, write_session
from ragtriage.store.kb_tables import ChunkRow, ChunkVectorRow, DocumentRow
from ragtriage.workspace import Workspace

__all__ = ["ChunkSource", "import_chunks"]

ProgressCallback = Callable[[int, int], None]
MapperFactory = Callable[[], FieldMapper]
_IN_BATCH = 500  # ids per IN (…): well under SQLite's bound-parameter limit
_REJECTED_KEPT = 100
PUBLISHED = "published"


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
class _Plan:
    todo: dict[str, str]
    """chunk id → source hash of every row to write."""
    missing: list[str]
    dim: int | None
    known: set[str]
    """Ids in `todo` that the store already holds."""
    grown_docs: set[str]
    """Documents that gain a chunk they did not have live: their deleted chunks count as re-chunked."""
    retired: set[str]
    """Live chunks that rows of this source mark deleted (a row that arrives deleted was never live)."""


def import_chunks(
    workspace: Workspace,
    source: ChunkSource,
    make_mapper: MapperFactory,
    *,
    full: bool = False,
    skip_bad_rows: bool = False,
    index: bool = True,
    vector_embedder: str | None = None,
    on_progress: ProgressCallback | None = None,
    on_write_progress: ProgressCallback | None = None,
    on_index_progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import `source` into the workspace's KB and sync the indexes (unless `index=False`).

    `make_mapper` builds a fresh `FieldMapper` for each pass (ordinals are numbered per pass).

    Raises:
        InputError: a bad row or column (nothing is written), a source that changed between the
            passes (rolled back), or an empty source with `full` (it would delete every chunk).
    """
    kb = workspace.settings.kb.name
    report = ImportReport(source=source.name, vector_embedder=vector_embedder)
    started = time.perf_counter()
    plan = _plan(
        workspace,
        source,
        make_mapper(),
        report,
        full=full,
        skip_bad_rows=skip_bad_rows,
        on_progress=on_progress,
    )
    report.vector_dim = plan.dim
    if not report.vectors:
        report.vector_embedder = None
    report.read_seconds = time.perf_counter() - started
    if plan.todo or plan.missing:
        started = time.perf_counter()
        _write(workspace, source, make_mapper(), plan, report, kb, on_write_progress)
        report.write_seconds = time.perf_counter() - started
    report.kb_revision = kb_revision(workspace.engine, kb)
    release_reader_memory()
    if not index:
        report.index_skipped = "indexing not requested (--no-index)"
    elif not plan.todo and not plan.missing and _indexes_current(workspace, report.kb_revision):
        report.index_skipped = "nothing changed and the indexes are up to date"
    else:
        from ragtriage.pipeline.indexer import sync_indexes

        report.index = dataclasses.asdict(sync_indexes(workspace, on_index_progress))
    return report


def _stored_chunks(workspace: Workspace, kb: str) -> dict[str, _Stored]:
    with read_session(workspace.engine) as session:
        rows = session.exec(
            select(ChunkRow.chunk_id, ChunkRow.source_hash, ChunkRow.status, ChunkRow.version).where(
                ChunkRow.kb == kb
            )
        ).all()
    return {
        chunk_id: _Stored(source_hash, status, version) for chunk_id, source_hash, status, version in rows
    }


def _plan(
    workspace: Workspace,
    source: ChunkSource,
    mapper: FieldMapper,
    report: ImportReport,
    *,
    full: bool,
    skip_bad_rows: bool,
    on_progress: ProgressCallback | None,
) -> _Plan:
    """Pass 1: map and check every row, classify it, and decide what to write."""
    stored = _stored_chunks(workspace, workspace.settings.kb.name)
    seen: dict[str, str] = {}
    kept_ids: set[str] = set()
    todo: dict[str, str] = {}
    grown_docs: set[str] = set()
    retired: set[str] = set()
    columns_checked = False
    for batch in source.batches(on_progress):
        if not columns_checked and not source.schemaless and source.columns is not None:
            mapper.check_columns(source.columns)
            columns_checked = True
        for row in batch:
            report.read += 1
            try:
                chunk = mapper.map_row(row)
                if chunk.chunk_id in seen:
                    raise RowError(
                        row.where,
                        f"chunk_id {chunk.chunk_id} was already read at {seen[chunk.chunk_id]}",
                        "export each chunk once (duplicate ids would overwrite each other)",
                    )
            except RowError as error:
                if not skip_bad_rows:
                    raise
                _reject(report, error)
                chunk_id = mapper.chunk_id_of(row)
                if chunk_id is not None:
                    kept_ids.add(chunk_id)  # with --full its stored version stays
                continue
            seen[chunk.chunk_id] = row.where
            _classify(chunk, stored.get(chunk.chunk_id), report, todo, grown_docs, retired)
    if not columns_checked and source.columns is not None and not source.schemaless:
        mapper.check_columns(source.columns)
    if source.schemaless and report.read > report.rejected:
        mapper.check_seen()
    missing: list[str] = []
    if full:
        if report.read == 0:
            raise InputError(
                f"{source.name}: the source has no rows, and --full would mark every imported chunk deleted; "
                "fix: check the file or query (or drop --full)"
            )
        missing = [
            chunk_id
            for chunk_id, state in stored.items()
            if state.source_hash is not None
            and state.status != DELETED
            and chunk_id not in seen
            and chunk_id not in kept_ids
        ]
    report.missing = len(missing)
    known = {chunk_id for chunk_id in todo if chunk_id in stored}
    return _Plan(
        todo=todo,
        missing=missing,
        dim=mapper.dim if report.vectors else None,
        known=known,
        grown_docs=grown_docs,
        retired=retired,
    )


def _classify(
    chunk: ImportedChunk,
    stored: _Stored | None,
    report: ImportReport,
    todo: dict[str, str],
    grown_docs: set[str],
    retired: set[str],
) -> None:
    source_hash = chunk.source_hash()
    if chunk.vector is not None:
        report.vectors += 1
    same = stored is not None and stored.source_hash == source_hash
    if not chunk.retrievable:
        report.deleted += 1
        if stored is not None and stored.status != DELETED:
            retired.add(chunk.chunk_id)
        if not (same and stored is not None and stored.status == DELETED):
            todo[chunk.chunk_id] = source_hash
        return
    if stored is None or stored.status == DELETED:
        report.added += 1
        grown_docs.add(chunk.doc_id)
    elif same and stored.status == PUBLISHED:
        report.unchanged += 1
        return
    else:
        report.changed += 1
    todo[chunk.chunk_id] = source_hash


def _reject(report: ImportReport, error: RowError) -> None:
    report.rejected += 1
    if len(report.rejected_rows) < _REJECTED_KEPT:
        report.rejected_rows.append(RejectedRow(where=error.where, reason=error.reason, fix=error.fix))


# ---------------------------------------------------------------- pass 2


def _write(
    workspace: Workspace,
    source: ChunkSource,
    mapper: FieldMapper,
    plan: _Plan,
    report: ImportReport,
    kb: str,
    on_progress: ProgressCallback | None,
) -> None:
    """Pass 2: write the planned rows in one transaction; any error rolls everything back."""
    remaining = dict(plan.todo)
    total = len(plan.todo)
    now = datetime.now(timezone.utc)
    touched_docs: dict[str, ImportedChunk] = {}
    with write_session(workspace.engine) as session:
        for batch in source.batches():
            chunks = []
            for row in batch:
                try:
                    chunk = mapper.map_row(row)
                except RowError:
                    continue  # rejected in pass 1 (with --skip-bad-rows); otherwise it would have stopped there
                expected = remaining.pop(chunk.chunk_id, None)
                if expected is None:
                    continue
                if chunk.source_hash() != expected:
                    raise _source_changed(source, row.where)
                chunks.append(chunk)
            if chunks:
                _write_chunks(session, chunks, plan, kb, now, report.vector_embedder)
                report.written += len(chunks)
                for chunk in chunks:
                    touched_docs[chunk.doc_id] = chunk
            if on_progress is not None:
                on_progress(total - len(remaining), total)
        if remaining:
            raise _source_changed(source, f"chunk {next(iter(remaining))}")
        missing_docs = _mark_missing(session, plan.missing, plan.grown_docs)
        _write_documents(session, touched_docs, missing_docs, kb, source.name, now)
        bump_revision(session, kb)


def _source_changed(source: ChunkSource, where: str) -> InputError:
    return InputError(
        f"{source.name}: {where} changed while it was being imported; nothing was imported; "
        "fix: run the import again once the source is stable"
    )


def _write_chunks(
    session: Session,
    chunks: list[ImportedChunk],
    plan: _Plan,
    kb: str,
    now: datetime,
    embedder: str | None,
) -> None:
    """Replace the chunk rows (and vectors) of `chunks`: delete + bulk insert inside the transaction."""
    # Only ids stored before need a lookup and a delete (none on a first import).
    ids = [chunk.chunk_id for chunk in chunks if chunk.chunk_id in plan.known]
    previous: dict[str, tuple[int, str, str]] = {}
    for start in range(0, len(ids), _IN_BATCH):
        part = ids[start : start + _IN_BATCH]
        rows = session.exec(
            select(ChunkRow.chunk_id, ChunkRow.version, ChunkRow.content_hash, ChunkRow.status).where(
                col(ChunkRow.chunk_id).in_(part)
            )
        ).all()
        previous.update({chunk_id: (version, h, status) for chunk_id, version, h, status in rows})
        session.execute(delete(ChunkRow).where(col(ChunkRow.chunk_id).in_(part)))
        session.execute(delete(ChunkVectorRow).where(col(ChunkVectorRow.chunk_id).in_(part)))
    chunk_values: list[dict[str, Any]] = []
    vector_values: list[dict[str, Any]] = []
    for chunk in chunks:
        old = previous.get(chunk.chunk_id)
        # A new chunk version only when the text changed; metadata edits keep the version.
        version = 1 if old is None else old[0] + (old[1] != chunk.content_hash)
        chunk_values.append(
            {
                "chunk_id": chunk.chunk_id,
                "doc_id": chunk.doc_id,
                "kb": kb,
                "title": chunk.title,
                "heading_path": chunk.heading_path,
                "anchor": chunk.anchor,
                "ordinal": chunk.ordinal,
                "content": chunk.content,
                "content_hash": chunk.content_hash,
                "version": version,
                "status": PUBLISHED if chunk.retrievable else DELETED,
                "updated_at": chunk.updated_at or now,
                "product_line": chunk.product_line,
                "doc_version": chunk.doc_version,
                "meta": chunk.meta or None,
                "source_hash": chunk.source_hash(),
                "deletion": None if chunk.retrievable else _deletion(chunk, plan),
            }
        )
        if chunk.vector is not None and chunk.vector_hash is not None:
            vector_values.append(
                {
                    "chunk_id": chunk.chunk_id,
                    "embedder": embedder or "",
                    "dim": int(chunk.vector.shape[0]),
                    "vector": chunk.vector.astype("<f4").tobytes(),
                    "vector_hash": chunk.vector_hash,
                }
            )
    # Core inserts (executemany), not the ORM's bulk path: several times faster for 100k rows.
    connection = session.connection()
    tables = SQLModel.metadata.tables
    connection.execute(insert(tables[ChunkRow.__tablename__]), chunk_values)
    if vector_values:
        connection.execute(insert(tables[ChunkVectorRow.__tablename__]), vector_values)


def _deletion(chunk: ImportedChunk, plan: _Plan) -> str:
    """A live chunk deleted while its document gained chunks was replaced (re-chunked); else removed."""
    return RECHUNKED if chunk.chunk_id in plan.retired and chunk.doc_id in plan.grown_docs else REMOVED


def _mark_missing(session: Session, chunk_ids: list[str], grown_docs: set[str]) -> set[str]:
    """Mark `chunk_ids` deleted (re-chunked or removed, see `_deletion`); returns their documents."""
    doc_ids: set[str] = set()
    for start in range(0, len(chunk_ids), _IN_BATCH):
        part = chunk_ids[start : start + _IN_BATCH]
        by_deletion: dict[str, list[str]] = {RECHUNKED: [], REMOVED: []}
        for chunk_id, doc_id in session.exec(
            select(ChunkRow.chunk_id, ChunkRow.doc_id).where(col(ChunkRow.chunk_id).in_(part))
        ).all():
            doc_ids.add(doc_id)
            # Every missing chunk was live (`_plan` picks only those).
            by_deletion[RECHUNKED if doc_id in grown_docs else REMOVED].append(chunk_id)
        for deletion, ids in by_deletion.items():
            if ids:
                session.execute(
                    update(ChunkRow)
                    .where(col(ChunkRow.chunk_id).in_(ids))
                    .values(status=DELETED, deletion=deletion)
                )
    return doc_ids


def _write_documents(
    session: Session,
    touched: dict[str, ImportedChunk],
    missing_docs: set[str],
    kb: str,
    source_name: str,
    now: datetime,
) -> None:
    """Insert or update the documents of written chunks; a document without live chunks is deleted."""
    doc_ids = sorted(set(touched) | missing_docs)
    for start in range(0, len(doc_ids), _IN_BATCH):
        part = doc_ids[start : start + _IN_BATCH]
        live = dict(
            session.exec(
                select(ChunkRow.doc_id, func.count())
                .where(col(ChunkRow.doc_id).in_(part), ChunkRow.status == PUBLISHED)
                .group_by(ChunkRow.doc_id)
            ).all()
        )
        existing = {
            row.doc_id: row
            for row in session.exec(select(DocumentRow).where(col(DocumentRow.doc_id).in_(part)))
        }
        new_rows: list[dict[str, Any]] = []
        for doc_id in part:
            status = PUBLISHED if live.get(doc_id) else DELETED
            chunk = touched.get(doc_id)
            row = existing.get(doc_id)
            if row is not None:
                row.status = status
                if chunk is not None:
                    row.title = chunk.doc_title or row.title
                    row.product_line = chunk.product_line
                    row.doc_version = chunk.doc_version
                    row.updated_at = chunk.updated_at or now
                session.add(row)
            elif chunk is not None:
                new_rows.append(
                    {
                        "doc_id": doc_id,
                        "kb": kb,
                        "title": chunk.doc_title or doc_id,
                        "source_path": source_name,
                        "content_hash": "",
                        "version": 1,
                        "status": status,
                        "updated_at": chunk.updated_at or now,
                        "product_line": chunk.product_line,
                        "doc_version": chunk.doc_version,
                        "meta": {"origin": "import", "source": source_name},
                    }
                )
        if new_rows:
            session.execute(insert(DocumentRow), new_rows)
        session.flush()


def _indexes_current(workspace: Workspace, revision: int) -> bool:
    """The index manifest was written at the KB's current revision (nothing to sync)."""
    from ragtriage import locations
    from ragtriage.pipeline.manifest import read_manifest

    manifest = read_manifest(locations.manifest_path(workspace.home))
    return (
        manifest is not None
        and manifest.kb_revision == revision
        and manifest.kb == workspace.settings.kb.name
        and manifest.bm25_engine == workspace.settings.index.bm25_engine
    )
