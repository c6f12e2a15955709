"""Where settings come from and how their errors read: `RAGTRIAGE__…` environment overrides,
section-by-section merging, profile files next to the settings file, and one error line per
validation problem with a "did you mean" hint. `loading.load_settings` puts them together;
`set_settings_values` edits the file in place (`--write` of the tuning commands).
"""

from __future__ import annotations

import difflib
import json
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragtriage.errors import ConfigError
from ragtriage.wording import quoted

ENV_PREFIX = "RAGTRIAGE__"


def env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """`RAGTRIAGE__RERANK__TOP_N=8` → {"rerank": {"top_n": "8"}}; values are parsed as JSON when they can be."""
    tree: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not parts:
            continue
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return tree


def merge_sections(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` laid over it, table by table (neither is changed)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_sections(merged[key], value)
        else:
            merged[key] = value
    return merged


def _valid_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names valid at `loc` (the parent of the offending key).

    Walks models, `dict[str, Model]` values (the key is a part of `loc`) and tagged unions (pydantic
    puts the tag, e.g. `elasticsearch`, into `loc`)."""
    current: Any = model
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        origin = typing.get_origin(current)
        if origin is dict:
            current = typing.get_args(current)[1]
            continue
        if origin is typing.Annotated:
            current = typing.get_args(current)[0]
            parts.insert(0, part)
            continue
        if origin in (typing.Union, types.UnionType):
            members = {
                str(m.model_fields["type"].annotation.__args__[0]): m
                for m in typing.get_args(current)
                if "type" in getattr(m, "model_fields", {})
            }
            current = members.get(str(part))
            if current is None:
                return []
            continue
        fields = getattr(current, "model_fields", {})
        field = fields.get(part) or next((f for f in fields.values() if f.alias == part), None)
        if field is None:
            return []
        current = field.annotation
    while typing.get_origin(current) is typing.Annotated:
        current = typing.get_args(current)[0]
    return [field.alias or name for name, field in getattr(current, "model_fields", {}).items()]


def describe_error(error: dict[str, Any], source: str, model: type[BaseModel]) -> str:
    """One line for a validation error: the source, the dotted key and, for an unknown key, the
    nearest valid one and every valid key at that level."""
    loc = tuple(error["loc"])
    # pydantic puts an engine's `type` tag into the path (engines.NAME.<type>.key); users never write it.
    shown = loc[:2] + loc[3:] if len(loc) > 3 and loc[0] == "engines" else loc
    dotted = ".".join(str(p) for p in shown)
    if error["type"] == "extra_forbidden":
        valid = _valid_keys(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f"; did you mean '{'.'.join([*map(str, shown[:-1]), close[0]])}'?" if close else ""
        return f"{source}: unknown key '{dotted}'{hint} (valid here: {', '.join(valid)})"
    message = str(error["msg"]).removeprefix("Value error, ")
    if isinstance(error.get("input"), dict):
        # A rule over a whole table (a validator of the section): its message names the keys.
        return f"{source}: [{dotted}] {message}"
    return f"{source}: '{dotted}': {message} (got {quoted(error.get('input'))})"


def read_profile_files(path: Path, data: dict[str, Any], sources: dict[str, str]) -> None:
    """Add every `<profile_dir>/NAME.toml` next to the settings file to `data["profiles"]`."""
    replay: dict[str, Any] = data["replay"] if isinstance(data.get("replay"), dict) else {}
    folder = path.parent / str(replay.get("profile_dir", "profiles"))
    if not folder.is_dir():
        return
    profiles = data.setdefault("profiles", {})
    for file in sorted(folder.glob("*.toml")):
        name = file.stem
        if name in sources:
            raise ConfigError(
                f"{file}: profile '{name}' is also defined in {sources[name]}; keep one of the two"
            )
        try:
            with open(file, "rb") as handle:
                profiles[name] = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{file}: not valid TOML: {error}") from None
        sources[name] = str(file)


def set_settings_values(path: Path, table: Sequence[str], values: Mapping[str, Any]) -> None:
    """Set `values` in the table `table` (e.g. `("rerank", "weights")`) of the settings file at
    `path`, keeping its comments and layout; the file and missing tables are created.

    Raises:
        ConfigError: the file is not valid TOML, or a key on the table's path is not a table.
    """
    # Imported here: tomlkit costs 40-55 ms at load 30 on every command, and only `--write` edits the file.
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    path = Path(path)
    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    except TOMLKitError as error:
        raise ConfigError(f"{path}: not valid TOML ({error}); fix it, then run with --write again") from None
    node: Any = document
    for depth, name in enumerate(table, start=1):
        child = node.get(name)
        if child is None:
            child = tomlkit.table()
            node[name] = child
        if not isinstance(child, Mapping):
            dotted = ".".join(table[:depth])
            raise ConfigError(f"{path}: `{dotted}` is not a table; make it [{dotted}]")
        node = child
    for key, value in values.items():
        node[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
