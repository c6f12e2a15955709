"""Rich view of `replay REQUEST_ID`: per stage, the logged list next to the replayed one.

Each row shows a logged chunk and a replayed chunk at the same rank. Markers: `lost` (only in
the log), `new` (only in the replay, within the logged list's depth), `↑n`/`↓n` (moved),
`unknown` (the KB does not know the logged id), `★` gold. All data goes into `rich.text.Text`,
never into markup: ids and queries print literally.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, Group, RenderableType
from rich.text import Text

from ragtriage.config.profiles import explain
from ragtriage.logs.schema import STAGE_NAMES
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import PLACE_HEADER, Hanging, chunk_place, plural
from ragtriage.replay.logged import FinalChunk, LoggedReplay, StageDiff

GOLD_MARK = "★ "


def _logged_cell(chunk_id: str, diff: StageDiff, gold: set[str]) -> Text:
    text = Text(GOLD_MARK if chunk_id in gold else "", style="bold green")
    if chunk_id in diff.unknown:
        text.append(chunk_id, style="magenta")
        text.append("  unknown", style="bold magenta")
        return text
    text.append(chunk_id, style="bold green" if chunk_id in gold else "")
    if chunk_id in diff.lost:
        text.append("  lost", style="bold red")
    return text


def _replayed_cell(chunk_id: str, position: int, diff: StageDiff, gold: set[str]) -> Text:
    text = Text(GOLD_MARK if chunk_id in gold else "", style="bold green")
    text.append(chunk_id, style="bold green" if chunk_id in gold else "")
    if chunk_id in diff.gained:
        # Past the end of a short logged list nothing can be said: production may have had it too.
        if _compared(position, diff):
            text.append("  new", style="bold cyan")
        return text
    change = next((c for c in diff.rank_changes if c.chunk_id == chunk_id), None)
    if change is not None:
        arrow = f"↑{change.delta}" if change.delta > 0 else f"↓{-change.delta}"
        text.append(f"  {arrow}", style="green" if change.delta > 0 else "yellow")
    return text


def _compared(position: int, diff: StageDiff) -> bool:
    """True when the replayed row at 0-based `position` lies within the logged list's depth."""
    return not diff.logged_missing and position < len(diff.logged)


def stage_table(stage: str, diff: StageDiff, gold: set[str]) -> FitTable:
    """One stage: logged and replayed lists rank by rank."""
    title = Text(stage, style="bold")
    if diff.logged_missing:
        title.append("  (not logged: nothing to compare)", style="dim")
    elif diff.not_replayed:
        title.append(f"  (not replayed: {diff.not_replayed}; nothing to compare)", style="dim")
    logged_cells = [_logged_cell(c, diff, gold) for c in diff.logged]
    replayed_cells = [_replayed_cell(c, i, diff, gold) for i, c in enumerate(diff.replayed)]

    def one_list_each() -> list[FitTable]:
        # Too narrow for the two lists side by side: the logged list, then the replayed one.
        tables = []
        for name, cells in (("logged", logged_cells), ("replayed", replayed_cells)):
            single = FitTable([Col("#", "number", justify="right"), Col(name, "id")], title=title)
            for position, cell in enumerate(cells, start=1):
                single.add_row(Text(str(position)), cell)
            tables.append(single)
        return tables

    table = FitTable(
        [Col("#", "number", justify="right"), Col("logged", "id"), Col("replayed", "id")],
        title=title,
        vertical=one_list_each,
    )
    for position in range(max(len(logged_cells), len(replayed_cells))):
        table.add_row(
            Text(str(position + 1)),
            logged_cells[position] if position < len(logged_cells) else None,
            replayed_cells[position] if position < len(replayed_cells) else None,
        )
    return table


def stage_summary(diff: StageDiff) -> Text:
    """`kept 3, new 1, lost 1, moved 2` for one stage, and what was not compared."""
    if diff.logged_missing:
        return Text(f"{len(diff.replayed)} replayed, none logged", style="dim")
    if diff.not_replayed:
        return Text(f"{len(diff.logged)} logged, none replayed ({diff.not_replayed})", style="dim")
    depth = len(diff.logged)
    new = [c for c in diff.gained if diff.replayed.index(c) < depth]
    text = Text(f"kept {len(diff.kept)}, new {len(new)}, lost {len(diff.lost)}, ")
    text.append(f"moved {len(diff.rank_changes)}")
    if diff.unknown:
        text.append(f", unknown {len(diff.unknown)}", style="bold magenta")
    beyond = len(diff.replayed) - depth
    if beyond > 0:
        text.append(f"; replayed rows past the logged {depth} are not compared ({beyond})", style="dim")
    return text


