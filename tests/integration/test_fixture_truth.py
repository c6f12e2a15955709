"""Fixture truth: the generated traffic, ingested and confirmed with its recorded labels, is
diagnosed by `diagnose --all --json`; the suggestions must agree with ≥ 90% of the tuning cases.

The fixture KB is indexed once per module; the shipped vectors (`fixtures/embeddings/`, loaded by
`seed_embedding_cache`) make that a cache hit for every unchanged chunk (keys are hashes of the
passage text, so an edited chunk simply misses and is embedded).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ragtriage.cli import main
from ragtriage.config.settings import DEFAULT_LABELS
from ragtriage.index.kb_sync import add_paths
from ragtriage.logs.ingest import ingest_files
from ragtriage.triage.agreement import confirm_fixture_truth
from ragtriage.workspace import Workspace
from ragtriage_demo.demo import seed_embedding_cache
from tests.conftest import FIXTURES_DIR

LOGS = FIXTURES_DIR / "logs" / "requests.jsonl"
PRODUCTION = FIXTURES_DIR / "logs" / "production.toml"
LABELS = tuple(DEFAULT_LABELS)


def _lines() -> list[dict]:
    return [json.loads(line) for line in LOGS.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def truth_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture KB indexed with the production settings, the fixture logs ingested, and every
    flagged request with an intended label labelled, given its gold and confirmed."""
    home = tmp_path_factory.mktemp("fixture-truth") / "home"
    workspace = Workspace.open(home, PRODUCTION)
    try:
        seed_embedding_cache(workspace)
        started = time.perf_counter()
        add_paths(workspace.home, workspace.settings, workspace.engine, [FIXTURES_DIR / "kb"])
        report = ingest_files(workspace.engine, [LOGS], flagging=workspace.settings.logs.flagging)
        assert report.reconciles() and report.quarantined == 0
        confirmed = confirm_fixture_truth(workspace.engine, workspace.settings.triage.labels)
        assert confirmed
        sys.stderr.write(f"\nfixture truth home built in {time.perf_counter() - started:.1f} s\n")
    finally:
        workspace.close()
    return home


def test_fixture_logs_have_the_promised_shape() -> None:
    lines = _lines()
    assert 200 <= len(lines) <= 400
    assert len({line["request_id"] for line in lines}) == len(lines)
    flat = [line for line in lines if "bm25_results" in line]
    assert 0 < len(flat) < len(lines) / 2
    fixtures = [line["fixture"] for line in lines]
    assert all({"qid", "intended_label", "gold_chunk_ids", "holdout"} <= f.keys() for f in fixtures)
    labelled = Counter(f["intended_label"] for f in fixtures if f["intended_label"])
    assert set(labelled) <= set(LABELS)
    assert sum(1 for f in fixtures if "follow_up_of" in f) >= 20
    assert any(line.get("citations") == [] for line in lines)
    assert any((line.get("feedback") or {}).get("escalated") for line in lines)
    no_answer = [line for line in lines if line["fixture"]["intended_label"] == "no_answer_in_kb"]
    assert no_answer and all(not line["fixture"]["gold_chunk_ids"] for line in no_answer)


@pytest.fixture(scope="module")
def all_report(truth_home: Path) -> tuple[dict, float]:
    """`diagnose --all --json` over the fixture truth home (run once for the module)."""
    import contextlib
    import io

    argv = [
        "ragtriage",
        "--home",
        str(truth_home),
        "--config",
        str(PRODUCTION),
        "diagnose",
        "--all",
        "--json",
    ]
    saved, sys.argv = sys.argv, argv
    out = io.StringIO()
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            main()
    except SystemExit as stop:
        assert not stop.code
    finally:
        sys.argv = saved
    return json.loads(out.getvalue()), time.perf_counter() - started


