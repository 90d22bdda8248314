"""lr-schedule: a learning rate that dies while the loss falls, a warm-up that never ends."""
import math

import numpy as np
import pandas as pd
import pytest

from tracelab.analyzers.lr_schedule import lr_schedule
from tracelab.core.run import Run

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

from torch.optim import lr_scheduler as sched  # noqa: E402
from _optim_training import batches, model, train  # noqa: E402
import torch  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
STEPS = 200


def _found(path):
    return [f for f in tracelab.analyze(path).findings if f.rule == "lr-schedule"]


def test_an_epoch_scheduler_stepped_per_batch_is_named(tmp_path):
    [f] = _found(train(tmp_path / "r", steps=STEPS,
                       scheduler=lambda o: sched.StepLR(o, step_size=30, gamma=0.1)))
    assert f.evidence["kind"] == "died" and f.evidence["peak_lr"] == pytest.approx(0.1)
    assert 90 <= f.evidence["dead_step"] <= 120 and f.evidence["dead_share"] > 0.3
    assert f.evidence["loss_high_to"] < f.evidence["loss_high_from"]
    assert "StepLR" in f.message and "once per epoch" in f.fix


def test_a_cosine_sized_in_epochs_set_per_batch_is_named(tmp_path):
    def cosine(step, span=16, final=0.03):  # to 3 % of the peak in 16 batches, then held
        return final + (1 - final) * (1 + math.cos(math.pi * min(step, span) / span)) / 2
    [f] = _found(train(tmp_path / "r", steps=STEPS,
                       scheduler=lambda o: sched.LambdaLR(o, cosine)))
    assert f.evidence["kind"] == "died" and f.evidence["dead_step"] <= 20
    assert f.evidence["lr_at_death"] == pytest.approx(0.003)


def test_a_warm_up_that_never_ends_is_named(tmp_path):
    [f] = _found(train(tmp_path / "r", steps=100,
                       scheduler=lambda o: sched.LambdaLR(o, lambda s: s / 1e6)))
    assert f.evidence["kind"] == "never_warmed_up"
    assert f.evidence["configured_lr"] == pytest.approx(0.1) and f.evidence["max_lr"] < 1e-4


@pytest.mark.parametrize("scheduler,per_batch", [
    (lambda o: sched.CosineAnnealingLR(o, T_max=STEPS), True),  # to ~0 at the very end
    (lambda o: sched.OneCycleLR(o, 0.1, total_steps=STEPS), True),  # warm-up from ~0
    (lambda o: sched.LambdaLR(o, lambda s: min(1.0, (s + 1) / 20)), True),  # linear warm-up
    (lambda o: sched.StepLR(o, step_size=3, gamma=0.1), False),  # an epoch scheduler per epoch
    (lambda o: sched.ReduceLROnPlateau(o, factor=0.1, patience=0), False),
])
def test_ordinary_schedules_stay_quiet(tmp_path, scheduler, per_batch):
    assert _found(train(tmp_path / "r", steps=STEPS, scheduler=scheduler,
                        per_batch_scheduler=per_batch)) == []


def _frames(lr, loss):
    steps = range(len(lr))
    scalars = pd.concat([pd.DataFrame({"step": steps, "split": "train", "name": "lr/0",
                                       "value": lr}),
                         pd.DataFrame({"step": steps, "split": "train", "name": "loss",
                                       "value": loss})])
    return Run.from_frames(scalars=scalars)


def test_a_decay_after_the_loss_flattened_stays_quiet():
    rng = np.random.default_rng(0)
    loss = 0.3 + 0.05 * rng.standard_normal(200)  # flat from the start
    lr = 0.1 * 0.1 ** (np.arange(200) // 30)
    assert lr_schedule(_frames(lr, loss)) == []
    falling = np.linspace(2.0, 0.3, 200) + 0.05 * rng.standard_normal(200)
    assert lr_schedule(_frames(lr, falling))[0].evidence["kind"] == "died"


def test_an_lr_that_falls_before_training_begins_is_named():
    rng = np.random.default_rng(0)
    lr = 1.0 * 0.7 ** np.arange(200)  # StepLR(step_size=1, gamma=0.7) stepped per batch
    [f] = lr_schedule(_frames(lr, 2.3 + 0.05 * rng.standard_normal(200)))
    assert f.evidence["before_training"] is True and f.evidence["dead_step"] <= 20
    assert "before 10 steps were trained" in f.message


def test_a_cosine_annealing_stepped_past_its_t_max_is_named(tmp_path):
    [f] = _found(train(tmp_path / "r", steps=STEPS,
                       scheduler=lambda o: sched.CosineAnnealingLR(o, T_max=20)))
    assert f.evidence["kind"] == "wrapped" and f.evidence["t_max"] == 20
    assert f.evidence["low_step"] <= 20 and "T_max" in f.fix


def test_warm_restarts_stay_quiet(tmp_path):
    assert _found(train(tmp_path / "r", steps=STEPS,
                        scheduler=lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=50))) == []


