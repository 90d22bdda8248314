"""input-collapse (TL302): resolution, cardinality, dtype and fractional-part collapses between
splits, over time and against a baseline; honest temporal splits and odd batch sizes stay quiet."""
import numpy as np
import pandas as pd
import pytest
from _data_frames import input_frames

from tracelab.analyzers.input_collapse import input_collapse
from tracelab.core.run import Run

RNG = np.random.default_rng(0)
N = 3000
TS = pd.Series(pd.date_range("2023-01-01", periods=N, freq="17min")) + pd.to_timedelta(
    RNG.integers(0, 60, N), unit="s")
TABLE = pd.DataFrame({"ts": TS, "amount": RNG.lognormal(3, 1, N),
                      "hour": TS.dt.hour.astype("int64"), "store": RNG.integers(0, 40, N)})
TRAIN = TABLE.iloc[:2500].sample(frac=1, random_state=0)   # shuffled loader
VAL = TABLE.iloc[2500:]                                     # later period, in order


def _features(frame):
    """What a tensor-only pipeline feeds the model: cyclic hour, day of week, log amount."""
    h = frame["ts"].dt.hour.to_numpy()
    return np.stack([np.sin(2 * np.pi * h / 24), np.cos(2 * np.pi * h / 24),
                     frame["ts"].dt.day_of_week.to_numpy(), np.log(frame["amount"])], 1)


NAMES = ["hour_sin", "hour_cos", "dow", "log_amount"]


def _run(train, val, **kw):
    kw.setdefault("batch", {"train": 64, "val": 128})
    return Run.from_frames(**input_frames({"train": train, "val": val}, **kw))


def _floor(frame):
    return frame.assign(ts=frame["ts"].dt.floor("D"), hour=0)


def test_a_timestamp_truncated_to_days_in_val_is_an_error():
    found = {f.subject: f for f in input_collapse(_run(TRAIN, _floor(VAL)))}
    ts = found["ts"]
    assert ts.code == "TL302" and ts.severity.value == "error"
    assert "collapsed in val, compared with train" in ts.message
    assert "resolution second → day (every value at midnight" in ts.message
    assert ts.evidence["resolution_before"] == "s" and ts.evidence["resolution_after"] == "D"
    assert ".dt.floor('D')" in ts.fix
    hour = found["hour"]  # the derived column shows it as cardinality
    assert hour.severity.value == "warning" and "always 0" in hour.message
    assert set(found) == {"ts", "hour"}


def test_derived_hour_features_of_tensor_inputs_collapse_to_constants():
    found = input_collapse(_run(_features(TRAIN), _features(_floor(VAL)), names=NAMES))
    assert {f.subject for f in found} == {"hour_sin", "hour_cos"}
    cos = next(f for f in found if f.subject == "hour_cos")
    assert "always 1" in cos.message and cos.evidence["distinct_per_batch_after"] == 1
    assert cos.evidence["distinct_per_batch_before"] > 15


def test_a_mid_run_cast_to_integers_names_the_step():
    batches = [TRAIN.iloc[i:i + 64] for i in range(0, len(TRAIN), 64)]
    cast = [b if k < 20 else b.assign(amount=b["amount"].astype("int64"))
            for k, b in enumerate(batches)]
    [f] = input_collapse(_run(cast, VAL))
    assert f.subject == "amount" and f.steps == (20, len(batches) - 1)
    assert "train from step 20 on, compared with steps 0-19 of train" in f.message
    assert "dtype float64 → int64" in f.message and "0% → 100%" in f.message
    assert "astype(int)" in f.fix


def test_mid_run_rounding_of_float_tensors_shows_as_vanished_fractions():
    x = _features(TRAIN)
    batches = [x[i:i + 64] for i in range(0, len(x), 64)]
    batches = [b if k < 25 else np.trunc(b) for k, b in enumerate(batches)]
    found = {f.subject: f for f in input_collapse(_run(batches, _features(VAL), names=NAMES))}
    assert {"hour_sin", "hour_cos", "log_amount"} <= set(found) and "dow" not in found
    f = found["log_amount"]
    assert f.steps[0] == 25 and f.evidence["int_frac_before"] < 0.01
    assert f.evidence["int_frac_after"] == 1.0


def test_timestamp_resolution_drop_from_a_step_on():
    batches = [TRAIN.iloc[i:i + 64] for i in range(0, len(TRAIN), 64)]
    floored = [b if k < 30 else b.assign(ts=b["ts"].dt.floor("D")) for k, b in enumerate(batches)]
    [f] = [f for f in input_collapse(_run(floored, VAL)) if f.subject == "ts"]
    assert f.severity.value == "error" and f.steps[0] == 30


def test_a_float16_cast_between_splits():
    run = _run(RNG.normal(size=(600, 2)), RNG.normal(size=(200, 2)))
    run.inputs.loc[run.inputs["split"] == "val", "dtype"] = "float16"
    found = input_collapse(run)
    assert len(found) == 2 and all("dtype float32 → float16" in f.message for f in found)