def test_diagnose_all_agrees_with_the_fixture_truth(
    all_report: tuple[dict, float], capsys: pytest.CaptureFixture[str]
) -> None:
    report, seconds = all_report
    with capsys.disabled():
        print(
            f"\nagreement {report['agreement']} over {report['labelled_cases']} tuning cases; "
            f"holdout {report['agreement_holdout']} over {report['holdout_cases']}; "
            f"{len(report['diagnoses'])} diagnoses in {seconds:.1f} s ({report['ms_per_case']} ms per case)"
        )
        for miss in report["disagreements"]:
            print(f"  {miss['request_id']}: suggested {miss['suggested']}, confirmed {miss['confirmed']}")
    assert report["labelled_cases"] >= 40 and report["holdout_cases"] >= 10
    assert report["agreement"] >= 0.9
    assert report["agreement_holdout"] is not None
    per_label = report["per_label"]
    assert all(per_label.get(label, {}).get("cases", 0) >= 2 for label in LABELS), per_label
    every = {d["request_id"]: d for d in report["diagnoses"]}
    assert all(d["journeys"] or d["gold"] == [] for d in every.values())


def test_fidelity_reproduces_every_stage_not_served_by_a_stale_index(
    truth_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixture's production profiles replay its traffic exactly; every miss is the stale index
    (`permission/sso-login` was indexed in an older version), named by the report."""
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "ragtriage",
            *("--home", str(truth_home), "--config", str(PRODUCTION)),
            *("fidelity", "--least", "1000", "--json"),
        ],
    )
    try:
        main()
    except SystemExit as stop:
        assert not stop.code
    report = json.loads(capsys.readouterr().out)
    with capsys.disabled():
        print(
            f"\nfidelity: {report['faithful_requests']} of {report['replayed']} requests exact; "
            f"{report['unexplained_requests']} unexplained; replay {report['replay_seconds']} s; "
            f"reasons {report['reasons']}"
        )
    assert report["replayed"] == len(_lines())
    # Each version replayed with its own profile ([replay.versions] of production.toml).
    assert report["profiles"] == {"prod-2026-09": 163, "prod-2026-10": 104} and not report["notes"]
    assert report["unexplained_requests"] == 0
    assert all(s["unexplained_misses"] == 0 for s in report["by_version"])
    assert report["stale_documents"] and set(report["stale_documents"]) == {"permission/sso-login"}
    missed = [s for r in report["least_faithful"] for s in r["stages"] if not s["exact"]]
    assert missed and all(s["reason"]["kind"] in ("stale_index", "upstream") for s in missed)
    assert all("permission/sso-login" in s["reason"]["text"] for s in missed)
    assert report["faithful_requests"] >= 0.8 * report["replayed"]


#: Function words jieba's HMM glues to a neighbour (能设 from 最长能设多少天); the oracle below
#: cuts an out-of-dictionary term with jieba's dictionary only and refuses a piece from this list.
FUNCTION_WORDS = set("能可会要想该的了吗呢吧在是有和与及把被给对从到让用就都也还")


def test_no_proposed_alias_pair_shares_a_tokenizer_mis_split(all_report: tuple[dict, float]) -> None:
    """Every fixture badcase: each proposed alias pair is two whole terms, never an HMM fragment."""
    import jieba

    report, _ = all_report
    pairs = [
        (d["request_id"], p["term"], p["synonym"])
        for d in report["diagnoses"]
        for p in d["suggestion"]["alias_pairs"]
    ]
    assert pairs, "the fixture's alias_missing cases should propose pairs"
    dictionary = jieba.Tokenizer()
    for request_id, term, synonym in pairs:
        for word in (term, synonym):
            pieces = dictionary.lcut(word, HMM=False)
            glued = [p for p in pieces if p in FUNCTION_WORDS] if len(pieces) > 1 else []
            assert not glued, f"{request_id}: {term} → {synonym}: {word} is a mis-split ({pieces})"
        assert not (set(term) & set(synonym) & FUNCTION_WORDS), f"{request_id}: {term} → {synonym}"
    assert all(term != "能设" for _, term, _ in pairs)
