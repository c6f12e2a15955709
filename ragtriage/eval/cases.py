"""`EvalCase`: the neutral form every eval-set file format is read into and written from."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EvalCase", "Granularity", "cases_to_qrels", "did_you_mean"]

Granularity = Literal["chunk", "doc"]


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

    @property
    def relevant_ids(self) -> list[str]:
        """Gold ids with grade > 0, in the stored order."""
        return [gold_id for gold_id, grade in self.gold.items() if grade > 0]

    @property
    def has_gold(self) -> bool:
        """True when at least one id is relevant; cases without gold score refusal accuracy instead."""
        return any(grade > 0 for grade in self.gold.values())


def cases_to_qrels(cases: Iterable[EvalCase]) -> dict[str, dict[str, int]]:
    """`{case_id: {gold id: grade}}` for the ranking metrics; cases without judgements map to `{}`."""
    return {case.case_id: dict(case.gold) for case in cases}


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def grades_from_mapping(value: Mapping[object, object]) -> dict[str, int]:
    """Coerce `{id: grade}` with integer-valued grades; raise ValueError naming the bad entry."""
    grades: dict[str, int] = {}
    for gold_id, grade in value.items():
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or int(grade) != grade:
            raise ValueError(f"grade of {gold_id!r} must be an integer, got {grade!r}")
        grades[str(gold_id)] = int(grade)
    return grades
