"""Eval-set and run repository: versioned datasets and cases, runs and their per-case results, and
the KB rows gold ids name (what `doctor` and the gold checks of `label` read).

Every function opens its own short session (one unit of work), so the runner can store each case
as it finishes while a triager writes labels in the same SQLite file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import defer
from sqlmodel import Session, col, or_, select

from ragtriage.errors import InputError, NotFoundError
from ragtriage.eval.cases import EvalCase, GoldRef
from ragtriage.pipeline.normalize import normalize_text
from ragtriage.store.db import read_session, write_session
from ragtriage.store.eval_tables import EvalCaseRow, EvalDatasetRow, EvalRunCaseRow, EvalRunRow
from ragtriage.store.kb_tables import ChunkRow, DocumentRow
from ragtriage.wording import quoted

DEFAULT_DATASET = "default"


class StoredCase(BaseModel):
    """An eval case as stored: the neutral `EvalCase` plus its version and provenance."""

    case: EvalCase
    version: int
    provenance: dict[str, Any] = Field(default_factory=dict)
    normalized_query: str = ""


class ImportReport(BaseModel):
    """What `add_cases` did to a dataset."""

    dataset: str
    dataset_version: int
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    """Case ids whose content changed (a new case version)."""
    unchanged: list[str] = Field(default_factory=list)


def normalized_query(query: str) -> str:
    """The duplicate-check form of a query (NFKC, whitespace collapsed, stripped, case-folded)."""
    return normalize_text(query).casefold()


def gold_key(gold: dict[str, int]) -> str:
    """A stable text form of the relevant gold ids (grades ignored) for the duplicate check."""
    return json.dumps(sorted(g for g, grade in gold.items() if grade > 0), ensure_ascii=False)


def _content_hash(case: EvalCase) -> str:
    # Without refs the hash stays what it was before refs existed: old cases do not look changed.
    body = case.model_dump(mode="json", exclude={"case_id"} if case.gold_refs else {"case_id", "gold_refs"})
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _current(statement: Any, version: int | None = None) -> Any:
    if version is None:
        return statement.where(col(EvalCaseRow.valid_to).is_(None))
    return statement.where(
        EvalCaseRow.valid_from <= version,
        or_(col(EvalCaseRow.valid_to).is_(None), col(EvalCaseRow.valid_to) > version),
    )


def _to_stored(row: EvalCaseRow) -> StoredCase:
    case = EvalCase(
        case_id=row.case_id,
        query=row.query,
        gold={str(k): int(v) for k, v in (row.gold or {}).items()},
        gold_granularity=row.gold_granularity,  # type: ignore[arg-type]
        must_have=list(row.must_have or []),
        intent_type=row.intent_type,
        difficulty=row.difficulty,
        tags=list(row.tags or []),
        k=row.k,
        gold_refs=[GoldRef.model_validate(ref) for ref in row.gold_refs or []],
    )
    return StoredCase(
        case=case,
        version=row.version,
        provenance=dict(row.provenance or {}),
        normalized_query=row.normalized_query,
    )


# ---------------------------------------------------------------- datasets and cases


def list_datasets(engine: Engine) -> list[EvalDatasetRow]:
    """Every dataset, by name."""
    with read_session(engine) as session:
        return list(session.exec(select(EvalDatasetRow).order_by(EvalDatasetRow.name)).all())


def dataset_version(engine: Engine, dataset: str) -> int:
    """The current version of `dataset`.

    Raises:
        NotFoundError: no such dataset (the message lists the known ones).
    """
    with read_session(engine) as session:
        row = session.get(EvalDatasetRow, dataset)
        if row is None:
            known = [d.name for d in session.exec(select(EvalDatasetRow)).all()]
            raise NotFoundError(
                f"no eval dataset {quoted(dataset)} (known: {', '.join(known) or 'none'}); "
                "create one with `ragtriage eval import FILE --dataset NAME` or `ragtriage promote`"
            )
        return row.version


def dataset_cases(
    engine: Engine, dataset: str, version: int | None = None, *, case_ids: Sequence[str] | None = None
) -> list[StoredCase]:
    """The cases of `dataset` at `version` (default: the current one), in case id order; only
    `case_ids` when given (a page of a run needs only its own cases).

    Raises:
        NotFoundError: no such dataset, or a version it never had.
    """
    current = dataset_version(engine, dataset)
    if version is not None and not 0 <= version <= current:
        raise NotFoundError(f"dataset {quoted(dataset)} has versions 1..{current}, not {version}")
    with read_session(engine) as session:
        statement = _current(select(EvalCaseRow).where(EvalCaseRow.dataset == dataset), version)
        if case_ids is not None:
            statement = statement.where(col(EvalCaseRow.case_id).in_(list(case_ids)))
        rows = session.exec(statement.order_by(col(EvalCaseRow.case_id))).all()
    return [_to_stored(row) for row in rows]


def case_history(engine: Engine, dataset: str, case_id: str) -> list[StoredCase]:
    """Every version of one case, oldest first."""
    with read_session(engine) as session:
        rows = session.exec(
            select(EvalCaseRow)
            .where(EvalCaseRow.dataset == dataset, EvalCaseRow.case_id == case_id)
            .order_by(col(EvalCaseRow.version))
        ).all()
    return [_to_stored(row) for row in rows]


def _bump(session: Session, dataset: str) -> int:
    row = session.get(EvalDatasetRow, dataset) or EvalDatasetRow(name=dataset, version=0)
    row.version += 1
    row.updated_at = datetime.now(timezone.utc)
    session.add(row)
    return row.version


def add_cases(
    engine: Engine,
    dataset: str,
    cases: Iterable[EvalCase],
    *,
    provenance: dict[str, Any] | None = None,
    provenances: Sequence[dict[str, Any]] | None = None,
) -> ImportReport:
    """Add or update cases in one transaction; a changed case gets a new version, the dataset one new version.

    Cases identical to their current version are left alone; when nothing changes the dataset
    version stays as it is. `provenances` (one per case) overrides the shared `provenance`.
    """
    cases = list(cases)
    seen: set[str] = set()
    for case in cases:
        if case.case_id in seen:
            raise InputError(
                f"case id {quoted(case.case_id)} appears twice in one import; give every case its own id"
            )
        seen.add(case.case_id)
    if provenances is not None and len(provenances) != len(cases):
        raise ValueError(f"{len(cases)} cases but {len(provenances)} provenance records")
    report = ImportReport(dataset=dataset, dataset_version=0)
    with write_session(engine) as session:
        existing = {
            row.case_id: row
            for row in session.exec(_current(select(EvalCaseRow).where(EvalCaseRow.dataset == dataset))).all()
        }
        dataset_row = session.get(EvalDatasetRow, dataset)
        new_version: int | None = None
        for index, case in enumerate(cases):
            source = dict(provenances[index] if provenances is not None else (provenance or {}))
            old = existing.get(case.case_id)
            if old is not None and _content_hash(_to_stored(old).case) == _content_hash(case):
                report.unchanged.append(case.case_id)
                continue
            if new_version is None:
                new_version = _bump(session, dataset)
            if old is not None:
                old.valid_to = new_version
                session.add(old)
                report.updated.append(case.case_id)
                source = {**(old.provenance or {}), **source}
            else:
                report.added.append(case.case_id)
            session.add(_new_row(dataset, case, (old.version + 1) if old else 1, new_version, source))
        if new_version is None and dataset_row is None:
            new_version = _bump(session, dataset)  # an empty import still creates the dataset
        report.dataset_version = new_version if new_version is not None else dataset_row.version  # type: ignore[union-attr]
    return report


def _new_row(
    dataset: str, case: EvalCase, version: int, valid_from: int, provenance: dict[str, Any]
) -> EvalCaseRow:
    return EvalCaseRow(
        dataset=dataset,
        case_id=case.case_id,
        version=version,
        valid_from=valid_from,
        query=case.query,
        normalized_query=normalized_query(case.query),
        gold=dict(case.gold),
        gold_granularity=case.gold_granularity,
        must_have=list(case.must_have),
        intent_type=case.intent_type,
        difficulty=case.difficulty,
        tags=list(case.tags),
        k=case.k,
        gold_refs=[ref.model_dump(mode="json", exclude_none=True) for ref in case.gold_refs] or None,
        provenance=provenance,
    )


def delete_cases(engine: Engine, dataset: str, case_ids: Sequence[str]) -> int:
    """Remove cases from the current dataset version (their history stays); returns the new version."""
    with write_session(engine) as session:
        rows = session.exec(
            _current(
                select(EvalCaseRow).where(
                    EvalCaseRow.dataset == dataset, col(EvalCaseRow.case_id).in_(case_ids)
                )
            )
        ).all()
        if not rows:
            row = session.get(EvalDatasetRow, dataset)
            return row.version if row else 0
        version = _bump(session, dataset)
        for row in rows:
            row.valid_to = version
            session.add(row)
    return version


def find_duplicate(engine: Engine, dataset: str, query: str, gold: dict[str, int]) -> str | None:
    """The id of a current case with the same normalized query and the same relevant gold, or None."""
    wanted = gold_key(gold)
    with read_session(engine) as session:
        rows = session.exec(
            _current(
                select(EvalCaseRow).where(
                    EvalCaseRow.dataset == dataset, EvalCaseRow.normalized_query == normalized_query(query)
                )
            )
        ).all()
    return next((row.case_id for row in rows if gold_key(dict(row.gold or {})) == wanted), None)


def next_case_id(engine: Engine, dataset: str, prefix: str = "case") -> str:
    """A case id not used in `dataset` yet: `<prefix>-0001`, `<prefix>-0002`, …"""
    with read_session(engine) as session:
        count = session.exec(
            select(func.count(func.distinct(EvalCaseRow.case_id))).where(EvalCaseRow.dataset == dataset)
        ).one()
        used = set(session.exec(select(EvalCaseRow.case_id).where(EvalCaseRow.dataset == dataset)).all())
    number = int(count) + 1
    while f"{prefix}-{number:04d}" in used:
        number += 1
    return f"{prefix}-{number:04d}"


# ---------------------------------------------------------------- runs


def create_run(engine: Engine, run: EvalRunRow) -> EvalRunRow:
    """Store a new run row and return it with its id."""
    with write_session(engine) as session:
        session.add(run)
        session.flush()
        session.refresh(run)
    return run


def update_run(engine: Engine, run_id: int, **fields: Any) -> EvalRunRow:
    """Set fields of a run in one short transaction."""
    with write_session(engine) as session:
        row = session.get(EvalRunRow, run_id)
        if row is None:
            raise NotFoundError(f"no eval run {run_id}")
        for name, value in fields.items():
            setattr(row, name, value)
        session.add(row)
    return row


def save_case_results(engine: Engine, run_id: int, results: Sequence[EvalRunCaseRow]) -> int:
    """Store finished cases of a run (ignoring ones already stored) and return the run's stored count."""
    with write_session(engine) as session:
        stored = set(
            session.exec(
                select(EvalRunCaseRow.case_id).where(
                    EvalRunCaseRow.run_id == run_id,
                    col(EvalRunCaseRow.case_id).in_([r.case_id for r in results]),
                )
            ).all()
        )
        for result in results:
            if result.case_id not in stored:
                result.run_id = run_id
                session.add(result)
        session.flush()
        done = session.exec(select(func.count()).where(EvalRunCaseRow.run_id == run_id)).one()
        row = session.get(EvalRunRow, run_id)
        if row is not None:
            row.cases_done = int(done)
            row.heartbeat_at = datetime.now(timezone.utc)
            session.add(row)
    return int(done)


