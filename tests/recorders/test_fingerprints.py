"""Row fingerprints: equal rows hash equal, the sample is bounded and consistent across splits."""
import numpy as np
import pytest
import torch

import tracelab
from tracelab.core.run import open_run
from tracelab.recorders.fingerprints import Fingerprints
from tracelab.recorders.transfer import StepRecord


def _hashes(fp, x, split="train"):
    record = StepRecord()
    fp.record(0, split, x, record)
    rows = record.seal()()
    return rows[0][1]["hash"] if rows else np.empty(0, np.int64)


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
    both = _hashes(Fingerprints(10_000), {"ids": ids, "mask": ids > 3})
    assert len(both) == len(torch.unique(ids, dim=0))


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


def test_the_compiled_hash_is_the_torch_hash(monkeypatch):
    """Batches hashed on the CPU by the kernel and on a device by torch must agree, or a
    train split on one and a val split on the other would never overlap."""
    from tracelab.recorders import kernel_loader
    if kernel_loader.kernels() is None:
        pytest.skip("numba unavailable")
    torch.manual_seed(1)
    batches = [torch.randn(50, 7), torch.randn(50, 3, 4).double(), torch.randn(50, 5).half(),
               torch.randn(50, 5).bfloat16(), torch.randint(-9, 2**40, (50, 6)),
               torch.randint(0, 200, (50, 3), dtype=torch.uint8), torch.rand(50, 4) > 0.5,
               {"ids": torch.randint(0, 50, (50, 8)), "x": torch.randn(50, 2)}]
    for batch in batches:
        compiled = _hashes(Fingerprints(10_000), batch)
        monkeypatch.setattr(kernel_loader, "_kernels", None)  # the torch path devices take
        plain = _hashes(Fingerprints(10_000), batch)
        monkeypatch.undo()
        assert len(compiled) > 0 and np.array_equal(np.sort(compiled), np.sort(plain))


def test_host_copies_hash_as_the_batch_itself():
    """A profiled step hands the fingerprints the batch's host copies, hashed on the writer
    thread: the same hashes as the batch read where it lies."""
    torch.manual_seed(2)
    batches = [torch.randn(50, 7), torch.randn(50, 5).half(), torch.randint(-9, 2**40, (50, 6)),
               torch.rand(50, 4) > 0.5, torch.randn(7, 50).t(),  # not contiguous
               {"ids": torch.randint(0, 50, (50, 8)), "x": torch.randn(50, 2)}]
    for batch in batches:
        tensors = batch.values() if isinstance(batch, dict) else [batch]
        record = StepRecord()
        Fingerprints(10_000).record(0, "train", batch, record,
                                    copies={id(t): t.clone() for t in tensors})
        from_copies = record.seal()()[0][1]
        direct = _hashes(Fingerprints(10_000), batch)
        assert np.array_equal(from_copies["hash"], direct)
        assert from_copies["input"][0] == ("ids,x" if isinstance(batch, dict) else "input")
