"""The bad-input corpus (`tests/data/bad/`) through the real CLI: every kind names its file and line or
field, exits 2 or is quarantined, never shows a traceback, and the counts reconcile.

Log files are ingested twice: lenient (the bad line is quarantined with its file, line and kind;
read = ingested + duplicates + conflicts + quarantined + blank) and `--strict` (exit 2, `file:line:`
on stderr, the valid lines before it stored). Everything else exits 2 with one stderr line.

| kind | file (under tests/data/bad/) | expected outcome |
| --- | --- | --- |
| UTF-8 byte-order mark | logs/bom.jsonl | both records ingested (first one not lost) |
| NaN value | logs/nan.jsonl | line 2 quarantined `nan`; strict exit 2 `:2:` |
| trailing comma | logs/trailing_comma.jsonl | line 2 quarantined `trailing_comma` |
| duplicate key | logs/duplicate_key.jsonl | line 2 quarantined `duplicate_key` |
| array / null instead of object | logs/not_object.jsonl | lines 2, 3 quarantined `not_object` |
| missing required field | logs/missing_field.jsonl | line 2 quarantined `missing_field` (raw_query) |
| wrong field type | logs/wrong_type.jsonl | line 2 quarantined `invalid_field` (feedback.escalated) |
| broken JSON syntax | logs/invalid_json.jsonl | line 2 quarantined `invalid_json` |
| truncated last line (no newline) | logs/truncated.jsonl | line 2 quarantined `truncated` |
| blank and whitespace lines | logs/blank_lines.jsonl | 4 blank, 2 ingested |
| duplicate and conflicting ids | logs/duplicates_conflicts.jsonl | 1 duplicate, 1 conflict, 2 ingested |
| lone surrogate escape | logs/surrogate.jsonl | line 2 quarantined `bad_encoding` |
| GB18030 line among UTF-8 | logs/gb18030.jsonl | all 3 ingested, 1 recovered |
| bytes neither UTF-8 nor GB18030 | logs/undecodable.jsonl | line 2 quarantined `bad_encoding` |
| gzip cut off | logs/gzip_truncated.jsonl.gz | exit 2, names the file and "cut off after line" |
| empty KB file | kb/empty.md | kb add exit 2, "empty file" |
| binary KB file | kb/binary.txt | kb add exit 2, "binary" |
| undecodable KB text | kb/undecodable.txt | kb add exit 2, `:4:` "cannot decode" |
| broken YAML front matter | kb/broken_front_matter.md | kb add exit 2, `:4:` "not valid YAML" |
| unclosed front matter | kb/unclosed_front_matter.md | kb add exit 2, `:1:` "never closed" |
| HTML with markup only | kb/markup_only.html | kb add exit 2, "no text after parsing" |
| unsupported suffix | kb/unsupported.doc | kb add exit 2, "unsupported file type", fix "save it as .docx" |
| damaged PDF | kb/damaged.pdf | kb add exit 2, "not a readable PDF" |
| HTML without headings | kb/no_headings.html | added with a warning naming the file (exit 0) |
| misspelt settings key | config/misspelt_key.toml | exit 2, `retrieval.bm25_topk`, did you mean bm25_k |
| nested misspelt key | config/nested_misspelt_key.toml | exit 2, `rerank.weights.titel_hit` → title_hit |
| misspelt section | config/unknown_section.toml | exit 2, `retreival` → retrieval |
| not TOML | config/not_toml.toml | exit 2, "not valid TOML … line 1" |
| bad value type | config/bad_value_type.toml | exit 2, `rerank.top_n` |
| value outside a choice | config/bad_enum.toml | exit 2, `embedder.backend` |
| alias file syntax error | aliases/syntax_error.toml | exit 2, `:2:` "not valid TOML" |
| unquoted Chinese alias key | aliases/unquoted_chinese_key.toml | exit 2, `:2:` 'quote the term: "审批"' |
| alias entry not a list | aliases/not_a_list.toml | exit 2, `:2:` entry '发票' |
| cases-json missing field | eval/cases_missing_field.json | exit 2, `:3:` field `question` |
| cases-jsonl wrong type | eval/cases_wrong_type.jsonl | exit 2, `:2:` field `positive_doc_ids` |
| cases-jsonl broken line | eval/cases_not_json.jsonl | exit 2, `:2:` not valid JSON |
| TREC qrels bad grade | eval/qrels_bad_grade.txt | exit 2, `:2:` field `grade` |
| TREC run line given as qrels | eval/qrels_run_line.txt | exit 2, `:2:` "4 columns … found 6" |
| TREC queries without a tab | eval/queries_no_tab.txt(.queries.tsv) | exit 2, `queries.tsv:1:` |
| BEIR qrels missing a column | eval/beir_missing_column/ | exit 2, `test.tsv:3:` "found 2" |
| replay queries: empty query | queries/empty_query.jsonl | exit 2, `:2:` 'query' is missing or empty |
| replay queries: not JSON | queries/not_json.jsonl | exit 2, `:2:` not valid JSON |
| replay queries: gold not a list | queries/bad_gold.jsonl | exit 2, `:1:` 'gold' must be a list |

The CLI runs in-process through `run_cli` (click's `CliRunner.isolation` around the real `main()`,
so the error-to-exit-code mapping is the shipped one and any other exception propagates, as with
`catch_exceptions=False`), plus a few real `python -m ragtriage` subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from ragtriage.cli import main
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import read_session
from ragtriage.store.log_tables import QuarantinedLineRow, RequestLogRow
from ragtriage.workspace import Workspace
from tests.conftest import REPO_ROOT, TEST_DATA_DIR

BAD = TEST_DATA_DIR / "bad"
COUNT_KEYS = ("ingested", "duplicates", "conflicts", "quarantined", "blank")


@dataclass(frozen=True)
class CliOutcome:
    """Exit code and captured streams of one CLI run."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str | Path, env: dict[str, str | None] | None = None) -> CliOutcome:
    """Run `ragtriage ARGS` in-process through the real entry point (`ragtriage.cli.main`).

    Expected errors become exit code 2 exactly as in the console script; any other exception (a
    bug) propagates to the test instead of being caught.
    """
    runner = CliRunner()
    argv = ["ragtriage", *map(str, args)]
    with runner.isolation(env=env) as (out, err, _):
        saved_argv = sys.argv
        sys.argv = argv
        try:
            main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        finally:
            sys.argv = saved_argv
        sys.stdout.flush()
        sys.stderr.flush()
        return CliOutcome(
            code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")
        )


