"""Recorded statistics against plain-torch reference values."""
import math
import warnings

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


def test_mixed_tensors_keep_their_own_statistics():
    """Each tensor's statistics stay its own (a NaN or an Inf, a zero of either sign, an offset
    whose std cancels, a float64 one), beside an empty tensor and large ones."""
    torch.manual_seed(3)
    nan_one, inf_one = torch.randn(9), torch.randn(300, 3)
    nan_one[4], inf_one[7, 1] = float("nan"), float("-inf")
    tensors = [torch.randn(5), nan_one, torch.full((6,), -0.0), torch.randn(4000) * 1e-4 + 1.0,
               torch.empty(0), torch.randn(70000), inf_one, torch.tensor([2.5, -1.0]),
               torch.randn(128, 3, 3, dtype=torch.float64) * 1e-200,
               torch.relu(torch.randn(40000)), torch.randn(7, 7) + 1e3]
    cols = finish(raw_stats(tensors).numpy(), np.array([t.numel() for t in tensors]))
    for i, t in enumerate(tensors):
        if t.numel():
            assert_matches({k: v[i] for k, v in cols.items()}, reference_stats(t))
    assert (cols["nan_count"].tolist(), cols["inf_count"].tolist()) == \
        ([0, 1] + [0] * 9, [0] * 6 + [1] + [0] * 4)


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
    from tracelab.recorders.cadence import DENSE_STEPS
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


def _one_value_in_place(model):
    with torch.no_grad():
        model[0].weight.view(-1)[1] += 1.0


def _clamp_through_data(model):  # WGAN's weight clipping
    for p in model.parameters():
        p.data.clamp_(-0.05, 0.05)


def _first_value_through_data(model):  # a write autograd does not count
    model[2].weight.data.view(-1)[0] += 1.0


def _new_tensor_through_data(model):
    model[0].weight.data = model[0].weight.data.clone()


@pytest.mark.parametrize("change", [None, _one_value_in_place, _clamp_through_data,
                                    _first_value_through_data, _new_tensor_through_data])
def test_each_update_is_the_optimizers_alone_whatever_changed_the_weights_before(
        tmp_path, change):
    """The weights changed between steps (an in-place op, a change through .data, a new
    tensor): the update is still the optimizer step's change only."""
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
    tn = tracelab.open_run(tmp_path / "run").tensors
    for step, ref in enumerate(updates):
        for name, tensor in ref.items():
            row = tn[(tn.step == step) & (tn.kind == "update") & (tn.name == name)]
            assert_matches(row.iloc[0], reference_stats(tensor), rtol=1e-5, atol=1e-10)


def test_without_an_optimizer_no_snapshot_is_copied_or_kept(tmp_path):
    model = torch.nn.Linear(50, 40)
    x = torch.randn(8, 50)
    with tracelab.Recorder(tmp_path / "run", model) as rec:
        for _ in range(4):
            model.zero_grad()
            model(x).square().mean().backward()
            rec.step()
    assert rec._parameters._snapshot == []
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


@pytest.mark.parametrize("batch", [4, 4096])
def test_an_output_changed_in_place_after_its_hook_is_recorded_as_it_was(tmp_path, batch):
    """A Linear's output that the next ReLU(inplace=True) overwrites: its row is that of the
    values before the ReLU, read whole (4 x 16) or subsampled (4096 x 16), though the
    subsample's moments are taken later, on the writer thread."""
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(inplace=True))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 8)
    seen = []
    model[0].register_forward_hook(lambda m, a, o: seen.append(o.detach().clone()))
    with tracelab.Recorder(tmp_path / "run", model, opt, activation_every=1) as rec:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        rec.step()
    tn = tracelab.open_run(tmp_path / "run").tensors
    row = tn[(tn.kind == "activation") & (tn.name == "0")].iloc[0]
    before = seen[0].double()
    assert row["min"] < 0 and row["abs_mean"] > before.clamp(min=0).mean().item()
    assert row["mean"] == pytest.approx(before.mean().item(), abs=1e-6)
    if batch == 4:  # read whole: every statistic is exact
        assert_matches(row, reference_stats(seen[0]), rtol=1e-6)


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tensor_profile_never_changes_the_batch(dtype):
    """The profile centres a copy: a float64 batch's features are views of the batch itself."""
    x = (torch.randn(128, 16, generator=torch.Generator().manual_seed(0)) * 3 + 2000).to(dtype)
    before = x.clone()
    packed, _ = tensor_profile(x)
    assert torch.equal(x, before)
    assert packed[:, 1].numpy() == pytest.approx(before.double().std(dim=0).numpy(), rel=1e-9)


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
def test_a_subsampled_outputs_mean_and_nonfinite_counts_stay_exact(dtype):
    """Above the subsample every value is still summed: the mean matches a float64 sum, also
    when float32 sums overflow, and a NaN or Inf is counted wherever it lies, the first value,
    a block's edge or the last value."""
    from tracelab.recorders import activations
    n = activations.ACTIVATION_SUBSAMPLE * 4 + 37
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


