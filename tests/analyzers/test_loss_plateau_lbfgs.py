"""loss-plateau on a real tiny L-BFGS training (a least-squares fit on one full batch): each
optimizer.step() runs up to `max_iter` iterations of its closure, so the loss falls to its floor
within the first step and stays level after it. Judged from the first recorded loss (the only
one taken before the optimizer iterated) it did decrease, so quiet; with a learning rate too
small to move the weights it never falls, and the plateau is reported."""
import pytest

torch = pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")
from torch import nn  # noqa: E402

import tracelab  # noqa: E402
from _contract_runs import regression  # noqa: E402
from tracelab.analyzers._learning_rate import iterations_per_step  # noqa: E402
from tracelab.analyzers.loss_plateau import loss_plateau  # noqa: E402
from tracelab.core.run import open_run  # noqa: E402


def _lbfgs(path, *, lr: float = 1.0, max_iter: int = 20, steps: int = 40):
    torch.manual_seed(0)
    x, y = regression(128)
    model = nn.Linear(8, 1)
    opt = torch.optim.LBFGS(model.parameters(), lr=lr, max_iter=max_iter)
    mse = nn.MSELoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=mse) as rec:
        for _ in range(steps):
            def closure():
                opt.zero_grad()
                loss = mse(model(x).squeeze(1), y)
                loss.backward()
                return loss
            loss = opt.step(closure)
            rec.step(loss=loss, inputs=x, targets=y)
    return open_run(path)


def test_quiet_when_the_first_step_already_iterated_to_the_floor(tmp_path):
    run = _lbfgs(tmp_path / "lbfgs")
    assert iterations_per_step(run) == 20
    assert loss_plateau(run) == []


def test_one_iteration_per_step_from_the_same_floor_is_judged_by_its_first_losses(tmp_path):
    # max_iter=1: each step one iteration, so the start is the first losses' median as usual;
    # a learning rate too small to move the weights leaves the loss level: reported
    run = _lbfgs(tmp_path / "tiny_lr", lr=1e-7)
    [f] = loss_plateau(run)
    assert f.evidence["relative_drop"] < 0.03
    run = _lbfgs(tmp_path / "one_iter", lr=1e-7, max_iter=1)
    assert iterations_per_step(run) == 1 and len(loss_plateau(run)) == 1
