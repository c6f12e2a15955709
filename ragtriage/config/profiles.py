"""Replay profiles: named overlays of the retrieval settings, one per production `pipeline_version`.

A profile overlays the `rewrite`, `retrieval`, `rerank`, `engines` and `stages` sections, and the
query-time keys of `index` (`QUERY_TIME_INDEX_KEYS`), on the settings file (or on the profile or
preset it `extends`). Profiles come from `[profiles.NAME]` tables of the
settings file, from `<settings folder>/profiles/NAME.toml` files, and from the presets shipped in
`ragtriage/config/presets/`. `default` is the settings file as it is. `[replay.versions]` maps
logged `pipeline_version` values to profiles: an exact key wins, then the matching glob with the
most literal characters, then the alphabetically first; no match → `[replay] default_profile`.

`resolve_profile` picks the profile of a logged request (or the one asked for), `get_profile` names
one; `workspace.pipeline_for(resolved)` builds its pipeline, whose traces carry `resolved.ref()`.
`list_profiles` is `ragtriage profiles`; `explain` says in one line which profile ran and why.
Errors are `ConfigError`s naming the profile's file and table, the key, and the nearest valid one.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, Literal

from pydantic import ValidationError

from ragtriage.config.settings import Settings
from ragtriage.config.sources import describe_error, merge_sections
from ragtriage.errors import ConfigError, NotFoundError
from ragtriage.pipeline.types import ProfileRef

DEFAULT_PROFILE = "default"
PRESET_SOURCE = "preset"
OVERLAY_SECTIONS = ("rewrite", "retrieval", "rerank", "engines", "stages", "index")
MatchedBy = Literal["requested", "exact", "glob", "default"]


@dataclass(frozen=True)
class ResolvedProfile:
    """A profile's full settings, its hash, and how it was chosen for a request."""

    name: str
    settings: Settings
    source: str
    config_hash: str
    matched_by: MatchedBy = "requested"
    pattern: str | None = None
    """The `[replay.versions]` key that matched (exact or glob)."""
    pipeline_version: str | None = None
    description: str = ""

    @property
    def fallback(self) -> bool:
        """True when no `[replay.versions]` entry matched and the default profile was used."""
        return self.matched_by == "default"

    def ref(self) -> ProfileRef:
        """The record a `Trace` keeps of this profile."""
        return ProfileRef(
            name=self.name,
            config_hash=self.config_hash,
            source=self.source,
            matched_by=self.matched_by,
            pattern=self.pattern,
            pipeline_version=self.pipeline_version,
        )


@dataclass(frozen=True)
class ProfileInfo:
    """One row of `ragtriage profiles`."""

    name: str
    source: str
    description: str
    extends: str | None
    config_hash: str
    serves: list[str] = field(default_factory=list)
    """`[replay.versions]` keys mapped to this profile."""
    is_default: bool = False
    """This profile replays requests no `[replay.versions]` entry matches."""
    shape: str = ""
    """One line: routes with k and engine, fusion, pool, rerank, top-N, refusal (see `describe_shape`)."""


def explain(ref: ProfileRef) -> str:
    """One line saying which profile ran and why, e.g.
    `profile old (1a2b3c4d5e6f): pipeline_version prod-2026.09 matched [replay.versions] 'prod-2026.09'`."""
    head = f"profile {ref.name} ({ref.config_hash})"
    if ref.matched_by == "requested":
        return f"{head}, as requested"
    if ref.matched_by in ("exact", "glob"):
        return f"{head}: pipeline_version {ref.pipeline_version} matched [replay.versions] '{ref.pattern}'"
    if ref.pipeline_version is None:
        return f"{head}, the default (no pipeline_version to map)"
    return f"{head}, the default: pipeline_version {ref.pipeline_version} has no [replay.versions] entry"


# ---------------------------------------------------------------- presets


