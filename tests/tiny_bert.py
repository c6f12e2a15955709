"""A tiny offline BERT for the model-loading tests (embedders, cross-encoders).

A WordPiece vocabulary trained on the test's own text and a 2-layer, 32-wide configuration:
about 1 MB saved, built in a few seconds (mostly importing transformers), no download. Its
scores are meaningless; loading, batching, truncation and pooling are the real code paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import BertConfig

#: BERT's special tokens, in the order their ids are given (0 to 4).
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece(corpus: Iterable[str], vocab_size: int) -> Tokenizer:
    """A BERT-style WordPiece tokenizer (lower-cased; split on white space and punctuation)
    with at most `vocab_size` tokens, trained on `corpus`; no post-processor."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS)
    tokenizer.train_from_iterator(corpus, trainer)
    return tokenizer


def tiny_bert_config(vocab_size: int, *, max_position_embeddings: int, **extra: Any) -> BertConfig:
    """2 layers, hidden size 32, 2 attention heads, intermediate size 64; `extra` (e.g.
    `num_labels=1` for a cross-encoder) goes to `BertConfig` as given."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_position_embeddings,
        **extra,
    )


def save_tiny_cross_encoder(folder: Path, corpus: Iterable[str]) -> Path:
    """A 2-layer, 32-wide `BertForSequenceClassification` (one logit) with a WordPiece vocabulary
    of at most 300 tokens trained on `corpus`, saved in `folder` (seeded: the same weights each time)."""
    import torch
    from tokenizers import processors
    from transformers import BertForSequenceClassification, BertTokenizerFast

    tokenizer = train_wordpiece(corpus, vocab_size=300)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = BertTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer.get_vocab_size(), max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder
