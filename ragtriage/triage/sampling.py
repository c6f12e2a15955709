"""Sampled review: a stratified random sample of unflagged requests, put in the queue as `sampled`.

Complaints show what went wrong for people who complain; a weekly random sample of everything else
keeps the eval set close to the real query distribution. Each stratum (a day, or a
`pipeline_version`) gets a share of the sample proportional to its size (largest remainder, so
the shares add up to `n`), drawn uniformly without replacement with a seeded generator. A drawn
request gets a triage record (status `new`, reason `sampled`), so it is no longer unflagged and a
second draw never repeats it.
"""

from __future__ import annotations

import random
import secrets
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.errors import InputError
from ragtriage.store import triage_repo
from ragtriage.store.triage_repo import UNKNOWN_STRATUM, StratifyBy
from ragtriage.wording import quoted

__all__ = [
    "SAMPLED_REASON",
    "SAMPLE_USER",
    "UNKNOWN_STRATUM",
    "SampleReport",
    "SampleStratum",
    "allocate",
    "sample_requests",
]

#: Flag reason of a request drawn by `queue sample` (the queue filters on it: `--reason sampled`).
SAMPLED_REASON = "sampled"
#: Who the audit trail names for a sampled record.
SAMPLE_USER = "sample"


class SampleStratum(BaseModel):
    """One stratum: how many unflagged requests it had and how many were drawn."""

    stratum: str
    population: int
    drawn: int


class SampleReport(BaseModel):
    """What one draw did. `drawn` adds up over the strata; `population` is the unflagged requests."""

    seed: int
    """The seed used (give it again with the same store state to get the same draw)."""
    by: StratifyBy
    since: datetime | None
    requested: int
    population: int
    drawn: int
    strata: list[SampleStratum] = Field(default_factory=list)
    request_ids: list[str] = Field(default_factory=list)


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of `n` draws over strata of `sizes` (Hamilton's largest remainder).

    Each stratum gets floor(n·size/total) plus one for the largest remainders until the total is
    min(n, sum of sizes); ties go to the larger stratum, then the stratum name. Never more than a
    stratum's size.
    """
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quotas = {name: n * size / total for name, size in sizes.items()}
    shares = {name: int(quota) for name, quota in quotas.items()}
    left = n - sum(shares.values())
    order = sorted(sizes, key=lambda name: (-(quotas[name] - shares[name]), -sizes[name], name))
    for name in order[:left]:
        shares[name] += 1
    return shares


def sample_requests(
    engine: Engine,
    n: int,
    *,
    since: datetime | None = None,
    by: StratifyBy = "day",
    seed: int | None = None,
) -> SampleReport:
    """Draw up to `n` unflagged requests (time ≥ `since`), stratified `by` day or pipeline_version,
    and put them in the queue with reason `sampled` in one transaction (with audit rows).

    Raises:
        InputError: `n` below 1, or an unknown `by`.
    """
    if n < 1:
        raise InputError(f"--n must be at least 1, got {n}")
    if by not in ("day", "version"):
        raise InputError(f"--by {quoted(by)}: use day or version")
    seed = secrets.randbelow(2**31) if seed is None else seed
    strata = triage_repo.unflagged_requests(engine, since, by)
    shares = allocate({name: len(ids) for name, ids in strata.items()}, n)
    drawn: list[str] = []
    rows: list[SampleStratum] = []
    for name in sorted(strata):
        ids = sorted(strata[name])
        # One generator per stratum: adding a stratum does not change what another one draws.
        picked = random.Random(f"{seed}:{name}").sample(ids, shares[name])
        drawn.extend(picked)
        rows.append(SampleStratum(stratum=name, population=len(ids), drawn=len(picked)))
    triage_repo.flag_requests(engine, drawn, SAMPLED_REASON, SAMPLE_USER, {"seed": seed})
    return SampleReport(
        seed=seed,
        by=by,
        since=since,
        requested=n,
        population=sum(len(ids) for ids in strata.values()),
        drawn=len(drawn),
        strata=rows,
        request_ids=drawn,
    )
