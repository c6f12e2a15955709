"""Alias mining: turn many `alias_missing` diagnoses into dictionary entries, and write the alias file.

The alias file is TOML with one `term = ["synonym", …]` entry per line (see
`ragtriage.pipeline.rewrite.load_aliases`). `add_aliases` keeps every existing entry: a new term is
appended as one TOML entry (serialised by `tomli_w`, so comments and order above it are untouched);
new synonyms for an existing term rewrite the file through `tomli_w` (comments are then lost). A file
with a syntax error is reported with its line and never overwritten.
"""

from __future__ import annotations

import os
import re
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import tomli_w
from pydantic import BaseModel, Field

from ragtriage.errors import InputError
from ragtriage.triage.diagnose import Diagnosis
from ragtriage.triage.facts import normalize_text
from ragtriage.wording import quoted

#: File name used when `settings.rewrite.alias_file` is unset (inside the home folder).
DEFAULT_ALIAS_FILE = "aliases.toml"


class AliasSuggestion(BaseModel):
    """A dictionary entry mined from diagnoses, with the requests that support it."""

    term: str
    synonyms: list[str]
    request_ids: list[str] = Field(default_factory=list)
    confirmed: int = 0
    """How many of those diagnoses the alias counterfactual confirmed."""
    score: float = 0.0
    """Best pair score over the supporting diagnoses."""


class AliasFileChange(BaseModel):
    """What `add_aliases` did to the alias file."""

    path: str
    created: bool
    added: list[str]
    already_present: list[str]


def _same_group(known: Mapping[str, Sequence[str]], term: str, synonym: str) -> bool:
    return any(
        term in members and synonym in members
        for members in ({normalize_text(k), *(normalize_text(s) for s in v)} for k, v in known.items())
    )


def mine_aliases(
    diagnoses: Iterable[Diagnosis], known: Mapping[str, Sequence[str]] | None = None
) -> list[AliasSuggestion]:
    """Aggregate the alias pairs of `alias_missing` suggestions; pairs the dictionary already groups are
    skipped. Most supporting requests first, then most confirmations, then term."""
    known = known or {}
    entries: dict[str, AliasSuggestion] = {}
    for diagnosis in diagnoses:
        if diagnosis.suggestion.label != "alias_missing":
            continue
        confirmed = diagnosis.suggestion.confirmed_by == "alias_added"
        for pair in diagnosis.suggestion.alias_pairs:
            if _same_group(known, pair.term, pair.synonym):
                continue
            entry = entries.setdefault(pair.term, AliasSuggestion(term=pair.term, synonyms=[]))
            if pair.synonym not in entry.synonyms:
                entry.synonyms.append(pair.synonym)
            request_id = diagnosis.request_id or diagnosis.query
            if request_id not in entry.request_ids:
                entry.request_ids.append(request_id)
                entry.confirmed += int(confirmed)
            entry.score = max(entry.score, pair.score)
    return sorted(entries.values(), key=lambda e: (-len(e.request_ids), -e.confirmed, e.term))


def _load_raw(path: Path) -> tuple[str, dict[str, object]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text ({error.reason}); save the alias file as UTF-8") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib puts "(at line N, column M)" in the message; surface it as file:line.
        message = str(error)
        found = re.search(r"\(at line (\d+)", message)
        line = (
            found.group(1)
            if found
            else (str(len(text.splitlines())) if "end of document" in message else None)
        )
        where = f"{path}:{line}" if line else str(path)
        raise InputError(f"{where}: not valid TOML ({message}); fix the line, nothing was written") from None


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def add_aliases(path: Path, term: str, synonyms: Sequence[str]) -> AliasFileChange:
    """Add `term = [synonyms…]` to the alias file, creating it if needed and keeping existing entries.

    Raises:
        InputError: empty term or synonyms, an existing entry that is not a list of strings, or an
            existing file that is not valid TOML (named with its line; the file is left unchanged).
    """
    term = term.strip()
    wanted = list(dict.fromkeys(s.strip() for s in synonyms if s.strip() and s.strip() != term))
    if not term or not wanted:
        raise InputError(
            "aliases add: give a term and at least one different synonym, e.g. `aliases add 报账 报销`"
        )
    created = not path.exists()
    text, data = ("", {}) if created else _load_raw(path)
    existing = data.get(term)
    if existing is not None and (
        not isinstance(existing, list) or not all(isinstance(s, str) for s in existing)
    ):
        raise InputError(
            f"{path}: entry {quoted(term)} is not a list of strings; fix it by hand, nothing was written"
        )
    present = list(existing or [])
    added = [s for s in wanted if s not in present]
    already = [s for s in wanted if s in present]
    if added:
        if existing is None:
            entry = tomli_w.dumps({term: added}, multiline_strings=False)
            separator = "" if not text or text.endswith("\n") else "\n"
            new_text = text + separator + entry
        else:
            new_text = tomli_w.dumps({**data, term: present + added})
        tomllib.loads(new_text)  # never write a file the pipeline could not read back
        _write_atomic(path, new_text)
    return AliasFileChange(
        path=str(path), created=created and bool(added), added=added, already_present=already
    )