def assert_clean_failure(outcome: CliOutcome, *fragments: str) -> None:
    """Exit 2, no traceback, and every fragment on stderr."""
    assert outcome.exit_code == 2, outcome.output
    assert "Traceback" not in outcome.output
    for fragment in fragments:
        assert fragment in outcome.stderr, (fragment, outcome.stderr)


# ---------------------------------------------------------------- request logs

#: file → (expected counts, quarantined (line, kind) pairs, strict-mode message fragment or None)
LOG_CASES: dict[str, tuple[dict[str, int], list[tuple[int, str]], str | None]] = {
    "bom.jsonl": ({"read": 2, "ingested": 2}, [], None),
    "nan.jsonl": ({"read": 3, "ingested": 2, "quarantined": 1}, [(2, "nan")], ":2: NaN is not valid JSON"),
    "trailing_comma.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "trailing_comma")],
        ":2: trailing comma",
    ),
    "duplicate_key.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "duplicate_key")],
        ":2: duplicate key 'raw_query'",
    ),
    "not_object.jsonl": (
        {"read": 3, "ingested": 1, "quarantined": 2},
        [(2, "not_object"), (3, "not_object")],
        ":2: the line is an array",
    ),
    "missing_field.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "missing_field")],
        ":2: missing required field 'raw_query'",
    ),
    "wrong_type.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "invalid_field")],
        ":2: field 'feedback.escalated'",
    ),
    "invalid_json.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "invalid_json")],
        ":2: not valid JSON",
    ),
    "truncated.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "truncated")],
        ":2: last line has no newline",
    ),
    "blank_lines.jsonl": ({"read": 6, "ingested": 2, "blank": 4}, [], None),
    "duplicates_conflicts.jsonl": ({"read": 4, "ingested": 2, "duplicates": 1, "conflicts": 1}, [], None),
    "surrogate.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "bad_encoding")],
        ":2: a \\uD8xx escape",
    ),
    "gb18030.jsonl": ({"read": 3, "ingested": 3, "recovered": 1}, [], None),
    "undecodable.jsonl": (
        {"read": 2, "ingested": 1, "quarantined": 1},
        [(2, "bad_encoding")],
        ":2: bytes that are neither UTF-8 nor GB18030",
    ),
}


