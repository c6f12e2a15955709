"""Naming the settings that differ between a logged config hash and the replay's settings."""

from __future__ import annotations

from ragtriage.config.profiles import get_profile, preset_names
from ragtriage.config.settings import Settings
from ragtriage.replay.logged import differing_settings, known_config


def test_differing_settings_are_named_with_both_values() -> None:
    logged = Settings().model_dump(mode="json")
    current = Settings.model_validate({"retrieval": {"bm25_k": 20}, "rerank": {"top_n": 8}})
    assert differing_settings(logged, current) == ["rerank.top_n: 6 → 8", "retrieval.bm25_k: 10 → 20"]
    assert differing_settings(logged, Settings()) == []


def test_store_and_triage_settings_never_count() -> None:
    logged = Settings().model_dump(mode="json")
    current = Settings.model_validate({"triage": {"no_gold_labels": ["x"]}, "logs": {"batch_size": 7}})
    assert differing_settings(logged, current) == []


def test_a_profile_with_the_logged_hash_makes_the_logged_config_known() -> None:
    settings = Settings()
    preset = get_profile(settings, preset_names()[0])
    found = known_config(None, preset.config_hash, settings)  # type: ignore[arg-type]  (found before SQL)
    assert found is not None
    assert differing_settings(found, preset.settings) == []
    assert differing_settings(found, settings) == differing_settings(
        preset.settings.model_dump(mode="json"), settings
    )
