"""Whoosh segments written from term ids (`whoosh_bulk`) hold what Whoosh's own writer writes for
the same chunks: every term's postings and statistics, block by block, the stored fields and the
field lengths; searches (ours and Whoosh's own) give the same ids and scores; and Whoosh's writer
deletes, adds and merges on top of them. The text is the Debian Reference (real documentation
ragtriage did not write) cut into 400-character chunks with UUID chunk ids and integer document
ids, segmented as `kb import` segments it (`TermStream`)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import whoosh
from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema

from ragtriage.errors import IndexLockedError
from ragtriage.index import whoosh_bulk
from ragtriage.index.analyzer import ChineseAnalyzer
from ragtriage.index.bm25 import INDEX_NAME, BM25Document, WhooshIndex, _schema
from ragtriage.index.bulk_terms import SegmentedTerms, TermStream
from tests.conftest import FIXTURES_DIR, SHARED_DIR

QUERIES = ["软件包 安装", "内核 模块", "apt-get 升级", "网络 配置 文件", "debian", "系统 启动 脚本"]


def _debian_chunks(root: Path, count: int) -> list[str]:
    debs = SHARED_DIR / "data" / "debian-docs-zh"
    if not debs.is_dir():
        pytest.skip(f"{debs} is absent (the Debian documentation packages)")
    from ragtriage_demo.debian_docs import extract

    extract(debs, root)
    chunks: list[str] = []
    for page in sorted((root / "reference").glob("*.zh-cn.html")):
        flat = " ".join(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")).split())
        chunks.extend(flat[start : start + 400] for start in range(0, len(flat), 400))
        if len(chunks) >= count:
            break
    return chunks[:count]


def _documents(texts: list[str]) -> list[BM25Document]:
    """Production-shaped chunks: UUID ids, integer document ids, some empty titles, repeated texts."""
    texts = [*texts, texts[0], texts[1]]  # two chunks share a content (and its hash) with others
    return [
        BM25Document(
            chunk_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://kb.example/chunk/{n}")),
            doc_id=str(n // 20),
            title="" if n % 7 == 0 else text[:12],
            content=text,
            content_hash=hashlib.sha1(text.encode()).hexdigest()[:16],
            index_hash=f"i{n:05d}",
        )
        for n, text in enumerate(texts)
    ]


def _segmented(docs: list[BM25Document], procs: int) -> SegmentedTerms:
    """Term ids as `kb import`'s pass hands them over (`ImportHandoff`)."""
    stream = TermStream(procs, min_docs=50)
    for doc in docs:
        stream.add("content", doc.content_hash, doc.content)
        stream.add("title", doc.title, doc.title)
    return stream.finish()


def _textless(docs: list[BM25Document]) -> list[BM25Document]:
    return [BM25Document(d.chunk_id, d.doc_id, d.title, "", d.content_hash, d.index_hash) for d in docs]


def _whoosh_written(folder: Path, docs: list[BM25Document]) -> WhooshIndex:
    index = WhooshIndex(folder, multiproc_min_docs=10**9)  # Whoosh's own single-process writer
    index.apply(docs)
    return index


def _contents(index: WhooshIndex, blocks: bool) -> dict[str, Any]:
    """Everything the index holds: term infos, postings (with each block's statistics), stored
    fields and field lengths of every document."""
    terms: dict[tuple[str, bytes], Any] = {}
    with index._index.reader() as reader:
        for field, text in reader.all_terms():
            info = reader.term_info(field, text)
            postings = []
            for leaf, base in reader.leaf_readers():
                if (field, text) not in leaf:
                    continue
                matcher = leaf.postings(field, text)
                while matcher.is_active():
                    posting = (matcher.id() + base, matcher.weight(), matcher.value())
                    if blocks:
                        posting += (
                            matcher.block_min_id(),
                            matcher.block_max_id(),
                            matcher.block_min_length(),
                            matcher.block_max_length(),
                            matcher.block_max_weight(),
                        )
                    postings.append(posting)
                    matcher.next()
            statistics = (info.weight(), info.doc_frequency(), info.min_length(), info.max_length())
            terms[(field, text)] = (*statistics, info.max_weight(), info.min_id(), info.max_id(), postings)
        # A length of 0 reads as None from a segment with a length column and as 0 from one without
        # (no document of it has the field): the same for BM25F, which reads matching documents only.
        documents = [
            (
                reader.stored_fields(n),
                reader.doc_field_length(n, "content") or 0,
                reader.doc_field_length(n, "title") or 0,
            )
            for n in range(reader.doc_count_all())
        ]
        totals = (reader.field_length("content"), reader.field_length("title"), reader.doc_count())
    return {"terms": terms, "documents": documents, "totals": totals}


