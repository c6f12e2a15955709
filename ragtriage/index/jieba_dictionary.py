"""jieba's prefix dictionary, kept as an SQLite file in the user cache folder and read on demand.

jieba's prefix dictionary has about 500,000 entries and loading it takes about a second, while one
query needs a few hundred of them. `new_tokenizer` therefore gives a private `jieba.Tokenizer`
whose `FREQ` is a `PrefixDictionary` (read entry by entry, remembered); after `FULL_LOAD_AFTER`
distinct lookups (indexing, a long batch) the whole dictionary is loaded as jieba normally does.
Both hold the same entries, so the tokens are the same either way. `ragtriage.index.analyzer`
segments with `shared_tokenizer()`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import threading
import warnings
from pathlib import Path

from platformdirs import user_cache_path

with warnings.catch_warnings():
    # jieba's sources contain invalid escape sequences and it imports pkg_resources.
    warnings.simplefilter("ignore", SyntaxWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.simplefilter("ignore", UserWarning)
    import jieba

__all__ = ["FULL_LOAD_AFTER", "PrefixDictionary", "dictionary_cache_dir", "new_tokenizer", "shared_tokenizer"]

#: Distinct dictionary lookups after which the whole dictionary is loaded into memory.
FULL_LOAD_AFTER = 20_000
_lock = threading.Lock()
_shared: jieba.Tokenizer | None = None
_MISSING = object()


def dictionary_cache_dir() -> Path:
    """Where jieba's dictionary caches live: `$RAGTRIAGE_JIEBA_CACHE_DIR`, else the user cache folder."""
    configured = os.environ.get("RAGTRIAGE_JIEBA_CACHE_DIR")
    return Path(configured) if configured else user_cache_path("ragtriage") / "jieba"


def _dictionary_file() -> Path:
    package: Path = Path(jieba.__file__).resolve().parent
    return package / str(jieba.DEFAULT_DICT_NAME)


def _prefix_db_path(folder: Path) -> Path:
    """One file per jieba version and dictionary (size and mtime), so an upgrade never reads a stale one."""
    stat = _dictionary_file().stat()
    return folder / f"prefix-{jieba.__version__}-{stat.st_size}-{int(stat.st_mtime)}.sqlite"


def _write_prefix_db(path: Path, freq: dict[str, int], total: int) -> None:
    """Write the prefix dictionary to `path` atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(handle)
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.execute(
                "CREATE TABLE freq (word TEXT PRIMARY KEY, freq INTEGER NOT NULL) WITHOUT ROWID"
            )
            connection.execute("CREATE TABLE meta (total INTEGER NOT NULL)")
            connection.executemany("INSERT INTO freq VALUES (?, ?)", freq.items())
            connection.execute("INSERT INTO meta VALUES (?)", (total,))
            connection.commit()
        finally:
            connection.close()
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class PrefixDictionary:
    """jieba's `FREQ` (word or word prefix → frequency) read from SQLite entry by entry, remembered.

    Implements what jieba reads: `in`, `[]` and `get`. After `FULL_LOAD_AFTER` distinct lookups
    the owning tokenizer is switched to the in-memory dictionary jieba builds itself.
    """

    def __init__(self, path: Path, tokenizer: jieba.Tokenizer) -> None:
        self._connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._tokenizer = tokenizer
        self._memo: dict[str, int | None] = {}
        self._lock = threading.Lock()
        row = self._connection.execute("SELECT total FROM meta").fetchone()
        self.total = int(row[0])

    def get(self, word: str, default: int | None = None) -> int | None:
        value = self._memo.get(word, _MISSING)
        if value is _MISSING:
            with self._lock:
                row = self._connection.execute("SELECT freq FROM freq WHERE word = ?", (word,)).fetchone()
            value = None if row is None else int(row[0])
            self._memo[word] = value
            if len(self._memo) > FULL_LOAD_AFTER:
                self._load_everything()
        return default if value is None else value  # type: ignore[return-value]

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.get(word) is not None

    def __getitem__(self, word: str) -> int:
        value = self.get(word)
        if value is None:
            raise KeyError(word)
        return value

    def _load_everything(self) -> None:
        tokenizer = self._tokenizer
        with _lock:
            if tokenizer.FREQ is self:
                tokenizer.initialized = False
                tokenizer.initialize()  # jieba's own marshal cache in the same folder
                self._connection.close()


def new_tokenizer() -> jieba.Tokenizer:
    """A private jieba tokenizer on the SQLite prefix dictionary (written on first use)."""
    # jieba reports "Building prefix dict…" at DEBUG on its own logger; keep that noise out.
    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    folder = dictionary_cache_dir()
    tokenizer.tmp_dir = str(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = _prefix_db_path(folder)
        if not path.exists():
            tokenizer.initialize()
            _write_prefix_db(path, tokenizer.FREQ, tokenizer.total)
            return tokenizer
        lazy = PrefixDictionary(path, tokenizer)
    except (OSError, sqlite3.Error):
        # A read-only or broken cache folder costs speed, never correctness.
        tokenizer.tmp_dir = None
        tokenizer.initialized = False
        tokenizer.initialize()
        return tokenizer
    tokenizer.FREQ, tokenizer.total = lazy, lazy.total
    tokenizer.initialized = True
    return tokenizer


def shared_tokenizer() -> jieba.Tokenizer:
    """The module's jieba tokenizer, created once."""
    global _shared
    if _shared is None:
        with _lock:
            if _shared is None:
                _shared = new_tokenizer()
    return _shared
