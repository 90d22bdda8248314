"""Recorded statistics against plain-torch reference values."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

import tracelab
from tracelab.recorders.profile import UNIQUE_EXACT, datetime_resolution, tensor_profile
from tracelab.recorders.stats import activation_stats, finish, raw_stats, reference_stats

STATS = ("numel", "mean", "std", "min", "max", "abs_mean", "norm", "zero_frac", "nan_count",
         "inf_count")


def assert_matches(row, ref, rtol=1e-6, atol=1e-9):
    for key in STATS:
        got, want = float(row[key]), float(ref[key])
        # A float32 sum is exact to ~1e-7 of the summed magnitudes, not of a mean that cancels.
        tol = max(atol, 1e-6 * abs(float(ref["abs_mean"]))) if key == "mean" else atol
        if math.isnan(want):
            assert math.isnan(got), key
        else:
            assert got == pytest.approx(want, rel=rtol, abs=tol), key


def test_raw_stats_match_reference_including_nonfinite_and_offsets():
    torch.manual_seed(0)
    tensors = [torch.randn(100, 7), torch.randn(1000) * 1e-3 + 1.0, torch.zeros(5),
               torch.tensor([1.0, float("nan"), 0.0, 3.0]), torch.tensor([float("inf"), -2.0]),
               torch.arange(12).reshape(3, 4)]
    raw = raw_stats(tensors).numpy()
    cols = finish(raw, np.array([t.numel() for t in tensors]))
    for i, t in enumerate(tensors):
        assert_matches({k: v[i] for k, v in cols.items()}, reference_stats(t))


def test_half_precision_tensors_do_not_overflow_on_the_cpu():
    big = torch.full((4096,), 300.0, dtype=torch.float16)  # sum 1.2M > float16's 65504
    cols = finish(raw_stats([big, big.bfloat16()]).numpy(), np.array([4096, 4096]))
    assert list(cols["mean"]) == pytest.approx([300.0, 300.0])
    assert list(cols["norm"]) == pytest.approx([300.0 * 64] * 2)
    act = activation_stats(big.reshape(64, 64), "ReLU").numpy()
    assert act[0] / 4096 == pytest.approx(300.0) and act[6:8].tolist() == [0.0, 0.0]


def _train(optimizer_cls, run_dir, steps=3, **opt_kwargs):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    opt = optimizer_cls(model.parameters(), **opt_kwargs)
    x, y = torch.randn(16, 6), torch.randn(16, 2)
    refs = []
    with tracelab.Recorder(run_dir, model, opt, activation_every=1, input_every=1) as rec:
        for _ in range(steps):
            opt.zero_grad()
            acts = {}
            hooks = [m.register_forward_hook(lambda m, a, o, k=k: acts.__setitem__(k, o.detach().clone()))
                     for k, m in model.named_children()]
            loss = torch.nn.functional.mse_loss(model(x), y)
            for h in hooks:
                h.remove()
            loss.backward()
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
            opt.step()
            refs.append({
                "loss": loss.item(),
                "weight": {n: p.detach().clone() for n, p in model.named_parameters()},
                "grad": {n: p.grad.detach().clone() for n, p in model.named_parameters()},
                "update": {n: p.detach() - before[n] for n, p in model.named_parameters()},
                "activation": acts,
            })
            rec.step(loss=loss, inputs=x)
    return tracelab.open_run(run_dir), refs, x


@pytest.mark.parametrize("optimizer_cls,kwargs", [(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
                                                  (torch.optim.Adam, {"lr": 0.01})])
def test_recorded_weights_grads_updates_match_reference(tmp_path, optimizer_cls, kwargs):
    run, refs, _ = _train(optimizer_cls, tmp_path / "run", **kwargs)
    tn = run.tensors
    assert set(tn["kind"]) == {"weight", "grad", "update", "activation"}
    for step, ref in enumerate(refs):
        assert run.loss()[step] == pytest.approx(ref["loss"], rel=1e-6)
        for kind in ("weight", "grad", "update"):
            for name, tensor in ref[kind].items():
                row = tn[(tn.step == step) & (tn.kind == kind) & (tn.name == name)]
                assert len(row) == 1, (step, kind, name)
                assert_matches(row.iloc[0], reference_stats(tensor), rtol=1e-5, atol=1e-10)


def test_activation_stats_and_dead_and_saturated_fractions(tmp_path):
    run, refs, _ = _train(torch.optim.SGD, tmp_path / "run", lr=0.1)
    tn = run.tensors
    acts = tn[(tn.kind == "activation") & (tn.step == 0)].set_index("name")
    assert list(acts.index) == ["0", "1", "2"]  # forward order
    for name, out in refs[0]["activation"].items():
        assert_matches(acts.loc[name], reference_stats(out), rtol=1e-5)
        dead = 1 - (out > 0).any(dim=0).double().mean().item()
        assert acts.loc[name, "dead_frac"] == pytest.approx(dead)
    tanh = refs[0]["activation"]["1"]
    assert acts.loc["1", "saturated_frac"] == pytest.approx((tanh.abs() >= 0.99).double().mean().item())
    assert math.isnan(acts.loc["0", "saturated_frac"])  # Linear: no bounds


def test_input_profile_matches_numpy(tmp_path):
    run, _, x = _train(torch.optim.SGD, tmp_path / "run", lr=0.1)
    rows = run.inputs[(run.inputs.step == 0)].set_index("feature")
    for j in range(x.shape[1]):
        col = x[:, j].double().numpy()
        row = rows.loc[f"feature[{j}]"]
        # float32 data summed in float32: exact to ~1e-7 of the values' magnitude
        assert row["mean"] == pytest.approx(col.mean(), abs=1e-6)
        assert row["std"] == pytest.approx(col.std(ddof=1), rel=1e-5)
        assert (row["min"], row["max"]) == pytest.approx((col.min(), col.max()))
        assert row["n_unique"] == len(np.unique(col))
        assert row["count"] == 16 and row["dtype"] == "float32"
    samples = run.samples
    assert set(samples["split"]) == {"train"} and samples["value"].isin(x.double().numpy().ravel()).all()


def test_tensor_profile_is_exact_for_offset_data_and_subsamples_large_channels():
    years = torch.tensor([[2024.0], [2025.0], [2023.0], [2024.5]])
    packed, _ = tensor_profile(years)
    assert packed[0, 0].item() == pytest.approx(2024.125)
    assert packed[0, 1].item() == pytest.approx(years.double().std().item(), rel=1e-6)
    images = torch.rand(64, 3, 32, 32)  # 65,536 values per channel: n_unique from a subsample
    packed, _ = tensor_profile(images)
    assert packed[:, 4].tolist() == [float(UNIQUE_EXACT)] * 3  # a lower bound: all distinct
    assert packed[0, 0].item() == pytest.approx(images[:, 0].double().mean().item(), abs=1e-6)


def test_tensor_profile_int_frac_unique_and_nonfinite():
    x = torch.tensor([[1.0, 0.5], [2.0, float("nan")], [2.0, float("inf")], [3.0, 0.5]])
    packed, sample = tensor_profile(x)
    mean, std, mn, mx, n_unique, int_frac, nan, inf = packed.T.tolist()
    assert int_frac[0] == 1.0 and n_unique[0] == 3
    assert nan[1] == 1 and inf[1] == 1
    assert sample.shape[0] == 2
    images = torch.randint(0, 256, (4, 3, 5, 5), dtype=torch.uint8)
    packed, _ = tensor_profile(images)
    assert packed.shape == (3, 8)
    assert packed[0, 3].item() == images[:, 0].max().item()


@pytest.mark.parametrize("freq,expected", [("D", "D"), ("h", "h"), ("17min", "min"), ("1s", "s"),
                                          ("250ms", "ms"), ("3us", "us"), ("7ns", "ns")])
def test_datetime_resolution(freq, expected):
    stamps = pd.date_range("2024-03-01", periods=50, freq=freq)
    ns = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    assert datetime_resolution(ns) == expected


def test_dataframe_inputs_are_profiled_with_datetimes(tmp_path):
    rng = np.random.default_rng(0)
    stamps = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 10**6, 64), unit="s")
    frame = pd.DataFrame({"ts": stamps, "amount": rng.normal(size=64),
                          "count": rng.integers(0, 5, 64), "city": rng.choice(["a", "b"], 64)})
    with tracelab.Recorder(tmp_path / "run") as rec:
        rec.log("train", inputs=frame)
        rec.log("val", inputs=frame.assign(ts=frame["ts"].dt.floor("D")))
    inputs = tracelab.open_run(tmp_path / "run").inputs.set_index(["split", "feature"])
    assert inputs.loc[("train", "ts"), "resolution"] == "s"
    assert inputs.loc[("val", "ts"), "resolution"] == "D"
    assert inputs.loc[("train", "ts"), "time_min"] == stamps.min()
    assert inputs.loc[("train", "ts"), "n_unique"] == stamps.nunique()
    assert inputs.loc[("train", "count"), "int_frac"] == 1.0
    assert inputs.loc[("train", "city"), "n_unique"] == 2
    assert "datetime64" in inputs.loc[("train", "ts"), "dtype"]
    assert inputs.loc[("train", "amount"), "mean"] == pytest.approx(frame["amount"].mean())
