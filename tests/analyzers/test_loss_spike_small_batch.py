"""loss-spike on a real tiny classifier trained on batches of 4 (the batch size of the
pytorch-book LeNet): a batch's loss is the mean over 4 samples, so one hard sample is a quarter
of a large loss, and a stretch of batches that happen to hold a few more of them lifts the median
of the next 10 losses several times over the rolling median. Against the run's own
batch-to-batch distribution such a stretch is chance: quiet. Labels shifted by one class for
30 steps (a corrupted shard) lift the loss beyond anything that distribution gives: it fires."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _contract_runs import blobs  # noqa: E402
from tracelab.analyzers.loss_spike import loss_spike  # noqa: E402

STEPS, SHIFTED = 1500, (1000, 1030)


def _small_batches(path, shifted=None):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = blobs(4000, features=8, classes=10, seed=0)
    x = x + torch.randn(x.shape, generator=g)  # overlapping classes: a few hard samples
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with tracelab.Recorder(str(path), model=model, optimizer=opt,
                           loss_fn=nn.CrossEntropyLoss()) as rec:
        for step in range(STEPS):
            idx = torch.randint(0, len(x), (4,), generator=g)
            xb, yb = x[idx], y[idx]
            if shifted and shifted[0] <= step < shifted[1]:
                yb = (yb + 1) % 10
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=model(xb).detach())
    return tracelab.open_run(path)


def test_quiet_on_a_stretch_of_hard_batches_of_four(tmp_path):
    run = _small_batches(tmp_path / "small")
    values = run.loss().to_numpy(dtype=float)
    # the raw level-shift test sees a shift: some 10 batches' median at least 1.5 times the
    # median of the 50 before
    ahead = np.array([np.median(values[i:i + 10]) / np.median(values[i - 50:i])
                      for i in range(50, len(values) - 10)])
    assert ahead.max() >= 1.5
    assert loss_spike(run) == []


def test_fires_on_labels_shifted_for_a_stretch(tmp_path):
    found = loss_spike(_small_batches(tmp_path / "shifted", shifted=SHIFTED))
    assert found and SHIFTED[0] <= found[0].steps[0] < SHIFTED[1]
