"""d2l-en chapter_optimization/lr-scheduler.md (PyTorch tab), shrunk: its net_fn() LeNet (ReLU,
max pooling), CrossEntropyLoss, SGD and its train() loop, which sets each param group's lr from
a scheduler once per epoch; batch size 64 and 16 epochs instead of 256 and 30, on 8x8 digits
instead of Fashion-MNIST, so the second conv is 3x3 and the first Linear reads 16 features.

Schedules (`schedule=`): "multistep" (lr 0.5, torch's MultiStepLR(milestones=[8, 12],
gamma=0.5) stepped per epoch; d2l's milestones are [15, 30] of 30 epochs), "cosine" (d2l's
CosineScheduler(max_update=16, base_lr=0.3, final_lr=0.01, warmup_steps=4): warm-up then
cosine, set per epoch). Bug (`bug=`): "cosine-per-batch" (the cosine schedule, sized in epochs,
set in the batch loop from the update count: warm-up and decay are over after 16 batches and
the rest of the run trains at final_lr)."""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim import lr_scheduler

import tracelab
from _b_data import batches, digits


def net_fn() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 16, kernel_size=3), nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(16, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


class CosineScheduler:
    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0):
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.max_steps = self.max_update - self.warmup_steps

    def get_warmup_lr(self, epoch):
        increase = ((self.base_lr_orig - self.warmup_begin_lr)
                    * float(epoch) / float(self.warmup_steps))
        return self.warmup_begin_lr + increase

    def __call__(self, epoch):
        if epoch < self.warmup_steps:
            return self.get_warmup_lr(epoch)
        if epoch <= self.max_update:
            self.base_lr = self.final_lr + (
                self.base_lr_orig - self.final_lr) * (1 + math.cos(
                    math.pi * (epoch - self.warmup_steps) / self.max_steps)) / 2
        return self.base_lr


def train(run_dir: str, seed: int = 0, *, schedule: str = "multistep", bug: str | None = None,
          num_epochs: int = 16) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    x_tr, x_va = x_tr.float() / 255.0, x_va.float() / 255.0
    net = net_fn()
    loss = nn.CrossEntropyLoss()
    if schedule == "multistep":
        trainer = torch.optim.SGD(net.parameters(), lr=0.5)
        scheduler = lr_scheduler.MultiStepLR(trainer, milestones=[8, 12], gamma=0.5)
    else:
        scheduler = CosineScheduler(max_update=16, base_lr=0.3, final_lr=0.01, warmup_steps=4)
        trainer = torch.optim.SGD(net.parameters(), lr=0.3)
    per_batch = bug == "cosine-per-batch"
    updates = 0
    with tracelab.Recorder(run_dir, model=net, optimizer=trainer, loss_fn=loss,
                           scheduler=scheduler if schedule == "multistep" else None,
                           config={"schedule": schedule, "batch_size": 64,
                                   "num_epochs": num_epochs}) as rec:
        for epoch in range(num_epochs):
            net.train()
            for idx in batches(len(x_tr), 64, gen):
                X, y = x_tr[idx], y_tr[idx]
                trainer.zero_grad()
                y_hat = net(X)
                l = loss(y_hat, y)
                l.backward()
                trainer.step()
                rec.step(loss=l, inputs=X, targets=y, outputs=y_hat)
                updates += 1
                if per_batch:
                    for param_group in trainer.param_groups:
                        param_group["lr"] = scheduler(updates)
            net.eval()
            with torch.no_grad():
                out = net(x_va)
                acc = (out.argmax(1) == y_va).float().mean()
            rec.log("val", metrics={"loss": loss(out, y_va), "acc": acc}, inputs=x_va,
                    targets=y_va, outputs=out)
            if scheduler and not per_batch:
                if scheduler.__module__ == lr_scheduler.__name__:
                    scheduler.step()
                else:
                    for param_group in trainer.param_groups:
                        param_group["lr"] = scheduler(epoch)
