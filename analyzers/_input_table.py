"""The `inputs` and `samples` tables as numpy columns, split once into (feature, split) groups.

The data rules look at every feature of every split; with hundreds of features, indexing a
DataFrame per feature costs more than the statistics. Here the table is converted and sorted
once, and each group is a pair of offsets into the sorted columns: slicing is free.
"""
from __future__ import annotations

import weakref
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from tracelab.core.schema import RESOLUTIONS, TRAIN

RES_RANK = {unit: i for i, (unit, _) in enumerate(RESOLUTIONS)}
_FLOATS = ("count", "nan_count", "inf_count", "mean", "std", "min", "max", "int_frac",
           "n_unique")
_TIMES = ("time_min", "time_max")


class Batches:
    """One feature's batch rows of one split (or a period of it), sorted by step.

    `b["mean"]` is a float array (NaN where missing), `b["step"]` int64, `b["dtype"]` str,
    `b["res_rank"]` the rank of the datetime resolution in RESOLUTIONS (NaN when none).
    """

    __slots__ = ("_cols", "_start", "_stop")

    def __init__(self, cols: dict, start: int, stop: int):
        self._cols, self._start, self._stop = cols, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, column: str) -> np.ndarray:
        return self._cols[column][self._start:self._stop]

    @property
    def columns(self) -> dict:
        return self._cols

    @property
    def start(self) -> int:
        return self._start

    def dtypes(self) -> tuple[str, ...]:
        """The distinct dtypes, in recording order."""
        return tuple(dict.fromkeys(self["dtype"]))

    def time(self, column: str, pick):
        """min or max (`pick`) of time_min or time_max; None when no batch has a time."""
        if not self[f"{column}_set"].any():
            return None
        return getattr(self._cols[column].iloc[self._start:self._stop], pick.__name__)()

    def rows(self, begin: int, end: int | None = None) -> "Batches":
        """Rows [begin, end) of this group, like `iloc[begin:end]`."""
        n = len(self)
        end = n if end is None else min(end, n)
        return Batches(self._cols, self._start + begin, self._start + max(begin, end))


def _columns(inputs: pd.DataFrame, order: np.ndarray) -> dict:
    # The few distinct dtype names, one reference per row: no string built per row.
    dtype, names = pd.factorize(inputs["dtype"].astype(str), use_na_sentinel=False)
    cols: dict = {"step": inputs["step"].to_numpy(dtype=np.int64)[order],
                  "dtype_code": dtype[order],
                  "dtype": np.array(list(names), dtype=object)[dtype[order]]}
    for name in _FLOATS:
        cols[name] = _floats(inputs[name])[order]
    codes, units = pd.factorize(inputs["resolution"])
    ranks = np.array([RES_RANK.get(u, np.nan) for u in units] + [np.nan], dtype=float)
    cols["res_rank"] = ranks[codes[order]]  # code -1 (missing) takes the trailing NaN
    for name in _TIMES:
        set_ = inputs[name].notna().to_numpy()
        if set_.any():  # datetime features: their value range, sorted like the rest
            cols[name] = inputs[name].iloc[order].reset_index(drop=True)
            cols[f"{name}_set"] = set_[order]
        else:
            cols[name], cols[f"{name}_set"] = None, set_
    return cols


def _floats(column: pd.Series) -> np.ndarray:
    """A column as float64, NaN where missing (a float64 column as it is: no copy)."""
    values = column.to_numpy()
    if values.dtype == np.float64:
        return values
    return column.to_numpy(dtype=float, na_value=np.nan)


def feature_rows(inputs: pd.DataFrame) -> Iterator[tuple[str, dict[str, Batches]]]:
    """(feature, {split: its batch rows sorted by step}) in recording order, train first."""
    if not len(inputs):
        return
    feature, features = pd.factorize(inputs["feature"], sort=False)
    split, splits = pd.factorize(inputs["split"], sort=False)
    keep = np.flatnonzero((feature >= 0) & (split >= 0))
    step = inputs["step"].to_numpy(dtype=np.int64)[keep]
    if len(step) < 2 or (step[1:] >= step[:-1]).all():  # as a run's reader sorts it
        # One stable sort by group (a radix sort of small codes) then keeps the steps in order.
        group = feature[keep] * len(splits) + split[keep]
        order = keep[np.argsort(group.astype(np.int16) if len(features) * len(splits) < 2**15
                                else group, kind="stable")]
    else:
        # lexsort is stable: rows of one step keep their recorded order, as a stable sort would.
        order = keep[np.lexsort((step, split[keep], feature[keep]))]
    cols = _columns(inputs, order)
    f, s = feature[order], split[order]
    starts = np.flatnonzero(np.r_[True, (f[1:] != f[:-1]) | (s[1:] != s[:-1])])
    stops = np.r_[starts[1:], len(order)]
    names = [str(x) for x in splits]
    by_feature: dict[int, dict[str, Batches]] = {}
    for code, at, start, stop in zip(f[starts].tolist(), s[starts].tolist(), starts.tolist(),
                                     stops.tolist()):
        by_feature.setdefault(code, {})[names[at]] = Batches(cols, start, stop)
    for code, by_split in by_feature.items():
        ordered = sorted(by_split, key=lambda x: (x != TRAIN, x))
        yield str(features[code]), {x: by_split[x] for x in ordered}


class Samples:
    """(split, feature) → its sampled values, finite ones only; `.get(key)` like a dict.

    The table (Arrow, `split` and `feature` dictionary-encoded) is grouped on first use: a
    rule that never asks for samples pays nothing.
    """

    def __init__(self, table: pa.Table):
        self._table, self._groups = table, None

    def get(self, key: tuple[str, str], default=None):
        if self._groups is None:
            self._groups = _group_samples(self._table) if self._table.num_rows else {}
        return self._groups.get(key, default)


