"""Tables that fit the width they are printed at, and the console width for data output.

`FitTable` is built like a Rich table but decides its layout when it is rendered, from the width
it is given: ids and numbers are never cut or wrapped inside, headers wrap only at spaces and are
never cut, free text wraps (or, for `clip` columns, is cut with `…`). When even the narrowest
layout is wider than the screen, optional columns are left out, then the table turns vertical:
`transpose` (one row per column of the wide table, e.g. one row per pipeline stage), `records`
(one `header: value` block per row), or the caller's own narrow form (e.g. one list per stage).
Widths are counted in terminal cells, so East Asian wide characters count double.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "FitTable", "PIPE_WIDTH", "cut_cells", "data_console", "fit_columns", "output_width"]

PIPE_WIDTH = 120
"""Columns used when stdout is not a terminal and `COLUMNS` is unset (a pipe, a file, CI)."""
TEXT_MIN = 12
"""Narrowest a wrapping text column gets (cells), unless its content is narrower."""

Kind = Literal["id", "ids", "number", "label", "text", "clip"]
"""`id`, `number`, `label`: never wrapped or cut. `ids`: ids separated by spaces, wrapped only
between ids. `text`: wraps (CJK folds at characters).
`clip`: one line, cut with `…` (a list view whose full text is shown elsewhere)."""


def output_width(stream: object = None) -> int | None:
    """Width for data output: None (let Rich use the terminal, or `COLUMNS` when set) for a
    terminal; `COLUMNS`, else `PIPE_WIDTH`, for a pipe or a file."""
    target = sys.stdout if stream is None else stream
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    isatty = getattr(target, "isatty", None)
    if isatty is not None and isatty():
        return None
    return PIPE_WIDTH


def data_console(*, stderr: bool = False) -> Console:
    """A console whose width follows `output_width`; markup and emoji off (logged text prints literally)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(
        stderr=stderr,
        width=output_width(stream),
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=False,
    )


@dataclass(frozen=True)
class Col:
    """One column of a `FitTable`."""

    header: str
    kind: Kind = "text"
    justify: Literal["left", "right", "center"] = "left"
    min_width: int | None = None
    """Override the narrowest width (cells) for `text`/`clip` columns."""
    drop_order: int | None = None
    """Optional column: when the table does not fit, columns are left out in this order (1 first)
    before the table goes vertical."""


def _as_text(cell: str | Text | None) -> Text:
    if cell is None:
        return Text("")
    return cell if isinstance(cell, Text) else Text(cell)


