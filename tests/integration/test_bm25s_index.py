"""The bm25s BM25 engine (`[index] bm25_engine = "bm25s"`): a real index in tmp_path, built from the
same analyzer terms as Whoosh, checked against bm25s's own builder and against Whoosh's rankings."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ragtriage import locations
from ragtriage.cli import cli
from ragtriage.errors import IndexLockedError
from ragtriage.index import bm25s_matrix, bulk_terms
from ragtriage.index.analyzer import terms, tokenize
from ragtriage.index.bm25 import FLAG_INDEX_EMPTY, FLAG_TOKENIZES_TO_NOTHING, BM25Document, WhooshIndex
from ragtriage.index.bm25s_index import K1, B, BM25sIndex, _FileLock, import_bm25s
from ragtriage.index.bm25s_matrix import save_model, score_matrix
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
    monkeypatch.setattr(bulk_terms, "terms", lambda text: segmented.append(text) or terms(text))
    renamed = [doc(d.chunk_id, d.content, d.title + "（新）", d.content_hash) for d in tiny_docs()]
    index.apply(renamed)
    assert sorted(segmented) == sorted(d.title for d in renamed), "titles only: contents come from the cache"
    assert index.search("新", 10)[0], "the new title words are indexed"


def test_terms_equal_the_whoosh_analyzer_tokens() -> None:
    for text in fixture_texts():
        assert terms(text) == tokenize(text)


@pytest.mark.parametrize("block", [10_000, 3])
def test_score_matrix_equals_bm25s_own_build(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25s_matrix, "_BLOCK", block)  # 3: entries of one term span blocks
    vocab: dict[str, int] = {}
    runs = list(bulk_terms.iter_term_ids(fixture_texts() + ["", "的了"], vocab))
    assert len(runs[-1]) == 0 and len(vocab) > 500
    offsets = np.concatenate([[0], np.cumsum([len(run) for run in runs])]).astype(np.int64)
    ours = score_matrix(np.concatenate(runs), offsets, len(vocab), k1=K1, b=B)
    reference = import_bm25s().BM25(k1=K1, b=B, method="lucene")
    reference.index(([run.tolist() for run in runs], vocab), create_empty_token=False, show_progress=False)
    for key in ("indices", "indptr"):
        assert np.array_equal(ours[key], reference.scores[key])
        assert ours[key].dtype == reference.scores[key].dtype
    assert np.allclose(ours["data"], reference.scores["data"], rtol=1e-5)
    assert ours["data"].dtype == reference.scores["data"].dtype == np.float32
    assert ours["num_docs"] == reference.scores["num_docs"]


def test_save_model_writes_what_bm25s_saves(tmp_path: Path) -> None:
    vocab: dict[str, int] = {}
    runs = list(bulk_terms.iter_term_ids(fixture_texts()[:5], vocab))
    offsets = np.concatenate([[0], np.cumsum([len(run) for run in runs])]).astype(np.int64)
    matrix = score_matrix(np.concatenate(runs), offsets, len(vocab), k1=K1, b=B)
    save_model(tmp_path / "ours", matrix, vocab, k1=K1, b=B)
    bm25s = import_bm25s()
    reference = bm25s.BM25(k1=K1, b=B, method="lucene")
    reference.scores, reference.vocab_dict, reference.nonoccurrence_array = matrix, vocab, None
    reference.save(str(tmp_path / "theirs"))
    ours, theirs = sorted((tmp_path / "ours").iterdir()), sorted((tmp_path / "theirs").iterdir())
    assert [path.name for path in ours] == [path.name for path in theirs]
    for mine, reference_file in zip(ours, theirs, strict=True):
        if mine.suffix == ".json":
            assert json.loads(mine.read_text("utf-8")) == json.loads(reference_file.read_text("utf-8"))
        else:
            assert mine.read_bytes() == reference_file.read_bytes(), mine.name
    loaded = bm25s.BM25.load(str(tmp_path / "ours"), mmap=True)
    query = [vocab[word] for word in ("审批", "发票") if word in vocab]
    assert query and np.array_equal(loaded.get_scores_from_ids(query), reference.get_scores_from_ids(query))


def _entries(folder: Path, field: str) -> set[tuple[int, str, float]]:
    """(chunk number, word, score) of every entry of a field's saved score matrix."""
    saved = folder / "current" / field
    words = {n: word for word, n in json.loads((saved / "vocab.index.json").read_text("utf-8")).items()}
    data, indices, indptr = (
        np.load(saved / f"{part}.csc.index.npy") for part in ("data", "indices", "indptr")
    )
    columns = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return {(int(r), words[int(c)], float(v)) for r, c, v in zip(indices, columns, data, strict=True)}


def test_terms_segmented_beforehand_build_the_same_scores(tmp_path: Path) -> None:
    """`kb import` hands the index its texts' term ids (`segmented`) instead of the texts."""
    docs = [doc(f"c{n}", text, f"标题{n % 3}") for n, text in enumerate(fixture_texts() * 2)]
    stream = bulk_terms.TermStream()
    for d in docs:
        stream.add("content", d.content_hash, d.content)
        stream.add("title", d.title, d.title)
    segmented = stream.finish()
    given = BM25sIndex(tmp_path / "given")
    given.apply([dataclasses.replace(d, content="") for d in docs], segmented=segmented)
    assert len(segmented) == 0 and not segmented.content, "the index took the term ids"
    plain = BM25sIndex(tmp_path / "plain")
    plain.apply(docs)
    for field in ("content", "title"):  # the same scores, whatever the vocabulary's numbering
        assert _entries(tmp_path / "given", field) == _entries(tmp_path / "plain", field)
    for query in ["审批超时", "员工离职账号", "报销发票"]:
        assert given.search(query, 10) == plain.search(query, 10)


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
    from ragtriage.kb.service import add_paths, list_chunks

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[index]\nbm25_engine = "bm25s"\n', encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        add_paths(workspace, [write_markdown_docs(tmp_path / "docs")])
        invoice = next(c.chunk_id for c in list_chunks(workspace) if c.doc_id.endswith("invoice"))
        indexes = open_indexes(workspace)
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
    from ragtriage.index import bm25s_index

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
