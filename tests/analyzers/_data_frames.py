"""Build `inputs` and `samples` tables the way the recorder does, from plain arrays or
DataFrames, without torch: per-batch statistics plus a bounded uniform sample of values."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.core.schema import RESOLUTIONS

SAMPLES_PER_BATCH = 64
RESERVOIR = 2000


def _resolution(ns: np.ndarray) -> str:
    for unit, length in reversed(RESOLUTIONS):
        if not np.any(ns % length):
            return unit
    return "ns"


def _column(values, dtype: str) -> tuple[dict, np.ndarray]:
    if dtype.startswith("datetime"):
        ns = pd.to_datetime(pd.Series(values)).to_numpy(dtype="datetime64[ns]").astype(np.int64)
        sec = ns / 1e9
        row = dict(dtype=dtype, count=len(ns), mean=sec.mean(), std=sec.std(ddof=1) if len(sec) > 1
                   else np.nan, min=sec.min(), max=sec.max(), n_unique=len(np.unique(ns)),
                   int_frac=np.nan, nan_count=0, inf_count=0, resolution=_resolution(ns),
                   time_min=pd.Timestamp(ns.min()), time_max=pd.Timestamp(ns.max()))
        return row, sec
    if dtype == "object":
        return dict(dtype=dtype, count=len(values), n_unique=len(set(values)), nan_count=0,
                    inf_count=0), np.empty(0)
    x = np.asarray(values, dtype=float)
    fin = x[np.isfinite(x)]
    row = dict(dtype=dtype, count=len(x), mean=fin.mean(),
               std=fin.std(ddof=1) if len(fin) > 1 else np.nan, min=fin.min(), max=fin.max(),
               n_unique=min(len(np.unique(fin)), 10_000), int_frac=np.mean(fin == np.round(fin)),
               nan_count=int(np.isnan(x).sum()), inf_count=int(np.isinf(x).sum()))
    return row, fin


def _matrix_rows(x: np.ndarray, feats, dtypes, step, split) -> list[dict]:
    """All columns of a finite float batch at once (the common case, kept fast)."""
    ordered = np.sort(x, axis=0)
    n_unique = (np.diff(ordered, axis=0) != 0).sum(axis=0) + 1
    std = x.std(axis=0, ddof=1) if len(x) > 1 else np.full(x.shape[1], np.nan)
    stats = dict(mean=x.mean(axis=0), std=std, min=x.min(axis=0), max=x.max(axis=0),
                 n_unique=np.minimum(n_unique, 10_000), int_frac=(x == np.round(x)).mean(axis=0))
    return [{"step": step, "split": split, "feature": f, "dtype": dtypes.get(f, "float32"),
             "count": len(x), **{k: v[j] for k, v in stats.items()}, "nan_count": 0,
             "inf_count": 0} for j, f in enumerate(feats)]


def input_frames(splits: dict, *, batch: int | dict = 64, names=None, dtypes=None, seed=0,
                 step_of=None) -> dict[str, pd.DataFrame]:
    """{"inputs": df, "samples": df} for `Run.from_frames(**frames)`.

    `splits` maps a split to an array [rows, features] or a DataFrame, or to a list of such
    batches. Batches get consecutive steps per split unless `step_of(split, i)` says otherwise.
    """
    rng = np.random.default_rng(seed)
    rows, samples = [], []
    for split, data in splits.items():
        size = batch.get(split, 64) if isinstance(batch, dict) else batch
        chunks = data if isinstance(data, list) else [
            data[i:i + size] for i in range(0, len(data), size)]
        kept: dict[str, list] = {}
        for i, chunk in enumerate(chunks):
            step = step_of(split, i) if step_of else i
            if isinstance(chunk, pd.DataFrame):
                cols = [(str(c), chunk[c].to_numpy(), str(chunk[c].dtype)) for c in chunk.columns]
            else:
                chunk = np.asarray(chunk, dtype=float)
                chunk = chunk.reshape(len(chunk), -1)
                feats = names or [f"x/{j}" for j in range(chunk.shape[1])]
                rows.extend(_matrix_rows(chunk, feats, dtypes or {}, step, split))
                for j, feature in enumerate(feats):
                    pick = chunk[rng.integers(0, len(chunk), min(SAMPLES_PER_BATCH, len(chunk))), j]
                    kept.setdefault(feature, []).append((step, pick[np.isfinite(pick)]))
                continue
            for feature, values, dtype in cols:
                row, fin = _column(values, dtype)
                rows.append({"step": step, "split": split, "feature": feature, **row})
                if len(fin):
                    pick = fin[rng.integers(0, len(fin), min(SAMPLES_PER_BATCH, len(fin)))]
                    kept.setdefault(feature, []).append((step, pick))
        for feature, parts in kept.items():
            steps = np.concatenate([np.full(len(v), s) for s, v in parts])
            values = np.concatenate([v for _, v in parts])
            if len(values) > RESERVOIR:
                idx = np.sort(rng.choice(len(values), RESERVOIR, replace=False))
                steps, values = steps[idx], values[idx]
            samples.append(pd.DataFrame({"split": split, "feature": feature, "step": steps,
                                         "value": values}))
    inputs = pd.DataFrame(rows)
    for col in ("resolution", "time_min", "time_max"):
        if col not in inputs:
            inputs[col] = None
    return {"inputs": inputs,
            "samples": pd.concat(samples, ignore_index=True) if samples else None}
