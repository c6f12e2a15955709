"""The bm25s BM25 engine (`[index] bm25_engine = "bm25s"`): a real index in tmp_path, built from the
same analyzer terms as Whoosh, checked against Whoosh's rankings."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage import locations
from ragtriage.cli import cli
from ragtriage.errors import IndexLockedError
from ragtriage.index import bm25s_index
from ragtriage.index.analyzer import terms, tokenize
from ragtriage.index.bm25 import FLAG_INDEX_EMPTY, FLAG_TOKENIZES_TO_NOTHING, BM25Document, WhooshIndex
from ragtriage.index.bm25s_index import BM25sIndex, _FileLock
from ragtriage.index.indexer import open_indexes
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR
from tests.tiny_kb import TINY_DOCS, write_markdown_docs


def doc(chunk_id: str, content: str, title: str = "", content_hash: str | None = None) -> BM25Document:
    digest = content_hash or str(abs(hash(content)))
    return BM25Document(chunk_id, chunk_id.split("#")[0], title, content, digest, digest + title)


def tiny_docs() -> list[BM25Document]:
    """The tiny KB with production-style ids: UUIDs and a plain integer."""
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, name)) for name in TINY_DOCS][:-1] + ["42"]
    return [
        doc(chunk_id, body, title) for chunk_id, (title, body) in zip(ids, TINY_DOCS.values(), strict=True)
    ]


def fixture_texts() -> list[str]:
    files = sorted(path for path in (FIXTURES_DIR / "kb").rglob("*.md"))
    return [path.read_text(encoding="utf-8") for path in files]


@pytest.fixture
def index(tmp_path: Path) -> BM25sIndex:
    built = BM25sIndex(tmp_path / "bm25s")
    built.apply(tiny_docs())
    return built


def test_a_query_finds_the_chunk_with_its_words(index: BM25sIndex) -> None:
    by_title = {d.title: d.chunk_id for d in tiny_docs()}
    hits, flags = index.search("红字发票怎么开", 3)
    assert flags == [] and hits[0].chunk_id == by_title["发票开具"] == "42"
    assert [hit.rank for hit in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score > 0 for a, b in zip(hits, hits[1:], strict=False))
    hits, _ = index.search("请假要谁审批", 1)
    assert hits[0].chunk_id == by_title["请假流程"]


def test_flags_for_an_empty_query_and_an_empty_index(index: BM25sIndex, tmp_path: Path) -> None:
    assert index.search("的了吗？", 5) == ([], [FLAG_TOKENIZES_TO_NOTHING])
    assert BM25sIndex(tmp_path / "empty").search("发票", 5) == ([], [FLAG_INDEX_EMPTY])
    assert index.search("火星天气", 5) == ([], [])


def test_update_delete_and_reopen(index: BM25sIndex, tmp_path: Path) -> None:
    first = tiny_docs()[0]
    index.apply([doc(first.chunk_id, "火星基地的氧气补给流程", "火星")], ["42"])
    reopened = BM25sIndex(tmp_path / "bm25s")
    assert reopened.doc_count() == 5
    assert reopened.search("火星氧气", 1)[0][0].chunk_id == first.chunk_id
    assert "42" not in [hit.chunk_id for hit in reopened.search("红字发票", 5)[0]]
    hashes = reopened.indexed_hashes()
    assert "42" not in hashes and hashes[first.chunk_id][0] == reopened.content_hash(first.chunk_id)
    assert "火星" in reopened.lexicon("title") and "氧气" in reopened.lexicon("content")
    reopened.delete([first.chunk_id])
    assert BM25sIndex(tmp_path / "bm25s").doc_count() == 4
    assert not list((tmp_path / "bm25s").glob("staging-*")) and not list((tmp_path / "bm25s").glob("old-*"))


def test_unchanged_content_is_not_segmented_again(index: BM25sIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    segmented: list[str] = []
    monkeypatch.setattr(bm25s_index, "terms", lambda text: segmented.append(text) or terms(text))
    renamed = [doc(d.chunk_id, d.content, d.title + "（新）", d.content_hash) for d in tiny_docs()]
    index.apply(renamed)
    assert sorted(segmented) == sorted(d.title for d in renamed), "titles only: contents come from the cache"
    assert index.search("新", 10)[0], "the new title words are indexed"


def test_terms_equal_the_whoosh_analyzer_tokens() -> None:
    for text in fixture_texts():
        assert terms(text) == tokenize(text)


def test_two_segmenting_processes_build_the_same_index(tmp_path: Path) -> None:
    texts = fixture_texts()
    docs = [doc(f"c{n}", text, f"标题{n}") for n, text in enumerate(texts * 12)]
    one = BM25sIndex(tmp_path / "one", procs=1)
    two = BM25sIndex(tmp_path / "two", procs=2, multiproc_min_docs=10)
    one.apply(docs)
    two.apply(docs)
    for query in ["审批超时", "员工离职账号", "报销发票"]:
        assert one.search(query, 10) == two.search(query, 10)


def test_a_second_writer_gets_a_clear_locked_error(index: BM25sIndex, tmp_path: Path) -> None:
    folder = tmp_path / "bm25s"
    other = BM25sIndex(folder, writer_timeout_s=0.1)
    with _FileLock(folder / "write.lock", 0.1, folder):
        with pytest.raises(IndexLockedError, match="another ragtriage process is writing the BM25 index"):
            other.apply([doc("x", "内容")])
    other.apply([doc("x", "内容")])
    assert other.doc_count() == 7


def test_rankings_agree_with_whoosh_on_the_tiny_kb(index: BM25sIndex, tmp_path: Path) -> None:
    whoosh = WhooshIndex(tmp_path / "whoosh")
    whoosh.apply(tiny_docs())
    for query in ["出差发票多久内要提交", "请假要谁审批", "VPN 连不上怎么办", "红字发票怎么开", "会议室取消"]:
        ours = [hit.chunk_id for hit in index.search(query, 3)[0]]
        theirs = [hit.chunk_id for hit in whoosh.search(query, 3)[0]]
        assert ours[0] == theirs[0] and set(ours) == set(theirs), query
    whoosh.close()


def test_a_home_configured_for_bm25s_indexes_and_replays_with_it(tmp_path: Path, home: Path) -> None:
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.kb.service import list_chunks

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[index]\nbm25_engine = "bm25s"\n', encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        add_paths(
            workspace.home, workspace.settings, workspace.engine, [write_markdown_docs(tmp_path / "docs")]
        )
        invoice = next(
            c.chunk_id
            for c in list_chunks(workspace.engine, workspace.settings.kb.name)
            if c.doc_id.endswith("invoice")
        )
        indexes = open_indexes(workspace.home, workspace.settings)
        try:
            assert isinstance(indexes.bm25, BM25sIndex) and indexes.bm25.doc_count() == len(TINY_DOCS)
            assert indexes.manifest is not None and indexes.manifest.bm25_engine == "bm25s"
        finally:
            indexes.close()
    finally:
        workspace.close()
    assert not locations.whoosh_dir(home).exists()
    result = CliRunner().invoke(cli, ["replay", "--query", "红字发票怎么开", "--json"])
    assert result.exit_code == 0, result.output
    bm25_raw = next(route for route in json.loads(result.output)["routes"] if route["name"] == "bm25_raw")
    assert bm25_raw["hits"][0]["chunk_id"] == invoice and bm25_raw["flags"] == []


def test_an_open_index_sees_another_instance_s_write(
    index: BM25sIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert index.search("火星", 1) == ([], [])
    BM25sIndex(tmp_path / "bm25s").apply([doc("mars#1", "火星基地", "火星")])
    monkeypatch.setattr(bm25s_index, "_STALENESS_CHECK_S", 0.0)
    assert index.search("火星", 1)[0][0].chunk_id == "mars#1"


def test_an_import_without_titles_builds_without_a_warning(tmp_path: Path, home: Path) -> None:
    import warnings

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[index]\nbm25_engine = "bm25s"\n', encoding="utf-8")
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, name)) for name in TINY_DOCS][:-1] + ["42"]
    export = tmp_path / "untitled.jsonl"
    export.write_text(
        "".join(
            json.dumps({"chunk_id": chunk_id, "doc_id": chunk_id, "content": body}, ensure_ascii=False) + "\n"
            for chunk_id, (_, body) in zip(ids, TINY_DOCS.values(), strict=True)
        ),
        encoding="utf-8",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(cli, ["kb", "import", str(export)])
    assert result.exit_code == 0, result.output
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    # Every title is empty: the title field scores 0 and the content alone ranks.
    workspace = Workspace.open(home, None)
    try:
        bm25 = workspace.indexes.bm25
        assert isinstance(bm25, BM25sIndex)
        reference = BM25sIndex(
            tmp_path / "content-only", title_boost=0.0, query_segmentation=bm25.query_segmentation
        )
        reference.apply(
            [doc(chunk_id, body) for chunk_id, (_, body) in zip(ids, TINY_DOCS.values(), strict=True)]
        )
        for query in ("红字发票", "报销 发票", "客户端 密码"):
            hits = [(h.chunk_id, round(h.score, 5)) for h in bm25.search(query, 5)[0]]
            assert hits and hits == [
                (h.chunk_id, round(h.score, 5)) for h in reference.search(query, 5)[0]
            ], query
    finally:
        workspace.close()
