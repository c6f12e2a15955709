"""What diagnosis needs from the rest of ragtriage, as one small interface, and its real wiring.

`DiagnosisContext` is the whole surface the diagnosis core uses: run the pipeline, read chunks and
their neighbours, ask what the indexes hold, the alias dictionary and the analyzer. Unit tests pass
small fakes; `WorkspaceContext` wires it to a `Workspace` (SQL KB, Whoosh + Qdrant, the pipeline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ragtriage.config.settings import Settings
from ragtriage.kb.service import chunks_containing, get_chunks
from ragtriage.kb.service import neighbours as chunk_neighbours
from ragtriage.kb.types import ChunkRecord
from ragtriage.pipeline.rewrite import load_aliases
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.replay.fidelity_run import chunk_origins
from ragtriage.triage.gold_check import DeletedGold, deleted_gold

if TYPE_CHECKING:
    from ragtriage.config.profiles import ResolvedProfile
    from ragtriage.pipeline.pipeline import Pipeline
    from ragtriage.workspace import Workspace

#: Chunks `kb_chunks_with` returns at most (enough to tell a glossary mention from real use).
KB_CHUNKS_LIMIT = 20


def read_alias_file(path: Path) -> dict[str, list[str]]:
    """The alias file as `term → synonyms`, one entry per synonym group (errors name file and line)."""
    return {group[0]: list(group[1:]) for group in load_aliases(path).groups}


@runtime_checkable
class DiagnosisContext(Protocol):
    """The services diagnosis reads from; every method is cheap after the first call (warm)."""

    settings: Settings

    @property
    def aliases(self) -> Mapping[str, Sequence[str]]:
        """The alias dictionary the rewrite uses: term → synonyms."""
        ...

    def run(self, query: str, options: RunOptions) -> Trace:
        """Run the pipeline once with one-off options."""
        ...

    def chunk(self, chunk_id: str) -> ChunkRecord | None:
        """The KB's chunk (with content), or None when the KB does not know the id."""
        ...

    def neighbours(self, chunk_id: str) -> list[ChunkRecord]:
        """Chunks of the same document at ordinal ±1."""
        ...

    def indexed_hash(self, chunk_id: str) -> dict[str, str | None]:
        """Content hash each index holds for the chunk: `{"bm25": hash | None, "dense": hash | None}`."""
        ...

    def tokenize(self, text: str) -> list[str]:
        """The BM25 analyzer's tokens (NFKC, lower-case, jieba): how documents are indexed."""
        ...

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms the BM25 route searches for `query` (`[index] query_segmentation`,
        `query_stop_words`), in order."""
        ...

    def similarity(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """Cosine similarity of the query to each text with the embedder, or None without one."""
        ...

    def in_dictionary(self, term: str) -> bool:
        """True when the tokenizer's dictionary has `term` as a word (not a guess of its HMM)."""
        ...

    def kb_chunks_with(self, term: str) -> list[ChunkRecord]:
        """Published chunks whose title or text contains `term`; at most `KB_CHUNKS_LIMIT`."""
        ...


