"""`ragtriage kb …`: add files and folders to the knowledge base, inspect chunks, remove documents."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    echo_lines,
    index_summary,
    progress_bar,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.kb_import import import_command
from ragtriage.errors import NotFoundError, RagtriageError
from ragtriage.index import kb_sync
from ragtriage.index.index_state import index_status
from ragtriage.index.indexer import rebuild_indexes
from ragtriage.kb import service
from ragtriage.render.kb_view import print_chunk, print_chunk_table
from ragtriage.render.text import plural
from ragtriage.triage.gold_check import DeletedGold, deleted_gold
from ragtriage.wording import quoted
from ragtriage.workspace import Workspace

ProgressCallback = Callable[[int, int], None]


@click.group("kb")
def kb_group() -> None:
    """Knowledge base: documents → chunks (SQL), and the indexes built from them."""


@kb_group.command("add")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--no-index", is_flag=True, help="Store documents and chunks only; do not update the indexes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@workspace_options
def add_command(paths: tuple[Path, ...], no_index: bool, as_json: bool, where: WorkspaceAt) -> None:
    """Add or update Markdown, HTML, text, Word (.docx), PowerPoint (.pptx) and PDF files (folders are walked).

    A document's id is its front matter doc_id, else FOLDER/PATH-WITHOUT-SUFFIX for a file found in
    a folder (so `kb add faq/ reference/` keeps both index pages), else the file's stem.
    Documents added from a folder earlier and missing from it now are marked deleted.
    Exit code 2 when any file could not be added (each is named on stderr with a fix).
    """
    with where.open() as workspace, progress_bar(True) as bar:
        report = kb_sync.add_paths(
            workspace.home,
            workspace.settings,
            workspace.engine,
            list(paths),
            on_progress=bar("reading files"),
            index=not no_index,
            on_index_progress=bar("indexing chunks"),
        )
    for warning in report.warnings:
        click.echo(f"warning: {warning.path}: {warning.message}", err=True)
    for failed in report.failed:
        click.echo(f"kb add: failed: {failed.message()}", err=True)
    if as_json:
        echo_json(report)
    else:
        echo_lines(_add_summary(report))
    if report.failed:
        click.echo(
            f"kb add: {len(report.failed)} of {report.files_seen} files failed; the others were added",
            err=True,
        )
        click.get_current_context().exit(2)


def _add_summary(report: service.AddReport) -> str:
    lines = [
        f"files: {report.files_seen} seen, {report.added} added, {report.changed} changed, "
        f"{report.unchanged} unchanged, {len(report.failed)} failed",
        f"documents deleted: {report.deleted}"
        + (f" ({', '.join(report.deleted_doc_ids)})" if report.deleted else ""),
        f"chunks written: {report.chunks_written}",
        f"KB revision: {report.kb_revision}",
    ]
    if report.index is not None:
        lines.append(index_summary(report.index))
    else:
        lines.append(f"index: not updated ({report.index_skipped})")
    return "\n".join(lines)


@kb_group.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def stats_command(as_json: bool, where: WorkspaceAt) -> None:
    """Documents and chunks by status, the KB revision and the index manifest's state."""
    with where.open() as workspace:
        stats = service.kb_stats(workspace.engine, workspace.settings.kb.name)
        index = _index_status(workspace)
    notes: list[str] = []
    if as_json:
        echo_json({**stats.model_dump(mode="json"), "index": index, "notes": notes})
        return
    lines = [
        f"KB: {stats.kb}  revision {stats.revision}",
        "documents: " + (_counts(stats.documents) or "none"),
        "chunks: " + (_counts(stats.chunks) or "none"),
    ]
    if "error" in index:
        lines.append(f"index: unavailable ({index['error']})")
    else:
        lines += ["dense backend: " + _backend_line(index), "index: " + _index_line(index)]
    lines += [f"note: {note}" for note in notes]
    echo_lines("\n".join(lines))


def _backend_line(index: dict[str, Any]) -> str:
    """The dense index in use: a Qdrant server, or Qdrant Edge embedded in the home."""
    if index.get("dense_server"):
        return "Qdrant server ([index] qdrant_url)"
    return f"{index.get('dense_backend')} (embedded in the home; [index] qdrant_url for a server)"


