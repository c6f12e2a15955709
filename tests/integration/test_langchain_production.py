"""A real LangChain production (issue 25, "Done when"): `tests.langchain_production` (a
ContextualCompressionRetriever over an EnsembleRetriever of a TFIDFRetriever and a langchain-qdrant
vector store, over two Debian Reference chapters, traced by the OpenInference LangChain
instrumentor). Its OTLP export goes through `logs ingest` and each stored request is compared with
what production's own retrievers returned; its Qdrant collection goes through `kb import` with no
map; `ragtriage fidelity` replays every request through the team's own factory."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ragtriage.logs.schema import RequestLog, stage_ids
from tests.conftest import RunCli, stored_requests
from tests.langchain_production import COLLECTION, PIPELINE_VERSION, LangChainProduction


def _json(run_cli: RunCli, args: list[str]) -> dict[str, Any]:
    code, out, err = run_cli([*args, "--json"])
    assert code == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


@pytest.fixture
def stored(langchain_production: LangChainProduction, home: Path, run_cli: RunCli) -> dict[str, RequestLog]:
    """Request id → the request `logs ingest` stored from the production's OTLP file."""
    report = _json(run_cli, ["logs", "ingest", str(langchain_production.otlp), "--home", str(home)])
    assert report["quarantined"] == 0, report
    return stored_requests(home)


def test_ingest_stores_each_stage_production_had(
    langchain_production: LangChainProduction, stored: dict[str, RequestLog]
) -> None:
    truth = langchain_production.by_request()
    assert sorted(stored) == sorted(truth) and len(truth) >= 20
    for request_id, record in stored.items():
        expected = truth[request_id]
        stages = record.stages
        assert stages is not None
        got = {name: stage_ids(getattr(stages, name)) for name in ("bm25", "dense", "fused", "final_context")}
        assert got == {
            "bm25": expected.lexical,
            "dense": expected.dense,
            "fused": expected.fused,
            "final_context": expected.final,
        }, request_id
        assert stage_ids(stages.reranked) == expected.final
        assert (record.raw_query, record.pipeline_version) == (expected.query, PIPELINE_VERSION)
        assert record.answer is None and record.rewrite is None
        routes = (record.model_extra or {})["routes"]
        assert [(r["name"], r["kind"], r["span_name"], r["query"]) for r in routes] == [
            ("bm25", "bm25", "TFIDFRetriever", expected.query),
            ("dense", "dense", "VectorStoreRetriever", expected.query),
        ]
        latencies = (record.model_extra or {})["stage_latency_ms"]
        assert set(latencies) == {"bm25", "dense", "fusion", "rerank"}
    # Three requests share a session (OpenInference `session.id`, on every span).
    sessions = [stored[f"lc-{n:03d}"].session for n in range(len(truth))]
    assert all(sessions) and sessions[0] == sessions[2] != sessions[3]
    # The ensemble changed the order for some requests and the compressor reordered some: the
    # stages are not copies of one another.
    assert any(t.final != t.fused[:3] for t in truth.values())
    assert any(t.fused[:5] != t.dense for t in truth.values())


def test_the_qdrant_collection_imports_with_no_map(
    langchain_production: LangChainProduction, home: Path, run_cli: RunCli
) -> None:
    report = _json(
        run_cli,
        ["kb", "import", "--qdrant-path", str(langchain_production.qdrant), "--collection", COLLECTION,
         "--no-index", "--home", str(home)],
    )  # fmt: skip
    rows = langchain_production.rows
    assert (report["added"], report["vectors"], report["recognised"]) == (
        len(rows),
        len(rows),
        "LangChain documents",
    )
    assert report["recognised_map"]["doc_id"] == "payload.metadata.document_id"
    shown = _json(run_cli, ["kb", "show", rows[5]["id"], "--home", str(home)])
    assert (shown["content"], shown["doc_id"], shown["title"]) == (
        rows[5]["text"],
        rows[5]["document_id"],
        rows[5]["section_title"],
    )


def test_fidelity_through_the_teams_factory_reproduces_production(
    langchain_production: LangChainProduction, tmp_path: Path, run_cli: RunCli
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [profiles.reference-bot.stages.pipeline]
            use = "tests.langchain_production:build_retriever"
            chunks = "{langchain_production.chunks}"

            [replay.versions]
            "{PIPELINE_VERSION}" = "reference-bot"
            """
        ),
        encoding="utf-8",
    )
    base = ["--home", str(tmp_path / "home"), "--config", str(config)]
    for args in (
        ["kb", "import", "--qdrant-path", str(langchain_production.qdrant), "--collection", COLLECTION],
        ["logs", "ingest", str(langchain_production.otlp)],
    ):
        code, _, err = run_cli([*args, *base])
        assert code == 0, err

    report = _json(run_cli, ["fidelity", "--no-store", *base])

    assert report["replayed"] == len(langchain_production.truth)
    assert report["profiles"] == {"reference-bot": report["replayed"]}
    stages = {row["stage"]: row for row in report["by_stage"]}
    assert {"bm25", "dense", "fused", "reranked", "final_context"} <= set(stages), report["by_stage"]
    assert stages["final_context"]["exact_share"] >= 0.95, report["by_stage"]
    assert report["unexplained_requests"] == 0, report["least_faithful"]
    print(json.dumps({row["stage"]: row["exact_share"] for row in report["by_stage"]}))
