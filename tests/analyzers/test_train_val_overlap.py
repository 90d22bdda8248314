"""train-val-overlap: validation rows copied from the training rows, judged against chance."""
import pytest

torch = pytest.importorskip("torch")  # recorded by real trainings; `make test` runs them
pd = pytest.importorskip("pandas")

from torch import nn

import tracelab
from tracelab.analyzers.train_val_overlap import train_val_overlap
from tracelab.core.run import open_run


def _record(tmp_path, train_rows, val_rows, steps=30, split="val"):
    g = torch.Generator().manual_seed(0)
    with tracelab.Recorder(str(tmp_path / "run"), input_every=1) as rec:
        for _ in range(steps):
            rec.step(loss=1.0, inputs=train_rows[torch.randint(0, len(train_rows), (64,),
                                                               generator=g)])
        rec.log(split, inputs=val_rows)
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


def test_a_few_validation_rows_all_among_the_training_rows_are_judged(tmp_path):
    # 4 validation sequences of 40 floats, every one a training sequence: no chance match.
    pool = torch.randn(60, 40, dtype=torch.float64)
    [f] = train_val_overlap(_record(tmp_path / "a", pool, pool[:4]))
    assert f.evidence["matches"] == 4 and f.evidence["rows"] == 4 and f.evidence["p_bound"] < 1e-3
    # Two natural duplicates among fresh rows are not evidence.
    val = torch.cat([torch.randn(30, 40, dtype=torch.float64), pool[:2]])
    assert train_val_overlap(_record(tmp_path / "b", pool, val)) == []


def test_training_rows_evaluated_as_their_own_split_are_not_judged(tmp_path):
    pool = torch.randn(600, 10)
    assert train_val_overlap(_record(tmp_path, pool, pool[:200], split="train_eval")) == []


class _Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                                    nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(8, 1)

    def forward(self, a, b):
        return self.head(torch.cat([self.encode(a), self.encode(b)], 1)).squeeze(1)