def preset_names() -> list[str]:
    """Names of the presets shipped with the package."""
    folder = resources.files("ragtriage.config").joinpath("presets")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def _preset(name: str) -> dict[str, Any]:
    text = resources.files("ragtriage.config").joinpath("presets", f"{name}.toml").read_text("utf-8")
    return tomllib.loads(text)


# ---------------------------------------------------------------- resolution


def _all_names(settings: Settings) -> list[str]:
    return [DEFAULT_PROFILE, *sorted(settings.profiles), *preset_names()]


def _source(settings: Settings, name: str) -> str:
    if name == DEFAULT_PROFILE:
        return str(settings.config_file) if settings.config_file else "built-in defaults"
    if name in settings.profiles:
        return settings.profile_sources.get(name, f"[profiles.{name}]")
    return PRESET_SOURCE


def _overlay(settings: Settings, name: str) -> tuple[dict[str, Any], str | None, str]:
    """(overlay sections, extends, description) of a user profile or preset."""
    if name in settings.profiles:
        spec = settings.profiles[name]
        sections = {s: getattr(spec, s) for s in OVERLAY_SECTIONS if getattr(spec, s)}
        return sections, spec.extends, spec.description
    data = _preset(name)
    sections = {s: data[s] for s in OVERLAY_SECTIONS if s in data}
    return sections, None, str(data.get("description", ""))


def _unknown(settings: Settings, name: str, where: str) -> ConfigError:
    names = _all_names(settings)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return ConfigError(f"{where}: no profile '{name}'{hint} (profiles: {', '.join(names)})")


def _resolve_settings(settings: Settings, name: str, chain: tuple[str, ...] = ()) -> tuple[Settings, str]:
    """The full settings of profile `name` and its description."""
    if name == DEFAULT_PROFILE:
        return settings, "the settings file as it is"
    if name not in settings.profiles and name not in preset_names():
        raise _unknown(settings, name, "profile")
    if name in chain:
        raise ConfigError(
            f"{_source(settings, name)}: profiles extend each other in a circle "
            f"({' → '.join([*chain, name])}); remove one `extends`"
        )
    sections, extends, description = _overlay(settings, name)
    if extends is not None and extends not in _all_names(settings):
        raise _unknown(settings, extends, f"{_source(settings, name)}: extends")
    base, _ = _resolve_settings(settings, extends or DEFAULT_PROFILE, (*chain, name))
    data = base.model_dump(mode="json", exclude={"profiles", "replay"})
    rerank = sections.get("rerank")
    if isinstance(rerank, dict) and "refusal_threshold" in rerank and "refusal_threshold_score" not in rerank:
        # The base's threshold kind describes the base's threshold; this one names none (any kind).
        data["rerank"]["refusal_threshold_score"] = None
    try:
        resolved = Settings.model_validate(merge_sections(data, sections))
    except ValidationError as error:
        first = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
        raise ConfigError(describe_error(dict(first), _source(settings, name), Settings)) from None
    # A profile's settings still know every profile (a fidelity run may switch between them).
    resolved.profiles = settings.profiles
    resolved.replay = settings.replay
    resolved._config_file = settings.config_file
    resolved._home = settings._home
    resolved._profile_sources = settings.profile_sources
    check_route_engines(resolved, _source(settings, name))
    return resolved, description


def check_route_engines(settings: Settings, where: str) -> None:
    """Every `[retrieval] route_engine` value names `local` or an `[engines.NAME]` table (else ConfigError)."""
    for route, engine in settings.retrieval.route_engine.items():
        if engine != "local" and engine not in settings.engines:
            defined = ", ".join(sorted(settings.engines)) or "none defined"
            raise ConfigError(
                f"{where}: [retrieval] route_engine.{route} = '{engine}' names no [engines.{engine}] "
                f"table (engines: {defined}); add the table or use 'local'"
            )


