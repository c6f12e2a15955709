"""KB writes followed by an index sync, as the faces call them: `kb add`, `kb remove`, `kb import`.

The KB half is `ragtriage.kb` (it knows nothing of the indexes); the sync is `indexer.sync_indexes`.
`--no-index` (`index=False`) stores the chunks only and says how to index them later.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy.engine import Engine

from ragtriage import locations
from ragtriage.config.settings import Settings
from ragtriage.index.embed import get_embedder
from ragtriage.index.indexer import sync_indexes
from ragtriage.index.manifest import dense_backend_matches, read_manifest
from ragtriage.interrupts import latched_interrupts
from ragtriage.kb import service
from ragtriage.kb.import_report import ImportReport
from ragtriage.kb.importer import ImportSpec, run_import
from ragtriage.kb.reports import AddReport, RemoveReport

__all__ = ["add_paths", "import_source", "indexes_current", "interrupted_message", "remove_documents"]

ProgressCallback = Callable[[int, int], None]
NO_INDEX = "--no-index: run `ragtriage kb reindex` once the KB is complete"
NOTHING_CHANGED = "nothing changed and the indexes are up to date"


def add_paths(
    home: Path,
    settings: Settings,
    engine: Engine,
    paths: Sequence[Path | str],
    on_progress: ProgressCallback | None = None,
    *,
    index: bool = True,
    on_index_progress: ProgressCallback | None = None,
) -> AddReport:
    """`kb.service.add_paths`, then sync the indexes (unless `index=False`)."""
    report = service.add_paths(engine, settings, paths, on_progress)
    if index:
        sync = sync_indexes(home, settings, engine, on_index_progress or on_progress)
        report.index = dataclasses.asdict(sync)
    else:
        report.index_skipped = NO_INDEX
    return report


def remove_documents(
    home: Path, settings: Settings, engine: Engine, doc_ids: Sequence[str], *, index: bool = True
) -> RemoveReport:
    """`kb.service.remove_documents`, then sync the indexes (unless `index=False`)."""
    report = service.remove_documents(engine, settings.kb.name, doc_ids)
    if index:
        report.index = dataclasses.asdict(sync_indexes(home, settings, engine))
    else:
        report.index_skipped = NO_INDEX
    return report


def indexes_current(home: Path, settings: Settings, revision: int) -> bool:
    """The index manifest was written at KB revision `revision` with the configured engines."""
    manifest = read_manifest(locations.manifest_path(home))
    return (
        manifest is not None
        and manifest.kb_revision == revision
        and manifest.kb == settings.kb.name
        and manifest.bm25_engine == settings.index.bm25_engine
        and dense_backend_matches(manifest, settings.index)
    )


def import_source(
    home: Path,
    settings: Settings,
    engine: Engine,
    spec: ImportSpec,
    *,
    full: bool = False,
    skip_bad_rows: bool = False,
    index: bool = True,
    on_progress: ProgressCallback | None = None,
    on_index_progress: ProgressCallback | None = None,
) -> ImportReport:
    """`kb.importer.run_import`, then sync the indexes (unless `index=False`, or nothing changed
    and the indexes hold the KB's revision).

    Raises:
        InputError: see `run_import` (nothing is written then).
        IndexStateError: the indexes were built with another embedder.
        KeyboardInterrupt: with a message saying whether the chunks were stored.
    """

    def query_embedder() -> tuple[str, int]:
        embedder = get_embedder(settings.embedder)
        return embedder.name, embedder.dim

    stored: int | None = None
    with latched_interrupts() as check_interrupt:
        try:
            report, written = run_import(
                home,
                settings,
                engine,
                spec,
                query_embedder,
                full=full,
                skip_bad_rows=skip_bad_rows,
                on_progress=on_progress,
                reuse_last=lambda revision: not index or indexes_current(home, settings, revision),
                check_interrupt=check_interrupt,
            )
            stored = report.kb_revision if written is not None else None
            check_interrupt()
            if not index:
                report.index_skipped = NO_INDEX
            elif (written is None and indexes_current(home, settings, report.kb_revision)) or (
                report.same_source_as_last
            ):
                report.index_skipped = NOTHING_CHANGED
            else:
                report.index = dataclasses.asdict(sync_indexes(home, settings, engine, on_index_progress))
        except KeyboardInterrupt:
            raise KeyboardInterrupt(interrupted_message(stored)) from None
    return report


def interrupted_message(stored_revision: int | None) -> str:
    """What an interrupted import did: nothing (before its commit), or stored the chunks but not
    (all of) the indexes."""
    if stored_revision is None:
        return "kb import: interrupted; nothing was imported (the KB and its indexes are as they were)"
    return (
        f"kb import: interrupted while updating the indexes; the chunks are stored (KB revision "
        f"{stored_revision}) but the indexes are behind: run the same kb import again to update them"
    )
