"""BM25 knobs a replay profile may set (issue 25 item 2): k1 and b at Whoosh's search time, a title
weight of 0, query-side analysis per profile, and the bm25s refusal, on real indexes in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtriage.config.profiles import get_profile
from ragtriage.config.settings import Settings
from ragtriage.errors import ConfigError
from ragtriage.index.bm25 import BM25Document, WhooshIndex
from ragtriage.index.bm25_engine import BM25Query
from ragtriage.index.bm25s_index import BM25sIndex
from ragtriage.pipeline.factory import bm25_query


def doc(chunk_id: str, content: str, title: str = "") -> BM25Document:
    return BM25Document(chunk_id, "doc", title, content, f"h-{chunk_id}", f"h-{chunk_id}")


DOCS = [
    doc("once", "镜像 源 配置 说明 文字 很 长 的 一段 内容 其他 词语"),
    doc("thrice", "镜像 镜像 镜像 源"),
    doc("titled", "配置 内容 无关 说明", title="镜像"),
]


def _scores(hits: list) -> dict[str, float]:  # type: ignore[type-arg]
    return {h.chunk_id: round(h.score, 6) for h in hits}


def test_whoosh_takes_k1_and_b_at_search_time(tmp_path: Path) -> None:
    index = WhooshIndex(tmp_path / "whoosh", title_boost=0.0)
    index.apply(DOCS)
    default = _scores(index.search("镜像", 10)[0])
    assert default == _scores(index.with_query(index.query).search("镜像", 10)[0])
    assert default["thrice"] > default["once"]
    # k1 = 0: a term counts once however often it occurs, and b = 0: length does not matter, so
    # both chunks score the term's idf alone.
    flat = index.with_query(BM25Query(title_boost=0.0, k1=0.0, b=0.0)).search("镜像", 10)[0]
    assert _scores(flat)["thrice"] == pytest.approx(_scores(flat)["once"])
    # b alone: without length normalisation the long chunk is no longer pushed down.
    no_length = _scores(index.with_query(BM25Query(title_boost=0.0, b=0.0)).search("镜像", 10)[0])
    assert no_length["thrice"] - no_length["once"] < default["thrice"] - default["once"]


@pytest.mark.parametrize("engine", [WhooshIndex, BM25sIndex])
def test_a_title_weight_of_zero_searches_the_content_alone(tmp_path: Path, engine: type) -> None:  # type: ignore[type-arg]
    index = engine(tmp_path / "bm25", title_boost=1.0)
    index.apply(DOCS)
    assert "titled" in _scores(index.search("镜像", 10)[0])
    content_only = index.with_query(BM25Query(title_boost=0.0)).search("镜像", 10)[0]
    assert set(_scores(content_only)) == {"once", "thrice"}


def test_a_profile_overlays_the_query_time_index_keys_only() -> None:
    settings = Settings.model_validate(
        {
            "index": {"title_boost": 0.3},
            "profiles": {
                "prod": {
                    "index": {
                        "title_boost": 0,
                        "bm25_k1": 0.9,
                        "bm25_b": 0.4,
                        "query_segmentation": "search",
                        "query_stop_words": ["怎么", "ＡＰＰ"],
                    }
                }
            },
        }
    )
    query = bm25_query(get_profile(settings, "prod").settings)
    assert query == BM25Query(
        title_boost=0.0, segmentation="search", stop_words=frozenset({"怎么", "app"}), k1=0.9, b=0.4
    )
    assert bm25_query(settings).title_boost == 0.3  # the settings file itself is unchanged
    with pytest.raises(ValueError, match="index.bm25_engine cannot differ per profile"):
        Settings.model_validate({"profiles": {"p": {"index": {"bm25_engine": "bm25s"}}}})


def test_bm25s_refuses_k1_and_b_it_cannot_take() -> None:
    settings = Settings.model_validate(
        {"index": {"bm25_engine": "bm25s"}, "profiles": {"prod": {"index": {"bm25_k1": 0.9}}}}
    )
    with pytest.raises(ConfigError) as error:
        get_profile(settings, "prod")
    message = str(error.value)
    assert "[profiles.prod]" in message and "bm25s bakes k1 and b into the index it builds" in message
    assert 'bm25_engine = "whoosh"' in message and "{" not in message
    # Its own values are fine, and the title weight and query analysis stay free per profile.
    same = {"bm25_k1": 1.2, "bm25_b": 0.75, "title_boost": 0, "query_segmentation": "search"}
    ok = Settings.model_validate({"index": {"bm25_engine": "bm25s"}, "profiles": {"prod": {"index": same}}})
    assert get_profile(ok, "prod").settings.index.title_boost == 0


def test_each_profiles_pipeline_searches_with_its_own_bm25_settings(tmp_path: Path) -> None:
    from contextlib import closing

    from ragtriage.workspace import Workspace
    from tests.tiny_kb import add_tiny_kb

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "[profiles.titleless]\nindex = { title_boost = 0 }\n"
        '[profiles.saturated]\nindex = { bm25_k1 = 0.1, query_stop_words = ["红字"] }\n',
        encoding="utf-8",
    )
    with closing(Workspace.open(home, None)) as workspace:
        chunks = add_tiny_kb(workspace, tmp_path / "docs")

        def hits(profile: str, query: str) -> dict[str, float]:
            pipeline = workspace.pipeline_for(get_profile(workspace.settings, profile))
            assert pipeline.bm25 is not None
            return _scores(pipeline.bm25.search(query, 5)[0])

        default = hits("default", "差旅 红字发票")
        assert {chunks["travel"], chunks["invoice"]} <= set(default)
        # Without the title field the travel chunk keeps its content's score only.
        titleless = hits("titleless", "差旅 红字发票")
        assert titleless[chunks["travel"]] < default[chunks["travel"]]
        saturated = hits("saturated", "差旅 红字发票")
        assert saturated[chunks["travel"]] != default[chunks["travel"]]
        # The profile's query stop words: 红字 no longer searched, so the invoice scores less.
        assert saturated[chunks["invoice"]] < default[chunks["invoice"]]
