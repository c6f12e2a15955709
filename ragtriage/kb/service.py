"""The knowledge base as both faces use it: add files and folders, list and show chunks, remove documents.

`add_paths` loads every supported file (.md, .markdown, .html, .htm, .txt, .docx, .pptx, .pdf), stores
each in its own short write transaction, and marks documents deleted that were added from the same folder
before and are gone now. A file that cannot be loaded is reported (path, reason, fix) and skipped; its
stored version stays. Syncing the indexes afterwards is the caller's (`ragtriage.index.kb_sync`).

Document ids: front matter `doc_id`, else `<folder name>/<relative path without extension>` (a single
file: its stem), except that a document already stored keeps its id; see `ragtriage.kb.doc_ids`.
Chunk ids: see `ragtriage.kb.chunking`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.orm import defer
from sqlmodel import col, select

from ragtriage.config.settings import Settings
from ragtriage.errors import InputError, NotFoundError
from ragtriage.kb.chunking import ChunkingParams
from ragtriage.kb.doc_ids import FileJob, StoredDocIds, collect_files
from ragtriage.kb.document import DocumentLoadError
from ragtriage.kb.loaders import load_document
from ragtriage.kb.reports import AddReport, FailedFile, FileWarning, KBStats, RemoveReport
from ragtriage.kb.types import ChunkRecord
from ragtriage.store.db import read_session
from ragtriage.store.kb_repo import DELETED, as_utc, kb_revision, mark_deleted, store_document, to_record
from ragtriage.store.kb_tables import ChunkRow, DocumentRow, KBStateRow
from ragtriage.wording import quoted

__all__ = [
    "AddReport",
    "FailedFile",
    "FileWarning",
    "KBStats",
    "RemoveReport",
    "add_paths",
    "get_chunks",
    "chunks_containing",
    "kb_stats",
    "list_chunks",
    "neighbours",
    "remove_documents",
]

ProgressCallback = Callable[[int, int], None]


def add_paths(
    engine: Engine,
    settings: Settings,
    paths: Sequence[Path | str],
    on_progress: ProgressCallback | None = None,
) -> AddReport:
    """Add or update every supported file under `paths` in the KB of `settings`.

    Raises:
        InputError: a path does not exist (checked before anything is stored).
    """
    params = ChunkingParams.from_settings(settings.kb)
    kb = settings.kb.name
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise InputError(f"no such file or folder: {', '.join(missing)}; check the path")
    jobs = collect_files([Path(p) for p in paths])
    stored_ids = StoredDocIds.load(engine, kb)
    report = AddReport(files_seen=len(jobs))
    doc_sources: dict[str, str] = {}
    failed_paths: set[str] = set()
    for done, job in enumerate(jobs, start=1):
        _ingest_file(engine, settings, report, job, stored_ids, params, doc_sources, failed_paths)
        if on_progress is not None:
            on_progress(done, len(jobs))
    roots = {str(job.root) for job in jobs if job.root is not None}
    roots |= {str(Path(p).resolve()) for p in paths if Path(p).is_dir()}
    gone = _documents_gone(engine, kb, roots, set(doc_sources), failed_paths)
    deleted, _ = mark_deleted(engine, gone, kb)
    report.deleted = len(deleted)
    report.deleted_doc_ids = deleted
    report.kb_revision = kb_revision(engine, kb)
    return report


def _ingest_file(
    engine: Engine,
    settings: Settings,
    report: AddReport,
    job: FileJob,
    stored_ids: StoredDocIds,
    params: ChunkingParams,
    doc_sources: dict[str, str],
    failed_paths: set[str],
) -> None:
    path, root = job.path, job.root
    try:
        document = load_document(path)
    except DocumentLoadError as error:
        report.failed.append(FailedFile(path=error.path, reason=error.reason, fix=error.fix, line=error.line))
        failed_paths.add(str(path))
        return
    doc_id = document.meta.doc_id or stored_ids.doc_id_for(job)
    if doc_id in doc_sources:
        report.failed.append(
            FailedFile(
                path=str(path),
                reason=f"doc_id {quoted(doc_id)} is also used by {doc_sources[doc_id]}",
                fix="give one of the files a distinct `doc_id` in its front matter, or rename it",
            )
        )
        failed_paths.add(str(path))
        return
    doc_sources[doc_id] = str(path)
    for warning in document.warnings:
        report.warnings.append(FileWarning(path=str(path), message=warning))
    outcome, chunks = store_document(
        engine,
        document,
        doc_id=doc_id,
        kb=settings.kb.name,
        status=document.meta.status or settings.kb.default_status,
        updated_at=_updated_at(document.meta.updated_at, path),
        params=params,
        source_root=str(root) if root is not None else None,
    )
    if outcome == "added":
        report.added += 1
        report.added_doc_ids.append(doc_id)
    elif outcome == "changed":
        report.changed += 1
        report.changed_doc_ids.append(doc_id)
    else:
        report.unchanged += 1
    if outcome != "unchanged":
        report.chunks_written += len(chunks)


def _updated_at(front_matter_value: str | None, path: Path) -> datetime:
    if front_matter_value:
        return as_utc(datetime.fromisoformat(front_matter_value))
    return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)


def _documents_gone(
    engine: Engine, kb: str, roots: set[str], seen: set[str], failed_paths: set[str]
) -> list[str]:
    """Live documents added from one of `roots` earlier that this walk neither stored nor failed to load."""
    if not roots:
        return []
    with read_session(engine) as session:
        rows = session.exec(
            select(DocumentRow).where(DocumentRow.kb == kb, DocumentRow.status != DELETED)
        ).all()
    return [
        row.doc_id
        for row in rows
        if (row.meta or {}).get("source_root") in roots
        and row.doc_id not in seen
        and row.source_path not in failed_paths
    ]


def remove_documents(engine: Engine, kb: str, doc_ids: Sequence[str]) -> RemoveReport:
    """Mark documents and their chunks deleted.

    Raises:
        NotFoundError: a doc id is not in the KB (nothing is changed then).
    """
    wanted = list(dict.fromkeys(doc_ids))
    with read_session(engine) as session:
        rows = session.exec(
            select(DocumentRow).where(col(DocumentRow.doc_id).in_(wanted), DocumentRow.kb == kb)
        ).all()
    known = {row.doc_id: row.status for row in rows}
    unknown = [doc_id for doc_id in wanted if doc_id not in known]
    if unknown:
        raise NotFoundError(
            f"no document {', '.join(map(quoted, unknown))} in KB {quoted(kb)}; list them with `kb chunks`"
        )
    removed, chunk_count = mark_deleted(engine, [d for d in wanted if known[d] != DELETED], kb)
    return RemoveReport(
        removed=removed,
        already_deleted=[d for d in wanted if known[d] == DELETED],
        chunks_deleted=chunk_count,
        kb_revision=kb_revision(engine, kb),
    )


def kb_stats(engine: Engine, kb: str) -> KBStats:
    """Documents and chunks by status, and the KB revision."""
    with read_session(engine) as session:
        doc_counts = session.exec(
            select(DocumentRow.status, func.count()).where(DocumentRow.kb == kb).group_by(DocumentRow.status)
        ).all()
        chunk_counts = session.exec(
            select(ChunkRow.status, func.count()).where(ChunkRow.kb == kb).group_by(ChunkRow.status)
        ).all()
        state = session.get(KBStateRow, kb)
    return KBStats(
        kb=kb,
        revision=state.revision if state is not None else 0,
        revision_updated_at=as_utc(state.updated_at).isoformat() if state is not None else None,
        documents={status: count for status, count in doc_counts},
        chunks={status: count for status, count in chunk_counts},
    )


def list_chunks(
    engine: Engine,
    kb: str,
    doc_id: str | None = None,
    include_content: bool = False,
    *,
    include_deleted: bool = False,
) -> list[ChunkRecord]:
    """Chunks in document order (published and ready; deleted ones only on request).

    Raises:
        NotFoundError: `doc_id` is given and no such document exists.
    """
    statement = select(ChunkRow).where(ChunkRow.kb == kb)
    if doc_id is not None:
        statement = statement.where(ChunkRow.doc_id == doc_id)
    if not include_deleted:
        statement = statement.where(ChunkRow.status != DELETED)
    if not include_content:
        statement = statement.options(defer(ChunkRow.content))  # type: ignore[arg-type]
    with read_session(engine) as session:
        if doc_id is not None and session.get(DocumentRow, doc_id) is None:
            raise NotFoundError(
                f"no document {quoted(doc_id)} in KB {quoted(kb)}; see `ragtriage kb chunks` for the ids"
            )
        ordered = statement.order_by(col(ChunkRow.doc_id), col(ChunkRow.ordinal), col(ChunkRow.chunk_id))
        rows = session.exec(ordered).all()
        sources = _source_paths(session, {row.doc_id for row in rows})
    return [
        to_record(row, source_path=sources.get(row.doc_id), include_content=include_content) for row in rows
    ]


def get_chunks(engine: Engine, chunk_ids: Sequence[str]) -> dict[str, ChunkRecord]:
    """The chunks with these ids, whatever their status; unknown ids are simply absent."""
    wanted = list(dict.fromkeys(chunk_ids))
    found: dict[str, ChunkRecord] = {}
    with read_session(engine) as session:
        # Batches keep well under SQLite's bound-parameter limit.
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            rows = session.exec(select(ChunkRow).where(col(ChunkRow.chunk_id).in_(batch))).all()
            sources = _source_paths(session, {row.doc_id for row in rows})
            found.update({row.chunk_id: to_record(row, source_path=sources.get(row.doc_id)) for row in rows})
    return found


def document_titles(engine: Engine, doc_ids: Sequence[str]) -> dict[str, str]:
    """Title of each of these documents that has one other than its id (an import without a
    title column stores the id as the title); unknown and untitled documents are absent."""
    wanted = list(dict.fromkeys(doc_ids))
    titles: dict[str, str] = {}
    with read_session(engine) as session:
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            rows = session.exec(
                select(DocumentRow.doc_id, DocumentRow.title).where(col(DocumentRow.doc_id).in_(batch))
            ).all()
            titles.update({doc_id: title for doc_id, title in rows if title and title != doc_id})
    return titles


def chunks_containing(engine: Engine, kb: str, term: str, limit: int) -> list[ChunkRecord]:
    """Up to `limit` published chunks of `kb` with `term` in their title or text (case-insensitive
    for ASCII; a scan, meant for a few terms per diagnosis)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f"%{escaped}%"
    with read_session(engine) as session:
        rows = session.exec(
            select(ChunkRow)
            .where(col(ChunkRow.kb) == kb, col(ChunkRow.status) == "published")
            .where(
                col(ChunkRow.content).ilike(pattern, escape="\\")
                | col(ChunkRow.title).ilike(pattern, escape="\\")
            )
            .order_by(col(ChunkRow.chunk_id))
            .limit(limit)
        ).all()
        return [to_record(row) for row in rows]


