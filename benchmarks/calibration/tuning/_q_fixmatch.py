"""kekmodel/FixMatch-pytorch train.py with models/wideresnet.py and models/ema.py, shrunk: a
WideResNet (pre-activation BasicBlocks: BatchNorm2d + LeakyReLU(0.1) + conv3x3, dropout 0),
each step a labeled batch and mu times as many unlabeled images in a weak and a strong
augmentation, interleaved through one forward; Lx = cross_entropy on the labeled logits,
pseudo-labels from softmax(weak logits / T) kept where their max probability >= threshold 0.95,
Lu = masked cross_entropy on the strong logits, loss = Lx + lambda_u * Lu; SGD(lr=0.03,
momentum=0.9, nesterov=True) with weight decay 5e-4 on every parameter but biases and
BatchNorm (two param groups); get_cosine_schedule_with_warmup(optimizer, warmup=0,
total_steps, num_cycles=7/16) stepped after every optimizer.step(); an EMA copy of the model
(ModelEMA) evaluated every eval_step steps. Shrunk: CIFAR-10 with 4000 labels replaced by
scikit-learn's 8x8 digits (gray channel repeated three times, normalized by their own mean and
std) with 250 labels and the whole training split unlabeled; the weak augmentation is
RandomCrop(padding=1) (the flip left out: digits are not mirror-symmetric), the strong one the
same crop plus Gaussian noise and a 3x3 cutout standing in for RandAugmentMC; WideResNet-10-1
(one block a group, widths 16/16/32/64) instead of 28-2; batch 16 and mu 3 instead of 64 and 7;
total_steps 300 and eval_step 50 instead of 2**20 and 1024; EMA decay 0.99 and BatchNorm
momentum 0.1 instead of 0.999 and 0.001 (a short run).

`bug` plants one fault (None: the script as published):
- "sched-epochs": the cosine schedule built over args.epochs (total_steps / eval_step = 6)
  instead of args.total_steps, but still stepped after every batch: the learning rate falls to
  0 after 7 steps, and the clamped cosine (max(0, cos)) lets it back only in short bumps, half
  of the steps at lr 0.
"""
from __future__ import annotations

import math
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import LambdaLR

import tracelab
from _q_data import digits, to_tensor

SOURCE = ("https://github.com/kekmodel/FixMatch-pytorch/blob/"
          "040be3b8950300b052f810df31a0c6c09561e09f/train.py")
BUGS = (None, "sched-epochs")
BN_MOMENTUM = 0.1  # 0.001 in the script: its running statistics would not move in 300 steps


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps,
                                    num_cycles=7. / 16., last_epoch=-1):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        no_progress = float(current_step - num_warmup_steps) / \
            float(max(1, num_training_steps - num_warmup_steps))
        return max(0., math.cos(math.pi * num_cycles * no_progress))

    return LambdaLR(optimizer, _lr_lambda, last_epoch)


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


class BasicBlock(nn.Module):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, activate_before_residual=False):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes, momentum=BN_MOMENTUM)
        self.relu1 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv1 = nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1,
                               bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes, momentum=BN_MOMENTUM)
        self.relu2 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv2 = nn.Conv2d(out_planes, out_planes, kernel_size=3, stride=1, padding=1,
                               bias=False)
        self.drop_rate = drop_rate
        self.equalInOut = in_planes == out_planes
        self.convShortcut = (not self.equalInOut) and nn.Conv2d(
            in_planes, out_planes, kernel_size=1, stride=stride, padding=0, bias=False) or None
        self.activate_before_residual = activate_before_residual

    def forward(self, x):
        if not self.equalInOut and self.activate_before_residual:
            x = self.relu1(self.bn1(x))
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out if self.equalInOut else x)))
        if self.drop_rate > 0:
            out = F.dropout(out, p=self.drop_rate, training=self.training)
        out = self.conv2(out)
        return torch.add(x if self.equalInOut else self.convShortcut(x), out)


