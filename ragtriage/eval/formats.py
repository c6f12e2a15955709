"""Eval-set files: every supported format read into, and written from, `EvalCase`; TREC runs.

| format        | what it is                                                                   |
|---------------|------------------------------------------------------------------------------|
| `cases-json`  | JSON array of `{case_id, question, relevant_chunk_ids, k}`                   |
| `cases-jsonl` | one `{query, positive_doc_ids, must_have_constraints, intent_type, difficulty}` per line |
| `beir`        | a folder with `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv` (Thakur et al. 2021) |
| `trec`        | TREC qrels (`qid 0 docid grade`), the query texts in `<file>.queries.tsv` (`qid<TAB>text`) |
| `finetune`    | export only: `{query, pos, neg}` per line with a run's hard negatives (`eval.finetune`) |

cases-json takes optional `relevant_doc_ids`, `grades`, `must_have_constraints`, `intent_type`,
`difficulty`, `tags`; teams' own files often write `query` for `question` and leave `case_id` out
(a case is then `A<position>`). cases-jsonl takes optional `case_id` (else `L<line>`),
`positive_chunk_ids`, `grades`, `tags`, `k`. Both take `gold_refs`, gold that survives re-chunking:
`{"doc_id", "anchor"}` or `{"doc_id", "start", "end"}` objects (optional `grade`, default 1, and
`chunk_id`, the chunk the span was taken from); with them the id list may be left out.

Files are read by `ragtriage.tables`; every parse error names the file, the line and the field,
and says how to fix it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ValidationError

from ragtriage.errors import InputError
from ragtriage.eval.cases import (
    EvalCase,
    GoldRef,
    Granularity,
    cases_to_qrels,
    did_you_mean,
    grades_from_mapping,
)
from ragtriage.tables import Row, TableFile, text_lines
from ragtriage.wording import quoted

CaseFormat = Literal["cases-json", "cases-jsonl", "beir", "trec"]
CASE_FORMATS: tuple[str, ...] = get_args(CaseFormat)
#: What `eval export` writes: the case formats plus `finetune` (FlagEmbedding JSONL, `eval.finetune`).
EXPORT_FORMATS: tuple[str, ...] = (*CASE_FORMATS, "finetune")

_COMMON_FIELDS = (
    "case_id",
    "must_have_constraints",
    "intent_type",
    "difficulty",
    "grades",
    "tags",
    "k",
    "gold_refs",
)
JSON_FIELDS = ("question", "query", "relevant_chunk_ids", "relevant_doc_ids", *_COMMON_FIELDS)
JSONL_FIELDS = ("query", "positive_doc_ids", "positive_chunk_ids", *_COMMON_FIELDS)
QRELS_HEADER = "query-id\tcorpus-id\tscore"
# Line breaks only: the id ends at the first tab, so tabs inside the query text survive a round trip.
_FLATTEN = str.maketrans(dict.fromkeys("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))


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
    with TableFile(path) as table:
        head = table.head().decode("utf-8", errors="replace")
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


# ------------------------------------------------------------ cases-json, cases-jsonl


class _Record:
    """One JSON object being read, with the location every error message names."""

    def __init__(self, path: Path, line: int, data: object, known: Sequence[str], warnings: list[str] | None):
        self.where = f"{path}:{line}"
        if not isinstance(data, dict):
            raise InputError(f"{self.where}: expected a JSON object {{...}}, got {type(data).__name__}")
        self.data: dict[str, Any] = data
        for key in data:
            if key in known:
                continue
            hint = did_you_mean(key, known)
            if hint:
                raise InputError(f"{self.where}: unknown field {quoted(key)}{hint}; rename it")
            if warnings is not None:
                warnings.append(
                    f"{self.where}: field {quoted(key)} is not part of the format and was ignored"
                )

    def fail(self, name: str, problem: str) -> InputError:
        return InputError(f"{self.where}: field `{name}` {problem}")

    def text(self, name: str, *, required: bool = False, alternatives: Iterable[str] = ()) -> str | None:
        value = self.data.get(name)
        if value is None:
            if required:
                present = [key for key in alternatives if key in self.data]
                hint = (
                    f"; this looks like the other form (it has {quoted(present[0])}), try the other --format"
                    if present
                    else ""
                )
                raise self.fail(name, f"is missing{hint}")
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.fail(name, f"must be a string, got {json.dumps(value, ensure_ascii=False)[:60]}")
        return str(value)

    def strings(self, name: str) -> list[str]:
        value = self.data.get(name)
        if value is None:
            return []
        if isinstance(value, str):
            raise self.fail(name, f'must be a list of strings; write ["{value}"]')
        if not isinstance(value, list) or not all(
            isinstance(v, (str, int)) and not isinstance(v, bool) for v in value
        ):
            raise self.fail(name, "must be a list of strings or ids")
        return [str(v) for v in value]

    def grades(self, name: str) -> dict[str, int]:
        value = self.data.get(name)
        if value is None:
            return {}
        if isinstance(value, list):
            return {gold_id: 1 for gold_id in self.strings(name)}
        if not isinstance(value, dict):
            raise self.fail(name, 'must be a list of ids or an object {"id": grade}')
        try:
            return grades_from_mapping(value)
        except ValueError as error:
            raise self.fail(name, f"has a bad entry: {error}") from None

    def gold(self, chunk_field: str, doc_field: str) -> tuple[dict[str, int], Granularity]:
        if chunk_field in self.data and doc_field in self.data:
            raise self.fail(doc_field, f"cannot be given together with `{chunk_field}`; keep one granularity")
        granularity: Granularity = "doc" if doc_field in self.data else "chunk"
        listed = self.grades(doc_field if granularity == "doc" else chunk_field)
        grades = self.grades("grades")
        for gold_id in listed:
            if grades.get(gold_id, 1) <= 0:
                raise self.fail(
                    "grades", f"gives {quoted(gold_id)} grade {grades[gold_id]} but it is listed as relevant"
                )
        return {**listed, **grades}, granularity

    def refs(self, name: str = "gold_refs") -> list[GoldRef]:
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(
                name, 'must be a list of {"doc_id", "anchor"} or {"doc_id", "start", "end"} objects'
            )
        refs: list[GoldRef] = []
        for index, item in enumerate(value):
            try:
                refs.append(GoldRef.model_validate(item))
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "entry"
                raise self.fail(
                    f"{name}[{index}]",
                    f"is invalid ({where}: {first['msg']}); "
                    'write {"doc_id": "...", "anchor": "..."} or {"doc_id": "...", "start": 0, "end": 120}',
                ) from None
        return refs

    def case(self, case_id: str, query: str, chunk_field: str, doc_field: str, required: str) -> EvalCase:
        """The case, its gold read from `chunk_field` or `doc_field` (or `gold_refs` alone; else the
        message names `required`)."""
        gold, granularity = self.gold(chunk_field, doc_field)
        refs = self.refs()
        if not refs and chunk_field not in self.data and doc_field not in self.data:
            raise self.fail(required, "is missing; use [] for a case the KB cannot answer")
        if refs and granularity == "doc":
            raise self.fail("gold_refs", f"needs chunk granularity; use {chunk_field}, not {doc_field}")
        k = self.data.get("k")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise self.fail("k", f"must be a positive integer, got {quoted(k)}")
        difficulty = self.data.get("difficulty")
        return EvalCase(
            case_id=self.text("case_id") or case_id,
            query=query,
            gold=gold,
            gold_granularity=granularity,
            k=k,
            must_have=self.strings("must_have_constraints"),
            intent_type=self.text("intent_type"),
            difficulty=str(difficulty)
            if isinstance(difficulty, (int, float)) and not isinstance(difficulty, bool)
            else self.text("difficulty"),
            tags=self.strings("tags"),
            gold_refs=refs,
        )


def _unique(path: Path, line: int, case: EvalCase, seen: dict[str, int]) -> EvalCase:
    if case.case_id in seen:
        raise InputError(
            f"{path}:{line}: field `case_id` {quoted(case.case_id)} was already used on line {seen[case.case_id]}; "
            "make case ids unique"
        )
    seen[case.case_id] = line
    return case


def read_cases_json(path: Path, *, warnings: list[str] | None = None) -> list[EvalCase]:
    """Read the JSON array form; ignored extra fields are reported in `warnings` when given."""
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    with TableFile(path) as table:
        hint = " of cases [...]; for one case per line use --format cases-jsonl"
        for position, row in enumerate(table.json_array(hint), start=1):
            record = _Record(path, row.line, row.values, JSON_FIELDS, warnings)
            if "question" in record.data and "query" in record.data:
                raise record.fail("query", "cannot be given together with `question`; keep one")
            query = record.text("query" if "query" in record.data else "question", required=True) or ""
            case = record.case(
                f"A{position}", query, "relevant_chunk_ids", "relevant_doc_ids", "relevant_chunk_ids"
            )
            cases.append(_unique(path, row.line, case, seen))
    return cases


def read_cases_jsonl(path: Path, *, warnings: list[str] | None = None) -> list[EvalCase]:
    """Read the JSONL form; a line without `case_id` gets `L<line number>`."""
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    for row in _jsonl_rows(path, "fix the syntax (no trailing commas, double quotes only)"):
        record = _Record(path, row.line, row.values, JSONL_FIELDS, warnings)
        query = record.text("query", required=True, alternatives=("question",)) or ""
        case = record.case(
            f"L{row.line}", query, "positive_chunk_ids", "positive_doc_ids", "positive_doc_ids"
        )
        cases.append(_unique(path, row.line, case, seen))
    return cases


def _jsonl_rows(path: Path, fix: str) -> Iterator[Row]:
    """The rows of a JSONL file; a line that is not JSON raises `InputError` (with `fix` for a syntax error).

    Raises:
        InputError: a line that is not UTF-8, not JSON, or holds NaN or Infinity.
    """
    with TableFile(path) as table:
        for row in table.jsonl(nan=False):
            if row.error == "not UTF-8":
                raise InputError(f"{path}:{row.line}: not UTF-8; fix: save the file as UTF-8")
            if row.error is not None:
                syntax = row.error.startswith("not valid JSON")
                raise InputError(f"{path}:{row.line}: {row.error}" + (f"; {fix}" if syntax else ""))
            yield row


def _optional_fields(case: EvalCase) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if any(grade != 1 for grade in case.gold.values()):
        extra["grades"] = dict(case.gold)
    if case.must_have:
        extra["must_have_constraints"] = list(case.must_have)
    if case.intent_type is not None:
        extra["intent_type"] = case.intent_type
    if case.difficulty is not None:
        extra["difficulty"] = case.difficulty
    if case.tags:
        extra["tags"] = list(case.tags)
    if case.gold_refs:
        extra["gold_refs"] = [ref.model_dump(mode="json", exclude_none=True) for ref in case.gold_refs]
    return extra


def write_cases_json(cases: Iterable[EvalCase], path: Path) -> None:
    """Write the JSON array form (UTF-8, one case object per array element)."""
    items: list[dict[str, Any]] = []
    for case in cases:
        gold_field = "relevant_doc_ids" if case.gold_granularity == "doc" else "relevant_chunk_ids"
        item: dict[str, Any] = {
            "case_id": case.case_id,
            "question": case.query,
            gold_field: case.relevant_ids,
        }
        if case.k is not None:
            item["k"] = case.k
        items.append(item | _optional_fields(case))
    Path(path).write_text(json.dumps(items, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def write_cases_jsonl(cases: Iterable[EvalCase], path: Path) -> None:
    """Write the JSONL form, one case per line, with its `case_id`."""
    lines: list[str] = []
    for case in cases:
        gold_field = "positive_chunk_ids" if case.gold_granularity == "chunk" else "positive_doc_ids"
        item: dict[str, Any] = {"case_id": case.case_id, "query": case.query, gold_field: case.relevant_ids}
        item.update(_optional_fields(case))
        if case.k is not None:
            item["k"] = case.k
        lines.append(json.dumps(item, ensure_ascii=False))
    _write_lines(Path(path), lines)


# ------------------------------------------------------------ TREC


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
    return [
        EvalCase(case_id=qid, query=queries[qid], gold=dict(qrels.get(qid, {})), gold_granularity=granularity)
        for qid in dict.fromkeys([*queries, *qrels])
    ]


def read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Read `qid iter docid grade` lines into `{qid: {docid: grade}}` (the iter column is ignored).

    Raises:
        InputError: a line without 4 columns, a non-integer grade, or a doc judged twice differently.
    """
    qrels: dict[str, dict[str, int]] = {}
    for number, line in text_lines(path):
        parts = line.split()
        if len(parts) != 4:
            hint = (
                " (this looks like a TREC run line `qid Q0 docid rank score tag`: are the qrels and run files swapped?)"
                if len(parts) == 6
                else ""
            )
            raise InputError(
                f"{path}:{number}: a qrels line has 4 columns `qid 0 docid grade`, found {len(parts)}{hint}"
            )
        qid, _, doc_id, grade_text = parts
        grade = _integer(path, number, "grade", grade_text, " (e.g. 0, 1, 2)")
        judged = qrels.setdefault(qid, {})
        if judged.get(doc_id, grade) != grade:
            raise InputError(
                f"{path}:{number}: {quoted(doc_id)} of query {quoted(qid)} is judged twice "
                f"({judged[doc_id]} and {grade}); keep one line"
            )
        judged[doc_id] = grade
    return qrels


