"""Which stored request a later line or late feedback belongs to, for ingest (`logs.ingest`).

A trace is stored under its request id, and `request_trace` keys it by `trace:ID` and
`span:ROOT_SPAN_ID` too (`ingest_sql.requests_of_traces`). Feedback that arrives after its trace
names only those; a trace read without the span that carries its request id (a part of a trace, a
Langfuse export without its traces file) is known by its trace id until a later reading names its
own id. No I/O: the caller reads the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ragtriage.logs.formats.assemble import Late
from ragtriage.logs.log_line import BadLine, LogLine
from ragtriage.logs.reader import parse_line
from ragtriage.logs.schema import map_flat_form


def known_as(line: LogLine, traced: Mapping[str, str]) -> LogLine:
    """`line` under the id its trace is stored by, when the line has no request id of its own
    (its trace id stands in: a part of a trace, a Langfuse export without its traces file)."""
    owner = traced.get(f"trace:{line.request_id}")
    if owner is None or owner == line.request_id:
        return line
    body = orjson.loads(line.body)
    body["request_id"] = owner
    renamed = parse_line(orjson.dumps(body), line.line_no)
    return renamed if isinstance(renamed, LogLine) else line


def renames(
    lines: list[LogLine], traced: Mapping[str, str], stored: dict[str, str]
) -> list[tuple[str, str, str]]:
    """`(stored id, line's id, body under the line's id)` for stored requests known by their trace
    id only, whose trace a line now gives its own request id: the stored request is to be renamed
    (`stored` is updated to match)."""
    found: dict[str, tuple[str, str]] = {}
    for line in lines:
        for key in line.trace_keys:
            owner = traced.get(key)
            if (
                owner is None
                or key != f"trace:{owner}"
                or owner == line.request_id
                or owner in found
                or owner not in stored
                or line.request_id in stored
            ):
                continue
            body = orjson.loads(stored.pop(owner))
            body["request_id"] = line.request_id
            stored[line.request_id] = orjson.dumps(body).decode("utf-8")
            found[owner] = (line.request_id, stored[line.request_id])
    return [(old, new, body) for old, (new, body) in found.items()]


def late_owners(found: Mapping[str, str], late: list[Late]) -> list[list[str]]:
    """For each late feedback item, the request ids it may belong to, best first: the stored
    requests of its trace and span keys (`found`), then its trace id itself (the request id of a
    trace ingested without one of its own)."""
    return [
        list(
            dict.fromkeys(
                [found[key] for key in item.keys if key in found]
                + [key[len("trace:") :] for key in item.keys if key.startswith("trace:")]
            )
        )
        for item in late
    ]


def late_lines(
    late: list[Late], owners: list[list[str]], stored: Mapping[str, str]
) -> tuple[list[LogLine], list[BadLine]]:
    """Late feedback as lines that add its feedback and annotations to the stored request it names;
    the items naming no stored request as `orphan_feedback` quarantine entries."""
    lines: list[LogLine] = []
    orphans: list[BadLine] = []
    for item, ids in zip(late, owners, strict=True):
        request_id = next((rid for rid in ids if rid in stored), None)
        orphan = item.orphan
        if request_id is None:
            orphans.append(BadLine(orphan.line_no, orphan.kind, orphan.message, orphan.fix, orphan.raw))
            continue
        record = map_flat_form(orjson.loads(stored[request_id]))
        otel = record.get("otel")
        root = otel.get("root_span_id") if isinstance(otel, dict) else None
        annotations = [{"span_id": root, **a} if root and "span_id" not in a else a for a in item.annotations]
        body: dict[str, Any] = {"request_id": request_id, "raw_query": record.get("raw_query")}
        if annotations:
            body["otel"] = {"annotations": annotations}
        if item.feedback:
            body["feedback"] = item.feedback
        line = parse_line(orjson.dumps(body), item.line_no)
        if isinstance(line, LogLine):
            lines.append(line)
        elif line is not None:  # the stored request no longer validates: say so, count it
            orphans.append(line)
    return lines, orphans
