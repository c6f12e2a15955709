"""BEIR folders: `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv` (Thakur et al. 2021)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragtriage.errors import InputError
from ragtriage.eval.cases import EvalCase, Granularity
from ragtriage.wording import quoted

__all__ = ["read_beir", "read_beir_corpus", "write_beir"]

QRELS_HEADER = "query-id\tcorpus-id\tscore"


def _jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error}); a BEIR folder needs it") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not valid JSON ({error.msg}); fix the syntax") from None
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("_id"), (str, int))
            or isinstance(row.get("_id"), bool)
        ):
            raise InputError(
                f'{path}:{number}: field `_id` is missing; every line needs {{"_id": "...", "text": "..."}}'
            )
        if not isinstance(row.get("text", ""), str):
            raise InputError(f"{path}:{number}: field `text` must be a string")
        rows.append((number, row))
    return rows


def read_beir_corpus(folder: Path) -> dict[str, dict[str, str]]:
    """`{_id: {"title", "text"}}` from `corpus.jsonl` (empty when the folder has none)."""
    path = Path(folder) / "corpus.jsonl"
    if not path.exists():
        return {}
    return {
        str(row["_id"]): {"title": str(row.get("title") or ""), "text": str(row.get("text") or "")}
        for _, row in _jsonl(path)
    }


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    try:
        lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error}); check --split") from None
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (number == 1 and line.lower().startswith("query-id")):
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InputError(
                f"{path}:{number}: expected 3 tab-separated columns `{QRELS_HEADER}`, found {len(parts)}"
            )
        query_id, corpus_id, score_text = parts
        try:
            score = int(score_text)
        except ValueError:
            raise InputError(
                f"{path}:{number}: field `score` must be an integer, got {quoted(score_text)}"
            ) from None
        qrels.setdefault(query_id, {})[corpus_id] = score
    return qrels


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
    qrels = _read_qrels(qrels_path)
    queries_path = folder / "queries.jsonl"
    queries = {str(row["_id"]): (number, row) for number, row in _jsonl(queries_path)}
    cases: list[EvalCase] = []
    for query_id, (number, row) in queries.items():
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InputError(f"{queries_path}:{number}: field `metadata` must be an object")
        if query_id not in qrels and not metadata.get("no_answer"):
            continue
        cases.append(
            _case(query_id, row, metadata, qrels.get(query_id, {}), granularity, f"{queries_path}:{number}")
        )
    missing = [query_id for query_id in qrels if query_id not in queries]
    if missing:
        raise InputError(
            f"{qrels_path}: {len(missing)} judged queries are not in {queries_path.name} "
            f"(first: {quoted(missing[0])}); "
            "add them or remove their qrels lines"
        )
    return cases


def _case(
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
        field = ".".join(str(part) for part in error.errors()[0]["loc"])
        raise InputError(f"{where}: field `metadata.{field}` is invalid; fix or remove it") from None


def _metadata(case: EvalCase) -> dict[str, Any]:
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
    return metadata


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
        row = {"_id": case.case_id, "text": case.query, "metadata": _metadata(case)}
        query_lines.append(json.dumps(row, ensure_ascii=False))
        qrels_lines.extend(f"{case.case_id}\t{gold_id}\t{grade}" for gold_id, grade in case.gold.items())
    (folder / "queries.jsonl").write_text("".join(line + "\n" for line in query_lines), encoding="utf-8")
    (folder / "qrels" / f"{split}.tsv").write_text(
        "".join(line + "\n" for line in qrels_lines), encoding="utf-8"
    )
    if corpus is not None:
        corpus_lines = [
            json.dumps(
                {"_id": doc_id, "title": doc.get("title", ""), "text": doc.get("text", "")},
                ensure_ascii=False,
            )
            for doc_id, doc in corpus.items()
        ]
        (folder / "corpus.jsonl").write_text("".join(line + "\n" for line in corpus_lines), encoding="utf-8")
