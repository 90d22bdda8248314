"""pytorch/vision references/classification/train.py, shrunk: its train_one_epoch (model.train(),
forward, zero_grad, loss, backward, optional clip_grad_norm_ over the optimizer's parameters,
step), its evaluate (model.eval(), inference_mode, top-1 accuracy) after every epoch, and its
main(): CrossEntropyLoss(label_smoothing=args.label_smoothing), SGD(lr=0.1, momentum=0.9,
weight_decay=1e-4), the default StepLR (step size and gamma 0.1) stepped once per epoch, and the
optional warm-up (LinearLR then the main scheduler in a SequentialLR). torchvision's resnet18
is shrunk to its stem (conv 3x3, BatchNorm, ReLU) and two BasicBlocks of 16 and 32 channels,
average pool and fc; the data is scikit-learn's 8x8 digits upsampled to 16x16 with ToTensor()
and Normalize, batch 64, 10 epochs of 24 batches, lr_step_size 4 instead of 30 of 90 epochs.

`bug` plants one fault (None: the script's defaults):
- "recipe": healthy, the recipe flags --label-smoothing 0.1 --lr-warmup-epochs 2
  --lr-warmup-method linear --lr-warmup-decay 0.01 --lr-scheduler cosineannealinglr
  --clip-grad-norm 1.0;
- "adamw": healthy, --opt adamw --lr 1e-3 --weight-decay 0.05;
- "sched-per-batch": lr_scheduler.step() called after every batch inside train_one_epoch
  instead of once per epoch, so StepLR divides the rate by ten every 4 batches;
- "clip-1e-3": --clip-grad-norm 0.001;
- "no-train-mode": the model.train() call at the top of train_one_epoch left out, so every
  epoch after the first evaluation trains with BatchNorm in eval mode.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _v_data import batches, digits, to_tensor

SOURCE = ("https://github.com/pytorch/vision/blob/017e9b99b5daddec3d82d5b05fe26f6834c48fa9/"
          "references/classification/train.py")
BUGS = (None, "recipe", "adamw", "sched-per-batch", "clip-1e-3", "no-train-mode")
MEAN, STD = 0.3, 0.4


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed, size=16)
    prep = lambda im: (to_tensor(im) - MEAN) / STD  # noqa: E731
    label_smoothing = 0.1 if bug == "recipe" else 0.0
    clip_grad_norm = {"recipe": 1.0, "clip-1e-3": 0.001}.get(bug)
    lr, momentum, weight_decay, lr_step_size, lr_gamma = 0.1, 0.9, 1e-4, 4, 0.1
    model = TinyResNet()
    criterion = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
    if bug == "adamw":
        lr, weight_decay = 1e-3, 0.05
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum,
                                    weight_decay=weight_decay)
    if bug == "recipe":
        warmup_epochs = 2
        main_lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=epochs - warmup_epochs)
        warmup_lr_scheduler = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=0.01, total_iters=warmup_epochs)
        lr_scheduler = torch.optim.lr_scheduler.SequentialLR(
            optimizer, schedulers=[warmup_lr_scheduler, main_lr_scheduler],
            milestones=[warmup_epochs])
    else:
        lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=lr_step_size,
                                                       gamma=lr_gamma)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           scheduler=lr_scheduler,
                           config={"lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                                   "batch_size": 64, "epochs": epochs,
                                   "label_smoothing": label_smoothing,
                                   "clip_grad_norm": clip_grad_norm}) as rec:
        for _epoch in range(epochs):
            # train_one_epoch
            if bug != "no-train-mode":
                model.train()
            for idx in batches(len(x_train), 64, gen):
                image, target = prep(x_train[idx]), y_train[idx]
                output = model(image)
                optimizer.zero_grad()
                loss = criterion(output, target)
                loss.backward()
                if clip_grad_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
                optimizer.step()
                rec.step(loss=loss, inputs=image, targets=target, outputs=output)
                if bug == "sched-per-batch":
                    lr_scheduler.step()
            if bug != "sched-per-batch":
                lr_scheduler.step()
            # evaluate
            model.eval()
            with torch.inference_mode():
                image = prep(x_val)
                output = model(image)
                val_loss = criterion(output, y_val).item()
                acc1 = (output.argmax(1) == y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "acc1": acc1}, inputs=image,
                    targets=y_val, outputs=output)
