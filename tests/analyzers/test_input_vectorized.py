"""The input rules' vectorized paths against the straightforward per-feature computation.

KS and Wasserstein for many features at once, the grouping of the samples table, and
input-collapse's screen, which may only skip what the exact per-group checks would not report.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from tracelab.analyzers._input_table import _group_samples, feature_rows, ks_wasserstein_rows
from tracelab.analyzers._inputs import (Side, check_pair, feature_profiles, may_change,
                                        may_collapse, time_changes)
from tracelab.analyzers._profiles import _group_median
from tracelab.core.run import SAMPLE_CODES, Run, open_run
from tracelab.core.schema import SCALARS, Needs
from tracelab.core.writer import RunWriter


def _reference_ks_w(x, y):
    """Both statistics from their definitions: one searchsorted per pooled value."""
    x, y = np.sort(x), np.sort(y)
    both = np.sort(np.concatenate([x, y]))
    gap = (np.searchsorted(x, both, side="right") / len(x)
           - np.searchsorted(y, both, side="right") / len(y))
    return (max(float(np.clip(-gap.min(), 0, 1)), float(gap.max())),
            float(np.dot(np.abs(gap[:-1]), np.diff(both))))


def _rows(rng, k, n, kind):
    if kind == "ties":  # few distinct values, signed zeros among them
        return rng.integers(-2, 3, (k, n)).astype(float) * rng.choice([1.0, -1.0], (k, n)) * 0.5
    if kind == "constant":
        return np.full((k, n), 3.0)
    return rng.standard_normal((k, n)) * rng.uniform(0.1, 3, (k, 1)) + rng.normal(0, 1, (k, 1))


@pytest.mark.parametrize("kind", ["continuous", "ties", "constant"])
@pytest.mark.parametrize("n,m", [(1, 1), (1, 7), (20, 20), (300, 45)])
def test_ks_wasserstein_rows_equal_the_per_feature_computation(kind, n, m):
    rng = np.random.default_rng(n * 100 + m)
    x, y = _rows(rng, 9, n, kind), _rows(rng, 9, m, kind) + (kind == "continuous") * 0.2
    ks, w, dx, dy = ks_wasserstein_rows(x, y)
    for i in range(len(x)):
        assert (ks[i], w[i]) == _reference_ks_w(x[i], y[i])  # exactly: same arithmetic
        assert (dx[i], dy[i]) == (len(np.unique(x[i])), len(np.unique(y[i])))
        assert ks[i] == pytest.approx(stats.ks_2samp(x[i], y[i]).statistic, abs=1e-12)
        assert w[i] == pytest.approx(stats.wasserstein_distance(x[i], y[i]), rel=1e-9,
                                     abs=1e-12)


def test_ks_wasserstein_rows_in_several_blocks_equal_one_row_at_a_time():
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((300, 2000)), rng.standard_normal((300, 2000)) * 1.1
    ks, w, dx, dy = ks_wasserstein_rows(x, y)  # more rows than one block holds
    for i in range(0, 300, 13):
        one = ks_wasserstein_rows(x[i:i + 1], y[i:i + 1])
        assert (ks[i], w[i], dx[i], dy[i]) == tuple(v[0] for v in one)


@pytest.mark.parametrize("seed", range(5))
def test_group_medians_equal_np_median(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 9, 40)  # tiny and empty groups among them
    gid = np.repeat(np.arange(40), sizes)
    v = rng.choice([1.0, 2.0, 7.0, 64.0, np.nan], len(gid))
    constant = np.isin(gid, np.arange(0, 40, 3))
    v[constant] = 64.0  # groups of one value throughout: the path without sorting
    mask = ~np.isnan(v) & (rng.random(len(gid)) < 0.8)  # as the profiles select
    got = _group_median(gid, v, mask, 40)
    for g in range(40):
        picked = v[mask & (gid == g)]
        assert got[g] == np.median(picked) if len(picked) else np.isnan(got[g])


def _arrow_samples(df: pd.DataFrame, chunks: int) -> pa.Table:
    """The samples as `Run.sample_table` holds them, in several chunks whose dictionaries
    differ (one per Parquet part or row group)."""
    schema = pa.schema([(c, pa.dictionary(pa.int32(), pa.string())) for c in SAMPLE_CODES]
                       + [("step", pa.int64()), ("value", pa.float64())])
    cuts = np.linspace(0, len(df), chunks + 1).astype(int)
    parts = [pa.Table.from_pandas(df.iloc[a:b], preserve_index=False).cast(schema)
             for a, b in zip(cuts[:-1], cuts[1:])]
    return pa.concat_tables(parts)


@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize("grouped", [True, False])
def test_sample_groups_equal_a_groupby(chunks, grouped):
    rng = np.random.default_rng(chunks + 10 * grouped)
    n = 3000
    df = pd.DataFrame({
        "split": rng.choice(["train", "val", "test"], n).astype(object),
        "feature": rng.choice([f"f{i}" for i in range(25)], n).astype(object),
        "step": rng.integers(0, 100, n), "value": rng.standard_normal(n)})
    df.loc[rng.random(n) < 0.05, "value"] = np.nan
    df.loc[rng.random(n) < 0.02, "value"] = np.inf
    df.loc[rng.random(n) < 0.01, "split"] = None
    df.loc[df["feature"] == "f3", "value"] = np.nan  # a feature with no finite sample
    if grouped:  # as the recorder writes its reservoir: one run of rows per group
        df = df.sort_values(["split", "feature"], kind="stable", ignore_index=True)
    got = _group_samples(_arrow_samples(df, chunks))
    want = {key: g["value"].to_numpy()[np.isfinite(g["value"].to_numpy())]
            for key, g in df.dropna(subset=["split"]).groupby(["split", "feature"], sort=False)}
    assert set(got) == set(want)
    for key, values in want.items():
        np.testing.assert_array_equal(got[key], values)  # finite values, in table order


def test_a_recorded_run_reads_its_samples_once_as_arrow_and_as_a_frame(tmp_path):
    rng = np.random.default_rng(0)
    n = 500
    columns = {"split": rng.choice(["train", "val"], n).tolist(),
               "feature": rng.choice(["a", "b", "c"], n).tolist(),
               "step": rng.integers(0, 50, n), "value": rng.standard_normal(n)}
    columns["value"][:7] = np.nan
    writer = RunWriter(tmp_path / "run", {"model": {"type": "MLP"}})
    writer.write((SCALARS, {"step": [0], "split": ["train"], "name": ["loss"], "value": [1.0],
                            "wall_time": [0.0]}))
    writer.set_samples(columns)
    writer.close()
    run = open_run(tmp_path / "run")
    assert Needs.SAMPLES in run.available
    frame = run.samples  # the DataFrame the reports use: plain strings, rows as written
    assert frame["split"].tolist() == columns["split"] and str(frame["feature"].dtype) == "str"
    np.testing.assert_array_equal(frame["value"].to_numpy(), columns["value"])
    groups = _group_samples(run.sample_table())
    for (split, feature), g in frame.groupby(["split", "feature"]):
        values = g["value"].to_numpy()
        np.testing.assert_array_equal(groups[(split, feature)], values[np.isfinite(values)])
    assert not run.problems


def test_a_run_built_in_memory_gives_its_samples_as_arrow():
    df = pd.DataFrame({"split": ["train", "val", "train"], "feature": ["a", "a", "b"],
                       "value": [1, 2.5, np.nan]})
    run = Run.from_frames(samples=df)
    groups = _group_samples(run.sample_table())
    assert groups[("val", "a")].tolist() == [2.5] and groups[("train", "b")].tolist() == []


@pytest.mark.parametrize("by_step", [True, False])
def test_feature_rows_equal_a_stable_groupby(by_step):
    rng = np.random.default_rng(by_step)
    n = 2000
    df = pd.DataFrame({"step": rng.integers(0, 30, n),
                       "split": rng.choice(["val", "train", "test"], n).astype(object),
                       "feature": rng.choice([f"f{i}" for i in range(40)], n).astype(object),
                       "mean": np.arange(n, dtype=float), "dtype": "float32"})
    df.loc[rng.random(n) < 0.02, "feature"] = None
    if by_step:  # as a run's reader returns it: the one-sort path
        df = df.sort_values("step", kind="stable", ignore_index=True)
    frame = Run.from_frames(inputs=df).inputs
    got = {(f, s): rows["mean"].tolist() for f, by in feature_rows(frame) for s, rows in by.items()}
    want = {key: g.sort_values("step", kind="stable")["mean"].tolist()
            for key, g in df.dropna(subset=["feature"]).groupby(["feature", "split"])}
    assert got == want
    assert all(list(by)[0] == "train" for _, by in feature_rows(frame))


def _random_inputs(rng, features: int) -> pd.DataFrame:
    """Per-batch profiles of features of every sort: floats that get rounded or collapse
    later on, datetimes that lose resolution, dtype changes, NaN counts, tiny groups."""
    rows = []
    for f in range(features):
        kind = rng.choice(["float", "float", "whole", "time", "collapse", "const"])
        recast, coarse = rng.random() < 0.15, rng.choice(["D", "s", "us"])
        for split in ("train", "val"):
            n = int(rng.integers(1, 14))
            change = int(rng.integers(0, n + 1))
            for i in range(n):
                late = i >= change
                count = float(rng.choice([1, 3, 8, 64, 64, 256]))
                unique = float(rng.integers(1, count + 1))
                if kind == "collapse" and late:
                    unique = float(rng.integers(1, 3))
                if kind == "const":
                    unique = 1.0
                frac = {"float": rng.uniform(0, 0.5), "whole": 1.0, "collapse": 0.0,
                        "const": 1.0, "time": np.nan}[kind]
                if kind == "float" and late and rng.random() < 0.5:
                    frac = 1.0
                dtype = ("datetime64[ns]" if kind == "time" else
                         rng.choice(["float16", "int64"]) if late and recast else "float32")
                res = (coarse if late else "s") if kind == "time" else None
                rows.append({
                    "step": i, "split": split, "feature": f"f{f}", "dtype": dtype,
                    "count": count, "mean": rng.normal(), "std": rng.uniform(0, 2),
                    "min": -1.0, "max": 1.0 if kind != "const" else -1.0,
                    "n_unique": np.nan if rng.random() < 0.05 else unique,
                    "int_frac": np.nan if rng.random() < 0.05 else frac,
                    "nan_count": float(rng.integers(0, 2)), "inf_count": 0.0,
                    "resolution": res})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("limits", [
    dict(factor=6.0, min_distinct=5.0, max_int_frac=0.9, chance=1e-6, min_batches=3),
    dict(factor=2.0, min_distinct=1.0, max_int_frac=1.0, chance=0.5, min_batches=1)])
def test_the_collapse_screen_skips_only_what_the_exact_checks_would_not_report(seed, limits):
    rng = np.random.default_rng(seed)
    run = Run.from_frames(inputs=_random_inputs(rng, 40))
    limits = dict(limits)
    min_batches = limits.pop("min_batches")
    groups = [(rows, p) for _, by, pooled in feature_profiles(run.inputs)
              for s, rows in by.items() for p in [pooled[s]]]
    skipped = found = 0
    for rows, p in groups:
        changes = time_changes(rows, min_batches=min_batches, **limits)
        if not may_change(p, min_batches=min_batches, factor=limits["factor"]):
            assert changes == []
            skipped += 1
    for i, (rows_a, pa_) in enumerate(groups):  # every ordered pair of groups
        for rows_b, pb in groups[i % 7::7]:
            symptoms = check_pair(Side("a", rows_a, None, pa_), Side("b", rows_b, None, pb),
                                  **limits)
            found += bool(symptoms)
            if not may_collapse(pa_, pb, **limits):
                assert symptoms == []
                skipped += 1
    assert skipped and found  # the screen skips work, and the pairs do collapse sometimes
