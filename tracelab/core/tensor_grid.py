"""The tensors table as rules see it, read a piece at a time: what it holds (its index) and one
statistic of one kind as a step × name grid.

A long run records hundreds of tensors every step: 100,000 steps of 500 tensors are 50M rows,
several GB as one table. Each pass here reads one part file at a time, only the columns it
needs, with `kind` and `name` dictionary-encoded, and reduces it into what is kept: the steps
and names of each kind, a grid of float64 (steps × names), the rows holding NaN/Inf. Peak
memory is then the kept results plus one part, whatever the run's length.

A piece is an Arrow table with `step` (int64), `kind` and `name` (dictionary-encoded strings)
and the statistic columns asked for; a run in memory is one piece (`frame_piece`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracelab.core.schema import ARROW_SCHEMAS, TENSORS

KEYS = ("step", "kind", "name")  # what every pass reads
CODES = ("kind", "name")  # dictionary-encoded
NONFINITE = ("nan_count", "inf_count")


@dataclass
class TensorIndex:
    """What the tensors table holds: each kind's names in recording order and sorted steps
    (of its rows that name a tensor), and the step range over every row."""
    names: dict[str, list[str]] = field(default_factory=dict)
    steps: dict[str, np.ndarray] = field(default_factory=dict)
    step_range: tuple[int, int] | None = None
    rows: int = 0

    @property
    def kinds(self) -> set[str]:
        return set(self.names)


def frame_piece(df: pd.DataFrame, stats: Sequence[str] = ()) -> pa.Table:
    """A tensors DataFrame (a run in memory, or a distributed run's merged rows) as a piece."""
    df = df[df["step"].notna()]
    cols: dict[str, pa.Array] = {"step": pa.array(df["step"].to_numpy(dtype=np.int64))}
    for col in CODES:
        codes, uniques = pd.factorize(df[col])
        cols[col] = pa.DictionaryArray.from_arrays(
            pa.array(codes.astype(np.int32), mask=codes < 0),
            pa.array([str(u) for u in uniques], pa.string()))
    for stat in stats:
        cols[stat] = pa.array(df[stat].to_numpy(dtype=float, na_value=np.nan))
    return pa.table(cols)


def _decoded(batch: pa.RecordBatch, col: str) -> tuple[np.ndarray, list[str]]:
    """A dictionary column's codes (-1 for null) and its dictionary."""
    array = batch.column(col)
    return (pc.fill_null(array.indices, -1).to_numpy(zero_copy_only=False),
            array.dictionary.to_pylist())


def _kind_rows(batch: pa.RecordBatch, kind: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Positions of the batch's rows of `kind` that name a tensor, their name codes, and the
    names' dictionary."""
    kinds, found = _decoded(batch, "kind")
    names, dictionary = _decoded(batch, "name")
    if kind not in found:
        return np.empty(0, np.int64), np.empty(0, np.int64), dictionary
    rows = np.flatnonzero((kinds == found.index(kind)) & (names >= 0))
    return rows, names[rows], dictionary


def index(pieces: Iterable[pa.Table]) -> TensorIndex:
    """One pass over the pieces' step, kind and name columns."""
    out = TensorIndex()
    steps: dict[str, list[np.ndarray]] = {}
    # A name's place: the first row naming it in step order (rows of one step in the order
    # written), as a table sorted stably by step would list it.
    first: dict[str, dict[str, tuple[int, int]]] = {}
    low = high = None
    offset = 0
    for piece in pieces:
        for batch in piece.to_batches():
            step = batch.column("step").to_numpy(zero_copy_only=False)
            if len(step):
                low = min(low, int(step.min())) if low is not None else int(step.min())
                high = max(high, int(step.max())) if high is not None else int(step.max())
            _, found = _decoded(batch, "kind")
            for kind in found:
                rows, codes, dictionary = _kind_rows(batch, kind)
                if not len(rows):
                    continue
                at = step[rows]
                steps.setdefault(kind, []).append(np.unique(at))
                order = (np.arange(len(rows)) if np.all(at[1:] >= at[:-1])
                         else np.lexsort((rows, at)))
                uniq, where = np.unique(codes[order], return_index=True)
                place = first.setdefault(kind, {})
                for code, i in zip(uniq.tolist(), order[where].tolist()):
                    key = (int(at[i]), offset + int(rows[i]))
                    name = dictionary[code]
                    if name not in place or key < place[name]:
                        place[name] = key
            offset += batch.num_rows
    out.rows = offset
    out.step_range = (low, high) if low is not None else None
    for kind, place in first.items():
        out.names[kind] = sorted(place, key=place.__getitem__)
        out.steps[kind] = np.unique(np.concatenate(steps[kind]))
    return out


def _values(pieces: Iterable[pa.Table], kind: str, stat: str,
            idx: TensorIndex) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per batch, the non-missing values of `stat` of `kind` with their row in `idx`'s steps
    and column in its names, in the order written; rows `idx` does not hold are left out."""
    steps = idx.steps.get(kind, np.empty(0, np.int64))
    column = {n: i for i, n in enumerate(idx.names.get(kind, []))}
    for piece in pieces:
        for batch in piece.to_batches():
            rows, codes, dictionary = _kind_rows(batch, kind)
            if not len(rows):
                continue
            col = np.array([column.get(n, -1) for n in dictionary], np.int64)[codes]
            at = batch.column("step").to_numpy(zero_copy_only=False)[rows]
            row = np.searchsorted(steps, at)
            ok = (col >= 0) & (row < len(steps))
            ok[ok] = steps[row[ok]] == at[ok]
            values = pc.cast(batch.column(stat), pa.float64()).to_numpy(
                zero_copy_only=False)[rows]
            ok &= ~np.isnan(values)
            yield row[ok], col[ok], values[ok]


def _scatter(out: np.ndarray, cells: np.ndarray, values: np.ndarray) -> None:
    """out[cells] = values, the last of a cell's values winning (as a later row does)."""
    if len(cells) > 1 and not np.all(cells[1:] > cells[:-1]):
        last = len(cells) - 1 - np.unique(cells[::-1], return_index=True)[1]
        cells, values = cells[last], values[last]
    out[cells] = values


def grid(pieces: Iterable[pa.Table], kind: str, stat: str, idx: TensorIndex) -> np.ndarray:
    """One statistic of one kind as a (steps × names) float64 array of `idx`'s steps and
    names: each cell the last non-missing value written for it (NaN when none), like
    groupby().last(). Rows whose step or name `idx` does not hold are left out."""
    steps, names = len(idx.steps.get(kind, ())), len(idx.names.get(kind, ()))
    out = np.full(steps * names, np.nan)
    for row, col, values in _values(pieces, kind, stat, idx):
        _scatter(out, row * names + col, values)
    return out.reshape(steps, names)


def last_per_name(pieces: Iterable[pa.Table], kind: str, stat: str,
                  idx: TensorIndex) -> np.ndarray:
    """One statistic of one kind per name (`idx`'s names): the last non-missing value written
    for it, NaN when none. For what a tensor keeps over the run (its numel), without a grid."""
    out = np.full(len(idx.names.get(kind, ())), np.nan)
    for _, col, values in _values(pieces, kind, stat, idx):
        _scatter(out, col, values)
    return out


def nonfinite_rows(pieces: Iterable[pa.Table]) -> pd.DataFrame:
    """The rows whose tensor held NaN or Inf (step, kind, name, nan_count, inf_count), in the
    order written, sorted stably by step."""
    found = []
    for piece in pieces:
        bad = pc.or_kleene(pc.greater(piece.column("nan_count"), 0),
                           pc.greater(piece.column("inf_count"), 0))
        rows = piece.filter(pc.fill_null(bad, False))
        if rows.num_rows:
            found.append(pd.DataFrame({
                "step": rows.column("step").to_numpy(zero_copy_only=False),
                **{c: rows.column(c).cast(pa.string()).to_pandas() for c in CODES},
                **{c: rows.column(c).to_pandas() for c in NONFINITE}}))
    if not found:
        schema = ARROW_SCHEMAS[TENSORS]
        return pa.schema([schema.field(c) for c in (*KEYS, *NONFINITE)]).empty_table() \
            .to_pandas()
    rows = pd.concat(found, ignore_index=True)
    return rows.sort_values("step", kind="stable", ignore_index=True)
