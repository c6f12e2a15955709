"""TREC qrels (`qid 0 docid grade`), TREC runs (`qid Q0 docid rank score tag`) and query TSV files."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragtriage.errors import InputError
from ragtriage.wording import quoted

__all__ = [
    "TrecRun",
    "read_queries_tsv",
    "read_trec_qrels",
    "read_trec_run",
    "write_queries_tsv",
    "write_trec_qrels",
    "write_trec_run",
]


def _lines(path: Path) -> list[tuple[int, str]]:
    """Non-blank lines with 1-based numbers; a UTF-8 BOM is dropped, bad bytes are replaced."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error}); check the path") from None
    return [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Read `qid iter docid grade` lines into `{qid: {docid: grade}}` (the iter column is ignored).

    Raises:
        InputError: a line without 4 columns, a non-integer grade, or a doc judged twice differently.
    """
    qrels: dict[str, dict[str, int]] = {}
    for number, line in _lines(path):
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
        try:
            grade = int(grade_text)
        except ValueError:
            raise InputError(
                f"{path}:{number}: field `grade` must be an integer (e.g. 0, 1, 2), got {quoted(grade_text)}"
            ) from None
        judged = qrels.setdefault(qid, {})
        if doc_id in judged and judged[doc_id] != grade:
            raise InputError(
                f"{path}:{number}: {quoted(doc_id)} of query {quoted(qid)} is judged twice "
                f"({judged[doc_id]} and {grade}); "
                "keep one line"
            )
        judged[doc_id] = grade
    return qrels


def write_trec_qrels(qrels: Mapping[str, Mapping[str, int]], path: Path) -> None:
    """Write `{qid: {docid: grade}}` as TREC qrels, queries and docs in the given order."""
    lines = [
        f"{qid} 0 {doc_id} {int(grade)}" for qid, judged in qrels.items() for doc_id, grade in judged.items()
    ]
    _check_ids(qrels)
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _check_ids(table: Mapping[str, object]) -> None:
    for qid, docs in table.items():
        for identifier in [qid, *(docs if isinstance(docs, (Mapping, list, tuple)) else [])]:
            if not str(identifier) or any(ch.isspace() for ch in str(identifier)):
                raise InputError(
                    f"id {quoted(identifier)} is empty or contains whitespace, which TREC files cannot hold; "
                    "export to cases-json or cases-jsonl instead"
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
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 6:
            hint = " (this looks like a qrels line; pass it as --qrels)" if len(parts) == 4 else ""
            raise InputError(
                f"{path}:{number}: a run line has 6 columns `qid Q0 docid rank score tag`, "
                f"found {len(parts)}{hint}"
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
        if len({score for score, _, _ in entries}) < len(entries):
            tied_queries += 1
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
    _check_ids({qid: list(ids) for qid, ids in rankings.items()})
    lines: list[str] = []
    for qid, ranked in rankings.items():
        query_scores = scores.get(qid) if scores is not None else None
        for rank, doc_id in enumerate(ranked, start=1):
            score = query_scores[rank - 1] if query_scores is not None else float(len(ranked) - rank + 1)
            lines.append(f"{qid} Q0 {doc_id} {rank} {score} {tag}")
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


# Line breaks only: the id ends at the first tab, so tabs inside the query text survive a round trip.
_FLATTEN = str.maketrans(dict.fromkeys("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))


def read_queries_tsv(path: Path) -> dict[str, str]:
    """Read `qid<TAB>query text` lines (the MS MARCO / TREC topics TSV form).

    Raises:
        InputError: a line without a tab, or a query id given twice.
    """
    queries: dict[str, str] = {}
    for number, line in _lines(path):
        qid, tab, text = line.partition("\t")
        if not tab:
            raise InputError(f"{path}:{number}: expected `qid<TAB>query text`; separate the id with a tab")
        if qid in queries:
            raise InputError(f"{path}:{number}: query id {quoted(qid)} appears twice; keep one line")
        queries[qid] = text
    return queries


def write_queries_tsv(queries: Mapping[str, str], path: Path) -> None:
    """Write `qid<TAB>query text` lines; line breaks inside a query become spaces."""
    _check_ids({qid: [] for qid in queries})
    lines = [f"{qid}\t{text.translate(_FLATTEN)}" for qid, text in queries.items()]
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
