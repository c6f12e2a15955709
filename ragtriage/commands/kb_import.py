"""`ragtriage kb import`: production's chunk table with its own ids (and vectors) into the KB."""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    echo_lines,
    index_summary,
    progress_bar,
    workspace_options,
)
from ragtriage.index.kb_sync import import_source, interrupted_message
from ragtriage.kb.import_mapping import parse_map_option
from ragtriage.kb.import_report import ImportReport
from ragtriage.kb.importer import ImportSpec
from ragtriage.wording import plural


@click.command("import")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--sql", "sql_url", default=None, help="SQLAlchemy URL to read chunks from (with --query).")
@click.option("--query", default=None, help="SELECT returning one row per chunk (with --sql).")
@click.option("--qdrant-url", default=None, help="Qdrant server to scroll chunks from (read only).")
@click.option(
    "--qdrant-path",
    default=None,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Qdrant local-mode folder to scroll chunks from (read only).",
)
@click.option("--collection", default=None, help="Qdrant collection (with --qdrant-url or --qdrant-path).")
@click.option(
    "--map",
    "map_values",
    multiple=True,
    help="field=column pairs, comma-separated, e.g. chunk_id=id,content=text (payload.x for Qdrant); "
    "a column may be a path into an object or JSON string, e.g. content=node.text.",
)
@click.option(
    "--vector-field", default=None, help="Column holding each chunk's vector (Qdrant: the vector name)."
)
@click.option(
    "--encoding", default=None, help="Text encoding of a CSV/JSONL file (default UTF-8), e.g. gb18030."
)
@click.option(
    "--full", is_flag=True, help="The source is the whole KB: imported chunks missing from it are deleted."
)
@click.option(
    "--skip-bad-rows", is_flag=True, help="Leave bad rows out (counted as rejected) instead of stopping."
)
@click.option("--no-index", is_flag=True, help="Store the chunks only; do not update the indexes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@workspace_options
def import_command(
    path: Path | None,
    sql_url: str | None,
    query: str | None,
    qdrant_url: str | None,
    qdrant_path: Path | None,
    collection: str | None,
    map_values: tuple[str, ...],
    vector_field: str | None,
    encoding: str | None,
    full: bool,
    skip_bad_rows: bool,
    no_index: bool,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Import production's chunks from a JSONL/CSV/Parquet FILE, a SQL query or a Qdrant collection.

    Ids are kept verbatim; columns not mapped to a chunk field are kept as chunk metadata.
    Collections and dumps written by LlamaIndex or LangChain (also a docstore.json) need no --map.
    Re-importing an unchanged source writes and embeds nothing. Vectors given with --vector-field
    (or scrolled from Qdrant) go into the dense index as given. A bad row stops the import before
    anything is written (exit 2), unless --skip-bad-rows.
    """
    spec = ImportSpec(
        path=path,
        encoding=encoding,
        sql_url=sql_url,
        query=query,
        qdrant_url=qdrant_url,
        qdrant_path=qdrant_path,
        collection=collection,
        map=parse_map_option(map_values),
        vector_field=vector_field,
    )
    try:
        with where.open() as workspace, progress_bar(True) as bar:
            report = import_source(
                workspace.home,
                workspace.settings,
                workspace.engine,
                spec,
                full=full,
                skip_bad_rows=skip_bad_rows,
                index=not no_index,
                on_progress=bar("reading the source"),
                on_index_progress=bar("indexing chunks"),
            )
    except KeyboardInterrupt as interrupt:
        if str(interrupt):
            raise  # it says what was stored

        raise KeyboardInterrupt(interrupted_message(None)) from None  # before the import began
    for rejected in report.rejected_rows:
        click.echo(f"kb import: rejected: {rejected.message()}", err=True)
    if report.rejected > len(report.rejected_rows):
        click.echo(
            f"kb import: … and {report.rejected - len(report.rejected_rows)} more rejected rows", err=True
        )
    if as_json:
        echo_json({**report.model_dump(mode="json"), "adds_up": report.adds_up})
        return
    echo_lines(_summary(report))


def _summary(report: ImportReport) -> str:
    lines = [f"source: {report.source}", f"rows: {report.counts_line()}"]
    if report.same_source_as_last:
        lines.append(
            "not read again: the same file and settings as the last import into this KB revision "
            "(the counts are that import's)"
        )
    if report.recognised is not None:
        read = ", ".join(f"{field} from {path}" for field, path in report.recognised_map.items())
        lines.append(
            f"recognised {report.recognised}: {read or 'no field read'}; "
            "to read a field from elsewhere, --map FIELD=COLUMN (or a path into one)"
        )
    if report.deleted_by:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(report.deleted_by.items()))
        lines.append(
            f"deleted: rows the status filters keep out of retrieval ({reasons}); stored as deleted chunks, "
            "their ids stay known ([kb.import] retrievable_statuses)"
        )
    if report.absent_mapped:
        lines.append(
            f"absent: a mapped column is missing from {plural(report.absent_mapped, 'row')}, read as null "
            f"(first at {report.absent_mapped_first}); if those rows name it otherwise, fix --map"
        )
    if report.missing:
        lines.append(f"missing from the source (--full): {plural(report.missing, 'chunk')} marked deleted")
    for warning in report.mapping_warnings:
        lines.append(f"warning: {warning}")
    if report.suggested_map:
        pairs = ",".join(f"{field}={column}" for field, column in report.suggested_map.items())
        lines.append(
            f"hint: kept as metadata, though they look like chunk fields: {pairs.replace(',', ', ')}; "
            f"to use them add --map {pairs} (or [kb.import] map)"
        )
    lines.append(f"chunks written: {report.written:,}")
    if report.documents_removed:
        lines.append(
            f"documents removed: {report.documents_removed:,}, left with no chunk when their chunks "
            "moved to other documents (doc_id is mapped otherwise than before)"
        )
    if report.vectors:
        lines.append(
            f"vectors: {report.vectors:,} given ({report.vector_dim}-d, recorded as {report.vector_embedder})"
        )
    lines.append(f"KB revision: {report.kb_revision}")
    if report.index is not None:
        lines.append(index_summary(report.index))
    else:
        lines.append(f"index: not updated ({report.index_skipped})")
    lines.append(f"time: read {report.read_seconds:.1f} s, write {report.write_seconds:.1f} s")
    return "\n".join(lines)
