"""Issue 41's data cases on tiny real trainings: train-only augmentation is no collapse, uint8
validation images never scaled and validation columns in another order are named by
train-val-mismatch first, chance comes from the targets' class counts only, and a feature
constant in every split is named."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
DATA = {"input-collapse", "train-val-mismatch", "unnormalized-inputs", "datetime-units"}


def _digits(images=False, seed=0):
    x, y = load_digits(return_X_y=True)
    x = x.reshape(-1, 1, 8, 8) if images else x
    return train_test_split(x / 16, y, test_size=0.25, random_state=seed)


def _fit(run_dir, xtr, ytr, xva, yva, *, steps=60, transform=None, targets=True,
         record_train=None, record_val=None):
    """A small MLP (or CNN for images) with Adam; val accuracy logged every 20 steps."""
    torch.manual_seed(0)
    xt, xv = torch.tensor(xtr), torch.tensor(xva)
    yt, yv = torch.as_tensor(ytr), torch.as_tensor(yva)
    if xt.dim() == 4:
        model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.Flatten(), torch.nn.Linear(512, 10))
    else:
        model = torch.nn.Sequential(torch.nn.Linear(xt.shape[1], 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = np.random.default_rng(0)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(steps):
            idx = gen.integers(0, len(xt), 32)
            x = xt[idx].float() if transform is None else transform(xt[idx].float())
            loss = torch.nn.functional.cross_entropy(model(x), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=record_train(idx) if record_train else x,
                     targets=yt[idx] if targets else None)
            if (step + 1) % 20 == 0:
                with torch.no_grad():
                    out = model(xv.float())
                    acc = (out.argmax(1) == yv).float().mean()
                    vloss = torch.nn.functional.cross_entropy(out, yv)
                rec.log("val", metrics={"loss": vloss, "acc": acc},
                        inputs=record_val() if record_val else xv,
                        targets=yv if targets else None)
    return tracelab.analyze(run_dir)


def _rules(d, rules=DATA):
    assert d.errors == []
    return {f.rule: f for f in d.findings if f.rule in rules and f.severity.value != "info"}


@pytest.mark.slow
def test_train_only_mixup_and_shifts_are_no_collapse(tmp_path):
    xtr, xva, ytr, yva = _digits(images=True)
    gen = torch.Generator().manual_seed(1)

    def augment(xb):  # mixup and a random sub-pixel shift: continuous values, val keeps 17
        lam = torch.rand(len(xb), 1, 1, 1, generator=gen) * 0.3
        xb = (1 - lam) * xb + lam * xb.flip(0)
        return 0.5 * (xb + torch.roll(xb, 1, dims=3))
    d = _fit(tmp_path / "run", xtr.astype(np.float32), ytr, xva.astype(np.float32), yva,
             transform=augment)
    assert _rules(d) == {}, [f.message for f in d.findings]


def test_uint8_val_images_never_scaled_are_a_scale_mismatch_first(tmp_path):
    xtr, xva, ytr, yva = _digits(images=True)
    raw = np.round(xva * 255).astype(np.uint8)  # the val loader skipped ToTensor's / 255
    d = _fit(tmp_path / "run", xtr.astype(np.float32), ytr, raw, yva)
    found = _rules(d)
    assert "input-collapse" not in found
    f = found["train-val-mismatch"]
    assert "val values span ~255x the range of train's" in f.message
    assert f.evidence["span_ratio"] == pytest.approx(255, rel=0.05)
    assert d.diagnoses[0].finding.rule == "train-val-mismatch"


def test_val_columns_in_another_order_are_named(tmp_path):
    xtr, xva, ytr, yva = _digits()
    names = [f"px{i}" for i in range(64)]
    order = np.random.default_rng(0).permutation(64)
    val = pd.DataFrame(xva, columns=names)[[names[i] for i in order]]  # read in another order
    d = _fit(tmp_path / "run", xtr.astype(np.float32), ytr,
             val.to_numpy(dtype=np.float32), yva)  # built by position
    found = _rules(d, DATA | {"metric-stagnation"})
    f = found["train-val-mismatch"]
    assert "val's columns arrive in another order" in f.message and "by name" in f.fix
    moved = f.evidence["reordered"]
    # Pixels with near-twin distributions may pair with a twin; the clearest come first.
    right = [int(m["holds"].strip("feature[]")) == order[int(m["feature"].strip("feature[]"))]
             for m in moved]
    assert len(moved) >= 20 and sum(right) >= 0.4 * len(moved) and all(right[:5])
    assert "input-collapse" not in found
    assert d.diagnoses[0].finding.rule == "train-val-mismatch"


def test_val_columns_in_the_same_order_stay_quiet(tmp_path):
    xtr, xva, ytr, yva = _digits()
    d = _fit(tmp_path / "run", xtr.astype(np.float32), ytr, xva.astype(np.float32), yva)
    assert _rules(d, DATA | {"metric-stagnation"}) == {}, [f.message for f in d.findings]


def test_blank_inputs_leave_val_accuracy_at_the_chance_of_its_class_counts(tmp_path):
    xtr, xva, ytr, yva = _digits()
    blank = np.zeros_like(xtr, dtype=np.float32)  # a loader that returns empty images
    d = _fit(tmp_path / "run", blank, ytr, np.zeros_like(xva, dtype=np.float32), yva,
             steps=100)
    f = _rules(d, {"metric-stagnation"})["metric-stagnation"]
    assert f.evidence["num_classes"] == 10 and "10 classes in val's targets" in f.message


def test_without_targets_chance_is_unknown_whatever_the_output_width(tmp_path):
    xtr, xva, ytr, yva = _digits()
    blank = np.zeros_like(xtr, dtype=np.float32)
    d = _fit(tmp_path / "run", blank, ytr, np.zeros_like(xva, dtype=np.float32), yva,
             steps=100, targets=False)
    assert "metric-stagnation" not in {f.rule for f in d.findings}
    assert "metric-stagnation" in {s.rule for s in d.skipped}


def test_a_dataframe_column_constant_in_every_split_is_named(tmp_path):
    xtr, xva, ytr, yva = _digits()
    cols = [f"px{i}" for i in range(64)]

    def frame(x):  # a bucketing whose boundaries miss the values, and a dummy never set
        return pd.DataFrame(x, columns=cols).assign(year_bucket=3.0, region_nan=0.0)
    train, val = frame(xtr), frame(xva)
    d = _fit(tmp_path / "run", xtr.astype(np.float32), ytr, xva.astype(np.float32), yva,
             steps=40, record_train=lambda idx: train.iloc[idx].reset_index(drop=True),
             record_val=lambda: val)
    found = [f for f in d.findings if f.rule == "input-collapse"]
    [warning] = [f for f in found if f.severity.value == "warning"]
    assert warning.subject == "year_bucket" and "constant (3) in every" in warning.message
    assert "bucket boundaries" in warning.fix
    # The dummy of a category never seen and the digits' blank border pixels: information.
    [info] = [f for f in found if f.severity.value == "info"]
    assert {"region_nan", "px0"} <= set(info.evidence["subjects"])