def get_run(engine: Engine, ref: str | int) -> EvalRunRow:
    """A run by id (`12`, `#12`) or by name (the latest run with that name).

    Raises:
        NotFoundError: no such run (the message says how to list them).
    """
    text = str(ref).strip().lstrip("#")
    with read_session(engine) as session:
        row = session.get(EvalRunRow, int(text)) if text.isdigit() else None
        if row is None:
            row = session.exec(
                select(EvalRunRow).where(EvalRunRow.name == text).order_by(col(EvalRunRow.id).desc())
            ).first()
    if row is None:
        raise NotFoundError(f"no eval run {quoted(ref)}; list them with `ragtriage eval runs`")
    return row


def list_runs(engine: Engine, dataset: str | None = None) -> list[EvalRunRow]:
    """Runs, newest first."""
    statement = select(EvalRunRow)
    if dataset is not None:
        statement = statement.where(EvalRunRow.dataset == dataset)
    with read_session(engine) as session:
        return list(session.exec(statement.order_by(col(EvalRunRow.id).desc())).all())


def run_case_results(
    engine: Engine,
    run_id: int,
    *,
    offset: int = 0,
    limit: int | None = None,
    snapshots: bool = True,
    case_ids: Sequence[str] | None = None,
) -> list[EvalRunCaseRow]:
    """The stored case results of a run in case id order (all, only `case_ids`, or `limit` from `offset`).

    `snapshots=False` leaves the candidate snapshots unread (most of each row's bytes): for callers
    that need only metrics, buckets and refusals; reading `.snapshot` of such a row then raises.
    """
    statement = select(EvalRunCaseRow).where(EvalRunCaseRow.run_id == run_id).order_by(EvalRunCaseRow.case_id)
    if not snapshots:
        statement = statement.options(defer(EvalRunCaseRow.snapshot))  # type: ignore[arg-type]
    if case_ids is not None:
        statement = statement.where(col(EvalRunCaseRow.case_id).in_(list(case_ids)))
    if offset:
        statement = statement.offset(offset)
    if limit is not None:
        statement = statement.limit(limit)
    with read_session(engine) as session:
        return list(session.exec(statement).all())


