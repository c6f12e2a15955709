"""The composition root: the home folder, settings, store and pipeline one command or one TUI session works with.

Both faces (CLI and TUI) build a `Workspace` and hand its parts (home, settings, SQL engine,
indexes) to the core; nothing in the core takes a `Workspace`. Heavy parts (the embedder, the
indexes) are opened lazily and once per process, and closed by `close()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from ragtriage import locations
from ragtriage.config.loading import load_settings
from ragtriage.config.settings import Settings
from ragtriage.store.db import make_engine, sqlite_url

if TYPE_CHECKING:
    from ragtriage.config.profiles import ResolvedProfile
    from ragtriage.index.indexer import Indexes
    from ragtriage.pipeline.pipeline import Pipeline


@dataclass
class Workspace:
    """Home folder + settings + lazily opened store and pipeline."""

    home: Path
    settings: Settings
    config_file: Path | None = None
    _engine: Engine | None = field(default=None, repr=False)
    _pipeline: Pipeline | None = field(default=None, repr=False)
    _indexes: Indexes | None = field(default=None, repr=False)
    _profile_pipelines: dict[tuple[str, str], Pipeline] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Relative settings paths (the alias file, hashed by contents) resolve against the home.
        if self.settings._home is None:
            self.settings._home = self.home

    @classmethod
    def open(
        cls,
        home: Path | None = None,
        config_file: Path | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> Workspace:
        """Resolve the home and settings file (see `locations`) and read the settings."""
        resolved_home = locations.resolve_home(home)
        resolved_config = locations.resolve_config_file(resolved_home, config_file)
        settings = load_settings(resolved_config, overrides=overrides)
        return cls(home=resolved_home, settings=settings, config_file=resolved_config)

    @property
    def store_url(self) -> str:
        return self.settings.store.url or sqlite_url(locations.db_path(self.home))

    @property
    def engine(self) -> Engine:
        """The store's SQLAlchemy engine (tables are created on first use)."""
        if self._engine is None:
            self.home.mkdir(parents=True, exist_ok=True)
            self._engine = make_engine(self.store_url, busy_timeout_ms=self.settings.store.busy_timeout_ms)
        return self._engine

    @property
    def indexes(self) -> Indexes:
        """The BM25 and dense indexes, opened on first use and shared by every profile's pipeline."""
        if self._indexes is None:
            from ragtriage.index.indexer import open_indexes

            self._indexes = open_indexes(self.home, self.settings)
        return self._indexes

    @property
    def pipeline(self) -> Pipeline:
        """The retrieval pipeline built from the settings as they are (profile `default`)."""
        if self._pipeline is None:
            from ragtriage.pipeline.factory import build_pipeline
            from ragtriage.replay.framework import whole_pipeline

            whole = whole_pipeline(self.settings, "default")
            self._pipeline = build_pipeline(
                self.settings, self.indexes, self.engine, self.resolve_path, whole=whole
            )
        return self._pipeline

    def pipeline_for(self, profile: ResolvedProfile) -> Pipeline:
        """The pipeline of a replay profile (built once per profile and config hash; shares the indexes)."""
        key = (profile.name, profile.config_hash)
        if profile.name == "default" and profile.config_hash == self.settings.config_hash():
            return self.pipeline
        if key not in self._profile_pipelines:
            from ragtriage.pipeline.factory import build_pipeline
            from ragtriage.replay.framework import whole_pipeline

            self._profile_pipelines[key] = build_pipeline(
                self.settings,
                self.indexes,
                self.engine,
                self.resolve_path,
                profile,
                whole=whole_pipeline(profile.settings, profile.name),
            )
        return self._profile_pipelines[key]

    def resolve_path(self, value: str | None) -> Path | None:
        """A settings path: absolute as given, relative ones against the settings file's folder or the home."""
        if value is None:
            return None
        path = Path(value).expanduser()
        if path.is_absolute():
            return path
        base = self.config_file.parent if self.config_file is not None else self.home
        return (base / path).resolve()

    def close(self) -> None:
        """Release the indexes (Qdrant Edge locks its folder) and the store."""
        for pipeline in [self._pipeline, *self._profile_pipelines.values()]:
            if pipeline is not None:
                pipeline.close()
        self._pipeline = None
        self._profile_pipelines.clear()
        if self._indexes is not None:
            self._indexes.close()
            self._indexes = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
