"""The rerank stage: a cross-encoder probability combined linearly with business features and RRF.

score = w_ce · p_ce + w_rrf · rrf + w_title · title_hit + w_fresh · freshness
        + w_pl · product_line + w_key · key_terms + w_bm25 · bm25_score + w_dense · dense_score
(`bm25_score`, `dense_score`: the chunk's min-max normalised route scores, `route_scores`.)
Without a cross-encoder (`backend = "none"`) the p_ce term is absent and the trace says
`features-only`. The business features are pure functions, each in [0, 1]; their formulas, units
and settings are documented in docs/settings.md#rerank-features. The cross-encoder scorers live in
`rerank_backends.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ragtriage.config.settings import RerankSettings
from ragtriage.errors import PipelineError
from ragtriage.index.analyzer import terms as analyzer_terms
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline import rerank_backends
from ragtriage.pipeline.fusion import normalize_scores
from ragtriage.pipeline.normalize import normalize_text
from ragtriage.pipeline.types import CrossEncoderScorer, RerankPair
from ragtriage.wording import quoted

FEATURES_ONLY = "features-only"
_SUM_ORDER = ("rrf", "title_hit", "freshness", "product_line", "key_terms", "bm25_score", "dense_score")
FEATURE_NAMES = ("title_hit", "freshness", "product_line", "key_terms", "rrf", "bm25_score", "dense_score")


def title_hit(keywords: Sequence[str], title: str | None) -> float:
    """Share of the query keywords found in the chunk title (case-insensitive); 0 without keywords."""
    if not keywords or not title:
        return 0.0
    folded_title = normalize_text(title).lower()
    return sum(1 for k in keywords if k.lower() in folded_title) / len(keywords)


def title_token_share(query_terms: Sequence[str], title: str | None) -> float:
    """Share of the query's distinct terms that are among the title's BM25 terms (`analyzer.terms`:
    NFKC, lower-case, jieba search mode), `|set(q) ∩ set(t)| ÷ |set(q)|` in [0, 1]; 0 without
    terms or title (`[rerank] title_match = "tokens"`)."""
    words = set(query_terms)
    if not words or not title:
        return 0.0
    return len(words & set(analyzer_terms(title))) / len(words)


def freshness(updated_at: str | datetime | None, now: datetime, half_life_days: float) -> float:
    """Exponential decay 0.5 ** (age_days / half_life_days); 1.0 for today or a future date, 0 if unknown."""
    if updated_at is None:
        return 0.0
    if isinstance(updated_at, str):
        try:
            moment = datetime.fromisoformat(updated_at.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
    else:
        moment = updated_at
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    age_days = max(0.0, (now - moment).total_seconds() / 86_400)
    return float(0.5 ** (age_days / half_life_days))


def product_line_match(request_product_line: str | None, chunk_product_line: str | None) -> float:
    """1 when the request's and the chunk's product lines are both set and equal (case-insensitive)."""
    if not request_product_line or not chunk_product_line:
        return 0.0
    return float(request_product_line.strip().lower() == chunk_product_line.strip().lower())


def key_term_hit(query: str, content: str, key_terms: Sequence[str]) -> float:
    """Share of the configured key terms present in the query that the chunk contains verbatim."""
    folded_query = normalize_text(query).lower()
    in_query = [t for t in key_terms if t and normalize_text(t).lower() in folded_query]
    if not in_query:
        return 0.0
    folded_content = normalize_text(content).lower()
    return sum(1 for t in in_query if normalize_text(t).lower() in folded_content) / len(in_query)


def route_scores(
    routes: Iterable[tuple[str, Sequence[tuple[str, float]]]],
) -> dict[str, dict[str, float]]:
    """Per chunk, its best min-max normalised route score per route kind: `{chunk_id: {"bm25_score":
    x, "dense_score": y}}` from `(kind, [(chunk_id, score), …])` lists, kind `bm25` or `dense`.

    Each list is rescaled on its own, (s − min) / (max − min) (1.0 when its scores are all equal,
    `fusion.normalize_scores`), so a BM25 score and a cosine become comparable in [0, 1]; a chunk
    found by several routes of one kind keeps the best. A kind that did not find the chunk is absent
    (the feature is then 0). Unlike RRF, this keeps how far ahead of the rest a route put a chunk.
    """
    best: dict[str, dict[str, float]] = {}
    for kind, hits in routes:
        name = f"{kind}_score"
        for (chunk_id, _), value in zip(hits, normalize_scores([s for _, s in hits], "min-max"), strict=True):
            slot = best.setdefault(chunk_id, {})
            slot[name] = max(slot.get(name, 0.0), value)
    return best


@dataclass(frozen=True)
class RerankItem:
    """One fused candidate handed to the reranker."""

    chunk_id: str
    rrf_score: float
    title: str | None = None
    content: str = ""
    updated_at: str | None = None
    product_line: str | None = None
    bm25_score: float = 0.0
    """Best min-max normalised score among the BM25 routes that found the chunk (0: none did)."""
    dense_score: float = 0.0
    """Best min-max normalised cosine among the dense routes that found the chunk (0: none did)."""


@dataclass
class RerankOutcome:
    """Reranked order, per-pair detail and what ran."""

    reranked: list[ScoredChunk]
    pairs: list[RerankPair]
    mode: str
    truncated_pairs: int = 0
    notes: list[str] = field(default_factory=list)


class Reranker:
    """Scores fused candidates with an optional cross-encoder plus business features."""

    def __init__(
        self,
        settings: RerankSettings,
        scorer: CrossEncoderScorer | None = None,
        *,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.scorer = scorer
        self._now = now or _clock(settings.freshness_now)
        self._fixed_clock = settings.freshness_now is not None
        """The profile fixes the moment freshness is computed at: it wins over a per-call `now`."""

    @property
    def mode(self) -> str:
        """`features-only`, or the scorer's name (e.g. `flagembedding:BAAI/bge-reranker-base`)."""
        return self.scorer.name if self.scorer is not None else FEATURES_ONLY

    def feature_values(
        self, query: str, keywords: Sequence[str], item: RerankItem, now: datetime
    ) -> dict[str, float]:
        """The business features of one candidate (plus its RRF score). `keywords` are the query's
        words `title_hit` looks for: the rewrite's keywords, or with `[rerank] title_match =
        "tokens"` the query's BM25 terms."""
        hit = (
            title_token_share(keywords, item.title)
            if self.settings.title_match == "tokens"
            else title_hit(keywords, item.title)
        )
        return {
            "title_hit": hit,
            "freshness": freshness(item.updated_at, now, self.settings.freshness_half_life_days),
            "product_line": product_line_match(self.settings.product_line, item.product_line),
            "key_terms": key_term_hit(query, item.content, self.settings.key_terms),
            "rrf": item.rrf_score,
            "bm25_score": item.bm25_score,
            "dense_score": item.dense_score,
        }

    def rerank(
        self,
        query: str,
        keywords: Sequence[str],
        items: Sequence[RerankItem],
        *,
        now: datetime | None = None,
    ) -> RerankOutcome:
        """Score and sort `items`; equal scores keep the fused order. Freshness is computed at
        `[rerank] freshness_now` when the settings fix it, else at `now` (a logged request's time),
        else at the clock's now."""
        weights = self.settings.weights
        if now is None or self._fixed_clock:
            now = self._now()
        probabilities: list[float | None] = [None] * len(items)
        truncated = [False] * len(items)
        notes = list(getattr(self.scorer, "notes", []) or [])
        if self.scorer is not None and items:
            scores, truncated = self.scorer.score(query, [item.content for item in items])
            if len(scores) != len(items) or len(truncated) != len(items):
                raise PipelineError(
                    f"reranker {self.scorer.name} returned {len(scores)} scores for {len(items)} pairs"
                )
            probabilities = list(scores)
        pairs = []
        for item, probability, was_cut in zip(items, probabilities, truncated, strict=True):
            values = self.feature_values(query, keywords, item, now)
            # Summed in this fixed order (rrf first), so scores stay bit-identical to logged runs.
            score = sum(getattr(weights, name) * values[name] for name in _SUM_ORDER)
            if probability is not None:
                score += weights.cross_encoder * probability
            pairs.append(
                RerankPair(
                    chunk_id=item.chunk_id,
                    cross_encoder_score=probability,
                    features=values,
                    score=score,
                    truncated=bool(was_cut),
                )
            )
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i].score)
        reranked = [
            ScoredChunk(chunk_id=pairs[i].chunk_id, rank=r, score=pairs[i].score)
            for r, i in enumerate(order, 1)
        ]
        return RerankOutcome(
            reranked=reranked,
            pairs=pairs,
            mode=self.mode,
            truncated_pairs=sum(1 for p in pairs if p.truncated),
            notes=notes,
        )

    def final(self, reranked: Sequence[ScoredChunk], top_n: int) -> list[str]:
        """The final context: the first `top_n`; with `min_score`, those below it go, keeping at least `min_n`."""
        kept = list(reranked[:top_n])
        if self.settings.min_score is not None:
            floor = self.settings.min_n or 0
            kept = [c for i, c in enumerate(kept) if i < floor or c.score >= self.settings.min_score]
        return [c.chunk_id for c in kept]


