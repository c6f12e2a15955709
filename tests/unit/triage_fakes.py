"""Hand-built traces and a fake `DiagnosisContext` for the diagnosis unit tests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence

from ragtriage.config.settings import Settings
from ragtriage.index.types import ScoredChunk
from ragtriage.kb.types import ChunkRecord
from ragtriage.pipeline.types import Candidate, RewriteResult, RouteResult, RunOptions, Trace
from ragtriage.triage.facts import chunk_text


def scored(ids: Sequence[str]) -> list[ScoredChunk]:
    """Ranked hits from 1 with decreasing scores."""
    return [ScoredChunk(chunk_id=c, rank=i, score=1.0 / i) for i, c in enumerate(ids, start=1)]


def make_trace(
    query: str,
    *,
    routes: Mapping[str, Sequence[str]],
    fused: Sequence[str] | None = None,
    rerank_input: Sequence[str] | None = None,
    reranked: Sequence[str] | None = None,
    final: Sequence[str] = (),
    rewritten: str | None = None,
    aliases: Mapping[str, list[str]] | None = None,
    mode: str = "rules",
    unknown: Sequence[str] = (),
) -> Trace:
    """A trace whose stages hold exactly the given ids (fused defaults to the routes' union)."""
    route_results = [
        RouteResult(
            name=name, kind="bm25" if name.startswith("bm25") else "dense", query=query, hits=scored(ids)
        )
        for name, ids in routes.items()
    ]
    if fused is None:
        fused = list(dict.fromkeys(c for ids in routes.values() for c in ids))
    rerank_input = list(fused) if rerank_input is None else list(rerank_input)
    reranked = list(rerank_input) if reranked is None else list(reranked)
    pool = dict.fromkeys(
        [*fused, *rerank_input, *reranked, *final, *(c for ids in routes.values() for c in ids)]
    )
    return Trace(
        query=query,
        rewrite=RewriteResult(
            raw_query=query,
            normalized_query=query,
            rewritten_query=rewritten if rewritten is not None else query,
            aliases=dict(aliases or {}),
            mode=mode,  # type: ignore[arg-type]
        ),
        routes=route_results,
        fused=scored(fused),
        rerank_input=rerank_input,
        reranked=scored(reranked),
        final=list(final),
        candidates=[Candidate(chunk_id=c, known=c not in unknown) for c in pool],
    )


def chunk(
    chunk_id: str, content: str, *, title: str = "", doc_id: str = "doc", ordinal: int = 0
) -> ChunkRecord:
    """A KB chunk whose content hash is the sha256 of its content."""
    return ChunkRecord(
        chunk_id=chunk_id,
        doc_id=doc_id,
        title=title,
        heading_path=[title] if title else [],
        ordinal=ordinal,
        content=content,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )


class FakeContext:
    """A `DiagnosisContext` over a dict of chunks; `run` answers from a function of the options."""

    def __init__(
        self,
        chunks: Sequence[ChunkRecord],
        *,
        run: Callable[[str, RunOptions], Trace] | None = None,
        aliases: Mapping[str, Sequence[str]] | None = None,
        indexed: Mapping[str, dict[str, str | None]] | None = None,
        settings: Settings | None = None,
        similarity: Callable[[str, Sequence[str]], list[float] | None] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self._chunks = {c.chunk_id: c for c in chunks}
        self._run = run
        self._aliases = {k: list(v) for k, v in (aliases or {}).items()}
        self._indexed = dict(indexed or {})
        self._similarity = similarity
        self.runs: list[RunOptions] = []
        self.not_in_dictionary: set[str] = set()
        """Terms the fake tokenizer dictionary lacks (HMM guesses in the real one)."""

    @property
    def aliases(self) -> Mapping[str, Sequence[str]]:
        return self._aliases

    def run(self, query: str, options: RunOptions) -> Trace:
        self.runs.append(options)
        if self._run is None:
            raise AssertionError("this test expects no pipeline run")
        return self._run(query, options)

    def chunk(self, chunk_id: str) -> ChunkRecord | None:
        return self._chunks.get(chunk_id)

    def neighbours(self, chunk_id: str) -> list[ChunkRecord]:
        me = self._chunks[chunk_id]
        return [
            c for c in self._chunks.values() if c.doc_id == me.doc_id and abs(c.ordinal - me.ordinal) == 1
        ]

    def indexed_hash(self, chunk_id: str) -> dict[str, str | None]:
        if chunk_id in self._indexed:
            return self._indexed[chunk_id]
        known = self._chunks[chunk_id].content_hash
        return {"bm25": known, "dense": known}

    def tokenize(self, text: str) -> list[str]:
        return [t.lower() for t in re.split(r"[\s，。？?！!、,.:：()（）]+", text) if t]

    def query_terms(self, query: str) -> list[str]:
        return list(dict.fromkeys(self.tokenize(query)))

    def similarity(self, query: str, texts: Sequence[str]) -> list[float] | None:
        return self._similarity(query, texts) if self._similarity is not None else None

    def in_dictionary(self, term: str) -> bool:
        return term not in self.not_in_dictionary

    def kb_chunks_with(self, term: str) -> list[ChunkRecord]:
        return [c for c in self._chunks.values() if term in chunk_text(c)]