def _pairs(path, images, eval_images, stacked=False):
    """A siamese training on random pairs of `images`, evaluated on pairs of `eval_images`:
    the pairs never repeat, the images do."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _Siamese()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def batch(pool, n):
        i, j = torch.randint(0, len(pool), (2, n), generator=g)
        a, b = pool[i], pool[j]
        return (torch.cat([a, b], 1) if stacked else (a, b)), (i % 2 == j % 2).float()

    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=1) as rec:
        for _ in range(20):
            x, y = batch(images, 32)
            out = model(*((x[:, :1], x[:, 1:]) if stacked else x))
            loss = nn.functional.binary_cross_entropy_with_logits(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y)
        x, y = batch(eval_images, 100)
        rec.log("val", inputs=x, targets=y)
    return open_run(path)


@pytest.mark.parametrize("stacked", [False, True])
def test_pairs_drawn_from_the_training_images_match_image_by_image(tmp_path, stacked):
    g = torch.Generator().manual_seed(1)
    images, fresh = torch.rand(2, 400, 1, 8, 8, generator=g)
    run = _pairs(tmp_path / "leak", images, images, stacked)
    fp = run.fingerprints
    rows = fp[~fp["input"].str.startswith("items:")]
    val, train = (set(rows.loc[rows["split"] == s, "hash"]) for s in ("val", "train"))
    assert len(val & train) < 0.05 * len(val)  # whole pairs hardly ever repeat
    [f] = train_val_overlap(run)
    assert f.evidence["input"].startswith("items:") and f.evidence["overlap_share"] > 0.5
    assert train_val_overlap(_pairs(tmp_path / "fresh", images, fresh, stacked)) == []


def test_a_dataframe_fold_left_in_the_training_rows(tmp_path):
    g = torch.Generator().manual_seed(0)
    frame = pd.DataFrame(torch.randn(400, 6, generator=g).numpy(), columns=list("abcdef"))
    frame["kind"] = (torch.rand(400, generator=g) < 0.5).numpy()
    fold = frame.iloc[:80]

    def run(path, rows):
        with tracelab.Recorder(str(path), input_every=1) as rec:
            for step in range(10):
                rec.step(loss=1.0, inputs=rows.iloc[(torch.randperm(len(rows), generator=g)[:64]
                                                     ).numpy()])
            rec.log("val", inputs=fold)
        return open_run(path)

    [f] = train_val_overlap(run(tmp_path / "leak", frame))
    assert f.evidence["input"] == "input" and f.evidence["chance"] < 1e-6
    assert train_val_overlap(run(tmp_path / "held", frame.iloc[80:])) == []


def _frames(first_batch_repeats: bool):
    """A trace of 4 binary features (16 possible rows) in batches of 64: its first batch's 64
    rows written with their repeats, or (as traces before that) its 16 distinct rows once."""
    import numpy as np
    hashes = np.arange(1, 17, dtype=np.int64) * 1_000_003
    first = np.repeat(hashes, 4) if first_batch_repeats else hashes
    fp = pd.DataFrame({"step": 0, "split": ["train"] * len(first) + ["val"] * 16,
                       "input": "input", "hash": np.concatenate([first, hashes])})
    inputs = pd.DataFrame({"step": 0, "split": ["train"] * 4 + ["val"] * 4,
                           "feature": [f"feature[{i}]" for i in range(4)] * 2,
                           "count": 64, "n_unique": 2})
    return fp, inputs


@pytest.mark.parametrize("first_batch_repeats", [True, False])
def test_a_tiny_feature_space_stays_quiet_with_or_without_the_first_batch_repeats(
        first_batch_repeats):
    from tracelab.core.run import Run
    fp, inputs = _frames(first_batch_repeats)
    assert train_val_overlap(Run.from_frames(fingerprints=fp, inputs=inputs)) == []
    # The same trace with a feature space too large for chance matches fires.
    inputs["n_unique"] = 10_000
    assert len(train_val_overlap(Run.from_frames(fingerprints=fp, inputs=inputs))) == 1


def test_malformed_fingerprints_and_profiles_do_not_raise():
    from tracelab.core.run import Run
    fp, inputs = _frames(True)
    inputs["n_unique"] = "many"
    assert train_val_overlap(Run.from_frames(fingerprints=fp, inputs=inputs)) == []
    fp["hash"] = "x"
    assert train_val_overlap(Run.from_frames(fingerprints=fp, inputs=inputs)) == []
    assert train_val_overlap(Run.from_frames(fingerprints=fp.drop(columns="input"))) == []


def _categories(n, g, kinds):
    """n rows of skewed categorical features, one-hot encoded (issue 41's tables): `kinds`
    categoricals of 5, 4 and 3 levels in turn, plus two binned integers 0-9."""
    levels = ([.4, .3, .15, .1, .05], [.5, .3, .15, .05], [.6, .3, .1])
    hot = [nn.functional.one_hot(torch.multinomial(torch.tensor(p), n, replacement=True,
                                                   generator=g), len(p))
           for p in (levels[i % 3] for i in range(kinds))]
    return torch.cat(hot + [torch.randint(0, 10, (n, 2), generator=g)], 1).float()


def _table_run(path, train, val, batch=32):
    """An epoch over `train` in shuffled batches (no row twice), `val` evaluated in batches."""
    g = torch.Generator().manual_seed(2)
    order = torch.randperm(len(train), generator=g)
    with tracelab.Recorder(str(path), input_every=1) as rec:
        for start in range(0, len(train), batch):
            rec.step(loss=1.0, inputs=train[order[start:start + batch]])
        for start in range(0, len(val), 128):
            rec.log("val", inputs=val[start:start + 128])
    return open_run(path)


def test_independent_one_hot_rows_that_collide_by_nature_stay_quiet(tmp_path):
    # Issue 41: 3 skewed categoricals and 2 binned integers take a few hundred likely values,
    # far fewer than their 14 columns' distinct values multiply to, so fresh rows collide.
    g = torch.Generator().manual_seed(0)
    run = _table_run(tmp_path / "run", _categories(2048, g, 3), _categories(512, g, 3))
    fp = run.fingerprints
    val, train = (set(fp.loc[fp["split"] == s, "hash"]) for s in ("val", "train"))
    assert len(val & train) > 0.25 * len(val)  # they do overlap, by chance alone
    assert train_val_overlap(run) == []


def test_one_hot_rows_copied_from_training_fire(tmp_path):
    # 4 categoricals: a fresh row equals a training row about 1 time in 10, measured on the
    # training rows' own repeats, so a validation split cut from the training rows is told
    # from fresh rows of the same table.
    g = torch.Generator().manual_seed(0)
    train = _categories(2048, g, 4)
    [f] = train_val_overlap(_table_run(tmp_path / "leak", train, train[:512]))
    assert f.evidence["overlap_share"] > 0.9 and 0.03 < f.evidence["chance"] < 0.3
    assert train_val_overlap(_table_run(tmp_path / "fresh", train, _categories(512, g, 4))) == []


def test_training_rows_drawn_with_replacement_repeat_by_their_sampling(tmp_path):
    # 300 one-hot rows, batches of random indices: training rows come back within the first
    # epoch; the validation batch's own rows, which hardly ever repeat, say it is not chance.
    g = torch.Generator().manual_seed(0)
    pool = _categories(300, g, 8)

    def run(path, val):
        with tracelab.Recorder(str(path), input_every=1) as rec:
            for _ in range(40):
                rec.step(loss=1.0, inputs=pool[torch.randint(0, 300, (32,), generator=g)])
            rec.log("val", inputs=val)
        return open_run(path)

    [f] = train_val_overlap(run(tmp_path / "leak", pool[:128]))
    assert f.evidence["overlap_share"] > 0.9 and f.evidence["chance"] < 0.01
    assert train_val_overlap(run(tmp_path / "fresh", _categories(128, g, 8))) == []
