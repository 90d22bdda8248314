"""loss-spike on a real tiny classifier trained with mixup (Beta(0.2, 0.2), soft targets and
their cross-entropy, as timm's train.py does): most batches' lambda sits near 0 or 1, some near
one half, whose soft targets alone hold the loss above ln 2, several times the rolling median.
Such excursions recur all through the run and are the objective's own noise: quiet. One batch
whose inputs are scaled a thousandfold lifts the loss far above every excursion the objective
makes elsewhere: it fires."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _contract_runs import blobs  # noqa: E402
from tracelab.analyzers.loss_spike import loss_spike  # noqa: E402

STEPS, BAD = 400, 300


def _mixup_run(path, bad_step=None):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = blobs(2048, features=16, classes=4)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    beta = torch.distributions.Beta(torch.tensor(0.2), torch.tensor(0.2))
    with tracelab.Recorder(str(path), model=model, optimizer=opt,
                           config={"mixup": 0.2}) as rec:
        for step in range(STEPS):
            idx = torch.randint(0, len(x), (64,), generator=g)
            xb, yb = x[idx], F.one_hot(y[idx], 4).float()
            lam = float(beta.sample())
            xb, yb = lam * xb + (1 - lam) * xb.flip(0), lam * yb + (1 - lam) * yb.flip(0)
            if step == bad_step:
                xb = xb * 1000.0
            opt.zero_grad()
            loss = torch.sum(-yb * F.log_softmax(model(xb), dim=-1), dim=-1).mean()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb)
    return tracelab.open_run(path)


def test_quiet_on_the_excursions_of_mixup(tmp_path):
    run = _mixup_run(tmp_path / "mixup")
    late = run.loss().to_numpy()[100:]
    assert (late > 3 * float(sorted(late)[len(late) // 2])).sum() >= 10  # recurring excursions
    assert loss_spike(run) == []


def test_fires_on_a_batch_far_beyond_the_mixup_noise(tmp_path):
    run = _mixup_run(tmp_path / "bad", bad_step=BAD)
    found = loss_spike(run)
    assert [f.steps[0] for f in found] == [BAD]
    assert found[0].evidence["loss"] > 10 * found[0].evidence["rolling_median"]
