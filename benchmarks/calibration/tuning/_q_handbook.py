"""zergtant/pytorch-handbook chapter3/3.3-rnn.ipynb, shrunk only in length: an nn.RNN(input_size=1,
hidden_size=64, num_layers=1, batch_first=True) with a Linear(64, 1) applied at every time step
learns to map sin(t) to cos(t) over consecutive windows of pi (TIME_STEP 10 points each, batch
1); the hidden state is carried from window to window and cut from its graph (h_state =
h_state.data); MSELoss; Adam with its default lr; 300 steps as published. The Recorder gets
each step; every 20 steps (where the notebook plots) the loss on a held-out window later in
time is logged as validation.

`bug` plants one fault (None: the notebook as published):
- "no-batch-first": the RNN built without batch_first=True while the windows stay shaped
  (batch, time_step, input_size), so it reads each window's 10 points as 10 sequences of one
  step.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

import tracelab

SOURCE = ("https://github.com/zergtant/pytorch-handbook/blob/"
          "e9a149200971933395c54e516e0e0fbeb62d384a/chapter3/3.3-rnn.ipynb")
BUGS = (None, "no-batch-first")
TIME_STEP, INPUT_SIZE, H_SIZE, EPOCHS = 10, 1, 64, 300


class RNN(nn.Module):
    def __init__(self, batch_first=True):
        super().__init__()
        self.rnn = nn.RNN(input_size=INPUT_SIZE, hidden_size=H_SIZE, num_layers=1,
                          batch_first=batch_first)
        self.out = nn.Linear(H_SIZE, 1)

    def forward(self, x, h_state):
        r_out, h_state = self.rnn(x, h_state)
        outs = []
        for time_step in range(r_out.size(1)):
            outs.append(self.out(r_out[:, time_step, :]))
        return torch.stack(outs, dim=1), h_state


def window(step):
    start, end = step * np.pi, (step + 1) * np.pi
    steps = np.linspace(start, end, TIME_STEP, dtype=np.float32)
    x = torch.from_numpy(np.sin(steps)[np.newaxis, :, np.newaxis])
    y = torch.from_numpy(np.cos(steps)[np.newaxis, :, np.newaxis])
    return x, y


def run(run_dir: str, seed: int = 0, bug: str | None = None) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rnn = RNN(batch_first=bug != "no-batch-first")
    optimizer = torch.optim.Adam(rnn.parameters())
    criterion = nn.MSELoss()
    h_state = None
    with tracelab.Recorder(run_dir, model=rnn, optimizer=optimizer, loss_fn=criterion,
                           config={"TIME_STEP": TIME_STEP, "H_SIZE": H_SIZE,
                                   "EPOCHS": EPOCHS}) as rec:
        rnn.train()
        for step in range(EPOCHS):
            x, y = window(step)
            prediction, h_state = rnn(x, h_state)
            h_state = h_state.data
            loss = criterion(prediction, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=x, targets=y, outputs=prediction)
            if (step + 1) % 20 == 0:
                rnn.eval()
                with torch.no_grad():
                    h, val_loss = h_state, 0.0
                    for k in range(4):
                        vx, vy = window(EPOCHS + 50 + k)
                        vp, h = rnn(vx, h)
                        val_loss += criterion(vp, vy).item() / 4
                rec.log("val", metrics={"loss": val_loss}, inputs=vx, targets=vy, outputs=vp)
                rnn.train()
