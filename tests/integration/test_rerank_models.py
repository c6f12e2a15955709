"""FlagReranker and CrossEncoder scorers on a tiny offline BERT cross-encoder built in tmp_path.

The model's scores are meaningless; loading, batching, passage-only truncation, float32 on CPU and
the sigmoid are the real code paths under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragtriage.errors import PipelineError
from ragtriage.pipeline.rerank_backends import (
    FP16_ON_CPU_NOTE,
    FlagRerankerScorer,
    SentenceTransformersScorer,
    sigmoid,
)
from tests.tiny_bert import save_tiny_cross_encoder

pytestmark = pytest.mark.model

CORPUS = [
    "磁盘空间不足时如何清理 apt 缓存",
    "Debian 使用 apt 管理软件包，apt-get update 更新软件源",
    "网络接口配置文件位于 /etc/network/interfaces",
    "How do I upgrade Debian to the next stable release?",
    "The kernel boots and mounts the root filesystem read-only first.",
    "虚拟机无法启动时检查内核日志和引导程序配置",
] * 20


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide BertForSequenceClassification with a WordPiece vocab trained on CORPUS."""
    return save_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"), CORPUS)


@pytest.mark.parametrize("scorer_class", [FlagRerankerScorer, SentenceTransformersScorer])
def test_scores_are_probabilities_and_passages_are_cut(scorer_class: type, tiny_cross_encoder: Path) -> None:
    scorer = scorer_class(str(tiny_cross_encoder), max_length=24, batch_size=2)
    query = "apt 缓存 清理"
    short, long_passage = "apt 缓存", " ".join(CORPUS[:6])
    probabilities, truncated = scorer.score(query, [short, long_passage, short])
    assert len(probabilities) == 3 and all(0.0 < p < 1.0 for p in probabilities)
    assert truncated == [False, True, False]
    assert probabilities[0] == pytest.approx(probabilities[2], abs=1e-6)
    assert scorer.notes == []


@pytest.mark.parametrize("scorer_class", [FlagRerankerScorer, SentenceTransformersScorer])
def test_fp16_on_cpu_is_forced_to_float32_and_said(scorer_class: type, tiny_cross_encoder: Path) -> None:
    scorer = scorer_class(str(tiny_cross_encoder), max_length=32, use_fp16=True, device="cpu")
    assert scorer.use_fp16 is False and scorer.notes == [FP16_ON_CPU_NOTE]
    probabilities, _ = scorer.score("内核 启动", ["内核日志", "网络接口"])
    assert all(0.0 < p < 1.0 for p in probabilities)


def test_both_libraries_agree_on_the_same_model(tiny_cross_encoder: Path) -> None:
    passages = ["虚拟机无法启动", "upgrade Debian stable", "磁盘空间不足"]
    flag, _ = FlagRerankerScorer(str(tiny_cross_encoder), max_length=64).score("虚拟机 启动", passages)
    cross, _ = SentenceTransformersScorer(str(tiny_cross_encoder), max_length=64).score(
        "虚拟机 启动", passages
    )
    assert flag == pytest.approx(cross, abs=1e-5)


def test_cut_keeps_the_whole_query(tiny_cross_encoder: Path) -> None:
    from transformers import AutoTokenizer

    from ragtriage.pipeline.rerank_backends import cut_passages

    tokenizer = AutoTokenizer.from_pretrained(tiny_cross_encoder)
    query = "debian 内核 启动 日志"
    texts, truncated = cut_passages(tokenizer, query, [" ".join(CORPUS[:6])], 24)
    assert truncated == [True]
    encoded = tokenizer(query, texts[0])["input_ids"]
    assert len(encoded) <= 24
    assert tokenizer.decode(tokenizer(query, add_special_tokens=False)["input_ids"]) in tokenizer.decode(
        encoded
    )
    assert np.isclose(sigmoid([0.0])[0], 0.5)


@pytest.mark.parametrize("scorer_class", [FlagRerankerScorer, SentenceTransformersScorer])
def test_a_missing_model_folder_is_one_clear_error(scorer_class: type, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-reranker"
    with pytest.raises(PipelineError) as caught:
        scorer_class(str(missing))
    message = str(caught.value)
    assert message.startswith(f"cannot load reranker model '{missing}'") and "fix [rerank] model" in message
    assert "\n" not in message and "Traceback" not in message
