"""`label --gold` and `label --from` on gold that names a deleted chunk: production's UUID chunks
imported into a real SQLite KB, then re-imported with `--full` after production dropped one chunk
and re-chunked a document. Deleted gold is refused like unknown gold, with the chunk to pick; `kb show`
says why a chunk was deleted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from ragtriage.logs.ingest import ingest_files
from ragtriage.store import triage_repo
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR, RunCli, write_jsonl

MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
DROPPED, KEPT, OLD_VPN, VPN_1, VPN_2 = (f"9e1b7c2a-5f3d-4e8a-b0c4-00000000000{n}" for n in range(1, 6))
VPN_TEXT = "VPN 连接失败时先检查客户端版本，再确认账号没有被锁定。"
REQUEST = "fx-0001"  # a request of the fixture logs


def _row(chunk_id: str, doc: int, text: str) -> dict[str, Any]:
    return {"id": chunk_id, "document_id": doc, "text": text, "section_title": "s"}


def _import(run_cli: RunCli, path: Path, rows: list[dict[str, Any]], *extra: str) -> None:
    write_jsonl(path, rows)
    code, out, err = run_cli(["kb", "import", str(path), "--map", MAP, "--no-index", *extra])
    assert code == 0, err


@pytest.fixture
def kb(home: Path, tmp_path: Path, run_cli: RunCli) -> Path:
    """Document 7 lost chunk DROPPED; document 8 was re-chunked from OLD_VPN into VPN_1 + VPN_2."""
    source = tmp_path / "chunks.jsonl"
    first = [_row(DROPPED, 7, "旧的纸质报销单已经停用。"), _row(KEPT, 7, "出差结束后十五天内提交发票原件。")]
    _import(run_cli, source, [*first, _row(OLD_VPN, 8, VPN_TEXT)])
    second = [first[1], _row(VPN_1, 8, VPN_TEXT[:16]), _row(VPN_2, 8, VPN_TEXT[16:])]
    _import(run_cli, source, second, "--full")
    workspace = Workspace.open(home)
    try:
        ingest_files(workspace.engine, [FIXTURES_DIR / "logs" / "requests.jsonl"])
    finally:
        workspace.close()
    return home


def _gold(home: Path) -> list[Any]:
    workspace = Workspace.open(home)
    try:
        record = triage_repo.find_record(workspace.engine, REQUEST)
        return list(record.gold_chunk_ids) if record is not None else []
    finally:
        workspace.close()


def test_label_refuses_a_deleted_gold_chunk_naming_what_to_pick(kb: Path, run_cli: RunCli) -> None:
    code, _, err = run_cli(["label", REQUEST, "bm25_miss", "--gold", DROPPED])
    assert code == 2
    assert err.count("\n") == 1 and DROPPED in err
    assert "removed from document 7" in err
    assert "`ragtriage kb chunks --doc 7`" in err and "`ragtriage kb show CHUNK_ID`" in err
    assert _gold(kb) == []  # nothing half-done

    code, _, err = run_cli(["label", REQUEST, "bm25_miss", "--gold", KEPT, "--gold", OLD_VPN])
    assert code == 2
    assert f"chunk {OLD_VPN} is deleted in the KB (document 8 was re-chunked)" in err
    assert f"the closest current chunk is {VPN_1}" in err and KEPT not in err

    code, _, err = run_cli(["label", REQUEST, "bm25_miss", "--gold", KEPT, "--gold", VPN_1])
    assert code == 0, err
    assert _gold(kb) == [KEPT, VPN_1]


def test_label_from_file_rejects_the_row_unless_allowed(kb: Path, tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"request_id": REQUEST, "label": "bm25_miss", "gold": [DROPPED]}) + "\n")

    code, out, _ = run_cli(["label", "--from", str(path), "--json"])
    report = json.loads(out)
    assert code == 2 and (report["read"], report["rejected"]) == (1, 1)
    (error,) = report["errors"]
    assert error.startswith(f"{path}:1: gold: chunk {DROPPED} is deleted in the KB")
    assert "kb chunks --doc 7" in error and "--allow-unknown-gold" in error
    assert _gold(kb) == []

    code, out, _ = run_cli(["label", "--from", str(path), "--json", "--allow-unknown-gold"])
    report = json.loads(out)
    assert code == 0 and report["applied"] == 1
    assert any(w.startswith(f"{path}:1: gold: chunk {DROPPED} is deleted") for w in report["warnings"])
    assert _gold(kb) == [DROPPED]


def _show(run_cli: RunCli, chunk_id: str) -> dict[str, str]:
    code, out, err = run_cli(["kb", "show", chunk_id])
    assert code == 0, err
    fields: dict[str, str] = {}
    name = ""
    for line in out.split("\n\n")[0].splitlines():
        if line.startswith(" "):  # a long value wraps under its value column
            fields[name] += " " + line.strip()
        else:
            name, value = line.split(": ", 1)
            fields[name] = value
    return fields


def test_kb_show_says_why_a_chunk_was_deleted(kb: Path, run_cli: RunCli) -> None:
    dropped, rechunked, live = (_show(run_cli, chunk) for chunk in (DROPPED, OLD_VPN, KEPT))
    assert dropped["deletion"].strip() == "removed from document 7 without a replacement"
    assert "closest_live" not in dropped
    assert rechunked["deletion"].strip() == "re-chunked: document 8 got new chunks in the same write"
    assert rechunked["closest_live"].strip() == VPN_1
    assert "deletion" not in live
    code, out, _ = run_cli(["kb", "show", OLD_VPN, "--json"])
    shown = json.loads(out)
    assert (shown["status"], shown["deletion"], shown["closest_live_chunk"]) == (
        "deleted",
        "rechunked",
        VPN_1,
    )
    code, out, _ = run_cli(["kb", "show", KEPT, "--json"])
    assert (json.loads(out)["deletion"], json.loads(out)["closest_live_chunk"]) == (None, None)


def test_kb_show_on_a_deletion_without_a_recorded_reason_or_document(kb: Path, run_cli: RunCli) -> None:
    # Stores before schema 7 deleted chunks without recording why.
    workspace = Workspace.open(kb)
    try:
        with workspace.engine.begin() as connection:
            connection.execute(
                text("UPDATE kb_chunk SET deletion = NULL WHERE chunk_id = :id"), {"id": DROPPED}
            )
    finally:
        workspace.close()
    assert (
        _show(run_cli, DROPPED)["deletion"].strip()
        == "reason not recorded (deleted before the store kept reasons)"
    )
    code, _, err = run_cli(["kb", "remove", "7", "--no-index"])
    assert code == 0, err
    assert _show(run_cli, KEPT)["deletion"].strip() == "removed with its document 7"
