"""pytorch/examples time_sequence_prediction (train.py and generate_sine_wave.py), shrunk: two
LSTMCells and a Linear head called once per time step (and on for `future` steps), in double
precision, nn.MSELoss and LBFGS(lr=0.8) with a closure; the first 3 sine waves are the test
set, the others the training set. The waves are 50 steps long instead of 1000, 30 of them
instead of 100, LBFGS takes at most 4 evaluations per step, 30 steps instead of 15 x 20.

`bug` plants one fault (None: the script as published):
- "test-in-train": the training set built from every wave (data[:, :-1]), the 3 test waves
  included.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

import tracelab

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "time_sequence_prediction/train.py")
BUGS = (None, "test-in-train")
HIDDEN = 24


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def sine_waves(seed: int, n: int = 30, length: int = 50, period: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.empty((n, length), "int64")
    x[:] = np.arange(length) + rng.integers(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / 1.0 / period).astype("float64")


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps: int = 30) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    data = sine_waves(seed)
    first = 0 if bug == "test-in-train" else 3
    input = torch.from_numpy(data[first:, :-1])
    target = torch.from_numpy(data[first:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
    with tracelab.Recorder(run_dir, model=seq, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 0.8, "max_iter": 4}) as rec:
        for i in range(steps):
            def closure():
                optimizer.zero_grad()
                out = seq(input)
                loss = criterion(out, target)
                loss.backward()
                return loss
            loss = optimizer.step(closure)
            rec.step(loss=loss, inputs=input, targets=target)
            if i % 10 == 9 or i == steps - 1:
                with torch.no_grad():
                    future = 20
                    pred = seq(test_input, future=future)
                    test_loss = criterion(pred[:, :-future], test_target)
                rec.log("val", metrics={"loss": test_loss}, inputs=test_input,
                        targets=test_target, outputs=pred[:, :-future])
