"""train-val-overlap: validation rows copied from the training rows, judged against chance."""
import pytest

torch = pytest.importorskip("torch")  # recorded by real trainings; `make test` runs them

import tracelab
from tracelab.analyzers.train_val_overlap import train_val_overlap
from tracelab.core.run import open_run


def _record(tmp_path, train_rows, val_rows, steps=30):
    g = torch.Generator().manual_seed(0)
    with tracelab.Recorder(str(tmp_path / "run"), input_every=1) as rec:
        for _ in range(steps):
            rec.step(loss=1.0, inputs=train_rows[torch.randint(0, len(train_rows), (64,),
                                                               generator=g)])
        rec.log("val", inputs=val_rows)
    return open_run(tmp_path / "run")


def test_fires_when_validation_rows_were_cut_from_the_training_pool(tmp_path):
    pool = torch.randn(600, 10)
    [f] = train_val_overlap(_record(tmp_path, pool, pool[:200]))
    assert f.code == "TL606" and f.subject == "val" and f.evidence["overlap_share"] > 0.9
    assert f.evidence["chance"] < 1e-6 and "deduplicate" in f.fix


def test_quiet_on_fresh_validation_rows(tmp_path):
    assert train_val_overlap(_record(tmp_path, torch.randn(600, 10), torch.randn(200, 10))) == []


def test_quiet_when_a_few_binary_features_repeat_by_nature(tmp_path):
    g = torch.Generator().manual_seed(1)
    train = (torch.rand(600, 4, generator=g) < 0.5).float()
    val = (torch.rand(200, 4, generator=g) < 0.5).float()
    run = _record(tmp_path, train, val)
    fp = run.fingerprints
    shared = set(fp.loc[fp["split"] == "val", "hash"]) & set(fp.loc[fp["split"] == "train", "hash"])
    assert len(shared) >= 10  # they do overlap: all 16 values occur in both
    assert train_val_overlap(run) == []


@pytest.mark.parametrize("n_val", [20])
def test_too_few_rows_are_not_judged(tmp_path, n_val):
    pool = torch.randn(600, 10)
    assert train_val_overlap(_record(tmp_path, pool, pool[:n_val])) == []
