"""Whoosh BM25 index in tmp_path: segmentation, junk-free lexicon, flags, updates, locking (faults 9–12)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema

from ragtriage.errors import IndexStateError
from ragtriage.index import bm25 as bm25_module
from ragtriage.index.bm25 import FLAG_TOKENIZES_TO_NOTHING, BM25Document, WhooshIndex

POEM = ["床前明月光", "疑是地上霜", "举头望明月", "低头思故乡"]


def doc(chunk_id: str, content: str, title: str = "", content_hash: str | None = None) -> BM25Document:
    content_hash = content_hash or f"h-{chunk_id}"
    return BM25Document(chunk_id, "doc", title, content, content_hash, content_hash)


@pytest.fixture
def poem_index(tmp_path: Path) -> WhooshIndex:
    index = WhooshIndex(tmp_path / "whoosh")
    index.apply([doc(f"p{n}", line) for n, line in enumerate(POEM, start=1)])
    return index


def test_chinese_query_hits_only_the_document_with_the_word(poem_index: WhooshIndex) -> None:
    hits, flags = poem_index.search("故乡", 10)
    assert [h.chunk_id for h in hits] == ["p4"]
    assert hits[0].rank == 1 and hits[0].score > 0
    assert flags == []


def test_multi_term_query_is_an_or_group(poem_index: WhooshIndex) -> None:
    hits, _ = poem_index.search("明月 故乡 不存在的词", 10)
    assert {h.chunk_id for h in hits} == {"p1", "p3", "p4"}
    assert [h.rank for h in hits] == [1, 2, 3]


@pytest.mark.parametrize("query", ["的了和", "？！。", "", "  "])
def test_queries_that_tokenize_to_nothing_are_flagged(poem_index: WhooshIndex, query: str) -> None:
    assert poem_index.search(query, 10) == ([], [FLAG_TOKENIZES_TO_NOTHING])


def test_lexicon_has_no_empty_or_whitespace_terms(tmp_path: Path) -> None:
    index = WhooshIndex(tmp_path / "whoosh")
    index.apply([doc("a", "Qdrant 本地模式 \t 报错 ，  。\u3000 E1001 !! ?"), doc("b", " ", title="  标题 ")])
    for field in ("content", "title"):
        lexicon = index.lexicon(field)
        assert lexicon
        assert "" not in lexicon and " " not in lexicon
        assert all(term.strip() == term for term in lexicon)


def test_full_width_text_is_indexed_normalized(tmp_path: Path) -> None:
    index = WhooshIndex(tmp_path / "whoosh")
    index.apply(
        [
            doc("fw", "Ｑｄｒａｎｔ本地模式报错"),
            doc("code", "升级后出现错误 E1001，请重启"),
            doc("x", "无关内容"),
        ]
    )
    assert "qdrant" in index.lexicon()
    assert [h.chunk_id for h in index.search("Ｅ１００１", 5)[0]] == ["code"]
    assert [h.chunk_id for h in index.search("QDRANT", 5)[0]] == ["fw"]


def test_title_boost_ranks_a_title_hit_first(tmp_path: Path) -> None:
    index = WhooshIndex(tmp_path / "whoosh", title_boost=3.0)
    index.apply([doc("body", "软件源 配置 方法 说明"), doc("titled", "配置 方法 说明 内容", title="软件源")])
    assert [h.chunk_id for h in index.search("软件源", 5)[0]] == ["titled", "body"]


def test_update_and_delete_by_chunk_id(poem_index: WhooshIndex) -> None:
    poem_index.apply([doc("p4", "低头思家乡", content_hash="new")], deletes=["p1"])
    assert poem_index.search("故乡", 5)[0] == []
    assert [h.chunk_id for h in poem_index.search("家乡", 5)[0]] == ["p4"]
    assert poem_index.content_hash("p4") == "new"
    assert poem_index.content_hash("p1") is None
    assert set(poem_index.indexed_hashes()) == {"p2", "p3", "p4"}
    assert poem_index.doc_count() == 3


def test_a_write_by_another_instance_is_seen_by_an_open_searcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = WhooshIndex(tmp_path / "whoosh")
    reader.apply([doc("a", "明月")])
    assert reader.search("故乡", 5)[0] == []
    monkeypatch.setattr(bm25_module, "_STALENESS_CHECK_S", 0.0)
    WhooshIndex(tmp_path / "whoosh").apply([doc("b", "故乡")])
    assert [h.chunk_id for h in reader.search("故乡", 5)[0]] == ["b"]


def test_a_second_writer_gets_a_clear_index_state_error(poem_index: WhooshIndex) -> None:
    poem_index.writer_timeout_s = 0.0
    holder = poem_index._index.writer()
    try:
        with pytest.raises(IndexStateError, match="another ragtriage process is writing"):
            poem_index.apply([doc("p5", "新的一行")])
    finally:
        holder.cancel()
    poem_index.apply([doc("p5", "新的一行")])
    assert poem_index.content_hash("p5") == "h-p5"


def test_multiprocess_build_is_searchable(tmp_path: Path) -> None:
    index = WhooshIndex(tmp_path / "whoosh", procs=2, multiproc_min_docs=1)
    index.apply([doc(f"c{n}", f"第{n}条 {line}") for n, line in enumerate(POEM * 5)])
    assert index.doc_count() == 20
    assert {h.chunk_id for h in index.search("故乡", 20)[0]} == {"c3", "c7", "c11", "c15", "c19"}


def test_an_index_whose_pickled_analyzer_is_gone_says_to_reindex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoosh pickles the analyzer's class into the index: one written before the analyzer moved
    (`ragtriage.pipeline.analyzer`) must give one line naming `kb reindex`, not a traceback."""
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "moved_analyzer.py").write_text(
        "from whoosh.analysis import RegexTokenizer\n\n\nclass OldAnalyzer(RegexTokenizer):\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(module_dir))
    import moved_analyzer  # type: ignore[import-not-found]

    folder = tmp_path / "whoosh"
    folder.mkdir()
    schema = Schema(
        chunk_id=ID(stored=True, unique=True), content=TEXT(analyzer=moved_analyzer.OldAnalyzer())
    )
    whoosh_index.create_in(str(folder), schema, indexname=bm25_module.INDEX_NAME).writer().commit()
    monkeypatch.delitem(sys.modules, "moved_analyzer")
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry != str(module_dir)])

    with pytest.raises(IndexStateError, match=r"older ragtriage .*run `ragtriage kb reindex`"):
        WhooshIndex(folder)