def _stored(home: Path) -> tuple[int, list[tuple[str, int, str, str]]]:
    workspace = Workspace.open(home, None)
    try:
        with read_session(workspace.engine) as session:
            requests = session.execute(select(func.count()).select_from(RequestLogRow)).scalar_one()
            quarantined = [
                (row.source_file, row.line_no, row.kind, row.reason)
                for row in session.scalars(select(QuarantinedLineRow).order_by(QuarantinedLineRow.line_no))
            ]
        return requests, quarantined
    finally:
        workspace.close()


@pytest.mark.parametrize("name", sorted(LOG_CASES))
def test_log_file_is_ingested_leniently_with_reconciled_counts(name: str, home: Path) -> None:
    expected, quarantined, _ = LOG_CASES[name]
    path = BAD / "logs" / name
    outcome = run_cli("logs", "ingest", "--json", path)
    assert outcome.exit_code == 0, outcome.output
    assert "Traceback" not in outcome.output
    counts = json.loads(outcome.stdout)
    for key in ("read", *COUNT_KEYS, "recovered"):
        assert counts[key] == expected.get(key, 0), (key, counts)
    assert counts["read"] == sum(counts[key] for key in COUNT_KEYS)
    stored_requests, stored_quarantine = _stored(home)
    assert stored_requests == expected["ingested"]
    assert [(line, kind) for _, line, kind, _ in stored_quarantine] == quarantined
    for source_file, _, _, reason in stored_quarantine:
        # The quarantine names the file (absolute) and says how to fix the line.
        assert source_file == str(path.resolve()) and " — " in reason
    again = json.loads(run_cli("logs", "ingest", "--json", path).stdout)
    assert again["ingested"] == 0 and again["read"] == sum(again[key] for key in COUNT_KEYS)
    assert _stored(home)[0] == stored_requests


@pytest.mark.parametrize("name", sorted(n for n, case in LOG_CASES.items() if case[2] is not None))
def test_strict_ingest_names_file_and_line_and_keeps_earlier_lines(name: str, home: Path) -> None:
    path = BAD / "logs" / name
    message = LOG_CASES[name][2]
    assert message is not None
    outcome = run_cli("logs", "ingest", "--strict", path)
    assert_clean_failure(outcome, f"{path}{message}", "log format error: ")
    assert len(outcome.stderr.strip().splitlines()) == 1
    # Line 1 of every file is valid and is stored before the bad line stops the ingest.
    assert _stored(home)[0] == 1


@pytest.mark.parametrize("strict", [False, True])
def test_truncated_gzip_exits_2_naming_the_file(strict: bool, home: Path) -> None:
    path = BAD / "logs" / "gzip_truncated.jsonl.gz"
    args = ["logs", "ingest", *(["--strict"] if strict else []), str(path)]
    outcome = run_cli(*args)
    assert_clean_failure(outcome, f"input error: {path}: the gzip stream is corrupt or cut off after line 4")
    # The lines before the cut are kept, as the message says.
    db = home / "ragtriage.db"
    assert sqlite3.connect(db).execute("select count(*) from request_log").fetchone()[0] == 4


def test_several_bad_log_files_in_one_ingest_reconcile(home: Path) -> None:
    paths = [BAD / "logs" / name for name in sorted(LOG_CASES)]
    counts = json.loads(run_cli("logs", "ingest", "--json", *paths).stdout)
    assert counts["read"] == sum(case[0]["read"] for case in LOG_CASES.values())
    assert counts["read"] == sum(counts[key] for key in COUNT_KEYS)
    assert counts["quarantined"] == sum(len(case[1]) for case in LOG_CASES.values())


# ---------------------------------------------------------------- KB documents