def run_case_count(engine: Engine, run_id: int) -> int:
    """How many case results a run has stored."""
    with read_session(engine) as session:
        return int(session.exec(select(func.count()).where(EvalRunCaseRow.run_id == run_id)).one())


def stored_case_ids(engine: Engine, run_id: int) -> set[str]:
    """Case ids a run already has results for (what `--resume` skips)."""
    with read_session(engine) as session:
        return set(session.exec(select(EvalRunCaseRow.case_id).where(EvalRunCaseRow.run_id == run_id)).all())


def gold_rows(engine: Engine, ids: Iterable[str]) -> tuple[dict[str, ChunkRow], dict[str, DocumentRow]]:
    """The chunk rows and document rows `ids` name (an id may be either), with the chunks' documents."""
    wanted = sorted(set(ids))
    chunks: dict[str, ChunkRow] = {}
    documents: dict[str, DocumentRow] = {}
    with read_session(engine) as session:
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            chunks.update(
                (r.chunk_id, r)
                for r in session.exec(select(ChunkRow).where(col(ChunkRow.chunk_id).in_(batch)))
            )
            documents.update(
                (r.doc_id, r)
                for r in session.exec(select(DocumentRow).where(col(DocumentRow.doc_id).in_(batch)))
            )
        owners = sorted({row.doc_id for row in chunks.values()} - set(documents))
        for start in range(0, len(owners), 500):
            batch = owners[start : start + 500]
            documents.update(
                (r.doc_id, r)
                for r in session.exec(select(DocumentRow).where(col(DocumentRow.doc_id).in_(batch)))
            )
    return chunks, documents


