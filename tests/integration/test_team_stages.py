"""Replay runs the team's own stages (`[stages]`, `ragtriage.pipeline.stages`) on a production in
plain code that ragtriage did not build (`tests.plain_production`: its own chunker, UUID ids,
bm25s over its own tokens, weighted fusion, a title rerank and a canary), over the real Debian FAQ:
real SQLite, Qdrant Edge, the bundled embedder, traces from the real OpenTelemetry SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from tests.conftest import RunCli
from tests.plain_production import CANARY, DEBS_DIR, MAIN, Production, build

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(
        not any(DEBS_DIR.glob("debian-faq-zh-cn_*.deb")),
        reason=f"the Debian FAQ package is not in {DEBS_DIR} (apt-get download debian-faq-zh-cn)",
    ),
]


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> Production:
    return build(tmp_path_factory.mktemp("plain-production"))


@pytest.fixture(scope="module")
def home(production: Production, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    base = ["--home", str(tmp_path_factory.mktemp("home")), "--config", str(production.root / "config.toml")]
    for args in (
        ["kb", "import", str(production.root / "chunks.jsonl")],
        ["logs", "ingest", str(production.root / "traces.otlp.jsonl")],
    ):
        result = CliRunner().invoke(cli, [*args, *base])
        assert result.exit_code == 0, result.output
    return base


def _json(run_cli: RunCli, base: list[str], *args: str) -> dict[str, Any]:
    code, out, err = run_cli([*args, "--json", *base])
    assert code == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def test_the_teams_own_stages_reproduce_every_stage_it_logged(home: list[str], run_cli: RunCli) -> None:
    report = _json(run_cli, home, "fidelity", "--no-store")

    assert report["replayed"] == 70 and report["profiles"] == {"main": 47, "canary": 23}
    final = {row["pipeline_version"]: row for row in report["by_version"] if row["stage"] == "final_context"}
    assert set(final) == {MAIN, CANARY}
    for row in final.values():
        assert row["exact_share"] >= 0.95, row
    assert report["unexplained_requests"] == 0


def test_replaying_a_canary_case_with_the_main_profile_brings_its_gold_back(
    production: Production, home: list[str], run_cli: RunCli
) -> None:
    # A canary request whose logged final context lost its gold, while the main version keeps it.
    case = next(
        rid
        for rid in production.request_ids
        if production.versions[rid] == CANARY
        and production.gold[rid]
        and not set(production.gold[rid]) & set(production.final[rid])
        and set(production.gold[rid]) & set(production.main_final[rid])
    )
    gold = [arg for chunk in production.gold[case] for arg in ("--gold", chunk)]

    as_logged = _json(run_cli, home, "replay", case, *gold)
    as_main = _json(run_cli, home, "replay", case, "--profile", "main", *gold)

    assert as_logged["profile"]["name"] == "canary"
    assert as_logged["replayed"]["final"] == production.final[case]
    assert not set(as_logged["replayed"]["final"]) & set(production.gold[case])
    assert as_main["profile"]["name"] == "main"
    assert as_main["replayed"]["final"] == production.main_final[case]
    assert set(as_main["replayed"]["final"]) & set(production.gold[case])


def test_eval_compare_shows_the_broken_canary_losing_on_the_promoted_cases(
    production: Production, home: list[str], run_cli: RunCli
) -> None:
    queue = _json(run_cli, home, "queue", "--limit", "100")
    flagged = [item["request_id"] for item in queue["items"]]
    assert flagged, "the production's thumbs-down requests are flagged"
    for rid in flagged:
        gold = [arg for chunk in production.gold[rid] for arg in ("--gold", chunk)]
        for args in (["label", rid, "rerank_error", *gold], ["confirm", rid], ["promote", rid]):
            code, _, err = run_cli([*args, *home])
            assert code == 0, err
    for profile in ("main", "canary"):
        code, _, err = run_cli(["eval", "run", "--name", profile, "--profile", profile, *home])
        assert code == 0, err

    compared = _json(run_cli, home, "eval", "compare", "main", "canary")

    assert (compared["profile_a"], compared["profile_b"]) == ("main", "canary")
    mrr = next(test["outcome"] for test in compared["tests"] if test["metric"] == "mrr")
    assert mrr["losses"] > mrr["wins"], mrr
    assert next(d for d in compared["overall"] if d["metric"] == "mrr")["delta"] < 0
    assert compared["regressed"], "the canary's lost cases are listed"
