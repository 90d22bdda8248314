"""Row fingerprints: equal rows hash equal, the sample is bounded and consistent across splits."""
import numpy as np
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
