"""`ragtriage label --from FILE` on a real SQLite store: the fixture KB's leave documents (no
indexes: labelling needs only SQL) and the fixture request logs ingested; labels taken from the
fixture's own ground truth, written the way a team's spreadsheet or annotation export is."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from ragtriage.kb.service import add_paths
from ragtriage.logs.ingest import ingest_files
from ragtriage.store import triage_repo
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR, RunCli, triage_record

LOG = FIXTURES_DIR / "logs" / "requests.jsonl"
LABEL_FIELDS = ["request_id", "label", "gold", "note", "status", "annotator"]


@pytest.fixture
def cases(home: Path) -> list[dict[str, Any]]:
    """Logged requests whose designed label and gold (all in the leave documents) are known."""
    workspace = Workspace.open(home)
    try:
        add_paths(workspace.engine, workspace.settings, [FIXTURES_DIR / "kb" / "leave"])
        ingest_files(workspace.engine, [LOG])
    finally:
        workspace.close()
    records = [json.loads(line) for line in LOG.read_text(encoding="utf-8").splitlines()]
    return [
        r
        for r in records
        if r["fixture"]["designed_label"]
        and r["fixture"]["gold_chunk_ids"]
        and all(g.startswith("leave/") for g in r["fixture"]["gold_chunk_ids"])
    ][:6]


def test_csv_labels_apply_with_audit_and_bad_rows_named(
    tmp_path: Path, home: Path, cases: list[dict[str, Any]], run_cli: RunCli
) -> None:
    path = tmp_path / "labels.csv"
    with path.open("w", encoding="utf-8-sig", newline="") as handle:  # Excel's UTF-8 has a BOM
        writer = csv.DictWriter(handle, LABEL_FIELDS)
        writer.writeheader()
        for index, case in enumerate(cases[:4]):
            gold = case["fixture"]["gold_chunk_ids"]
            writer.writerow(
                {
                    "request_id": case["request_id"],
                    "label": case["fixture"]["designed_label"],
                    # A JSON array in one cell, ids separated by semicolons in the next.
                    "gold": json.dumps(gold) if index % 2 else ";".join(gold),
                    "note": f"第{index + 1}条：答案在“{gold[0]}”里，\n换行也保留",
                    "status": "confirmed" if index < 2 else "",
                    "annotator": "王芳",
                }
            )
        writer.writerow({"request_id": cases[4]["request_id"], "label": "rerank_eror", "gold": ""})  # row 10
        writer.writerow(  # row 11
            {"request_id": cases[5]["request_id"], "label": "bm25_miss", "gold": "leave/no-such#0000000000"}
        )
        writer.writerow({"request_id": "not-logged-42", "label": "bm25_miss"})  # row 12

    code, out, err = run_cli(["label", "--from", str(path), "--user", "ann"])
    assert code == 2  # a row was rejected
    assert [line.split()[-1] for line in out.splitlines()] == ["7", "4", "0", "3", "0"]  # read … blank
    errors = err.splitlines()
    assert errors[0].startswith(
        f"{path}:10: label: unknown label 'rerank_eror'; did you mean 'rerank_error'?"
    )
    assert errors[1].startswith(f"{path}:11: gold: chunk id not in the KB: leave/no-such#0000000000; fix:")
    assert errors[2] == f"{path}:12: request_id: no logged request 'not-logged-42'; fix: ingest its log first"
    assert "column ignored: annotator" in errors[3]

    first, third = triage_record(home, cases[0]["request_id"]), triage_record(home, cases[2]["request_id"])
    assert (first.status, first.primary_label) == ("confirmed", cases[0]["fixture"]["designed_label"])
    assert first.gold_chunk_ids == cases[0]["fixture"]["gold_chunk_ids"]
    assert first.notes[0].text.startswith("第1条：答案在") and "\n换行也保留" in first.notes[0].text
    assert third.status == "in_progress" and third.gold_chunk_ids == cases[2]["fixture"]["gold_chunk_ids"]
    workspace = Workspace.open(home)
    try:
        audit = triage_repo.audit_log(workspace.engine, cases[0]["request_id"])
    finally:
        workspace.close()
    assert [(e.action, e.user) for e in audit if e.user == "ann"] == [
        ("labels", "ann"),
        ("gold", "ann"),
        ("note", "ann"),
        ("status", "ann"),  # new → in_progress
        ("status", "ann"),  # → confirmed
    ]
    assert triage_record(home, cases[4]["request_id"]).labels == []  # the rejected rows changed nothing

    # The same file again: the applied rows are unchanged (no duplicate notes), the bad ones still named.
    code, out, _ = run_cli(["label", "--from", str(path), "--json"])
    report = json.loads(out)
    assert code == 2
    assert (report["read"], report["applied"], report["unchanged"], report["rejected"]) == (7, 0, 4, 3)
    assert len(triage_record(home, cases[0]["request_id"]).notes) == 1


def test_jsonl_rows_with_bad_fields_are_rejected_one_line_each(
    tmp_path: Path, home: Path, cases: list[dict[str, Any]], run_cli: RunCli
) -> None:
    ids = [case["request_id"] for case in cases]
    gold = cases[0]["fixture"]["gold_chunk_ids"]
    rows: list[Any] = [
        {
            "request_id": ids[0],
            "label": "chunk_split_bad",
            "gold": gold,
            "note": "两块拼起来才完整",
            "status": "confirmed",
        },
        '{"request_id": "%s", "label": "bm25_miss",}' % ids[1],  # trailing comma
        {"request_id": ids[1], "label": "bm25_miss", "primary": "maybe"},
        {"request_id": ids[2], "label": "bm25_miss", "status": "new"},
        {"request_id": ids[3], "label": "bm25_miss", "status": "confirmed"},  # no gold to confirm with
        {"request_id": ids[4], "label": "no_answer_in_kb", "gold": [], "status": "confirmed"},
        {"request_id": ids[0], "label": "rerank_error"},  # the case is confirmed now
        {"request_id": ids[5], "label": "dense_drift", "gold": [4711]},  # an integer id: text, unknown
        {"request_id": ids[5], "label": "dense_drift", "revision": 99},
        "",
        ["not", "an", "object"],
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "\n".join(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows)
        + "\n",
        encoding="utf-8",
    )
    code, out, err = run_cli(["label", "--from", str(path), "--json"])
    report = json.loads(out)
    assert code == 2
    assert (report["read"], report["applied"], report["rejected"], report["blank"]) == (11, 2, 8, 1)
    assert report["read"] == report["applied"] + report["unchanged"] + report["rejected"] + report["blank"]
    fields = [line.split(": ")[1] for line in report["errors"]]
    assert [line.split(":")[1] for line in report["errors"]] == ["2", "3", "4", "5", "7", "8", "9", "11"]
    assert fields == ["-", "primary", "status", "gold", "status", "gold", "revision", "-"]
    assert "add --reopen" in report["errors"][4] and "4711" in report["errors"][5]
    assert err.count("\n") == len(report["errors"])
    assert triage_record(home, ids[4]).status == "confirmed"  # no gold is fine for no_answer_in_kb

    # Unknown ids accepted on request, with a warning; a closed case relabelled with --reopen.
    code, out, err = run_cli(["label", "--from", str(path), "--json", "--allow-unknown-gold", "--reopen"])
    report = json.loads(out)
    assert f"{path}:8: gold: not in the KB (applied): 4711" in report["warnings"]
    assert triage_record(home, ids[5]).gold_chunk_ids == ["4711"]
    assert triage_record(home, ids[0]).labels == ["chunk_split_bad", "rerank_error"]
    assert triage_record(home, ids[0]).status == "in_progress"


def test_label_needs_an_id_and_label_or_a_file(run_cli: RunCli, tmp_path: Path) -> None:
    code, _, err = run_cli(["label"])
    assert code == 2 and "give REQUEST_ID and LABEL, or --from FILE" in err
    empty = tmp_path / "empty.csv"
    empty.write_text("label,gold\n", encoding="utf-8")
    code, _, err = run_cli(["label", "--from", str(empty)])
    assert code == 2 and "no request_id column" in err