@pytest.mark.parametrize("layout", ["2d", "3d", "4d", "channels_last", "nan"])
def test_small_outputs_read_whole_count_their_dead_units_exactly(layout):
    """An output no larger than the subsample is read whole, and its dead units are counted on
    those values: the same count as plain torch's, for every layout."""
    torch.manual_seed(0)
    x = {"2d": torch.randn(32, 20), "3d": torch.randn(4, 8, 20), "4d": torch.randn(8, 6, 5, 5),
         "channels_last": torch.randn(8, 6, 5, 5), "nan": torch.randn(32, 20)}[layout]
    x = torch.relu(x)
    if x.dim() == 4:
        x[:, [1, 4]] = 0.0
        x[7, 4, 4, 4] = 1e-3  # channel 4 fires once, in the last sample
        expected = (~(x > 0).any(dim=3).any(dim=2).any(dim=0)).sum().item()
    else:
        x[..., [3, 11, 17]] = 0.0
        x.reshape(-1, 20)[-1, 11] = 2.0  # unit 11 fires once, in the last row
        expected = (~(x.reshape(-1, 20) > 0).any(dim=0)).sum().item()
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    if layout == "nan":
        x[0, 5] = math.nan  # NaN is not > 0 and hides nothing
    units = x.shape[1] if x.dim() == 4 else x.shape[-1]
    row = activation_row(x, "ReLU")
    assert row[len(RAW)] * units == pytest.approx(expected)
    assert expected == (1 if x.dim() == 4 else 2)  # what was planted


@pytest.mark.parametrize("sign", ["non-negative", "non-positive", "mixed", "signed zeros",
                                  "negative zeros only"])
