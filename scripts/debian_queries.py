"""The Debian query set (`fixtures/debian_queries/*.jsonl`): its files, cases and rules.

Colloquial Chinese queries over the Debian FAQ and the Debian Reference (zh-cn) indexed together,
gold as `(doc_id, anchor)` (see `fixtures/debian_queries/README.md`). Used by
`scripts/eval_debian_queries.py` and by the consistency test.

Rules every file follows: case ids unique across the files, each with its file's prefix; one
`style:` tag of `STYLES`; the `split:` tag set by position only (every third line of a file, the
3rd, 6th, 9th …, is `split:heldout`, every other line `split:tune`); a no-answer case carries the
`no_answer` tag and no gold, an answerable one at least one gold ref.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragtriage.errors import InputError
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.formats import read_cases

REPO_ROOT = Path(__file__).resolve().parent.parent
QUERY_DIR = REPO_ROOT / "fixtures" / "debian_queries"

#: File name → case id prefix (one writer per file).
FILE_PREFIXES = {"faq.jsonl": "faq-", "reference-a.jsonl": "refa-", "reference-b.jsonl": "refb-"}
STYLES = ("colloquial", "abbreviation", "short", "multi-constraint", "typo")
TUNE, HELDOUT = "split:tune", "split:heldout"
NO_ANSWER_TAG = "no_answer"


@dataclass(frozen=True)
class QueryCase:
    """One case with where it came from (file and 1-based line)."""

    case: EvalCase
    path: Path
    line: int

    @property
    def answerable(self) -> bool:
        """True when the documents answer the query (the case has gold)."""
        return self.case.has_gold

    def tag(self, kind: str) -> str | None:
        """The value of the case's first `kind:` tag (`split` → `tune`), or None."""
        prefix = f"{kind}:"
        return next((t[len(prefix) :] for t in self.case.tags if t.startswith(prefix)), None)


def expected_split(line: int) -> str:
    """The split tag of the `line`-th line (1-based) of a file: every third line is held out."""
    return HELDOUT if line % 3 == 0 else TUNE


def query_files(folder: Path = QUERY_DIR) -> list[Path]:
    """The `*.jsonl` query files of `folder`, sorted by name (empty when there is none)."""
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def _lines_with_cases(path: Path) -> list[int]:
    """1-based numbers of the non-blank lines of `path` (the lines `read_cases` turns into cases)."""
    text = path.read_text(encoding="utf-8-sig")
    return [number for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def load_query_cases(files: list[Path]) -> list[QueryCase]:
    """Every case of `files`, in file and line order.

    Raises:
        InputError: a bad line or field (named by `read_cases`), or a case id used twice (both places named).
    """
    cases: list[QueryCase] = []
    seen: dict[str, str] = {}
    for path in files:
        lines = _lines_with_cases(path)
        parsed = read_cases(path, "cases-jsonl")
        if len(parsed) != len(lines):
            raise InputError(f"{path}: {len(lines)} lines but {len(parsed)} cases; one case per line")
        for line, case in zip(lines, parsed, strict=True):
            where = f"{path.name}:{line}"
            if case.case_id in seen:
                raise InputError(
                    f"{where}: case_id {case.case_id!r} is also at {seen[case.case_id]}; give each case its own id"
                )
            seen[case.case_id] = where
            cases.append(QueryCase(case, path, line))
    return cases


def rule_problems(cases: list[QueryCase]) -> list[str]:
    """One line per broken rule of the set (module docstring), naming file, line and field; empty when all hold."""
    problems: list[str] = []
    for item in cases:
        case, where = item.case, f"{item.path.name}:{item.line}"
        prefix = FILE_PREFIXES.get(item.path.name)
        if prefix is not None and not case.case_id.startswith(prefix):
            problems.append(f"{where}: case_id {case.case_id!r} should start with {prefix!r}")
        split = f"split:{item.tag('split')}"
        if split != expected_split(item.line):
            problems.append(
                f"{where}: tags has {split}, the line's position makes it {expected_split(item.line)}"
            )
        if item.answerable:
            if item.tag("style") not in STYLES:
                problems.append(f"{where}: tags needs one style:… of {', '.join(STYLES)}")
            if NO_ANSWER_TAG in case.tags:
                problems.append(f"{where}: a case with gold must not carry the {NO_ANSWER_TAG} tag")
            if not case.gold_refs:
                problems.append(f"{where}: gold_refs: an answerable case needs (doc_id, anchor) refs")
        elif NO_ANSWER_TAG not in case.tags:
            problems.append(f"{where}: no gold, so tags needs {NO_ANSWER_TAG} (or add gold_refs)")
    return problems


def faq_heading_cases(faq_dir: Path, path: Path) -> Path:
    """Write the FAQ's own question headings as cases to `path` (a stand-in set for development).

    Tags follow the set's rules (`source:faq`, `style:heading`, the split by position), so every
    slice of the evaluation has members; the headings are the documents' own words, so the figures
    are easier than the colloquial set's.
    """
    import debian_faq

    with path.open("w", encoding="utf-8") as out:
        for line, question in enumerate(debian_faq.faq_questions(faq_dir), start=1):
            case = {
                "case_id": f"faqh-{line:03d}",
                "query": question.query,
                "gold_refs": [{"doc_id": question.doc_id, "anchor": question.anchor}],
                "tags": ["source:faq", "style:heading", expected_split(line)],
            }
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    return path