def _cosine(step, span=20):  # CosineAnnealingLR's factor, T_max `span`, as a LambdaLR
    return (1 + math.cos(math.pi * step / span)) / 2


def test_a_cosine_stepped_past_its_end_is_named_from_the_lr_alone(tmp_path):
    # a LambdaLR (no CosineAnnealingLR recorded) annealing to 0 and back, over and over
    [f] = _found(train(tmp_path / "r", steps=STEPS,
                       scheduler=lambda o: sched.LambdaLR(o, _cosine)))
    assert f.evidence["kind"] == "wrapped" and f.evidence["t_max"] is None
    assert f.evidence["low_step"] <= 21 and "CosineAnnealingLR or the like" in f.message


@pytest.mark.parametrize("factor", [
    lambda s: _cosine(s % 20, 21),  # hand-written warm restarts: back to the peak in one step
    lambda s: 1.0 if s < 20 else min(1.0, (s - 20) / 40),  # a warm-up set after a first epoch
])
def test_restarts_and_a_late_warm_up_stay_quiet(tmp_path, factor):
    assert _found(train(tmp_path / "r", steps=STEPS,
                        scheduler=lambda o: sched.LambdaLR(o, factor))) == []


def _manual_warm_up(run_dir, warmup, steps=100, lr=0.1):
    """nanoGPT's loop: no scheduler, each group's lr set by hand before the step."""
    torch.manual_seed(0)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    with tracelab.Recorder(str(run_dir), model=net, optimizer=opt, loss_fn=loss_fn,
                           flush_interval=0.5) as rec:
        for i, (x, y) in enumerate(batches(steps)):
            for group in opt.param_groups:
                group["lr"] = lr * min(1.0, (i + 1) / (warmup + 1))
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=x, targets=y)
    return run_dir


def test_a_warm_up_longer_than_the_run_is_named(tmp_path):
    [f] = _found(_manual_warm_up(tmp_path / "r", warmup=1000))
    assert f.evidence["kind"] == "never_warmed_up"
    assert f.evidence["configured_lr"] == pytest.approx(0.1)
    assert f.evidence["max_lr"] == pytest.approx(0.1 * 100 / 1001)
    assert "still rising at the last step" in f.message
    [f] = _found(train(tmp_path / "s", steps=100,
                       scheduler=lambda o: sched.LambdaLR(o, lambda s: (s + 1) / 1000)))
    assert f.evidence["kind"] == "never_warmed_up"


@pytest.mark.parametrize("warmup", [10, 120])  # ends within the run; ends just after it
def test_a_warm_up_that_ends_about_the_run_stays_quiet(tmp_path, warmup):
    assert _found(_manual_warm_up(tmp_path / "r", warmup=warmup)) == []


def _adamw(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)


@pytest.mark.parametrize("optimizer", [None, _adamw])
def test_torchvisions_step_decay_stepped_per_epoch_stays_quiet(tmp_path, optimizer):
    # pytorch/vision's classification recipe shrunk: StepLR(step_size=4 epochs, gamma 0.1)
    # over 10 epochs of 20 batches, stepped once per epoch: 40/40/20 % of the run at the peak,
    # a tenth and a hundredth of it; the last stage is no longer than the first
    assert _found(train(tmp_path / "r", steps=STEPS, optimizer=optimizer, epoch_len=20,
                        per_batch_scheduler=False,
                        scheduler=lambda o: sched.StepLR(o, step_size=4, gamma=0.1))) == []


def test_a_multistep_decay_stepped_per_batch_is_named(tmp_path):
    # the same recipe's milestones reached after 20, 40 and 60 batches instead of epochs:
    # held at the peak for 20 steps, then at a thousandth of it for the last 140
    [f] = _found(train(tmp_path / "r", steps=STEPS,
                       scheduler=lambda o: sched.MultiStepLR(o, milestones=[20, 40, 60])))
    assert f.evidence["kind"] == "died" and 59 <= f.evidence["dead_step"] <= 60
    assert f.evidence["lr_at_death"] == pytest.approx(1e-4)
