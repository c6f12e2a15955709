"""Eval-set import and export: every supported file format read into, and written from, `EvalCase`.

| format        | what it is                                                                   |
|---------------|------------------------------------------------------------------------------|
| `cases-json`  | JSON array of `{case_id, question, relevant_chunk_ids, k}`                   |
| `cases-jsonl` | one `{query, positive_doc_ids, must_have_constraints, intent_type, difficulty}` per line |
| `beir`        | a folder with `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`           |
| `trec`        | a TREC qrels file, with the query texts in `<file>.queries.tsv` (`qid<TAB>text`) |
| `finetune`    | export only: `{query, pos, neg}` per line with a run's hard negatives (`eval.finetune`) |

The format modules hold the details; this module is the one entry point the CLI and the eval store use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, get_args

from ragtriage.errors import InputError
from ragtriage.eval.beir_files import read_beir, read_beir_corpus, write_beir
from ragtriage.eval.case_files import read_cases_json, read_cases_jsonl, write_cases_json, write_cases_jsonl
from ragtriage.eval.cases import EvalCase, Granularity, cases_to_qrels
from ragtriage.eval.trec_files import (
    TrecRun,
    read_queries_tsv,
    read_trec_qrels,
    read_trec_run,
    write_queries_tsv,
    write_trec_qrels,
    write_trec_run,
)
from ragtriage.wording import quoted

__all__ = [
    "CASE_FORMATS",
    "EXPORT_FORMATS",
    "CaseFormat",
    "EvalCase",
    "Granularity",
    "TrecRun",
    "cases_from_qrels",
    "cases_to_qrels",
    "detect_case_format",
    "queries_path_for",
    "read_beir",
    "read_beir_corpus",
    "read_cases",
    "read_cases_json",
    "read_cases_jsonl",
    "read_queries_tsv",
    "read_trec_qrels",
    "read_trec_run",
    "write_beir",
    "write_cases",
    "write_cases_json",
    "write_cases_jsonl",
    "write_queries_tsv",
    "write_trec_qrels",
    "write_trec_run",
]

CaseFormat = Literal["cases-json", "cases-jsonl", "beir", "trec"]
CASE_FORMATS: tuple[str, ...] = get_args(CaseFormat)
#: What `eval export` writes: the case formats plus `finetune` (FlagEmbedding JSONL, `eval.finetune`).
EXPORT_FORMATS: tuple[str, ...] = (*CASE_FORMATS, "finetune")


def detect_case_format(path: Path) -> CaseFormat:
    """The eval-set format of `path`, told by its content: a folder is BEIR, a JSON array
    `cases-json`, JSON objects one per line `cases-jsonl`, whitespace-separated lines of four fields
    TREC qrels.

    Raises:
        InputError: none of these (the message names the formats tried and `--format`).
    """
    path = Path(path)
    if path.is_dir():
        return "beir"
    with path.open("rb") as handle:
        head = handle.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if head.startswith("["):
        return "cases-json"
    if head.startswith("{"):
        return "cases-jsonl"
    first_line = head.split("\n", 1)[0].split()
    if len(first_line) == 4 and first_line[3].lstrip("-").isdigit():
        return "trec"
    raise InputError(
        f"{path}: not an eval set this version reads (tried a JSON array: cases-json, JSON lines: "
        "cases-jsonl, TREC qrels lines `qid 0 doc_id grade`, a BEIR folder); name it with --format"
    )


def queries_path_for(qrels_path: Path) -> Path:
    """Where the query texts of a TREC qrels file live: `<qrels file>.queries.tsv` next to it."""
    qrels_path = Path(qrels_path)
    return qrels_path.with_name(qrels_path.name + ".queries.tsv")


def cases_from_qrels(
    qrels: Mapping[str, Mapping[str, int]],
    queries: Mapping[str, str] | None = None,
    *,
    granularity: Granularity = "chunk",
) -> list[EvalCase]:
    """Cases from TREC qrels and query texts; queries without judgements become no-gold cases.

    Raises:
        InputError: a judged query without a query text.
    """
    queries = queries or {}
    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise InputError(
            f"{len(missing)} judged queries have no query text (first: {quoted(missing[0])}); "
            "give a `qid<TAB>query` file next to the qrels as <qrels>.queries.tsv"
        )
    case_ids = list(dict.fromkeys([*queries, *qrels]))
    return [
        EvalCase(case_id=qid, query=queries[qid], gold=dict(qrels.get(qid, {})), gold_granularity=granularity)
        for qid in case_ids
    ]


def read_cases(
    path: Path,
    fmt: CaseFormat,
    *,
    warnings: list[str] | None = None,
    split: str = "test",
    queries_path: Path | None = None,
    granularity: Granularity | None = None,
) -> list[EvalCase]:
    """Read an eval set in format `fmt` (see the module table).

    `granularity` overrides what the format implies (chunk for cases-json and trec, doc for
    cases-jsonl's `positive_doc_ids` and for BEIR). Ignored extra fields are appended to `warnings`.

    Raises:
        InputError: a missing file, or a bad line or field (the message names file, line and field).
        ValueError: an unknown format name.
    """
    path = Path(path)
    if fmt == "cases-json":
        cases = read_cases_json(path, warnings=warnings)
    elif fmt == "cases-jsonl":
        cases = read_cases_jsonl(path, warnings=warnings)
    elif fmt == "beir":
        if not path.is_dir():
            raise InputError(
                f"{path}: a BEIR eval set is a folder with queries.jsonl and qrels/; pass the folder"
            )
        cases = read_beir(path, split=split, granularity=granularity or "doc")
    elif fmt == "trec":
        topics = queries_path or queries_path_for(path)
        if not Path(topics).exists():
            raise InputError(
                f"{topics}: not found; TREC qrels need the query texts as `qid<TAB>query` lines there"
            )
        cases = cases_from_qrels(
            read_trec_qrels(path), read_queries_tsv(topics), granularity=granularity or "chunk"
        )
    else:
        raise ValueError(f"unknown format {quoted(fmt)}; choose one of {', '.join(CASE_FORMATS)}")
    if granularity is not None:
        cases = [case.model_copy(update={"gold_granularity": granularity}) for case in cases]
    return cases


def write_cases(
    cases: Iterable[EvalCase],
    path: Path,
    fmt: CaseFormat,
    *,
    split: str = "test",
    corpus: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Path]:
    """Write an eval set in format `fmt`; returns the files written (TREC writes qrels + queries TSV).

    Raises:
        InputError: an id that the format cannot hold (whitespace in TREC, tabs in BEIR).
        ValueError: an unknown format name.
    """
    path = Path(path)
    cases = list(cases)
    if fmt == "cases-json":
        write_cases_json(cases, path)
        return [path]
    if fmt == "cases-jsonl":
        write_cases_jsonl(cases, path)
        return [path]
    if fmt == "beir":
        write_beir(cases, path, split=split, corpus=corpus)
        written = [path / "queries.jsonl", path / "qrels" / f"{split}.tsv"]
        return written + ([path / "corpus.jsonl"] if corpus is not None else [])
    if fmt == "trec":
        write_trec_qrels(cases_to_qrels(c for c in cases if c.gold), path)
        write_queries_tsv({case.case_id: case.query for case in cases}, queries_path_for(path))
        return [path, queries_path_for(path)]
    raise ValueError(f"unknown format {quoted(fmt)}; choose one of {', '.join(CASE_FORMATS)}")
