"""Benchmark `ragtriage fidelity` against the replay floor of the same requests, in one run.

The fixture KB is indexed with the fixture's production settings, and the fixture traffic is cycled
into `--requests` logged requests (new request ids, everything else as logged). Two timings over
the same requests, with the same pipelines and batches of 64:

- floor: what any replay must do: the pipeline's own embedding step for the query texts of the
  dense routes (one call per batch, identical texts once) and every route search; the routes are
  planned before the clock starts (normalize + rewrite are not part of the floor);
- fidelity: `measure_fidelity` as the command runs it: read and parse the stored requests, replay
  each with its profile at its time (rewrite, searches, fusion, rerank, trace), compare every logged
  stage, resolve the logged ids against the KB, store one row per request, build the report.

Target (issue 13): fidelity ≤ 1.3 × the floor at 10,000 requests.

Usage:
    python scripts/bench_fidelity.py [--requests 10000] [--home DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ragtriage.index.kb_sync import add_paths  # noqa: E402
from ragtriage.logs.ingest import ingest_lines  # noqa: E402
from ragtriage.pipeline.pipeline import route_k  # noqa: E402
from ragtriage.pipeline.types import RunOptions  # noqa: E402
from ragtriage.replay.fidelity_run import measure_fidelity, plan_replays, select_requests  # noqa: E402
from ragtriage.workspace import Workspace  # noqa: E402
from ragtriage_demo.demo import seed_embedding_cache  # noqa: E402

FIXTURES = REPO_ROOT / "fixtures"
PRODUCTION = FIXTURES / "logs" / "production.toml"
TRAFFIC = FIXTURES / "logs" / "requests.jsonl"
RATIO_TARGET = 1.3
BATCH = 64


def build_home(home: Path, requests: int) -> None:
    """Index the fixture KB and ingest `requests` lines cycled from the fixture traffic (once per home)."""
    marker = home / f"bench-fidelity-{requests}-v2.done"
    if marker.exists():
        return
    workspace = Workspace.open(home, PRODUCTION)
    try:
        seed_embedding_cache(workspace)
        add_paths(workspace.home, workspace.settings, workspace.engine, [FIXTURES / "kb"])
        source = [
            json.loads(line) for line in TRAFFIC.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        lines = []
        for number in range(requests):
            cycle, index = divmod(number, len(source))
            line = dict(source[index])
            line["request_id"] = f"b{number:06d}-{line['request_id']}"
            # Each cycle a few days later, so requests in time order keep the traffic's own mix of
            # queries (copies with one timestamp would sit together and share their embeddings).
            ts = datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00")) + timedelta(days=3 * cycle)
            line["ts"] = ts.isoformat()
            lines.append(json.dumps(line, ensure_ascii=False))
        report = ingest_lines(workspace.engine, lines)
        assert report.reconciles(), report
    finally:
        workspace.close()
    marker.touch()


def replay_floor(workspace: Workspace) -> tuple[float, int, int]:
    """(seconds, texts embedded, searches): the pipeline's own embedding step and route searches
    for every stored request, batch by batch, with each request's profile."""
    records = select_requests(workspace.engine)
    planned: list[tuple[Any, list[Any], list[RunOptions]]] = []
    for group in plan_replays(workspace, records):
        pipeline = group.pipeline
        pipeline.warm_up()
        options = [RunOptions(as_of=r.ts) for r in group.records]
        # Normalize, rewrite and route planning run before the clock: the floor is only what any
        # replay must pay for, embedding the query texts and searching.
        prepared = [
            pipeline._prepare(r.raw_query, o, []) for r, o in zip(group.records, options, strict=True)
        ]
        planned.append((pipeline, prepared, options))
    embedded = searches = 0
    started = time.perf_counter()
    for pipeline, prepared, options in planned:
        for start in range(0, len(prepared), BATCH):
            batch = prepared[start : start + BATCH]
            vectors, _ = pipeline._embed(batch)  # one call per batch, identical texts once
            embedded += 0 if vectors is None else len(vectors)
            for item, option in zip(batch, options[start : start + BATCH], strict=True):
                for route in item.routes:
                    if route.skip_flag is None:
                        pipeline._search(route, vectors, route_k(pipeline.settings.retrieval, route, option))
                        searches += 1
    return time.perf_counter() - started, embedded, searches


def main(argv: Sequence[str] | None = None) -> int:
    """Build (or reuse) the home, time the floor and the fidelity run, print RESULT lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument(
        "--home", type=Path, default=None, help="home to build or reuse (default: a temp dir)"
    )
    parser.add_argument("--quick", action="store_true", help="300 requests: checks the wiring")
    args = parser.parse_args(argv)
    requests = 300 if args.quick else args.requests
    home = args.home or Path(tempfile.gettempdir()) / f"ragtriage-bench-fidelity-{requests}"
    build_home(home, requests)
    workspace = Workspace.open(home, PRODUCTION)
    try:
        floor_s, embedded, searches = replay_floor(workspace)
        started = time.perf_counter()
        report = measure_fidelity(workspace)
        fidelity_s = time.perf_counter() - started
    finally:
        workspace.close()
    ratio = fidelity_s / floor_s
    load = os.getloadavg()[0]
    print(
        f"{report.replayed} requests: floor {floor_s:.1f} s ({embedded} texts embedded, {searches} searches), "
        f"fidelity {fidelity_s:.1f} s (replay {report.replay_seconds:.1f} s), ratio {ratio:.2f}; "
        f"{report.faithful_requests} reproduced exactly, {report.unexplained_requests} unexplained; load {load:.2f}"
    )
    mode = "quick" if args.quick else "full"
    print(
        f"RESULT name=fidelity_run value={fidelity_s:.2f} unit=s target=ratio<={RATIO_TARGET} "
        f"ratio={ratio:.3f} baseline=replay_floor requests={report.replayed} load={load:.2f} mode={mode}"
    )
    return 0 if ratio <= RATIO_TARGET or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
