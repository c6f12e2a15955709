"""Settings sections for reading request logs: which requests are flagged, how trace formats
(OTLP/OpenInference, Phoenix, Langfuse) map onto a request, and ingest batches.

Imported by `config.py` (which re-exports them as `[logs]`, `[logs.flagging]` and `[logs.otel]`).
"""

from __future__ import annotations

from pydantic import Field

from ragtriage.config_base import StrictModel


class FlaggingSettings(StrictModel):
    bad_ratings: list[str] = Field(default_factory=lambda: ["down", "thumbs_down", "bad", "-1", "1", "2"])
    """Feedback ratings that flag a request."""
    escalation: bool = True
    follow_up_minutes: float = Field(default=5.0, ge=0)
    """A follow-up from the same session within this many minutes flags the earlier request."""
    empty_citations: bool = True
    refusal_markers: list[str] = Field(
        default_factory=lambda: ["无法回答", "没有找到", "抱歉", "不确定", "I don't know", "cannot answer"]
    )
    """Answer substrings that mark a refusal or low-confidence answer."""
    min_confidence: float | None = None
    """Flag answers whose logged top-level `confidence` is below this (None: rule off)."""
    follow_up_marker: bool = True
    """Also flag requests the producer itself marked with `feedback.follow_up`."""


class OtelSettings(StrictModel):
    """How OpenTelemetry/OpenInference spans (OTLP, Phoenix) and Langfuse observations map onto a
    request. An attribute *source* is `metadata.KEY` (a key inside the root span's `metadata`
    JSON), `resource.KEY` (a resource attribute), `tag:PREFIX` (the rest of the first `tag.tags`
    entry that starts with PREFIX) or an attribute name of the root span."""

    routes: dict[str, list[str]] = Field(default_factory=dict)
    """Route name → retriever span names (case-insensitive; a name matches when the span name
    equals it or contains it), e.g. `bm25 = ["bm25", "BM25Retriever"]`. A route whose name
    contains a `lexical_keywords` entry is lexical, else dense. Unmatched retriever spans are
    routes named `bm25` (lexical, see `lexical_keywords`) or `dense`, numbered from the second."""
    lexical_keywords: list[str] = Field(
        default_factory=lambda: ["bm25", "keyword", "fulltext", "sparse", "lexical"]
    )
    """A retriever span whose name contains one of these (case-insensitive) is a lexical route."""
    request_id_from: list[str] = Field(default_factory=lambda: ["metadata.request_id"])
    """Sources of the request id, first found wins; the trace id when none is there."""
    pipeline_version_from: list[str] = Field(
        default_factory=lambda: ["metadata.pipeline_version", "resource.service.version"]
    )
    """Sources of `pipeline_version`, first found wins."""
    document_id_keys: list[str] = Field(default_factory=lambda: ["chunk_id"])
    """Keys inside `document.metadata` that hold the chunk id when a document has no
    `document.id` (LangChain emits none); tried in order."""
    feedback_names: list[str] = Field(default_factory=lambda: ["feedback", "thumb", "rating"])
    """An annotation, evaluation or score whose name contains one of these is user feedback."""
    bad_labels: list[str] = Field(default_factory=lambda: ["thumbs_down", "bad", "negative", "down"])
    """Feedback labels (case-insensitive) that make the feedback bad."""
    bad_score_at_most: float | None = 0.0
    """Feedback with no label is bad when its score is at most this (0 on a 0–1 scale); None: never."""
    escalation_names: list[str] = Field(default_factory=lambda: ["escalat"])
    """An annotation or score whose name contains one of these, with a true value or a score
    above 0, marks the request as escalated to a human."""
    rewrite_spans: list[str] = Field(default_factory=lambda: ["rewrite"])
    """Spans whose name contains one of these are the rewrite stage: their `output.value` is the
    rewritten query."""
    final_context: str = "reranker"
    """`reranker`: the reranker's output documents cut at `reranker.top_k`; `metadata.KEY`: a
    list of chunk ids in the root metadata; any other value: the name of the span whose output
    (or retrieved) documents are the final context."""
    stage_names: dict[str, list[str]] = Field(default_factory=lambda: {"reranked": ["rerank"]})
    """Langfuse: stage → observation names for observations without a telling type, e.g.
    `reranked = ["rerank"]` (Langfuse has no RERANKER type); stages are `reranked` and `route`."""


class LogsSettings(StrictModel):
    flagging: FlaggingSettings = Field(default_factory=FlaggingSettings)
    otel: OtelSettings = Field(default_factory=OtelSettings)
    """Trace formats: OTLP/OpenInference, Phoenix and Langfuse mapping (`[logs.otel]`)."""
    batch_size: int = Field(default=10_000, gt=0)
    """Lines per ingest transaction. Larger is faster on a big store (each commit rewrites the
    index pages the random request ids touched) but holds more in memory (a worker process keeps
    one batch, about 2.5 KB per logged KB) and makes a triager's write wait longer (10,000 lines
    take about a third of a second)."""
