"""facebookresearch/mixup-cifar10 train.py with models/resnet.py, shrunk: a ResNet of
BasicBlocks (conv3x3 + BatchNorm2d, shortcut convs), mixup_data (lam ~ Beta(alpha, alpha),
alpha 1, a random permutation of the batch) and mixup_criterion (lam * CE(pred, y_a) + (1 - lam)
* CE(pred, y_b)) on every training batch, CrossEntropyLoss, SGD(lr=0.1, momentum=0.9,
weight_decay=1e-4), batch 128, adjust_learning_rate dividing the lr by 10 at half and at three
quarters of the epochs (100 and 150 of 200), train() calling net.train() and test() net.eval().
Shrunk: CIFAR-10 replaced by scikit-learn's 8x8 digits with the gray channel repeated three
times, normalized by their own mean and std; the standard augmentation is RandomCrop(8,
padding=1) (the horizontal flip left out: digits are not mirror-symmetric); ResNet widths 16,
32, 64 with one block each instead of ResNet18's 64-512 with two; 8 epochs instead of 200 (lr
drops at epochs 4 and 6).

`bug` plants one fault (None: the script as published):
- "wd-times-batch": SGD's weight_decay set to 5e-4 * batch_size (a summed-loss script's
  weight decay copied into this mean-loss one), 0.064 instead of 1e-4.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _q_data import batches, digits, to_tensor

SOURCE = ("https://github.com/facebookresearch/mixup-cifar10/blob/"
          "eaff31ab397a90fbc0a4aac71fb5311144b3608b/train.py")
BUGS = (None, "wd-times-batch")


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride,
                          bias=False),
                nn.BatchNorm2d(self.expansion * planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, widths=(16, 32, 64), num_classes=10):
        super().__init__()
        self.in_planes = widths[0]
        self.conv1 = conv3x3(3, widths[0])
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.layer1 = self._make_layer(block, widths[0], num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, widths[1], num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, widths[2], num_blocks[2], stride=2)
        self.linear = nn.Linear(widths[2] * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.avg_pool2d(out, out.size(-1))
        return self.linear(out.view(out.size(0), -1))


def mixup_data(x, y, alpha=1.0):
    lam = np.random.beta(alpha, alpha) if alpha > 0 else 1
    index = torch.randperm(x.size()[0])
    mixed_x = lam * x + (1 - lam) * x[index, :]
    return mixed_x, y, y[index], lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def random_crop(x, gen, padding=1):
    """RandomCrop(size, padding): one random offset per image."""
    n, _, h, w = x.shape
    padded = F.pad(x, (padding,) * 4)
    out = torch.empty_like(x)
    offs = torch.randint(0, 2 * padding + 1, (n, 2), generator=gen)
    for i in range(n):
        dy, dx = int(offs[i, 0]), int(offs[i, 1])
        out[i] = padded[i, :, dy:dy + h, dx:dx + w]
    return out


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed, channels=3)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    mean = x_train.mean(dim=(0, 2, 3), keepdim=True)
    std = x_train.std(dim=(0, 2, 3), keepdim=True)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    base_lr, batch_size, decay, alpha = 0.1, 128, 1e-4, 1.0
    if bug == "wd-times-batch":
        decay = 5e-4 * batch_size
    net = ResNet(BasicBlock, [1, 1, 1])
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=base_lr, momentum=0.9, weight_decay=decay)

    def adjust_learning_rate(epoch):
        lr = base_lr
        if epoch >= epochs // 2:
            lr /= 10
        if epoch >= epochs * 3 // 4:
            lr /= 10
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr

    config = {"lr": base_lr, "batch_size": batch_size, "decay": decay, "alpha": alpha,
              "epoch": epochs}
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=criterion,
                           config=config) as rec:
        for epoch in range(epochs):
            net.train()
            for idx in batches(len(x_train), batch_size, gen):
                inputs = random_crop(x_train[idx], gen)
                targets = y_train[idx]
                inputs, targets_a, targets_b, lam = mixup_data(inputs, targets, alpha)
                outputs = net(inputs)
                loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=inputs, targets=targets_a, outputs=outputs,
                         metrics={"lam": lam})
            net.eval()
            test_loss, correct = 0.0, 0
            with torch.no_grad():
                for start in range(0, len(x_test), 100):
                    inputs, targets = x_test[start:start + 100], y_test[start:start + 100]
                    outputs = net(inputs)
                    test_loss += criterion(outputs, targets).item() * len(targets)
                    correct += (outputs.argmax(1) == targets).sum().item()
            rec.log("val", metrics={"loss": test_loss / len(x_test),
                                    "acc": correct / len(x_test)},
                    inputs=inputs, targets=targets, outputs=outputs)
            adjust_learning_rate(epoch)
