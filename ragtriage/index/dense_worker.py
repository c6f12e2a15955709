"""The dense index synced in a forked process, concurrently with `kb import`'s SQL pass and BM25 build.

Qdrant local mode is pure Python on one core, and both embedded backends lock their folder, so while
the worker runs only it opens the index (the importing process never does). The import forks it
before its pass (from a smaller process: see `kb.import_feed.DenseStream`); the worker opens the
index at the first points it is `stream`ed (the published rows the import writes with vectors) and
upserts them (read from a spill file, so the pass never waits for the worker) inside one
uncommitted block (`atomic()`: a Qdrant local transaction, or Qdrant Edge's undo journal). Once the
import's SQL transaction has committed, `commit` makes the worker commit those points and close the
index (Qdrant Edge keeps every vector it wrote mapped in memory, ~230 MB at 100k points, which the
importing process's BM25 build then needs); `sync` then gives it the index hash of every published
chunk, and unless the streamed points are exactly those, it reopens the index and runs the ordinary
dense sync (`dense_sync.sync_dense`, the same diff against the KB as committed: deletions, points
written with other content, chunks to embed, loaded from SQL by id) while the importing process
builds BM25; `finish` waits for it and returns its figures. The index contents are those of a
sequential sync.

Nothing half-done: if the import fails before its commit (a bad row, an interrupt), `abort` rolls
the worker's transaction back and the collection on disk is as it was. A failure in the worker is
raised in the importing process by the next call (`stream`, `check`, `finish`): before the SQL
commit it rolls the import back too; after it, the KB holds the import and the indexes are left
stale without a manifest, as when a sequential sync fails (the next sync repairs them).
`RagtriageError`s come back as they were raised, anything else as `RuntimeError` with the worker's
traceback.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import multiprocessing
import pickle
import signal
import tempfile
import time
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from ragtriage.config.settings import Settings
from ragtriage.errors import RagtriageError
from ragtriage.index import qdrant_clients
from ragtriage.index.dense import DenseDocument
from ragtriage.index.dense_sync import (
    DenseFigures,
    DenseIndex,
    compact_dense,
    dense_backend_of,
    open_dense,
    sync_dense,
)
from ragtriage.index.embed import get_embedder
from ragtriage.index.heap import trim_heap
from ragtriage.index.kb_chunks import load_chunks
from ragtriage.interrupts import children_ignore_interrupts
from ragtriage.workspace import Workspace

__all__ = ["DenseWorker"]

#: Points (ids, payload columns, float32 matrix) as they travel through the pipe.
_Points = tuple[list[str], list[str], list[str], list[str], np.ndarray]


class _Aborted(Exception):
    """The importing process gave up: roll the streamed points back."""


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _child(
    home: Path,
    settings: Settings,
    config_file: Path | None,
    spill: Path,
    pipe: Connection,
    parent_end: Connection,
) -> None:
    signal.signal(signal.SIGTERM, _stop)
    # Without the importing process's end of the pipe, its death ends `recv` here (EOFError).
    parent_end.close()
    qdrant_clients.forget_inherited()
    workspace = Workspace(home=home, settings=settings, config_file=config_file)
    spilled = spill.open("rb")
    spill.unlink()  # both ends are open: nothing is left behind however the processes end
    dense: DenseIndex | None = None
    try:
        # Forked before the import's pass: the index is opened when the first points come (an
        # import that writes none aborts this process without it ever opening the index).
        kind, _ = pipe.recv()
        if kind == "abort":
            raise _Aborted
        embedder = get_embedder(settings.embedder)
        streaming = open_dense(workspace, embedder)
        dense = streaming
        try:
            before = {chunk_id: hashes[1] for chunk_id, hashes in streaming.indexed_hashes().items()}
            streamed = _Streamed(before)
            began = time.perf_counter()
            with streaming.atomic():
                while True:
                    if kind == "abort":
                        raise _Aborted
                    if kind == "commit":
                        break
                    points: _Points = pickle.load(spilled)
                    ids, doc_ids, content_hashes, index_hashes, matrix = points
                    streaming.upsert(
                        [
                            DenseDocument(chunk_id, doc_id, content_hash, ihash, vector)
                            for chunk_id, doc_id, content_hash, ihash, vector in zip(
                                ids, doc_ids, content_hashes, index_hashes, matrix, strict=True
                            )
                        ]
                    )
                    streamed.add(ids, index_hashes)
                    kind, _ = pipe.recv()
            streamed_seconds = time.perf_counter() - began
            # The index is committed. Close it while the importing process gets to the sync and
            # builds BM25: Qdrant Edge keeps every vector it wrote mapped (~230 MB at 100k points),
            # and after an import the sync mostly has nothing left to write.
            dense = None
            streaming.close()
            gc.collect()
            trim_heap()  # what the index and its undo journal freed, while this process waits
            kind, wanted = pipe.recv()
            if kind != "sync":
                raise _Aborted  # the sync failed in the importing process before it got here
            began = time.perf_counter()
            if streamed.nothing_left(wanted):
                figures = DenseFigures(before=before, collection=streaming.collection, where=streaming.where)
                figures.dense_seconds = time.perf_counter() - began
            else:
                dense = open_dense(workspace, embedder)
                # The committed index holds `before` updated by the streamed points.
                current = {chunk_id: hashes[1] for chunk_id, hashes in dense.indexed_hashes().items()}
                figures = sync_dense(
                    workspace,
                    dense,
                    embedder,
                    wanted,
                    lambda ids: list(load_chunks(workspace, ids)[0].values()),
                    before,
                    current=current,
                )
                compact_dense(dense, figures)
            figures.dense_seconds += streamed_seconds
            figures.imported_vectors += streamed.count
            figures.cpu_seconds = time.process_time()
            pipe.send(("done", figures))
        finally:
            if dense is not None:
                dense.close()
    except (_Aborted, EOFError):
        pass  # the import failed, or its process ended: the streamed points were rolled back
    except (SystemExit, KeyboardInterrupt):
        pass  # the importing process stopped this one (or the user did, and it is stopping too)
    except RagtriageError as error:
        with contextlib.suppress(OSError):
            pipe.send(("ragtriage_error", error))
    except BaseException as error:  # noqa: BLE001 (reported to the importing process, which raises it)
        with contextlib.suppress(OSError):
            pipe.send(("error", "".join(traceback.format_exception(error))))
    finally:
        spilled.close()
        workspace.close()
        pipe.close()


def _pair(chunk_id: str, index_hash: str) -> bytes:
    return hashlib.blake2b(f"{chunk_id}\0{index_hash}".encode(), digest_size=16).digest()


class _Streamed:
    """The points streamed during an import, on top of the index's state `before` (chunk id →
    index hash), held as 16-byte digests of (chunk id, index hash): a third of the memory of a
    chunk id → index hash dict (about 25 MB at 100k points), and enough to tell whether the sync
    has anything left. Each chunk id comes at most once (an import rejects duplicate ids)."""

    def __init__(self, before: dict[str, str]) -> None:
        self.before = before
        self.count = 0
        self.new = 0
        """Streamed chunk ids the index did not hold before."""
        self.replaced = False
        """A point held before was written with another index hash."""
        self._pairs: set[bytes] = set()

    def add(self, chunk_ids: Sequence[str], index_hashes: Sequence[str]) -> None:
        for chunk_id, index_hash in zip(chunk_ids, index_hashes, strict=True):
            prior = self.before.get(chunk_id)
            if prior is None:
                self.new += 1
            elif prior != index_hash:
                self.replaced = True
            self._pairs.add(_pair(chunk_id, index_hash))
        self.count += len(chunk_ids)

    def nothing_left(self, wanted: dict[str, str]) -> bool:
        """What `sync_dense` + `compact_dense` would leave as it is: the index (`before` updated by
        the streamed points) holds exactly the `wanted` chunks (chunk id → index hash), and no
        point it held before was replaced."""
        return (
            not self.replaced
            and len(self.before) + self.new == len(wanted)
            and all(
                self.before.get(cid) == ihash or _pair(cid, ihash) in self._pairs
                for cid, ihash in wanted.items()
            )
        )


class DenseWorker:
    """A forked process that owns the dense index during an import (see the module docstring)."""

    def __init__(self, workspace: Workspace) -> None:
        context = multiprocessing.get_context("fork")
        self._pipe, child_end = context.Pipe(duplex=True)
        # Points go through a spill file, the pipe only says a batch is there: a pipe would hold
        # the import's pass to the worker's pace (the pass is two to three times faster).
        self._spill_dir = tempfile.TemporaryDirectory(prefix="ragtriage-dense-")
        spill = Path(self._spill_dir.name) / "points.pickle"
        self._spill = spill.open("wb")
        # The child opens the backend this process resolved (`auto` never reaches it).
        index = workspace.settings.index.model_copy(update={"dense_backend": dense_backend_of(workspace)})
        settings = workspace.settings.model_copy(update={"index": index})
        gc.freeze()  # the child's collector leaves this process's objects (and their pages) alone
        try:
            self._process = context.Process(
                target=_child,
                args=(
                    workspace.home,
                    settings,
                    workspace.config_file,
                    spill,
                    child_end,
                    self._pipe,
                ),
                name="ragtriage-dense-index",
                daemon=True,
            )
            with children_ignore_interrupts():  # stopped by this process, which rolls it back
                self._process.start()
        finally:
            gc.unfreeze()
        child_end.close()
        self._state = "streaming"

    def stream(self, documents: Sequence[DenseDocument]) -> None:
        """Send points to upsert (uncommitted until `commit`); raises the worker's error if it failed."""
        self.check()
        if not documents:
            return
        matrix = np.stack([np.asarray(doc.vector, dtype=np.float32) for doc in documents])
        points: _Points = (
            [doc.chunk_id for doc in documents],
            [doc.doc_id for doc in documents],
            [doc.content_hash for doc in documents],
            [doc.index_hash for doc in documents],
            matrix,
        )
        pickle.dump(points, self._spill, protocol=pickle.HIGHEST_PROTOCOL)
        self._spill.flush()
        self._send(("points", None))

    def check(self) -> None:
        """Raise the worker's error if it has reported one."""
        if self._pipe.poll():
            self._raise(self._receive())

    def commit(self) -> None:
        """The KB has committed: commit the streamed points and sync the rest of the dense index."""
        self._send(("commit", None))
        self._state = "syncing"

    def sync(self, wanted: dict[str, str]) -> None:
        """Sync the dense index to hold exactly `wanted` (chunk id → index hash of every published
        chunk); the worker loads from SQL only the chunks it has to write."""
        self._send(("sync", wanted))

    def finish(self) -> DenseFigures:
        """Wait for the worker's sync and return its figures (raises its error)."""
        message = self._receive()
        if message[0] != "done":
            self._raise(message)
        self._state = "done"
        self._process.join()
        figures: DenseFigures = message[1]
        return figures

    def close(self) -> None:
        """Roll back and stop a worker that has not finished (an import that failed); then wait for it."""
        if self._state == "streaming":
            with contextlib.suppress(OSError):
                self._pipe.send(("abort", None))
            self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._state = "done"
        self._pipe.close()
        self._spill.close()
        self._spill_dir.cleanup()

    def _send(self, message: tuple[str, Any]) -> None:
        try:
            self._pipe.send(message)
        except OSError:
            self.check()  # the worker ended: raise what it said
            raise RuntimeError(self._died()) from None

    def _receive(self) -> tuple[str, Any]:
        try:
            message: tuple[str, Any] = self._pipe.recv()
        except EOFError:
            raise RuntimeError(self._died()) from None
        return message

    def _died(self) -> str:
        self._process.join(timeout=5)
        return f"the dense index process ended unexpectedly (exit code {self._process.exitcode})"

    def _raise(self, message: tuple[str, Any]) -> None:
        self._state = "failed"
        kind, payload = message
        if kind == "ragtriage_error":
            raise payload
        if kind == "error":
            raise RuntimeError(f"the dense index process failed:\n{payload}")
        raise RuntimeError(f"the dense index process sent {kind!r} unexpectedly")
