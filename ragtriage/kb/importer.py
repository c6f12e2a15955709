"""`kb import`'s KB half: pick the source, merge the mapping, check the embedder, import the rows.

The mapping is `[kb.import] map` overridden field by field by `--map`; the vector column is
`--vector-field`, else `[kb.import] vector_field` (a Qdrant source always brings its vectors).
Imported vectors are recorded under the configured embedder's name, because queries are embedded
with it: a different `[kb.import] embedder`, or vectors of another dimension, are refused up front
with both values named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine

from ragtriage import __version__
from ragtriage.config.settings import IMPORT_FIELDS, Settings
from ragtriage.errors import InputError
from ragtriage.kb.import_apply import ChunkSource, import_chunks
from ragtriage.kb.import_fingerprint import file_fingerprint
from ragtriage.kb.import_mapping import FieldMapper, check_field_name
from ragtriage.kb.import_report import ImportReport

__all__ = ["ImportSpec", "run_import"]

ProgressCallback = Callable[[int, int], None]
#: The configured query embedder's (name, dim), asked only when the rows bring vectors (it may load a model).
EmbedderOf = Callable[[], tuple[str, int]]
#: Where a Qdrant point keeps a field when no mapping names it: `payload.<field>`, and the point id.
_QDRANT_DEFAULTS = {"chunk_id": ["payload.chunk_id", "id"]}


@dataclass
class ImportSpec:
    """What to import from: exactly one of a file, a SQL query, or a Qdrant collection."""

    path: Path | None = None
    encoding: str | None = None
    sql_url: str | None = None
    query: str | None = None
    qdrant_url: str | None = None
    qdrant_path: Path | None = None
    """A Qdrant local-mode folder (what `QdrantClient(path=…)` opens)."""
    collection: str | None = None
    map: dict[str, str] = field(default_factory=dict)
    vector_field: str | None = None


def run_import(
    home: Path,
    settings: Settings,
    engine: Engine,
    spec: ImportSpec,
    query_embedder: EmbedderOf,
    *,
    full: bool = False,
    skip_bad_rows: bool = False,
    on_progress: ProgressCallback | None = None,
    reuse_last: Callable[[int], bool] = lambda revision: True,
    check_interrupt: Callable[[], None] = lambda: None,
) -> tuple[ImportReport, int | None]:
    """Import the source `spec` names into the KB: the report and the KB revision the import made
    (None: nothing written). See `import_apply.import_chunks` for `reuse_last` and `check_interrupt`.

    Raises:
        InputError: no source or more than one, a bad mapping, column or row (nothing is written),
            an unreachable database or Qdrant, a missing collection, a failing query.
    """
    import_settings = settings.kb.import_
    explicit = {**import_settings.map, **spec.map}
    for name in explicit:
        check_field_name(name, "--map")
    source, vector_field, defaults = _open_source(
        spec, import_settings.vector_field, import_settings.batch_size
    )
    embedder_label, expected_dim = (
        _vector_embedder(settings, query_embedder) if vector_field is not None else (None, None)
    )

    def make_mapper() -> FieldMapper:
        return FieldMapper(
            import_settings,
            explicit,
            source_name=source.name,
            vector_field=vector_field,
            defaults=defaults,
            expected_dim=expected_dim,
        )

    fingerprint = None
    if spec.path is not None:
        mapping = {
            "ragtriage": __version__,
            "path": str(spec.path.resolve()),
            "encoding": spec.encoding,
            "vector_field": vector_field,
            "map": explicit,
            "kb.import": import_settings.model_dump(mode="json"),
            "vectors_recorded_as": embedder_label,
            "dim": expected_dim,
            "full": full,
            "skip_bad_rows": skip_bad_rows,
        }
        fingerprint = file_fingerprint(spec.path, mapping)
    try:
        return import_chunks(
            engine,
            settings.kb.name,
            home,
            source,
            make_mapper,
            full=full,
            skip_bad_rows=skip_bad_rows,
            vector_embedder=embedder_label,
            on_progress=on_progress,
            fingerprint=fingerprint,
            reuse_last=reuse_last,
            check_interrupt=check_interrupt,
        )
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


def _open_source(
    spec: ImportSpec, configured_vector_field: str | None, batch_size: int
) -> tuple[ChunkSource, str | None, dict[str, list[str]] | None]:
    given = [
        name
        for name, present in (
            ("FILE", spec.path is not None),
            ("--sql", spec.sql_url is not None),
            ("--qdrant-url/--qdrant-path", spec.qdrant_url is not None or spec.qdrant_path is not None),
        )
        if present
    ]
    if len(given) != 1:
        raise InputError(
            "kb import needs exactly one source: a FILE, --sql URL --query SQL, or "
            f"--qdrant-url URL (or --qdrant-path DIR) --collection NAME (got {', '.join(given) or 'none'})"
        )
    vector_field = spec.vector_field or configured_vector_field
    if spec.path is not None:
        from ragtriage.kb.import_files import FileSource

        return (
            FileSource(spec.path, encoding=spec.encoding, vector_field=vector_field, batch_size=batch_size),
            (vector_field),
            None,
        )
    if spec.sql_url is not None:
        if not spec.query:
            raise InputError('--sql needs --query "SELECT …" naming the chunk columns')
        from ragtriage.kb.import_sql import SQLSource

        return SQLSource(spec.sql_url, spec.query, batch_size=batch_size), vector_field, None
    if not spec.collection:
        raise InputError("a Qdrant source needs --collection NAME")
    from ragtriage.kb.import_qdrant import QdrantSource

    source = QdrantSource(
        url=spec.qdrant_url,
        path=spec.qdrant_path,
        collection=spec.collection,
        vector_name=spec.vector_field,
        batch_size=batch_size,
    )
    defaults = {name: [f"payload.{name}"] for name in IMPORT_FIELDS}
    return source, source.vector_column, {**defaults, **_QDRANT_DEFAULTS}


def _vector_embedder(settings: Settings, query_embedder: EmbedderOf) -> tuple[str, tuple[int, str]]:
    """The name imported vectors are recorded under and the dimension they must have."""
    name, dim = query_embedder()
    declared = settings.kb.import_.embedder
    if declared is not None and declared != name:
        raise InputError(
            f"[kb.import] embedder says the vectors were made by {declared}, but queries would be embedded "
            f"with the configured embedder {name}; fix: configure [embedder] as the model that made "
            "the vectors (queries and passages must come from one model)"
        )
    return name, (dim, name)