def _index_line(index: dict[str, Any]) -> str:
    """The manifest's state in words, with the command that fixes a stale or missing index."""
    if index.get("state") == "missing":
        if not index.get("kb_chunks"):
            return "empty: the KB has no chunk yet (`ragtriage kb add DOCS` or `ragtriage kb import FILE`)"
        return "not built; run `ragtriage kb reindex`"
    parts = [
        f"{index.get('indexed_chunks', 0):,} chunks indexed at KB revision {index.get('index_revision')}",
        f"embedder {index.get('index_embedder')}",
    ]
    if index.get("imported_vectors"):
        parts.append(f"{index['imported_vectors']:,} imported vectors")
    if index.get("state") == "up_to_date":
        return "up to date; " + ", ".join(parts)
    behind = [
        f"{index.get(key, 0):,} {what}"
        for key, what in (
            ("unindexed_chunks", "chunks not indexed"),
            ("changed_chunks", "changed"),
            ("extra_chunks", "no longer in the KB"),
        )
        if index.get(key)
    ]
    if (
        index.get("dense_backend_matches") is False
        and not behind
        and index.get("index_revision") == index.get("kb_revision")
    ):
        return (
            f"dense index built with dense_backend {index.get('index_dense_backend')}, the settings name "
            f"{'qdrant_server' if index.get('dense_server') else index.get('dense_backend')}; "
            + ", ".join(parts)
            + "; run `ragtriage kb reindex`"
        )
    if index.get("dense_backend_matches") is False:
        behind.append(f"dense index built with {index.get('index_dense_backend')}")
    return (
        f"behind the KB (revision {index.get('kb_revision')}); "
        + ", ".join([*parts, *behind])
        + "; run `ragtriage kb reindex`"
    )


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {count}" for status, count in sorted(counts.items()))


def _index_status(workspace: Workspace) -> dict[str, Any]:
    try:
        return dict(index_status(workspace.home, workspace.settings, workspace.engine))
    except RagtriageError as error:
        return {"error": f"{error.title}: {error}"}


