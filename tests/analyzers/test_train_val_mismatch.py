"""train-val-mismatch (TL301): preprocessing mismatches fire; honest splits and ordinary
augmentation stay quiet."""
import numpy as np
import pandas as pd
import pytest
from _data_frames import input_frames
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from tracelab.analyzers.train_val_mismatch import train_val_mismatch
from tracelab.core.run import Run


def _run(train, val, *, epochs=3, samples=True, seed=0, **kw):
    rng = np.random.default_rng(seed)
    tr = np.concatenate([train[rng.permutation(len(train))] for _ in range(epochs)])
    frames = input_frames({"train": tr, "val": np.concatenate([val] * epochs)},
                          batch={"train": 32, "val": 64}, seed=seed, **kw)
    if not samples:
        frames["samples"] = None
    return Run.from_frames(**frames)


def _wine(seed=0):
    x, _ = load_wine(return_X_y=True)
    return train_test_split(x, test_size=0.25, random_state=seed)


def test_fires_on_train_min_max_scaled_and_val_z_scored():
    xtr, xva = _wine()
    [f] = train_val_mismatch(_run(MinMaxScaler().fit_transform(xtr),
                                  StandardScaler().fit_transform(xva)))
    assert f.code == "TL301" and f.severity.value == "error" and f.subject == "val"
    assert "train in [0, 1] (min-max scaled?)" in f.message
    assert "val mean≈0 std≈1 (z-scored?)" in f.message
    assert f.evidence["features_strong"] >= f.evidence["features_compared"] / 2
    worst = f.evidence["worst"][0]
    assert worst["ks"] > 0.4 and worst["w_over_std"] > 2 and worst["feature"] in f.message


@pytest.mark.parametrize("seed", range(3))
def test_quiet_on_an_honest_random_split(seed):
    x, _ = load_breast_cancer(return_X_y=True)
    xtr, xva = train_test_split(x, test_size=0.2, random_state=seed)
    scaler = StandardScaler().fit(xtr)
    assert train_val_mismatch(_run(scaler.transform(xtr), scaler.transform(xva), seed=seed)) == []
    assert train_val_mismatch(_run(xtr, xva, seed=seed, samples=False)) == []


def test_quiet_on_ordinary_training_augmentation():
    xtr, xva = _wine(1)
    scaler = StandardScaler().fit(xtr)
    rng = np.random.default_rng(0)
    tr = scaler.transform(xtr)
    # Gaussian noise, random per-row scaling and 20% feature dropout, applied anew each epoch.
    epochs = [(tr + 0.3 * rng.standard_normal(tr.shape)) * rng.uniform(0.8, 1.2, (len(tr), 1))
              * (rng.random(tr.shape) > 0.2) for _ in range(5)]
    run = Run.from_frames(**input_frames({"train": np.concatenate(epochs),
                                          "val": np.concatenate([scaler.transform(xva)] * 5)}))
    assert train_val_mismatch(run) == []


def test_one_strongly_shifted_feature_is_a_warning_naming_it():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3000, 10))
    tr, va = x[:2400], x[2400:].copy()
    va[:, 4] = va[:, 4] * 3 + 2   # one column went through a different transform
    [f] = train_val_mismatch(_run(tr, va, epochs=1))
    assert f.severity.value == "warning" and f.evidence["features_differing"] == 1
    assert f.evidence["worst"][0]["feature"] == "x/4" and "'x/4'" in f.message
    assert "val mean 2" in f.message  # the numbers of both sides are in the message


def test_batch_statistics_alone_still_catch_the_mismatch():
    xtr, xva = _wine()
    [f] = train_val_mismatch(_run(MinMaxScaler().fit_transform(xtr),
                                  StandardScaler().fit_transform(xva), samples=False))
    worst = f.evidence["worst"][0]
    assert worst["method"] == "batch stats" and worst["ks"] is None


