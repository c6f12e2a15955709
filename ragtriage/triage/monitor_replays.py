"""Rewrite gain for `ragtriage monitor`: what rewriting buys, measured where replays exist.

A pair of complete eval runs on the same dataset version that differ only in rewriting: the
`eval ablate` runs `ablate:E` (raw + rewritten routes) and `ablate:C` (raw routes only), or a run
with `rewrite_mode = "off"` and a run with the same config hash and options otherwise. The gain is
the difference of their mean recall@10 (else recall@5, else MRR), the later run's finish day being
the group. Logged requests carry no replay with rewriting switched off, so this is the only
honest source.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from ragtriage.store import eval_repo as eval_store
from ragtriage.store import monitor_sql as sql
from ragtriage.store.eval_tables import EvalRunRow

if TYPE_CHECKING:
    from ragtriage.triage.monitor import Figure

GAIN_METRICS = ("recall@10", "recall@5", "mrr")


def _finished(run: EvalRunRow) -> datetime | None:
    moment = run.finished_at
    if moment is None:
        return None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _pairs(runs: list[EvalRunRow]) -> list[tuple[EvalRunRow, EvalRunRow]]:
    """(with rewriting, without) pairs, newest first; each run in at most one pair."""
    complete = [r for r in runs if r.status == "complete"]
    pairs: list[tuple[EvalRunRow, EvalRunRow]] = []
    by_version: dict[tuple[str, int], dict[str, EvalRunRow]] = defaultdict(dict)
    for run in complete:  # newest first: the first run of a name per version wins
        if run.name in ("ablate:C", "ablate:E"):
            by_version[(run.dataset, run.dataset_version)].setdefault(run.name, run)
    for found in by_version.values():
        if "ablate:C" in found and "ablate:E" in found:
            pairs.append((found["ablate:E"], found["ablate:C"]))
    for off in complete:
        options: dict[str, Any] = dict(off.run_options or {})
        if options.pop("rewrite_mode", None) != "off":
            continue
        for on in complete:
            if (
                on.id != off.id
                and on.dataset == off.dataset
                and on.dataset_version == off.dataset_version
                and on.config_hash == off.config_hash
                and dict(on.run_options or {}) == options
            ):
                pairs.append((on, off))
                break
    return pairs


def rewrite_gains(
    engine: Engine, by: sql.GroupBy, since: datetime | None, until: datetime
) -> dict[str, Figure]:
    """Group key (a day; by version only `all`) → mean gain over the pairs finished in the window."""
    from ragtriage.triage.monitor import Figure

    gains: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for with_rewrite, without in _pairs(eval_store.list_runs(engine)):
        finished = max(filter(None, (_finished(with_rewrite), _finished(without))), default=None)
        if finished is None or finished >= until or (since is not None and finished < since):
            continue
        on = (with_rewrite.aggregates or {}).get("means", {})
        off = (without.aggregates or {}).get("means", {})
        metric = next((m for m in GAIN_METRICS if on.get(m) is not None and off.get(m) is not None), None)
        if metric is None:
            continue
        entry = (float(on[metric]) - float(off[metric]), metric, f"{with_rewrite.id}-{without.id}")
        if by == "day":
            gains[finished.date().isoformat()].append(entry)
        gains["all"].append(entry)
    return {
        key: Figure(
            value=sum(g for g, _, _ in entries) / len(entries),
            count=len(entries),
            total=len(entries),
            detail={"metric": entries[0][1], "run_pairs": [pair for _, _, pair in entries]},
        )
        for key, entries in gains.items()
    }