def get_profile(settings: Settings, name: str) -> ResolvedProfile:
    """Profile `name` (a user profile, a preset, or `default`), as requested by the caller.

    Raises:
        NotFoundError: no such profile (the message lists the profiles and the nearest name).
        ConfigError: the profile's overlay is not valid.
    """
    if name != DEFAULT_PROFILE and name not in settings.profiles and name not in preset_names():
        raise NotFoundError(str(_unknown(settings, name, "--profile")))
    cache: dict[str, tuple[Settings, str]] = settings._profile_cache
    if name not in cache:
        cache[name] = _resolve_settings(settings, name)
    resolved, description = cache[name]
    return ResolvedProfile(
        name=name,
        settings=resolved,
        source=_source(settings, name),
        config_hash=resolved.config_hash(),
        description=description,
    )


def match_version(
    versions: dict[str, str], pipeline_version: str | None
) -> tuple[str, str, MatchedBy] | None:
    """(profile, matching key, "exact" | "glob") for a logged pipeline_version, or None.

    An exact key wins; among matching globs (fnmatch, case-sensitive) the one with the most
    literal characters wins, then the alphabetically first.
    """
    if pipeline_version is None:
        return None
    if pipeline_version in versions:
        return versions[pipeline_version], pipeline_version, "exact"
    globs = [p for p in versions if any(c in p for c in "*?[") and fnmatch.fnmatchcase(pipeline_version, p)]
    if not globs:
        return None
    # The most literal characters (all but `*`, `?` and `[...]`) win, then the alphabetically first.
    best = min(globs, key=lambda p: (-len(re.sub(r"\[[^\]]*\]|[*?]", "", p)), p))
    return versions[best], best, "glob"


def resolve_profile(
    settings: Settings, pipeline_version: str | None, profile: str | None = None
) -> ResolvedProfile:
    """The profile that replays a request logged with `pipeline_version`.

    `profile` given: that profile (`matched_by="requested"`). Else the `[replay.versions]` match
    (`exact` / `glob`), else `[replay] default_profile` (`matched_by="default"`; the trace and the
    CLI say so).

    Raises:
        NotFoundError: `profile` names no profile.
    """
    if profile is not None:
        chosen = get_profile(settings, profile)
        return replace(chosen, matched_by="requested", pipeline_version=pipeline_version)
    match = match_version(settings.replay.versions, pipeline_version)
    if match is None:
        chosen = get_profile(settings, settings.replay.default_profile)
        return replace(chosen, matched_by="default", pipeline_version=pipeline_version)
    name, pattern, kind = match
    return replace(
        get_profile(settings, name), matched_by=kind, pattern=pattern, pipeline_version=pipeline_version
    )


