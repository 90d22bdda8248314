"""Per-feature profiles of input batches, and the bounded reservoir of sampled values.

Tensors are profiled on their own device in a handful of batched ops (one sort gives the exact
per-batch distinct count of every feature at once); pandas DataFrames keep their column names
and dtypes, and datetime columns get their range and resolution.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import torch

from tracelab.core.schema import INPUT_STATS, N_UNIQUE_CAP, RESOLUTIONS, unique_stride

SAMPLES_PER_BATCH = 64
# The recorder runs in the user's process, so its input profiles have a fixed budget whatever
# an input's width: at most MAX_PROFILED_FEATURES features of a tensor (or columns of a
# DataFrame) are profiled, spread evenly over its width (`profiled_features`), and the
# reservoir holds at most MAX_SAMPLE_VALUES values (16 bytes each with their steps: 64 MiB).
MAX_PROFILED_FEATURES = 1024
MAX_SAMPLE_VALUES = 1 << 22
# Columns of the packed per-feature tensor profile: the input statistics but the count, which
# the batch's shape gives.
PACKED = tuple(c for c in INPUT_STATS if c != "count")


def is_frame(obj: Any) -> bool:
    """Whether `obj` is a pandas DataFrame (pandas need not be imported to ask)."""
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "dtypes")


def feature_shape(shape: Sequence[int]) -> tuple[int, int]:
    """(features, values per feature) of feature_matrix, without building it."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return shape[1], math.prod(shape) // shape[1] if shape[1] else 0


@functools.lru_cache(maxsize=64)
def profiled_features(n: int, cap: int = MAX_PROFILED_FEATURES) -> np.ndarray | None:
    """The indices of the features profiled of `n`: None for all of them (n <= cap), else
    `cap` indices spread evenly from the first to the last, the same at every step (made once
    per width; the array is shared: never change it)."""
    if n <= cap:
        return None
    chosen = np.unique(np.linspace(0, n - 1, cap).round().astype(np.int64))
    return chosen


