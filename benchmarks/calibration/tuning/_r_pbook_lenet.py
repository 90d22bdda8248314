"""chenyuntc/pytorch-book Chapter2 (the CIFAR-10 LeNet of "a first neural network"), shrunk: its
Net (conv 3->6->16 with 5x5 kernels, max-pooling, fc 400-120-84-10), nn.CrossEntropyLoss,
optim.SGD(lr=0.001, momentum=0.9), batch_size=4, transforms ToTensor() + Normalize((0.5,) * 3,
(0.5,) * 3). The data is scikit-learn's digits upsampled to 32x32 and copied to three channels in
place of CIFAR-10; three epochs (the book runs two on 50,000 images), the test set scored after each.

`bug` plants one fault (None: the script as published):
- "softmax": forward() ends in F.softmax, and CrossEntropyLoss reads the probabilities as logits;
- "zero-grad-per-epoch": optimizer.zero_grad() called once per epoch, before the batch loop, so
  the gradients of every batch add up;
- "lr-0.1": SGD(lr=0.1, momentum=0.9), a hundred times the book's rate;
- "augment": healthy, with a train-only RandomCrop(32, padding=4).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _r_data import batches, digits

SOURCE = ("https://github.com/chenyuntc/pytorch-book/blob/403ba44c9a1ebfb7f5cfcfa84fda1c40b157f6e0/"
          "Chapter2/Chapter2.ipynb")
BUGS = (None, "softmax", "zero-grad-per-epoch", "lr-0.1", "augment")


class Net(nn.Module):
    def __init__(self, softmax: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)
        self.softmax = softmax

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(x.size()[0], -1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return F.softmax(x, dim=1) if self.softmax else x


def transform(images: torch.Tensor, bug) -> torch.Tensor:
    return (images.float() / 255.0 - 0.5) / 0.5


def random_crop(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    padded = F.pad(x, (4, 4, 4, 4))
    i, j = (int(v) for v in torch.randint(0, 9, (2,), generator=gen))
    return padded[:, :, i:i + 32, j:j + 32]


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 3) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed, n_val=300, size=32, channels=3)
    net = Net(softmax=bug == "softmax")
    criterion = nn.CrossEntropyLoss()
    lr = 0.1 if bug == "lr-0.1" else 0.001
    optimizer = optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "momentum": 0.9, "batch_size": 4}) as rec:
        for _ in range(epochs):
            net.train()
            if bug == "zero-grad-per-epoch":
                optimizer.zero_grad()
            for idx in batches(len(x_train), 4, gen):
                inputs, labels = transform(x_train[idx], bug), y_train[idx]
                if bug == "augment":
                    inputs = random_crop(inputs, gen)
                if bug != "zero-grad-per-epoch":
                    optimizer.zero_grad()
                outputs = net(inputs)
                loss = criterion(outputs, labels)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=inputs, targets=labels, outputs=outputs)
            net.eval()
            with torch.no_grad():
                images = transform(x_test, bug)
                outputs = net(images)
                test_loss = criterion(outputs, y_test).item()
                correct = (outputs.argmax(1) == y_test).sum().item()
            rec.log("val", metrics={"loss": test_loss, "acc": correct / len(y_test)},
                    inputs=images, targets=y_test, outputs=outputs)