def describe_shape(settings: Settings) -> str:
    """The pipeline shape in one line, e.g.
    `bm25_raw k10, dense_raw k10 → weighted (min-max) → no rerank → top 6`; the team's own
    stages (`[stages]`) are named by their import strings."""
    whole = settings.stages.get("pipeline")
    if whole is not None:
        return f"the team's pipeline {whole.use}, run in process"
    retrieval, rerank = settings.retrieval, settings.rerank
    team = {name: spec.use for name, spec in settings.stages.items()}
    routes = []
    for route in retrieval.routes:
        k = retrieval.hits(route)
        engine = team.get(route) or retrieval.route_engine.get(route, "local")
        routes.append(f"{route} k{k}" + (f" @{engine}" if engine != "local" else ""))
    fusion = retrieval.fusion
    if "fusion" in team:
        fused = team["fusion"]
    elif fusion.method == "rrf":
        fused = f"rrf k={retrieval.rrf_k}"
    else:
        weights = ", ".join(f"{r} {w:g}" for r, w in sorted(fusion.weights.items()))
        normalization = (
            fusion.normalization
            if isinstance(fusion.normalization, str)
            else ", ".join(f"{r} {m}" for r, m in fusion.normalization.items()) or "min-max"
        )
        fused = f"{fusion.method} ({normalization}{'; ' + weights if weights else ''})"
    if fusion.keep is not None:
        fused += f" → keep {fusion.keep}"
    rewrite = f"rewrite {team['rewrite']} → " if "rewrite" in team else ""
    if not rerank.enabled:
        last = f"select {team['select']}" if "select" in team else f"top {rerank.top_n}"
        return f"{rewrite}{', '.join(routes)} → {fused} → no rerank → {last}"
    scorer = team.get("rerank") or ("features only" if rerank.backend == "none" else rerank.backend)
    top = (
        f"top {rerank.min_n}–{rerank.top_n}"
        if rerank.min_n and rerank.min_score is not None
        else f"top {rerank.top_n}"
    )
    # A cross-encoder's probability replaces the configured score whenever it scores the pool.
    kind = rerank.refusal_kind()
    calibrated_for = rerank.refusal_threshold_score
    refusal = ""
    if rerank.refusal_threshold is not None and calibrated_for not in (None, kind):
        refusal = (
            f", refusal not judged ({kind}; threshold {rerank.refusal_threshold:g} is {calibrated_for}'s)"
        )
    elif rerank.refusal_threshold is not None:
        refusal = f", refuse {kind} < {rerank.refusal_threshold:g}"
        if kind == "lexical_support" and rerank.refusal_dense_gap is not None:
            refusal += f" (dense gap < {rerank.refusal_dense_gap:g})"
    if "select" in team:
        # The team's select stage owns the final context and refusal.
        top, refusal = f"select {team['select']}", ""
    alias = ", replacing rewrite" if settings.rewrite.alias_mode == "replace" else ""
    return (
        f"{rewrite}{', '.join(routes)}{alias} → {fused} → pool {retrieval.candidate_pool} → "
        f"rerank ({scorer}) → {top}{refusal}"
    )


def list_profiles(settings: Settings) -> list[ProfileInfo]:
    """Every profile: `default`, the user's (settings file and profile files), then the presets."""
    serves: dict[str, list[str]] = {}
    for pattern, name in sorted(settings.replay.versions.items()):
        serves.setdefault(name, []).append(pattern)
    rows = []
    for name in _all_names(settings):
        resolved = get_profile(settings, name)
        extends = settings.profiles[name].extends if name in settings.profiles else None
        rows.append(
            ProfileInfo(
                name=name,
                source=resolved.source,
                description=resolved.description,
                extends=extends,
                config_hash=resolved.config_hash,
                serves=serves.get(name, []),
                is_default=name == settings.replay.default_profile,
                shape=describe_shape(resolved.settings),
            )
        )
    return rows


def check_profiles(settings: Settings) -> None:
    """Validate every profile, `[replay.versions]` and `[replay] default_profile` (called by `load_settings`).

    Raises:
        ConfigError: a bad overlay key or value, an unknown profile name, a circle of `extends`, a
            profile named like `default` or a preset, or a route naming an undefined engine.
    """
    where = str(settings.config_file) if settings.config_file else "settings"
    check_route_engines(settings, where)
    presets = set(preset_names())
    for name in settings.profiles:
        source = settings.profile_sources.get(name, f"[profiles.{name}]")
        if name == DEFAULT_PROFILE or name in presets:
            kind = "the settings file itself" if name == DEFAULT_PROFILE else "a shipped preset"
            raise ConfigError(
                f"{source}: profile name '{name}' is taken by {kind}; rename it "
                f'(use `extends = "{name}"` to start from it)'
            )
        _resolve_settings(settings, name)
    names = set(_all_names(settings))
    for pattern, name in settings.replay.versions.items():
        if name not in names:
            raise _unknown(settings, name, f"{where} [replay.versions] '{pattern}'")
    if settings.replay.default_profile not in names:
        raise _unknown(settings, settings.replay.default_profile, f"{where} [replay] default_profile")