def feature_matrix(x: torch.Tensor) -> torch.Tensor:
    """[features, values]: dim 1 holds the features (2-D) or channels (3-D and up)."""
    x = x.detach()
    if x.dim() == 0:
        return x.reshape(1, 1)
    if x.dim() == 1:
        return x.reshape(1, -1)
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def tensor_profile(x: torch.Tensor, generator: torch.Generator | None = None,
                   features: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed [F, len(PACKED)] float64, samples [F, k]) on x's device, with no host sync.

    `features` (indices along dim 1, as `profiled_features` gives them) profiles those
    features alone: they are selected before anything else is copied.

    `generator` draws the sampled positions; the recorder passes its own, so that recording
    never advances the training's global random state.

    Moments and ranges are exact. n_unique and int_frac are exact when a feature has at most
    schema.UNIQUE_EXACT values in the batch (tabular batches), else counted on a strided
    subsample of at most that many (image channels), where n_unique is then a lower bound.
    """
    if features is not None and x.dim() >= 2:
        x = x.detach().index_select(1, torch.as_tensor(features, device=x.device))
    m = feature_matrix(x)
    if m.dtype == torch.bool:
        m = m.to(torch.uint8)
    work = m.double() if not m.is_floating_point() or m.dtype == torch.float64 else m.float()
    count = work.shape[1]
    # Moments around each feature's first value: no cancellation for offset data (years, ids).
    # Centred in float64: a float32 difference overflows for values spanning the float32 range.
    # A first value that is NaN or infinite centres nothing.
    shift = work[:, :1].double()
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    # A fresh float64 copy (never the caller's batch: a float64 input's `double()` is itself),
    # centred in place.
    centered = work.to(torch.float64, copy=True).sub_(shift)
    # Accumulated in float64: float32 sums of squares overflow long before the values do.
    total = centered.sum(dim=1, dtype=torch.float64)
    squares = torch.linalg.vector_norm(centered, dim=1, dtype=torch.float64) ** 2
    mean = shift[:, 0] + total / count
    var = (squares - total * total / count) / (count - 1) if count > 1 else total * math.nan
    std = var.clamp(min=0).sqrt()
    # Not aminmax(dim=1): on the CPU it reduces rows without vectorizing, 18x slower.
    mn, mx = work.amin(dim=1), work.amax(dim=1)
    sub = work[:, ::unique_stride(count)]
    if sub.device.type == "cpu" and type(sub) is torch.Tensor:  # not a subclass (DTensor)
        # numpy's vectorized sort of many short rows: 30x or more faster than torch's CPU sort
        # (the profile's largest cost), with the same order (NaN last) and the same count.
        ordered = torch.from_numpy(np.sort(sub.numpy(), axis=1))
    else:
        ordered = torch.sort(sub, dim=1).values
    n_unique = ((ordered[:, 1:] != ordered[:, :-1]).sum(dim=1) + 1).clamp(max=N_UNIQUE_CAP)
    zeros = torch.zeros_like(mean)
    if m.is_floating_point():
        int_frac = (sub == sub.round()).double().mean(dim=1)
        if work.device.type == "cpu" and bool(torch.isfinite(total).all()):
            nan = inf = zeros
        else:
            nan, inf = torch.isnan(work).sum(dim=1), torch.isinf(work).sum(dim=1)
    else:
        int_frac, nan, inf = torch.ones_like(mean), zeros, zeros
    # One stack promotes them all to mean's float64 (exactly: extremes, counts).
    packed = torch.stack([mean, std, mn, mx, n_unique, int_frac, nan, inf], dim=1)
    k = min(SAMPLES_PER_BATCH, count)
    idx = torch.randint(count, (k,), device=m.device, generator=generator)
    return packed, work[:, idx].double()


def feature_names(prefix: str, n: int, names: Sequence[str] | None, ndim: int = 2,
                  features: np.ndarray | None = None) -> list[str]:
    """`names` when they fit; else `prefix` alone for one feature, `prefix[i]` for several.
    With `features` (profiled_features of n), the names of those features alone, each
    keeping its index in the full input (`feature[517]`)."""
    if names is not None and len(names) == n:
        named = [str(v) for v in names]
        return named if features is None else [named[i] for i in features]
    if n == 1 and prefix:
        return [prefix]
    base = prefix or ("channel" if ndim >= 3 else "feature")
    if features is None:
        return list(_numbered(base, n))
    if features is profiled_features(n):
        return list(_numbered_spread(base, n))  # the usual selection: made once per layout
    return [f"{base}[{i}]" for i in features]


@functools.lru_cache(maxsize=64)
def _numbered(base: str, n: int) -> tuple[str, ...]:
    """`base[0]`, ..., `base[n-1]`: made once per input layout, not at every profiled step."""
    return tuple(f"{base}[{i}]" for i in range(n))


@functools.lru_cache(maxsize=64)
def _numbered_spread(base: str, n: int) -> tuple[str, ...]:
    """The names of profiled_features(n), never all n of them (a name per feature of a
    4-million-wide input would be hundreds of MB)."""
    return tuple(f"{base}[{i}]" for i in profiled_features(n))


def dtype_name(x: Any) -> str:
    return str(x.dtype).replace("torch.", "")


# -- DataFrames (host side) ----------------------------------------------------------------------
def datetime_resolution(ns: np.ndarray) -> str | None:
    """The coarsest unit among ns..D that divides every value (epoch nanoseconds)."""
    if not len(ns):
        return None
    for unit, length in reversed(RESOLUTIONS):
        if not np.any(ns % length):
            return unit
    return "ns"


def frame_profile(df, rng: np.random.Generator, skip: Callable[[str, str, str], None] | None = None
                  ) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """One row per column of a pandas DataFrame, plus sampled values per numeric column.

    A column that cannot be profiled (cells holding lists, datetimes beyond the trace's
    datetime64[ns] range, ...) is left out and reported to skip(feature, kind, reason); the
    other columns are profiled. A repeated column name gets a suffix: `x`, `x#2`, ...
    """
    rows, samples = [], {}
    seen: dict[str, int] = {}
    for i, label in enumerate(df.columns):
        name = str(label)
        if name in seen:
            seen[name] += 1
            if skip is not None:
                skip(name, "duplicate", f"the column name is repeated: the repeats are profiled "
                     f"as '{name}#2', ...")
            name = f"{name}#{seen[name]}"
        seen.setdefault(name, 1)
        try:
            row, values = _column_profile(name, df.iloc[:, i])
        except Exception as exc:  # one odd column never stops the others' profiles
            if skip is None:
                raise
            kind, reason = exc.args if isinstance(exc, _Unprofiled) else \
                (type(exc).__name__, f"{type(exc).__name__}: {exc}")
            skip(name, kind, reason)
            continue
        rows.append(row)
        if values is not None:
            samples[name] = values
    return rows, {k: _subsample(v, rng) for k, v in samples.items()}


class _Unprofiled(Exception):
    """A column left out: args are (kind of problem, reason)."""


def _fits_ns(times: np.ndarray) -> bool:
    """Whether datetimes (no NaT) fit the trace's timestamp[ns] columns. Compared as integers in
    their own unit: numpy compares datetimes of different units in ns, which overflows."""
    if not len(times) or times.dtype == np.dtype("datetime64[ns]"):
        return True
    unit, count = np.datetime_data(times.dtype)
    length = int(np.timedelta64(count, unit) / np.timedelta64(1, "ns"))
    limit = (2**63 - 1) // length
    ints = times.astype(np.int64)
    return -limit <= int(ints.min()) and int(ints.max()) <= limit


def _column_profile(name: str, col) -> tuple[dict[str, Any], np.ndarray | None]:
    import pandas as pd

    row: dict[str, Any] = {"feature": name, "dtype": str(col.dtype), "count": int(len(col))}
    values = None
    if pd.api.types.is_datetime64_any_dtype(col):
        times = col.dropna()
        if getattr(times.dt, "tz", None) is not None:
            times = times.dt.tz_convert("UTC").dt.tz_localize(None)
        raw = times.to_numpy()
        if not _fits_ns(raw):
            raise _Unprofiled("datetime-range", f"datetimes from {raw.min()} to {raw.max()} lie "
                              "beyond datetime64[ns] (years 1678-2262), which the trace holds")
        ns = raw.astype("datetime64[ns]").astype(np.int64)
        values = ns / 1e9
        row.update(_numeric(values), nan_count=int(col.isna().sum()), inf_count=0,
                   int_frac=None, resolution=datetime_resolution(ns),
                   time_min=times.min() if len(times) else None,
                   time_max=times.max() if len(times) else None)
    elif pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        if pd.api.types.is_complex_dtype(col):
            raise _Unprofiled("complex", "complex values have no order; not profiled")
        floats = col.to_numpy(dtype=np.float64, na_value=np.nan)
        values = floats[np.isfinite(floats)]
        row.update(_numeric(values), nan_count=int(np.isnan(floats).sum()),
                   inf_count=int(np.isinf(floats).sum()),
                   int_frac=float(np.mean(values == np.round(values))) if len(values) else None)
    else:
        row.update(nan_count=int(col.isna().sum()), inf_count=0)
    # Counted on the same window as tensor features, so batches compare alike.
    row["n_unique"] = _distinct(col.iloc[::unique_stride(len(col))])
    return row, values


def _numeric(values: np.ndarray) -> dict[str, Any]:
    if not len(values):
        return {}
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if len(values) > 1
            else float("nan"), "min": float(values.min()), "max": float(values.max())}


def _distinct(col) -> int:
    """Distinct non-missing values (finite ones, for numbers), capped: the n_unique of a column
    already cut to its counting window."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        count = len(np.unique(values[np.isfinite(values)]))
    else:
        try:
            count = int(col.nunique(dropna=True))
        except TypeError as exc:  # cells holding lists, dicts, arrays
            raise _Unprofiled("unhashable", f"its cells hold unhashable values ({exc})") from exc
    return min(count, N_UNIQUE_CAP)