class WideResNet(nn.Module):
    def __init__(self, num_classes, depth=10, widen_factor=1, drop_rate=0.0):
        super().__init__()
        channels = [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        n = (depth - 4) // 6
        self.conv1 = nn.Conv2d(3, channels[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.block1 = self._layer(n, channels[0], channels[1], 1, drop_rate, True)
        self.block2 = self._layer(n, channels[1], channels[2], 2, drop_rate)
        self.block3 = self._layer(n, channels[2], channels[3], 2, drop_rate)
        self.bn1 = nn.BatchNorm2d(channels[3], momentum=BN_MOMENTUM)
        self.relu = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.fc = nn.Linear(channels[3], num_classes)
        self.channels = channels[3]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="leaky_relu")
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                m.bias.data.zero_()

    @staticmethod
    def _layer(nb_layers, in_planes, out_planes, stride, drop_rate, activate_before_residual=False):
        return nn.Sequential(*[BasicBlock(i == 0 and in_planes or out_planes, out_planes,
                                          i == 0 and stride or 1, drop_rate,
                                          activate_before_residual)
                               for i in range(int(nb_layers))])

    def forward(self, x):
        out = self.block3(self.block2(self.block1(self.conv1(x))))
        out = self.relu(self.bn1(out))
        out = F.adaptive_avg_pool2d(out, 1).view(-1, self.channels)
        return self.fc(out)


class ModelEMA:
    def __init__(self, model, decay):
        self.ema = deepcopy(model)
        self.ema.eval()
        self.decay = decay
        self.param_keys = [k for k, _ in self.ema.named_parameters()]
        self.buffer_keys = [k for k, _ in self.ema.named_buffers()]
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            msd, esd = model.state_dict(), self.ema.state_dict()
            for k in self.param_keys:
                esd[k].copy_(esd[k] * self.decay + (1. - self.decay) * msd[k].detach())
            for k in self.buffer_keys:
                esd[k].copy_(msd[k])


def crop(x, gen, padding=1):
    n, _, h, w = x.shape
    padded = F.pad(x, (padding,) * 4, mode="reflect")
    offs = torch.randint(0, 2 * padding + 1, (n, 2), generator=gen)
    return torch.stack([padded[i, :, int(offs[i, 0]):int(offs[i, 0]) + h,
                               int(offs[i, 1]):int(offs[i, 1]) + w] for i in range(n)])


def strong(x, gen):
    x = crop(x, gen) + 0.3 * torch.randn(x.shape, generator=gen)
    n, _, h, w = x.shape
    pos = torch.randint(0, h - 2, (n, 2), generator=gen)
    x = x.clone()
    for i in range(n):
        y0, x0 = int(pos[i, 0]), int(pos[i, 1])
        x[i, :, y0:y0 + 3, x0:x0 + 3] = 0.0
    return x


def run(run_dir: str, seed: int = 0, bug: str | None = None, total_steps: int = 300) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed, channels=3)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    mean = x_train.mean(dim=(0, 2, 3), keepdim=True)
    std = x_train.std(dim=(0, 2, 3), keepdim=True)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    labeled = torch.cat([torch.nonzero(y_train == c).flatten()[:25] for c in range(10)])
    x_lab, y_lab = x_train[labeled], y_train[labeled]
    lr, wdecay, batch_size, mu, T, threshold, lambda_u = 0.03, 5e-4, 16, 3, 1.0, 0.95, 1.0
    eval_step, warmup = 50, 0
    model = WideResNet(num_classes=10)
    no_decay = ["bias", "bn"]
    grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": wdecay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0}]
    optimizer = optim.SGD(grouped_parameters, lr=lr, momentum=0.9, nesterov=True)
    epochs = math.ceil(total_steps / eval_step)
    scheduler = get_cosine_schedule_with_warmup(
        optimizer, warmup, epochs if bug == "sched-epochs" else total_steps)
    ema_model = ModelEMA(model, 0.99)
    config = {"lr": lr, "wdecay": wdecay, "batch_size": batch_size, "mu": mu,
              "threshold": threshold, "lambda_u": lambda_u, "total_steps": total_steps,
              "eval_step": eval_step, "ema_decay": 0.99}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=nn.CrossEntropyLoss(), config=config) as rec:
        model.train()
        lab_order, unl_order = torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
        for step in range(total_steps):
            if len(lab_order) < batch_size:
                lab_order = torch.randperm(len(y_lab), generator=gen)
            if len(unl_order) < batch_size * mu:
                unl_order = torch.randperm(len(x_train), generator=gen)
            li, lab_order = lab_order[:batch_size], lab_order[batch_size:]
            ui, unl_order = unl_order[:batch_size * mu], unl_order[batch_size * mu:]
            inputs_x, targets_x = crop(x_lab[li], gen), y_lab[li]
            inputs_u_w, inputs_u_s = crop(x_train[ui], gen), strong(x_train[ui], gen)
            inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * mu + 1)
            logits = de_interleave(model(inputs), 2 * mu + 1)
            logits_x = logits[:batch_size]
            logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
            del logits
            Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
            pseudo_label = torch.softmax(logits_u_w.detach() / T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(threshold).float()
            Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
            loss = Lx + lambda_u * Lu
            loss.backward()
            optimizer.step()
            scheduler.step()
            ema_model.update(model)
            model.zero_grad()
            rec.step(loss=loss, inputs=inputs_x, targets=targets_x, outputs=logits_x,
                     metrics={"loss_x": Lx, "loss_u": Lu, "mask": mask.mean()})
            if (step + 1) % eval_step == 0:
                test_model = ema_model.ema
                test_model.eval()
                with torch.no_grad():
                    outputs = test_model(x_test)
                    test_loss = F.cross_entropy(outputs, y_test).item()
                    acc = (outputs.argmax(1) == y_test).float().mean().item()
                rec.log("val", metrics={"loss": test_loss, "acc": acc}, inputs=x_test,
                        targets=y_test, outputs=outputs)
                model.train()