def test_collapse_against_the_baseline_run():
    baseline = _run(TRAIN, VAL)
    # Both splits lost the hour: only the archived good run can show it.
    run = _run(TRAIN.assign(hour=0), VAL.assign(hour=0), seed=1)
    found = input_collapse(run, baseline=baseline)
    assert [f.subject for f in found] == ["hour", "hour", "hour"]
    assert "collapsed in this run's train, compared with the baseline's train" in found[0].message
    assert "this run's val" in found[1].message and "always 0" in found[1].message
    # That the hour is constant is the run's own finding, told with a baseline or without.
    assert found[2:] == input_collapse(run)
    assert found[2].severity.value == "info" and "is constant (0)" in found[2].message
    assert input_collapse(_run(TRAIN, VAL, seed=2), baseline=baseline) == []


def test_a_named_feature_constant_everywhere_is_a_warning_and_a_zero_column_info():
    x = np.c_[RNG.normal(size=(500, 2)), np.ones(500)]
    [f] = input_collapse(_run(x[:400], x[400:]))
    assert f.severity.value == "warning" and f.subject == "x/2" and "constant (1)" in f.message
    x[:, 2] = 0.0  # the dummy of a category never seen
    [f] = input_collapse(_run(x[:400], x[400:]))
    assert f.severity.value == "info" and "constant (0)" in f.message


@pytest.mark.parametrize("batch", [{"train": 64, "val": 128}, {"train": 8, "val": 500},
                                   {"train": 500, "val": 4}])
def test_quiet_on_an_honest_temporal_split_at_any_batch_sizes(batch):
    assert input_collapse(_run(TRAIN, VAL, batch=batch)) == []
    assert input_collapse(_run(_features(TRAIN), _features(VAL), batch=batch, names=NAMES)) == []


def test_quiet_on_a_small_validation_set_seen_many_times():
    # Five rows evaluated 30 times: few distinct values, but every batch is fully distinct.
    assert input_collapse(_run(TRAIN, [VAL.iloc[:5]] * 30)) == []


def test_quiet_when_validation_batches_come_in_time_order():
    # An unshuffled loader over hourly data: a slow feature has one value per batch.
    hourly = pd.DataFrame({"ts": pd.date_range("2022-01-01", periods=9000, freq="h")})
    hourly["month"] = hourly["ts"].dt.month.astype("int64")
    run = _run(hourly.iloc[:8000].sample(frac=1, random_state=0), hourly.iloc[8000:],
               batch={"train": 64, "val": 32})
    assert input_collapse(run) == []


def test_empty_run():
    assert input_collapse(Run.from_frames()) == []


def test_a_split_left_unscaled_is_no_collapse():
    """Cylinders (4, 6, 8) standardized in train and raw in val: whole numbers in val only,
    but on another scale (train-val-mismatch's); raw pixels beside pixels / 255 too."""
    cylinders = RNG.choice([4.0, 6.0, 8.0], 2000)
    z = (cylinders - cylinders.mean()) / cylinders.std()
    assert input_collapse(_run(z[:1500, None], cylinders[1500:, None])) == []
    pixels = RNG.integers(0, 256, 2000).astype(float)
    assert input_collapse(_run(pixels[:1500, None] / 255, pixels[1500:, None])) == []
    # The same values rounded in val (their range kept) are a collapse.
    x = RNG.normal(5, 2, 2000)
    [f] = input_collapse(_run(x[:1500, None], np.round(x[1500:, None])))
    assert "share of whole numbers" in f.message


def _full_batch(run_dir, train, val, *, steps: int = 200):
    """pygcn's setup, shrunk: the same rows at every step (_contract_runs.full_batch)."""
    pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    from _contract_runs import full_batch
    return full_batch(run_dir, train, val, steps=steps)


def test_rows_read_at_every_step_are_drawn_once(tmp_path, one_thread):
    """A sparse bag-of-words column, 0 in all 140 training rows read at every step and nonzero
    in 12 of 300 validation rows, is what 140 draws from validation's value shares look like
    (~5 distinct expected, not the ~10 of the 512 values sampled over the steps). The same
    column continuous in validation and 0 in training collapsed."""
    rng = np.random.default_rng(0)
    train, val = rng.normal(size=(140, 4)), rng.normal(size=(300, 4))
    train[:, 3] = 0.0
    sparse = val.copy()
    sparse[:, 3] = 0.0
    sparse[rng.choice(300, 12, replace=False), 3] = 1 / rng.integers(5, 40, 12)
    assert [f for f in input_collapse(_full_batch(tmp_path / "sparse", train, sparse))
            if f.subject == "feature[3]"] == []
    [f] = [f for f in input_collapse(_full_batch(tmp_path / "zeroed", train, val))
           if f.subject == "feature[3]"]
    assert "collapsed in train" in f.message and f.evidence["rows_read_again"] == 140


