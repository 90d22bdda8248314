"""pytorch/examples mnist_rnn/main.py, shrunk: an LSTM(batch_first=True) reading an image row by
row, BatchNorm1d on its last output, Dropout2d, two linear layers, log_softmax and nll_loss,
Adadelta(lr=0.1) and StepLR(gamma=0.7) per epoch. The data is scikit-learn's 8x8 digits
(rows of 8 pixels instead of 28), normalized as the script's transform; an epoch is four
passes over them, 480 steps in all.

`bug` plants one fault (None: the script as published):
- "seq-first": the LSTM built without batch_first=True while the batches stay (batch, rows,
  pixels): it runs along the batch, and output[:, -1] takes the last image of each "step";
- "batch-4": the DataLoader's batch_size 4 instead of 64 (BatchNorm1d on 4 rows; a last
  batch of one row dropped, as drop_last=True would); the run stops after as many steps as
  the healthy one takes.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

import tracelab
from _a_data import batches, digits, normalize

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "mnist_rnn/main.py")
BUGS = (None, "seq-first", "batch-4")
PASSES = 4  # the digits passed 4 times per epoch: the StepLR decays per epoch of MNIST's size


class Net(nn.Module):
    def __init__(self, batch_first: bool = True):
        super().__init__()
        self.rnn = nn.LSTM(input_size=8, hidden_size=64, batch_first=batch_first)
        self.batchnorm = nn.BatchNorm1d(64)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, input):
        input = input.reshape(-1, 8, 8)
        output, hidden = self.rnn(input)
        output = output[:, -1, :]
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = F.relu(self.fc1(output))
        output = self.dropout2(output)
        return F.log_softmax(self.fc2(output), dim=1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 480) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    x_val = normalize(x_val)
    batch_size = 4 if bug == "batch-4" else 64
    model = Net(batch_first=bug != "seq-first")
    optimizer = optim.Adadelta(model.parameters(), lr=0.1)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=nn.NLLLoss(), config={"lr": 0.1, "batch_size": batch_size}
                           ) as rec:
        done = 0
        while done < steps:
            model.train()
            epoch = [i for _ in range(PASSES) for i in batches(len(x_train), batch_size, gen)]
            for idx in epoch:
                if len(idx) < 2:  # DataLoader(drop_last=True): BatchNorm1d refuses one row
                    continue
                data, target = normalize(x_train[idx]), y_train[idx]
                optimizer.zero_grad()
                output = model(data)
                loss = F.nll_loss(output, target)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=target, outputs=output)
                done += 1
                if done == steps:
                    break
            model.eval()
            with torch.no_grad():
                output = model(x_val)
                val_loss = F.nll_loss(output, y_val).item()
                acc = output.argmax(dim=1).eq(y_val).float().mean().item()
            rec.log("val", metrics={"loss": val_loss, "acc": acc}, inputs=x_val, targets=y_val,
                    outputs=output)
            scheduler.step()