def write_trec_qrels(qrels: Mapping[str, Mapping[str, int]], path: Path) -> None:
    """Write `{qid: {docid: grade}}` as TREC qrels, queries and docs in the given order."""
    _check_trec_ids(qrels)
    _write_lines(
        Path(path),
        [
            f"{qid} 0 {doc_id} {int(grade)}"
            for qid, judged in qrels.items()
            for doc_id, grade in judged.items()
        ],
    )


@dataclass
class TrecRun:
    """A TREC run: per query, the ranked ids and their scores (best first), plus the run tag."""

    rankings: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    tag: str = "ragtriage"
    warnings: list[str] = field(default_factory=list)


def read_trec_run(path: Path) -> TrecRun:
    """Read `qid Q0 docid rank score tag` lines; each query is ordered by score, best first.

    Equal scores keep the file's order (trec_eval would order them by doc id instead; a warning
    says how many queries have ties). The rank column is informational, as in trec_eval.

    Raises:
        InputError: a line without 6 columns or a score that is not a finite number.
    """
    rows: dict[str, list[tuple[float, int, str]]] = {}
    tags: set[str] = set()
    for number, line in text_lines(path):
        parts = line.split()
        if len(parts) != 6:
            hint = " (this looks like a qrels line; pass it as --qrels)" if len(parts) == 4 else ""
            raise InputError(
                f"{path}:{number}: a run line has 6 columns `qid Q0 docid rank score tag`, found {len(parts)}{hint}"
            )
        qid, _, doc_id, _, score_text, tag = parts
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputError(
                f"{path}:{number}: field `score` must be a finite number, got {quoted(score_text)}"
            )
        rows.setdefault(qid, []).append((score, number, doc_id))
        tags.add(tag)
    run = TrecRun(tag=sorted(tags)[0] if tags else "ragtriage")
    tied_queries = 0
    for qid, entries in rows.items():
        entries.sort(key=lambda entry: (-entry[0], entry[1]))
        run.rankings[qid] = [doc_id for _, _, doc_id in entries]
        run.scores[qid] = [score for score, _, _ in entries]
        tied_queries += len({score for score, _, _ in entries}) < len(entries)
    if tied_queries:
        run.warnings.append(
            f"{path}: {tied_queries} queries have tied scores; ties keep the file order "
            "(trec_eval would order them by doc id)"
        )
    if len(tags) > 1:
        run.warnings.append(
            f"{path}: the run has {len(tags)} different tags; is it several runs in one file?"
        )
    return run


