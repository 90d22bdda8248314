"""The recorder's input profiles stay within a fixed memory budget whatever an input's width,
and nested tuples, lists and dicts of inputs are checked and profiled (issues 39 and 40)."""
import math
import warnings

import numpy as np
import pytest
import torch

import tracelab
from tracelab.core.run import open_run
from tracelab.recorders.profile import (MAX_PROFILED_FEATURES, MAX_SAMPLE_VALUES, Reservoir,
                                        profiled_features)
from tracelab.recorders.sentinel import MAX_DEPTH, batch_leaves, named_tensors


def _record(tmp_path, steps, **kwargs):
    """Record `steps` (a list of step() keyword dicts); returns (run, reservoir, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracelab.Recorder(str(tmp_path / "run"), input_every=1, **kwargs) as rec:
            for step in steps:
                rec.step(loss=1.0, **step)
            reservoir = rec._inputs._reservoir
    messages = [str(w.message) for w in caught if "tracelab" in str(w.message)]
    return open_run(tmp_path / "run"), reservoir, messages


# -- the memory budget ---------------------------------------------------------------------------
def test_the_reservoir_allocates_at_most_its_budget_whatever_the_number_of_features():
    reservoir = Reservoir(2_000, seed=0)
    features = [f"feature[{i}]" for i in range(100_000)]
    values = np.random.default_rng(0).normal(size=(len(features), 8))
    for step in range(3):
        reservoir.add_many("train", features, step, values)
        reservoir.add_many("val", features, step, values)
    assert reservoir.capacity == MAX_SAMPLE_VALUES // 2_000
    rows = 2 * (reservoir.capacity // 2)  # as many features in each split
    assert reservoir._values.shape == (rows, 2_000) and reservoir._steps.shape == (rows, 2_000)
    assert reservoir.nbytes <= MAX_SAMPLE_VALUES * 16 + rows * 8  # 64 MiB, not 3.2 GB
    assert reservoir.refused > 0
    cols = reservoir.columns()
    kept = {(s, f) for s, f in zip(cols["split"].to_pylist(), cols["feature"].to_pylist())}
    assert len(kept) == rows
    # The same features in both splits: the first ones offered, room kept for the second split.
    train = {f for s, f in kept if s == "train"}
    assert train == {f for s, f in kept if s == "val"} == set(features[:rows // 2])


def test_a_small_budget_keeps_the_admitted_features_uniform_samples():
    reservoir = Reservoir(10, seed=1, budget=100)  # 10 rows: 5 features in two splits
    stream = np.arange(1_000, dtype=np.float64)
    for split in ("train", "val", "test"):
        for step, start in enumerate(range(0, 1_000, 50)):
            batch = np.stack([stream[start:start + 50] + 10_000 * k for k in range(20)])
            reservoir.add_many(split, [f"f{k}" for k in range(20)], step, batch)
    assert reservoir._values.shape == (10, 10) and reservoir.refused > 0
    cols = {k: np.asarray(v) for k, v in reservoir.columns().items()}
    names = [str(f) for f in cols["feature"]]
    splits = [str(s) for s in cols["split"]]
    assert sorted(set(zip(splits, names))) == sorted(
        (s, f"f{k}") for s in ("train", "val") for k in range(5))  # test: no room left
    for k in range(5):
        mine = cols["value"][[n == f"f{k}" and s == "train" for n, s in zip(names, splits)]]
        assert len(mine) == 10 and len(set(mine)) == 10
        assert ((mine // 10_000) == k).all()  # each row holds its own feature's values
        assert (cols["step"][[n == f"f{k}" and s == "train" for n, s in zip(names, splits)]]
                == (mine % 10_000) // 50).all()


def test_a_wide_input_profiles_a_fixed_number_of_features_named_by_their_index(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(8, 100_000)
    x[:, 99_999] = 7.0  # the last feature is among those profiled
    before = x.clone()
    run, reservoir, messages = _record(tmp_path, [{"inputs": x}] * 2)
    assert torch.equal(x, before)
    assert reservoir.nbytes <= MAX_SAMPLE_VALUES * 16 + reservoir.capacity * 8
    chosen = profiled_features(100_000)
    assert len(chosen) == MAX_PROFILED_FEATURES and chosen[0] == 0 and chosen[-1] == 99_999
    inputs = run.inputs
    step0 = inputs[inputs.step == 0].set_index("feature")
    assert len(step0) == MAX_PROFILED_FEATURES
    assert list(step0.index) == [f"feature[{i}]" for i in chosen]
    assert set(inputs[inputs.step == 1].feature) == set(step0.index)  # the same every step
    for i in (0, int(chosen[1]), int(chosen[500]), 99_999):
        column = x[:, i].double()
        row = step0.loc[f"feature[{i}]"]
        assert row["mean"] == pytest.approx(float(column.mean()), rel=1e-9, abs=1e-12)
        assert row["std"] == pytest.approx(float(column.std()), rel=1e-9, abs=1e-12)
        assert (row["min"], row["max"], row["count"]) == (float(column.min()),
                                                           float(column.max()), 8)
    samples = run.samples
    assert set(samples.feature) <= set(step0.index) and "feature[99999]" in set(samples.feature)
    assert (samples.loc[samples.feature == "feature[99999]", "value"] == 7.0).all()
    assert any("100000 features" in m and "1024" in m for m in messages)
    # The sentinel still reads the whole batch.
    batch = run.batches.iloc[0]
    assert (batch["min"], batch["max"]) == (float(x.min()), float(x.max()))


def test_a_wide_dataframe_profiles_a_fixed_number_of_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.arange(3 * 1_500, dtype=np.float64).reshape(3, 1_500),
                         columns=[f"c{i}" for i in range(1_500)])
    run, _, messages = _record(tmp_path, [{"inputs": frame}])
    inputs = run.inputs.set_index("feature")
    assert list(inputs.index) == [f"c{i}" for i in profiled_features(1_500)]
    assert inputs.loc["c1499", "mean"] == frame["c1499"].mean()
    assert any("1500 columns" in m for m in messages)


def test_narrow_inputs_profile_every_feature(tmp_path):
    x = torch.randn(16, MAX_PROFILED_FEATURES)
    run, _, messages = _record(tmp_path, [{"inputs": x}])
    assert len(run.inputs) == MAX_PROFILED_FEATURES and profiled_features(len(run.inputs)) is None
    assert not any("features:" in m for m in messages)


# -- nested inputs -------------------------------------------------------------------------------
def test_nested_names_are_stable_and_bounded():
    x = torch.ones(2, 3)
    leaves, skipped = batch_leaves(((x, [x]), {"k": x, "m": {"n": x}}), "input")
    assert [n for n, _, _ in leaves] == ["input0.0", "input0.1.0", "input1.k", "input1.m.n"]
    assert [p for _, p, _ in leaves] == [(0, 0), (0, 1, 0), (1, "k"), (1, "m", "n")]
    assert [n for n, _ in named_tensors({"a": x, "b": (x, x)}, "input")] == ["a", "b.0", "b.1"]
    assert [n for n, _ in named_tensors((x, x), "input")] == ["input0", "input1"]  # as before
    deep = x
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    leaves, skipped = batch_leaves([x, deep], "input")
    assert [n for n, _, _ in leaves] == ["input0"]
    assert len(skipped) == 1 and "deeper than" in skipped[0]
    looped: list = [x]
    looped.append(looped)  # a list that holds itself ends at the depth bound
    leaves, skipped = batch_leaves(looped, "input")
    assert len(leaves) == MAX_DEPTH and skipped
    leaves, skipped = batch_leaves([x] * 1_000, "input")
    assert len(leaves) == 256 and "more than 256" in skipped[0]


def test_nested_inputs_are_checked_profiled_and_fingerprinted(tmp_path):
    torch.manual_seed(1)
    a, b, c = torch.randn(6, 3), torch.randn(6, 2, 4, 4), torch.randint(0, 9, (6, 5))
    a[2, 1] = math.inf
    kept = [t.clone() for t in (a, b, c)]
    inputs = ((a, [b]), {"k": c})
    run, _, messages = _record(tmp_path, [{"inputs": inputs}, {"inputs": inputs}])
    assert all(torch.equal(t, k) for t, k in zip((a, b, c), kept))  # the user's tensors
    batches = run.batches[run.batches.step == 0].set_index("name")
    assert list(batches.index) == ["input0.0", "input0.1.0", "input1.k"]
    for name, t in (("input0.0", a), ("input0.1.0", b), ("input1.k", c)):
        row = batches.loc[name]
        t = t.double()
        assert (row["min"], row["max"]) == (float(t.min()), float(t.max()))
        assert (row.nan_count, row.inf_count) == (int(torch.isnan(t).sum()),
                                                  int(torch.isinf(t).sum()))
    profile = run.inputs[run.inputs.step == 0].set_index("feature")
    assert {f"input0.0[{i}]" for i in range(3)} | {f"input0.1.0[{i}]" for i in range(2)} \
        | {f"input1.k[{i}]" for i in range(5)} == set(profile.index)
    channel = b[:, 1].double()
    assert profile.loc["input0.1.0[1]", "mean"] == pytest.approx(float(channel.mean()),
                                                                 rel=1e-12)
    assert profile.loc["input0.1.0[1]", "std"] == pytest.approx(float(channel.std()), rel=1e-9)
    assert profile.loc["input1.k[4]", "max"] == float(c[:, 4].max())
    assert profile.loc["input0.0[1]", "inf_count"] == 1
    assert len(run.fingerprints) and set(run.samples.feature) == set(profile.index)
    assert not messages  # nothing skipped


def test_what_cannot_be_read_is_warned_about_once(tmp_path):
    x = torch.randn(4, 2)
    deep = [[[[[[x]]]]]]
    steps = [{"inputs": (x, deep, ["text", {"s": "more"}])}] * 3
    run, _, messages = _record(tmp_path, steps)
    assert run.batches.groupby("step").name.apply(list).tolist() == [["input0"]] * 3
    assert len(run.inputs[run.inputs.step == 2]) == 2
    limits = [m for m in messages if "deeper than" in m]
    assert len(limits) == 1 and "input1.0.0.0" in limits[0]
    text = [m for m in messages if "given as a str" in m]
    assert len(text) == 1 and "input2.0" in text[0] and "input2.1.s" in text[0]
