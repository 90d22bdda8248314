"""huggingface/pytorch-image-models train.py, shrunk: its defaults -- SGD (momentum 0.9,
nesterov, weight decay 2e-5), the cosine scheduler with 5 warm-up epochs from warmup_lr 1e-5 to
min_lr 0, stepped with lr_scheduler.step(epoch + 1) after each epoch and step_update(num_updates)
after each update (a no-op for an epoch-based schedule), LabelSmoothingCrossEntropy(0.1) (or
mixup with SoftTargetCrossEntropy), train_one_epoch() calling model.train() and validate() calling
model.eval(). The model is a small timm-style ResNet (BasicBlocks with BatchNorm, global pooling)
on scikit-learn's 8x8 digits standardized like the script's mean/std Normalize, with a train-only
random shift of one pixel (RandomResizedCrop stand-in); 20 epochs, batch 64, lr 0.05
(lr_base 0.1 * 128 / 256).

`bug` plants one fault (None: the script as published):
- "mixup": healthy, --mixup 0.2 (one-hot soft targets, SoftTargetCrossEntropy);
- "accum-clip": healthy, --grad-accum-steps 2 (each loss divided by 2, the optimizer stepped
  every second batch and after the last) and --clip-grad 1.0 (clip_grad_norm_ before the step);
- "step-per-update": lr_scheduler.step(num_updates) called after every update in place of
  step_update(), so the 20-epoch cosine is spent in the first 20 updates and the LR stays at 0;
- "no-eval-mode": validate() lacks model.eval(), so validation runs with dropout active and
  BatchNorm normalizing with the validation batch's own statistics (and updating its running
  ones);
- "no-train-mode": train_one_epoch() lacks model.train(), so after the first validate() every
  epoch trains in eval mode (BatchNorm running statistics frozen, dropout off).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _z_data import batches, digits

SOURCE = ("https://github.com/huggingface/pytorch-image-models/blob/"
          "aa4b5850c1543fa488abf260f18390eda46cf85d/train.py")
BUGS = (None, "mixup", "accum-clip", "step-per-update", "no-eval-mode", "no-train-mode")


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.act1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.act2 = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        x = self.act1(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        return self.act2(x + shortcut)


class ResNet(nn.Module):
    def __init__(self, num_classes=10, drop_rate=0.2):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.act1 = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.drop = nn.Dropout(drop_rate)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.act1(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = x.mean((2, 3))
        return self.fc(self.drop(x))


class LabelSmoothingCrossEntropy(nn.Module):
    def __init__(self, smoothing=0.1):
        super().__init__()
        self.smoothing = smoothing
        self.confidence = 1.0 - smoothing

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        return (self.confidence * nll_loss + self.smoothing * smooth_loss).mean()


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


class CosineLRScheduler:
    """timm.scheduler.CosineLRScheduler(t_initial=epochs, warmup_t=5, warmup_lr_init=1e-5,
    lr_min=0, t_in_epochs=True): step(epoch) sets the LR; step_update() does nothing."""

    def __init__(self, optimizer, t_initial, warmup_t=5, warmup_lr_init=1e-5, lr_min=0.0):
        self.optimizer = optimizer
        self.base = [g["lr"] for g in optimizer.param_groups]
        self.t_initial, self.warmup_t = t_initial, warmup_t
        self.warmup_lr_init, self.lr_min = warmup_lr_init, lr_min
        self.warmup_steps = [(v - warmup_lr_init) / warmup_t for v in self.base]
        self.step(0)

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * s for s in self.warmup_steps]
        if t >= self.t_initial:
            return [self.lr_min for _ in self.base]
        return [self.lr_min + 0.5 * (v - self.lr_min) * (1 + math.cos(math.pi * t / self.t_initial))
                for v in self.base]

    def step(self, epoch, metric=None):
        for g, lr in zip(self.optimizer.param_groups, self._get_lr(epoch)):
            g["lr"] = lr

    def step_update(self, num_updates, metric=None):
        return None


def mixup(x, target, gen, alpha=0.2, num_classes=10):
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    perm = torch.arange(len(x) - 1, -1, -1)
    one_hot = F.one_hot(target, num_classes).float()
    return lam * x + (1 - lam) * x[perm], lam * one_hot + (1 - lam) * one_hot[perm]


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 20) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    mean, std = x_train.mean(), x_train.std()
    norm = lambda x: (x - mean) / std
    model = ResNet()
    lr = 0.05
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True,
                                weight_decay=2e-5)
    lr_scheduler = CosineLRScheduler(optimizer, t_initial=epochs)
    train_loss_fn = SoftTargetCrossEntropy() if bug == "mixup" else LabelSmoothingCrossEntropy(0.1)
    validate_loss_fn = nn.CrossEntropyLoss()
    config = {"model": "resnet", "opt": "sgd", "lr": lr, "momentum": 0.9, "weight_decay": 2e-5,
              "sched": "cosine", "epochs": epochs, "warmup_epochs": 5, "warmup_lr": 1e-5,
              "min_lr": 0.0, "smoothing": 0.1, "mixup": 0.2 if bug == "mixup" else 0.0,
              "grad_accum_steps": 2 if bug == "accum-clip" else 1,
              "clip_grad": 1.0 if bug == "accum-clip" else None,
              "batch_size": 64}
    num_updates = 0
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=train_loss_fn,
                           config=config) as rec:
        for epoch in range(epochs):
            if bug != "no-train-mode":
                model.train()
            accum_steps = 2 if bug == "accum-clip" else 1
            epoch_batches = batches(len(x_train), 64, gen)
            optimizer.zero_grad()
            for batch_idx, idx in enumerate(epoch_batches):
                need_update = (batch_idx == len(epoch_batches) - 1
                               or (batch_idx + 1) % accum_steps == 0)
                input, target = norm(x_train[idx]), y_train[idx]
                if torch.rand(1, generator=gen).item() < 0.5:
                    input = torch.roll(input, shifts=1, dims=3)
                if bug == "mixup":
                    input, target = mixup(input, target, gen)
                output = model(input)
                loss = train_loss_fn(output, target)
                if accum_steps > 1:
                    loss /= accum_steps
                loss.backward()
                if not need_update:
                    rec.step(loss=loss, inputs=input, targets=target, outputs=output)
                    continue
                if bug == "accum-clip":
                    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
                num_updates += 1
                if bug == "step-per-update":
                    lr_scheduler.step(num_updates)
                else:
                    lr_scheduler.step_update(num_updates=num_updates)
                rec.step(loss=loss, inputs=input, targets=target, outputs=output)
            if bug != "no-eval-mode":
                model.eval()
            with torch.no_grad():
                output = model(norm(x_val))
                val_loss = validate_loss_fn(output, y_val).item()
                acc = (output.argmax(1) == y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "top1": acc}, inputs=norm(x_val),
                    targets=y_val, outputs=output)
            if bug != "step-per-update":
                lr_scheduler.step(epoch + 1)
