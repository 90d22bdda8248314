"""davidtvs/pytorch-lr-finder examples/lrfinder_mnist.ipynb, shrunk: its Net (two 5x5
convolutions, Dropout2d, fc 320-50-10, F.dropout, log_softmax), NLLLoss, SGD(momentum=0.5),
batch 256, Normalize((0.1307,), (0.3081,)); then the training the range test is run for, with
the learning rate read off the range test's plot (0.05, on the descending part of the curve
between the notebook's start_lr 0.02 and where the loss turns up), 12 epochs, model.train() /
model.eval() around a validation pass each epoch. Data: scikit-learn's 8x8 digits upsampled
to 28x28 (so fc1 keeps its 320 inputs), 300 held out.

`bug` (None: the learning rate read as the README says):
- "lr-at-divergence": the learning rate set to 1.5, the end of the notebook's second range test,
  where the loss already blows up;
- "raw-pixels": the transform skips ToTensor()'s division by 255, so Normalize((0.1307,),
  (0.3081,)) is applied to 0-255 pixels;
- "wd-0.5": SGD(..., weight_decay=0.5) added to the optimizer.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _p_data import digits

SOURCE = ("https://github.com/davidtvs/pytorch-lr-finder/blob/"
          "76df3050c5554d698cb618e792957873bc878b30/examples/lrfinder_mnist.ipynb")
BUGS = (None, "lr-at-divergence", "raw-pixels", "wd-0.5")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def _prep(images, raw=False):
    x = F.interpolate(images.float() / (1.0 if raw else 255.0), size=(28, 28), mode="bilinear",
                      align_corners=False)
    return (x - 0.1307) / 0.3081


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    x_tr, x_va = _prep(x_tr, bug == "raw-pixels"), _prep(x_va, bug == "raw-pixels")
    lr = 1.5 if bug == "lr-at-divergence" else 0.05
    model = Net()
    criterion = nn.NLLLoss()
    weight_decay = 0.5 if bug == "wd-0.5" else 0.0
    optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.5, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "momentum": 0.5, "batch_size": 256,
                                   "weight_decay": weight_decay}) as rec:
        for epoch in range(epochs):
            model.train()
            for idx in torch.randperm(len(x_tr), generator=gen).split(256):
                inputs, labels = x_tr[idx], y_tr[idx]
                optimizer.zero_grad()
                outputs = model(inputs)
                loss = criterion(outputs, labels)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=inputs, targets=labels, outputs=outputs)
            model.eval()
            with torch.no_grad():
                outputs = model(x_va)
                vloss = criterion(outputs, y_va).item()
                acc = (outputs.argmax(1) == y_va).float().mean().item()
            rec.log("val", metrics={"loss": vloss, "acc": acc}, inputs=x_va, targets=y_va,
                    outputs=outputs)
    print(f"    lrfinder bug={bug}: val acc {acc:.3f} loss {vloss:.3f}")