def _subsample(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if len(values) <= SAMPLES_PER_BATCH:
        return values
    return values[rng.integers(0, len(values), SAMPLES_PER_BATCH)]


class Reservoir:
    """A uniform sample of at most `size` values per (split, feature), over the whole run.

    One row of a 2-D array per (split, feature), offered a batch and all its features at once
    by a few numpy calls of Algorithm R, never a few per feature. Used only on the writer thread.

    Its memory is bounded by `budget` values (16 bytes each, with their steps), whatever the
    number of features: it keeps at most budget // size rows. Features are admitted in the
    order they are first offered, at most half the rows' worth of feature names, so that each
    admitted feature has room for a second split (train and val sample the same features); a
    row past the budget, or of a feature not admitted, is refused and counted in `refused`.
    """

    def __init__(self, size: int = 2_000, seed: int = 0, budget: int = MAX_SAMPLE_VALUES):
        self.size = size
        self.capacity = max(1, budget // max(size, 1))  # rows
        self.refused = 0  # rows the budget refused (counted once per batch layout)
        self.refused_first: list[tuple[str, str]] = []  # the first few of them, for a warning
        self._names: set[str] = set()  # the features admitted
        self.rng = np.random.default_rng(seed)
        self._rows: dict[tuple[str, str], int] = {}
        self._values = np.empty((0, size))  # row r: its kept values in slot order
        self._steps = np.empty((0, size), dtype=np.int64)
        self._seen = np.empty(0, dtype=np.int64)  # values offered to each row so far
        self._known: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}  # rows of a layout

    def add(self, split: str, feature: str, step: int, values: np.ndarray) -> None:
        """Offer the finite `values` of one feature."""
        values = np.asarray(values, dtype=np.float64).reshape(1, -1)
        self.add_many(split, [feature], step, values)

    def add_many(self, split: str, features: list[str], step: int, values: np.ndarray) -> None:
        """Offer the finite values of each row of `values` (features x values) to its
        feature's sample, in order: each value is kept in its turn with the chance of a uniform
        sample (Algorithm R's), the first `size` always."""
        if len(set(features)) < len(features):  # one row per feature in the vectorized form
            for feature, row in zip(features, values):
                self.add_many(split, [feature], step, row.reshape(1, -1))
            return
        rows = self._rows_of(split, features)
        if len(rows) and rows.min() < 0:  # rows refused by the budget
            kept = rows >= 0
            rows, values = rows[kept], values[kept]
        finite = np.isfinite(values)
        counts = finite.sum(axis=1)
        total = int(counts.sum())
        if not total:
            return
        owner = np.repeat(rows, counts)
        # Each value's place in its feature's stream: its row's values seen so far, plus its
        # place among this batch's finite values of that feature.
        first = np.repeat(np.cumsum(counts) - counts, counts)
        index = self._seen[owner] + np.arange(total) - first
        slot = index.copy()
        late = index >= self.size
        slot[late] = (self.rng.random(int(late.sum())) * (index[late] + 1)).astype(np.int64)
        take = slot < self.size
        self._values[owner[take], slot[take]] = values[finite][take]
        self._steps[owner[take], slot[take]] = step
        self._seen[rows] += counts

    def _rows_of(self, split: str, features: list[str]) -> np.ndarray:
        key = (split, tuple(features))
        known = self._known.get(key)
        if known is not None:  # the same batch layout as a step before: no lookup per feature
            return known
        rows = []
        for feature in features:
            row = self._rows.get((split, feature))
            if row is None:
                row = self._admit(split, feature)
            rows.append(row)
        if len(self._rows) > len(self._seen):  # grow by doubling: rows are added rarely
            grow = min(max(len(self._rows), 2 * len(self._seen)), self.capacity) \
                - len(self._seen)
            self._values = np.concatenate([self._values, np.empty((grow, self.size))])
            self._steps = np.concatenate([self._steps,
                                          np.empty((grow, self.size), dtype=np.int64)])
            self._seen = np.concatenate([self._seen, np.zeros(grow, dtype=np.int64)])
        known = self._known[key] = np.array(rows, dtype=np.int64)
        return known

    def _admit(self, split: str, feature: str) -> int:
        """The new row of (split, feature), or -1 when the budget refuses it."""
        if len(self._rows) < self.capacity and (
                feature in self._names or len(self._names) < max(1, self.capacity // 2)):
            self._names.add(feature)
            row = self._rows[(split, feature)] = len(self._rows)
            return row
        self.refused += 1
        if len(self.refused_first) < 5:
            self.refused_first.append((split, feature))
        return -1

    @property
    def nbytes(self) -> int:
        """The bytes its arrays hold (at most budget * 16, plus a counter per row)."""
        return self._values.nbytes + self._steps.nbytes + self._seen.nbytes

    def columns(self) -> dict[str, Any]:
        """The kept values as the samples table's columns. The split and feature of each
        value are the rows' names, dictionary-encoded (an index per value into the names):
        a string per value, Python's or Arrow's, cost more than the rest of the snapshot's
        write, and the writer stores these as the Parquet dictionary pages they become."""
        keys = list(self._rows)
        rows = np.array([self._rows[k] for k in keys], dtype=np.int64)
        kept = np.minimum(self._seen[rows], self.size) if keys else np.empty(0, dtype=np.int64)
        filled = np.arange(self.size) < kept[:, None]  # row by row, in slot order
        owner = np.repeat(np.arange(len(keys), dtype=np.int32), kept)
        splits = sorted({split for split, _ in keys})
        split_of = np.array([splits.index(split) for split, _ in keys], dtype=np.int32)
        return {"split": pa.DictionaryArray.from_arrays(split_of[owner],
                                                        pa.array(splits, pa.string())),
                "feature": pa.DictionaryArray.from_arrays(
                    owner, pa.array([feature for _, feature in keys], pa.string())),
                "step": self._steps[rows][filled], "value": self._values[rows][filled]}
