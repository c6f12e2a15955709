"""Metric names: parse `ndcg@10` into a `MetricSpec` and back; unknown names get a "did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragtriage.wording import quoted

#: Canonical metric names and whether they need a cutoff (`p@5`) or may have one (`mrr`, `mrr@10`).
METRIC_NAMES: dict[str, str] = {
    "p": "required",
    "recall": "required",
    "hit": "required",
    "ndcg": "required",
    "coverage": "required",
    "mrr": "optional",
}

#: Other spellings people use, mapped to the canonical name (trec_eval, ranx, ir_measures).
ALIASES: dict[str, str] = {
    "precision": "p",
    "r": "recall",
    "success": "hit",
    "hits": "hit",
    "hit_rate": "hit",
    "ndcg_cut": "ndcg",
    "recip_rank": "mrr",
    "rr": "mrr",
    "cov": "coverage",
}

#: Metrics that need the candidate pool before rerank, not just a final ranking.
CANDIDATE_METRICS = frozenset({"coverage"})

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20)


@dataclass(frozen=True, order=True)
class MetricSpec:
    """One metric with its cutoff: `MetricSpec("ndcg", 10)` is `ndcg@10`; `MetricSpec("mrr")` is uncut MRR."""

    name: str
    k: int | None = None

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def label(self) -> str:
        """The canonical string, e.g. `recall@10` (the key in every metrics dict)."""
        return str(self)

    @property
    def needs_candidates(self) -> bool:
        """True for metrics computed on the pre-rerank candidate list (coverage@N)."""
        return self.name in CANDIDATE_METRICS


def parse_metric(text: str) -> MetricSpec:
    """Parse one metric name such as `p@5`, `Recall@10`, `hit@5`, `mrr`, `mrr@10`, `ndcg@10`, `coverage@30`.

    Raises:
        ValueError: unknown name (with the nearest known one), missing or bad cutoff.
    """
    raw = text.strip()
    cleaned = raw.lower().replace(" ", "")
    if "@" in cleaned:
        base, _, cutoff = cleaned.partition("@")
    elif "_" in cleaned and cleaned.rsplit("_", 1)[1].isdigit():
        base, _, cutoff = cleaned.rpartition("_")  # trec_eval style: P_5, ndcg_cut_10
    else:
        base, cutoff = cleaned, ""
    name = ALIASES.get(base, base)
    if name not in METRIC_NAMES:
        raise ValueError(_unknown_message(raw, base))
    if cutoff == "":
        if "@" in cleaned:
            raise ValueError(f"metric {quoted(raw)} has an empty cutoff; write e.g. {name}@10")
        if METRIC_NAMES[name] == "required":
            raise ValueError(f"metric {quoted(raw)} needs a cutoff; write e.g. {name}@10")
        return MetricSpec(name)
    if not cutoff.isdigit() or int(cutoff) < 1:
        raise ValueError(f"metric {quoted(raw)}: the cutoff must be a positive integer, e.g. {name}@10")
    return MetricSpec(name, int(cutoff))


def _unknown_message(raw: str, base: str) -> str:
    names = sorted(set(METRIC_NAMES) | set(ALIASES))
    close = difflib.get_close_matches(base, names, n=1, cutoff=0.5)
    hint = ""
    if close:
        suggested = ALIASES.get(close[0], close[0])
        suffix = raw[raw.index("@") :] if "@" in raw else ("" if suggested == "mrr" else "@10")
        hint = f"; did you mean {suggested}{suffix}?"
    return f"unknown metric {quoted(raw)}{hint} Known: p@K, recall@K, hit@K, ndcg@K, mrr, mrr@K, coverage@N"


def parse_metrics(texts: Iterable[str]) -> list[MetricSpec]:
    """Parse names given one per item or comma-separated; keeps the first-given order, drops repeats."""
    specs: list[MetricSpec] = []
    for text in texts:
        for part in text.split(","):
            if part.strip():
                spec = parse_metric(part)
                if spec not in specs:
                    specs.append(spec)
    return specs


def parse_ks(text: str) -> list[int]:
    """Parse a cutoff list such as `1,3,5,10,20`.

    Raises:
        ValueError: a part that is not a positive integer.
    """
    ks: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"cutoff {quoted(part)} is not a positive integer; write e.g. --ks 1,3,5,10,20")
        if int(part) not in ks:
            ks.append(int(part))
    if not ks:
        raise ValueError("no cutoffs given; write e.g. --ks 1,3,5,10,20")
    return ks


def default_specs(ks: Sequence[int] = DEFAULT_KS, *, coverage_n: int | None = None) -> list[MetricSpec]:
    """The standard set: p, recall, hit and ndcg at every K, MRR, and coverage@N when N is given."""
    specs = [MetricSpec(name, k) for name in ("p", "recall", "hit", "ndcg") for k in ks]
    specs.append(MetricSpec("mrr"))
    if coverage_n is not None:
        specs.append(MetricSpec("coverage", coverage_n))
    return specs


#: Stands for the run's own coverage@N in lists of headline metrics (N is the pool that run used).
COVERAGE = "coverage"


def headline_labels(names: Iterable[str], present: Iterable[str]) -> list[str]:
    """`names` with `COVERAGE` replaced by the coverage@N labels among `present` (a run's metric
    names), since N is the candidate pool of that run; left out when the run has none."""
    coverage = [label for label in present if label.startswith(f"{COVERAGE}@")]
    return [label for name in names for label in (coverage if name == COVERAGE else [name])]
