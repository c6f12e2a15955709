"""How the derived indexes stand against the KB, from the index manifest: `index_status` (the
counts behind `up_to_date`, `stale` or `missing`) and `index_lag` (one line for replay and eval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import select

from ragtriage import locations
from ragtriage.config.settings import Settings
from ragtriage.index.embed import embedder_name
from ragtriage.index.kb_chunks import kb_revision_of
from ragtriage.index.manifest import (
    EMBEDDED_DENSE_BACKEND,
    SERVER_DENSE_BACKEND,
    configured_dense_backend,
    dense_backend_matches,
    read_manifest,
)
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkRow

__all__ = ["index_lag", "index_status"]


def index_lag(home: Path, settings: Settings, engine: Engine) -> str | None:
    """One line when the local indexes do not hold the KB's current revision (None when they do).

    Cheap (the manifest and the KB revision only): replay and eval print it so that empty or short
    ranked lists after `kb add/import --no-index` say why, and what to run.
    """
    with read_session(engine) as session:
        revision = kb_revision_of(session, settings.kb.name)
    if revision == 0:
        return None
    manifest = read_manifest(locations.manifest_path(home))
    if manifest is None:
        return (
            f"the indexes are not built for KB revision {revision} (stored with --no-index?): "
            "run `ragtriage kb reindex`"
        )
    if manifest.kb_revision != revision:
        return (
            f"the indexes hold KB revision {manifest.kb_revision}, the KB is at revision {revision}: "
            "run `ragtriage kb reindex` to search the current chunks"
        )
    if manifest.built_with not in (SERVER_DENSE_BACKEND, EMBEDDED_DENSE_BACKEND):
        return None  # a removed backend: opening the indexes refuses it with its own line
    if not dense_backend_matches(manifest, settings.index):
        return (
            f"the dense index was built with dense_backend {manifest.built_with}, the settings name "
            f"{configured_dense_backend(settings.index)}: "
            "run `ragtriage kb reindex` to fill it"
        )
    return None


def index_status(home: Path, settings: Settings, engine: Engine) -> dict[str, Any]:
    """Manifest vs KB: `state` is `up_to_date`, `stale` or `missing`, with the counts behind it."""
    kb = settings.kb.name
    with read_session(engine) as session:
        kb_hashes = dict(
            session.exec(
                select(ChunkRow.chunk_id, ChunkRow.content_hash).where(
                    ChunkRow.status == "published", ChunkRow.kb == kb
                )
            ).all()
        )
        revision = kb_revision_of(session, kb)
    configured = embedder_name(settings.embedder)
    status: dict[str, Any] = {
        "kb": kb,
        "kb_revision": revision,
        "kb_chunks": len(kb_hashes),
        "embedder": configured,
    }
    manifest = read_manifest(locations.manifest_path(home))
    status["dense_backend"] = EMBEDDED_DENSE_BACKEND
    status["dense_backend_auto"] = settings.index.dense_backend == "auto"
    status["dense_server"] = settings.index.qdrant_url is not None
    if manifest is None:
        return {**status, "state": "missing", "indexed_chunks": 0}
    indexed = manifest.content_hashes
    changed = sum(1 for cid, h in kb_hashes.items() if cid in indexed and indexed[cid] != h)
    not_indexed = len(kb_hashes.keys() - indexed.keys())
    extra = len(indexed.keys() - kb_hashes.keys())
    backend_matches = dense_backend_matches(manifest, settings.index)
    up_to_date = (
        manifest.kb_revision == revision and backend_matches and not (changed or not_indexed or extra)
    )
    return {
        **status,
        "state": "up_to_date" if up_to_date else "stale",
        "index_revision": manifest.kb_revision,
        "indexed_chunks": manifest.chunk_count,
        "changed_chunks": changed,
        "unindexed_chunks": not_indexed,
        "extra_chunks": extra,
        "index_embedder": manifest.embedder,
        "imported_vectors": manifest.imported_vectors,
        "index_dim": manifest.dim,
        "embedder_matches": manifest.embedder == configured,
        "index_dense_backend": manifest.built_with,
        "dense_backend_matches": backend_matches,
        "updated_at": manifest.updated_at,
    }
