"""Query-side BM25 analysis (`[index] query_segmentation`, `query_stop_words`) on real Whoosh and
bm25s indexes in tmp_path: documents keep search-mode terms, only the query changes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.index.bm25 import FLAG_TOKENIZES_TO_NOTHING, BM25Document, WhooshIndex
from ragtriage.index.bm25s_index import BM25sIndex
from ragtriage.workspace import Workspace
from tests.tiny_kb import write_markdown_docs

# Production-style ids (UUIDs and an integer): nothing here depends on ragtriage's own ids.
SERVER = str(uuid.uuid5(uuid.NAMESPACE_URL, "server"))
SERVICE = str(uuid.uuid5(uuid.NAMESPACE_URL, "service"))
FILLER = "7"
DOCS = [
    BM25Document(SERVER, "ops", "第 5 章", "服务器重启以后网络配置丢失", "h1", "h1"),
    BM25Document(SERVICE, "ops", "第 3 章", "服务开机自启的设置方法", "h2", "h2"),
    BM25Document(FILLER, "faq", "第 6 章", "到底该选哪一个发布版本", "h3", "h3"),
]


def _open(engine: str, folder: Path, **kwargs: object) -> WhooshIndex | BM25sIndex:
    index = (WhooshIndex if engine == "whoosh" else BM25sIndex)(folder, **kwargs)  # type: ignore[arg-type]
    index.apply(DOCS)
    return index


@pytest.mark.parametrize("engine", ["whoosh", "bm25s"])
def test_precise_queries_do_not_match_sub_words_of_their_compounds(engine: str, tmp_path: Path) -> None:
    search = _open(engine, tmp_path / "search")
    precise = _open(engine, tmp_path / "precise", query_segmentation="precise")
    # Search mode also asks for 服务 (a sub-word of 服务器) and so finds the autostart chunk too.
    assert {h.chunk_id for h in search.search("服务器", 10)[0]} == {SERVER, SERVICE}
    assert [h.chunk_id for h in precise.search("服务器", 10)[0]] == [SERVER]
    # The documents were indexed in search mode either way: a query for the sub-word still finds both.
    assert {h.chunk_id for h in precise.search("服务", 10)[0]} == {SERVER, SERVICE}


@pytest.mark.parametrize("engine", ["whoosh", "bm25s"])
def test_query_stop_words_are_dropped_from_queries_only(engine: str, tmp_path: Path) -> None:
    plain = _open(engine, tmp_path / "plain")
    stopped = _open(engine, tmp_path / "stopped", query_stop_words=["到底", "ＸＹ"])
    assert [h.chunk_id for h in plain.search("到底", 10)[0]] == [FILLER]
    # The word is still in the index (documents are not changed), the query just no longer asks for it.
    assert stopped.search("到底", 10) == ([], [FLAG_TOKENIZES_TO_NOTHING])
    assert [h.chunk_id for h in stopped.search("到底 发布版本", 10)[0]] == [FILLER]
    # Stop words are normalized like the terms (NFKC, lower case).
    assert stopped.query_terms("xy 版本") == ["版本"]


def test_a_home_with_precise_queries_replays_with_them(tmp_path: Path, home: Path) -> None:
    from ragtriage.index.kb_sync import add_paths

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        '[index]\nquery_segmentation = "precise"\nquery_stop_words = ["怎么"]\n', encoding="utf-8"
    )
    workspace = Workspace.open(home, None)
    try:
        add_paths(
            workspace.home, workspace.settings, workspace.engine, [write_markdown_docs(tmp_path / "docs")]
        )
        bm25 = workspace.indexes.bm25
        assert (bm25.query.segmentation, bm25.query.stop_words) == ("precise", frozenset({"怎么"}))
    finally:
        workspace.close()
    result = CliRunner().invoke(cli, ["replay", "--query", "红字发票怎么开", "--json"])
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output)
    bm25_raw = next(route for route in trace["routes"] if route["name"] == "bm25_raw")
    assert bm25_raw["hits"] and bm25_raw["flags"] == []


def test_diagnosis_evidence_names_the_terms_the_bm25_route_searched(tmp_path: Path, home: Path) -> None:
    from ragtriage.triage.context import WorkspaceContext
    from ragtriage.triage.facts import collect_facts, key_terms

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        '[index]\nquery_segmentation = "precise"\nquery_stop_words = ["到底"]\n', encoding="utf-8"
    )
    rows = [
        {"chunk_id": doc.chunk_id, "doc_id": doc.doc_id, "title": doc.title, "content": doc.content}
        for doc in DOCS
    ]
    export = tmp_path / "chunks.jsonl"
    export.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    result = CliRunner().invoke(cli, ["kb", "import", str(export)])
    assert result.exit_code == 0, result.output
    query = "服务器到底为什么开不了机"
    workspace = Workspace.open(home, None)
    context = WorkspaceContext(workspace)
    try:
        searched = workspace.indexes.bm25.query_terms(query)
        facts = collect_facts(context, query, logged=None, replay=None, gold=[SERVER])
    finally:
        context.close()
        workspace.close()
    # Precise segmentation keeps 服务器 whole (search mode would also ask for 服务 and keep only that),
    # and the query stop word is not reported as a missing term.
    assert facts.terms == key_terms(searched)
    assert "服务器" in facts.terms and "服务" not in facts.terms and "到底" not in facts.terms
    assert facts.unknown_gold == []
