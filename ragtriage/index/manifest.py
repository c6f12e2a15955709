"""The index manifest (`<home>/index/manifest.json`): what the BM25 and dense indexes were built from.

It records the KB name and revision, the embedder name and dimension, the Qdrant collection, the
chunk count, a content-hash map (chunk id → content hash) with its digest, and build timestamps.
`index_status` compares it with the KB; `check_embedder` refuses to open the indexes with an
embedder other than the one that built them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ragtriage.config.settings import IndexSettings
from ragtriage.errors import IndexStateError
from ragtriage.index.types import Embedder

__all__ = [
    "IndexManifest",
    "check_dense_backend",
    "check_embedder",
    "configured_dense_backend",
    "dense_backend_matches",
    "hash_digest",
    "read_manifest",
    "write_manifest",
]

MANIFEST_VERSION = 1
#: `IndexManifest.built_with` of a dense index built on a Qdrant server.
SERVER_DENSE_BACKEND = "qdrant_server"
REINDEX_HINT = "run `ragtriage kb reindex` to rebuild the indexes with the configured embedder"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def hash_digest(content_hashes: Mapping[str, str]) -> str:
    """sha256 over the sorted (chunk id, content hash) pairs: equal digests mean equal indexed content."""
    digest = hashlib.sha256()
    for chunk_id in sorted(content_hashes):
        digest.update(f"{chunk_id}\t{content_hashes[chunk_id]}\n".encode())
    return digest.hexdigest()


class IndexManifest(BaseModel):
    """What the indexes hold and how they were built."""

    manifest_version: int = MANIFEST_VERSION
    kb: str = "default"
    kb_revision: int = 0
    """KB revision (`kb_state.revision`) the indexes were last synced to."""
    embedder: str
    dim: int
    collection: str
    qdrant: str
    """Local folder or server URL of the dense index."""
    chunk_count: int = 0
    content_digest: str = ""
    """`hash_digest(content_hashes)`."""
    content_hashes: dict[str, str] = Field(default_factory=dict)
    """chunk id → content hash of every indexed chunk."""
    created_at: str = Field(default_factory=_now)
    """When the indexes were first built (a rebuild resets it)."""
    updated_at: str = Field(default_factory=_now)
    """When the last sync finished."""
    imported_vectors: int = 0
    """Chunks whose vector was imported with them (`kb import`) under `embedder`, not embedded here."""
    last_sync_seconds: float = 0.0
    last_embed_seconds: float = 0.0
    bm25_engine: str = "whoosh"
    """`[index] bm25_engine` the BM25 index was built with (a change means a sync builds the other)."""
    dense_backend: str = "qdrant_local"
    """The embedded backend the dense index was built with (manifests from before this field are
    Qdrant local mode's, which `check_dense_backend` refuses)."""
    dense_server: bool | None = None
    """The dense index was built on a Qdrant server (`[index] qdrant_url`), so no embedded folder
    holds it; None in manifests from before this field (`built_on_server` then reads `qdrant`)."""

    @property
    def built_on_server(self) -> bool:
        """The dense index lives on a Qdrant server (`qdrant` is then its URL), not in the home."""
        return self.dense_server if self.dense_server is not None else "://" in self.qdrant

    @property
    def built_with(self) -> str:
        """`qdrant_server`, or the embedded backend the dense index was built with."""
        return SERVER_DENSE_BACKEND if self.built_on_server else self.dense_backend


def read_manifest(path: Path) -> IndexManifest | None:
    """The manifest at `path`, or None if there is none.

    Raises:
        IndexStateError: the file exists but cannot be read (names the file and the fix).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return IndexManifest.model_validate_json(text)
    except (ValidationError, ValueError) as error:
        first = str(error).splitlines()[0]
        raise IndexStateError(f"{path}: unreadable index manifest ({first}); {REINDEX_HINT}") from None


def write_manifest(path: Path, manifest: IndexManifest) -> None:
    """Write the manifest atomically (a crash never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(
        json.dumps(manifest.model_dump(mode="json"), ensure_ascii=False, indent=1), encoding="utf-8"
    )
    os.replace(temporary, path)


def check_embedder(manifest: IndexManifest | None, embedder: Embedder, path: Path) -> None:
    """Refuse an embedder whose name or dimension differs from the one the indexes were built with."""
    if manifest is None:
        return
    if manifest.embedder != embedder.name or manifest.dim != embedder.dim:
        built = "hold vectors imported as" if manifest.imported_vectors else "were built with embedder"
        raise IndexStateError(
            f"{path}: the indexes {built} {manifest.embedder} (dim {manifest.dim}) but the "
            f"settings configure {embedder.name} (dim {embedder.dim}); {REINDEX_HINT}, or set [embedder] back"
        )


#: The embedded dense backend (`[index] dense_backend` `auto` means it too).
EMBEDDED_DENSE_BACKEND = "qdrant_edge"


def configured_dense_backend(settings: IndexSettings) -> str:
    """`qdrant_server` with `[index] qdrant_url`, else the embedded backend."""
    return SERVER_DENSE_BACKEND if settings.qdrant_url is not None else EMBEDDED_DENSE_BACKEND


def dense_backend_matches(manifest: IndexManifest, settings: IndexSettings) -> bool:
    """The manifest's dense index is the configured one: on a Qdrant server when `qdrant_url` is
    set, else in the home's Qdrant Edge shard."""
    return manifest.built_with == configured_dense_backend(settings)


def check_dense_backend(manifest: IndexManifest | None, path: Path) -> None:
    """Refuse a home whose dense index was built by a backend this version cannot read."""
    if manifest is not None and manifest.built_with not in (SERVER_DENSE_BACKEND, EMBEDDED_DENSE_BACKEND):
        raise IndexStateError(
            f"{path}: the dense index was built with {manifest.built_with}, which this version no "
            "longer reads; run `ragtriage kb reindex` to rebuild it in Qdrant Edge"
        )
