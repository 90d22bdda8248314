"""The per-batch sentinel (the batches table) against plain torch, on every step."""
import math

import numpy as np
import pytest
import torch

import tracelab
from tracelab.core.run import open_run
from tracelab.recorders.sentinel import device_sentinel, host_sentinel


def _reference(x: torch.Tensor) -> list[float]:
    x = x.detach()
    if x.dtype == torch.bool:
        x = x.long()
    if not x.is_floating_point():
        return [float(x.min()), float(x.max()), 0, 0]
    x = x.double()
    return [float(x.min()), float(x.max()), int(torch.isnan(x).sum()), int(torch.isinf(x).sum())]


def _same(got, want):
    for g, w in zip(got, want):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, rel=1e-6), (got, want)


CASES = [torch.randn(64, 7), torch.randn(3, 4, 5, dtype=torch.float64),
         torch.tensor([1.0, float("nan"), -3.0]), torch.tensor([float("inf"), -2.0, 1.0]),
         torch.tensor([-float("inf"), float("inf")]), torch.randn(8, 3).half(),
         torch.randn(10).bfloat16(), torch.randint(-5, 9, (33,)),
         torch.randint(0, 255, (7,), dtype=torch.uint8), torch.rand(6) > 0.5,
         torch.randn(16, 4).t()]  # not contiguous
# NaN and Inf at the first, a middle and the last of vector-width-straddling lengths: the
# compiled pass keeps a running max and min that assume no NaN, and must count them anyway.
for _size, _dtype in ((9, torch.float32), (1003, torch.float32), (37, torch.float64)):
    for _at in (0, _size // 2, _size - 1):
        for _bad in (float("nan"), float("inf"), -float("inf")):
            _x = torch.randn(_size, dtype=_dtype)
            _x[_at] = _bad
            CASES.append(_x)


@pytest.mark.parametrize("x", CASES, ids=lambda x: f"{x.dtype}-{tuple(x.shape)}")
def test_host_and_device_paths_match_plain_torch(x):
    _same(host_sentinel(x).tolist(), _reference(x))
    _same(device_sentinel(x).tolist(), _reference(x))


def test_every_step_records_its_batches_whatever_input_every_says(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = []
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt,
                           input_every=10) as rec:
        for step in range(13):
            x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
            if step == 7:
                x[2, 1] = float("nan")
                x[3, 0] = float("inf")
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x.nan_to_num()), y)
            loss.backward()
            opt.step()
            rec.step(loss, inputs={"features": x, "mask": x > 0}, targets=y)
            batches.append((x, y))
        rec.log("val", inputs=batches[7][0], targets=y)
    b = open_run(tmp_path / "run").batches
    assert sorted(b.loc[b["split"] == "train", "step"].unique()) == list(range(13))
    for step, (x, y) in enumerate(batches):
        rows = b[(b["step"] == step) & (b["split"] == "train")].set_index("name")
        assert list(rows.index) == ["features", "mask", "target"]
        assert list(rows["role"]) == ["input", "input", "target"]
        for name, t in (("features", x), ("mask", x > 0), ("target", y)):
            got = rows.loc[name, ["min", "max", "nan_count", "inf_count"]].astype(float)
            _same(got.tolist(), _reference(t))
    val = b[b["split"] == "val"]
    assert list(val["name"]) == ["input", "target"] and int(val["nan_count"].iloc[0]) == 1


def test_old_runs_without_the_table_still_open(tmp_path):
    with tracelab.Recorder(str(tmp_path / "run")) as rec:
        for step in range(3):
            rec.step(loss=1.0 / (step + 1))
    run = open_run(tmp_path / "run")
    assert run.batches.empty and not (tmp_path / "run" / "batches").exists()
    assert "batches" not in {r.key for r in run.available}
    assert np.isfinite(run.loss().to_numpy()).all()


def test_dataframes_numpy_arrays_and_series_are_checked_every_step(tmp_path):
    pd = pytest.importorskip("pandas")
    with tracelab.Recorder(tmp_path / "run") as rec:  # input_every=10: only step 0 profiles
        for step in range(5):
            frame = pd.DataFrame({"x": [1.0, math.nan if step == 3 else 2.0],
                                  "n": pd.array([1, 7], dtype="Int64"), "s": ["a", "b"]})
            rec.step(loss=1.0, inputs=frame, targets=pd.Series([0, 1], name="y"))
        array = np.array([[1.0, np.inf], [-2.0, 0.5]], dtype=np.float32)
        array.flags.writeable = False
        swapped = np.arange(4, dtype=">f8")[::-1]  # byte-swapped and reversed: copied
        rec.step(loss=1.0, inputs={"a": array, "b": swapped})
        with pytest.warns(RuntimeWarning, match="given as a str are not checked"):
            rec.step(loss=1.0, inputs=["text"])
        with pytest.warns(RuntimeWarning, match="given as a ndarray are not checked"):
            rec.step(loss=1.0, inputs=np.zeros(3, dtype=np.longdouble))
    run = open_run(tmp_path / "run")
    assert run.loss().tolist() == [1.0] * 8  # no step lost to an input it cannot read
    batches = run.batches
    frames = batches[(batches.name == "input") & (batches.step < 5)].set_index("step")
    assert frames.nan_count.tolist() == [0, 0, 0, 1, 0]  # one row a frame, as for a tensor
    assert frames.loc[0, ["min", "max"]].tolist() == [1.0, 7.0]
    assert batches[batches.name == "target"].nan_count.tolist() == [0] * 5
    a = batches[batches.name == "a"].iloc[0]
    assert (a["min"], a["max"], a.nan_count, a.inf_count) == (-2.0, math.inf, 0, 1)
    b = batches[batches.name == "b"].iloc[0]
    assert (b["min"], b["max"]) == (0.0, 3.0)


def test_a_batch_changed_after_step_is_recorded_as_it_was(tmp_path):
    """A loop that refills one buffer with each batch (a pinned staging tensor) changes the
    batch after step(): the sentinel, the profile and the fingerprints are those of the batch
    as it was at step()."""
    from tracelab.recorders.fingerprints import Fingerprints
    from tracelab.recorders.transfer import StepRecord
    torch.manual_seed(0)
    buffer = torch.empty(16, 4)
    seen = []
    with tracelab.Recorder(str(tmp_path / "run"), input_every=2) as rec:
        for step in range(6):
            buffer.copy_(torch.randn(16, 4) + 10 * step)
            if step == 2:
                buffer[5, 1] = float("nan")
            seen.append(buffer.clone())
            rec.step(loss=1.0, inputs=buffer)
            buffer.fill_(-1e6)  # the next batch's staging: after step(), before the writer
    run = open_run(tmp_path / "run")
    b = run.batches.set_index("step")
    for step, x in enumerate(seen):
        _same(b.loc[step, ["min", "max", "nan_count", "inf_count"]].astype(float).tolist(),
              _reference(x))
    profiles = run.inputs
    for step in (0, 4):  # profiled steps without a NaN
        got = profiles[profiles["step"] == step].sort_values("feature")["mean"].to_numpy(float)
        np.testing.assert_allclose(got, seen[step].double().mean(0).numpy(), rtol=1e-6)
    fp = run.fingerprints
    for step in (0, 2, 4):  # the profiled steps
        reference = StepRecord()
        Fingerprints(10 ** 9).record(0, "train", seen[step], reference)
        want = reference.seal()()[0][1]["hash"]
        assert sorted(fp.loc[fp["step"] == step, "hash"]) == sorted(want.tolist())
