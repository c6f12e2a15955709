"""The numpy BM25F scorer in `WhooshIndex.search` gives Whoosh's own results (ids, order, scores).

The fixture KB is chunked by the real loader and indexed by the real Whoosh writer; every fixture
query and every chunk title is searched both ways. Deletions and a second segment are included,
because Whoosh's statistics (document count, document frequency) still count deleted documents.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.index.bm25 import BM25Document, WhooshIndex
from ragtriage.kb.service import add_paths, list_chunks
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR


def _documents(home: Path) -> list[BM25Document]:
    """The fixture KB's chunks as the indexer hands them to Whoosh."""
    (home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("", encoding="utf-8")
    workspace = Workspace.open(home, home / "config.toml")
    try:
        add_paths(workspace, [FIXTURES_DIR / "kb"], index=False)
        chunks = list_chunks(workspace, include_content=True)
    finally:
        workspace.close()
    return [
        BM25Document(
            chunk_id=c.chunk_id,
            doc_id=c.doc_id,
            title=" ".join([c.title, *c.heading_path]).strip(),
            content=c.content,
            content_hash=c.content_hash,
            index_hash=c.content_hash,
        )
        for c in chunks
    ]


def _queries(documents: list[BM25Document]) -> list[str]:
    lines = (FIXTURES_DIR / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    fixture_queries = [json.loads(line)["query"] for line in lines if line.strip()]
    titles = sorted({d.title for d in documents})
    return [*fixture_queries, *titles, "E1001", "v2.3 发票", "审批 审批 审批"]


def _assert_same_as_whoosh(index: WhooshIndex, queries: list[str], k: int) -> None:
    compared = 0
    for query in queries:
        fast, _ = index.search(query, k)
        reference = index.search_with_whoosh(query, k)
        assert [h.rank for h in fast] == list(range(1, len(fast) + 1))
        # Scores may differ in the last bits (summation order); ranks must not.
        assert [h.chunk_id for h in fast] == [h.chunk_id for h in reference], query
        assert [h.score for h in fast] == pytest.approx([h.score for h in reference], rel=1e-9), query
        compared += bool(reference)
    assert compared > len(queries) // 2, "most queries should match something"


@pytest.fixture(scope="module")
def fixture_documents(tmp_path_factory: pytest.TempPathFactory) -> list[BM25Document]:
    documents = _documents(tmp_path_factory.mktemp("fixture-kb-home"))
    assert len(documents) > 50
    return documents


@pytest.fixture(scope="module")
def fixture_index(
    tmp_path_factory: pytest.TempPathFactory, fixture_documents: list[BM25Document]
) -> WhooshIndex:
    index = WhooshIndex(tmp_path_factory.mktemp("whoosh"), title_boost=2.0)
    index.apply(fixture_documents)
    return index


@pytest.mark.parametrize("k", [10, 1000])
def test_numpy_scores_equal_whoosh_search(
    fixture_index: WhooshIndex, fixture_documents: list[BM25Document], k: int
) -> None:
    _assert_same_as_whoosh(fixture_index, _queries(fixture_documents), k)


def test_equal_after_deletes_and_a_second_segment(
    tmp_path: Path, fixture_documents: list[BM25Document]
) -> None:
    index = WhooshIndex(tmp_path / "whoosh", title_boost=3.5)
    half = len(fixture_documents) // 2
    index.apply(fixture_documents[:half])
    index.search("审批", 10)  # open a searcher, so the next writes must refresh its cached postings
    index.apply(fixture_documents[half:], deletes=[d.chunk_id for d in fixture_documents[: half // 3]])
    assert index.doc_count() == len(fixture_documents) - half // 3
    deleted = {d.chunk_id for d in fixture_documents[: half // 3]}
    queries = _queries(fixture_documents)[::3]
    for query in queries:
        assert not deleted & {h.chunk_id for h in index.search(query, 50)[0]}
    _assert_same_as_whoosh(index, queries, 10)


def test_a_write_by_another_instance_refreshes_cached_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragtriage.index import bm25 as bm25_module

    monkeypatch.setattr(bm25_module, "_STALENESS_CHECK_S", 0.0)
    reader = WhooshIndex(tmp_path / "whoosh")
    writer = WhooshIndex(tmp_path / "whoosh")
    writer.apply([BM25Document("a", "d", "", "发票报销流程", "h1", "h1")])
    assert [h.chunk_id for h in reader.search("报销", 5)[0]] == ["a"]
    writer.apply([BM25Document("b", "d", "报销", "报销时限说明", "h2", "h2")])
    assert [h.chunk_id for h in reader.search("报销", 5)[0]] == ["b", "a"]
    _assert_same_as_whoosh(reader, ["报销", "发票 时限"], 5)
