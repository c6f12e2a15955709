"""Loading the settings: the TOML file and its profile files, `RAGTRIAGE__…` environment variables
and caller overrides, validated into `Settings` and every profile checked, errors worded by `sources`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragtriage.config.profiles import check_profiles
from ragtriage.config.settings import ProfileSettings, Settings
from ragtriage.config.sources import describe_error, env_overrides, merge_sections, read_profile_files
from ragtriage.errors import ConfigError


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
    check_profiles(settings)
    return settings
