"""What `ragtriage logs ingest` prints: the counts, then on stderr the lines it set aside and why."""

from __future__ import annotations

from ragtriage.commands.common import stderr_console, stdout_console
from ragtriage.logs.ingest import IngestReport
from ragtriage.logs.requests import ConflictLine, QuarantinedLine
from ragtriage.render.text import hanging_text, plural

COUNT_NAMES = (
    "read",
    "ingested",
    "merged",
    "flagged",
    "duplicates",
    "conflicts",
    "quarantined",
    "blank",
    "recovered",
)

#: Quarantined lines named on stderr after an ingest; `ragtriage logs quarantine` lists them all.
QUARANTINE_SHOWN = 10


def print_ingest_report(
    report: IngestReport,
    total_quarantined: int,
    shown: list[QuarantinedLine],
    conflicts: tuple[int, list[ConflictLine]] | None = None,
) -> None:
    """The counts on stdout; quarantined and conflicting lines, with where and why, on stderr."""
    console = stdout_console()
    width = max(len(name) for name in COUNT_NAMES)
    for name in COUNT_NAMES:
        console.print(f"{name:>{width}}: {getattr(report, name):,}")
        if name == "flagged":
            for reasons, count in _by_count(report.flagged_by_reason):
                console.print(f"{'':>{width}}  {reasons.replace('+', ' + ')}: {count:,}")
            if report.flagged:
                console.print(f"{'':>{width}}  (list them: ragtriage queue --reason REASON)")
            elif report.ingested:
                console.print(
                    hanging_text(
                        console,
                        f"{'':>{width}}  (no new request had a bad rating, an escalation, a follow-up, "
                        "empty citations, a refusal or low confidence; the rules are [logs.flagging] "
                        "settings)",
                        indent=width + 3,
                    )
                )
    for kind, count in sorted(report.quarantined_by_kind.items()):
        console.print(f"{'':>{width}}  {kind}: {count:,}")
    err = stderr_console()
    if report.quarantined:
        err.print(
            f"{plural(report.quarantined, 'line')} quarantined with file, line number, reason and bytes:"
        )
        for line in shown:
            err.print(f"  {line.source_file}:{line.line_no}: {line.reason}", soft_wrap=True)
        if total_quarantined > len(shown):
            err.print(f"  … {total_quarantined - len(shown)} more: ragtriage logs quarantine")
    if report.conflicts and conflicts is not None:
        total, lines = conflicts
        err.print(
            f"{plural(report.conflicts, 'line')} carried a request_id already stored with a different "
            "value in a field both have (a field only one has is merged in, not a conflict): the "
            "stored one is kept and the line set aside. If these are different requests, log a "
            "unique request_id ([logs.otel] request_id_from for traces); `ragtriage show REQUEST_ID` "
            "counts a request's conflicts",
            soft_wrap=True,
        )
        for conflict in lines:
            where = f"{conflict.source_file}:{conflict.line_no}" if conflict.source_file else "(no file)"
            differs = ", ".join(conflict.fields) or "fields the request schema does not compare"
            err.print(f"  {where}: {conflict.request_id} differs in {differs}", soft_wrap=True)
        if total > len(lines):
            err.print(f"  … {total - len(lines)} more")


def _by_count(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Most first, then by name."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