def _images(run_dir, *, rounded_val: bool):
    """A tiny autoencoder on 64x64 images in [0, 1] with a blank border (digits, MNIST), 32 a
    training batch and 128 validation images scored whole after each epoch: the validation
    batch's counted window (every 128th value) reads column 0 alone, the blank border."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab
    from torch import nn
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(288, 1, 64, 64)
    x[:, :, 4:60, 4:60] = torch.rand(288, 1, 56, 56, generator=g)
    train, val = x[:160], x[160:]
    if rounded_val:
        val = val.round()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 4, stride=4), nn.ReLU(),
                          nn.ConvTranspose2d(2, 1, 4, stride=4), nn.Sigmoid())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model=model, optimizer=opt, flush_interval=0.2) as rec:
        for _ in range(3):
            for i in range(0, 160, 32):
                xb = train[i:i + 32]
                loss = nn.functional.binary_cross_entropy(model(xb), xb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=xb)
            with torch.no_grad():
                val_loss = nn.functional.binary_cross_entropy(model(val), val)
            rec.log("val", metrics={"loss": val_loss}, inputs=val)
    return tracelab.open_run(run_dir)


def test_a_window_reading_the_blank_border_is_no_collapse(tmp_path, one_thread):
    """Validation images whose counted window saw only the zero border (one distinct value,
    100% whole) while their exact range spans [0, 1] and their random samples hold fractions:
    nothing collapsed. The same images rounded to 0/1 did lose their fractional parts."""
    run = _images(tmp_path / "healthy", rounded_val=False)
    val = run.inputs[run.inputs["split"] == "val"]
    assert (val["n_unique"] <= 1).all() and (val["max"] > val["min"]).all()
    assert input_collapse(run) == []
    found = input_collapse(_images(tmp_path / "rounded", rounded_val=True))
    assert any("share of whole numbers" in f.message and "val" in f.message for f in found)


def _generator(run_dir, noise: str):
    """A tiny generator regressed on samples by MSE, fed `noise`: 'zeros' (the noise buffer
    allocated but never drawn), 'drawn' (fresh normal noise) or 'fixed' (one random vector in
    every row at every step, as Deep Image Prior feeds its generator)."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab
    from _contract_runs import regression, train
    from torch import nn
    g = torch.Generator().manual_seed(1)
    z = {"zeros": torch.zeros(640, 8), "drawn": torch.randn(640, 8, generator=g),
         "fixed": torch.randn(1, 8, generator=g).repeat(640, 1)}[noise]
    _, y = regression(640)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    train(run_dir, model, (z, y), lambda out, yb: nn.functional.mse_loss(out.squeeze(1), yb),
          steps=40)
    return tracelab.open_run(run_dir)


def test_an_input_of_one_value_everywhere_is_an_error(tmp_path, one_thread):
    """Zeros in every feature of every row: the model sees one input; one finding for the
    whole input, not one note per feature."""
    [f] = input_collapse(_generator(tmp_path / "zeros", "zeros"))
    assert f.severity.value == "error" and f.subject == "inputs"
    assert f.evidence["whole_input"] is True and f.evidence["features"] == 8
    assert "one and the same input" in f.message


def test_drawn_noise_and_one_fixed_noise_vector_are_no_constant_input(tmp_path, one_thread):
    assert input_collapse(_generator(tmp_path / "drawn", "drawn")) == []
    # A fixed random input (Deep Image Prior) holds a value of its own in each feature: each
    # column is noted as constant, the input is no single value.
    found = input_collapse(_generator(tmp_path / "fixed", "fixed"))
    assert len(found) == 8 and {f.severity.value for f in found} == {"info"}


def _bandit(run_dir, state: float):
    """A contextless 4-armed bandit trained with REINFORCE: its policy is fed one constant
    state (`state` in every feature of every row, as a bandit has no context) and learns to
    pull the best arm; its logged reward rises."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab
    from torch import nn
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    means = torch.tensor([0.1, 0.2, 0.8, 0.3])
    pi = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(pi.parameters(), lr=1e-2)
    with tracelab.Recorder(str(run_dir), model=pi, optimizer=opt) as rec:
        for _ in range(300):
            s = torch.full((64, 4), state)
            logits = pi(s)
            dist = torch.distributions.Categorical(logits=logits)
            a = dist.sample()
            r = means[a] + 0.1 * torch.randn(64, generator=g)
            loss = -(dist.log_prob(a) * (r - r.mean())).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=s, outputs=logits)
            rec.log("train", metrics={"reward": r.mean()})
    return tracelab.open_run(str(run_dir))


@pytest.mark.parametrize("state", [1.0, 0.0])
def test_a_bandit_fed_one_constant_state_that_learns_is_no_error(tmp_path, one_thread, state):
    """One value everywhere, but the logged reward kept rising (0.45 to 0.8): the input has
    nothing to tell by design; each feature stays a note, the whole input no error."""
    found = input_collapse(_bandit(tmp_path / "bandit", state))
    assert len(found) == 4 and {f.severity.value for f in found} == {"info"}
    assert not any(f.evidence.get("whole_input") for f in found)