class WorkspaceContext:
    """`DiagnosisContext` over a `Workspace`: the KB in SQL, the derived indexes and the pipeline.

    Chunk lookups are cached for the lifetime of the context (one command or one TUI action).
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.settings = workspace.settings
        self._chunks: dict[str, ChunkRecord | None] = {}
        self._aliases: dict[str, dict[str, list[str]]] = {}
        self._indexes: Any = None
        self._containing: dict[str, list[ChunkRecord]] = {}
        self._profile: ResolvedProfile | None = None

    def use_profile(self, profile: ResolvedProfile | None) -> None:
        """Replays and counterfactuals run with this replay profile's pipeline and settings (the
        one mapped to the diagnosed request's pipeline_version); None: the settings as they are."""
        self._profile = profile
        self.settings = profile.settings if profile is not None else self.workspace.settings

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline replays run through: the profile's, else the workspace's."""
        if self._profile is None:
            return self.workspace.pipeline
        return self.workspace.pipeline_for(self._profile)

    @property
    def aliases(self) -> Mapping[str, Sequence[str]]:
        """The alias file named in `settings.rewrite.alias_file` (empty when unset or absent)."""
        key = self.settings.rewrite.alias_file or ""
        if key not in self._aliases:
            path = self.workspace.resolve_path(self.settings.rewrite.alias_file)
            self._aliases[key] = read_alias_file(path) if path is not None and path.exists() else {}
        return self._aliases[key]

    def run(self, query: str, options: RunOptions) -> Trace:
        """One pipeline run through the profile's (or the workspace's) lazily built pipeline."""
        return self.pipeline.run(query, options=options)

    def prefetch(self, chunk_ids: Sequence[str]) -> None:
        """Load many chunks in one query (diagnosis asks about the whole candidate pool)."""
        missing = [c for c in dict.fromkeys(chunk_ids) if c not in self._chunks]
        if not missing:
            return
        found = get_chunks(self.workspace.engine, missing)
        for chunk_id in missing:
            self._chunks[chunk_id] = found.get(chunk_id)

    def chunk_origins(self, chunk_ids: Sequence[str]) -> tuple[set[str], dict[str, str]]:
        """(live chunk ids, id → document of the rest) in bulk: a deleted row keeps its document; an
        id with no row is named by ragtriage's `doc_id#hash` scheme when that document exists."""
        return chunk_origins(self.workspace.engine, chunk_ids)

    def deleted_gold(self, chunk_ids: Sequence[str]) -> list[DeletedGold]:
        """Why each of these deleted chunks is deleted, and the live chunk closest to it
        (`triage.gold_check.deleted_gold`; live and unknown ids are left out)."""
        return deleted_gold(self.workspace.engine, chunk_ids)

    def chunk(self, chunk_id: str) -> ChunkRecord | None:
        """The chunk from SQL (cached), None when unknown."""
        if chunk_id not in self._chunks:
            self.prefetch([chunk_id])
        return self._chunks[chunk_id]

    def neighbours(self, chunk_id: str) -> list[ChunkRecord]:
        """Same document, ordinal ±1, from SQL."""
        return list(chunk_neighbours(self.workspace.engine, chunk_id))

    def _open_indexes(self) -> Any:
        # The pipeline's own indexes (one Whoosh searcher, one Qdrant client, one embedder per
        # process); open a separate set only for a pipeline built without them.
        shared = getattr(self.workspace.pipeline, "indexes", None)
        if shared is not None:
            return shared
        if self._indexes is None:
            # Imported here, like the analyzer below: Whoosh and jieba load only when diagnosis runs
            # (every command's module imports this one for `--help`).
            from ragtriage.index.indexer import open_indexes

            self._indexes = open_indexes(self.workspace.home, self.workspace.settings)
        return self._indexes

    def indexed_hash(self, chunk_id: str) -> dict[str, str | None]:
        """Content hashes stored with the chunk in Whoosh and in the Qdrant payload."""
        return dict(self._open_indexes().indexed_content_hash(chunk_id))

    def close(self) -> None:
        """Release the indexes this context opened (the workspace closes the pipeline)."""
        if self._indexes is not None:
            self._indexes.close()
            self._indexes = None

    def tokenize(self, text: str) -> list[str]:
        """The analyzer Whoosh indexes with."""
        from ragtriage.index.analyzer import tokenize

        return list(tokenize(text))

    def query_terms(self, query: str) -> list[str]:
        """The BM25 index's own query analysis, so evidence names the terms the route searched."""
        return list(self._open_indexes().bm25.query_terms(query))

    def in_dictionary(self, term: str) -> bool:
        """jieba's dictionary, as the analyzer loads it."""
        from ragtriage.index.analyzer import in_dictionary

        return in_dictionary(term)

    def kb_chunks_with(self, term: str) -> list[ChunkRecord]:
        """A LIKE search over the published chunks' titles and text (cached per term)."""
        if term not in self._containing:
            found = chunks_containing(self.workspace.engine, self.settings.kb.name, term, KB_CHUNKS_LIMIT)
            self._containing[term] = list(found)
        return self._containing[term]

    def similarity(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """Query-vs-passage cosine with the configured embedder (vectors are L2-normalised)."""
        if not texts:
            return []
        embedder = getattr(self.workspace.pipeline, "embedder", None)
        if embedder is None:
            return None
        query_vector = embedder.embed_queries([query])[0]
        passage_vectors = embedder.embed_passages(list(texts))
        return [float(value) for value in passage_vectors @ query_vector]
