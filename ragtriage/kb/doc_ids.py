"""Which files `kb add` reads, and the document id each one is stored under.

A file found under a folder given to `kb add` gets the id `<folder name>/<path relative to the
folder, without extension>` with `/` separators, so `kb add faq/ reference/` stores
`faq/index.zh-cn` and `reference/index.zh-cn` side by side. A file named on its own gets its stem.
Front matter `doc_id` overrides both (the caller applies it).

Ids are kept stable for documents already stored, because chunk ids start with the document id
and eval sets hold chunk ids:
1. a file whose path is already stored (in the same KB) keeps that document's id: a file of a
   folder re-added on its own, or a home whose documents were stored before the folder prefix
   existed (their ids are the bare relative path);
2. a file of a moved folder keeps a stored bare relative-path id when that document was added
   from a folder of the same name and its old file is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from ragtriage.kb.document import SUFFIX_FORMATS
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import DocumentRow


@dataclass(frozen=True)
class FileJob:
    """One file to load: where it is, the folder it was found under, and its derived ids."""

    path: Path
    """Resolved path of the file."""
    root: Path | None
    """Resolved folder given to `kb add` that holds the file; None for a file named on its own."""
    doc_id: str
    """The id derived from the path (see the module docstring)."""
    bare_id: str | None
    """The relative path without the folder prefix (the id before the prefix existed); None for a lone file."""


def collect_files(paths: list[Path]) -> list[FileJob]:
    """Every supported file under `paths` in a stable order, each once; hidden files and folders skipped."""
    jobs: dict[Path, FileJob] = {}
    for given in paths:
        if given.is_dir():
            root = given.resolve()
            for path in sorted(root.rglob("*")):
                relative = path.relative_to(root)
                if any(part.startswith(".") for part in relative.parts) or not path.is_file():
                    continue
                if path.suffix.lower() in SUFFIX_FORMATS:
                    bare_id = relative.with_suffix("").as_posix()
                    doc_id = str(PurePosixPath(root.name, bare_id)) if root.name else bare_id
                    jobs.setdefault(path, FileJob(path, root, doc_id, bare_id))
        else:
            path = given.resolve()
            jobs.setdefault(path, FileJob(path, None, path.stem, None))
    return list(jobs.values())


class StoredDocIds:
    """The ids documents are stored under in one KB, read once before a `kb add` walk."""

    def __init__(
        self, by_source_path: dict[str, str], origins: dict[str, tuple[str | None, str | None]]
    ) -> None:
        self._by_source_path = by_source_path
        self._origins = origins
        """doc id → (name of the folder it was added from or None, its source path)."""

    @classmethod
    def load(cls, engine: Engine, kb: str) -> StoredDocIds:
        """Read the documents of `kb` that came from files (deleted ones too: re-adding one keeps its ids)."""
        with read_session(engine) as session:
            rows = session.exec(
                select(DocumentRow.doc_id, DocumentRow.source_path, DocumentRow.meta).where(
                    DocumentRow.kb == kb, col(DocumentRow.source_path).is_not(None)
                )
            ).all()
        by_source_path: dict[str, str] = {}
        origins: dict[str, tuple[str | None, str | None]] = {}
        for doc_id, source_path, meta in rows:
            if source_path:
                by_source_path[source_path] = doc_id
            source_root = (meta or {}).get("source_root")
            origins[doc_id] = (Path(source_root).name if source_root else None, source_path)
        return cls(by_source_path, origins)

    def doc_id_for(self, job: FileJob) -> str:
        """The id to store `job`'s file under when it has no front matter `doc_id`."""
        stored = self._by_source_path.get(str(job.path))
        if stored is not None:
            return stored
        if job.root is None or job.bare_id is None or job.bare_id not in self._origins:
            return job.doc_id
        root_name, old_path = self._origins[job.bare_id]
        if root_name == job.root.name and not (old_path and Path(old_path).exists()):
            return job.bare_id
        return job.doc_id
