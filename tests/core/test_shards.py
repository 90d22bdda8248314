"""Merging one parameter's per-rank shard statistics into the whole parameter's."""
import math

import numpy as np
import pandas as pd
import pytest

from tracelab.core.run import Run
from tracelab.core.shards import merge_shards
from tracelab.core.schema import TENSOR_STATS


def _stats(x: np.ndarray) -> dict:
    """The recorder's statistics of x in numpy (unbiased std; NaN extremes when empty)."""
    n = x.size
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"numel": n, "mean": x.mean() if n else np.nan,
                "std": x.std(ddof=1) if n > 1 else np.nan,
                "min": x.min() if n else np.nan, "max": x.max() if n else np.nan,
                "abs_mean": np.abs(x).mean() if n else np.nan,
                "norm": np.sqrt(np.square(x).sum()),
                "zero_frac": (x == 0).mean() if n else np.nan,
                "nan_count": int(np.isnan(x).sum()), "inf_count": int(np.isinf(x).sum())}


def _rows(shards: list[np.ndarray], step=0, name="w") -> list[dict]:
    return [{"step": step, "kind": "weight", "name": name, "rank": r, **_stats(x)}
            for r, x in enumerate(shards)]


def _assert_close(row, want):
    for key in TENSOR_STATS:
        if math.isnan(want[key]):
            assert math.isnan(row[key]), key
        else:
            assert row[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key


@pytest.mark.parametrize("split", [[17, 16], [3, 0], [1, 1, 5], [0, 9]])
def test_merged_shards_equal_the_whole_tensors_statistics(split):
    rng = np.random.default_rng(0)
    whole = rng.normal(1.0, 1e-3, sum(split))  # a mean that dwarfs the spread, like a norm scale
    whole[::4] = 0.0
    shards = np.split(whole, np.cumsum(split)[:-1])
    merged = merge_shards(pd.DataFrame(_rows(shards)))
    assert len(merged) == 1
    _assert_close(merged.iloc[0], _stats(whole))


def test_nan_in_one_shard_makes_the_extremes_and_spread_nan():
    whole = np.array([1.0, np.nan, 2.0, -3.0, np.inf])
    merged = merge_shards(pd.DataFrame(_rows([whole[:2], whole[2:]]))).iloc[0]
    assert (merged["nan_count"], merged["inf_count"], merged["numel"]) == (1, 1, 5)
    assert math.isnan(merged["min"]) and math.isnan(merged["max"]) and math.isnan(merged["std"])


def test_a_run_merges_only_the_names_meta_calls_sharded():
    rng = np.random.default_rng(1)
    rows = []
    for step in range(3):
        whole_a, whole_b = rng.normal(size=10), rng.normal(size=6)
        replica = rng.normal(size=4)
        rows += _rows([whole_a[:5], whole_a[5:]], step, "a")
        rows += _rows([replica, replica + 1], step, "r")  # not sharded: the lowest rank's row
        rows += _rows([whole_b[:3], whole_b[3:]], step, "b")
        rows.append({"step": step, "kind": "activation", "name": "a", "rank": 1,
                     **_stats(whole_a)})
        expected = {"a": _stats(whole_a), "r": _stats(replica), "b": _stats(whole_b)}
    tensors = pd.DataFrame(rows).sort_values("rank", kind="stable")
    run = Run.from_frames({"sharded_parameters": ["a", "b"]}, tensors=tensors)
    assert run.names("weight") == ["a", "r", "b"]
    assert list(run.stat("weight", "numel").columns) == ["a", "r", "b"]
    for stat in TENSOR_STATS:
        frame = run.stat("weight", stat)
        for name, want in expected.items():
            got = frame.loc[2, name]
            assert got == pytest.approx(want[stat], rel=1e-9, abs=1e-12), (stat, name)
    assert run.stat("activation", "numel").loc[0, "a"] == 10  # activations stay per rank
