"""Replay profiles: strict validation, profile files, `[replay.versions]` matching, presets, hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtriage.config.loading import load_settings
from ragtriage.config.profiles import (
    describe_shape,
    explain,
    get_profile,
    list_profiles,
    match_version,
    preset_names,
    resolve_profile,
)
from ragtriage.config.settings import Settings
from ragtriage.errors import ConfigError, NotFoundError
from tests.conftest import FIXTURES_DIR

BASE = """
[retrieval]
bm25_k = 5
dense_k = 7

[rerank]
top_n = 4
"""


def _write(folder: Path, text: str, name: str = "config.toml") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_profile_overlays_the_settings_and_extends_another(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        BASE
        + """
[profiles.wide]
description = "more hits"
retrieval = { bm25_k = 20 }
[profiles.wide.rerank]
top_n = 8

[profiles.wide-weighted]
extends = "wide"
[profiles.wide-weighted.retrieval.fusion]
method = "weighted"
weights = { dense_raw = 0.7, bm25_raw = 0.3 }
""",
    )
    settings = load_settings(config, environ={})
    wide = get_profile(settings, "wide")
    assert (wide.settings.retrieval.bm25_k, wide.settings.retrieval.dense_k) == (20, 7)
    assert wide.settings.rerank.top_n == 8 and wide.description == "more hits"
    assert wide.source == f"{config} [profiles.wide]"
    chained = get_profile(settings, "wide-weighted").settings
    assert chained.retrieval.bm25_k == 20 and chained.retrieval.fusion.method == "weighted"
    assert chained.retrieval.fusion.weights == {"dense_raw": 0.7, "bm25_raw": 0.3}
    # The base settings are untouched, and every profile has its own hash.
    assert settings.retrieval.bm25_k == 5
    hashes = {get_profile(settings, n).config_hash for n in ("default", "wide", "wide-weighted")}
    assert len(hashes) == 3 and get_profile(settings, "default").config_hash == settings.config_hash()


def test_misspelt_key_in_a_profile_names_profile_key_and_nearest(tmp_path: Path) -> None:
    config = _write(tmp_path, BASE + "\n[profiles.fast.retrieval]\nbm25_kk = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})
    message = str(caught.value)
    assert f"{config} [profiles.fast]" in message
    assert "'retrieval.bm25_kk'" in message and "did you mean 'retrieval.bm25_k'" in message


def test_misspelt_section_and_bad_value_in_a_profile(tmp_path: Path) -> None:
    config = _write(tmp_path, BASE + "\n[profiles.fast.retreival]\nbm25_k = 3\n")
    with pytest.raises(
        ConfigError, match=r"\[profiles.fast\]: unknown key 'retreival'; did you mean 'retrieval'"
    ):
        load_settings(config, environ={})
    config = _write(tmp_path, BASE + '\n[profiles.fast.retrieval.fusion]\nmethod = "borda"\n')
    with pytest.raises(ConfigError, match=r"\[profiles.fast\]: 'retrieval.fusion.method'"):
        load_settings(config, environ={})


def test_profile_files_next_to_the_settings_file(tmp_path: Path) -> None:
    config = _write(tmp_path, BASE + '\n[replay.versions]\n"v2-*" = "canary"\n')
    _write(tmp_path, 'description = "the canary"\n[retrieval]\nrrf_k = 10\n', "profiles/canary.toml")
    settings = load_settings(config, environ={})
    canary = resolve_profile(settings, "v2-rc1")
    assert canary.name == "canary" and canary.settings.retrieval.rrf_k == 10
    assert canary.source == str(tmp_path / "profiles" / "canary.toml")
    assert (canary.matched_by, canary.pattern) == ("glob", "v2-*")
    _write(tmp_path, "[retrieval]\nrrf_kk = 10\n", "profiles/canary.toml")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})
    assert str(tmp_path / "profiles" / "canary.toml") in str(caught.value)
    assert "did you mean 'retrieval.rrf_k'" in str(caught.value)


def test_same_profile_in_the_file_and_a_profile_file_is_an_error(tmp_path: Path) -> None:
    config = _write(tmp_path, BASE + "\n[profiles.canary.retrieval]\nrrf_k = 5\n")
    _write(tmp_path, "[retrieval]\nrrf_k = 10\n", "profiles/canary.toml")
    with pytest.raises(ConfigError, match="also defined in .*keep one"):
        load_settings(config, environ={})


def test_version_matching_exact_then_most_specific_glob() -> None:
    versions = {"prod-*": "a", "prod-2026.*": "b", "prod-2026.1?": "c", "prod-2026.10": "d", "*": "e"}
    assert match_version(versions, "prod-2026.10") == ("d", "prod-2026.10", "exact")
    assert match_version(versions, "prod-2026.11") == ("c", "prod-2026.1?", "glob")
    assert match_version(versions, "prod-2026.09") == ("b", "prod-2026.*", "glob")
    assert match_version(versions, "prod-2025") == ("a", "prod-*", "glob")
    assert match_version(versions, "canary") == ("e", "*", "glob")
    assert match_version({"prod-*": "a"}, "PROD-1") is None  # case-sensitive
    assert match_version(versions, None) is None
    # Equally specific globs: the alphabetically first wins, whatever the order of the table.
    assert match_version({"v[12]-x": "z", "v?-x": "y"}, "v1-x") == ("y", "v?-x", "glob")


def test_unmapped_version_uses_the_default_profile_and_says_so(tmp_path: Path) -> None:
    config = _write(tmp_path, BASE + '\n[replay]\ndefault_profile = "hybrid-weighted"\n')
    settings = load_settings(config, environ={})
    resolved = resolve_profile(settings, "prod-9")
    assert resolved.name == "hybrid-weighted" and resolved.fallback
    assert "the default: pipeline_version prod-9 has no [replay.versions] entry" in explain(resolved.ref())
    assert "no pipeline_version" in explain(resolve_profile(settings, None).ref())
    asked = resolve_profile(settings, "prod-9", "default")
    assert asked.matched_by == "requested" and asked.settings.retrieval.bm25_k == 5


def test_unknown_profile_names_are_errors_with_a_suggestion(tmp_path: Path) -> None:
    config = _write(tmp_path, BASE + '\n[profiles.canary]\n[replay.versions]\n"v2" = "canari"\n')
    with pytest.raises(
        ConfigError, match=r"\[replay.versions\] 'v2': no profile 'canari'; did you mean 'canary'"
    ):
        load_settings(config, environ={})
    settings = load_settings(_write(tmp_path, BASE + "\n[profiles.canary]\n"), environ={})
    with pytest.raises(NotFoundError, match="--profile: no profile 'canry'; did you mean 'canary'"):
        get_profile(settings, "canry")
    with pytest.raises(ConfigError, match="extends: no profile 'nope'"):
        load_settings(_write(tmp_path, BASE + '\n[profiles.a]\nextends = "nope"\n'), environ={})


def test_reserved_names_and_circles(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="taken by a shipped preset"):
        load_settings(_write(tmp_path, BASE + "\n[profiles.hybrid-weighted]\n"), environ={})
    with pytest.raises(ConfigError, match="taken by the settings file itself"):
        load_settings(_write(tmp_path, BASE + "\n[profiles.default]\n"), environ={})
    circle = BASE + '\n[profiles.a]\nextends = "b"\n[profiles.b]\nextends = "a"\n'
    with pytest.raises(ConfigError, match="in a circle"):
        load_settings(_write(tmp_path, circle), environ={})


def test_route_engine_must_name_an_engine_table(tmp_path: Path) -> None:
    text = BASE + '\n[profiles.es.retrieval.route_engine]\nbm25_raw = "prod_es"\n'
    with pytest.raises(ConfigError, match=r"route_engine.bm25_raw = 'prod_es' names no \[engines.prod_es\]"):
        load_settings(_write(tmp_path, text), environ={})
    typo = BASE + '\n[engines.prod_es]\ntype = "elasticsearch"\nurl = "http://x"\nindx = "kb"\n'
    with pytest.raises(
        ConfigError, match=r"unknown key 'engines.prod_es.indx'; did you mean 'engines.prod_es.index'"
    ):
        load_settings(_write(tmp_path, typo), environ={})


def test_presets_are_shipped_and_have_the_promised_shape() -> None:
    assert preset_names() == ["hybrid-weighted", "rewrite-rrf-rerank", "rrf-rerank-refusal"]
    settings = Settings()
    hybrid = get_profile(settings, "hybrid-weighted").settings
    assert hybrid.retrieval.routes == ["bm25_raw", "dense_raw"] and not hybrid.rerank.enabled
    assert hybrid.retrieval.fusion.weights == {"dense_raw": 0.7, "bm25_raw": 0.3}
    assert hybrid.rerank.top_n == 6
    rewrite = get_profile(settings, "rewrite-rrf-rerank").settings
    assert rewrite.retrieval.candidate_pool == 30 and rewrite.rewrite.max_sub_queries == 2
    weights = rewrite.rerank.weights
    assert (weights.cross_encoder, weights.title_hit, weights.freshness, weights.key_terms) == (
        0.7,
        0.15,
        0.1,
        0.05,
    )
    assert (rewrite.rerank.min_n, rewrite.rerank.top_n) == (5, 8)
    refusal = get_profile(settings, "rrf-rerank-refusal").settings
    assert refusal.retrieval.route_k == {"bm25_raw": 20, "dense_raw": 20}
    assert (refusal.retrieval.candidate_pool, refusal.rerank.top_n, refusal.rerank.refusal_threshold) == (
        20,
        5,
        0.3,
    )


def test_new_settings_at_their_default_keep_logged_hashes() -> None:
    # Hashes as computed before profiles existed (the fixture's logged config_hash is the third).
    # The default's changed on purpose: `index.title_boost` 2.0 → 0.3, then the rerank's `bm25_score`
    # weight 0 → 0.02 and `index.query_segmentation` search → precise; with the old values pinned,
    # the old hashes come back.
    # Refusal by lexical support (< 0.2, dense gap 0.009) became a default after that: pinned off
    # (TOML "off"), with the dense_cosine score, the hashes from before it come back.
    no_refusal = {"refusal_threshold": "off", "refusal_score": "dense_cosine", "refusal_dense_gap": "off"}
    assert Settings().config_hash() == "e20d1e3a87db"
    # The kind a threshold was calibrated for hashes only where it stops refusal from judging: a
    # file's own threshold (no kind: any) and the same with its kind recorded hash as before; the
    # default threshold (lexical support's) under a cross-encoder no longer judges, so it hashes.
    cross_encoder = {"backend": "http", "url": "http://127.0.0.1:9/rerank", "refusal_threshold": 0.3}
    assert Settings(rerank=cross_encoder).config_hash() == "3f312657d821"  # type: ignore[arg-type]
    recorded = {**cross_encoder, "refusal_threshold_score": "cross_encoder"}
    assert Settings(rerank=recorded).config_hash() == "3f312657d821"  # type: ignore[arg-type]
    assert (
        Settings(rerank={"backend": "http", "url": "http://127.0.0.1:9/rerank"}).config_hash()
        != "6eb297ca9be6"
    )  # type: ignore[arg-type]
    assert Settings(rerank={"refusal_threshold_score": "lexical_support"}).config_hash() == "e20d1e3a87db"  # type: ignore[arg-type]
    assert Settings(rerank=no_refusal).config_hash() == "22d04331576c"  # type: ignore[arg-type]
    unset = {"refusal_threshold": None, "refusal_score": "dense_cosine", "refusal_dense_gap": None}
    assert Settings(rerank=unset).config_hash() == "22d04331576c"  # type: ignore[arg-type]
    before = {
        "rerank": {"weights": {"bm25_score": 0.0}, **no_refusal},
        "index": {"query_segmentation": "search"},
    }
    assert Settings(**before).config_hash() == "3103edbaa3d2"  # type: ignore[arg-type]
    old = {**before, "index": {"query_segmentation": "search", "title_boost": 2.0}}
    assert Settings(**old).config_hash() == "a68ea699b433"  # type: ignore[arg-type]
    production = load_settings(FIXTURES_DIR / "logs" / "production.toml", environ={})
    assert production.rerank.refusal_threshold is None and production.rerank.refusal_score == "dense_cosine"
    assert production.rerank.refusal_dense_gap is None
    assert production.rerank.weights.bm25_score == 0.0
    assert production.index.query_segmentation == "search"
    assert production.config_hash() == "daf63ae39dcf"
    # The freshness clock is the replay's, not the configuration's.
    assert get_profile(production, "prod-2026-10").config_hash == "daf63ae39dcf"
    assert Settings(retrieval={"fusion": {"method": "combsum"}}).config_hash() != Settings().config_hash()
    # Query-side BM25 analysis: neutral at its default, part of the hash once set.
    neutral = Settings(index={"query_segmentation": "precise", "query_stop_words": []})
    assert neutral.config_hash() == Settings().config_hash()
    assert Settings(index={"query_stop_words": ["啥"]}).config_hash() != Settings().config_hash()
    # Score features of the rerank: dense_score neutral at its default 0.
    assert Settings(rerank={"weights": {"dense_score": 0.0}}).config_hash() == Settings().config_hash()
    assert Settings(rerank={"weights": {"dense_score": 0.01}}).config_hash() != Settings().config_hash()
    # The dense backend: neutral at qdrant_local (what every logged configuration used) and at `auto`
    # (the default since, which keeps an existing home on the backend it was built with).
    assert Settings().index.dense_backend == "auto"
    assert Settings(index={"dense_backend": "qdrant_local"}).config_hash() == Settings().config_hash()
    for neutral in ("auto", "qdrant_local"):
        pinned = Settings(index={"dense_backend": neutral}, rerank=no_refusal)  # type: ignore[arg-type]
        assert pinned.config_hash() == "22d04331576c"
    assert Settings(index={"dense_backend": "qdrant_edge"}).config_hash() != Settings().config_hash()


def test_fixture_versions_map_to_their_profiles() -> None:
    production = load_settings(FIXTURES_DIR / "logs" / "production.toml", environ={})
    old = resolve_profile(production, "prod-2026.09")
    assert (old.name, old.matched_by) == ("prod-2026-09", "exact")
    assert old.settings.rewrite.alias_mode == "replace"
    assert old.settings.retrieval.routes == ["bm25_rewritten", "dense_rewritten", "dense_sub"]
    rows = {row.name: row for row in list_profiles(production)}
    assert rows["prod-2026-10"].serves == ["prod-2026.10"] and rows["default"].is_default
    assert "replacing rewrite" in rows["prod-2026-09"].shape


def test_every_logged_fixture_hash_is_its_profiles_hash() -> None:
    import json

    production = load_settings(FIXTURES_DIR / "logs" / "production.toml", environ={})
    lines = (FIXTURES_DIR / "logs" / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    logged = {
        (r["pipeline_version"], r["config_hash"]) for r in map(json.loads, lines) if r.get("config_hash")
    }
    assert {version for version, _ in logged} == {"prod-2026.09", "prod-2026.10"}
    for version, config_hash in logged:
        assert resolve_profile(production, version).config_hash == config_hash, version


def test_a_threshold_keeps_the_score_kind_it_was_written_for(tmp_path: Path) -> None:
    # The shipped threshold is lexical support's; one a file, an environment variable or a profile
    # writes without a kind applies to any score (as before the kind was recorded); a profile that
    # only changes the score keeps the threshold, and its kind, from the settings.
    config = _write(
        tmp_path,
        BASE
        + """