#: file → (line named in the message or None, reason fragment); None reason: added with a warning.
KB_CASES: dict[str, tuple[int | None, str | None]] = {
    "empty.md": (None, "empty file"),
    "binary.txt": (None, "binary file"),
    "undecodable.txt": (4, "cannot decode byte"),
    "broken_front_matter.md": (4, "front matter is not valid YAML"),
    "unclosed_front_matter.md": (1, "front matter starts with --- but is never closed"),
    "markup_only.html": (None, "no text after parsing"),
    "unsupported.doc": (None, "unsupported file type '.doc'; fix: save it as .docx"),
    "damaged.pdf": (None, "not a readable PDF (damaged or another format)"),
    "no_headings.html": (None, None),
}


@pytest.mark.parametrize("name", sorted(KB_CASES))
def test_kb_file_fails_with_file_line_and_fix_or_warns(name: str, home: Path) -> None:
    line, reason = KB_CASES[name]
    path = (BAD / "kb" / name).resolve()
    outcome = run_cli("kb", "add", "--no-index", "--json", path)
    assert "Traceback" not in outcome.output
    report = json.loads(outcome.stdout)
    assert report["files_seen"] == report["added"] + report["changed"] + report["unchanged"] + len(
        report["failed"]
    )
    if reason is None:
        assert outcome.exit_code == 0, outcome.output
        assert report["added"] == 1 and f"warning: {path}: no h1–h6 headings" in outcome.stderr
        return
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert_clean_failure(outcome, f"kb add: failed: {where}{reason}", "; fix: ")
    assert report["added"] == 0 and len(report["failed"]) == 1


