"""End to end, data and environment rules: tiny real models trained with the Recorder on
scikit-learn's bundled datasets and on synthetic timestamped events, with the preprocessing
defects of FAILURES.md planted; honest splits must stay clean."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
from sklearn.datasets import load_breast_cancer, load_digits, load_wine  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import MinMaxScaler, StandardScaler  # noqa: E402

import tracelab  # noqa: E402
from tracelab.core.findings import Severity  # noqa: E402

DATA_RULES = {"train-val-mismatch", "input-collapse", "unnormalized-inputs",
              "nondeterminism-risk", "gpu-unused", "input-pipeline-bound"}


pytestmark = pytest.mark.usefixtures("one_thread")


def _fit(run_dir, xtr, ytr, xva, yva, *, steps=60, batch=32, val_every=20, seed=0,
         inputs_train=None, inputs_val=None, transform=None, feature_names=None):
    """Minibatch MLP training; inputs_* map batch indices to what is recorded as inputs."""
    if seed is not None:
        torch.manual_seed(seed)
    xt = torch.as_tensor(np.asarray(xtr, dtype=np.float32))
    xv = torch.as_tensor(np.asarray(xva, dtype=np.float32))
    yt, yv = torch.as_tensor(ytr), torch.as_tensor(yva)
    classes = int(max(yt.max(), yv.max())) + 1
    model = torch.nn.Sequential(torch.nn.Linear(xt.shape[1], 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, classes))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = np.random.default_rng(0)
    with tracelab.Recorder(str(run_dir), model, opt, config={"lr": 3e-3}, input_every=1,
                           feature_names=feature_names, flush_interval=0.2) as rec:
        for step in range(steps):
            idx = gen.integers(0, len(xt), batch)
            x = xt[idx] if transform is None else transform(step, xt[idx])
            opt.zero_grad()
            loss = loss_fn(model(x), yt[idx])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=inputs_train(step, idx) if inputs_train else x)
            if (step + 1) % val_every == 0:
                with torch.no_grad():
                    val_loss = loss_fn(model(xv), yv)
                vidx = np.arange(len(xv))
                rec.log("val", metrics={"loss": val_loss},
                        inputs=inputs_val(vidx) if inputs_val else xv)
    return tracelab.analyze(run_dir)


def _data_findings(diagnosis, min_severity=Severity.WARNING):
    assert diagnosis.errors == []
    return [f for f in diagnosis.findings
            if f.rule in DATA_RULES and f.severity.rank <= min_severity.rank]


def _alarms(diagnosis):
    return [f for f in diagnosis.findings if f.severity is not Severity.INFO]


def _breast_cancer(seed=0):
    x, y = load_breast_cancer(return_X_y=True)
    return train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)


# -- train-val-mismatch -----------------------------------------------------------------------
def test_train_min_max_scaled_val_z_scored(tmp_path):
    xtr, xva, ytr, yva = _breast_cancer()
    d = _fit(tmp_path / "run", MinMaxScaler().fit_transform(xtr), ytr,
             StandardScaler().fit_transform(xva), yva)
    [f] = [f for f in _data_findings(d) if f.rule == "train-val-mismatch"]
    assert f.severity.value == "error" and f.subject == "val"
    assert "train in [0, 1] (min-max scaled?), val mean≈0 std≈1 (z-scored?)" in f.message
    assert f.evidence["features_differing"] >= 25
    assert "scaler.fit(X_train)" in f.fix


@pytest.mark.parametrize("seed", [0, 1])
def test_honest_random_split_stays_clean(tmp_path, seed):
    xtr, xva, ytr, yva = _breast_cancer(seed)
    scaler = StandardScaler().fit(xtr)
    d = _fit(tmp_path / "run", scaler.transform(xtr), ytr, scaler.transform(xva), yva, seed=seed)
    assert _alarms(d) == [], [f.message for f in d.findings]


def test_training_augmentation_stays_clean(tmp_path):
    x, y = load_wine(return_X_y=True)
    xtr, xva, ytr, yva = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(xtr)

    def augment(step, xb):  # input noise and random feature dropout
        return (xb + 0.2 * torch.randn_like(xb)) * (torch.rand_like(xb) > 0.1)
    d = _fit(tmp_path / "run", scaler.transform(xtr), ytr, scaler.transform(xva), yva,
             transform=augment)
    assert _data_findings(d) == [], [f.message for f in d.findings]


# -- unnormalized-inputs ----------------------------------------------------------------------
def test_raw_wine_features_are_unnormalized(tmp_path):
    x, y = load_wine(return_X_y=True)
    xtr, xva, ytr, yva = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    d = _fit(tmp_path / "run", xtr, ytr, xva, yva, steps=40)
    found = [f for f in _data_findings(d) if f.rule == "unnormalized-inputs"]
    assert {"ratio" in f.evidence for f in found} == {True, False}
    assert any("'feature[12]' (mean 7" in f.message for f in found)  # proline, in the hundreds


def _digits_cnn(run_dir, *, raw):
    """A small CNN on scikit-learn's 8x8 digits; raw: pixels as 0..255 integers."""
    x, y = load_digits(return_X_y=True)
    images = np.round(x.reshape(-1, 1, 8, 8) * (255 / 16)).astype(np.float32)
    if not raw:
        images = (images / 255 - 0.3) / 0.4
    xtr, xva, ytr, yva = train_test_split(images, y, test_size=0.25, random_state=0)
    xt, yt = torch.as_tensor(xtr), torch.as_tensor(ytr)
    xv, yv = torch.as_tensor(xva), torch.as_tensor(yva)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = np.random.default_rng(0)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=2, flush_interval=0.2) as rec:
        for step in range(60):
            idx = gen.integers(0, len(xt), 32)
            xb = xt[idx]
            if not raw:  # augmentation: random shifts of up to 1 pixel, zero padded
                dx, dy = (int(v) for v in gen.integers(-1, 2, 2))
                xb = torch.roll(torch.nn.functional.pad(xb, (1, 1, 1, 1)), (dx, dy), (2, 3))
                xb = xb[:, :, 1:9, 1:9]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yt[idx])
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb)
            if (step + 1) % 20 == 0:
                model.eval()
                with torch.no_grad():
                    rec.log("val", metrics={"loss": torch.nn.functional.cross_entropy(
                        model(xv), yv)}, inputs=xv)
                model.train()
    return tracelab.analyze(run_dir)


