"""Why a replayed stage differs from the logged one: the documented reasons of a fidelity miss (pure).

`explain_request` gives every stage that `logs.fidelity` measured as different a reason when one is
known: a stale index, a different rewrite, a k that differs, a stage upstream that already
differed, or a further production route such as `dense_2` the profile has no counterpart for. A
miss without one is a fidelity bug (`RequestFidelity.unexplained`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, get_args

from ragtriage.config.settings import RouteName
from ragtriage.replay.fidelity import (
    DOCUMENTED_KINDS,
    STAGE_SHORT,
    MissReason,
    RequestFidelity,
    StageFidelity,
)
from ragtriage.replay.logged import STAGE_ROUTES

if TYPE_CHECKING:
    from ragtriage.config.settings import RetrievalSettings

__all__ = ["UPSTREAM", "counterpart_text", "explain_request", "stage_limits"]

#: Stages whose replayed list is computed from each stage's list (a miss there explains one here).
UPSTREAM: dict[str, tuple[str, ...]] = {
    "bm25": (),
    "dense": (),
    "fused": ("bm25", "dense"),
    "reranked": ("fused", "bm25", "dense"),
    "final_context": ("reranked", "fused", "bm25", "dense"),
}


def counterpart_text(routes: Collection[str]) -> str:
    """`production route dense_2 has no counterpart in the replay profile: its chunks are expected to
    be missing from the replay`."""
    names = ", ".join(sorted(routes))
    noun, verb, its = ("route", "has", "its") if len(routes) == 1 else ("routes", "have", "their")
    return (
        f"production {noun} {names} {verb} no counterpart in the replay profile: {its} chunks are "
        "expected to be missing from the replay"
    )


def _stale_text(docs: Sequence[str], own: bool, version: str | None) -> str:
    names = ", ".join(docs)
    noun = "document" if len(docs) == 1 else "documents"
    verb = "has" if len(docs) == 1 else "have"
    where = "" if own else f" (seen in other requests of {version or 'this run'})"
    return f"served by a stale index: {noun} {names} {verb} changed since{where}"


def explain_request(
    fidelity: RequestFidelity,
    *,
    replayed_docs: Mapping[str, str | None],
    stale_docs_of_version: Collection[str],
    logged_scores: Mapping[str, Mapping[str, float]] | None = None,
    replayed_scores: Mapping[str, Mapping[str, float]] | None = None,
    replayed_limits: Mapping[str, int] | None = None,
) -> RequestFidelity:
    """Give every stage that differs a reason when one is known (in place; returns `fidelity`).

    - `stale_index`: the stage's lists name chunks of a document that changed since production
      indexed it (its logged ids are old versions, or the replay finds the new ones); or, for BM25,
      the same chunks score differently while the index that served the version was stale (BM25
      scores depend on corpus-wide statistics);
    - `upstream`: a stage it is computed from already differed for a documented reason;
    - `rewrite`: the replayed rewrite is not the logged one (the profile does not reproduce it);
    - `k_differs`: same chunks, but the replay keeps another number of them (the profile's k),
      or the profile runs no route of a logged route's kind. A replayed list shorter than both the
      logged one and its limit in `replayed_limits` (`stage_limits`) was not cut by the profile:
      the replay ran out of matches, which no k explains.

    `replayed_docs` maps replayed chunk ids to their document; `*_scores` map stage → chunk → score.
    """
    own_stale = set(fidelity.stale_documents)
    stale = own_stale | set(stale_docs_of_version)
    by_stage = {s.stage: s for s in fidelity.stages}
    for stage in fidelity.stages:
        if stage.exact:
            continue
        ids = [*stage.lost, *stage.gained, *stage.unknown]
        touched = sorted({d for c in ids if (d := _doc_of(c, fidelity, replayed_docs)) in stale})
        # A logged id no document can be named for is not explained by another document's change.
        foreign = [c for c in stage.lost if c in fidelity.unknown_ids]
        if touched and not foreign:
            own = bool(own_stale.intersection(touched))
            stage.reason = MissReason(
                kind="stale_index", text=_stale_text(touched, own, fidelity.pipeline_version)
            )
            continue
        upstream = next(
            (
                by_stage[u]
                for u in UPSTREAM[stage.stage]
                if u in by_stage
                and by_stage[u].reason is not None
                and by_stage[u].reason.kind in DOCUMENTED_KINDS  # type: ignore[union-attr]
            ),
            None,
        )
        if upstream is not None and upstream.reason is not None:
            # Name the first stage that differed, not the chain between.
            text = upstream.reason.text
            if upstream.reason.kind != "upstream":
                text = f"follows from {STAGE_SHORT[upstream.stage]}: {text}"
            stage.reason = MissReason(kind="upstream", text=text)
            continue
        if stage.expected_lost and not stage.lost:
            # Every logged chunk the replay lacks came from a route the profile cannot express; the
            # chunks that filled their places and the ranks that moved follow from that.
            stage.reason = MissReason(
                kind="route_without_counterpart", text=counterpart_text(stage.expected_lost)
            )
            continue
        if stage.stage == "bm25" and stale and _scores_differ(stage, logged_scores, replayed_scores):
            stage.reason = MissReason(
                kind="stale_index",
                text=(
                    f"{_stale_text(sorted(stale), bool(own_stale), fidelity.pipeline_version)}: "
                    "the same chunks score differently because BM25 statistics are corpus-wide"
                ),
            )
            continue
        # Fused and later stages fuse the rewritten routes; a logged route may be a rewritten one.
        on_rewrite = stage.stage not in STAGE_ROUTES or not (stage.route or "").endswith("_raw")
        if fidelity.rewrite_differs is not None and on_rewrite:
            stage.reason = MissReason(
                kind="rewrite", text=f"the replayed rewrite differs: {fidelity.rewrite_differs}"
            )
            continue
        if stage.stage in STAGE_ROUTES and stage.route is None:
            # The replay ran no route of this kind at all (e.g. a dense-only profile).
            stage.reason = MissReason(
                kind="k_differs",
                text=f"the profile runs no {stage.stage} route where production logged {stage.k}",
            )
            continue
        limit = _limit_of(stage, replayed_limits or {})
        if (
            stage.replayed_count != stage.k
            and stage.overlap == min(stage.k, stage.replayed_count)
            and not stage.moved
            and (limit is None or stage.replayed_count >= min(stage.k, limit))
        ):
            # One list is the other cut shorter: the profile keeps another number of chunks.
            stage.reason = MissReason(
                kind="k_differs",
                text=f"the profile keeps {stage.replayed_count} where production kept {stage.k}",
            )
    return fidelity


def stage_limits(retrieval: RetrievalSettings) -> dict[str, int]:
    """The most chunks a replay with these settings keeps where a logged list is compared: each
    route's k by route name (`[retrieval] route_k`, else `bm25_k` / `dense_k`) and `fused` (the
    candidate pool)."""
    limits = {
        route: retrieval.route_k.get(route)
        or (retrieval.bm25_k if route.startswith("bm25") else retrieval.dense_k)
        for route in get_args(RouteName)
    }
    limits["fused"] = retrieval.candidate_pool
    return limits


def _limit_of(stage: StageFidelity, limits: Mapping[str, int]) -> int | None:
    if stage.stage in STAGE_ROUTES:
        route = stage.route or ""
        return limits.get("dense_sub" if route.startswith("dense_sub") else route)
    return limits.get(stage.stage)


def _doc_of(chunk_id: str, fidelity: RequestFidelity, replayed_docs: Mapping[str, str | None]) -> str | None:
    for doc_id, ids in fidelity.stale_documents.items():
        if chunk_id in ids:
            return doc_id
    return replayed_docs.get(chunk_id)


def _scores_differ(
    stage: StageFidelity,
    logged_scores: Mapping[str, Mapping[str, float]] | None,
    replayed_scores: Mapping[str, Mapping[str, float]] | None,
) -> bool:
    """True when a chunk in both lists has a logged score and a different replayed one."""
    logged = (logged_scores or {}).get(stage.stage, {})
    replayed = (replayed_scores or {}).get(stage.stage, {})
    shared = [c for c in logged if c in replayed]
    return any(abs(logged[c] - replayed[c]) > 1e-4 * max(1.0, abs(logged[c])) for c in shared)