def write_trec_run(
    rankings: Mapping[str, Sequence[str]],
    path: Path,
    *,
    scores: Mapping[str, Sequence[float]] | None = None,
    tag: str = "ragtriage",
) -> None:
    """Write ranked ids as a TREC run; default scores strictly decrease so trec_eval keeps the order."""
    _check_trec_ids({qid: list(ids) for qid, ids in rankings.items()})
    lines: list[str] = []
    for qid, ranked in rankings.items():
        query_scores = scores.get(qid) if scores is not None else None
        for rank, doc_id in enumerate(ranked, start=1):
            score = query_scores[rank - 1] if query_scores is not None else float(len(ranked) - rank + 1)
            lines.append(f"{qid} Q0 {doc_id} {rank} {score} {tag}")
    _write_lines(Path(path), lines)


def read_queries_tsv(path: Path) -> dict[str, str]:
    """Read `qid<TAB>query text` lines (the MS MARCO / TREC topics TSV form).

    Raises:
        InputError: a line without a tab, or a query id given twice.
    """
    queries: dict[str, str] = {}
    for number, line in text_lines(path):
        qid, tab, text = line.partition("\t")
        if not tab:
            raise InputError(f"{path}:{number}: expected `qid<TAB>query text`; separate the id with a tab")
        if qid in queries:
            raise InputError(f"{path}:{number}: query id {quoted(qid)} appears twice; keep one line")
        queries[qid] = text
    return queries