def _widest_line(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def _widest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


class FitTable:
    """A table laid out for the width it is rendered at (see the module docstring)."""

    def __init__(
        self,
        columns: Sequence[Col],
        *,
        title: str | Text | None = None,
        vertical: Literal["records", "transpose"] | Callable[[], Iterable[RenderableType]] = "records",
        show_edge: bool = True,
    ) -> None:
        self.columns = list(columns)
        self.title = title
        self.vertical = vertical
        self.show_edge = show_edge
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: str | Text | None) -> None:
        """Add a row; plain strings print literally (never Rich markup)."""
        if len(cells) != len(self.columns):
            raise ValueError(f"row has {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([_as_text(cell) for cell in cells])

    @property
    def row_count(self) -> int:
        """Number of rows added."""
        return len(self.rows)

    # ------------------------------------------------------------------ layout

    def _bounds(self) -> list[tuple[int, int]]:
        """(narrowest, widest) content width of each column, in cells."""
        return _bounds(self.columns, self.rows, header_wraps=True)

    def _table(self, widths: Sequence[int] | None) -> Table:
        table = Table(
            show_edge=self.show_edge,
            box=box.HEAVY_HEAD,
            expand=False,
        )
        for index, column in enumerate(self.columns):
            wraps = column.kind in ("text", "ids")
            width = None if widths is None else widths[index]
            table.add_column(
                Text(column.header if width is None else _wrap_header(column.header, width)),
                justify=column.justify,
                width=None if widths is None else widths[index],
                no_wrap=not wraps,
                overflow="fold" if wraps else "ellipsis",
            )
        for row in self.rows:
            table.add_row(*row)
        return table

    def _overhead(self, console: Console, options: ConsoleOptions) -> int:
        """Cells taken by borders and padding."""
        probe = Table(show_edge=self.show_edge, box=box.HEAVY_HEAD, show_header=False)
        for _ in self.columns:
            probe.add_column(width=1)
        probe.add_row(*("x" for _ in self.columns))
        lines = console.render_lines(probe, options.update(width=10_000), pad=False)
        return max(cell_len("".join(s.text for s in line)) for line in lines) - len(self.columns)

    def plan(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """Column widths that fit `options.max_width`, or None when the table must go vertical."""
        available = options.max_width - self._overhead(console, options)
        bounds = self._bounds()
        if sum(low for low, _ in bounds) > available:
            return None
        widths = [high for _, high in bounds]
        excess = sum(widths) - available
        text_columns = [i for i, c in enumerate(self.columns) if c.kind in ("text", "clip", "ids")]
        # Text gives way first; then headers of id/number/label columns wrap at their spaces
        # ("refusal acc" over two lines), which their narrowest width already allows for.
        excess = _shrink(widths, bounds, text_columns, excess)
        others = [i for i in range(len(self.columns)) if i not in text_columns]
        _shrink(widths, bounds, others, excess)
        return widths

    def _transposed(self) -> FitTable:
        first, *rest = self.columns
        columns = [Col(first.header, kind="label")]
        columns += [
            Col(row[0].plain, kind=first.kind if first.kind != "clip" else "text") for row in self.rows
        ]
        table = FitTable(columns, title=self.title, vertical="records", show_edge=self.show_edge)
        for index, column in enumerate(rest, start=1):
            table.add_row(Text(column.header, style="bold"), *(row[index] for row in self.rows))
        return table

    def _records(self) -> Iterator[RenderableType]:
        if self.title is not None:
            yield _as_text(self.title)
        key_width = max((cell_len(c.header) for c in self.columns), default=0)
        for number, row in enumerate(self.rows):
            grid = Table.grid(padding=(0, 1))
            grid.add_column(width=key_width + 1, no_wrap=True, style="bold")
            grid.add_column(overflow="fold")
            for column, cell in zip(self.columns, row, strict=True):
                if cell.plain:
                    grid.add_row(Text(f"{column.header}:"), cell)
            if number:
                yield Text("")
            yield grid

    def _without(self, index: int) -> FitTable:
        narrower = FitTable(
            [c for i, c in enumerate(self.columns) if i != index],
            title=self.title,
            vertical=self.vertical,
            show_edge=self.show_edge,
        )
        narrower.rows = [[cell for i, cell in enumerate(row) if i != index] for row in self.rows]
        return narrower

    def _fitting(self, console: Console, options: ConsoleOptions) -> tuple[FitTable, list[int]] | None:
        """This table, or it without optional columns (in `drop_order`), with widths that fit; None
        when even the narrowest is too wide."""
        table = self
        while True:
            widths = table.plan(console, options)
            if widths is not None:
                return table, widths
            optional = [(c.drop_order, i) for i, c in enumerate(table.columns) if c.drop_order is not None]
            if not optional:
                return None
            table = table._without(min(optional)[1])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fitting = self._fitting(console, options)
        if fitting is not None and fitting[0] is not self:
            yield from fitting[0].__rich_console__(console, options)
            return
        # Vertical forms have room for every column, so the optional ones come back.
        widths = None if fitting is None else fitting[1]
        if widths is not None:
            # The title on its own line: it may be wider than the table, and must not wrap to it.
            if self.title is not None:
                yield _as_text(self.title)
            yield self._table(widths)
        elif callable(self.vertical):
            yield from self.vertical()
        elif self.vertical == "transpose" and self.rows:
            yield self._transposed()
        else:
            yield from self._records()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        overhead = self._overhead(console, options)
        bounds = self._bounds()
        return Measurement(
            min(options.max_width, overhead + sum(low for low, _ in bounds)),
            min(options.max_width, overhead + sum(high for _, high in bounds)),
        )


def _bounds(
    columns: Sequence[Col], rows: Sequence[Sequence[Text]], *, header_wraps: bool
) -> list[tuple[int, int]]:
    """(narrowest, widest) content width of each column, in cells; a header that does not wrap
    is as narrow as its whole text, else as its widest word."""
    bounds = []
    for index, column in enumerate(columns):
        cells = [row[index] for row in rows]
        header_floor = _widest_word(column.header) if header_wraps else cell_len(column.header)
        widest = max([cell_len(column.header), *(_widest_line(c) for c in cells)])
        if column.kind in ("id", "number", "label"):
            narrowest = max([header_floor, *(_widest_line(c) for c in cells)])
        elif column.kind == "ids":
            narrowest = max([header_floor, *(_widest_word(c.plain) for c in cells)])
        else:
            floor = column.min_width if column.min_width is not None else TEXT_MIN
            narrowest = max(header_floor, min(widest, floor))
        bounds.append((narrowest, max(widest, narrowest)))
    return bounds


def fit_columns(
    columns: Sequence[Col], rows: Sequence[Sequence[Text]], available: int, *, per_column: int = 0
) -> list[int | None]:
    """Widths (cells) of `columns` for one-line cells under one-line headers (a Textual
    `DataTable`), in `available` cells where every shown column also costs `per_column` cells
    (padding, separators).

    Ids, numbers, labels and headers keep their whole width; `text`/`clip` columns give way
    (optional ones first), down to `min_width` (else `TEXT_MIN`) or their header. Optional
    columns are left out in `drop_order` (None in the result) while the columns that always show
    would not get their full width next to the optional ones at their narrowest. When nothing
    fits, the narrowest widths are returned (the caller scrolls). Cells count East Asian wide
    characters double.
    """
    bounds = _bounds(columns, rows, header_wraps=False)
    shown = list(range(len(columns)))

    def needed() -> int:
        # Columns that always show at their full width, optional ones at their narrowest.
        return sum(bounds[i][columns[i].drop_order is None] + per_column for i in shown)

    while needed() > available:
        optional = [(columns[i].drop_order, i) for i in shown if columns[i].drop_order is not None]
        if not optional:
            break
        shown.remove(min(optional)[1])
    widths = [high for _, high in bounds]
    excess = sum(widths[i] + per_column for i in shown) - available
    text = [i for i in shown if columns[i].kind in ("text", "clip", "ids")]
    # Optional text (it could have been left out) gives way before the text that always shows.
    excess = _shrink(widths, bounds, [i for i in text if columns[i].drop_order is not None], excess)
    _shrink(widths, bounds, [i for i in text if columns[i].drop_order is None], excess)
    return [widths[i] if i in shown else None for i in range(len(columns))]


def cut_cells(text: Text, width: int) -> Text:
    """`text` cut to `width` cells with a trailing `…` (East Asian wide characters count double);
    unchanged when it fits."""
    if cell_len(text.plain) <= width:
        return text
    cut = text.copy()
    # A wide character that would straddle the edge leaves a pad space, dropped.
    cut.truncate(width - 1, overflow="crop")
    cut.rstrip()
    cut.append("…")
    return cut


def _wrap_header(header: str, width: int) -> str:
    """`header` broken at spaces into lines of at most `width` cells (a longer word keeps its line)."""
    lines: list[str] = []
    for word in header.split(" "):
        if lines and cell_len(lines[-1]) + 1 + cell_len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def _shrink(widths: list[int], bounds: Sequence[tuple[int, int]], columns: Sequence[int], excess: int) -> int:
    """Take `excess` cells from the widest of `columns` first, never below their narrowest; the rest left."""
    while excess > 0:
        candidates = [i for i in columns if widths[i] > bounds[i][0]]
        if not candidates:
            break
        widest = max(widths[i] for i in candidates)
        top = [i for i in candidates if widths[i] == widest]
        runner_up = max([widths[i] for i in candidates if widths[i] < widest] or [0])
        for i in top:
            step = max(min(widest - max(runner_up, bounds[i][0]), -(-excess // len(top)), excess), 1)
            widths[i] -= step
            excess -= step
            if excess <= 0:
                break
    return excess


def plain_lines(renderables: Iterable[RenderableType], width: int) -> list[str]:
    """Render to plain text lines at `width` (tests and width checks)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, markup=False, emoji=False, highlight=False, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return buffer.getvalue().splitlines()