def samples_of(run) -> Samples:
    """The run's sampled values by (split, feature), grouped once for all the rules."""
    return derived(run.sample_table(), Samples)


_DERIVED: dict = {}


def derived(table, build):
    """`build(table)`, computed once per table object while it lives: the data rules share
    the grouping of the inputs and samples tables, which they never modify."""
    key = (id(table), build)
    hit = _DERIVED.get(key)
    if hit is not None and hit[0]() is table:
        return hit[1]
    for k in [k for k, (ref, _) in _DERIVED.items() if ref() is None]:
        del _DERIVED[k]
    value = build(table)
    _DERIVED[key] = (weakref.ref(table), value)
    return value


def _codes(table: pa.Table, name: str) -> tuple[np.ndarray, list[str]]:
    """A dictionary-encoded column as one code per row (-1 where null) and the names the codes
    stand for, each once (chunks may carry different dictionaries: unified first)."""
    column = table.select([name]).unify_dictionaries().column(0)
    if not column.num_chunks:
        return np.zeros(0, np.int32), []
    words = column.chunks[0].dictionary.to_pylist()
    indices = pa.chunked_array([chunk.indices for chunk in column.chunks], pa.int32())
    codes = indices.fill_null(-1).to_numpy() if indices.null_count else indices.to_numpy()
    if None in words:
        codes = np.where(np.isin(codes, [i for i, w in enumerate(words) if w is None]), -1, codes)
    return codes, words


def _group_samples(sm: pa.Table) -> dict[tuple[str, str], np.ndarray]:
    values = sm.column("value").to_numpy()  # nulls become NaN
    split, splits = _codes(sm, "split")
    feature, features = _codes(sm, "feature")
    width = len(features)
    # The recorder writes its reservoir one (split, feature) after another: the groups are
    # then runs of rows, found without building a key per row.
    starts = np.flatnonzero(np.r_[True, (split[1:] != split[:-1])
                                  | (feature[1:] != feature[:-1])]) if len(values) else []
    keys = split[starts].astype(np.int64) * width + feature[starts]
    keys[(split[starts] < 0) | (feature[starts] < 0)] = -1
    if len(keys) > len(np.unique(keys)):  # a group in several runs: sort the rows by group
        key = split.astype(np.int64) * width + feature
        key[(split < 0) | (feature < 0)] = -1
        order = np.argsort(key, kind="stable")
        key, values = key[order], values[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        keys = key[starts]
    stops = np.r_[starts[1:], len(values)].astype(np.int64)
    finite = np.isfinite(values)
    every = bool(finite.all())
    out = {}
    for k, a, b in zip(keys.tolist(), np.asarray(starts).tolist(), stops.tolist()):
        if k >= 0:
            v = values[a:b]
            out[(splits[k // width], features[k % width])] = v if every else v[finite[a:b]]
    return out


_KS_BLOCK = 2**17  # pooled values per block of `ks_wasserstein_rows`


def ks_wasserstein_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """The two-sample Kolmogorov-Smirnov statistic and the 1-Wasserstein distance of each row
    pair of x (k, n) and y (k, m) (scipy.stats' ks_2samp and wasserstein_distance, sharing one
    sort), and each row's number of distinct values in x and in y: one sort of each matrix for
    all k features.

    The pooled values come from merging the two sorted rows: each value tagged with its side
    as the imaginary part of a complex number, a stable sort of the two sorted runs is a
    merge. The gap between the two empirical CDFs counts the values up to each pooled one; it
    is read only at the last of each value's ties, where it equals what
    `searchsorted(side="right")` gives (elsewhere the next value is the same: no area).
    """
    n, m = x.shape[1], y.shape[1]
    block = max(1, _KS_BLOCK // (n + m))  # rows at a time: the temporaries stay in cache
    if len(x) > block:
        parts = [ks_wasserstein_rows(x[i:i + block], y[i:i + block])
                 for i in range(0, len(x), block)]
        return tuple(np.concatenate(column) for column in zip(*parts))
    tagged = np.zeros((len(x), n + m), dtype=np.complex128)
    values = tagged.real
    values[:, :n], values[:, n:], tagged.imag[:, n:] = x, y, 1.0
    values[:, :n].sort(axis=1)  # each side sorted in place
    values[:, n:].sort(axis=1)
    distinct_x, distinct_y = _distinct(values[:, :n]), _distinct(values[:, n:])
    tagged.sort(axis=1, kind="stable")
    below_x = np.cumsum(tagged.imag == 0, axis=1, dtype=np.int32)
    gap = below_x / n
    gap -= (np.arange(1, n + m + 1) - below_x) / m
    steps = np.diff(tagged.real, axis=1)
    last = np.ones(gap.shape, dtype=bool)
    np.not_equal(steps, 0, out=last[:, :-1])
    # |gap| at the last of each value's ties (0 elsewhere, where no area follows either): KS is
    # its largest value, max(-min gap, max gap) as scipy takes it.
    np.abs(gap, out=gap)
    gap *= last
    w = np.array([np.dot(g[:-1], d) for g, d in zip(gap, steps)])
    return gap.max(axis=1), w, distinct_x, distinct_y


def _distinct(sorted_rows: np.ndarray) -> np.ndarray:
    """Distinct values per row of a row-sorted matrix (what len(np.unique(row)) counts)."""
    if not sorted_rows.shape[1]:
        return np.zeros(len(sorted_rows), dtype=np.int64)
    return 1 + np.count_nonzero(sorted_rows[:, 1:] != sorted_rows[:, :-1], axis=1)