[profiles.own-threshold.rerank]
refusal_threshold = 0.3
[profiles.cosine.rerank]
refusal_score = "dense_cosine"
[profiles.recorded.rerank]
refusal_threshold = 0.85
refusal_threshold_score = "dense_cosine"
refusal_score = "dense_cosine"
""",
    )
    settings = load_settings(config, environ={})
    assert settings.rerank.refusal_threshold_score == "lexical_support"
    kinds = {
        name: get_profile(settings, name).settings.rerank.refusal_threshold_score
        for name in ("own-threshold", "cosine", "recorded", "rrf-rerank-refusal")
    }
    assert kinds == {
        "own-threshold": None,
        "cosine": "lexical_support",
        "recorded": "dense_cosine",
        "rrf-rerank-refusal": "cross_encoder",
    }
    shapes = {name: describe_shape(get_profile(settings, name).settings) for name in kinds}
    assert shapes["cosine"].endswith(
        ", refusal not judged (dense_cosine; threshold 0.2 is lexical_support's)"
    )
    assert shapes["recorded"].endswith(", refuse dense_cosine < 0.85")
    assert shapes["own-threshold"].endswith(", refuse lexical_support < 0.3 (dense gap < 0.009)")
    from_env = load_settings(config, environ={"RAGTRIAGE__RERANK__REFUSAL_THRESHOLD": "0.4"})
    assert from_env.rerank.refusal_threshold_score is None
    assert (
        load_settings(
            _write(tmp_path, "[rerank]\nrefusal_threshold = 0.2\n", "own.toml"), environ={}
        ).rerank.refusal_threshold_score
        is None
    )


def test_the_production_knobs_are_hash_neutral_at_their_default() -> None:
    # Hashes computed before the knobs existed: a file that sets none of them keeps its logged hash.
    weighted = {"method": "weighted", "weights": {"dense_raw": 0.7, "bm25_raw": 0.3}, "normalization": "max"}
    assert Settings(retrieval={"fusion": weighted}).config_hash() == "7e5c3060aae9"  # type: ignore[arg-type]
    assert Settings(retrieval={"fusion": {**weighted, "keep": None}}).config_hash() == "7e5c3060aae9"  # type: ignore[arg-type]
    assert Settings(retrieval={"fusion": {**weighted, "keep": 10}}).config_hash() != "7e5c3060aae9"  # type: ignore[arg-type]
    per_route = {**weighted, "normalization": {"dense_raw": "none", "bm25_raw": "max"}}
    assert Settings(retrieval={"fusion": per_route}).config_hash() != "7e5c3060aae9"  # type: ignore[arg-type]
    bm25s = {"title_boost": 1.0, "bm25_engine": "bm25s"}
    assert Settings(index=bm25s).config_hash() == "7d706bac6b46"  # type: ignore[arg-type]
    assert Settings(index={**bm25s, "bm25_k1": 1.2, "bm25_b": 0.75}).config_hash() == "7d706bac6b46"  # type: ignore[arg-type]
    assert Settings(index={"bm25_k1": 0.9}).config_hash() != Settings().config_hash()  # type: ignore[arg-type]
    assert (
        Settings(rerank={"weights": {"title_hit": 0.2}, "title_match": "substring"}).config_hash()
        == "7aba9a9bc671"
    )  # type: ignore[arg-type]
    assert (
        Settings(rerank={"weights": {"title_hit": 0.2}, "title_match": "tokens"}).config_hash()
        != "7aba9a9bc671"
    )  # type: ignore[arg-type]


def test_the_shape_line_names_per_route_normalisation_and_the_fused_cut() -> None:
    from ragtriage.config.profiles import describe_shape

    fusion = {"method": "weighted", "normalization": {"dense_raw": "none", "bm25_raw": "max"}, "keep": 10}
    shape = describe_shape(Settings(retrieval={"fusion": fusion}))  # type: ignore[arg-type]
    assert "weighted (dense_raw none, bm25_raw max) → keep 10 → pool 30" in shape


def test_the_shape_line_names_the_teams_stages_where_they_replace_built_ins() -> None:
    from ragtriage.config.profiles import describe_shape
    from ragtriage.config.settings import Settings

    staged = Settings.model_validate(
        {
            "retrieval": {"routes": ["bm25_raw", "dense_raw"], "candidate_pool": 10},
            "stages": {
                "bm25_raw": {"use": "prod_rag.search:bm25"},
                "fusion": {"use": "prod_rag.search:fuse"},
                "rerank": {"use": "prod_rag.search:TitleRerank", "title_weight": 0.2},
                "select": {"use": "prod_rag.search:select"},
            },
        }
    )
    whole = Settings.model_validate({"stages": {"pipeline": {"use": "prod_li.app:build_query_engine"}}})

    assert describe_shape(staged) == (
        "bm25_raw k10 @prod_rag.search:bm25, dense_raw k10 → prod_rag.search:fuse → pool 10 → "
        "rerank (prod_rag.search:TitleRerank) → select prod_rag.search:select"
    )
    assert describe_shape(whole) == "the team's pipeline prod_li.app:build_query_engine, run in process"
