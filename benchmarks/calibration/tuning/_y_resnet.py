"""akamaster/pytorch_resnet_cifar10 trainer.py with resnet.py, shrunk: resnet20 (BasicBlocks with
BatchNorm, option-A padded shortcuts, kaiming_normal_ init), nn.CrossEntropyLoss(),
torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=1e-4), MultiStepLR stepped once per epoch with
its milestones at the same fractions of training as [100, 150] of 200 epochs, model.train() in
train() and model.eval() in validate(), batch 128. CIFAR-10 is replaced by scikit-learn's 8x8
digits as 3-channel 8x8 images, transformed as the script does (ToTensor() then
Normalize(ImageNet mean, std)), with RandomCrop(8, padding=1) for training (the horizontal flip
left out: it does not preserve digits); 6 epochs.

`bug` plants one fault (None: the script as published):
- "sched-per-batch": lr_scheduler.step() inside the batch loop (milestones meant in epochs);
- "wd-1e-1": weight_decay=0.1;
- "train-once": model.train() called once before the epochs instead of at the top of train(),
  so after the first validate() (model.eval()) every epoch trains in eval mode.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init

import tracelab
from _y_data import batches, digits, to_tensor

SOURCE = ("https://github.com/akamaster/pytorch_resnet_cifar10/blob/"
          "d5489e8995e81e91ce6b1d69dcc98ad579b0b153/trainer.py")
BUGS = (None, "sched-per-batch", "wd-1e-1", "train-once")
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def _weights_init(m):
    if isinstance(m, nn.Linear) or isinstance(m, nn.Conv2d):
        init.kaiming_normal_(m.weight)


class LambdaLayer(nn.Module):
    def __init__(self, lambd):
        super().__init__()
        self.lambd = lambd

    def forward(self, x):
        return self.lambd(x)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1,
                               bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = LambdaLayer(lambda x: F.pad(
                x[:, :, ::2, ::2], (0, 0, 0, 0, planes // 4, planes // 4), "constant", 0))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super().__init__()
        self.in_planes = 16
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._make_layer(block, 16, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 32, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 64, num_blocks[2], stride=2)
        self.linear = nn.Linear(64, num_classes)
        self.apply(_weights_init)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.avg_pool2d(out, out.size()[3])
        return self.linear(out.view(out.size(0), -1))


def resnet20():
    return ResNet(BasicBlock, [3, 3, 3])


def transform(images, bug, gen=None):
    x = to_tensor(images)
    if gen is not None:  # RandomCrop(8, padding=1)
        x = F.pad(x, (1, 1, 1, 1))
        i, j = (int(v) for v in torch.randint(0, 3, (2,), generator=gen))
        x = x[:, :, i:i + 8, j:j + 8]
    return (x - MEAN) / STD


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed, channels=3)
    model = resnet20()
    criterion = nn.CrossEntropyLoss()
    wd = 0.1 if bug == "wd-1e-1" else 1e-4
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=wd)
    milestones = [epochs // 2, epochs * 3 // 4]
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=lr_scheduler,
                           loss_fn=criterion,
                           config={"lr": 0.1, "momentum": 0.9, "weight_decay": wd,
                                   "batch_size": 128, "milestones": milestones}) as rec:
        if bug == "train-once":
            model.train()
        for _ in range(epochs):
            if bug != "train-once":
                model.train()
            for idx in batches(len(x_train), 128, gen):
                input_var = transform(x_train[idx], bug, gen)
                target_var = y_train[idx]
                output = model(input_var)
                loss = criterion(output, target_var)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if bug == "sched-per-batch":
                    lr_scheduler.step()
                rec.step(loss=loss, inputs=input_var, targets=target_var, outputs=output)
            if bug != "sched-per-batch":
                lr_scheduler.step()
            model.eval()
            with torch.no_grad():
                xv = transform(x_val, bug)
                output = model(xv)
                val_loss = criterion(output, y_val).item()
                prec1 = output.argmax(1).eq(y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "acc": prec1}, inputs=xv, targets=y_val,
                    outputs=output)