def write_queries_tsv(queries: Mapping[str, str], path: Path) -> None:
    """Write `qid<TAB>query text` lines; line breaks inside a query become spaces."""
    _check_trec_ids({qid: [] for qid in queries})
    _write_lines(Path(path), [f"{qid}\t{text.translate(_FLATTEN)}" for qid, text in queries.items()])


def _check_trec_ids(table: Mapping[str, object]) -> None:
    for qid, docs in table.items():
        for identifier in [qid, *(docs if isinstance(docs, (Mapping, list, tuple)) else [])]:
            if not str(identifier) or any(ch.isspace() for ch in str(identifier)):
                raise InputError(
                    f"id {quoted(identifier)} is empty or contains whitespace, which TREC files cannot hold; "
                    "export to cases-json or cases-jsonl instead"
                )


# ------------------------------------------------------------ BEIR


def read_beir(folder: Path, *, split: str = "test", granularity: Granularity = "doc") -> list[EvalCase]:
    """Cases for the queries judged in `qrels/<split>.tsv`, plus queries marked `no_answer` in their metadata.

    BEIR corpus entries are documents unless a query's metadata says `gold_granularity` (ragtriage writes it).

    Raises:
        InputError: a missing file, a bad line, or a judged query missing from `queries.jsonl`.
    """
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        found = (
            sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        )
        hint = f"; splits here: {', '.join(found)} (pass --split)" if found else "; is this a BEIR folder?"
        raise InputError(f"{qrels_path}: not found{hint}")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in text_lines(qrels_path):
        if number == 1 and line.lower().startswith("query-id"):
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InputError(
                f"{qrels_path}:{number}: expected 3 tab-separated columns `{QRELS_HEADER}`, found {len(parts)}"
            )
        qrels.setdefault(parts[0], {})[parts[1]] = _integer(qrels_path, number, "score", parts[2])
    queries_path = folder / "queries.jsonl"
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for row in _jsonl_rows(queries_path, "fix the syntax"):
        where = f"{queries_path}:{row.line}"
        query_id = row.values.get("_id") if isinstance(row.values, dict) else None
        if not isinstance(query_id, (str, int)) or isinstance(query_id, bool):
            raise InputError(
                f'{where}: field `_id` is missing; every line needs {{"_id": "...", "text": "..."}}'
            )
        if not isinstance(row.values.get("text", ""), str):
            raise InputError(f"{where}: field `text` must be a string")
        metadata = row.values.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InputError(f"{where}: field `metadata` must be an object")
        seen.add(str(query_id))
        if str(query_id) in qrels or metadata.get("no_answer"):
            cases.append(
                _beir_case(
                    str(query_id), row.values, metadata, qrels.get(str(query_id), {}), granularity, where
                )
            )
    missing = [query_id for query_id in qrels if query_id not in seen]
    if missing:
        raise InputError(
            f"{qrels_path}: {len(missing)} judged queries are not in {queries_path.name} "
            f"(first: {quoted(missing[0])}); add them or remove their qrels lines"
        )
    return cases