def header(comparison: LoggedReplay) -> Text:
    """Request id, query, the two rewrites, the configs and what differs between them."""
    logged, replayed = comparison.logged, comparison.replayed
    text = Text()
    text.append("request: ", style="bold")
    text.append(comparison.request_id)
    text.append("\nquery: ", style="bold")
    text.append(logged.query)
    text.append("\nlogged rewrite: ", style="bold")
    if comparison.logged_rewrite is None:
        text.append("none (production did not rewrite)", style="dim")
    else:
        text.append(comparison.logged_rewrite)
    text.append(f"\nreplayed rewrite ({replayed.rewrite.mode}): ", style="bold")
    text.append(replayed.rewrite.rewritten_query)
    text.append("\nconfig: ", style="bold")
    if not logged.config_hash:
        text.append(f"replayed {replayed.config_hash or 'unknown'}; the request logged no config_hash")
    elif logged.config_hash == replayed.config_hash:
        text.append(f"{replayed.config_hash} (the same as logged)")
    else:
        text.append(f"logged {logged.config_hash}, replayed {replayed.config_hash or 'unknown'}: ")
        changes = comparison.config_changes
        if changes:
            text.append(f"{plural(len(changes), 'setting')} differ")
            for change in changes:
                text.append(f"\n  {change}")
        elif changes is not None:
            text.append("the settings match except outside retrieval")
        else:
            text.append(
                "the logged settings are unknown (no profile or eval run has that hash), so the "
                "differing settings cannot be named; give production's settings a profile "
                "(`ragtriage profiles`) to see them",
                style="dim",
            )
    if comparison.profile is not None:
        text.append("\nreplayed with: ", style="bold")
        text.append(
            explain(comparison.profile), style="yellow" if comparison.profile.matched_by == "default" else ""
        )
    unknown = sorted({c for diff in comparison.diffs.values() for c in diff.unknown})
    if unknown:
        text.append(f"\n{plural(len(unknown), 'logged chunk id')} unknown to the KB", style="bold magenta")
        shown = ", ".join(unknown[:5]) + (f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else "")
        text.append(f": {shown} (stale index or another KB)")
    if not replayed.gold:
        text.append("\ngold: unknown; ", style="bold yellow")
        text.append(
            f"mark it with `ragtriage label {comparison.request_id} LABEL --gold CHUNK_ID` "
            "(g on a candidate in the TUI), then replay again to see where it is lost"
        )
    return text


def final_chunks_table(comparison: LoggedReplay) -> FitTable | None:
    """What the chunks of both final contexts are: ranks, the document's title and the chunk's
    headings (`chunk_place`), and the doc_id where there is room; None when neither list has a chunk."""
    if not comparison.final_chunks:
        return None
    gold = set(comparison.replayed.gold)
    table = FitTable(
        [
            Col("chunk_id", "id"),
            Col("logged", "number", justify="right"),
            Col("replayed", "number", justify="right"),
            Col(PLACE_HEADER, "text", min_width=12),
            Col("doc_id", "id", drop_order=1),
        ],
        title=Text("Final context chunks (★ = gold)"),
    )
    for chunk in comparison.final_chunks:
        is_gold = chunk.chunk_id in gold
        cell = Text(GOLD_MARK if is_gold else "", style="bold green")
        cell.append(chunk.chunk_id, style="bold green" if is_gold else "")
        table.add_row(
            cell,
            Text("—" if chunk.logged_rank is None else str(chunk.logged_rank)),
            Text("—" if chunk.replayed_rank is None else str(chunk.replayed_rank)),
            Text(_place(chunk)),
            Text(chunk.doc_id or "—"),
        )
    return table


def _place(chunk: FinalChunk) -> str:
    if chunk.doc_id is None:
        return "unknown to the KB"
    return chunk_place(chunk.doc_title, chunk.heading_path, chunk.title) or "—"


def logged_renderables(comparison: LoggedReplay) -> Iterator[RenderableType]:
    """The parts of the view, top to bottom."""
    gold = set(comparison.replayed.gold)
    yield Hanging(header(comparison))
    for stage in STAGE_NAMES:
        diff = comparison.diffs.get(stage)
        if diff is None:
            continue
        yield stage_table(stage, diff, gold)
        yield stage_summary(diff)
    chunks = final_chunks_table(comparison)
    if chunks is not None:
        yield chunks


def print_logged_replay(console: Console, comparison: LoggedReplay) -> None:
    """Print the logged-vs-replayed view to `console`."""
    console.print(Group(*logged_renderables(comparison)))
