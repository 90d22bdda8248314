"""Tiny real trainings for the rules on the optimizer's facts: a 4-class MLP on separable
synthetic data, recorded with the Recorder; each keyword plants one mistake or one ordinary
practice."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import torch
from torch import nn

import tracelab

FEATURES, CLASSES, BATCH = 16, 4, 64


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, CLASSES))


def batches(steps: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES, generator=g)
        yield x, (x @ w).argmax(1)


def train(run_dir: Path, *, steps: int = 120, optimizer: Callable = None,
          scheduler: Optional[Callable] = None, per_batch_scheduler: bool = True,
          clip: Optional[float] = None, clip_after_step: bool = False,
          params: Optional[Callable] = None, call_step: bool = True,
          zero_grad_before_step: bool = False, net: Optional[nn.Module] = None,
          seed: int = 0, every: Optional[int] = None, epoch_len: int = 20,
          amp: bool = False) -> Path:
    """Train for `steps` batches; `optimizer(params)` builds the optimizer (SGD lr 0.1,
    momentum 0.9 by default) over `params(model)` (all parameters by default);
    `scheduler(opt)` one stepped after every batch, or after every `epoch_len` batches when not
    `per_batch_scheduler`; `amp`: a GradScaler, unscaled before the clip."""
    torch.manual_seed(seed)
    net = net or model()
    opt = (optimizer or (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)))(
        list(params(net) if params else net.parameters()))
    sched = scheduler(opt) if scheduler else None
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16) if amp else None
    with tracelab.Recorder(str(run_dir), model=net, optimizer=opt, scheduler=sched,
                           loss_fn=loss_fn, every=every, flush_interval=0.5,
                           scaler=scaler) as rec:
        epoch: list[float] = []
        for i, (x, y) in enumerate(batches(steps, seed)):
            opt.zero_grad()
            out = net(x)
            loss = loss_fn(out, y)
            (scaler.scale(loss) if scaler else loss).backward()
            if scaler:
                scaler.unscale_(opt)
            if clip is not None and not clip_after_step:
                torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
            if zero_grad_before_step:
                opt.zero_grad()
            if call_step and scaler:
                scaler.step(opt)
                scaler.update()
            elif call_step:
                opt.step()
            if clip is not None and clip_after_step:
                torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
            epoch.append(loss.item())
            if sched is not None and (per_batch_scheduler or (i + 1) % epoch_len == 0):
                if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau):
                    sched.step(sum(epoch) / len(epoch))  # the epoch's mean loss
                else:
                    sched.step()
                epoch = []
            rec.step(loss=loss, inputs=x, targets=y, outputs=out)
    return Path(run_dir)


def train_gan(run_dir: Path, *, steps: int = 60, skip: Optional[str] = None,
              seed: int = 0) -> Path:
    """A tiny GAN on 2-D points, one Adam per network given to the Recorder as a list;
    `skip`: "d" leaves out the discriminator's step, "g" steps the discriminator's optimizer
    in the generator's update instead of the generator's, "detach" detaches the generator's
    samples in its own update (its optimizer steps on no gradient)."""
    torch.manual_seed(seed)
    gan = nn.ModuleDict({"g": nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)),
                         "d": nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))})
    opt_g = torch.optim.Adam(gan["g"].parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(gan["d"].parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    with tracelab.Recorder(str(run_dir), model=gan, optimizer=[opt_g, opt_d],
                           flush_interval=0.5) as rec:
        for _ in range(steps):
            real = torch.randn(32, 2) * 0.5 + 2.0
            fake = gan["g"](torch.randn(32, 4))
            opt_d.zero_grad()
            loss_d = bce(gan["d"](real), torch.ones(32, 1)) + \
                bce(gan["d"](fake.detach()), torch.zeros(32, 1))
            loss_d.backward()
            if skip != "d":
                opt_d.step()
            opt_g.zero_grad()
            loss_g = bce(gan["d"](fake.detach() if skip == "detach" else fake),
                         torch.ones(32, 1))
            loss_g.backward()  # also leaves grads in D, which its next zero_grad resets
            (opt_d if skip == "g" else opt_g).step()
            rec.step(loss=loss_g, metrics={"loss_d": loss_d})
    return Path(run_dir)
