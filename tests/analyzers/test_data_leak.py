"""data-leak: a label column left among DataFrame inputs is named from the rows table; an id
column, a strongly but not perfectly predictive category and honest features stay quiet.
Tiny real trainings record the DataFrames they train on with their targets."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import tracelab  # noqa: E402
from tracelab.analyzers.data_leak import data_leak  # noqa: E402
from tracelab.core.run import Run  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _frames(extra):
    """Breast cancer, standardized on train, as DataFrames; `extra(frame, y, rng)` adds columns."""
    data = load_breast_cancer()
    xtr, xva, ytr, yva = train_test_split(data.data, data.target, test_size=0.3,
                                          random_state=0, stratify=data.target)
    scaler = StandardScaler().fit(xtr)
    rng = np.random.default_rng(0)
    out = []
    for x, y in ((xtr, ytr), (xva, yva)):
        frame = pd.DataFrame(scaler.transform(x)[:, :8], columns=data.feature_names[:8])
        out.append((extra(frame, y, rng), y))
    return out


def _train(run_dir, extra, steps=60):
    (train, ytr), (val, yva) = _frames(extra)
    xt, yt = torch.tensor(train.to_numpy(np.float32)), torch.tensor(ytr)
    xv, yv = torch.tensor(val.to_numpy(np.float32)), torch.tensor(yva)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(xt.shape[1], 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = np.random.default_rng(0)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(steps):
            idx = gen.integers(0, len(xt), 32)
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=train.iloc[idx].reset_index(drop=True), targets=yt[idx])
            if (step + 1) % 20 == 0:
                with torch.no_grad():
                    vloss = torch.nn.functional.cross_entropy(model(xv), yv)
                rec.log("val", metrics={"loss": vloss}, inputs=val, targets=yv)
    return tracelab.analyze(run_dir)


def test_a_label_column_among_the_inputs_is_named(tmp_path):
    d = _train(tmp_path / "run", lambda f, y, rng: f.assign(outcome_code=2.0 * y + 1))
    [f] = [f for f in d.findings if f.rule == "data-leak"]
    assert f.code == "TL306" and f.severity.value == "error" and f.subject == "outcome_code"
    assert "determines the target in train and val" in f.message
    assert f.evidence["odds"] < 1e-9 and "Drop 'outcome_code'" in f.fix


def test_ids_and_a_strong_but_imperfect_category_stay_quiet(tmp_path):
    def extra(frame, y, rng):
        flip = rng.random(len(y)) < 0.1  # a category that agrees with the label 90% of the time
        return frame.assign(row_id=np.arange(len(y), dtype=float) + 1000 * (len(y) < 300),
                            site=np.where(flip, 1 - y, y).astype(float))
    d = _train(tmp_path / "run", extra)
    assert d.errors == [] and "data-leak" not in {f.rule for f in d.findings}
    assert "data-leak" not in {s.rule for s in d.skipped}


def test_a_run_without_rows_is_skipped_as_not_recorded():
    assert data_leak.spec.requires[0].key == "rows"
    assert data_leak(Run.from_frames(None)) == []


def _regression(run_dir, leak):
    """A linear regression of log prices; `leak(log_price, rng)` is one more feature column."""
    rng = np.random.default_rng(0)
    n = 600
    area = rng.lognormal(7.3, 0.3, n)
    quality = rng.integers(1, 10, n).astype(float)
    log_price = 10 + 0.5 * np.log(area / 1500) + 0.1 * quality + rng.normal(0, 0.1, n)
    frame = pd.DataFrame({"area": (area - area.mean()) / area.std(),
                          "quality": (quality - 5) / 2.6, "extra": leak(log_price, rng)})
    x = torch.tensor(frame.to_numpy(np.float32))
    y = torch.tensor(log_price, dtype=torch.float32).reshape(-1, 1)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(40):
            idx = torch.randint(0, 480, (32,))
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=frame.iloc[idx.numpy()], targets=y[idx])
            if (step + 1) % 10 == 0:
                rec.log("val", metrics={"loss": 0.1}, inputs=frame.iloc[480:], targets=y[480:])
    return tracelab.analyze(run_dir)


def test_a_standardized_copy_of_a_numeric_target_is_named(tmp_path):
    d = _regression(tmp_path / "run", lambda t, rng: (t - t.mean()) / t.std())
    [f] = [f for f in d.findings if f.rule == "data-leak"]
    assert f.subject == "extra" and f.evidence["kind"] == "affine"
    assert "affine function of the target" in f.message


def test_a_feature_that_only_correlates_with_a_numeric_target_stays_quiet(tmp_path):
    d = _regression(tmp_path / "run", lambda t, rng: t + rng.normal(0, 0.05, len(t)))
    assert "data-leak" not in {f.rule for f in d.findings}


def _reviews(run_dir, embedded):
    """Reviews of 12 token ids where 4 fixed positions hold words of the review's sentiment;
    `embedded`: a bag of embeddings reads the ids (else a linear model reads them as numbers)."""
    g = torch.Generator().manual_seed(0)
    n = 600
    words = torch.randint(21, 60, (n, 12), generator=g)
    label = (torch.rand(n, generator=g) < 0.5).float()
    words[:, :4] = torch.where(label[:, None] > 0, torch.randint(1, 11, (n, 4), generator=g),
                               torch.randint(11, 21, (n, 4), generator=g))
    torch.manual_seed(0)
    if embedded:
        model = torch.nn.Sequential(torch.nn.EmbeddingBag(60, 8), torch.nn.Linear(8, 1))
    else:
        model = torch.nn.Linear(12, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model, opt, input_every=1, flush_interval=0.2) as rec:
        for step in range(40):
            idx = torch.randint(0, n, (32,), generator=g)
            x = words[idx] if embedded else words[idx].float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(x).squeeze(1), label[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=label[idx])
    return tracelab.analyze(run_dir)


def test_token_ids_an_embedding_reads_stay_quiet_where_numbers_fire(tmp_path):
    assert "data-leak" in {f.rule for f in _reviews(tmp_path / "numbers", False).findings}
    assert "data-leak" not in {f.rule for f in _reviews(tmp_path / "ids", True).findings}


def test_a_binned_copy_of_a_numeric_target_is_named_and_a_rounded_noisy_one_is_not(tmp_path):
    d = _regression(tmp_path / "binned", lambda t, rng: np.round((t - t.mean()) / t.std() * 2))
    [f] = [f for f in d.findings if f.rule == "data-leak"]
    assert f.subject == "extra" and f.evidence["kind"] == "monotone"
    noisy = _regression(tmp_path / "noisy", lambda t, rng: np.round(
        ((t - t.mean()) / t.std() + rng.normal(0, 0.3, len(t))) * 2))
    assert "data-leak" not in {f.rule for f in noisy.findings}