def neighbours(engine: Engine, chunk_id: str) -> list[ChunkRecord]:
    """The chunks just before and after `chunk_id` in its document (ordinal ± 1), in order.

    A live chunk's neighbours are live chunks; a deleted chunk's are those of its own document version.

    Raises:
        NotFoundError: no chunk has this id.
    """
    with read_session(engine) as session:
        row = session.get(ChunkRow, chunk_id)
        if row is None:
            raise NotFoundError(f"no chunk {quoted(chunk_id)}; see `ragtriage kb chunks` for the ids")
        statement = select(ChunkRow).where(
            ChunkRow.doc_id == row.doc_id, col(ChunkRow.ordinal).in_([row.ordinal - 1, row.ordinal + 1])
        )
        if row.status == DELETED:
            statement = statement.where(ChunkRow.version == row.version)
        else:
            statement = statement.where(ChunkRow.status != DELETED)
        rows = session.exec(statement.order_by(col(ChunkRow.ordinal))).all()
        sources = _source_paths(session, {row.doc_id})
    return [to_record(r, source_path=sources.get(r.doc_id)) for r in rows if r.chunk_id != chunk_id]


def _source_paths(session: Any, doc_ids: set[str]) -> dict[str, str | None]:
    if not doc_ids:
        return {}
    rows = session.exec(
        select(DocumentRow.doc_id, DocumentRow.source_path).where(col(DocumentRow.doc_id).in_(list(doc_ids)))
    ).all()
    return {doc_id: source_path for doc_id, source_path in rows}
