"""Rich rendering of a `Trace` for the terminal: routes, fused and reranked lists side by side,
gold chunks marked at every stage, the rewrite, the rerank mode, refusal and timings.

All data goes into `rich.text.Text` objects, never into markup strings: chunk ids, titles and
queries come from logs and documents and must print literally.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text

from ragtriage.config.profiles import explain
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import Trace
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import PLACE_HEADER, Hanging, chunk_place, plural

GOLD_MARK = "★ "
GOLD_STYLE = "bold green"


def gold_drop_stage(trace: Trace, chunk_id: str) -> str:
    """Where a gold chunk left the pipeline: `recall`, `fusion`, `rerank`, `refused`, or `selected`."""
    in_routes = any(hit.chunk_id == chunk_id for route in trace.routes for hit in route.hits)
    if not in_routes:
        return "recall"
    if chunk_id in trace.final:
        return "selected"
    if trace.rerank_input and chunk_id not in trace.rerank_input:
        return "fusion"
    if not trace.rerank_input and trace.rerank_mode == "off":
        return "fusion"
    if trace.refused:
        return "refused"
    return "rerank"


def _cell(chunk: ScoredChunk | None, gold: set[str]) -> Text:
    if chunk is None:
        return Text("")
    is_gold = chunk.chunk_id in gold
    text = Text(GOLD_MARK if is_gold else "", style=GOLD_STYLE)
    text.append(chunk.chunk_id, style=GOLD_STYLE if is_gold else "")
    text.append(f" {chunk.score:.4g}", style="dim")
    return text


def _one_list(title: str, hits: Sequence[ScoredChunk], gold: set[str]) -> FitTable:
    table = FitTable([Col("#", "number", justify="right"), Col(title, "id")])
    for position, hit in enumerate(hits, start=1):
        table.add_row(Text(str(position)), _cell(hit, gold))
    return table


def stage_table(trace: Trace) -> FitTable:
    """Every route's list, the fused list and the reranked list side by side, rank by rank; one
    list after another when they do not fit side by side."""
    gold = set(trace.gold)
    columns: list[tuple[str, Sequence[ScoredChunk]]] = [(r.name, r.hits) for r in trace.routes if r.hits]
    columns.append(("fused", trace.fused[: max(len(trace.rerank_input), 10)]))
    if trace.reranked:
        columns.append((f"reranked ({trace.rerank_mode})", trace.reranked))
    title = Text("Ranked lists (★ = gold)")

    def one_list_each() -> list[RenderableType]:
        return [title, *(_one_list(name, hits, gold) for name, hits in columns)]

    table = FitTable(
        [Col("#", "number", justify="right"), *(Col(name, "id") for name, _ in columns)],
        title=title,
        vertical=one_list_each,
    )
    depth = max((len(hits) for _, hits in columns), default=0)
    for position in range(depth):
        row: list[Text] = [Text(str(position + 1))]
        for _, hits in columns:
            row.append(_cell(hits[position] if position < len(hits) else None, gold))
        table.add_row(*row)
    return table


def final_table(trace: Trace, doc_titles: Mapping[str, str] | None = None) -> FitTable:
    """The final context in order: chunk id, its final score (reranked, else fused), the
    document's title (`doc_titles`: doc_id → title) and the chunk's headings, and the doc_id where
    there is room (the ids alone do not say what a production chunk is about)."""
    gold = set(trace.gold)
    titles = doc_titles or {}
    table = FitTable(
        [
            Col("#", "number", justify="right"),
            Col("chunk_id", "id"),
            Col("score", "number", justify="right"),
            Col(PLACE_HEADER, "text", min_width=12),
            Col("doc_id", "id", drop_order=1),
        ],
        title=Text("Final context (★ = gold; score: reranked, else fused)"),
    )
    for rank, chunk_id in enumerate(trace.final, start=1):
        candidate = trace.candidate(chunk_id)
        is_gold = chunk_id in gold
        chunk_cell = Text(GOLD_MARK if is_gold else "", style=GOLD_STYLE)
        chunk_cell.append(chunk_id, style=GOLD_STYLE if is_gold else "")
        doc_id = candidate.doc_id if candidate is not None else None
        place = "unknown to the KB"
        if candidate is not None and candidate.known:
            place = chunk_place(titles.get(doc_id or ""), candidate.heading_path, candidate.title) or "—"
        score = None
        if candidate is not None:
            score = (
                candidate.reranked.score if candidate.reranked.score is not None else candidate.fused.score
            )
        table.add_row(
            Text(str(rank)),
            chunk_cell,
            Text("—" if score is None else f"{score:.4g}"),
            Text(place),
            Text(doc_id or "—"),
        )
    return table


def rewrite_panel(trace: Trace) -> Text:
    """The query, its normalization and the rewrite (mode, aliases, keywords, sub-queries)."""
    rewrite = trace.rewrite
    text = Text()
    text.append("query: ", style="bold")
    text.append(trace.query)
    text.append("\nnormalized: ", style="bold")
    text.append(rewrite.normalized_query)
    text.append(f"\nrewrite ({rewrite.mode}): ", style="bold")
    text.append(rewrite.rewritten_query)
    if rewrite.aliases:
        text.append("\naliases: ", style="bold")
        text.append("; ".join(f"{term} → {', '.join(syns)}" for term, syns in rewrite.aliases.items()))
    if rewrite.keywords:
        text.append("\nkeywords: ", style="bold")
        text.append(", ".join(rewrite.keywords))
    for number, sub_query in enumerate(rewrite.sub_queries, start=1):
        text.append(f"\nsub-query {number}: ", style="bold")
        text.append(sub_query)
    if rewrite.fallback_reason:
        text.append("\nfallback: ", style="bold yellow")
        text.append(rewrite.fallback_reason)
    return text


def gold_table(trace: Trace) -> FitTable:
    """Rank of each gold chunk in every route and stage, and where it dropped out (one row per
    stage when that is too wide)."""
    stage_names = [r.name for r in trace.routes]
    columns = [Col("gold", "id")]
    columns += [Col(name, "number", justify="right") for name in [*stage_names, "fused", "reranked", "final"]]
    table = FitTable([*columns, Col("dropped at", "label")], title=Text("Gold journey"), vertical="transpose")
    for chunk_id in trace.gold:
        candidate = trace.candidate(chunk_id)
        cells: list[Text] = [Text(chunk_id, style=GOLD_STYLE)]
        for name in stage_names:
            rank = candidate.routes[name].rank if candidate and name in candidate.routes else None
            cells.append(Text(str(rank) if rank is not None else "–"))
        for stage_rank in (
            candidate.fused.rank if candidate else None,
            candidate.reranked.rank if candidate else None,
            candidate.final_rank if candidate else None,
        ):
            cells.append(Text(str(stage_rank) if stage_rank is not None else "–"))
        stage = gold_drop_stage(trace, chunk_id)
        cells.append(Text(stage, style="green" if stage == "selected" else "bold red"))
        table.add_row(*cells)
    return table


def summary_text(trace: Trace) -> Text:
    """Route flags, rerank mode, truncation, refusal, final list and per-stage timings."""
    text = Text()
    text.append("rerank: ", style="bold")
    text.append(trace.rerank_mode)
    if trace.truncated_pairs:
        text.append(f" ({plural(trace.truncated_pairs, 'pair')} truncated to max_length)")
    text.append("\nfinal: ", style="bold")
    text.append(", ".join(trace.final) if trace.final else "(none)")
    if trace.refused:
        text.append("\nrefused: ", style="bold red")
        text.append(trace.refusal_reason or "yes")
    support = trace.refusal_support()
    if support is not None:
        text.append("\nquery terms: ", style="bold")
        text.append(support.explain())
    for route in trace.routes:
        for flag in route.flags:
            text.append(f"\n{route.name}: ", style="yellow")
            text.append(flag)
    for flag in trace.flags:
        if not any(flag == f"{r.name}: {f}" for r in trace.routes for f in r.flags):
            text.append("\nnote: ", style="yellow")
            text.append(flag)
    text.append("\ntimings (ms): ", style="bold")
    text.append("  ".join(f"{stage} {ms:.1f}" for stage, ms in trace.timings_ms.items()))
    if trace.profile is not None:
        text.append("\nprofile: ", style="bold")
        text.append(explain(trace.profile).removeprefix("profile "))
    context = [
        f"config {trace.config_hash}" if trace.config_hash else "",
        f"kb {trace.kb_version}" if trace.kb_version is not None else "",
        f"embedder {trace.embedder}" if trace.embedder else "",
    ]
    if any(context):
        text.append("\n")
        text.append("  ".join(part for part in context if part), style="dim")
    return text


def trace_renderables(trace: Trace, doc_titles: Mapping[str, str] | None = None) -> Iterator[RenderableType]:
    """The parts of the trace view, top to bottom (`doc_titles`: doc_id → title, for the final context)."""
    yield Hanging(rewrite_panel(trace))
    yield stage_table(trace)
    if trace.final:
        yield final_table(trace, doc_titles)
    if trace.gold:
        yield gold_table(trace)
    yield Hanging(summary_text(trace))


def render_trace(trace: Trace, doc_titles: Mapping[str, str] | None = None) -> Group:
    """The whole trace view as one renderable."""
    return Group(*trace_renderables(trace, doc_titles))


def print_trace(console: Console, trace: Trace, doc_titles: Mapping[str, str] | None = None) -> None:
    """Print the trace view to `console` (`doc_titles`: doc_id → title, for the final context)."""
    console.print(render_trace(trace, doc_titles))
