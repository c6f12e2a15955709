"""Which settings differ between a logged request's config and today's, when the logged one is known.

A request logs only its `config_hash`. ragtriage knows the full settings behind a hash when a
replay profile has that hash, or when an eval run was made with them (runs store their settings),
so replay can name the differing settings instead of two opaque hashes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from ragtriage.config.profiles import get_profile, list_profiles
from ragtriage.config.settings import Settings
from ragtriage.store.db import read_session
from ragtriage.store.eval_tables import EvalRunRow

#: Sections `Settings.config_hash` leaves out: they never change retrieval results.
_NOT_HASHED = ("store", "keymap", "logs", "triage", "profiles", "profile_sources", "replay", "config_file")

#: Keys inside hashed sections that the hash ignores too.
_UNHASHED_KEYS = frozenset({"rerank.freshness_now"})


def known_config(engine: Engine, config_hash: str, settings: Settings | None = None) -> dict[str, Any] | None:
    """The settings (as JSON data) behind `config_hash`: a profile of `settings` with that hash,
    else the latest eval run made with it; None when neither has it."""
    if settings is not None:
        for info in list_profiles(settings):
            if info.config_hash == config_hash:
                return get_profile(settings, info.name).settings.model_dump(mode="json")
    with read_session(engine) as session:
        row = session.exec(
            select(EvalRunRow)
            .where(col(EvalRunRow.config_hash) == config_hash)
            .order_by(col(EvalRunRow.id).desc())
            .limit(1)
        ).first()
        return dict(row.config) if row is not None and row.config else None


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "unset" if value is None else str(value)


def differing_settings(logged: Mapping[str, Any], current: Settings) -> list[str]:
    """`section.key: logged → current` for every hashed setting that differs, in key order (profile
    tables and their bookkeeping are left out: only the settings a replay runs with count)."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _flatten({k: v for k, v in logged.items() if k not in _NOT_HASHED}, "", before)
    now = current.model_dump(mode="json", exclude=set(_NOT_HASHED))
    _flatten(now, "", after)
    return [
        f"{key}: {_shown(before.get(key))} → {_shown(after.get(key))}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
        and not key.startswith("kb.import_")
        and key not in _UNHASHED_KEYS
    ]
