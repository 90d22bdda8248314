"""Recorded statistics against plain-torch reference values."""
import math
import os
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

import tracelab
from tracelab.recorders.activations import activation_row
from tracelab.recorders.profile import datetime_resolution, tensor_profile
from tracelab.recorders.stats import RAW, finish, raw_stats, reference_stats
from tracelab.core.schema import UNIQUE_EXACT

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
    act = activation_row(big.reshape(64, 64), "ReLU")
    assert act[0] / 4096 == pytest.approx(300.0) and act[6:8].tolist() == [0.0, 0.0]


class _ToDouble(torch.nn.Module):
    def forward(self, x):
        return x.double()


def _train(optimizer_cls, run_dir, steps=3, variant="float32", recorder=None, **opt_kwargs):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    if variant == "mixed dtypes":  # the compiled kernels take one dtype; torch takes the rest
        model = torch.nn.Sequential(*model[:2], _ToDouble(), model[2].double())
    elif variant == "transposed weight":  # not contiguous: reduced in torch
        w = model[0].weight
        model[0].weight = torch.nn.Parameter(w.detach().t().contiguous().t())
    opt = optimizer_cls(model.parameters(), **opt_kwargs)
    x, y = torch.randn(16, 6), torch.randn(16, 2)
    refs = []
    options = dict(activation_every=1, input_every=1, **(recorder or {}))
    with tracelab.Recorder(run_dir, model, opt, **options) as rec:
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