def test_raw_pixel_images_fed_to_a_cnn(tmp_path):
    found = [f for f in _data_findings(_digits_cnn(tmp_path / "raw", raw=True))
             if f.rule == "unnormalized-inputs"]
    assert len(found) == 1 and "raw pixel values" in found[0].message
    assert found[0].subject == "channel[0]"


def test_normalized_augmented_images_stay_clean(tmp_path):
    assert _data_findings(_digits_cnn(tmp_path / "norm", raw=False)) == []


# -- input-collapse: timestamped events -------------------------------------------------------
def _events(n, seed, start="2024-03-01"):
    """Card transactions with real timestamps; fraud concentrates at night."""
    rng = np.random.default_rng(seed)
    ts = pd.Timestamp(start) + pd.to_timedelta(np.sort(rng.integers(0, 30 * 86400, n)),
                                               unit="s")
    amount = rng.lognormal(3, 1, n)
    hour = ts.hour.to_numpy()
    night = (hour < 6) | (hour >= 22)
    label = (rng.random(n) < np.where(night, 0.7, 0.1)).astype(np.int64)
    return pd.DataFrame({"timestamp": ts, "amount": amount}), label


def _time_features(frame):
    hour = frame["timestamp"].dt.hour + frame["timestamp"].dt.minute / 60
    angle = 2 * np.pi * hour.to_numpy() / 24
    return np.stack([np.sin(angle), np.cos(angle), frame["timestamp"].dt.day_of_week / 6.0,
                     np.log(frame["amount"]) / 5], axis=1)


NAMES = ["hour_sin", "hour_cos", "day_of_week", "log_amount"]


def _temporal(collapse_val=False):
    train, ytr = _events(3000, 0)
    val, yva = _events(600, 1, start="2024-04-01")  # the following month: a time-based split
    if collapse_val:
        val = val.assign(timestamp=val["timestamp"].dt.floor("D"))
    return train, ytr, val, yva


def test_dataframe_timestamp_floored_to_days_in_val(tmp_path):
    train, ytr, val, yva = _temporal(collapse_val=True)
    d = _fit(tmp_path / "run", _time_features(train), ytr, _time_features(val), yva,
             inputs_train=lambda step, idx: train.iloc[idx].reset_index(drop=True),
             inputs_val=lambda idx: val.iloc[idx].reset_index(drop=True))
    [f] = [f for f in _data_findings(d) if f.rule == "input-collapse"]
    assert f.severity.value == "error" and f.subject == "timestamp"
    assert "resolution second → day (every value at midnight" in f.message
    assert "in val, compared with train" in f.message


def test_tensor_hour_features_become_constant(tmp_path):
    train, ytr, val, yva = _temporal(collapse_val=True)
    d = _fit(tmp_path / "run", _time_features(train), ytr, _time_features(val), yva,
             feature_names=NAMES)
    # One defect, one finding: both features collapsed in the same way at the same steps.
    [f] = [f for f in _data_findings(d) if f.rule == "input-collapse"]
    assert f.subject == "2 features" and f.evidence["subjects"] == ["hour_cos", "hour_sin"]
    per = f.evidence["per_subject"]
    assert "always 0" in per["hour_sin"]["message"] and "always 1" in per["hour_cos"]["message"]
    assert d.diagnoses[0].finding.id == f.id


def test_honest_time_based_split_stays_clean(tmp_path):
    train, ytr, val, yva = _temporal()
    frames = _fit(tmp_path / "frames", _time_features(train), ytr, _time_features(val), yva,
                  inputs_train=lambda step, idx: train.iloc[idx].reset_index(drop=True),
                  inputs_val=lambda idx: val.iloc[idx].reset_index(drop=True))
    tensors = _fit(tmp_path / "tensors", _time_features(train), ytr, _time_features(val), yva,
                   feature_names=NAMES)
    assert _data_findings(frames) == [] and _data_findings(tensors) == []


