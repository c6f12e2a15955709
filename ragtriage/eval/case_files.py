"""The two case-file forms seen in practice.

* cases-json: one JSON array of `{"case_id", "question", "relevant_chunk_ids", "k"}` objects
  (optional: `relevant_doc_ids`, `grades`, `must_have_constraints`, `intent_type`, `difficulty`, `tags`).
  Teams' own files often write `query` for `question` and leave `case_id` out: `query` is read as the
  question, and a case without `case_id` gets `A<position in the array>`.
* cases-jsonl: one object per line, `{"query", "positive_doc_ids", "must_have_constraints",
  "intent_type", "difficulty"}` (optional: `case_id`, `positive_chunk_ids`, `grades`, `tags`, `k`).

Both forms take optional `gold_refs`: gold that survives re-chunking, a list of
`{"doc_id", "anchor"}` or `{"doc_id", "start", "end"}` objects (both may be given; optional `grade`,
default 1, and `chunk_id`, the chunk the span was taken from). With `gold_refs` the chunk/doc id list
may be left out.

Every parse error names the file, the line and the field, and says how to fix it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragtriage.errors import InputError
from ragtriage.eval.cases import EvalCase, GoldRef, did_you_mean, grades_from_mapping
from ragtriage.wording import quoted

__all__ = ["read_cases_json", "read_cases_jsonl", "write_cases_json", "write_cases_jsonl"]

JSON_FIELDS = (
    "case_id",
    "question",
    "query",
    "relevant_chunk_ids",
    "relevant_doc_ids",
    "k",
    "grades",
    "must_have_constraints",
    "intent_type",
    "difficulty",
    "tags",
    "gold_refs",
)
JSONL_FIELDS = (
    "case_id",
    "query",
    "positive_doc_ids",
    "positive_chunk_ids",
    "must_have_constraints",
    "intent_type",
    "difficulty",
    "grades",
    "tags",
    "k",
    "gold_refs",
)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON; write null or a number")


class _Record:
    """One JSON object being read, with the location every error message names."""

    def __init__(self, path: Path, line: int, data: object, known: Iterable[str], warnings: list[str] | None):
        self.where = f"{path}:{line}"
        if not isinstance(data, dict):
            raise InputError(f"{self.where}: expected a JSON object {{...}}, got {type(data).__name__}")
        self.data: dict[str, Any] = data
        known = tuple(known)
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

    def cutoff(self, name: str) -> int | None:
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(name, f"must be a positive integer, got {quoted(value)}")
        return value

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

    def difficulty(self) -> str | None:
        value = self.data.get("difficulty")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return self.text("difficulty")


def _gold(record: _Record, chunk_field: str, doc_field: str) -> tuple[dict[str, int], str]:
    if chunk_field in record.data and doc_field in record.data:
        raise record.fail(doc_field, f"cannot be given together with `{chunk_field}`; keep one granularity")
    granularity = "doc" if doc_field in record.data else "chunk"
    listed = record.grades(doc_field if granularity == "doc" else chunk_field)
    grades = record.grades("grades")
    for gold_id in listed:
        if grades.get(gold_id, 1) <= 0:
            raise record.fail(
                "grades", f"gives {quoted(gold_id)} grade {grades[gold_id]} but it is listed as relevant"
            )
    return {**listed, **grades}, granularity


def _loads(path: Path, text: str, line_offset: int = 0) -> object:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}:{error.lineno + line_offset}: not valid JSON ({error.msg} at column {error.colno}); "
            "fix the syntax (no trailing commas, double quotes only)"
        ) from None
    except ValueError as error:
        raise InputError(f"{path}:{line_offset + 1}: {error}") from None


def _read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error}); check the path") from None


def _json_array_items(path: Path, text: str) -> list[tuple[int, object]]:
    """Decode a JSON array element by element so each case keeps the line it starts on."""
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    position = len(text) - len(text.lstrip())
    if not text[position:].startswith("["):
        _loads(path, text)  # a syntax error gets its own line number
        raise InputError(
            f"{path}:1: expected a JSON array of cases [...]; for one case per line use --format cases-jsonl"
        )
    position += 1
    items: list[tuple[int, object]] = []
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if text.startswith("]", position):
            break
        line = text.count("\n", 0, position) + 1
        try:
            item, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{error.lineno}: not valid JSON ({error.msg}); fix the syntax") from None
        except ValueError as error:
            raise InputError(f"{path}:{line}: {error}") from None
        items.append((line, item))
        while position < len(text) and text[position].isspace():
            position += 1
        if text.startswith(",", position):
            position += 1
            continue
        if not text.startswith("]", position):
            line = text.count("\n", 0, position) + 1
            raise InputError(f"{path}:{line}: expected ',' or ']' after a case; fix the syntax")
    if text[position + 1 :].strip():
        raise InputError(
            f"{path}:{text.count(chr(10), 0, position) + 1}: text after the closing ']'; remove it"
        )
    return items


def _unique(path: Path, line: int, case: EvalCase, seen: dict[str, int]) -> EvalCase:
    if case.case_id in seen:
        raise InputError(
            f"{path}:{line}: field `case_id` {quoted(case.case_id)} was already used on line {seen[case.case_id]}; "
            "make case ids unique"
        )
    seen[case.case_id] = line
    return case


def _question(record: _Record) -> str:
    """The array form's `question`, or `query` as teams' own evaluation files name it."""
    if "question" in record.data and "query" in record.data:
        raise record.fail("query", "cannot be given together with `question`; keep one")
    return record.text("query" if "query" in record.data else "question", required=True) or ""


def read_cases_json(path: Path, *, warnings: list[str] | None = None) -> list[EvalCase]:
    """Read the JSON array form; ignored extra fields are reported in `warnings` when given."""
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    for position, (line, item) in enumerate(_json_array_items(path, _read_text(path)), start=1):
        record = _Record(path, line, item, JSON_FIELDS, warnings)
        gold, granularity = _gold(record, "relevant_chunk_ids", "relevant_doc_ids")
        refs = record.refs()
        if not refs and "relevant_chunk_ids" not in record.data and "relevant_doc_ids" not in record.data:
            raise record.fail("relevant_chunk_ids", "is missing; use [] for a case the KB cannot answer")
        case = EvalCase(
            case_id=record.text("case_id") or f"A{position}",
            query=_question(record),
            gold=gold,
            gold_granularity=granularity,  # type: ignore[arg-type]
            k=record.cutoff("k"),
            must_have=record.strings("must_have_constraints"),
            intent_type=record.text("intent_type"),
            difficulty=record.difficulty(),
            tags=record.strings("tags"),
            gold_refs=refs,
        )
        cases.append(_unique(path, line, case, seen))
    return cases


def read_cases_jsonl(path: Path, *, warnings: list[str] | None = None) -> list[EvalCase]:
    """Read the JSONL form; a line without `case_id` gets `L<line number>`."""
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(_read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        record = _Record(path, line, _loads(path, raw, line - 1), JSONL_FIELDS, warnings)
        gold, granularity = _gold(record, "positive_chunk_ids", "positive_doc_ids")
        refs = record.refs()
        if not refs and "positive_doc_ids" not in record.data and "positive_chunk_ids" not in record.data:
            raise record.fail("positive_doc_ids", "is missing; use [] for a case the KB cannot answer")
        if refs and granularity == "doc":
            raise record.fail(
                "gold_refs", "needs chunk granularity; use positive_chunk_ids, not positive_doc_ids"
            )
        case = EvalCase(
            case_id=record.text("case_id") or f"L{line}",
            query=record.text("query", required=True, alternatives=("question",)) or "",
            gold=gold,
            gold_granularity=granularity,  # type: ignore[arg-type]
            must_have=record.strings("must_have_constraints"),
            intent_type=record.text("intent_type"),
            difficulty=record.difficulty(),
            tags=record.strings("tags"),
            k=record.cutoff("k"),
            gold_refs=refs,
        )
        cases.append(_unique(path, line, case, seen))
    return cases


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
        item.update(_optional_fields(case))
        items.append(item)
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
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
