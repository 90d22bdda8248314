"""A table's rows as Arrow record batches of the trace's schemas.

The producers hand columns as numpy arrays, lists or Arrow arrays (taken as they are when of
the column's type); the writer turns the rows of many steps into one batch per table per flush.
A column absent from an item is null there.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from tracelab.core.schema import ARROW_SCHEMAS

Columns = Mapping[str, Any]


def to_batch(table: str, columns: Columns) -> pa.RecordBatch:
    """Columns to a record batch of the table's schema; absent columns become nulls."""
    return build_batch(table, [(row_count(table, columns), columns)])


def build_batch(table: str, items: list[tuple[int, Columns]]) -> pa.RecordBatch:
    """Several `(rows, columns)` items to one record batch of the table's schema.

    A column absent from an item is null in that item's rows, as it is when absent everywhere.
    """
    schema = ARROW_SCHEMAS[table]
    total = sum(n for n, _ in items)
    return pa.RecordBatch.from_arrays([_column(f, items, total) for f in schema], schema=schema)


def row_count(table: str, columns: Columns) -> int:
    lengths = set(map(len, columns.values()))  # one C loop: the writer asks it of every item
    if len(lengths) > 1:
        each = {name: len(values) for name, values in columns.items()}
        raise ValueError(f"{table}: columns of unequal length {each}")
    return lengths.pop() if lengths else 0


def _column(field: pa.Field, items: list[tuple[int, Columns]], total: int) -> pa.Array:
    chunks = [columns.get(field.name) for _, columns in items]
    present = [c for c in chunks if c is not None]
    if not present:
        return pa.nulls(total, field.type)
    # The producers hand numpy arrays and lists; one concatenation and one conversion per flush
    # replace one conversion per item. Anything else is converted item by item.
    if all(type(c) is np.ndarray and c.ndim == 1 and c.dtype == present[0].dtype
           for c in present):
        # A copy even of one chunk: a batch waits for its part's roll, and must not share
        # memory that the caller may change after handing it over.
        array = _array(np.concatenate(present), field.type)
        if len(present) == len(chunks):
            return array
        # Place the present rows among nulls: a null index takes a null.
        index, at = [], 0
        for (n, _), chunk in zip(items, chunks):
            index.append(np.arange(at, at + n) if chunk is not None else np.full(n, -1))
            at += n if chunk is not None else 0
        index = np.concatenate(index)
        return array.take(pa.array(index, mask=index < 0))
    if all(isinstance(c, list) for c in present):
        values: list = []
        for (n, _), chunk in zip(items, chunks):
            values.extend(chunk if chunk is not None else [None] * n)
        return _array(values, field.type)
    return pa.concat_arrays([
        chunk if isinstance(chunk, pa.Array) and chunk.type == field.type
        else _array(chunk, field.type) if chunk is not None
        else pa.nulls(n, field.type) for (n, _), chunk in zip(items, chunks)])


def _array(values: Any, type_: pa.DataType) -> pa.Array:
    """pa.array of `values`, as one array: pyarrow returns a ChunkedArray for a numpy string
    array past about a million values (chunks of 2**20), which a record batch cannot hold."""
    array = pa.array(values, type=type_, from_pandas=True)
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