def test_mid_run_cast_of_float_features_to_integers(tmp_path):
    xtr, xva, ytr, yva = _breast_cancer()
    scaler = StandardScaler().fit(xtr)
    # From step 30 on a refactored loader casts the features to int (truncation toward 0).
    d = _fit(tmp_path / "run", scaler.transform(xtr), ytr, scaler.transform(xva), yva,
             transform=lambda step, xb: xb if step < 30 else xb.long().float())
    # One cast, one finding listing the features ("30 features show the same at ...").
    [f] = [f for f in _data_findings(d) if f.rule == "input-collapse"]
    assert f.steps[0] == 30 and len(f.evidence["subjects"]) >= 20
    assert f.message.startswith(f"{len(f.evidence['subjects'])} features show the same at")
    messages = [e["message"] for e in f.evidence["per_subject"].values()]
    assert all("train from step 30 on, compared with steps 0-29 of train" in m for m in messages)
    assert all("→ 100% of" in m for m in messages)
    assert d.diagnoses[0].finding.id == f.id


def test_collapse_against_a_baseline_run(tmp_path):
    train, ytr, val, yva = _temporal()
    good = _fit(tmp_path / "good", _time_features(train), ytr, _time_features(val), yva,
                feature_names=NAMES).run
    # Both splits of the new run come from the truncating ETL: only the baseline shows it.
    floor = train.assign(timestamp=train["timestamp"].dt.floor("D"))
    vfloor = val.assign(timestamp=val["timestamp"].dt.floor("D"))
    bad_dir = tmp_path / "bad"
    _fit(bad_dir, _time_features(floor), ytr, _time_features(vfloor), yva, feature_names=NAMES)
    d = tracelab.analyze(bad_dir, baseline=good)
    found = [f for f in _data_findings(d) if f.rule == "input-collapse"]
    # One finding per split, each listing both features.
    against = [f for f in found if "subjects" in f.evidence]
    assert len(against) == 2
    assert all(f.evidence["subjects"] == ["hour_cos", "hour_sin"] for f in against)
    assert all("compared with the baseline's" in e["message"]
               for f in against for e in f.evidence["per_subject"].values())
    # Without the baseline, only what the run shows by itself: hour_cos is 1 everywhere (the
    # cosine of midnight); hour_sin's 0 could be an unused indicator.
    [alone] = [f for f in _data_findings(tracelab.analyze(bad_dir)) if f.rule == "input-collapse"]
    assert alone.subject == "hour_cos" and "constant (1) in every" in alone.message
    assert [f.subject for f in found if f not in against] == ["hour_cos"]


# -- environment ------------------------------------------------------------------------------
def test_unseeded_run_is_a_reproducibility_hazard(tmp_path):
    xtr, xva, ytr, yva = _breast_cancer()
    scaler = StandardScaler().fit(xtr)
    torch.seed()  # a fresh random seed, as in a script that never seeds
    d = _fit(tmp_path / "run", scaler.transform(xtr), ytr, scaler.transform(xva), yva,
             steps=20, seed=None)
    [f] = [f for f in d.findings if f.rule == "nondeterminism-risk"]
    assert f.severity.value == "info" and "no seed set" in f.message


class _SlowDataset(torch.utils.data.Dataset):
    def __init__(self, x, y, delay):
        self.x, self.y, self.delay = x, y, delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)  # decoding an image from disk, say
        return self.x[i], self.y[i]


def _loader_run(run_dir, delay):
    xtr, _, ytr, _ = _breast_cancer()
    ds = _SlowDataset(torch.as_tensor(StandardScaler().fit_transform(xtr), dtype=torch.float32),
                      torch.as_tensor(ytr), delay)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(30, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with tracelab.Recorder(str(run_dir), model, opt, flush_interval=0.2) as rec:
        for step, (x, y) in enumerate(rec.iterate(loader)):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            rec.step(loss=loss)
            if step == 24:
                break
    return tracelab.analyze(run_dir)


def test_slow_data_loader_dominates_the_step(tmp_path):
    [f] = [f for f in _data_findings(_loader_run(tmp_path / "slow", 0.004))
           if f.rule == "input-pipeline-bound"]
    assert f.evidence["data_share"] > 0.8 and "num_workers" in f.fix
    assert not [f for f in _data_findings(_loader_run(tmp_path / "fast", 0))
                if f.rule == "input-pipeline-bound"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_model_left_on_the_cpu_of_a_gpu_machine(tmp_path):
    xtr, xva, ytr, yva = _breast_cancer()
    scaler = StandardScaler().fit(xtr)
    d = _fit(tmp_path / "run", scaler.transform(xtr), ytr, scaler.transform(xva), yva, steps=20)
    [f] = [f for f in d.findings if f.rule == "gpu-unused"]
    assert f.severity.value == "warning" and "stayed on the CPU" in f.message