def _clock(freshness_now: str | None) -> Callable[[], datetime]:
    """The current time, or the fixed moment `[rerank] freshness_now` names (a replay of past traffic)."""
    if freshness_now is None:
        return lambda: datetime.now(timezone.utc)
    try:
        fixed = datetime.fromisoformat(freshness_now.replace("Z", "+00:00"))
    except ValueError:
        raise PipelineError(
            f"[rerank] freshness_now = {quoted(freshness_now)} is not an ISO-8601 time; "
            'write it like "2026-11-02T08:00:00Z"'
        ) from None
    fixed = fixed if fixed.tzinfo else fixed.replace(tzinfo=timezone.utc)
    return lambda: fixed


def build_scorer(settings: RerankSettings) -> CrossEncoderScorer | None:
    """The cross-encoder scorer the settings name (None for `backend = "none"`)."""
    if settings.backend == "none":
        return None
    if settings.backend == "http":
        if not settings.url:
            raise PipelineError('[rerank] backend = "http" needs [rerank] url (the service\'s base URL)')
        return rerank_backends.HTTPRerankScorer(
            settings.url,
            model=settings.model,
            max_length=settings.max_length,
            timeout_s=settings.timeout_s,
            api_key_env=settings.api_key_env,
            scores=settings.http_scores,
        )
    if not settings.model:
        raise PipelineError(
            f'[rerank] backend = "{settings.backend}" needs [rerank] model (a name or local path)'
        )
    cls = (
        rerank_backends.FlagRerankerScorer
        if settings.backend == "flagembedding"
        else rerank_backends.SentenceTransformersScorer
    )
    return cls(
        settings.model,
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        device=settings.device,
        use_fp16=settings.use_fp16,
    )
