"""`PipelinedWriter`: the in-process ingest's writes, in a background thread."""

from __future__ import annotations

import queue
import threading
from types import TracebackType

from ragtriage.logs.batch_writer import BatchWriter
from ragtriage.logs.batches import ParsedBatch


class PipelinedWriter:
    """Runs `BatchWriter` in one background thread so that SQLite's work (which releases the GIL)
    overlaps parsing. At most two batches wait, so memory stays bounded; a write error is
    re-raised in the caller's thread at the next `submit` or at `finish`. Leaving the block, also
    by an exception such as Ctrl-C, commits every batch written so far."""

    _COMMIT = "commit"

    def __init__(self, writer: BatchWriter) -> None:
        self.writer = writer
        self.report = writer.report
        self._queue: queue.Queue[tuple[str, ParsedBatch] | str | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ragtriage-ingest-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if self._error is not None:
                    pass  # the batch after a failed one is dropped: the caller raises
                elif item == self._COMMIT:
                    self.writer.commit()
                else:
                    self.writer.write(*item)
            except BaseException as error:  # noqa: B036 (re-raised in the submitting thread)
                self._error = error
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _raise_pending(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def submit(self, source: str, batch: ParsedBatch) -> None:
        """Queue one batch (blocks while two are waiting)."""
        self._raise_pending()
        if batch.rows or batch.bad:
            self._queue.put((source, batch))

    def finish(self) -> None:
        """Write and commit every queued batch; re-raise a write error."""
        self._queue.put(self._COMMIT)
        self._queue.join()
        self._raise_pending()

    def __enter__(self) -> PipelinedWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is None:
                self.finish()
            else:
                self._queue.put(self._COMMIT)
        finally:
            self._queue.put(None)
            self._thread.join()
