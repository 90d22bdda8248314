"""pytorch/examples mnist/main.py, shrunk: its Net (two convolutions, dropout, two linear
layers, log_softmax), F.nll_loss, Adadelta(lr=1.0) and StepLR(gamma=0.7) stepped once per epoch,
train() calling model.train() and test() calling model.eval(). The data is scikit-learn's 8x8
digits as uint8 images, transformed as the script's ToTensor() + Normalize((0.1307,), (0.3081,)),
so fc1 takes 64 * 2 * 2 features instead of 9216.

`bug` plants one fault (None: the script as published):
- "nll-on-logits": forward returns the raw scores, nll_loss reads them as log-probabilities;
- "raw-pixels": the training batches skip ToTensor()'s division, pixels go in as 0-255;
- "val-unnormalized": the test transform lacks Normalize(), so validation sees 0-1 pixels;
- "no-zero-grad": optimizer.zero_grad() left out of the batch loop;
- "sched-per-batch": scheduler.step() inside the batch loop (StepLR meant per epoch);
- "train-once": model.train() called once before the epochs, so after the first test()
  every epoch trains in eval mode;
- "no-eval": test() evaluates without model.eval() (dropout active);
- "shuffled-labels": the training labels shuffled apart from their images;
- "augment": healthy, with a train-only random shift of up to one pixel.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

import tracelab
from _a_data import batches, digits, normalize, to_tensor

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "mnist/main.py")
BUGS = (None, "nll-on-logits", "raw-pixels", "val-unnormalized", "no-zero-grad",
        "sched-per-batch", "train-once", "no-eval", "shuffled-labels", "augment")


class Net(nn.Module):
    def __init__(self, log_softmax: bool = True):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(64 * 2 * 2, 128)
        self.fc2 = nn.Linear(128, 10)
        self.log_softmax = log_softmax

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1) if self.log_softmax else x


def _shift(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """RandomAffine(translate=...) stand-in: each image rolled by up to one pixel."""
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=generator))
    return torch.roll(x, shifts=(dx, dy), dims=(2, 3))


def train(model, rec, images, labels, optimizer, scheduler, gen, bug, set_train=True):
    if set_train:
        model.train()
    for idx in batches(len(images), 64, gen):
        data = to_tensor(images[idx]) * 255.0 if bug == "raw-pixels" else normalize(images[idx])
        if bug == "augment":
            data = _shift(data, gen)
        target = labels[idx]
        if bug != "no-zero-grad":
            optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if bug == "sched-per-batch":
            scheduler.step()
        rec.step(loss=loss, inputs=data, targets=target, outputs=output)


def test(model, rec, images, labels, bug):
    if bug != "no-eval":
        model.eval()
    data = to_tensor(images) if bug == "val-unnormalized" else normalize(images)
    if bug == "raw-pixels":
        data = to_tensor(images) * 255.0
    with torch.no_grad():
        output = model(data)
        test_loss = F.nll_loss(output, labels, reduction="sum").item() / len(labels)
        correct = output.argmax(dim=1).eq(labels).sum().item()
    rec.log("val", metrics={"loss": test_loss, "acc": correct / len(labels)}, inputs=data,
            targets=labels, outputs=output)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    if bug == "shuffled-labels":
        y_train = y_train[torch.randperm(len(y_train), generator=gen)]
    model = Net(log_softmax=bug != "nll-on-logits")
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=nn.NLLLoss(), config={"lr": 1.0, "gamma": 0.7,
                                                         "batch_size": 64}) as rec:
        if bug == "train-once":
            model.train()
        for _ in range(epochs):
            train(model, rec, x_train, y_train, optimizer, scheduler, gen, bug,
                  set_train=bug != "train-once")
            test(model, rec, x_val, y_val, bug)
            if bug != "sched-per-batch":
                scheduler.step()