def test_compares_each_split_with_the_baseline_run():
    xtr, xva = _wine()
    scaler = StandardScaler().fit(xtr)
    good = _run(scaler.transform(xtr), scaler.transform(xva))
    # This run's training data skipped the scaler altogether.
    bad = _run(xtr, scaler.transform(xva), seed=1)
    findings = train_val_mismatch(bad, baseline=good)
    subjects = {f.subject for f in findings}
    assert "train (vs baseline)" in subjects and "val (vs baseline)" not in subjects
    same = _run(scaler.transform(xtr), scaler.transform(xva), seed=2)
    assert train_val_mismatch(same, baseline=good) == []


def test_datetime_features_are_not_compared():
    # A time-based split differs in time by design.
    ts = pd.date_range("2024-01-01", periods=2000, freq="h")
    df = pd.DataFrame({"ts": ts, "v": np.random.default_rng(0).normal(size=2000)})
    run = Run.from_frames(**input_frames({"train": df.iloc[:1600], "val": df.iloc[1600:]}))
    assert train_val_mismatch(run) == []


def test_empty_run():
    assert train_val_mismatch(Run.from_frames()) == []


def test_the_year_a_chronological_split_was_made_by_is_no_finding_alone():
    rng = np.random.default_rng(4)
    year = np.sort(rng.integers(2006, 2011, 3000)).astype(float)
    x = np.c_[rng.normal(size=(3000, 6)), (year - 2008) / 1.4]
    train, val = x[year < 2010], x[year == 2010]  # the houses sold last
    assert train_val_mismatch(_run(train, val, epochs=1)) == []
    far = val.copy()
    far[:, 6] = 2010.0  # the year left raw in val only: far past train's range, still named
    [f] = train_val_mismatch(_run(train, far, epochs=1))
    assert f.evidence["worst"][0]["feature"] == "x/6"


def test_generated_samples_logged_as_a_split_are_not_compared():
    """A GAN's fake samples, logged as val inputs, move towards the real data over training."""
    rng = np.random.default_rng(5)
    real = rng.normal([1, 2], [1, 2], size=(4000, 2))
    fakes = [rng.normal([1 - 0.8 / (i + 1), 2 - 1.5 / (i + 1)], 1.2, size=(200, 2))
             for i in range(6)]
    frames = input_frames({"train": real, "val": fakes}, batch={"train": 64, "val": 200},
                          step_of=lambda split, i: 100 * i)
    assert train_val_mismatch(Run.from_frames(**frames)) == []
    fixed = input_frames({"train": real, "val": [fakes[0]] * 6},
                         batch={"train": 64, "val": 200}, step_of=lambda split, i: 100 * i)
    assert train_val_mismatch(Run.from_frames(**fixed)) != []  # one set read at every evaluation


def _sequences(run_dir, embedded):
    """Sequence-first token ids (12 positions; batches of 32, val in one batch of 128): train
    sequences fill every position, val ones hold 3 ids and are padded with id 0. `embedded`: an
    Embedding reads the ids (their mean over the sequence into a linear head); else a linear
    model reads each sample's column as numbers."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab

    g = torch.Generator().manual_seed(0)
    train = torch.randint(1, 40, (12, 640), generator=g)
    val = torch.randint(1, 40, (12, 128), generator=g)
    val[3:] = 0
    torch.manual_seed(0)
    bag = torch.nn.Embedding(40, 8)
    head = torch.nn.Linear(8 if embedded else 12, 1)
    model = torch.nn.ModuleDict({"bag": bag, "head": head})

    def forward(x):
        return head(bag(x).mean(0) if embedded else x.T.float()).squeeze(1)

    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(40):
            x = train[:, (step % 20) * 32:(step % 20 + 1) * 32]
            y = (x[0] > 20).float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(forward(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x if embedded else x.float())
            if (step + 1) % 10 == 0:
                rec.log("val", metrics={"loss": 0.5}, inputs=val if embedded else val.float())
    return tracelab.analyze(run_dir)


def test_token_ids_an_embedding_reads_are_not_compared_where_numbers_are(tmp_path,
                                                                         one_thread):
    numbers = _sequences(tmp_path / "numbers", False)
    assert "train-val-mismatch" in {f.rule for f in numbers.findings}
    ids = _sequences(tmp_path / "ids", True)
    assert "train-val-mismatch" not in {f.rule for f in ids.findings}


def _tables(run_dir, val_sorted):
    """A tiny regression on named DataFrame columns; val's frame has its columns sorted by name
    (so its tensor's columns are in another order), or kept in training's order."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(400, 5)), columns=["zeta", "age", "mass", "bp", "s1"])
    y = torch.tensor(frame.to_numpy() @ np.arange(1, 6) / 5, dtype=torch.float32)
    train, val = frame.iloc[:320], frame.iloc[320:]
    if val_sorted:
        val = val[sorted(val.columns)]
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(40):
            part = train.iloc[(step % 10) * 32:(step % 10 + 1) * 32]
            x = torch.tensor(part.to_numpy(np.float32))
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y[part.index])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=part)
            if (step + 1) % 10 == 0:
                rec.log("val", metrics={"loss": 0.1}, inputs=val)
    return [f for f in tracelab.analyze(run_dir).findings if f.rule == "train-val-mismatch"]


