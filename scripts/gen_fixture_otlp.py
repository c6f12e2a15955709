"""Write the fixture traffic as OTLP/JSON, the way an OpenTelemetry Collector's file exporter does.

    .venv/bin/python scripts/gen_fixture_otlp.py    # writes fixtures/logs/requests.otlp.jsonl.gz

Each line of `fixtures/logs/requests.jsonl` is recorded as an OpenInference trace with the real
OpenTelemetry SDK (`tests/trace_producers.py`: root CHAIN, rewrite, BM25 and vector RETRIEVERs,
RERANKER, LLM; every third request's feedback on an EVALUATOR span in its own trace, linked to
the root), encoded by the OTLP exporter's encoder and written in hex-id Collector form, 20 spans
per line so traces are split across lines. `ragtriage logs ingest` stores the same requests,
stage lists and flags from it as from `requests.jsonl`. Deterministic: same input, same bytes.
Needs the dev extra (opentelemetry-sdk, openinference-semantic-conventions).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ragtriage.logs.schema import map_flat_form  # noqa: E402
from tests.trace_producers import make_tracer, otlp_lines, record_request  # noqa: E402

SOURCE = REPO_ROOT / "fixtures" / "logs" / "requests.jsonl"
DEFAULT_OUT = REPO_ROOT / "fixtures" / "logs" / "requests.otlp.jsonl.gz"
SPANS_PER_LINE = 20


def generate(source: Path, out: Path) -> int:
    """Write `out` from `source`; returns the number of requests."""
    tracer, exporter = make_tracer(seed=20261102)
    count = 0
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines()):
        if line.strip():
            record_request(
                tracer,
                map_flat_form(json.loads(line)),
                feedback_as="evaluator" if number % 3 == 0 else "annotation",
            )
            count += 1
    data = otlp_lines(exporter.get_finished_spans(), per_line=SPANS_PER_LINE).encode("utf-8")
    with (
        open(out, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as handle,
    ):
        handle.write(data)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    count = generate(args.source, args.out)
    print(f"{args.out}: {count} requests as OTLP/JSON ({args.out.stat().st_size:,} bytes gzip)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
