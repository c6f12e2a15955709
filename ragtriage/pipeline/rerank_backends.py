"""Cross-encoder scorers: FlagEmbedding `FlagReranker`, sentence-transformers `CrossEncoder`, and an
HTTP rerank service (TEI / Jina style). Each returns probabilities in [0, 1] and per-pair truncation.

Model libraries are imported inside the constructors, so importing this module stays cheap and a
missing extra becomes `PipelineError("install ragtriage[models]")`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import httpx
import numpy as np

from ragtriage.errors import PipelineError
from ragtriage.wording import quoted

FP16_ON_CPU_NOTE = (
    "rerank: fp16 requested on CPU, which fails in LayerNorm ('Half' not implemented); using float32"
)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")


def sigmoid(values: Sequence[float] | np.ndarray) -> list[float]:
    """Logistic function 1 / (1 + e^-x), computed without overflow for large |x|."""
    result = []
    for x in np.asarray(values, dtype=np.float64).ravel():
        if x >= 0:
            result.append(1.0 / (1.0 + math.exp(-x)))
        else:
            z = math.exp(x)
            result.append(z / (1.0 + z))
    return result


def _longest_prefix(passage: str, fits: Callable[[str], bool]) -> str:
    """The longest prefix of `passage` that `fits` (binary search on characters; `fits` is monotone)."""
    low, high = 0, len(passage)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(passage[:middle]):
            low = middle
        else:
            high = middle - 1
    return passage[:low]


def _cut_passage(tokenizer: Any, query: str, passage: str, max_length: int) -> tuple[str, bool]:
    """Cut `passage` (never the query) so that [CLS] query [SEP] passage [SEP] fits `max_length` tokens."""
    special = tokenizer.num_special_tokens_to_add(pair=True)
    query_tokens = len(tokenizer(query, add_special_tokens=False)["input_ids"])
    budget = max(1, max_length - special - query_tokens)
    encoded = tokenizer(passage, add_special_tokens=False, return_offsets_mapping=bool(tokenizer.is_fast))
    if len(encoded["input_ids"]) <= budget:
        return passage, False
    if tokenizer.is_fast:
        return passage[: encoded["offset_mapping"][budget - 1][1]], True
    # Slow tokenizers have no offsets.
    return _longest_prefix(
        passage, lambda prefix: len(tokenizer(prefix, add_special_tokens=False)["input_ids"]) <= budget
    ), True


def cut_passages(
    tokenizer: Any, query: str, passages: Sequence[str], max_length: int
) -> tuple[list[str], list[bool]]:
    """`_cut_passage` for every passage: the texts to score and which of them were cut."""
    cut = [_cut_passage(tokenizer, query, passage, max_length) for passage in passages]
    return [text for text, _ in cut], [flag for _, flag in cut]


class _LocalCrossEncoder:
    """A cross-encoder loaded in this process: extra check, fp16-on-CPU fallback, load errors,
    passage-only truncation with the model's own tokenizer and the sigmoid. Subclasses say how to
    import, load and call their library (`_import_library`, `_load`, `_logits`)."""

    _name_prefix: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        max_length: int = 512,
        batch_size: int = 16,
        device: str = "cpu",
        use_fp16: bool = False,
    ) -> None:
        try:
            library = self._import_library()
        except ImportError as error:
            raise PipelineError(
                f"the reranker needs the models extra ({error.name} is missing); install ragtriage[models]"
            ) from None
        fp16_on_cpu = use_fp16 and device.startswith("cpu")
        self.use_fp16, self.notes = use_fp16 and not fp16_on_cpu, [FP16_ON_CPU_NOTE] if fp16_on_cpu else []
        self.name = f"{self._name_prefix}:{model}"
        self.max_length = max_length
        self.batch_size = batch_size
        try:
            self._model = self._load(library, model, device)
        except (OSError, ValueError) as error:
            # A missing folder is an OSError in sentence-transformers but huggingface_hub's
            # HFValidationError (a ValueError) through FlagEmbedding: both mean a wrong model path.
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise PipelineError(
                f"cannot load reranker model {quoted(model)}: {first_line}; fix [rerank] model "
                "(a local model folder or a model name already in the Hugging Face cache)"
            ) from None

    def _import_library(self) -> Any:
        raise NotImplementedError

    def _load(self, library: Any, model: str, device: str) -> Any:
        raise NotImplementedError

    def _logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """One raw logit per pair, as a 1-D float64 array."""
        raise NotImplementedError

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], list[bool]]:
        """Probabilities for (query, passage) pairs and which passages were cut to fit."""
        if not passages:
            return [], []
        texts, truncated = cut_passages(self._model.tokenizer, query, passages, self.max_length)
        return sigmoid(self._logits([(query, text) for text in texts])), truncated


class FlagRerankerScorer(_LocalCrossEncoder):
    """FlagEmbedding `FlagReranker`; raw logits are turned into probabilities by sigmoid here."""

    _name_prefix = "flagembedding"

    def _import_library(self) -> Any:
        from FlagEmbedding import FlagReranker

        return FlagReranker

    def _load(self, library: Any, model: str, device: str) -> Any:
        reranker = library(
            model,
            use_fp16=self.use_fp16,
            devices=device,
            batch_size=self.batch_size,
            max_length=self.max_length,
        )
        if not self.use_fp16:
            reranker.model.float()
        return reranker

    def _logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        logits = self._model.compute_score(
            pairs, batch_size=self.batch_size, max_length=self.max_length, normalize=False
        )
        return np.atleast_1d(np.asarray(logits, dtype=np.float64))


class SentenceTransformersScorer(_LocalCrossEncoder):
    """sentence-transformers `CrossEncoder`, asked for raw logits (identity activation) and squashed here."""

    _name_prefix = "cross-encoder"

    def _import_library(self) -> Any:
        import torch
        from sentence_transformers import CrossEncoder

        return torch, CrossEncoder

    def _load(self, library: Any, model: str, device: str) -> Any:
        torch, cross_encoder = library
        self._identity = torch.nn.Identity()
        return cross_encoder(
            model,
            device=device,
            max_length=self.max_length,
            model_kwargs={"torch_dtype": torch.float16 if self.use_fp16 else torch.float32},
            local_files_only=True,
        )

    def _logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        logits = self._model.predict(
            pairs,
            batch_size=self.batch_size,
            activation_fn=self._identity,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(logits, dtype=np.float64).reshape(len(pairs), -1)[:, -1]


def estimate_tokens(text: str) -> int:
    """Rough token count for a service whose tokenizer we cannot see: one per CJK character, 1.3 per word."""
    cjk = len(_CJK.findall(text))
    words = len(_CJK.sub(" ", text).split())
    return cjk + math.ceil(words * 1.3)


class HTTPRerankScorer:
    """A `/rerank` service: TEI (`{query, texts}` → `[{index, score}]`) or Jina/Cohere
    (`{query, documents}` → `{results: [{index, relevance_score}]}`)."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        max_length: int = 512,
        timeout_s: float = 30.0,
        api_key_env: str = "RAGTRIAGE_RERANK_API_KEY",
        scores: Literal["probability", "logit"] = "probability",
        transport: httpx.BaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/") if url.rstrip("/").endswith("/rerank") else url.rstrip("/") + "/rerank"
        self.model = model
        self.name = f"http:{model or self.url}"
        self.max_length = max_length
        self.timeout_s = timeout_s
        self.api_key_env = api_key_env
        self.scores = scores
        self.notes: list[str] = []
        self._transport = transport
        self._environ = environ

    def _cut(self, query: str, passage: str) -> tuple[str, bool]:
        budget = max(1, self.max_length - 3 - estimate_tokens(query))
        if estimate_tokens(passage) <= budget:
            return passage, False
        return _longest_prefix(passage, lambda prefix: estimate_tokens(prefix) <= budget), True

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], list[bool]]:
        """Probabilities for (query, passage) pairs; raises PipelineError when the service fails."""
        if not passages:
            return [], []
        cut = [self._cut(query, passage) for passage in passages]
        texts = [text for text, _ in cut]
        environ = os.environ if self._environ is None else self._environ
        api_key = environ.get(self.api_key_env)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        payload: dict[str, Any] = {
            "query": query,
            "texts": texts,
            "documents": texts,
            "raw_scores": self.scores == "logit",
        }
        if self.model:
            payload["model"] = self.model
        try:
            with httpx.Client(transport=self._transport, timeout=self.timeout_s) as client:
                response = client.post(self.url, json=payload, headers=headers)
                response.raise_for_status()
                body = response.json()
        except httpx.TimeoutException:
            raise PipelineError(f"rerank service {self.url} timed out after {self.timeout_s:g}s") from None
        except httpx.HTTPStatusError as error:
            raise PipelineError(
                f"rerank service {self.url} answered HTTP {error.response.status_code}"
            ) from None
        except (httpx.HTTPError, ValueError) as error:
            raise PipelineError(f"rerank service {self.url} failed: {type(error).__name__}") from None
        raw = self._parse(body, len(texts))
        if self.scores == "logit":
            return sigmoid(raw), [flag for _, flag in cut]
        outside = [s for s in raw if not 0.0 <= s <= 1.0]
        if outside:
            raise PipelineError(
                f"rerank service returned score {outside[0]:.4g} outside [0, 1]; "
                'set [rerank] http_scores = "logit" if it returns logits'
            )
        return list(raw), [flag for _, flag in cut]

    def _parse(self, body: Any, count: int) -> list[float]:
        items = body.get("results", body.get("data")) if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise PipelineError(f"rerank service {self.url}: unexpected reply (no list of results)")
        scores: list[float | None] = [None] * count
        for item in items:
            try:
                index = int(item["index"])
                value = float(item["relevance_score"] if "relevance_score" in item else item["score"])
            except (KeyError, TypeError, ValueError):
                raise PipelineError(f"rerank service {self.url}: a result lacks index or score") from None
            if 0 <= index < count:
                scores[index] = value
        if any(s is None for s in scores):
            raise PipelineError(
                f"rerank service {self.url}: scores for {scores.count(None)} passages are missing"
            )
        return [float(s) for s in scores if s is not None]