@pytest.mark.parametrize("variant", ["float32", "mixed dtypes", "transposed weight"])
@pytest.mark.parametrize("optimizer_cls,kwargs", [(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
                                                  (torch.optim.Adam, {"lr": 0.01})])
def test_recorded_weights_grads_updates_match_reference(tmp_path, optimizer_cls, kwargs, variant):
    run, refs, _ = _train(optimizer_cls, tmp_path / "run", variant=variant, **kwargs)
    tn = run.tensors
    assert set(tn["kind"]) == {"weight", "grad", "update", "activation"}
    for step, ref in enumerate(refs):
        assert run.loss()[step] == pytest.approx(ref["loss"], rel=1e-6)
        for kind in ("weight", "grad", "update"):
            for name, tensor in ref[kind].items():
                row = tn[(tn.step == step) & (tn.kind == kind) & (tn.name == name)]
                assert len(row) == 1, (step, kind, name)
                assert_matches(row.iloc[0], reference_stats(tensor), rtol=1e-5, atol=1e-10)


@pytest.mark.parametrize("variant", ["float32", "mixed dtypes"])
def test_weights_and_updates_thin_out_after_the_dense_start(tmp_path, variant):
    from tracelab.recorders.torch_recorder import DENSE_STEPS
    steps = DENSE_STEPS + 7
    run, refs, _ = _train(torch.optim.SGD, tmp_path / "run", steps=steps, variant=variant,
                          recorder={"weight_every": 4}, lr=0.1, momentum=0.9)
    tn = run.tensors
    thinned = list(range(DENSE_STEPS)) + [s for s in range(DENSE_STEPS, steps) if s % 4 == 0]
    for kind, want in (("grad", list(range(steps))), ("weight", thinned), ("update", thinned)):
        assert sorted(set(tn.loc[tn.kind == kind, "step"])) == want, kind
    last = thinned[-1]  # its snapshot was taken in that step's own optimizer pre-hook
    for kind in ("weight", "update"):
        for name, tensor in refs[last][kind].items():
            row = tn[(tn.step == last) & (tn.kind == kind) & (tn.name == name)]
            assert_matches(row.iloc[0], reference_stats(tensor), rtol=1e-5, atol=1e-10)
    assert run.meta["recorder"]["weight_every"] == 4


def _one_value_in_place(model):  # between the probes: only its autograd version shows it
    with torch.no_grad():
        model[0].weight.view(-1)[1] += 1.0


def _clamp_through_data(model):  # WGAN's weight clipping
    for p in model.parameters():
        p.data.clamp_(-0.05, 0.05)


def _first_value_through_data(model):  # autograd does not count it: a probe sees it
    model[2].weight.data.view(-1)[0] += 1.0


def _new_tensor_through_data(model):
    model[0].weight.data = model[0].weight.data.clone()


def _counted_copies(monkeypatch) -> list:
    from tracelab.recorders import kernel_loader, numba_kernels
    if kernel_loader.kernels() is None:  # loaded (and warmed up) before copies are counted
        pytest.skip("numba unavailable")
    copies: list = []
    gather = numba_kernels.gather
    monkeypatch.setattr(numba_kernels, "gather", lambda *a: (copies.append(1), gather(*a)))
    return copies


@pytest.mark.parametrize("change", [None, _one_value_in_place, _clamp_through_data,
                                    _first_value_through_data, _new_tensor_through_data])
def test_a_step_reuses_the_weights_the_last_record_kept_unless_they_changed(
        tmp_path, monkeypatch, change):
    """Consecutive weight steps: the record's pass leaves the weights in the snapshot, and the
    next optimizer step copies nothing, unless the weights changed in between (an in-place op,
    a change through .data, a new tensor). Each update is the optimizer's alone. The first
    weight spans two of the kernel's blocks and more values than it probes."""
    copies = _counted_copies(monkeypatch)
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(64, 40), torch.nn.Tanh(), torch.nn.Linear(40, 2))
    assert model[0].weight.numel() > 2048
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 64), torch.randn(16, 2)
    updates = []
    steps = 6
    with tracelab.Recorder(tmp_path / "run", model, opt, activation_every=10 ** 6) as rec:
        for step in range(steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
            opt.step()
            updates.append({n: p.detach() - before[n] for n, p in model.named_parameters()})
            rec.step()
            if change is not None and step % 2:
                change(model)
    changed = len(range(1, steps - 1, 2)) if change is not None else 0
    assert len(copies) == 1 + changed  # step 0's pre-hook, and each step after a change
    tn = tracelab.open_run(tmp_path / "run").tensors
    for step, ref in enumerate(updates):
        for name, tensor in ref.items():
            row = tn[(tn.step == step) & (tn.kind == "update") & (tn.name == name)]
            assert_matches(row.iloc[0], reference_stats(tensor), rtol=1e-5, atol=1e-10)


def test_without_an_optimizer_no_snapshot_is_copied_or_kept(tmp_path, monkeypatch):
    copies = _counted_copies(monkeypatch)
    model = torch.nn.Linear(50, 40)
    x = torch.randn(8, 50)
    with tracelab.Recorder(tmp_path / "run", model) as rec:
        for _ in range(4):
            model.zero_grad()
            model(x).square().mean().backward()
            rec.step()
    assert copies == [] and rec._parameters._snapshot is None
    tn = tracelab.open_run(tmp_path / "run").tensors
    assert set(tn["kind"]) == {"weight", "grad", "activation"}  # no update without a step


def test_a_parameter_replaced_in_place_is_read_at_its_new_size():
    from tracelab.recorders.parameters import ParameterStats
    from tracelab.recorders.transfer import StepRecord
    weight = torch.nn.Parameter(torch.randn(10))
    stats = ParameterStats([("w", weight)])

    def recorded() -> dict:
        record = StepRecord()
        stats.record(0, record, weights=True, updates=False)
        rows = record.seal()()
        return {k: v[0] for k, v in rows[0][1].items()}
    assert_matches(recorded(), reference_stats(weight))
    weight.data = weight.data[:4]  # same storage, same address, fewer elements
    assert recorded()["numel"] == 4
    assert_matches(recorded(), reference_stats(weight))


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
    # 65,536 values per channel, all distinct (random ones may repeat in float32): n_unique is
    # counted on a subsample, where it reaches the cap.
    n = 64 * 3 * 32 * 32
    images = (torch.randperm(n, generator=torch.Generator().manual_seed(0)).float() / n).reshape(
        64, 3, 32, 32)
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


def _as_stats(row: np.ndarray, numel: int) -> dict[str, float]:
    cols = finish(row[None, :8], np.array([numel]))
    return {k: float(v[0]) for k, v in cols.items()}


def _planted_conv_output() -> torch.Tensor:
    torch.manual_seed(3)
    x = torch.relu(torch.randn(64, 32, 16, 16) + 0.5)
    x[:, 3] = 0.0                 # dead
    x[:, 7] = -1.0                # dead (a pre-activation that never fires)
    x[:, 11] = 0.0
    x[63, 11, 15, 15] = 2.0       # alive through one value in the last sample
    x[:, 20] = 0.0
    x[5, 1, 2, 3] = float("nan")
    x[6, 2, 2, 3] = float("-inf")
    return x


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_large_activation_exact_counts_and_estimated_moments(layout):
    from tracelab.recorders import activations
    x = _planted_conv_output()
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    row = activation_row(x, "ReLU")
    got = _as_stats(row, x.numel())
    ref = reference_stats(x)
    assert (got["nan_count"], got["inf_count"]) == (1, 1)
    assert row[8] == pytest.approx(3 / 32)  # channels 3, 7, 20; 11 fires once, 1 holds a NaN
    finite = x[torch.isfinite(x)].double()
    clean = activation_row(torch.nan_to_num(x, nan=0.0, neginf=0.0), "ReLU")
    clean_stats = _as_stats(clean, x.numel())
    assert clean_stats["mean"] == pytest.approx(finite.sum().item() / x.numel(), rel=1e-5)
    assert clean_stats["std"] == pytest.approx(finite.std().item(), rel=0.05)
    assert clean_stats["zero_frac"] == pytest.approx((x == 0).double().mean().item(), abs=0.03)
    assert math.isnan(ref["mean"]) and math.isnan(got["mean"])
    assert x.numel() > activations.ACTIVATION_SUBSAMPLE



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("summer", ["kernel", "torch"])
def test_a_subsampled_outputs_mean_and_nonfinite_counts_stay_exact(dtype, summer):
    """Above the subsample every value is still summed, by the kernel in float32 partial sums of
    256 or, for the largest outputs, by torch: the mean matches a float64 sum, also when
    float32 sums overflow, and a NaN or Inf is counted wherever it lies, the first value, a
    partial sum's edge or the last value."""
    from tracelab.recorders import activations
    n = (activations.ACTIVATION_SUBSAMPLE * 4 if summer == "kernel"
         else activations._KERNEL_SUM_MAX) + 37
    torch.manual_seed(2)
    for scale in (1.0, 3e38 if dtype == torch.float32 else 1e300):
        x = (torch.randn(n, dtype=torch.float64) * scale).clamp(
            -torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype)
        got = _as_stats(activation_row(x.reshape(1, -1), "Linear"), n)
        assert got["mean"] == pytest.approx(x.double().mean().item(), rel=1e-6, abs=1e-12 * scale)
        assert (got["nan_count"], got["inf_count"]) == (0, 0)
    for at in (0, 255, 256, n - 1):
        for bad, key in ((float("nan"), "nan_count"), (float("-inf"), "inf_count")):
            x = torch.rand(n, dtype=dtype)
            x[at] = bad
            got = _as_stats(activation_row(x.reshape(1, -1), "Linear"), n)
            assert got[key] == 1 and got["nan_count"] + got["inf_count"] == 1, (at, key)

def test_dead_units_reads_every_sample_of_candidate_units():
    from tracelab.recorders.activations import dead_units
    torch.manual_seed(0)
    tokens = torch.relu(torch.randn(16, 128, 48))   # (batch, time, units): units on the last dim
    tokens[..., :5] = 0.0
    tokens[15, 127, 2] = 1e-3                       # unit 2 fires once, at the very end
    assert dead_units(tokens) == 4
    reference = (~(tokens.reshape(-1, 48) > 0).any(dim=0)).sum().item()
    assert reference == 4
    conv = _planted_conv_output()
    assert dead_units(conv) == (~(conv > 0).any(dim=3).any(dim=2).any(dim=0)).sum().item() == 3


def test_device_statistics_match_the_cpu_path_where_both_are_exact():
    from tracelab.recorders.activations import _device_stats
    torch.manual_seed(1)
    x = torch.randn(8, 4, 16, 16).sigmoid()         # 8,192 values: covered whole
    cpu = activation_row(x, "Sigmoid")
    device = _device_stats(x, (0.0, 1.0)).numpy()
    assert device == pytest.approx(cpu, rel=1e-6)
    assert _as_stats(cpu, x.numel())["max"] == pytest.approx(x.max().item())
    large = _planted_conv_output()
    device = _device_stats(large, None).numpy()
    assert device[8] == pytest.approx(3 / 32) and device[6:8].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_tensor_statistics_match_reference(dtype):
    from tracelab.recorders.numba_kernels import gather, tensor_stats
    torch.manual_seed(2)
    tensors = [torch.randn(100, 7), torch.randn(1000) * 1e-3 + 1.0, torch.zeros(5), torch.empty(0),
               torch.tensor([1.0, float("nan"), 0.0, 3.0]), torch.tensor([float("inf"), -2.0]),
               torch.randn(3, 3, 3, 3) * 1e4, torch.randn(37),  # 37: not a multiple of the lanes
               torch.randn(9000),                               # longer than one chunk
               # Negative values, signed zeros and -inf: the range is a vectorized max and
               # min, which must order them as floats.
               torch.tensor([-0.0, -5.0, -1e-30]), -torch.rand(50) - 1,
               torch.tensor([float("-inf"), -1.0, 0.0]), torch.tensor([-0.0, -0.0])]
    tensors = [t.to(dtype) for t in tensors]
    table = np.array([(t.data_ptr(), t.numel()) for t in tensors])
    sizes = table[:, 1]
    raw = np.empty((2 * len(tensors), len(RAW)))
    # Split between the weights' and grads' tables, which the kernel reads alike.
    tensor_stats(table[:4], table[4:], np.empty(0, tensors[0].numpy().dtype), raw)
    cols = finish(raw[:len(tensors)], sizes)
    for i, t in enumerate(tensors):
        if t.numel():
            assert_matches({k: v[i] for k, v in cols.items()}, reference_stats(t))
    assert cols["numel"][3] == 0 and cols["nan_count"][3] == 0
    # With the earlier values gathered: the updates, in the tensors' own precision.
    before = [t.clone() for t in tensors]
    snapshot = np.empty(int(sizes.sum()), before[0].numpy().dtype)
    gather(np.array([(t.data_ptr(), t.numel()) for t in before]), snapshot)
    for t in tensors:
        t.add_(torch.randn_like(t) * 1e-3)
    tensor_stats(table, table[:0], snapshot, raw)
    cols = finish(raw, np.concatenate([sizes, sizes]))
    for i, (a, b) in enumerate(zip(tensors + tensors, tensors + before)):
        if a.numel():
            want = reference_stats(a if i < len(tensors) else a - b)
            assert_matches({k: v[i] for k, v in cols.items()}, want)


@pytest.mark.parametrize("make", [
    lambda: torch.randn(32, 5) * 3 + 2024.0,
    lambda: torch.rand(8, 3, 40, 40),                        # channels, subsampled n_unique
    lambda: torch.randint(0, 256, (4, 3, 5, 5), dtype=torch.uint8),
    lambda: torch.tensor([[1.0, 0.5], [2.0, float("nan")], [2.0, float("inf")], [3.0, 0.5]]),
    lambda: torch.arange(10.0),
    lambda: torch.tensor([True, False, True]).reshape(3, 1),
    # a range beside a huge first value, which the moments are taken around
    lambda: torch.tensor([[3.0e38, -3.0e38], [3.3e38, 1.0]]),
    lambda: torch.tensor([[1e20], [0.5], [0.25]], dtype=torch.float64),
    # tables read row by row: NaN and Inf far from the first row, an infinite first value
    lambda: torch.randn(300, 7).index_put_((torch.tensor([250, 0]), torch.tensor([2, 3])),
                                           torch.tensor([float("nan"), float("inf")])),
    lambda: torch.randint(-50, 50, (5000, 3)).double() / 4,  # a strided distinct window
    # the windows copied a tile at a time: tables cut by no tile edge, strided ones
    lambda: torch.randint(0, 20, (37, 41)).float(),
    lambda: torch.randint(0, 7, (9000, 18)).float() / 2,
    lambda: torch.randint(0, 9, (6, 4, 1), dtype=torch.int32)])
def test_numpy_profile_matches_the_device_profile(make):
    from tracelab.recorders.profile import array_profile
    x = make()
    want, _ = tensor_profile(x)
    got, sample = array_profile(x.numpy(), np.random.default_rng(0))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    assert sample.shape == (want.shape[0], min(64, x.numel() // want.shape[0]))


def test_the_device_profile_of_a_feature_spanning_the_float32_range_is_finite():
    # Centred on its first value in float32, -3e38 - 3e38 overflowed: the std came out inf.
    x = torch.tensor([[3.0e38, 1.0], [-3.0e38, 2.0], [3.0e38, 3.0], [-2.0e38, 4.0]])
    packed, _ = tensor_profile(x)
    ref = x.double().numpy()
    np.testing.assert_allclose(packed[:, 0].numpy(), ref.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(packed[:, 1].numpy(), ref.std(axis=0, ddof=1), rtol=1e-9)


def test_sparse_gradients_are_recorded_as_their_dense_equivalent(tmp_path):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 4, sparse=True)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    with tracelab.Recorder(tmp_path / "run", emb, opt) as rec:
        idx = torch.tensor([[1, 2, 2], [7, 1, 9]])  # repeated rows: an uncoalesced grad
        opt.zero_grad()
        loss = emb(idx).pow(2).sum()
        loss.backward()
        dense = emb.weight.grad.to_dense().clone()
        opt.step()
        rec.step(loss=loss)
    tn = tracelab.open_run(tmp_path / "run").tensors
    row = tn[tn.kind == "grad"].iloc[0]
    assert_matches(row, reference_stats(dense), rtol=1e-6)


@pytest.mark.parametrize("shape", [(), (7,), (5, 3), (4, 3, 6), (2, 3, 4, 5), (2, 1, 3, 3, 3)])
def test_feature_shape_is_the_feature_matrix_shape(shape):
    from tracelab.recorders.profile import feature_matrix, feature_shape
    assert feature_shape(shape) == tuple(feature_matrix(torch.zeros(shape)).shape)


@pytest.mark.parametrize("count", [1, 10, 4096, 4097, 5000, 65536])
def test_analyzers_know_how_many_values_n_unique_counted(count):
    # The rules compare distinct counts at the window the recorder counted them on, for tensor
    # and DataFrame inputs alike.
    from tracelab.recorders.profile import array_profile, frame_profile
    from tracelab.core.schema import N_UNIQUE_CAP, unique_window
    values = np.arange(count, dtype=np.float64)  # all distinct
    want = min(float(unique_window(count)), N_UNIQUE_CAP)
    packed, _ = tensor_profile(torch.from_numpy(values).reshape(-1, 1))
    assert packed[0, 4].item() == want
    assert array_profile(values.reshape(-1, 1), np.random.default_rng(0))[0][0, 4] == want
    rows, _ = frame_profile(pd.DataFrame({"v": values, "s": values.astype(str)}),
                            np.random.default_rng(0))
    assert [r["n_unique"] for r in rows] == [want, want]


def test_reservoir_columns_name_each_value_of_full_and_partial_samples(tmp_path):
    """Also as the writer stores them: the names, dictionary-encoded in the columns, read back
    from the file as the schema's strings."""
    import pyarrow.parquet as pq
    from tracelab.core.schema import ARROW_SCHEMAS, SAMPLES
    from tracelab.core.writer import write_samples_file
    from tracelab.recorders.profile import Reservoir
    reservoir = Reservoir(50, seed=0)
    features = ["a", "b", "c"]
    for step in range(4):  # each value says its step and feature: step * 1000 + feature * 100
        values = step * 1000 + np.arange(3)[:, None] * 100 + np.arange(20.0)
        reservoir.add_many("train", features, step, values)

    def check(cols, sizes):
        frame = pd.DataFrame({k: np.asarray(v) for k, v in cols.items()})
        assert frame.groupby(["split", "feature"]).size().to_dict() == sizes
        assert (frame["step"] == frame["value"] // 1000).all()
        named = frame[frame.split == "train"]
        assert (named["feature"].map(features.index) == named["value"] % 1000 // 100).all()
    full = {("train", f): 50 for f in features}
    check(reservoir.columns(), full)
    reservoir.add("val", "a", 3, np.array([3000.0, 3001.0]))
    check(reservoir.columns(), full | {("val", "a"): 2})
    write_samples_file(tmp_path / "samples.parquet", reservoir.columns())
    stored = pq.read_table(tmp_path / "samples.parquet")
    assert stored.schema.equals(ARROW_SCHEMAS[SAMPLES])
    check(stored.to_pydict(), full | {("val", "a"): 2})
    assert stored.to_pandas().equals(pd.DataFrame(
        {k: np.asarray(v) for k, v in reservoir.columns().items()})[stored.column_names])


@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "numpy"])
def test_reservoir_keeps_a_uniform_sample_of_each_feature(compiled, monkeypatch):
    from tracelab.recorders import kernel_loader
    from tracelab.recorders.profile import Reservoir
    if not compiled:  # numba missing: the numpy form
        monkeypatch.setattr(kernel_loader, "_loaded", True)
        monkeypatch.setattr(kernel_loader, "_kernels", None)
    elif kernel_loader.kernels() is None:
        pytest.skip("numba unavailable")
    reservoir = Reservoir(500, seed=3)
    stream = np.arange(20_000, dtype=np.float64)
    for step, start in enumerate(range(0, len(stream), 128)):
        batch = stream[start:start + 128]
        with_nan = batch.copy()
        with_nan[::2] = np.nan  # only its finite values are offered
        few = np.full(len(batch), np.nan)
        few[:5] = batch[:5]
        reservoir.add_many("train", ["a", "b", "c"], step, np.stack([batch, with_nan, few]))
    reservoir.add("val", "a", 0, np.arange(7.0))  # fewer values than the sample holds
    cols = pd.DataFrame(reservoir.columns())
    sizes = cols.groupby(["split", "feature"]).size().to_dict()
    assert sizes == {("train", "a"): 500, ("train", "b"): 500, ("train", "c"): 500,
                     ("val", "a"): 7}
    for feature in ("a", "b", "c"):
        kept = cols[(cols.split == "train") & (cols.feature == feature)]
        assert kept["value"].is_unique and np.isfinite(kept["value"]).all()
        assert (kept["step"] == (kept["value"] // 128)).all()  # each value with its batch
    a = cols[(cols.split == "train") & (cols.feature == "a")]["value"]
    deciles = np.histogram(a, bins=10, range=(0, 20_000))[0]
    assert deciles.min() > 25 and deciles.max() < 80  # uniform: 50 each
    assert (cols[(cols.split == "train") & (cols.feature == "b")]["value"] % 2 == 1).all()
    assert sorted(cols[cols.split == "val"]["value"]) == list(range(7))


def test_a_reservoir_filled_without_the_kernels_stays_uniform_once_they_take_over(monkeypatch):
    """The kernel draws Algorithm L's gaps from a state it sets when a sample fills: a sample
    the numpy form filled (and went on sampling) gets that state where the kernel takes over,
    and every part of the stream keeps its share."""
    from tracelab.recorders import kernel_loader
    from tracelab.recorders.profile import Reservoir
    if kernel_loader.kernels() is None:
        pytest.skip("numba unavailable")
    reservoir = Reservoir(400, seed=1)
    stream = np.arange(40_000, dtype=np.float64)
    with monkeypatch.context() as patch:
        patch.setattr(kernel_loader, "_loaded", True)
        patch.setattr(kernel_loader, "_kernels", None)
        for step, start in enumerate(range(0, 1_000, 100)):
            reservoir.add_many("train", ["a"], step, stream[None, start:start + 100])
    for step, start in enumerate(range(1_000, len(stream), 100), start=10):
        reservoir.add_many("train", ["a"], step, stream[None, start:start + 100])
    kept = pd.DataFrame(reservoir.columns())
    assert len(kept) == 400 and kept["value"].is_unique
    assert (kept["step"] == kept["value"] // 100).all()
    deciles = np.histogram(kept["value"], bins=10, range=(0, len(stream)))[0]
    assert deciles.min() > 18 and deciles.max() < 65  # uniform: 40 each


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_count_nan_and_inf_wherever_they_lie(dtype):
    """The kernels' running max and min assume no NaN (so that they vectorize) and trust only
    the NaN count: NaN and Inf at the first, last and any value of tensors of every length
    around the vector widths must still be counted, and make the range NaN."""
    from tracelab.recorders.numba_kernels import activation_row as kernel_row, tensor_stats
    from tracelab.recorders.numba_kernels import _BLOCK
    rng = np.random.default_rng(4)
    sizes = (1, 7, 8, 9, 31, 33, 1000, _BLOCK - 1, _BLOCK + 1, 3 * _BLOCK + 5)
    for case, (size, at, bad) in enumerate(
            (size, at, bad) for size in sizes for at in sorted({0, size // 2, size - 1})
            for bad in (np.nan, np.inf, -np.inf)):
        x = rng.standard_normal(size).astype(dtype)
        before = x + dtype(1e-3)
        x[at] = bad
        if case % 2:  # the snapshot a step before it: Inf - Inf is NaN
            before[at] = bad
        old = before.copy()
        table = np.array([(x.ctypes.data, size)])
        raw = np.empty((3, len(RAW)))
        keep = bool(case % 3)  # the pass leaves x in `before`, block by block
        tensor_stats(table, table, before, raw, keep)  # the weight, as a grad, its update
        assert np.array_equal(before, x if keep else old, equal_nan=True)
        before = old
        acts = np.empty(10)
        kernel_row(x.reshape(1, 1, -1), np.empty(0, np.int64), 1, -np.inf, np.inf, np.empty(0),
                   acts)
        for row, values in ((raw[0], x), (raw[1], x), (raw[2], x - before), (acts, x)):
            want = reference_stats(torch.from_numpy(values))
            got = finish(row[None, :len(RAW)], np.array([size]))
            assert (got["nan_count"][0], got["inf_count"][0]) == \
                (want["nan_count"], want["inf_count"]), (size, at, bad)
            if np.isnan(bad) or np.isnan(values).any():
                assert np.isnan(got["min"][0]) and np.isnan(got["max"][0])
            else:
                assert (got["min"][0], got["max"][0]) == (want["min"], want["max"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_match_float64_sums_over_block_edges_and_near_the_float32_limit(dtype):
    """Within a block the kernels sum |v| and count nonzeros of float32 values in float32
    lanes: each row still matches float64 sums of the same values, for tensors across the
    lanes' and blocks' edges, with zeros, and with values so large that their float32 |v| sum overflows."""
    from tracelab.recorders.numba_kernels import _BLOCK, _LANES, tensor_stats
    rng = np.random.default_rng(5)
    for size in (1, 5, 16, _LANES - 1, _LANES + 1, _BLOCK - 1, _BLOCK, _BLOCK + 1,
                 5 * _BLOCK + 3):
        for scale in (1e-30, 1.0, 3e38 if dtype == np.float32 else 1e150):
            top = np.finfo(dtype).max
            x = np.clip(rng.standard_normal(size) * scale, -top, top).astype(dtype)
            x[rng.random(size) < 0.3] = 0
            before = (x * 0.5).astype(dtype)
            table = np.array([(x.ctypes.data, size)])
            raw = np.empty((3, len(RAW)))
            tensor_stats(table, table, before, raw, False)
            for row, values in ((raw[0], x), (raw[1], x), (raw[2], x - before)):
                got = finish(row[None, :len(RAW)], np.array([size]))
                want = reference_stats(torch.from_numpy(values))
                assert np.isfinite(got["abs_mean"][0]) and np.isfinite(got["norm"][0])
                for key in ("mean", "abs_mean", "zero_frac", "min", "max"):
                    assert got[key][0] == pytest.approx(want[key], rel=1e-6, abs=0), \
                        (size, scale, key)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_statistics_pass_gives_the_same_figures_on_any_number_of_threads(dtype):
    """The pass is cut into jobs by size alone, which torch's OpenMP team shares, and the jobs'
    parts are merged in order: one thread or several give the same bits, and leave the same
    snapshot; the figures match plain torch across the jobs' edges, NaN and Inf included."""
    from tracelab.recorders import omp_team
    from tracelab.recorders.numba_kernels import _CHUNK, _TEAM_FROM, tensor_stats
    torch.manual_seed(6)
    weights = [torch.randn(_TEAM_FROM + 5), torch.randn(3 * _CHUNK) * 1e-3 + 1.0,
               torch.zeros(7), torch.randn(_CHUNK - 1), torch.empty(0)]
    weights = [w.to(dtype) for w in weights]
    weights[0][_CHUNK + 3] = float("nan")
    weights[3][-1] = float("-inf")
    grads = [torch.randn_like(w) for w in weights]
    grads[1][2 * _CHUNK] = float("inf")
    before = torch.cat([w + 1e-3 * torch.randn_like(w) for w in weights]).numpy()
    before[_TEAM_FROM + 5 + 7] = np.nan  # in the second weight's first job

    def table(tensors):
        return np.array([(t.data_ptr(), t.numel()) for t in tensors])

    results = []
    for threads in (1, 2, 3):
        snapshot, raw = before.copy(), np.empty((3 * len(weights), len(RAW)))
        ran = tensor_stats(table(weights), table(grads), snapshot, raw, True, threads=threads)
        assert 1 <= ran <= (threads if omp_team.entry() else 1)
        results.append((raw, snapshot))
    for raw, snapshot in results[1:]:
        assert np.array_equal(raw, results[0][0], equal_nan=True)
        assert np.array_equal(snapshot, results[0][1], equal_nan=True)
    raw, snapshot = results[0]
    assert np.array_equal(snapshot, torch.cat(weights).numpy(), equal_nan=True)
    olds = torch.from_numpy(before).split([w.numel() for w in weights])
    tensors = weights + grads + [w - old for w, old in zip(weights, olds)]
    cols = finish(raw, np.array([t.numel() for t in tensors]))
    for i, t in enumerate(tensors):
        if t.numel():
            assert_matches({k: v[i] for k, v in cols.items()}, reference_stats(t))


_TEAMS = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.environ.get("OMP_DYNAMIC")
    or os.environ.get("OMP_THREAD_LIMIT")
    or "parallel backend: OpenMP" not in torch.__config__.parallel_info(),
    reason="torch runs its ops on an OpenMP team of the size asked in its Linux builds")


@_TEAMS
def test_the_pass_runs_on_torchs_own_openmp_team():
    """The team that runs torch's ops runs the pass's jobs: no second OpenMP runtime and no
    thread of its own, which would fight torch's spinning workers for the cores."""
    from tracelab.recorders import omp_team
    from tracelab.recorders.numba_kernels import _TEAM_FROM, tensor_stats
    assert omp_team.entry()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(_TEAM_FROM)
        (x * 2).sum()  # torch's team of two starts, if it had not
        alive = len(os.listdir("/proc/self/task"))
        table = np.array([(x.data_ptr(), x.numel())])
        raw = np.empty((1, len(RAW)))
        assert tensor_stats(table, table[:0], np.empty(0, np.float32), raw) == 2
        # A larger team of an earlier call may still be letting threads go: never more.
        assert len(os.listdir("/proc/self/task")) <= alive
        mean = finish(raw, np.array([x.numel()]))["mean"][0]
        assert mean == pytest.approx(x.double().mean().item(), rel=1e-9)
    finally:
        torch.set_num_threads(threads)


@_TEAMS
def test_a_process_forked_after_the_team_ran_reads_on_its_own_thread():
    """A forked child has no OpenMP workers: its pass runs on the calling thread (where a call
    into the parent's team would wait for ever), with the parent's figures."""
    from tracelab.recorders.numba_kernels import _TEAM_FROM, tensor_stats
    x = torch.randn(3 * _TEAM_FROM)
    table = np.array([(x.data_ptr(), x.numel())])
    raw = np.empty((1, len(RAW)))
    assert tensor_stats(table, table[:0], np.empty(0, np.float32), raw, threads=2) == 2
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            again = np.empty((1, len(RAW)))
            ran = tensor_stats(table, table[:0], np.empty(0, np.float32), again, threads=2)
            os.write(write, bytes([ran]) + again.tobytes())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 60
    while os.waitpid(child, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(child, 9)
            pytest.fail("the forked child's pass hung")
        time.sleep(0.05)
    with os.fdopen(read, "rb") as pipe:
        got = pipe.read()
    assert got[0] == 1
    assert np.array_equal(np.frombuffer(got[1:]).reshape(raw.shape), raw, equal_nan=True)


def test_the_pass_refuses_a_snapshot_it_cannot_read_by_address():
    from tracelab.recorders.numba_kernels import tensor_stats
    x = np.ones(8, np.float32)
    table = np.array([(x.ctypes.data, 4)])
    with pytest.raises(ValueError, match="contiguous"):
        tensor_stats(table, table[:0], x[::2], np.empty((2, len(RAW))))


def test_a_weights_l1_stays_exact_beside_an_update_that_is_not_finite():
    """Near the float32 limit the weight's |v| sum overflows in float32 lanes and is taken
    again in float64, whether or not its update (x minus a snapshot holding NaN, or an
    overflowing subtraction) is finite."""
    from tracelab.recorders.numba_kernels import tensor_stats
    for old_first in (np.nan, -3e38):
        x = np.array([3e38, 3e38, 1.0], dtype=np.float32)
        before = np.array([old_first, 0.0, 0.0], dtype=np.float32)
        raw = np.empty((2, len(RAW)))
        tensor_stats(np.array([(x.ctypes.data, 3)]), np.empty((0, 2), np.int64), before, raw)
        weight = finish(raw[:1], np.array([3]))
        assert weight["abs_mean"][0] == pytest.approx(float(np.abs(x.astype(np.float64)).mean()),
                                                      rel=1e-12)
        update = finish(raw[1:], np.array([3]))
        want = reference_stats(torch.from_numpy(x - before))
        assert (update["nan_count"][0], update["inf_count"][0]) == \
            (want["nan_count"], want["inf_count"])