def _beir_case(
    query_id: str,
    row: dict[str, Any],
    metadata: dict[str, Any],
    gold: dict[str, int],
    granularity: str,
    where: str,
) -> EvalCase:
    try:
        return EvalCase(
            case_id=query_id,
            query=str(row.get("text") or ""),
            gold=gold,
            gold_granularity=metadata.get("gold_granularity", granularity),
            must_have=metadata.get("must_have_constraints", []),
            intent_type=metadata.get("intent_type"),
            difficulty=metadata.get("difficulty"),
            tags=metadata.get("tags", []),
            k=metadata.get("k"),
        )
    except ValidationError as error:
        name = ".".join(str(part) for part in error.errors()[0]["loc"])
        raise InputError(f"{where}: field `metadata.{name}` is invalid; fix or remove it") from None


def write_beir(
    cases: Iterable[EvalCase],
    folder: Path,
    *,
    split: str = "test",
    corpus: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Write `queries.jsonl`, `qrels/<split>.tsv` and, when `corpus` is given, `corpus.jsonl`.

    Case fields BEIR has no column for go into each query's `metadata`, so a re-import loses nothing.
    """
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    query_lines: list[str] = []
    qrels_lines = [QRELS_HEADER]
    for case in cases:
        if "\t" in case.case_id or any("\t" in gold_id or "\n" in gold_id for gold_id in case.gold):
            raise InputError(
                f"case {quoted(case.case_id)}: ids with tabs cannot go into BEIR qrels; export to cases-jsonl"
            )
        metadata: dict[str, Any] = {"gold_granularity": case.gold_granularity}
        if not case.gold:
            metadata["no_answer"] = True
        if case.must_have:
            metadata["must_have_constraints"] = case.must_have
        for name in ("intent_type", "difficulty", "k"):
            if getattr(case, name) is not None:
                metadata[name] = getattr(case, name)
        if case.tags:
            metadata["tags"] = case.tags
        query_lines.append(
            json.dumps({"_id": case.case_id, "text": case.query, "metadata": metadata}, ensure_ascii=False)
        )
        qrels_lines.extend(f"{case.case_id}\t{gold_id}\t{grade}" for gold_id, grade in case.gold.items())
    _write_lines(folder / "queries.jsonl", query_lines)
    _write_lines(folder / "qrels" / f"{split}.tsv", qrels_lines)
    if corpus is not None:
        _write_lines(
            folder / "corpus.jsonl",
            [
                json.dumps(
                    {"_id": doc_id, "title": doc.get("title", ""), "text": doc.get("text", "")},
                    ensure_ascii=False,
                )
                for doc_id, doc in corpus.items()
            ],
        )


def _integer(path: Path, number: int, name: str, text: str, example: str = "") -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(
            f"{path}:{number}: field `{name}` must be an integer{example}, got {quoted(text)}"
        ) from None


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
