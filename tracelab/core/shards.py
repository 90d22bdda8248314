"""The statistics of a sharded parameter from those of its shards, one per rank.

Under FSDP2 each rank records the weight, grad and update of its own shard of a parameter
(meta.json's `sharded_parameters`); the whole parameter's statistics are the shards' pooled:
counts and sums add, extremes take the extreme, and the std pools each shard's spread about the
whole mean (Chan et al.), which keeps the digits that Σx² - (Σx)²/n would lose to cancellation.
The std is unbiased, as the recorder's (stats.finish).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

_SUMS = ("mean", "abs_mean", "zero_frac")  # numel-weighted means


def sharded_names(rank_meta: Iterable[Mapping[str, Any]]) -> set[str]:
    """The parameter names any rank recorded as its shard."""
    found: set[str] = set()
    for meta in rank_meta:
        names = meta.get("sharded_parameters")
        if isinstance(names, list):
            found.update(str(n) for n in names)
    return found


def merge_shards(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, name) of rows that hold one shard per rank, in order of each group's
    first row; `rank` becomes the lowest rank that recorded a shard."""
    rows = rows.drop_duplicates(["step", "name", "rank"], keep="last")
    n = rows["numel"].to_numpy(dtype=float, na_value=np.nan)
    has = n > 0  # an empty shard (a rank past the last chunk) adds nothing, not NaN
    col = {c: rows[c].to_numpy(dtype=float, na_value=np.nan) for c in
           (*_SUMS, "std", "norm", "min", "max", "nan_count", "inf_count")}
    parts = pd.DataFrame({"step": rows["step"].to_numpy(), "name": rows["name"].to_numpy(),
                          "rank": rows["rank"].to_numpy(), "kind": rows["kind"].to_numpy(),
                          "numel": np.where(has, n, 0.0),
                          "sq": np.where(has, col["norm"] ** 2, 0.0),
                          "m2": np.where(n > 1, (n - 1) * col["std"] ** 2, 0.0),
                          "nan_count": col["nan_count"], "inf_count": col["inf_count"],
                          "min": np.where(has, col["min"], np.nan),
                          "max": np.where(has, col["max"], np.nan),
                          "nan_extreme": has & (np.isnan(col["min"]) | np.isnan(col["max"]))})
    for c in _SUMS:
        parts[c] = np.where(has, col[c] * n, 0.0)
    grouped = parts.groupby(["step", "name"], sort=False)
    with np.errstate(invalid="ignore", divide="ignore"):
        # Each shard's spread about the whole mean: Σ (n_i - 1) s_i² + n_i (mean_i - mean)².
        whole_mean = (grouped["mean"].transform("sum") / grouped["numel"].transform("sum"))
        parts["m2"] += np.where(has, n * (col["mean"] - whole_mean.to_numpy()) ** 2, 0.0)
        # groupby sums skip NaN: a NaN in one shard must stay NaN in the whole.
        summed = ("numel", "sq", "m2", "nan_count", "inf_count", *_SUMS)
        for c in ("sq", "m2", *_SUMS):
            parts[f"{c}_nan"] = np.isnan(parts[c].to_numpy())
        out = parts.groupby(["step", "name"], sort=False).agg(
            kind=("kind", "first"), rank=("rank", "min"), min=("min", "min"), max=("max", "max"),
            nan_extreme=("nan_extreme", "any"), **{c: (c, "sum") for c in summed},
            **{f"{c}_nan": (f"{c}_nan", "any") for c in ("sq", "m2", *_SUMS)})
        for c in ("sq", "m2", *_SUMS):
            out.loc[out.pop(f"{c}_nan").to_numpy(), c] = np.nan
        total = out["numel"].to_numpy()
        for c in _SUMS:
            out[c] = out[c].to_numpy() / total
        out["std"] = np.sqrt(np.clip(out["m2"].to_numpy() / (total - 1), 0.0, None))
        out.loc[total <= 1, "std"] = np.nan
    out["norm"] = np.sqrt(out["sq"].to_numpy())
    out.loc[out["nan_extreme"].to_numpy(), ["min", "max"]] = np.nan
    out = out.drop(columns=["sq", "m2", "nan_extreme"]).reset_index()
    for c in ("numel", "nan_count", "inf_count"):
        out[c] = out[c].astype(np.int64)
    return out