def test_an_output_read_whole_matches_plain_torch_whatever_its_signs(sign):
    """An output read whole, of one sign (a ReLU's, whose L1 sum is taken from its sum) or of
    both, with zeros of either sign: every statistic is plain torch's, abs_mean +0.0 when all
    are zeros."""
    torch.manual_seed(2)
    x = torch.randn(40, 30)
    negative_zero = torch.tensor(-0.0)
    x = {"non-negative": x.relu(), "non-positive": -x.relu(), "mixed": x,
         "signed zeros": torch.where(x > 0, x, negative_zero),
         "negative zeros only": torch.full((40, 30), -0.0)}[sign]
    got = _as_stats(activation_row(x, "ReLU"), x.numel())
    assert_matches(got, reference_stats(x), rtol=1e-12)
    assert math.copysign(1.0, got["abs_mean"]) == 1.0


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
def test_tensor_statistics_and_updates_match_reference(dtype):
    """raw_stats (the weights', grads' and updates' one implementation) against plain torch,
    and the updates as ParameterStats takes them: a pre-step copy, subtracted in place."""
    from tracelab.recorders.parameters import ParameterStats
    from tracelab.recorders.transfer import StepRecord
    torch.manual_seed(2)
    tensors = [torch.randn(100, 7), torch.randn(1000) * 1e-3 + 1.0, torch.zeros(5), torch.empty(0),
               torch.tensor([1.0, float("nan"), 0.0, 3.0]), torch.tensor([float("inf"), -2.0]),
               torch.randn(3, 3, 3, 3) * 1e4, torch.randn(37), torch.randn(9000),
               # Negative values, signed zeros and -inf: the range must order them as floats.
               torch.tensor([-0.0, -5.0, -1e-30]), -torch.rand(50) - 1,
               torch.tensor([float("-inf"), -1.0, 0.0]), torch.tensor([-0.0, -0.0])]
    tensors = [t.to(dtype) for t in tensors]
    cols = finish(raw_stats(tensors).numpy(), np.array([t.numel() for t in tensors]))
    for i, t in enumerate(tensors):
        if t.numel():
            assert_matches({k: v[i] for k, v in cols.items()}, reference_stats(t))
    assert cols["numel"][3] == 0 and cols["nan_count"][3] == 0
    params = [torch.nn.Parameter(t.clone()) for t in tensors]
    stats = ParameterStats([(str(i), p) for i, p in enumerate(params)])
    stats.snapshot()
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn_like(p) * 1e-3)
    record = StepRecord()
    stats.record(0, record, weights=True, updates=stats.end_step())
    (_, rows), = record.seal()()
    n = len(params)
    assert list(rows["kind"]) == ["weight"] * n + ["update"] * n
    for i, (p, before) in enumerate(zip(params, tensors)):
        if p.numel():
            assert_matches({k: v[i] for k, v in rows.items()}, reference_stats(p))
            assert_matches({k: v[n + i] for k, v in rows.items()},
                           reference_stats(p.detach() - before))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_tensors_read_in_pieces_match_reference(dtype):
    """Tensors above the scratch buffer's piece are reduced piece by piece into the same
    statistics as plain torch's: zeros, a NaN or an Inf in a later piece, a strided tensor
    (copied once), and the small tensors read beside them."""
    from tracelab.recorders import stats
    torch.manual_seed(4)
    n = stats._PIECE + 4099
    zeros = torch.randn(n)
    zeros[::3] = 0.0
    zeros[-5:] = -0.0
    nan, inf = torch.randn(n), torch.randn(n) * 1e3
    nan[stats._PIECE + 17] = float("nan")
    inf[-1] = float("-inf")
    strided = torch.randn(1100, 1000).t()  # not contiguous: read through a copy
    tensors = [t.to(dtype) for t in (zeros, torch.randn(5), nan, inf, strided, torch.rand(40000))]
    cols = finish(raw_stats(tensors).numpy(), np.array([t.numel() for t in tensors]))
    for i, t in enumerate(tensors):
        got = {k: v[i] for k, v in cols.items()}
        for k, v in reference_stats(t).items():
            # The pieces' sums: abs_mean and the counts. Sum and norm accumulate in float32
            # on the CPU (stats.py), whose std of a million values is good to 1e-4.
            rel = 1e-6 if k in ("abs_mean", "zero_frac", "numel") or dtype == torch.float64 \
                else 1e-4
            assert got[k] == pytest.approx(v, rel=rel, abs=1e-9, nan_ok=True), (i, k)
    assert (cols["nan_count"][2], cols["inf_count"][3]) == (1, 1)
    assert cols["zero_frac"][0] == pytest.approx((zeros == 0).double().mean().item())


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
    from tracelab.recorders.profile import frame_profile
    from tracelab.core.schema import N_UNIQUE_CAP, unique_window
    values = np.arange(count, dtype=np.float64)  # all distinct
    want = min(float(unique_window(count)), N_UNIQUE_CAP)
    packed, _ = tensor_profile(torch.from_numpy(values).reshape(-1, 1))
    assert packed[0, 4].item() == want
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