@kb_group.command("chunks")
@click.option("--doc", "doc_id", default=None, help="Only this document's chunks.")
@click.option("--with-content", is_flag=True, help="Include each chunk's full text.")
@click.option("--all", "include_deleted", is_flag=True, help="Include deleted chunks.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["auto", "table", "tsv"]),
    default="auto",
    show_default=True,
    help="table: fitted to the screen; tsv: tab-separated, one chunk a line; auto: table on a "
    "terminal, tsv in a pipe.",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def chunks_command(
    doc_id: str | None,
    with_content: bool,
    include_deleted: bool,
    output_format: str,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """List chunks in document order: chunk_id, status, anchor, title, heading_path (' › ' between
    the headings); a table on a terminal, tab-separated in a pipe."""
    with where.open() as workspace:
        chunks = service.list_chunks(
            workspace.engine,
            workspace.settings.kb.name,
            doc_id=doc_id,
            include_content=with_content,
            include_deleted=include_deleted,
        )
    if as_json:
        echo_json(chunks)
        return
    as_table = output_format == "table" or (output_format == "auto" and sys.stdout.isatty())
    if as_table and chunks:
        print_chunk_table(stdout_console(), chunks, with_content=with_content)
    elif not as_table:
        click.echo("chunk_id\tstatus\tanchor\ttitle\theading_path")
    if not chunks:
        # On stderr: the table stays a clean TSV for scripts.
        hint = (
            "its chunks are all deleted: add --all to list them"
            if doc_id is not None
            else "add documents with `ragtriage kb add DOCS` or production's chunks with `ragtriage kb import FILE`"
            + ("" if include_deleted else " (--all also lists deleted chunks)")
        )
        click.echo(f"no chunks{f' in {doc_id}' if doc_id else ' in this KB'}; {hint}", err=True)
    if as_table:
        return
    for chunk in chunks:
        path = " › ".join(chunk.heading_path)
        click.echo(f"{chunk.chunk_id}\t{chunk.status}\t{chunk.anchor or ''}\t{chunk.title}\t{path}")
        if with_content:
            click.echo(_indent(chunk.content) + "\n")


@kb_group.command("show")
@click.argument("chunk_id")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def show_command(chunk_id: str, as_json: bool, where: WorkspaceAt) -> None:
    """One chunk with its metadata, its neighbours' ids and its full text."""
    with where.open() as workspace:
        chunk = service.get_chunks(workspace.engine, [chunk_id]).get(chunk_id)
        if chunk is None:
            raise NotFoundError(f"no chunk {quoted(chunk_id)}; see `ragtriage kb chunks` for the ids")
        around = service.neighbours(workspace.engine, chunk_id)
        gone = deleted_gold(workspace.engine, [chunk_id]) if chunk.status == "deleted" else []
    deletion = gone[0] if gone else None
    if as_json:
        echo_json(
            {
                **chunk.model_dump(mode="json"),
                "neighbours": [n.chunk_id for n in around],
                "deletion": deletion.kind if deletion else None,
                "deletion_reason": _deletion_text(deletion) if deletion else None,
                "closest_live_chunk": deletion.replacement if deletion else None,
            }
        )
        return
    # An absent value is `-` (as in `ragtriage show`), never a blank that reads like a cut line.
    fields = {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "status": chunk.status,
        "title": chunk.title or "-",
        "heading_path": " › ".join(chunk.heading_path) or "-",
        "anchor": chunk.anchor or "-",
        "ordinal": chunk.ordinal,
        "version": chunk.version,
        "doc_version": chunk.doc_version or "-",
        "product_line": chunk.product_line or "-",
        "updated_at": chunk.updated_at or "-",
        "source_path": chunk.source_path or "-",
        "content_hash": chunk.content_hash[:16],
        "neighbours": ", ".join(n.chunk_id for n in around) or "-",
    }
    if deletion is not None:
        fields["deletion"] = _deletion_text(deletion)
        if deletion.replacement is not None:
            fields["closest_live"] = deletion.replacement
    if chunk.meta:
        # Imported chunks keep production's other columns; one line, as JSON, so nothing is lost.
        fields["meta"] = json.dumps(chunk.meta, ensure_ascii=False, default=str)
    print_chunk(stdout_console(), fields, chunk.content)


def _deletion_text(deletion: DeletedGold) -> str:
    """Why a deleted chunk went, in words: the stored reason, or that none was recorded."""
    if deletion.filtered is not None:
        return deletion.filtered
    if not deletion.document_live:
        return f"removed with its document {deletion.doc_id}"
    if deletion.deletion == "rechunked":
        return f"re-chunked: document {deletion.doc_id} got new chunks in the same write"
    if deletion.deletion == "removed":
        return f"removed from document {deletion.doc_id} without a replacement"
    return "reason not recorded (deleted before the store kept reasons)"


@kb_group.command("remove")
@click.argument("doc_ids", nargs=-1, required=True)
@click.option("--no-index", is_flag=True, help="Do not update the indexes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@workspace_options
def remove_command(doc_ids: tuple[str, ...], no_index: bool, as_json: bool, where: WorkspaceAt) -> None:
    """Mark documents and their chunks deleted (kept in SQL for old traces, gone from the indexes)."""
    with where.open() as workspace:
        report = kb_sync.remove_documents(
            workspace.home, workspace.settings, workspace.engine, list(doc_ids), index=not no_index
        )
    if as_json:
        echo_json(report)
        return
    click.echo(f"removed: {', '.join(report.removed) or 'none'} ({plural(report.chunks_deleted, 'chunk')})")
    if report.already_deleted:
        click.echo(f"already deleted: {', '.join(report.already_deleted)}")
    click.echo(f"KB revision: {report.kb_revision}")
    if report.index is None:
        click.echo(f"index: not updated ({report.index_skipped})")


@kb_group.command("reindex")
@click.option("--json", "as_json", is_flag=True, help="Print the index report as JSON.")
@workspace_options
def reindex_command(as_json: bool, where: WorkspaceAt) -> None:
    """Rebuild Whoosh and Qdrant from the KB (after changing the embedder; cached embeddings are reused)."""
    with where.open() as workspace, progress_bar(True) as bar:
        report = rebuild_indexes(
            workspace.home, workspace.settings, workspace.engine, on_progress=bar("indexing chunks")
        )
    if as_json:
        echo_json(report)
        return
    click.echo(
        f"reindexed: {plural(report.added + report.updated + report.unchanged, 'chunk')} "
        f"({report.embedded} embedded, {report.cache_hits} from the embedding cache, "
        f"{report.imported_vectors} with their imported vectors); "
        f"embedding {report.embed_seconds:.1f} s, other {report.other_seconds:.1f} s"
    )


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


kb_group.add_command(import_command)