def live_chunk_texts(engine: Engine, doc_id: str) -> list[tuple[str, str]]:
    """`(chunk id, content)` of the chunks of a document that are not deleted."""
    with read_session(engine) as session:
        statement = select(ChunkRow.chunk_id, ChunkRow.content).where(
            ChunkRow.doc_id == doc_id, col(ChunkRow.status) != "deleted"
        )
        return [(chunk_id, content) for chunk_id, content in session.exec(statement)]


def live_chunk_places(
    engine: Engine, doc_ids: Iterable[str]
) -> list[tuple[str, str, str | None, int | None, int | None]]:
    """`(chunk_id, doc_id, anchor, char_start, char_end)` of the live chunks of `doc_ids`, by document
    in reading order (ordinal)."""
    wanted = sorted(set(doc_ids))
    found = []
    with read_session(engine) as session:
        for start in range(0, len(wanted), 500):
            # Five columns: sqlmodel's typed `select` stops at four.
            statement = (
                sa_select(
                    col(ChunkRow.chunk_id),
                    col(ChunkRow.doc_id),
                    col(ChunkRow.anchor),
                    col(ChunkRow.char_start),
                    col(ChunkRow.char_end),
                )
                .where(
                    col(ChunkRow.doc_id).in_(wanted[start : start + 500]), col(ChunkRow.status) != "deleted"
                )
                .order_by(col(ChunkRow.doc_id), col(ChunkRow.ordinal))
            )
            found += [tuple(row) for row in session.execute(statement).all()]
    return found


def source_documents(engine: Engine, kb: str) -> list[DocumentRow]:
    """The documents of `kb` that are not deleted."""
    with read_session(engine) as session:
        statement = select(DocumentRow).where(DocumentRow.kb == kb, col(DocumentRow.status) != "deleted")
        return list(session.exec(statement).all())
