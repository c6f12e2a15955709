"""Where ragtriage keeps its data: one home folder holding the store, the indexes and caches."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_path

HOME_ENV = "RAGTRIAGE_HOME"
CONFIG_ENV = "RAGTRIAGE_CONFIG_FILE"


def resolve_home(cli_home: Path | None = None) -> Path:
    """The data folder: `--home`, else $RAGTRIAGE_HOME, else the platform's user data dir."""
    if cli_home is not None:
        home = cli_home
    elif os.environ.get(HOME_ENV):
        home = Path(os.environ[HOME_ENV])
    else:
        home = user_data_path("ragtriage")
    return home.expanduser().resolve()


def resolve_config_file(home: Path, cli_config: Path | None = None) -> Path | None:
    """The settings file: `--config`, else $RAGTRIAGE_CONFIG_FILE, else `<home>/config.toml` if present."""
    if cli_config is not None:
        return cli_config
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    candidate = home / "config.toml"
    return candidate if candidate.exists() else None


def db_path(home: Path) -> Path:
    """SQLite triage store (KB, request logs, triage records, eval sets and runs)."""
    return home / "ragtriage.db"


def last_import_path(home: Path) -> Path:
    """What the last file import was (fingerprint, KB revision, counts): `kb.import_fingerprint`."""
    return home / "last_import.json"


def index_dir(home: Path) -> Path:
    """Parent of the derived indexes (Whoosh, Qdrant local) and their manifest."""
    return home / "index"


def whoosh_dir(home: Path) -> Path:
    return index_dir(home) / "whoosh"


def bm25s_dir(home: Path) -> Path:
    return index_dir(home) / "bm25s"


def qdrant_dir(home: Path) -> Path:
    return index_dir(home) / "qdrant"


def qdrant_edge_dir(home: Path) -> Path:
    """Parent of the Qdrant Edge shards (one folder per collection)."""
    return index_dir(home) / "qdrant_edge"


def manifest_path(home: Path) -> Path:
    return index_dir(home) / "manifest.json"


def cache_dir(home: Path) -> Path:
    """Embedding cache and other recomputable data."""
    return home / "cache"
