"""Request logs exported as Parquet (schema v1 or the flat form), read by record batches.

Nested fields may be structs and lists (`stages` a struct of lists of `{chunk_id, score}`
structs, `feedback` a struct, …) or JSON text columns; timestamps may be timestamp columns (a
zone-less one is taken as UTC, like a JSONL time without zone). Row numbers count from 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragtriage.errors import InputError
from ragtriage.logs.formats.tables import RawItem, bad_non_finite, non_finite_path, row_item

#: Rows per record batch: memory stays bounded whatever the file's row groups.
PARQUET_BATCH_ROWS = 1000


def iter_parquet_rows(path: Path) -> Iterator[RawItem]:
    """Yield one item per row of a Parquet file (see `formats.tables`).

    Raises:
        InputError: the file is not readable Parquet, or a row group cannot be decoded (the rows
            before it were yielded).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise InputError(f"{path}: not a readable Parquet file ({error}); fix: re-export it") from None
    row_no = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            # The row walks that find NaN and drop nulls are only needed where the batch has them.
            check_floats = any(_has_non_finite(column) for column in batch.columns)
            with_nulls = {
                name
                for name, column in zip(batch.schema.names, batch.columns, strict=True)
                if _has_nulls(column)
            }
            for values in batch.to_pylist():
                row_no += 1
                found = _first_non_finite(values) if check_floats else None
                if found is not None:
                    yield bad_non_finite(row_no, values, found)
                else:
                    yield row_item(row_no, values, text_cells=False, with_nulls=with_nulls)
    except pa.ArrowException as error:
        raise InputError(
            f"{path}: row {row_no + 1}: cannot read ({error}); fix: re-export the file "
            "(the rows before it were read)"
        ) from None


def _first_non_finite(values: dict[str, Any]) -> str | None:
    for key, value in values.items():
        found = non_finite_path(value, key)
        if found is not None:
            return found
    return None


def _has_non_finite(array: Any) -> bool:
    """True when a float anywhere in `array` (nested in structs and lists too) is NaN or infinite."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_floating(kind):
        if pa.types.is_float16(kind):
            array = array.cast(pa.float32())
        return bool(pc.any(pc.invert(pc.is_finite(array))).as_py())
    if pa.types.is_struct(kind):
        return any(_has_non_finite(array.field(index)) for index in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _has_non_finite(array.keys) or _has_non_finite(array.items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _has_non_finite(array.flatten())
    return False


def _has_nulls(array: Any) -> bool:
    """True when `array` or anything nested in it (struct members, list items) has a null."""
    import pyarrow as pa

    if array.null_count:
        return True
    kind = array.type
    if pa.types.is_struct(kind):
        return any(_has_nulls(array.field(index)) for index in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _has_nulls(array.items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _has_nulls(array.flatten())
    return False