def test_reservoir_keeps_a_uniform_sample_of_each_feature():
    from tracelab.recorders.profile import Reservoir
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nan_and_inf_are_counted_wherever_they_lie(dtype):
    """NaN and Inf at the first, last and any value of tensors of lengths around the vector
    widths are counted, and a NaN makes the range NaN, in the weights', grads' and updates'
    statistics and in an activation's."""
    gen = torch.Generator().manual_seed(4)
    for size in (1, 7, 8, 9, 31, 33, 1000, 4097):
        for at in sorted({0, size // 2, size - 1}):
            for bad in (math.nan, math.inf, -math.inf):
                x = torch.randn(size, generator=gen, dtype=dtype)
                x[at] = bad
                got = finish(raw_stats([x]).numpy(), np.array([size]))
                act = finish(activation_row(x.reshape(1, -1), "Linear")[None, :len(RAW)],
                             np.array([size]))
                want = reference_stats(x)
                for row in (got, act):
                    assert (row["nan_count"][0], row["inf_count"][0]) == \
                        (want["nan_count"], want["inf_count"]), (size, at, bad)
                if math.isnan(bad):
                    assert np.isnan(got["min"][0]) and np.isnan(got["max"][0])
                else:
                    assert (got["min"][0], got["max"][0]) == (want["min"], want["max"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sums_match_float64_near_the_float32_limit(dtype):
    """Where a float32 sum of |v| or of v^2 overflows though every value is finite, the CPU
    statistics are taken again in float64: finite, and those of plain torch in float64."""
    gen = torch.Generator().manual_seed(5)
    top = torch.finfo(dtype).max
    for size in (1, 5, 16, 255, 256, 257, 5000):
        for scale in (1e-30, 1.0, 3e38 if dtype == torch.float32 else 1e150):
            x = (torch.randn(size, generator=gen, dtype=torch.float64) * scale).clamp(-top, top)
            x = x.to(dtype)
            x[torch.rand(size, generator=gen) < 0.3] = 0
            got = finish(raw_stats([x]).numpy(), np.array([size]))
            want = reference_stats(x)
            assert np.isfinite(got["abs_mean"][0]) and np.isfinite(got["norm"][0])
            for key in ("mean", "abs_mean", "norm", "zero_frac", "min", "max"):
                assert got[key][0] == pytest.approx(want[key], rel=1e-6, abs=0), \
                    (size, scale, key)


def test_a_weight_near_the_float32_limit_and_an_update_that_is_not_finite():
    """The weight's |v| sum overflows in float32 and is taken again in float64; its update
    (after minus a snapshot holding NaN, or an overflowing subtraction) counts its NaN and
    Inf as plain torch does."""
    for old_first in (math.nan, -3e38):
        x = torch.tensor([3e38, 3e38, 1.0])
        before = torch.tensor([old_first, 0.0, 0.0])
        got = finish(raw_stats([x, x - before]).numpy(), np.array([3, 3]))
        assert got["abs_mean"][0] == pytest.approx(float(x.double().abs().mean()), rel=1e-12)
        want = reference_stats(x - before)
        assert (got["nan_count"][1], got["inf_count"][1]) == \
            (want["nan_count"], want["inf_count"])


def test_a_complex_parameter_s_statistics_and_grad_norms_are_its_magnitudes(tmp_path):
    """A complex parameter (a spectral filter, say): a cast to a real type keeps only the real
    part (and warns in the user's process). Its statistics are its values' magnitudes', and the
    grads' total norms at backward and at the step count them whole, as
    clip_grad_norm_ does."""
    from tracelab.core.schema import GRAD_NORM_BACKWARD, GRAD_NORM_STEP

    class Spectral(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(6, dtype=torch.complex64))
            self.b = torch.nn.Parameter(torch.zeros(6))

        def forward(self, x):
            return (self.w * x).abs().mean() + (self.b * x).sum()

    torch.manual_seed(0)
    model = Spectral()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    grads, totals = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracelab.Recorder(tmp_path / "run", model, opt) as rec:
            for _ in range(3):
                opt.zero_grad()
                loss = model(torch.randn(6))
                loss.backward()
                grads.append(model.w.grad.detach().clone())
                totals.append(float(torch.nn.utils.get_total_norm(
                    [p.grad for p in model.parameters()]).double()))
                opt.step()
                rec.step(loss=loss)
    assert [str(w.message) for w in caught] == []
    run = tracelab.open_run(tmp_path / "run")
    tn = run.tensors
    for step, grad in enumerate(grads):
        row = tn[(tn.step == step) & (tn.kind == "grad") & (tn.name == "w")].iloc[0]
        magnitude = grad.to(torch.complex128).abs()
        assert row["norm"] == pytest.approx(float(magnitude.norm()), rel=1e-6)
        assert row["mean"] == pytest.approx(float(magnitude.mean()), rel=1e-6)
        assert row["max"] == pytest.approx(float(magnitude.max()), rel=1e-6)
        assert row["min"] == pytest.approx(float(magnitude.min()), rel=1e-6)
    for name in (GRAD_NORM_BACKWARD, GRAD_NORM_STEP):
        assert list(run.signal(name)) == pytest.approx(totals, rel=1e-6), name
