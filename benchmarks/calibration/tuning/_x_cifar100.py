"""weiaicunzai/pytorch-cifar100 train.py, shrunk: a VGG with BatchNorm (models/vgg.py, cfg A
narrowed to 16-32-64-64 channels for 8x8 inputs; classifier Linear-ReLU-Dropout twice then
Linear), CrossEntropyLoss, SGD(lr=0.1, momentum=0.9, weight_decay=5e-4), the repo's WarmUpLR
stepped every batch of the first (warm) epoch and MultiStepLR(gamma=0.2) stepped once per epoch
after it (milestones 60/120/160 of 200 epochs scaled to 4/7/10 of 12); train() calls net.train(),
eval_training() calls net.eval(). Data: scikit-learn's digits as 1-channel images, normalized
with the training mean/std; train-only RandomCrop(padding=1) (the flip is left out on digits).

`bug` (None: as published):
- "sched-per-batch": train_scheduler.step() inside the batch loop instead of once per epoch;
- "train-once": net.train() called once before the epochs, not at the start of train(), so
  after the first evaluation every epoch trains in eval mode.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import LRScheduler

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/weiaicunzai/pytorch-cifar100/blob/"
          "a30566700743599e3fcc5bb6f956040c39035ea1/train.py")
BUGS = (None, "sched-per-batch", "train-once")


class WarmUpLR(LRScheduler):
    """utils.WarmUpLR: lr = base_lr * m / total_iters."""

    def __init__(self, optimizer, total_iters, last_epoch=-1):
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base_lr * self.last_epoch / (self.total_iters + 1e-8) for base_lr in self.base_lrs]


class VGG(nn.Module):
    def __init__(self, cfg=(16, "M", 32, "M", 64, 64, "M"), num_class=10):
        super().__init__()
        layers, c = [], 1
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(c, v, kernel_size=3, padding=1), nn.BatchNorm2d(v),
                           nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(64, 128), nn.ReLU(inplace=True), nn.Dropout(),
                                        nn.Linear(128, 128), nn.ReLU(inplace=True), nn.Dropout(),
                                        nn.Linear(128, num_class))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def _crop(x, gen):
    """RandomCrop(8, padding=1) per batch."""
    dx, dy = (int(v) for v in torch.randint(0, 3, (2,), generator=gen))
    return nn.functional.pad(x, (1, 1, 1, 1))[:, :, dy:dy + 8, dx:dx + 8]


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    mean, std = x_train.mean(), x_train.std()
    x_train, x_val = (x_train - mean) / std, (x_val - mean) / std
    net = VGG()
    loss_function = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    train_scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[4, 7, 10], gamma=0.2)
    iter_per_epoch = len(batches(len(x_train), 64, gen))
    warmup_scheduler = WarmUpLR(optimizer, iter_per_epoch * 1)
    warm = 1
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, scheduler=train_scheduler,
                           loss_fn=loss_function,
                           config={"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4,
                                   "batch_size": 64, "warm": 1, "milestones": [4, 7, 10]}) as rec:
        if bug == "train-once":
            net.train()
        for epoch in range(1, epochs + 1):
            if epoch > warm and bug != "sched-per-batch":
                train_scheduler.step()
            if bug != "train-once":
                net.train()
            for idx in batches(len(x_train), 64, gen):
                if epoch <= warm:
                    warmup_scheduler.step()
                elif bug == "sched-per-batch":
                    train_scheduler.step()
                images, labels = _crop(x_train[idx], gen), y_train[idx]
                optimizer.zero_grad()
                outputs = net(images)
                loss = loss_function(outputs, labels)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=images, targets=labels, outputs=outputs)
            net.eval()
            with torch.no_grad():
                outputs = net(x_val)
                test_loss = loss_function(outputs, y_val).item()
                acc = outputs.argmax(1).eq(y_val).float().mean().item()
            rec.log("val", metrics={"loss": test_loss, "acc": acc}, inputs=x_val,
                    targets=y_val, outputs=outputs)