def test_named_columns_in_another_order_fire_and_the_same_order_stays_quiet(tmp_path,
                                                                            one_thread):
    [f] = _tables(tmp_path / "sorted", True)
    assert f.evidence["order"][0] == "age" and f.evidence["moved"] == 4
    assert _tables(tmp_path / "kept", False) == []


def _waves(run_dir, *, val_shift: float = 0.0, steps: int = 30):
    """pytorch/examples' time-sequence setup, shrunk: sine waves of 50 steps at random phases,
    27 training waves read whole at every step, a test set of 3 waves (whose phases happen to
    lie near each other: a small set clusters by chance) evaluated every 10 steps; `val_shift` is added to the test waves (another
    preprocessing: min-max scaled to [0, 2]). A linear next-value model trained with Adam."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab

    rng = np.random.default_rng(1)
    waves = np.sin((np.arange(50) + rng.integers(-80, 80, 30)[:, None]) / 20.0)
    train = torch.tensor(waves[3:], dtype=torch.float32)
    val = torch.tensor(waves[:3] + val_shift, dtype=torch.float32)
    torch.manual_seed(0)
    model = torch.nn.Linear(49, 49)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model, opt, flush_interval=0.2) as rec:
        for step in range(steps):
            loss = torch.nn.functional.mse_loss(model(train[:, :-1]), train[:, 1:])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=train[:, :-1], targets=train[:, 1:])
            if step % 10 == 9:
                with torch.no_grad():
                    val_loss = torch.nn.functional.mse_loss(model(val[:, :-1]), val[:, 1:])
                rec.log("val", metrics={"loss": val_loss}, inputs=val[:, :-1])
    from tracelab.core.run import open_run
    return open_run(run_dir)


def test_a_few_rows_read_at_every_evaluation_count_once(tmp_path, one_thread):
    """Three test waves read at three evaluations are 3 values of each position, not 9, with
    stds estimated from 3 rows: their chance cluster is within noise; one feature alone must
    pass alpha among the 49 compared. The same waves shifted by 2 differ."""
    run = _waves(tmp_path / "waves")
    assert train_val_mismatch(run) == []
    [f] = train_val_mismatch(_waves(tmp_path / "shifted", val_shift=2.0))
    assert f.subject == "val" and f.evidence["features_differing"] >= 25


def _full_batch(run_dir, train, val, *, steps: int = 60):
    """dlwpt's temperature fit, shrunk: the same rows at every step (_contract_runs.full_batch)."""
    pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    from _contract_runs import full_batch
    return full_batch(run_dir, train, val, steps=steps)


def test_rows_read_at_every_step_are_that_many_rows(tmp_path, one_thread):
    """9 training rows read whole at every step and 2 validation rows that happen to lie below
    them are 9 and 2 values, not hundreds of samples: nothing can be established. 40
    standardized rows against 20 raw ones (never standardized) still differ."""
    rng = np.random.default_rng(0)
    train = rng.normal(5.7, 1.2, (9, 1))
    assert train_val_mismatch(_full_batch(tmp_path / "few", train,
                                          np.array([[2.7], [2.9]]))) == []
    train, val = rng.normal(0, 1, (40, 3)), rng.normal(5, 2, (20, 3))
    [f] = train_val_mismatch(_full_batch(tmp_path / "raw", train, val))
    assert f.subject == "val" and f.evidence["features_differing"] == 3
