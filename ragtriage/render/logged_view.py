"""Rich view of `replay REQUEST_ID`: per stage, the logged list next to the replayed one.

Each row shows a logged chunk and a replayed chunk at the same rank. Markers: `lost` (only in the
log), `new` (only in the replay), `↑n`/`↓n` (moved), `unknown` (the KB does not know the logged id),
`★` gold. All data goes into `rich.text.Text`, never into markup: ids and queries print literally.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragtriage.logs.replay_logged import LoggedReplay, StageDiff
from ragtriage.logs.schema import STAGE_NAMES

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


def _replayed_cell(chunk_id: str, diff: StageDiff, gold: set[str]) -> Text:
    text = Text(GOLD_MARK if chunk_id in gold else "", style="bold green")
    text.append(chunk_id, style="bold green" if chunk_id in gold else "")
    if chunk_id in diff.gained:
        text.append("  new", style="bold cyan")
        return text
    change = next((c for c in diff.rank_changes if c.chunk_id == chunk_id), None)
    if change is not None:
        arrow = f"↑{change.delta}" if change.delta > 0 else f"↓{-change.delta}"
        text.append(f"  {arrow}", style="green" if change.delta > 0 else "yellow")
    return text


def stage_table(stage: str, diff: StageDiff, gold: set[str]) -> Table:
    """One stage: logged and replayed lists rank by rank."""
    title = Text(stage, style="bold")
    if diff.logged_missing:
        title.append("  (not logged)", style="dim")
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column(Text("#"), justify="right", no_wrap=True)
    table.add_column(Text("logged"), overflow="fold")
    table.add_column(Text("replayed"), overflow="fold")
    for position in range(max(len(diff.logged), len(diff.replayed))):
        logged = diff.logged[position] if position < len(diff.logged) else None
        replayed = diff.replayed[position] if position < len(diff.replayed) else None
        table.add_row(
            Text(str(position + 1)),
            _logged_cell(logged, diff, gold) if logged is not None else Text(""),
            _replayed_cell(replayed, diff, gold) if replayed is not None else Text(""),
        )
    return table


def stage_summary(diff: StageDiff) -> Text:
    """`kept 3, gained 1, lost 1, moved 2, unknown 0` for one stage."""
    text = Text(f"kept {len(diff.kept)}, gained {len(diff.gained)}, lost {len(diff.lost)}, ")
    text.append(f"moved {len(diff.rank_changes)}")
    if diff.unknown:
        text.append(f", unknown {len(diff.unknown)}", style="bold magenta")
    return text


def header(comparison: LoggedReplay) -> Text:
    """Request id, query, the two rewrites and the configs."""
    logged, replayed = comparison.logged, comparison.replayed
    text = Text()
    text.append("request: ", style="bold")
    text.append(comparison.request_id)
    text.append("\nquery: ", style="bold")
    text.append(logged.query)
    text.append("\nlogged rewrite: ", style="bold")
    text.append(logged.rewrite.rewritten_query)
    text.append(f"\nreplayed rewrite ({replayed.rewrite.mode}): ", style="bold")
    text.append(replayed.rewrite.rewritten_query)
    text.append("\nconfig: ", style="bold")
    text.append(f"logged {logged.config_hash or '?'}, replayed {replayed.config_hash or '?'}")
    if comparison.profile is not None:
        from ragtriage.pipeline.profiles import explain

        text.append("\nreplayed with: ", style="bold")
        text.append(
            explain(comparison.profile), style="yellow" if comparison.profile.matched_by == "default" else ""
        )
    unknown = sorted({c for diff in comparison.diffs.values() for c in diff.unknown})
    if unknown:
        text.append(f"\n{len(unknown)} logged chunk id(s) unknown to the KB", style="bold magenta")
        text.append(" (stale index or another KB)")
    return text


def logged_renderables(comparison: LoggedReplay) -> Iterator[RenderableType]:
    """The parts of the view, top to bottom."""
    gold = set(comparison.replayed.gold)
    yield header(comparison)
    for stage in STAGE_NAMES:
        diff = comparison.diffs.get(stage)
        if diff is None:
            continue
        yield stage_table(stage, diff, gold)
        yield stage_summary(diff)


def print_logged_replay(console: Console, comparison: LoggedReplay) -> None:
    """Print the logged-vs-replayed view to `console`."""
    console.print(Group(*logged_renderables(comparison)))
