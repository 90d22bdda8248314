"""The views of a run's tables that rules share: one scalar over steps, one tensor statistic as a
step × name frame. Several rules read the same ones, so each is computed once per run.

A distributed run's views merge its ranks the way a single process training on the global batch
would see them. Scalars: the mean over the ranks that logged the step, which is the global-batch
loss or metric for mean-reduced values and equal per-rank batches (lr is the same on every
rank). Tensor stats: the lowest rank that recorded the step; weights, grads and updates are
identical on every rank after DDP's all-reduce, and activations are that rank's own batch.
Parameters that meta.json names in `sharded_parameters` (FSDP2) are instead the shards' merge
(shards.py): each rank recorded its own part of them. The raw tables keep every rank's rows;
rank-divergence compares them.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from tracelab.core.schema import GRAD, TRAIN, UPDATE, WEIGHT
from tracelab.core.shards import merge_shards, sharded_names
from tracelab.core.tensor_grid import TensorIndex, frame_piece, grid, index, last_per_name


class Tables(Protocol):
    """What the views read of a run."""
    scalars: pd.DataFrame
    tensors: pd.DataFrame
    inputs: pd.DataFrame
    ranks: list[int]
    rank_meta: Mapping[int, Mapping[str, Any]]
    tensor_index: TensorIndex

    def tensor_pieces(self, stats: tuple[str, ...] = ()) -> Iterable[pa.Table]: ...


def _last_per_cell(cells: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """`size` cells, each the last non-missing of its values (NaN when none), like
    groupby().last(), as one scatter: pivot_table costs 30x more on a 10,000-row table."""
    ok = ~np.isnan(values)
    cells, values = cells[ok], values[ok]
    last = len(cells) - 1 - np.unique(cells[::-1], return_index=True)[1]
    out = np.full(size, np.nan)
    out[cells[last]] = values[last]
    return out


class Views:
    """One run's views, each computed on first use and kept."""

    def __init__(self, run: Tables):
        self._run = run
        self._scalars: dict[tuple[str, str], pd.Series] = {}
        self._stats: dict[tuple[str, str], pd.DataFrame] = {}
        self._per_name: dict[tuple[str, str], pd.Series] = {}
        self._merged: dict[str, tuple[pd.DataFrame, TensorIndex]] = {}
        self._scalar_rows: dict[tuple[str, str], np.ndarray] | None = None

    @property
    def _distributed(self) -> bool:
        return len(self._run.ranks) > 1

    def scalar(self, name: str, split: str = TRAIN) -> pd.Series:
        """One scalar over steps (float Series indexed by step; the last value per step wins;
        several ranks: the mean over ranks of each rank's last value)."""
        key = (name, split)
        if key not in self._scalars:
            sc = self._run.scalars
            if "rank" in sc and self._distributed:
                rows = sc[(sc["name"] == name) & (sc["split"] == split)]
                rows = rows.groupby(["step", "rank"], sort=True)["value"].last().reset_index()
                series = rows.groupby("step", sort=True)["value"].mean().astype(float)
            else:
                pos = self._rows_of(split, name)
                steps, codes = np.unique(sc["step"].to_numpy(dtype=np.int64)[pos],
                                         return_inverse=True)
                values = sc["value"].to_numpy(dtype=float, na_value=np.nan)[pos]
                series = pd.Series(_last_per_cell(codes.reshape(-1), values, len(steps)),
                                   index=pd.Index(steps, name="step"))
            series.name = name
            self._scalars[key] = series
        return self._scalars[key]

    def _rows_of(self, split: str, name: str) -> np.ndarray:
        """Row positions of (split, name) in the scalars table, all grouped in one pass."""
        if self._scalar_rows is None:
            sc = self._run.scalars
            self._scalar_rows = sc.groupby(["split", "name"], sort=False).indices if len(sc) else {}
        return self._scalar_rows.get((split, name), np.empty(0, dtype=np.int64))

    def splits(self) -> list[str]:
        """Splits recorded in scalars or inputs, train first."""
        found = set(self._run.scalars["split"].unique()) | set(self._run.inputs["split"].unique())
        return sorted(found, key=lambda s: (s != TRAIN, s))

    def stat(self, kind: str, stat: str) -> pd.DataFrame:
        """One tensor statistic as a step × name frame, columns in recording (model) order
        (several ranks: each step's lowest recording rank)."""
        key = (kind, stat)
        if key not in self._stats:
            pieces, idx = self._pieces(kind, stat)
            self._stats[key] = pd.DataFrame(
                grid(pieces, kind, stat, idx),
                index=pd.Index(idx.steps.get(kind, np.empty(0, np.int64)), name="step"),
                columns=pd.Index(idx.names.get(kind, []), name="name"), copy=False)
        return self._stats[key]

    def per_name(self, kind: str, stat: str) -> pd.Series:
        """One tensor statistic per name, the last recorded (several ranks: as `stat`)."""
        key = (kind, stat)
        if key not in self._per_name:
            pieces, idx = self._pieces(kind, stat)
            self._per_name[key] = pd.Series(last_per_name(pieces, kind, stat, idx),
                                            index=pd.Index(idx.names.get(kind, []), name="name"),
                                            name=stat)
        return self._per_name[key]

    def _pieces(self, kind: str, stat: str) -> tuple[Iterable[pa.Table], TensorIndex]:
        """The tensors to read `stat` of `kind` from, and their index."""
        if self._distributed and "rank" in self._run.tensors:
            rows, idx = self._merged_rows(kind)
            return [frame_piece(rows, (stat,))], idx
        return self._run.tensor_pieces((stat,)), self._run.tensor_index

    def _merged_rows(self, kind: str) -> tuple[pd.DataFrame, TensorIndex]:
        """A distributed run's rows of `kind`, one per step and name, and their index."""
        if kind not in self._merged:
            tn = self._run.tensors
            rows = self._merge_ranks(kind, tn[(tn["kind"] == kind) & tn["name"].notna()])
            self._merged[kind] = rows, index([frame_piece(rows)])
        return self._merged[kind]

    def _merge_ranks(self, kind: str, rows: pd.DataFrame) -> pd.DataFrame:
        """One row per step and name: the merged shards of a sharded parameter, else the
        lowest rank's row; in the rows' order, so that names keep the model's order."""
        sharded = sharded_names(self._run.rank_meta.values()) \
            if kind in (WEIGHT, GRAD, UPDATE) else set()
        shard = rows["name"].isin(sharded).to_numpy() if sharded else np.zeros(len(rows), bool)
        whole = rows[~shard]
        lowest = whole.groupby(["step", "name"])["rank"].transform("min")
        whole = whole[whole["rank"] == lowest]
        if not shard.any():
            return whole
        cells = rows[["step", "name"]]
        group = cells.assign(group=cells.groupby(["step", "name"], sort=False).ngroup())
        merged = pd.concat([whole, merge_shards(rows[shard])], ignore_index=True)
        position = merged[["step", "name"]].merge(
            group.drop_duplicates(["step", "name"]), how="left", on=["step", "name"])["group"]
        return merged.iloc[np.argsort(position.to_numpy(), kind="stable")].reset_index(drop=True)

    def names(self, kind: str) -> list[str]:
        """Parameter or module names of a kind, in recording (model) order."""
        return list(self._run.tensor_index.names.get(kind, []))
