"""Row fingerprints: equal rows hash equal, the sample is bounded and consistent across splits."""
import numpy as np
import pytest
import torch

import tracelab
from tracelab.core.run import open_run
from tracelab.recorders.fingerprints import Fingerprints
from tracelab.recorders.transfer import StepRecord


def _units(fp, x, split="train", step=0):
    record = StepRecord()
    fp.record(step, split, x, record)
    return {cols["input"][0]: cols["hash"] for _, cols in record.seal()()}


def _hashes(fp, x, split="train"):
    rows = [h for name, h in _units(fp, x, split).items() if not name.startswith("items:")]
    return rows[0] if rows else np.empty(0, np.int64)


def test_equal_rows_hash_equal_and_distinct_rows_differ():
    torch.manual_seed(0)
    x = torch.randn(200, 6)
    fp = Fingerprints(10_000)
    h = _hashes(fp, x)
    assert len(h) == 200 and (h >= 0).all() and (h < 1 << 52).all()
    # The same rows again, shuffled and in another dtype layout: nothing new to keep.
    assert len(_hashes(fp, x[torch.randperm(200)].contiguous())) == 0
    other = Fingerprints(10_000)
    # A row differing in one value (one ulp) hashes differently; the same row hashes the same.
    y = x.clone()
    y[:, 3] = torch.nextafter(y[:, 3], torch.tensor(10.0))
    assert len(set(_hashes(other, x).tolist()) & set(_hashes(other, y, "val").tolist())) == 0
    assert set(_hashes(Fingerprints(10_000), x).tolist()) == set(h.tolist())
    # Integer rows (token ids) and several inputs of one batch.
    ids = torch.randint(0, 50, (64, 8))
    fp = Fingerprints(10_000)
    both = _units(fp, {"ids": ids, "mask": ids > 3})
    assert list(both) == ["ids,mask"] and len(both["ids,mask"]) == 64  # no item unit
    assert len(_hashes(fp, {"ids": ids, "mask": ids > 3})) == 0


def test_a_first_batch_is_written_with_its_repeats_later_ones_once():
    x = torch.randn(50, 4)
    fp = Fingerprints(10_000)
    first = _hashes(fp, torch.cat([x, x[:10]]))
    assert len(first) == 60 and len(np.unique(first)) == 50  # the batch size, and its rows
    assert len(_hashes(fp, torch.cat([x[:10], torch.randn(5, 4)]))) == 5


def test_items_of_one_kind_hash_alike_in_any_slot():
    torch.manual_seed(0)
    a, b, c = torch.randn(3, 32, 1, 6, 6)
    fp = Fingerprints(10_000)
    train = _units(fp, (a, b))
    val = _units(fp, (b, c), "val")  # b's images, now first of each pair
    assert set(train) == {"input0,input1", "items:input0,input1"}
    assert not set(train["input0,input1"].tolist()) & set(val["input0,input1"].tolist())
    shared = set(train["items:input0,input1"].tolist()) & set(val["items:input0,input1"].tolist())
    assert len(shared) == 32
    # Stacked along dim 1 (a 2-channel tensor of pairs): the same item hashes.
    stacked = _units(Fingerprints(10_000), torch.cat([c, a], 1), "val")
    assert set(stacked) == {"input", "items:input"}
    assert set(stacked["items:input"].tolist()) >= set(val["items:input0,input1"].tolist()) - \
        set(train["items:input0,input1"].tolist())
    # Tensors of different shapes or dtypes are one row, not items of one kind, and so are
    # token ids beside their mask (1-D items, which repeat by nature).
    assert list(_units(Fingerprints(10_000), (a, torch.randn(32, 3)))) == ["input0,input1"]
    ids = torch.randint(0, 50, (32, 12))
    assert list(_units(Fingerprints(10_000), {"ids": ids, "mask": torch.ones_like(ids)})) == \
        ["ids,mask"]
    # Pairs of colour images: one unit of their channels, matched in either slot.
    rgb = torch.randn(3, 32, 3, 6, 6)
    fp = Fingerprints(10_000)
    train = _units(fp, (rgb[0], rgb[1]))
    assert set(train) == {"input0,input1", "items:input0,input1"}
    assert len(train["items:input0,input1"]) == 32 * 6
    val = _units(fp, (rgb[1], rgb[2]), "val")["items:input0,input1"]
    assert len(set(val.tolist()) & set(train["items:input0,input1"].tolist())) == 32 * 3


def test_a_dataframe_s_numeric_columns_are_fingerprinted():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20) % 3, "name": ["x"] * 20})
    fp = Fingerprints(10_000)
    h = _units(fp, frame)["input"]
    assert len(h) == 20 and len(np.unique(h)) == 20
    assert set(_units(fp, frame.iloc[5:8], "val")["input"].tolist()) <= set(h.tolist())


def test_the_sample_is_bounded_and_consistent_across_splits(tmp_path):
    torch.manual_seed(0)
    pool = torch.randn(4000, 5)
    with tracelab.Recorder(str(tmp_path / "run"), input_every=1, fingerprints=256) as rec:
        for step in range(40):
            rec.step(loss=1.0, inputs=pool[torch.randint(0, 4000, (100,))])
        for _ in range(3):  # evaluated again and again: each row written once
            rec.log("val", inputs=pool[:1000])
    fp = open_run(tmp_path / "run").fingerprints
    val = fp.loc[fp["split"] == "val", "hash"].to_numpy()
    assert len(val) == len(np.unique(val))
    train = fp.loc[fp["split"] == "train", "hash"].to_numpy()
    # Whatever a split kept below the common threshold, the other kept too when it saw it.
    limit = min(1 << int(train.max()).bit_length(), 1 << int(val.max()).bit_length())
    kept_val = set(val[val < limit].tolist())
    assert 100 <= len(kept_val) <= 256 * 2
    reference = Fingerprints(10 ** 9)
    full = set(_hashes(reference, pool[:1000], "val").tolist())
    assert kept_val == {h for h in full if h < limit}


def test_float64_rows_of_small_integers_do_not_collide():
    # 1.0 as a double has 52 low zero bits: each row's hash must still see every column.
    grid = torch.cartesian_prod(*[torch.arange(4, dtype=torch.float64)] * 5)  # 1,024 rows
    assert len(np.unique(_hashes(Fingerprints(10_000), grid))) == len(grid)
    one_hot = torch.eye(40, dtype=torch.float64)
    assert len(np.unique(_hashes(Fingerprints(10_000), one_hot))) == 40