def _answers(index: WhooshIndex, docs: list[BM25Document]) -> dict[str, Any]:
    """What ragtriage reads from the index."""
    words = sorted({word for query in QUERIES for word in index.query_terms(query)})
    return {
        "search": {query: index.search(query, 20) for query in QUERIES},
        "whoosh": {query: index.search_with_whoosh(query, 20) for query in QUERIES},
        "doc_count": index.doc_count(),
        "hashes": index.indexed_hashes(),
        "stats": index.term_stats(words),
        "lexicon": (index.lexicon("content"), index.lexicon("title")),
        "content_hash": [index.content_hash(doc.chunk_id) for doc in docs[:5]],
    }


@pytest.fixture(scope="module")
def debian_docs(tmp_path_factory: pytest.TempPathFactory) -> list[BM25Document]:
    return _documents(_debian_chunks(tmp_path_factory.mktemp("debian"), 300))


@pytest.mark.realdata
@pytest.mark.parametrize("procs, per_segment", [(1, None), (2, 70)])
def test_bulk_segments_equal_whoosh_writer_segments(
    tmp_path: Path,
    debian_docs: list[BM25Document],
    monkeypatch: pytest.MonkeyPatch,
    procs: int,
    per_segment: int | None,
) -> None:
    if per_segment is not None:  # several segments, written by forked processes
        monkeypatch.setattr(whoosh_bulk, "DOCS_PER_SEGMENT", per_segment)
    reference = _whoosh_written(tmp_path / "whoosh", debian_docs)
    bulk = WhooshIndex(tmp_path / "bulk", procs=procs)
    assert bulk.takes_term_ids()
    segmented = _segmented(debian_docs, procs)
    bulk.apply(_textless(debian_docs), segmented=segmented)

    assert len(segmented) == 0  # the term ids were released once written
    segments = bulk._index._segments()
    assert len(segments) == (1 if per_segment is None else -(-len(debian_docs) // per_segment))
    expected = _contents(reference, blocks=per_segment is None)
    assert _contents(bulk, blocks=per_segment is None) == expected
    assert len(expected["terms"]) > 5000 and expected["totals"][0] > 30_000  # real text, many terms
    assert _answers(bulk, debian_docs) == _answers(reference, debian_docs)
    assert all(hits for hits, _ in _answers(bulk, debian_docs)["search"].values())

    # Whoosh's writer on top: delete, replace and add (its commit merges the small segments).
    changed = dataclasses.replace(
        debian_docs[3], content=debian_docs[40].content, content_hash="changed", index_hash="new"
    )
    added = dataclasses.replace(
        _documents(["软件包安装之后用 apt-get 升级内核模块。", "x"])[0], chunk_id="42"
    )
    for index in (reference, bulk):
        index.apply([changed, added], deletes=[debian_docs[5].chunk_id, debian_docs[250].chunk_id])
    assert _answers(bulk, debian_docs) == _answers(reference, debian_docs)
    assert (
        bulk.content_hash(debian_docs[5].chunk_id) is None and bulk.content_hash("42") == added.content_hash
    )
    assert bulk.doc_count() == len(debian_docs) - 2 + 1


@pytest.mark.parametrize("procs, per_segment", [(1, None), (2, 7)])
def test_big_additions_with_texts_are_written_from_term_ids_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: int, per_segment: int | None
) -> None:
    """`kb add` / a rebuild: texts segmented by the index itself, equal to Whoosh's writer (fixture KB
    text), mixed with chunks `segmented` does not hold (a stale index during an import)."""
    if per_segment is not None:  # several segments, written by forked processes
        monkeypatch.setattr(whoosh_bulk, "DOCS_PER_SEGMENT", per_segment)
    texts = [
        " ".join(path.read_text(encoding="utf-8").split())[:400]
        for path in sorted((FIXTURES_DIR / "kb").rglob("*.md"))
    ]
    docs = _documents(texts)
    reference = _whoosh_written(tmp_path / "whoosh", docs)
    big = WhooshIndex(tmp_path / "big", procs=procs, multiproc_min_docs=len(docs))
    big.apply(docs)
    partly = WhooshIndex(tmp_path / "partly", procs=procs)
    half = len(docs) // 2
    partly.apply([*_textless(docs[:half]), *docs[half:]], segmented=_segmented(docs[:half], 1))
    blocks = per_segment is None
    expected = _contents(reference, blocks=blocks)
    assert _contents(big, blocks=blocks) == expected == _contents(partly, blocks=blocks)
    assert _answers(big, docs) == _answers(reference, docs) == _answers(partly, docs)
    assert len(big._index._segments()) == (1 if per_segment is None else -(-len(docs) // per_segment))


def test_an_index_with_positions_is_written_by_whoosh(tmp_path: Path) -> None:
    """Indexes created before (TEXT with positions) keep Whoosh's writer, whatever is passed."""
    analyzer = ChineseAnalyzer()
    old = Schema(
        chunk_id=ID(stored=True, unique=True),
        doc_id=ID(stored=True),
        content_hash=ID(stored=True),
        index_hash=ID(stored=True),
        title=TEXT(analyzer=analyzer),
        content=TEXT(analyzer=analyzer),
    )
    (tmp_path / "old").mkdir()
    whoosh_index.create_in(str(tmp_path / "old"), old, indexname=INDEX_NAME)
    index = WhooshIndex(tmp_path / "old", multiproc_min_docs=1)
    assert not index.takes_term_ids()
    docs = _documents(["出差结束后十五天内提交发票原件。", "VPN 连接失败时先检查客户端版本。"])
    index.apply(docs, segmented=_segmented(docs, 1))
    assert {hit.chunk_id for hit in index.search("发票", 5)[0]} == {docs[0].chunk_id, docs[2].chunk_id}
    assert index._index.schema["content"].format.__class__.__name__ == "Positions"


def test_the_whoosh_release_is_the_one_whose_format_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The segments copy whoosh-reloaded 2.7.5's W3Codec: another release must not be written to
    (upgrading Whoosh fails here first; check the module docstring's facts, then the equality tests)."""
    assert tuple(whoosh.__version__[:3]) == whoosh_bulk.WHOOSH_VERSION
    whoosh_bulk.check_format()
    monkeypatch.setattr(whoosh, "__version__", (2, 7, 6))
    with pytest.raises(RuntimeError, match="2, 7, 6"):
        whoosh_bulk.check_format()
    assert not whoosh_bulk.bulk_supported(_schema())


def test_a_failed_bulk_write_commits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment writer failing halfway (disk full, Ctrl-C) leaves the index as it was, unlocked,
    and the next write's commit removes the unfinished segment's files."""
    docs = _documents(
        [f"第 {n} 条：出差结束后十五天内提交发票原件，VPN 连接失败时先检查客户端版本。" for n in range(30)]
    )
    index = WhooshIndex(tmp_path / "bulk")
    index.apply(docs[:10], segmented=_segmented(docs[:10], 1))
    files_before = sorted(path.name for path in (tmp_path / "bulk").iterdir())
    monkeypatch.setattr(whoosh_bulk, "DOCS_PER_SEGMENT", 8)
    written: list[int] = []
    original = whoosh_bulk._write_segment

    def failing(index: Any, docs: Any, start: int, stop: int) -> Any:
        if written:
            raise OSError("No space left on device")
        written.append(start)
        return original(index, docs, start, stop)

    monkeypatch.setattr(whoosh_bulk, "_write_segment", failing)
    with pytest.raises(OSError, match="No space"):
        index.apply(_textless(docs[10:]), deletes=[docs[0].chunk_id], segmented=_segmented(docs[10:], 1))
    assert written == [0] and index.doc_count() == 10 and index.content_hash(docs[0].chunk_id) is not None
    monkeypatch.setattr(whoosh_bulk, "_write_segment", original)
    index.apply(_textless(docs[10:]), deletes=[docs[0].chunk_id], segmented=_segmented(docs[10:], 1))
    assert index.doc_count() == len(docs) - 1 and index.content_hash(docs[0].chunk_id) is None
    index.apply([docs[0]])  # an ordinary commit removes the unfinished segment's files
    assert index.doc_count() == len(docs)
    segments = {segment.segment_id() for segment in index._index._segments()}
    files = {path.name for path in (tmp_path / "bulk").iterdir() if path.suffix == ".seg"}
    assert files == {f"{segment}.seg" for segment in segments} and len(files_before) == 3


def test_a_bulk_write_waits_for_no_other_writer(tmp_path: Path) -> None:
    """Another process writing the index: one clear error, the term ids released, nothing written."""
    docs = _documents(["出差结束后十五天内提交发票原件。", "VPN 连接失败时先检查客户端版本。"])
    index = WhooshIndex(tmp_path / "bulk", writer_timeout_s=0.0)
    other = WhooshIndex(tmp_path / "bulk")._index.writer()  # holds the index's write lock
    segmented = _segmented(docs, 1)
    try:
        with pytest.raises(IndexLockedError, match="another ragtriage process is writing"):
            index.apply(_textless(docs), segmented=segmented)
    finally:
        other.cancel()
    assert len(segmented) == 0 and index.doc_count() == 0


def test_a_small_commit_leaves_the_bulk_segments_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoosh's MERGE_SMALL would merge the smallest segments once they hold fewer than fib(i + 5)
    documents: on a big KB, one `kb add` after an import would rewrite ~110k chunks through
    Whoosh's Python merge. Segments of `MERGE_BELOW_DOCS` or more are left alone."""
    monkeypatch.setattr(whoosh_bulk, "DOCS_PER_SEGMENT", 7)
    monkeypatch.setattr(whoosh_bulk, "MERGE_BELOW_DOCS", 7)
    texts = [
        " ".join(path.read_text(encoding="utf-8").split())[:400]
        for path in sorted((FIXTURES_DIR / "kb").rglob("*.md"))
    ]
    docs = _documents(texts)
    index = WhooshIndex(tmp_path / "bulk", procs=1, multiproc_min_docs=len(docs))
    index.apply(docs)
    bulk_segments = {segment.segment_id() for segment in index._index._segments()}
    assert len(bulk_segments) >= 4
    added = dataclasses.replace(docs[0], chunk_id="added-1", content_hash="added", index_hash="added")

    class _Writer:  # what MERGE_SMALL uses of a writer: it hands the segments to merge to add_reader
        storage, schema = index._index.storage, index._index.schema
        merged: list[Any] = []

        def add_reader(self, reader: Any) -> None:
            self.merged.append(reader)

    from whoosh.writing import MERGE_SMALL

    one_more = [*index._index._segments()]
    index.apply([added])
    after = index._index._segments()
    new = [segment for segment in after if segment.segment_id() not in bulk_segments]
    assert bulk_segments <= {segment.segment_id() for segment in after} and len(new) == 1
    assert index.content_hash("added-1") == "added" and index.doc_count() == len(docs) + 1
    # Whoosh's own policy, given the same segments, would have merged bulk segments.
    MERGE_SMALL(_Writer(), [*one_more, *new])
    assert len(_Writer.merged) >= 4
