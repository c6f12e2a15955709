"""`EvalCase`: the neutral form every eval-set file format is read into and written from."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragtriage.wording import quoted

__all__ = ["EvalCase", "GoldRef", "Granularity", "cases_to_qrels", "did_you_mean"]

Granularity = Literal["chunk", "doc"]


class GoldRef(BaseModel):
    """Gold that survives re-chunking: a section (`anchor`) or a character span of one document.

    `start`/`end` are character offsets (end exclusive) into the document's text as ragtriage reads
    it: every block of every section, stripped, joined with a blank line (`kb.chunking.document_text`).
    At evaluation time the ref maps to the chunks of the current KB that overlap the span (when the
    document's chunks carry offsets) or else that carry the anchor. `chunk_id` is the chunk the ref
    was taken from (`promote`): while it is live the ref maps to it alone.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc_id: str
    anchor: str | None = None
    start: int | None = Field(default=None, ge=0)
    end: int | None = Field(default=None, ge=0)
    grade: int = 1
    chunk_id: str | None = None

    @property
    def label(self) -> str:
        """`doc_id#anchor`, `doc_id[start:end]` or both, for messages and tables."""
        span = f"[{self.start}:{self.end}]" if self.start is not None else ""
        anchor = f"#{self.anchor}" if self.anchor is not None else ""
        return f"{self.doc_id}{anchor}{span}"

    @model_validator(mode="after")
    def _has_target(self) -> GoldRef:
        if (self.start is None) != (self.end is None):
            raise ValueError("give both start and end of the span, or neither")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"span end ({self.end}) must be greater than start ({self.start})")
        if self.anchor is None and self.start is None:
            raise ValueError("needs an anchor or a span (start, end)")
        return self


class EvalCase(BaseModel):
    """One eval case: a query and its graded gold ids (grade > 0 relevant; 0 or less judged non-relevant)."""

    model_config = ConfigDict(extra="forbid")

    case_id: str
    query: str
    gold: dict[str, int] = Field(default_factory=dict)
    """Gold id → grade. Empty (or no grade > 0): the KB has no answer and the right behaviour is to refuse."""
    gold_granularity: Granularity = "chunk"
    """Whether `gold` holds chunk ids or document ids; the run is evaluated at that granularity."""
    must_have: list[str] = Field(default_factory=list)
    """Constraints the answer must respect (product line, version, state names…)."""
    intent_type: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    k: int | None = Field(default=None, gt=0)
    """Cutoff the case was written for, when the source format has one."""
    gold_refs: list[GoldRef] = Field(default_factory=list)
    """Gold as (doc_id, anchor) or (doc_id, span): mapped to the current KB's chunks when evaluated
    (`eval.gold_map.resolve_case`), so it survives re-chunking. Chunk granularity only."""

    @property
    def relevant_ids(self) -> list[str]:
        """Gold ids with grade > 0, in the stored order."""
        return [gold_id for gold_id, grade in self.gold.items() if grade > 0]

    @property
    def has_gold(self) -> bool:
        """True when at least one id is relevant; cases without gold score refusal accuracy instead."""
        return any(grade > 0 for grade in self.gold.values()) or any(r.grade > 0 for r in self.gold_refs)


def cases_to_qrels(cases: Iterable[EvalCase]) -> dict[str, dict[str, int]]:
    """`{case_id: {gold id: grade}}` for the ranking metrics; cases without judgements map to `{}`."""
    return {case.case_id: dict(case.gold) for case in cases}


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {quoted(close[0])}?)" if close else ""


def grades_from_mapping(value: Mapping[object, object]) -> dict[str, int]:
    """Coerce `{id: grade}` with integer-valued grades; raise ValueError naming the bad entry."""
    grades: dict[str, int] = {}
    for gold_id, grade in value.items():
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or int(grade) != grade:
            raise ValueError(f"grade of {quoted(gold_id)} must be an integer, got {quoted(grade)}")
        grades[str(gold_id)] = int(grade)
    return grades