def test_a_bad_new_version_keeps_the_stored_document(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(BAD / "kb" / "no_headings.html", folder / "terms.html")
    assert run_cli("kb", "add", "--no-index", folder).exit_code == 0
    (folder / "terms.html").write_bytes(b"")
    shutil.copy(BAD / "kb" / "binary.txt", folder / "blob.txt")
    outcome = run_cli("kb", "add", "--no-index", "--json", folder)
    assert_clean_failure(outcome, "empty file", "binary file", "2 of 2 files failed")
    chunks = json.loads(run_cli("kb", "chunks", "--json").stdout)
    assert [chunk["doc_id"] for chunk in chunks] == ["docs/terms"]


# ---------------------------------------------------------------- settings and alias files

CONFIG_CASES = {
    "misspelt_key.toml": ["unknown key 'retrieval.bm25_topk'", "did you mean 'retrieval.bm25_k'?"],
    "nested_misspelt_key.toml": ["unknown key 'rerank.weights.titel_hit'", "'rerank.weights.title_hit'"],
    "unknown_section.toml": ["unknown key 'retreival'", "did you mean 'retrieval'?"],
    "not_toml.toml": ["not valid TOML", "line 1"],
    "bad_value_type.toml": ["'rerank.top_n'", "got 'many'"],
    "bad_enum.toml": ["'embedder.backend'", "got 'word2vec'"],
}


@pytest.mark.parametrize("name", sorted(CONFIG_CASES))
def test_bad_settings_file_exits_2_naming_file_and_key(name: str) -> None:
    path = BAD / "config" / name
    outcome = run_cli("--config", path, "kb", "stats")
    assert_clean_failure(outcome, f"config error: {path}: ", *CONFIG_CASES[name])
    assert len(outcome.stderr.strip().splitlines()) == 1


ALIAS_CASES = {
    "syntax_error.toml": (2, "not valid TOML"),
    "unquoted_chinese_key.toml": (2, 'quote the term: "审批" = [...]'),
    "not_a_list.toml": (2, "entry '发票' is not a list of strings"),
}


@pytest.mark.parametrize("name", sorted(ALIAS_CASES))
def test_bad_alias_file_exits_2_naming_file_and_line(name: str, tmp_path: Path) -> None:
    alias_path = (BAD / "aliases" / name).resolve()
    config = tmp_path / "config.toml"
    config.write_text(f"[rewrite]\nalias_file = {json.dumps(str(alias_path))}\n", encoding="utf-8")
    line, reason = ALIAS_CASES[name]
    outcome = run_cli("--config", config, "replay", "--query", "报销")
    assert_clean_failure(outcome, f"input error: {alias_path}:{line}: ", reason)


# ---------------------------------------------------------------- eval imports and query files

EVAL_CASES = {
    "cases-json missing field": (
        ["cases-json", "cases_missing_field.json"],
        "cases_missing_field.json:3: field `question` is missing",
    ),
    "cases-jsonl wrong type": (
        ["cases-jsonl", "cases_wrong_type.jsonl"],
        "cases_wrong_type.jsonl:2: field `positive_doc_ids`",
    ),
    "cases-jsonl broken line": (
        ["cases-jsonl", "cases_not_json.jsonl"],
        "cases_not_json.jsonl:2: not valid JSON",
    ),
    "trec bad grade": (
        ["trec", "qrels_bad_grade.txt"],
        "qrels_bad_grade.txt:2: field `grade` must be an integer",
    ),
    "trec run line": (["trec", "qrels_run_line.txt"], "qrels_run_line.txt:2: a qrels line has 4 columns"),
    "trec queries no tab": (
        ["trec", "queries_no_tab.txt"],
        "queries_no_tab.txt.queries.tsv:1: expected `qid<TAB>query text`",
    ),
    "beir missing column": (
        ["beir", "beir_missing_column"],
        "qrels/test.tsv:3: expected 3 tab-separated columns",
    ),
}


@pytest.mark.parametrize("kind", sorted(EVAL_CASES))
def test_bad_eval_import_exits_2_and_stores_nothing(kind: str, home: Path) -> None:
    (fmt, name), fragment = EVAL_CASES[kind]
    outcome = run_cli("eval", "import", "--format", fmt, BAD / "eval" / name)
    assert_clean_failure(outcome, "input error: ", str(BAD / "eval"), fragment)
    workspace = Workspace.open(home, None)
    try:
        assert eval_store.list_datasets(workspace.engine) == []
    finally:
        workspace.close()


QUERY_CASES = {
    "empty_query.jsonl": ":2: 'query' is missing or empty",
    "not_json.jsonl": ":2: not valid JSON",
    "bad_gold.jsonl": ":1: 'gold' must be a list of chunk ids",
}


@pytest.mark.parametrize("name", sorted(QUERY_CASES))
def test_bad_replay_queries_file_exits_2_naming_the_line(name: str) -> None:
    path = BAD / "queries" / name
    outcome = run_cli("replay", "--queries", path)
    assert_clean_failure(outcome, f"input error: {path}{QUERY_CASES[name]}")


def test_corpus_has_at_least_twenty_kinds() -> None:
    kinds = len(LOG_CASES) + 1 + len(KB_CASES) + len(CONFIG_CASES) + len(ALIAS_CASES)
    kinds += len(EVAL_CASES) + len(QUERY_CASES)
    assert kinds >= 20
    # Every corpus file is exercised by one of the tables above.
    named = {f"logs/{n}" for n in LOG_CASES} | {"logs/gzip_truncated.jsonl.gz"}
    named |= {f"kb/{n}" for n in KB_CASES} | {f"config/{n}" for n in CONFIG_CASES}
    named |= {f"aliases/{n}" for n in ALIAS_CASES} | {f"queries/{n}" for n in QUERY_CASES}
    named |= {f"eval/{args[1]}" for args, _ in EVAL_CASES.values()}
    on_disk = {p.relative_to(BAD).as_posix() for p in BAD.rglob("*") if p.is_file()}
    on_disk = {p for p in on_disk if not p.startswith("eval/")} | {
        "eval/" + p.split("/")[1].removesuffix(".queries.tsv") for p in on_disk if p.startswith("eval/")
    }
    assert on_disk == named


# ---------------------------------------------------------------- the installed entry point


def _subprocess(*args: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGTRIAGE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "ragtriage", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["logs", "ingest", "--strict", BAD / "logs" / "nan.jsonl"], "nan.jsonl:2: NaN is not valid JSON"),
        (
            ["--config", BAD / "config" / "nested_misspelt_key.toml", "kb", "stats"],
            "rerank.weights.titel_hit",
        ),
        (["kb", "add", "--no-index", BAD / "kb" / "broken_front_matter.md"], "broken_front_matter.md:4:"),
        (
            ["eval", "import", "--format", "trec", BAD / "eval" / "qrels_bad_grade.txt"],
            "qrels_bad_grade.txt:2:",
        ),
    ],
    ids=["log", "config", "kb", "eval-import"],
)
def test_python_m_ragtriage_exits_2_without_traceback(
    args: list[str | Path], fragment: str, home: Path
) -> None:
    completed = _subprocess(*args, home=home)
    assert completed.returncode == 2, completed.stderr
    assert fragment in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
