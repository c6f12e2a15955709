"""Peak memory of a benchmark run: the PSS of this process and its child processes together.

PSS (proportional set size) splits the pages a fork shares between the processes sharing them,
so forked readers and workers are not counted twice. Linux only (`/proc`); elsewhere it reads 0.
"""

from __future__ import annotations

import threading
from pathlib import Path

#: Seconds between samples.
INTERVAL_S = 0.2


def pss_mb(pid: int | str) -> float:
    """PSS of one process in MB (`pid` or "self"); 0.0 when it has ended or cannot be read."""
    try:
        for row in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if row.startswith("Pss:"):
                return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def child_pids() -> list[str]:
    """The pids of this process's children, whichever of its threads started them."""
    pids: list[str] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.extend((task / "children").read_text().split())
        except OSError:
            pass
    return pids


class PssSampler(threading.Thread):
    """Samples the PSS of this process plus its children every `INTERVAL_S`; keeps the peak, and
    the largest size of `wal_path` (an SQLite WAL: disk the run borrows) when one is given."""

    def __init__(self, wal_path: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self.peak_parts: list[float] = []
        """At the peak: this process's PSS, then each child's, largest first (MB)."""
        self.wal_path = wal_path
        self.peak_wal_mb = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(INTERVAL_S):
            parts = [pss_mb("self"), *sorted((pss_mb(pid) for pid in child_pids()), reverse=True)]
            total = sum(parts)
            if total > self.peak_mb:
                self.peak_mb, self.peak_parts = total, [part for part in parts if part]
            if self.wal_path is not None:
                try:
                    self.peak_wal_mb = max(self.peak_wal_mb, self.wal_path.stat().st_size / 1e6)
                except OSError:
                    pass

    def stop(self) -> float:
        """Stop sampling; the peak PSS in MB."""
        self._done.set()
        self.join()
        return self.peak_mb
